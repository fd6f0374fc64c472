"""Adversarial, black-box tests of what an allowlisted or confined job must not do.

Written from the promises alone (the README, docs/ and the tool descriptions), not from
the implementation, the way an agent trying to get out would probe them:

  A  MCP_EXEC_ALLOW      a listed program is resolved once, from the ABSOLUTE entries of
                         the server's PATH only (an empty, `.` or relative entry is skipped,
                         as Go's os/exec does), and exactly that file runs, with
                         MCP_EXEC_LAUNCHER or without; the `env` argument's PATH never
                         changes which file runs; a listed bare name allows `command` when it
                         resolves to the same file as $SHELL
  B  MCP_EXEC_SANDBOX    read-only / roots: outside its roots and its own $TMPDIR a job
                         changes nothing: not content, creation, names, links, and not mode,
                         owner, times, xattrs or inode flags either; inside, plain writes work
  C  confinement         a confined job touches no process but its own tree: no prlimit,
                         setpriority, sched_setaffinity, ioprio_set, signal, or /proc
                         environ/maps/auxv read of the server or of another job (over HTTP:
                         of another session's job); the server survives and keeps serving;
                         self-directed nice / ulimit / prlimit still work
  D  defaults            no settings: a job can still do all of the above (1.0)
  E  host objects        a sandboxed job reaches no abstract unix socket outside its sandbox
                         (network on too), no key of its user's keyring, no host POSIX
                         message queue, no io_uring, no terminal of the server by its name,
                         and (as nobody) no listing of the server's /proc/PID/fd
  F  --listen            (binary target) a listen name resolving off loopback needs a
                         token; a loopback server without a token setting makes one that
                         another local user cannot read; a foreign Host (DNS rebinding)
                         is 421; an unauthenticated connection flood never locks out a
                         client with the token
  G  HTTP reports        one session's terminal descriptors never reach another session's
                         job; a wait whose client leaves as its job ends either reached the
                         client or leaves the result for the next wait
  H  waiting_for_input   a job that polls, selects or waits in epoll on descriptors of its
                         own (another pipe, a listening socket, python3 -m http.server)
                         while its stdin is an open pipe is never reported waiting for
                         input and never yields a blocking execute (a false report makes
                         an agent type into a process that asked for nothing); the
                         control, the same wait with stdin in its set, is reported
  I  kill reach          a job's process that left its group and session with setsid, and
                         outlived the shell that started it, cannot dodge `kill`: a signal to
                         the job's group misses it (the control), the server's kill still ends
                         it, and says terminated only once it is gone
  J  spill              with MCP_EXEC_SPILL on, the bytes another job wrote past its window
                         (kept on disk) are out of a confined job's reach: not through the
                         server's /proc/PID/fd, and not by a name in the spill directory

Every attack is first run UNCONFINED against a fresh target of the same kind, where it
must visibly work (the control), so no test can pass because of a typo or a missing
tool; then confined, where it must fail and leave the target exactly as it was
(files: lstat incl. ctime, content, link targets, xattrs and flags, before and after;
processes: /proc/PID/limits, nice, affinity and I/O priority read from the test side).
A control that cannot work here (a tool or python3 missing in the image, a capability
the server's user lacks even unconfined, one CPU, no xattr support, a system call the
container runtime's seccomp profile refuses to everything in the container: podman's
default answers io_uring_setup with ENOSYS) skips with the reason; where it refuses
add_key but not keyctl, the keyring attack is spelt with keyctl alone.
A host object that belongs to a namespace (an abstract socket's network namespace, a
message queue's IPC namespace, a pty's devpts instance) is made in the server's, so
on the container target the attack is the one a job in that container could make.

Each class runs with the server as root and as nobody (65534): for binary and pid1 the
server is started through `setpriv --reuid=65534 --regid=65534 --clear-groups --`, in
the container with `podman run --user 65534:65534`; nobody's directories are made by
the test with the right owners.  Host directories reach the container by a bind mount
of the module's base directory at the same path; tests needing python3 use the toolbox
image there (MCP_EXEC_TOOLBOX_IMAGE) when the default image has none.  Perl (in every
Debian image) gives the fd-based and raw-syscall spellings everywhere.

Servers are pooled per (user, mode, image) and replaced whenever a test left one
damaged (dead, stopped, or with different limits, nice, affinity or I/O priority than
at its start), so a promise that does not hold yet fails its own test only.
"""

import ctypes
import fcntl
import http.client
import json
import os
import platform
import re
import shutil
import select
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from tests.helpers import (IS_ROOT, PODMAN, SLACK, TARGET, Server, await_no_token_processes, process_env, read_file,
                      server_binary, token_processes, wait_until)

SH = "/bin/sh"
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOBODY = 65534
SETPRIV = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--"]
USERS = ["root", "nobody"]
MODES = ["read-only", "roots"]
IMAGE = os.environ.get("MCP_EXEC_IMAGE")
TOOLBOX = os.environ.get("MCP_EXEC_TOOLBOX_IMAGE")
TOOLS = ("python3", "perl", "prlimit", "renice", "taskset", "ionice", "chattr", "setfattr", "nice")
JOB_TIMEOUT = 60 + SLACK

T2000 = 946684800 * 10 ** 9
T1990 = 631152000 * 10 ** 9

LONG = struct.calcsize("l")
FS_IOC_GETFLAGS = 0x80006601 | (LONG << 16)
FS_IOC_SETFLAGS = 0x40006602 | (LONG << 16)
FL_IMMUTABLE, FL_APPEND, FL_NODUMP = 0x10, 0x20, 0x40

# System call numbers for the raw (perl syscall) spellings; the server runs on this
# machine's architecture in every target.
NR = {
    "x86_64": {"fsetxattr": 190, "removexattr": 197, "sched_setaffinity": 203, "ioprio_set": 251,
               "ioprio_get": 252, "prlimit64": 302},
    "aarch64": {"fsetxattr": 7, "removexattr": 14, "sched_setaffinity": 122, "ioprio_set": 30,
                "ioprio_get": 31, "prlimit64": 261},
}.get(platform.machine())

CAP_NAMES = {0: "CAP_CHOWN", 9: "CAP_LINUX_IMMUTABLE"}


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------

def uid_of(user):
    return 0 if user == "root" else NOBODY


def need_user(user):
    if not IS_ROOT:
        pytest.skip("runs the server as %s: the suite must run as root (setpriv, chown)" % user)


def image_for(needs):
    """The image a container-target server for these needs runs (None elsewhere)."""
    if TARGET != "container":
        return None
    if "python3" in needs and TOOLBOX:
        return TOOLBOX
    return IMAGE


def fill(template, **kw):
    """template with each {{name}} replaced (perl and python code keep their braces)."""
    for k, v in kw.items():
        template = template.replace("{{%s}}" % k, str(v))
    assert "{{" not in template, "unfilled placeholder in %r" % template
    return template


def py(code, *args):
    assert "'" not in code, code
    return "python3 -c '%s' %s" % (code, " ".join(args))


def pl(code, *args):
    assert "'" not in code, code
    return "perl -e '%s' %s" % (code, " ".join(args))


def stat_fields(hpid):
    raw = read_file("/proc/%d/stat" % hpid, "r")
    if raw is None:
        return None
    return raw[raw.rindex(")") + 2:].split()  # rest[0] is field 3 (state)


def ns_pid(hpid):
    """The pid of host process hpid in its own (innermost) pid namespace."""
    status = read_file("/proc/%d/status" % hpid, "r") or ""
    m = re.search(r"^NSpid:\s*(.*)$", status, re.M)
    assert m, "no NSpid for %d" % hpid
    return int(m.group(1).split()[-1])


_libc = ctypes.CDLL(None, use_errno=True)


def ioprio_of(hpid):
    if NR is None:
        return None
    return _libc.syscall(NR["ioprio_get"], 1, hpid)  # IOPRIO_WHO_PROCESS


def host_state(hpid):
    """What a job could change about process hpid, read from the test side; None
    when it is gone."""
    rest = stat_fields(hpid)
    limits = read_file("/proc/%d/limits" % hpid, "r")
    if rest is None or limits is None:
        return None
    try:
        affinity = sorted(os.sched_getaffinity(hpid))
    except OSError:
        return None
    return {"state": rest[0], "nice": int(rest[16]), "limits": limits, "affinity": affinity,
            "ioprio": ioprio_of(hpid)}


WATCHED = ("nice", "limits", "affinity", "ioprio")


def state_diff(before, after, keys=WATCHED):
    if after is None:
        return "the process is gone"
    if after["state"] in ("T", "t", "Z", "X"):
        return "the process is in state %s" % after["state"]
    diffs = ["%s: %r -> %r" % (k, before[k], after[k]) for k in keys if before[k] != after[k]]
    return "; ".join(diffs) or None


def cpu_seconds(hpid):
    rest = stat_fields(hpid)
    return (int(rest[11]) + int(rest[12])) / float(os.sysconf("SC_CLK_TCK")) if rest else None


def status_field(text, name, base=10):
    """A number from /proc/PID/status text."""
    m = re.search(r"^%s:\s*(\S+)" % name, text, re.M)
    assert m, "no %s in %r" % (name, text[:300])
    return int(m.group(1), base)


def cap_eff(hpid):
    return status_field(read_file("/proc/%d/status" % hpid, "r") or "", "CapEff", 16)


def get_flags(path):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0))
        return struct.unpack("l", buf)[0]
    finally:
        os.close(fd)


def set_flags(path, flags):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("l", flags))
    finally:
        os.close(fd)


def unfreeze(top):
    """Clear immutable/append-only flags a successful attack may have left, so the
    tree can be removed."""
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            try:
                st = os.lstat(name)
                if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                    fl = get_flags(name)
                    if fl & (FL_IMMUTABLE | FL_APPEND):
                        set_flags(name, fl & ~(FL_IMMUTABLE | FL_APPEND))
            except OSError:
                pass


def snapshot(top):
    """{relative path: everything a job could change about it} under top, top included,
    symlinks not followed: type, mode, owner, size, mtime, ctime (which any metadata
    change moves), link count, inode, content or link target, xattrs and inode flags."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for p in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            st = os.lstat(p)
            info = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "size": st.st_size,
                    "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "nlink": st.st_nlink,
                    "ino": st.st_ino}
            if stat.S_ISLNK(st.st_mode):
                info["target"] = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    info["content"] = f.read()
            try:
                info["xattrs"] = {n: os.getxattr(p, n, follow_symlinks=False)
                                  for n in sorted(os.listxattr(p, follow_symlinks=False))}
            except OSError as e:
                info["xattrs"] = "error %d" % e.errno
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                try:
                    info["flags"] = get_flags(p)
                except OSError as e:
                    info["flags"] = "error %d" % e.errno
            seen[os.path.relpath(p, top)] = info
    return seen


def snapshot_diff(before, after):
    out = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            out.append("%s vanished" % name)
        elif name not in before:
            out.append("%s appeared" % name)
        else:
            for k in sorted(set(before[name]) | set(after[name])):
                if before[name].get(k) != after[name].get(k):
                    out.append("%s %s: %r -> %r" % (name, k, before[name].get(k), after[name].get(k)))
    return "; ".join(out)


class _PidOf(Server):
    """Only Server.host_pid, for a process this module launched itself."""

    def __init__(self, argv, proc):  # noqa: no Server.__init__: nothing is started
        self.argv = argv
        self.proc = proc


# --------------------------------------------------------------------------
# A job's outcome and a server of this module
# --------------------------------------------------------------------------

class Outcome:
    """What one execute call said: a refusal (tool error) or a job result."""

    def __init__(self, res):
        self.text = res["content"][0]["text"]
        self.refused = bool(res.get("isError"))
        self.r = None if self.refused else json.loads(self.text)
        r = self.r or {}
        self.state = "refused" if self.refused else r.get("state")
        self.exit_code = r.get("exit_code")
        self.out = (r.get("stdout") or {}).get("data", "")
        self.err = (r.get("stderr") or {}).get("data", "")
        self.start_error = r.get("start_error") or ""

    @property
    def ok(self):
        return self.state == "success"

    @property
    def said(self):
        return self.text if self.refused else self.out + self.err + self.start_error

    def __repr__(self):
        if self.refused:
            return "<refused: %s>" % self.text[:400]
        return "<%s exit=%s out=%r err=%r%s>" % (self.state, self.exit_code, self.out[-400:], self.err[-400:],
                                                 " start_error=%r" % self.start_error if self.start_error else "")


class Srv:
    """A stdio server launched by Lab.argv, with its host pid, its pid as its jobs see
    it, and its state at start (what a confined job must not change)."""

    def __init__(self, user, argv, env):
        self.user = user
        self.s = Server(env=env, argv=argv)
        self.hpid = self.s.host_pid(10 + SLACK)
        self.pid = ns_pid(self.hpid)
        self.baseline = wait_until(lambda: host_state(self.hpid), 5, "the server's /proc entries")

    def job(self, command=None, timeout=JOB_TIMEOUT, **kw):
        args = {"capture": "all"}
        if command is not None:
            args["command"] = command
        args.update(kw)
        return Outcome(self.s.tool_raw("execute", args, timeout))

    def alive(self):
        return self.s.proc.poll() is None and host_state(self.hpid) is not None

    def damage(self):
        """Why this server cannot be reused as it started, or None."""
        if self.s.proc.poll() is not None:
            return "exited with %s" % self.s.proc.returncode
        why = state_diff(self.baseline, host_state(self.hpid))
        if why:
            return why
        try:
            self.s.result("ping", timeout=10 + SLACK)
        except AssertionError as e:
            return "no ping: %s" % e
        return None

    def assert_serving(self, what):
        """The server is alive, answers, and still runs jobs."""
        assert self.alive(), "the server died after %s; stderr: %s" % (what, self.s.stderr_text[-2000:])
        st = host_state(self.hpid)
        assert st["state"] not in ("T", "t"), "the server is stopped after %s" % what
        self.s.result("ping", timeout=10 + SLACK)
        out = self.job("echo still-serving")
        assert out.ok and out.out == "still-serving\n", "after %s the server cannot run a job: %r" % (what, out)

    def shutdown(self):
        proc = self.s.proc
        if proc.poll() is None:
            st = host_state(self.hpid)
            if st and st["state"] in ("T", "t"):
                os.kill(self.hpid, signal.SIGCONT)
            self.s.close_stdin()
            try:
                proc.wait(10 + SLACK)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.hpid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    proc.wait(10 + SLACK)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


class Dirs:
    def __init__(self, home):
        self.home = home
        self.roots = os.path.join(home, "roots")
        self.outside = os.path.join(home, "outside")


class Lab:
    """The module's base directory (bind-mounted into containers at the same path),
    the servers, and what is known about each server's world."""

    def __init__(self):
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-attacks-", dir="/tmp"))
        os.chmod(self.base, 0o755)
        self.pool = {}
        self.http_pool = {}
        self.extra = []
        self.controls = {}
        self._tools = {}
        self._caps = {}
        self._homes = {}
        self._bins = {}
        self.xattrs = self._probe_xattrs()
        self.flags = self._probe_flags()

    # ---- the host side ---------------------------------------------------

    def _probe_xattrs(self):
        p = os.path.join(self.base, "xattr-probe")
        open(p, "w").close()
        try:
            os.setxattr(p, "user.probe", b"1")
            return True
        except OSError:
            return False
        finally:
            os.unlink(p)

    def _probe_flags(self):
        p = os.path.join(self.base, "flags-probe")
        open(p, "w").close()
        try:
            get_flags(p)
            return True
        except OSError:
            return False
        finally:
            os.unlink(p)

    def mkdir(self, path, user, mode=0o755):
        os.mkdir(path)
        os.chmod(path, mode)
        os.chown(path, uid_of(user), uid_of(user))
        return path

    def home(self, user):
        if user not in self._homes:
            d = Dirs(self.mkdir(os.path.join(self.base, user), user))
            self.mkdir(d.roots, user)
            self.mkdir(d.outside, user)
            self._homes[user] = d
        return self._homes[user]

    def binary(self, user):
        if user == "root":
            return server_binary()
        if user not in self._bins:
            # the build directory may be private (mkdtemp is 0700): a copy nobody can run
            d = os.path.join(self.base, "bin")
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            path = os.path.join(d, "mcp-exec")
            shutil.copy2(server_binary(), path)
            os.chmod(path, 0o755)
            self._bins[user] = path
        return self._bins[user]

    # ---- launching -------------------------------------------------------

    def argv(self, user, env, cwd=None, image=None, listen=None):
        """The command line of a server as `user` on this target; env reaches it through
        the process environment (binary, pid1) or -e (container)."""
        if TARGET == "container":
            argv = [PODMAN, "run", "--rm", "--name", "mcp-exec-attack-" + uuid.uuid4().hex[:12]]
            if not listen:
                argv.insert(2, "-i")
            if user == "nobody":
                argv += ["--user", "%d:%d" % (NOBODY, NOBODY)]
            argv += ["-v", "%s:%s" % (self.base, self.base)]
            if cwd:
                argv += ["-w", cwd]
            if listen:
                argv += ["--network=host"]
            for k, v in sorted(env.items()):
                if v is not None:
                    argv += ["-e", "%s=%s" % (k, v)]
            argv.append(image or IMAGE)
        else:
            argv = []
            if TARGET == "pid1":
                argv += ["unshare", "--pid", "--fork", "--mount-proc"]
            if user == "nobody":
                argv += SETPRIV
            argv += ["env", "-C", cwd or self.base, self.binary(user)]
        if listen:
            argv += ["--listen", listen]
        return argv

    @staticmethod
    def full_env(env):
        full = {"SHELL": SH, "PATH": STD_PATH}
        full.update(env)
        return full

    def start(self, user, env, cwd=None, image=None):
        """A server of the test's own (shut down with the module)."""
        env = self.full_env(env)
        srv = Srv(user, self.argv(user, env, cwd=cwd, image=image), env)
        self.extra.append(srv)
        return srv

    def mode_env(self, user, mode):
        if mode == "off":
            return {}
        if mode == "read-only":
            return {"MCP_EXEC_SANDBOX": "read-only"}
        assert mode == "roots", mode
        return {"MCP_EXEC_SANDBOX": "roots", "MCP_EXEC_ROOTS": self.home(user).roots}

    def server(self, user, mode, image=None):
        """The pooled server for (user, mode, image), replaced when a test damaged it."""
        key = (user, mode, image)
        srv = self.pool.get(key)
        if srv is not None and srv.damage():
            srv.shutdown()
            srv = None
        if srv is None:
            env = self.full_env(self.mode_env(user, mode))
            srv = Srv(user, self.argv(user, env, image=image), env)
            self.pool[key] = srv
        return srv

    # ---- what a server's world has -----------------------------------------

    def tools(self, user, image):
        key = (user, image)
        if key not in self._tools:
            out = self.server(user, "off", image).job(
                "for t in %s; do command -v $t >/dev/null 2>&1 && echo $t; done; true" % " ".join(TOOLS))
            assert out.ok, out
            self._tools[key] = set(out.out.split())
        return self._tools[key]

    def own_mount_ns(self, user, mode, image):
        """Whether a confined job gets a mount namespace of its own (its
        /proc/self/ns/mnt differs from the server's, read from the test side)."""
        key = ("mntns", user, mode, image)
        if key not in self._caps:
            srv = self.server(user, mode, image)
            out = srv.job("readlink /proc/self/ns/mnt")
            assert out.ok, out
            self._caps[key] = out.out.strip() != os.readlink("/proc/%d/ns/mnt" % srv.hpid)
        return self._caps[key]

    def caps(self, user, image):
        key = (user, image)
        if key not in self._caps:
            out = self.server(user, "off", image).job("cat /proc/self/status")
            assert out.ok, out
            self._caps[key] = status_field(out.out, "CapEff", 16)
        return self._caps[key]

    def require(self, user, image, needs):
        """Skip, saying why, when this world cannot run the attack even unconfined."""
        if TARGET == "container" and image is None:
            pytest.skip("MCP_EXEC_IMAGE is not set")
        have = self.tools(user, image)
        missing = [t for t in needs if t in TOOLS and t not in have]
        if missing:
            where = "image %s" % image if TARGET == "container" else "server's PATH"
            pytest.skip("the %s has no %s" % (where, ", ".join(missing)))
        if "xattr" in needs and not self.xattrs:
            pytest.skip("the file system under %s has no user xattrs" % self.base)
        if "flags" in needs and not self.flags:
            pytest.skip("the file system under %s has no inode flags (FS_IOC_GETFLAGS)" % self.base)
        if "nr" in needs and NR is None:
            pytest.skip("no system call numbers for %s" % platform.machine())
        for n in needs:
            if isinstance(n, int) and not self.caps(user, image) & (1 << n):
                pytest.skip("the server's user (%s) lacks %s here even unconfined: nothing for the "
                            "sandbox to take away" % (user, CAP_NAMES.get(n, n)))

    # ---- teardown ---------------------------------------------------------

    def close(self):
        for srv in list(self.pool.values()) + self.extra:
            try:
                srv.shutdown()
            except Exception:  # a broken server must not hide the others
                pass
        for h in self.http_pool.values():
            h.stop()
        unfreeze(self.base)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(mcp_bin):
    if TARGET == "container" and not IMAGE:
        pytest.skip("MCP_EXEC_TARGET=container needs MCP_EXEC_IMAGE")
    the_lab = Lab()
    yield the_lab
    the_lab.close()


# ==========================================================================
# A. The allowlist resolves the program from the server's absolute PATH
#    entries only, and exactly that file runs
# ==========================================================================

PLANTED = "mcpx-planted"  # a listed name that exists nowhere but where the attacker put it


class Plant:
    """D, a directory holding executable files named like listed programs (and like
    the launcher `env` and the shell `sh`), in D and in D/bin; each writes a marker
    into D/marks and prints PLANTED when it runs."""

    def __init__(self, lab, user, names=("ls", PLANTED, "env", "sh")):
        self.dir = lab.mkdir(os.path.join(lab.home(user).home, "plant-" + uuid.uuid4().hex[:10]), "root")
        self.marks = lab.mkdir(os.path.join(self.dir, "marks"), user, 0o777)
        lab.mkdir(os.path.join(self.dir, "bin"), "root")
        for sub in ("", "bin"):
            for name in names:
                path = os.path.join(self.dir, sub, name)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\necho PLANTED %s\n: > %s/%s-%s\n"
                            % (path, self.marks, sub or "top", name))
                os.chmod(path, 0o755)

    def ran(self):
        return sorted(os.listdir(self.marks))

    def assert_not_run(self, out, what):
        assert "PLANTED" not in out.said and not self.ran(), \
            "%s ran a planted file %s: %r" % (what, self.ran(), out)


def assert_real_or_refused(out, what):
    """`ls -d /` either ran the real ls or was refused; nothing else."""
    if out.ok:
        assert out.out == "/\n", "%s: not the real ls: %r" % (what, out)
    else:
        assert out.refused or out.start_error, "%s: started and failed: %r" % (what, out)


def assert_not_found(out, what):
    """A listed name that exists only where the attacker planted it: refused or a
    start error that says it was not found."""
    assert not out.ok, "%s ran: %r" % (what, out)
    text = out.said
    assert out.refused or out.start_error, "%s: started something: %r" % (what, out)
    assert re.search(r"not found|no such file", text, re.I), "%s: want a clear not-found, got %r" % (what, out)


LAUNCHERS = [pytest.param(None, id="no-launcher"), pytest.param('["env"]', id="launcher-env")]


def allowlist_server(lab, user, plant, path, launcher, allow="ls,%s" % PLANTED, shell=SH):
    env = {"MCP_EXEC_ALLOW": allow, "SHELL": shell, "PATH": path}
    if launcher:
        env["MCP_EXEC_LAUNCHER"] = launcher
    return lab.start(user, env, cwd=plant.dir, image=image_for(()))


def check_relative_entry(lab, user, path, launcher):
    need_user(user)
    plant = Plant(lab, user)
    srv = allowlist_server(lab, user, plant, path, launcher)
    what = "PATH=%s, server and job cwd %s, launcher %s" % (path, plant.dir, launcher)
    out = srv.job(argv=["ls", "-d", "/"], cwd=plant.dir)
    plant.assert_not_run(out, "argv ls (%s)" % what)
    assert_real_or_refused(out, "argv ls (%s)" % what)
    out = srv.job(argv=[PLANTED], cwd=plant.dir)
    plant.assert_not_run(out, "argv %s (%s)" % (PLANTED, what))
    assert_not_found(out, "argv %s (%s)" % (PLANTED, what))
    out = srv.job(argv=[PLANTED], cwd=plant.dir, nowait=True)
    if not out.refused and out.r.get("state") == "running":
        srv.s.collect(out.r["job_id"], timeout=30)
    plant.assert_not_run(out, "nowait argv %s (%s)" % (PLANTED, what))


# PATH entries that are not absolute: empty (leading or trailing) means the
# cwd, and "." and "bin" are relative to it; a planted program there must not
# run as the listed name.
RELATIVE_ENTRIES = {"empty": ":" + STD_PATH, "trailing_empty": STD_PATH + ":", "dot": ".:" + STD_PATH,
                    "relative": "bin:" + STD_PATH}


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("entry", sorted(RELATIVE_ENTRIES))
def test_allowlist_ignores_path_entry(lab, user, launcher, entry):
    check_relative_entry(lab, user, RELATIVE_ENTRIES[entry], launcher)


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("env_path", ["dir", ".", "bin", "dir-first"])
@pytest.mark.parametrize("user", USERS)
def test_allowlist_ignores_env_path_argument(lab, user, env_path, launcher):
    """The caller's `env` PATH never decides which file runs (not the program's, not
    the launcher's)."""
    need_user(user)
    plant = Plant(lab, user)
    srv = allowlist_server(lab, user, plant, STD_PATH, launcher)
    path = {"dir": plant.dir, ".": ".", "bin": "bin", "dir-first": plant.dir + ":" + STD_PATH}[env_path]
    what = "env PATH=%s, cwd %s, launcher %s" % (path, plant.dir, launcher)
    out = srv.job(argv=["ls", "-d", "/"], cwd=plant.dir, env={"PATH": path})
    plant.assert_not_run(out, "argv ls (%s)" % what)
    assert_real_or_refused(out, "argv ls (%s)" % what)
    out = srv.job(argv=[PLANTED], cwd=plant.dir, env={"PATH": path})
    plant.assert_not_run(out, "argv %s (%s)" % (PLANTED, what))
    assert_not_found(out, "argv %s (%s)" % (PLANTED, what))


@pytest.mark.parametrize("path_kind", ["empty", "dot"])
@pytest.mark.parametrize("user", USERS)
def test_allowlist_hands_the_launcher_an_absolute_path(lab, user, path_kind):
    """With a launcher, the program it receives is the absolute path of the file the
    policy resolved from an absolute PATH entry, never ./ls or a bare name."""
    need_user(user)
    plant = Plant(lab, user)
    show = 'printf "%s\\n" "$1"; exec "$@"'
    launcher = json.dumps(["/bin/sh", "-c", show, "launcher"])
    path = {"empty": ":", "dot": ".:"}[path_kind] + STD_PATH
    srv = allowlist_server(lab, user, plant, path, launcher)
    out = srv.job(argv=["ls", "-d", "/"], cwd=plant.dir)
    plant.assert_not_run(out, "argv ls under a launcher (PATH=%s)" % path)
    assert out.ok, out
    prog, rest = out.out.split("\n", 1)
    assert prog.startswith("/") and os.path.basename(prog) == "ls", \
        "the launcher got %r, not an absolute path to ls" % prog
    assert not prog.startswith(plant.dir + "/"), "the launcher got the planted file %r" % prog
    assert rest == "/\n", out


@pytest.mark.parametrize("user", USERS)
def test_allowlist_listed_bare_shell_name_allows_command(lab, user):
    """MCP_EXEC_ALLOW=git,grep,ls,sh and SHELL=/bin/sh: `sh` resolves to the same file
    as $SHELL, so `command` calls run."""
    need_user(user)
    srv = lab.start(user, {"MCP_EXEC_ALLOW": "git,grep,ls,sh", "SHELL": "/bin/sh"}, image=image_for(()))
    out = srv.job("echo via-command")
    assert out.ok and out.out == "via-command\n", out
    out = srv.job("echo via-nowait", nowait=True)
    assert not out.refused, out
    done = srv.s.collect(out.r["job_id"], timeout=30)
    assert done["state"] == "success", done


@pytest.mark.parametrize("user", USERS)
def test_allowlist_without_the_shell_still_refuses_command(lab, user):
    need_user(user)
    srv = lab.start(user, {"MCP_EXEC_ALLOW": "ls", "SHELL": "/bin/sh"}, image=image_for(()))
    m = os.path.join(lab.home(user).home, "must-not-exist-" + uuid.uuid4().hex[:8])
    out = srv.job("touch %s" % m)
    assert out.refused, "MCP_EXEC_ALLOW=ls let a command run: %r" % out
    out = srv.job("touch %s" % m, nowait=True)
    assert out.refused, "MCP_EXEC_ALLOW=ls let a nowait command run: %r" % out
    assert not os.path.exists(m)
    assert srv.job(argv=["ls", "-d", "/"]).out == "/\n"


@pytest.mark.parametrize("shell", ["sh", "/bin/sh"])
@pytest.mark.parametrize("user", USERS)
def test_allowlist_bare_shell_name_ignores_dot_path_entry(lab, user, shell):
    """MCP_EXEC_ALLOW=sh, PATH=.:..., a planted ./sh in the server's cwd: `sh` resolves
    from the absolute entries only, so a command runs the real shell or is refused."""
    need_user(user)
    plant = Plant(lab, user)
    srv = allowlist_server(lab, user, plant, ".:" + STD_PATH, None, allow="sh", shell=shell)
    out = srv.job("echo real-shell", cwd=plant.dir)
    plant.assert_not_run(out, "command with SHELL=%s" % shell)
    if shell == "/bin/sh":
        # the promise: a listed bare name allows the shell resolving to the same file
        assert out.ok and out.out == "real-shell\n", out
    else:
        assert out.refused or (out.ok and out.out == "real-shell\n"), out


# ==========================================================================
# B. A confined job changes nothing outside its roots and its $TMPDIR
# ==========================================================================

class Case:
    """A fresh corner outside every root, owned by the server's user:

    case/victim   "original\\n", 0644, times 2000-01-01, xattr user.keep=1
    case/ref      times 1990-01-01 (for touch -r)
    case/sub/     a directory, 0755
    case/link ->  victim
    """

    def __init__(self, lab, user):
        uid = uid_of(user)
        self.dir = os.path.join(lab.home(user).outside, uuid.uuid4().hex[:12])
        os.mkdir(self.dir)
        self.f = os.path.join(self.dir, "victim")
        self.ref = os.path.join(self.dir, "ref")
        self.sub = os.path.join(self.dir, "sub")
        self.link = os.path.join(self.dir, "link")
        with open(self.f, "w") as f:
            f.write("original\n")
        with open(self.ref, "w") as f:
            f.write("ref\n")
        os.mkdir(self.sub)
        os.symlink(self.f, self.link)
        for p in (self.dir, self.sub):
            os.chmod(p, 0o755)
        for p in (self.f, self.ref):
            os.chmod(p, 0o644)
        if lab.xattrs:
            os.setxattr(self.f, "user.keep", b"1")
        os.utime(self.ref, ns=(T1990, T1990))
        for p in (self.f, self.sub):
            os.utime(p, ns=(T2000, T2000))
        for p in (self.f, self.ref, self.sub, self.link, self.dir):
            os.lchown(p, uid, uid)

    def fields(self):
        return {"f": self.f, "d": self.dir, "sub": self.sub, "link": self.link, "ref": self.ref}


class FileAttack:
    def __init__(self, name, command, needs=()):
        self.name, self.command, self.needs = name, command, tuple(needs)
        # docs/policy-and-sandbox.md, the sandbox, "not covered": without a mount namespace of its own a job
        # may still set a file's times to *now* through a descriptor it holds
        self.documented_gap = name.endswith("_now_read_only_fd")

    def render(self, case):
        kw = case.fields()
        if NR:
            kw.update({"nr_" + k: v for k, v in NR.items()})
        return fill(self.command, **kw)


def fa(name, command, *needs):
    return pytest.param(FileAttack(name, command, needs), id=name)


DATE = "'2001-02-03 04:05:06'"
OPEN_RO = 'open(my $h, "<", $ARGV[0]) or die "open: $!";'

CONTENT = [
    fa("redirect", "echo pwned > {{f}}"),
    fa("append", "echo pwned >> {{f}}"),
    fa("truncate", "truncate -s 0 {{f}}"),
    fa("dd", "echo pwned | dd of={{f}} conv=notrunc status=none"),
    fa("via_symlink", "echo pwned > {{link}}"),
    fa("python_truncate", py('import os,sys; os.truncate(sys.argv[1], 0)', "{{f}}"), "python3"),
    fa("perl_read_write_open", pl('open(my $h, "+<", $ARGV[0]) or die "open: $!"; print $h "pwned" or die; '
                                  'close($h) or die "close: $!"', "{{f}}"), "perl"),
]
CREATION = [
    fa("touch_new", "touch {{d}}/new"),
    fa("mkdir", "mkdir {{d}}/newdir"),
    fa("mkfifo", "mkfifo {{d}}/fifo"),
    fa("python_open_creat", py('import os,sys; os.open(sys.argv[1] + "/new", os.O_CREAT | os.O_WRONLY)', "{{d}}"),
       "python3"),
]
NAMES = [
    fa("mv", "mv {{f}} {{d}}/renamed"),
    fa("rm", "rm -f {{f}}"),
    fa("rmdir", "rmdir {{sub}}"),
    fa("python_rename", py('import os,sys; os.rename(sys.argv[1], sys.argv[1] + ".renamed")', "{{f}}"), "python3"),
    fa("perl_unlink", pl('unlink($ARGV[0]) or die "unlink: $!"', "{{f}}"), "perl"),
]
LINKS = [
    fa("hard_link", "ln {{f}} {{d}}/hard"),
    fa("symlink", "ln -s {{f}} {{d}}/sym"),
    fa("python_link", py('import os,sys; os.link(sys.argv[1], sys.argv[1] + ".hard")', "{{f}}"), "python3"),
]
MODE = [
    fa("chmod", "chmod 600 {{f}}"),
    fa("chmod_setuid", "chmod 4755 {{f}}"),
    fa("chmod_dir", "chmod 700 {{sub}}"),
    fa("chmod_through_symlink", "chmod 600 {{link}}"),
    fa("python_chmod", py('import os,sys; os.chmod(sys.argv[1], 0o600)', "{{f}}"), "python3"),
    fa("python_fchmod_read_only_fd", py('import os,sys; os.fchmod(os.open(sys.argv[1], os.O_RDONLY), 0o600)', "{{f}}"),
       "python3"),
    fa("python_fchmodat", py('import os,sys; d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); '
                             'os.chmod("victim", 0o600, dir_fd=d)', "{{d}}"), "python3"),
    fa("perl_fchmod_read_only_fd", pl(OPEN_RO + ' chmod(0600, $h) or die "fchmod: $!"', "{{f}}"), "perl"),
]
OWNER = [
    fa("chown", "chown 65534:65534 {{f}}", 0),
    fa("chgrp", "chgrp 65534 {{f}}", 0),
    fa("chown_symlink_itself", "chown -h 65534 {{link}}", 0),
    fa("python_chown", py('import os,sys; os.chown(sys.argv[1], 65534, 65534)', "{{f}}"), "python3", 0),
    fa("python_fchown_read_only_fd", py('import os,sys; os.fchown(os.open(sys.argv[1], os.O_RDONLY), 65534, -1)',
                                        "{{f}}"), "python3", 0),
    fa("perl_fchown_read_only_fd", pl(OPEN_RO + ' chown(65534, 65534, $h) or die "fchown: $!"', "{{f}}"), "perl", 0),
]
TIMES = [
    fa("touch_date", "touch -d %s {{f}}" % DATE),
    fa("touch_reference", "touch -r {{ref}} {{f}}"),
    fa("touch_atime_only", "touch -a -d %s {{f}}" % DATE),
    fa("touch_now", "touch {{f}}"),
    fa("touch_dir", "touch -d %s {{sub}}" % DATE),
    fa("touch_symlink_itself", "touch -h -d %s {{link}}" % DATE),
    fa("python_utime", py('import os,sys; os.utime(sys.argv[1], (1, 1))', "{{f}}"), "python3"),
    fa("python_utime_now", py('import os,sys; os.utime(sys.argv[1])', "{{f}}"), "python3"),
    fa("python_futimens_read_only_fd", py('import os,sys; os.utime(os.open(sys.argv[1], os.O_RDONLY), (1, 1))',
                                          "{{f}}"), "python3"),
    fa("perl_futimes_read_only_fd", pl(OPEN_RO + ' utime(1, 1, $h) or die "futimes: $!"', "{{f}}"), "perl"),
    # futimens(fd, NULL): "now", through a descriptor opened only for reading
    fa("python_futimens_now_read_only_fd", py('import os,sys; os.utime(os.open(sys.argv[1], os.O_RDONLY))', "{{f}}"),
       "python3"),
    fa("perl_futimes_now_read_only_fd", pl(OPEN_RO + ' utime(undef, undef, $h) or die "futimes: $!"', "{{f}}"),
       "perl"),
]
XATTRS = [
    fa("setfattr", "setfattr -n user.mcpx -v 1 {{f}}", "setfattr", "xattr"),
    fa("setfattr_remove", "setfattr -x user.keep {{f}}", "setfattr", "xattr"),
    fa("python_setxattr", py('import os,sys; os.setxattr(sys.argv[1], "user.mcpx", b"1")', "{{f}}"),
       "python3", "xattr"),
    fa("python_fsetxattr_read_only_fd", py('import os,sys; os.setxattr(os.open(sys.argv[1], os.O_RDONLY), '
                                           '"user.mcpx", b"1")', "{{f}}"), "python3", "xattr"),
    fa("python_removexattr", py('import os,sys; os.removexattr(sys.argv[1], "user.keep")', "{{f}}"),
       "python3", "xattr"),
    # perl's syscall passes strings by pointer and wants them in variables
    fa("perl_fsetxattr_read_only_fd", pl(OPEN_RO + ' my ($n, $v) = ("user.mcpx", "xx"); '
                                         'syscall({{nr_fsetxattr}}, fileno($h), $n, $v, 2, 0) == 0 '
                                         'or die "fsetxattr: $!"', "{{f}}"), "perl", "xattr", "nr"),
    fa("perl_removexattr", pl('my ($p, $n) = ($ARGV[0], "user.keep"); '
                              'syscall({{nr_removexattr}}, $p, $n) == 0 or die "removexattr: $!"',
                              "{{f}}"), "perl", "xattr", "nr"),
]
_IOCTL_SET = ('open(my $h, "<", $ARGV[0]) or die "open: $!"; my $b = pack("l!", 0); '
              'ioctl($h, %d, $b) or die "getflags: $!"; '
              'ioctl($h, %d, pack("l!", unpack("l!", $b) | %d)) or die "setflags: $!"')
_PY_SET = ('import fcntl,os,struct,sys; fd = os.open(sys.argv[1], os.O_RDONLY); '
           'old = struct.unpack("l", fcntl.ioctl(fd, %d, struct.pack("l", 0)))[0]; '
           'fcntl.ioctl(fd, %d, struct.pack("l", old | %d))')
FLAGS = [
    fa("chattr_immutable", "chattr +i {{f}}", "chattr", "flags", 9),
    fa("chattr_append_only", "chattr +a {{f}}", "chattr", "flags", 9),
    fa("chattr_nodump", "chattr +d {{f}}", "chattr", "flags"),
    fa("python_ioctl_immutable", py(_PY_SET % (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FL_IMMUTABLE), "{{f}}"),
       "python3", "flags", 9),
    fa("python_ioctl_nodump", py(_PY_SET % (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FL_NODUMP), "{{f}}"),
       "python3", "flags"),
    fa("perl_ioctl_nodump_read_only_fd", pl(_IOCTL_SET % (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FL_NODUMP), "{{f}}"),
       "perl", "flags"),
]


def file_attack(lab, user, mode, attack):
    """The control (unconfined: the attack works and changes the case), then the
    attack confined: it fails and the case is exactly as it was."""
    need_user(user)
    image = image_for(attack.needs)
    lab.require(user, image, attack.needs)
    key = ("file", user, image, attack.name)
    if key not in lab.controls:
        case = Case(lab, user)
        before = snapshot(case.dir)
        out = lab.server(user, "off", image).job(attack.render(case))
        after = snapshot(case.dir)
        assert out.ok, "control: unconfined, %s should work as %s: %r" % (attack.name, user, out)
        assert before != after, "control: unconfined, %s changed nothing: %r" % (attack.name, out)
        lab.controls[key] = True
    case = Case(lab, user)
    before = snapshot(case.dir)
    srv = lab.server(user, mode, image)
    out = srv.job(attack.render(case))
    after = snapshot(case.dir)
    if before != after and attack.documented_gap and not lab.own_mount_ns(user, mode, image):
        pytest.xfail("documented gap (docs/policy-and-sandbox.md, the sandbox, not covered): with no mount namespace of its own "
                     "(here: %s, %s) a job sets a file's times to now through a descriptor it holds: %s"
                     % (user, TARGET, snapshot_diff(before, after)))
    assert before == after, "a %s job (as %s) changed what is outside its roots with %s: %s; job: %r" % (
        mode, user, attack.name, snapshot_diff(before, after), out)
    assert not out.ok, "a %s job's %s says it succeeded, yet nothing changed: %r" % (mode, attack.name, out)


@pytest.mark.parametrize("attack", CONTENT)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_write_content_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", CREATION)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_create_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", NAMES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_rename_or_remove_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", LINKS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_link_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", MODE)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_chmod_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", OWNER)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_chown_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", TIMES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_change_times_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", XATTRS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_change_xattrs_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", FLAGS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_set_inode_flags_outside(lab, user, mode, attack):
    file_attack(lab, user, mode, attack)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_still_writes_its_tmpdir(lab, user, mode):
    need_user(user)
    srv = lab.server(user, mode, image_for(()))
    # plain writes only: metadata inside the writable places is not promised either way
    out = srv.job('cd "$TMPDIR" && echo data > f && mkdir d && mv f d/g && ln -s g d/l && ln d/g d/h '
                  '&& cat d/l && rm d/h && ls d')
    assert out.ok and out.out == "data\ng\nl\n", out


@pytest.mark.parametrize("user", USERS)
def test_roots_job_still_writes_beneath_its_roots(lab, user):
    need_user(user)
    root = lab.mkdir(os.path.join(lab.home(user).roots, uuid.uuid4().hex[:10]), user)
    srv = lab.server(user, "roots", image_for(()))
    out = srv.job('cd %s && echo data > f && mkdir d && mv f d/g && ln -s g d/l && ln d/g d/h && cat d/l '
                  '&& rm d/h' % root)
    assert out.ok and out.out == "data\n", out
    with open(os.path.join(root, "d", "g")) as f:
        assert f.read() == "data\n"
    assert os.readlink(os.path.join(root, "d", "l")) == "g"
    assert not os.path.exists(os.path.join(root, "d", "h"))


# ==========================================================================
# C. A confined job cannot touch any process but its own tree
# ==========================================================================

class ProcAttack:
    """kind: which property of the target it changes (a key of host_state), "stop"
    (a signal; the command continues the target again so a breach cannot hang the
    test), or "read" (a /proc file; the first line of stdout is the byte count)."""

    def __init__(self, name, command, kind, needs=()):
        self.name, self.command, self.kind, self.needs = name, command, kind, tuple(needs)
        # a control that may kill its server (RLIMIT_CPU of 1 s) gets a young one
        self.fresh_control = "--cpu" in command or "RLIMIT_CPU" in command or name.endswith("_cpu")

    def render(self, pid, state):
        cpu = min(state["affinity"])
        kw = {"pid": pid, "cpu": cpu, "mask": "%x" % (1 << cpu)}
        if NR:
            kw.update({"nr_" + k: v for k, v in NR.items()})
        cmd = fill(self.command, **kw)
        if self.kind == "stop":
            cmd = "%s; rc=$?; kill -CONT %d 2>/dev/null; exit $rc" % (cmd, pid)
        return cmd


def pa(name, command, kind, *needs):
    return pytest.param(ProcAttack(name, command, kind, needs), id=name)


_PERL_PRLIMIT = ('my $l = pack("QQ", %d, %d); syscall({{nr_prlimit64}}, $ARGV[0] + 0, %d, $l, 0) == 0 '
                 'or die "prlimit64: $!"')

CPU_LIMIT = [
    pa("prlimit", "prlimit --pid {{pid}} --cpu=1:1", "limits", "prlimit"),
    pa("python_resource_prlimit", py('import resource,sys; resource.prlimit(int(sys.argv[1]), resource.RLIMIT_CPU, '
                                     '(1, 1))', "{{pid}}"), "limits", "python3"),
    pa("perl_prlimit64_cpu", pl(_PERL_PRLIMIT % (1, 1, 0), "{{pid}}"), "limits", "perl", "nr"),
]
NOFILE_LIMIT = [
    pa("prlimit", "prlimit --pid {{pid}} --nofile=5:5", "limits", "prlimit"),
    pa("python_resource_prlimit", py('import resource,sys; resource.prlimit(int(sys.argv[1]), '
                                     'resource.RLIMIT_NOFILE, (5, 5))', "{{pid}}"), "limits", "python3"),
    pa("perl_prlimit64", pl(_PERL_PRLIMIT % (5, 5, 7), "{{pid}}"), "limits", "perl", "nr"),
]
NICE = [
    pa("renice", "renice -n 10 -p {{pid}}", "nice", "renice"),
    pa("python_setpriority", py('import os,sys; os.setpriority(os.PRIO_PROCESS, int(sys.argv[1]), 10)', "{{pid}}"),
       "nice", "python3"),
    pa("perl_setpriority", pl('setpriority(0, $ARGV[0], 10) or die "setpriority: $!"', "{{pid}}"), "nice", "perl"),
]
AFFINITY = [
    pa("taskset", "taskset -p {{mask}} {{pid}}", "affinity", "taskset", "multicpu"),
    pa("python_sched_setaffinity", py('import os,sys; os.sched_setaffinity(int(sys.argv[1]), {int(sys.argv[2])})',
                                      "{{pid}}", "{{cpu}}"), "affinity", "python3", "multicpu"),
    pa("perl_sched_setaffinity", pl('my $m = pack("Q", 1 << $ARGV[1]); '
                                    'syscall({{nr_sched_setaffinity}}, $ARGV[0] + 0, 8, $m) == 0 '
                                    'or die "sched_setaffinity: $!"', "{{pid}}", "{{cpu}}"),
       "affinity", "perl", "nr", "multicpu"),
]
IOPRIO = [
    pa("ionice", "ionice -c 3 -p {{pid}}", "ioprio", "ionice"),
    pa("perl_ioprio_set", pl('syscall({{nr_ioprio_set}}, 1, $ARGV[0] + 0, 3 << 13) == 0 or die "ioprio_set: $!"',
                             "{{pid}}"), "ioprio", "perl", "nr"),
]
STOP = [
    pa("kill", "kill -STOP {{pid}}", "stop"),
    pa("python_os_kill", py('import os,signal,sys; os.kill(int(sys.argv[1]), signal.SIGSTOP)', "{{pid}}"),
       "stop", "python3"),
    pa("perl_kill", pl('kill("STOP", $ARGV[0]) or die "kill: $!"', "{{pid}}"), "stop", "perl"),
]


def _cat(name):
    return pa("cat_" + name, "cat /proc/{{pid}}/%s | wc -c; cat /proc/{{pid}}/%s > /dev/null" % (name, name), "read")


PROC_READS = [
    _cat("environ"), _cat("maps"), _cat("auxv"),
    pa("python_environ", py('import sys; print(len(open("/proc/%s/environ" % sys.argv[1], "rb").read()))',
                            "{{pid}}"), "read", "python3"),
    pa("perl_maps", pl('open(my $h, "<", "/proc/$ARGV[0]/maps") or die "open: $!"; local $/; my $d = <$h>; '
                       'defined($d) && length($d) or die "read: $!"; print length($d), "\\n"', "{{pid}}"),
       "read", "perl"),
]


def read_bytes(out):
    first = out.out.split("\n", 1)[0].strip()
    return int(first) if first.isdigit() else 0


def check_proc_control(attack, out, before, after):
    what = "control: unconfined, %s" % attack.name
    assert out.ok, "%s should work: %r" % (what, out)
    if attack.kind == "read":
        assert read_bytes(out) > 0, "%s read nothing: %r" % (what, out)
    elif attack.kind != "stop":
        assert after is not None and before[attack.kind] != after[attack.kind], \
            "%s changed no %s of the server: %r -> %r" % (what, attack.kind, before and before[attack.kind],
                                                          after and after[attack.kind])


def proc_attack(lab, user, mode, attack):
    """The control against the unconfined server (it must visibly work), then the
    attack against a confined server: it fails, the server's limits, nice, affinity
    and I/O priority are what they were, and the server still serves."""
    need_user(user)
    image = image_for(attack.needs)
    lab.require(user, image, attack.needs)
    key = ("proc", user, image, attack.name)
    if key not in lab.controls:
        ctl = lab.start(user, {}, image=image) if attack.fresh_control else lab.server(user, "off", image)
        before = host_state(ctl.hpid)
        if "multicpu" in attack.needs and len(before["affinity"]) < 2:
            pytest.skip("the server may run on one CPU only: pinning it changes nothing")
        out = ctl.job(attack.render(ctl.pid, before))
        after = host_state(ctl.hpid)
        if attack.fresh_control:
            ctl.shutdown()
        check_proc_control(attack, out, before, after)
        lab.controls[key] = True
    srv = lab.server(user, mode, image)
    before = host_state(srv.hpid)
    if "multicpu" in attack.needs and len(before["affinity"]) < 2:
        pytest.skip("the server may run on one CPU only: pinning it changes nothing")
    out = srv.job(attack.render(srv.pid, before))
    after = host_state(srv.hpid)
    if after and after["state"] in ("T", "t"):
        os.kill(srv.hpid, signal.SIGCONT)
    changed = state_diff(before, after)
    assert not changed, "a %s job (as %s) changed the server with %s: %s; job: %r" % (
        mode, user, attack.name, changed, out)
    assert not out.ok, "a %s job's %s against the server succeeded: %r" % (mode, attack.name, out)
    if attack.kind == "read":
        assert read_bytes(out) == 0, "a %s job read the server's /proc file: %r" % (mode, out)
    srv.assert_serving("%s (%s)" % (attack.name, mode))
    return srv


def burn_server_cpu(srv, seconds=1.25, deadline=60):
    """Make the server itself spend CPU time (reading a big job's output) until it has
    used `seconds` in all: a server whose RLIMIT_CPU a job lowered to 1 s is killed."""
    end = time.monotonic() + deadline
    while cpu_seconds(srv.hpid) is not None and cpu_seconds(srv.hpid) < seconds:
        assert time.monotonic() < end, "the server did not use %ss of CPU within %ss" % (seconds, deadline)
        out = srv.job("head -c 1000000000 /dev/zero", capture="none", timeout=120 + SLACK)
        assert out.ok, "a busy job after the cpu-limit attack failed: %r; server stderr: %s" % (
            out, srv.s.stderr_text[-2000:])
    srv.assert_serving("using %ss of CPU" % seconds)


@pytest.mark.parametrize("attack", CPU_LIMIT)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_lower_server_cpu_limit(lab, user, mode, attack):
    srv = proc_attack(lab, user, mode, attack)
    burn_server_cpu(srv)


@pytest.mark.parametrize("attack", NOFILE_LIMIT)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_lower_server_descriptor_limit(lab, user, mode, attack):
    srv = proc_attack(lab, user, mode, attack)
    jids = [srv.s.job("echo %d" % i) for i in range(4)]
    for i, jid in enumerate(jids):
        r = srv.s.collect(jid, timeout=30)
        assert r["state"] == "success" and r["stdout"]["data"] == "%d\n" % i, r


@pytest.mark.parametrize("attack", NICE)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_renice_server(lab, user, mode, attack):
    proc_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", AFFINITY)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_pin_server_to_a_cpu(lab, user, mode, attack):
    proc_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", IOPRIO)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_change_server_io_priority(lab, user, mode, attack):
    if NR is None:
        pytest.skip("cannot read the I/O priority on %s" % platform.machine())
    proc_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", STOP)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_stop_server(lab, user, mode, attack):
    proc_attack(lab, user, mode, attack)


@pytest.mark.parametrize("attack", PROC_READS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_read_server_proc_files(lab, user, mode, attack):
    proc_attack(lab, user, mode, attack)


# ---- another job of the same server ---------------------------------------

def victim_job(start_job, poll_output, token):
    """Start `echo $$; exec sleep 300` through start_job(command, env) -> job id; return
    (job id, its pid as jobs see it, its host pid)."""
    jid = start_job("echo $$; exec sleep 300", {"MCPX_TOKEN": token})
    text = poll_output(jid)
    vpid = int(text.split()[0])
    found = wait_until(lambda: {p: d for p, d in token_processes(token).items() if d.startswith("sleep ")},
                       10 + SLACK, "the victim job's sleep")
    assert len(found) == 1, found
    vh = list(found)[0]
    assert ns_pid(vh) == vpid, "host pid %d is %d in its namespace, the job said %d" % (vh, ns_pid(vh), vpid)
    return jid, vpid, vh


SIBLING_ATTACKS = ("renice -n 10 -p {{pid}}", "prlimit --pid {{pid}} --nofile=5:5", "ionice -c 3 -p {{pid}}",
                   "kill -KILL {{pid}}")


def stdio_victim(srv, token):
    def start(command, env):
        return srv.s.job(command, env=env)

    def poll(jid):
        return srv.s.poll_output(jid, lambda d: d.endswith("\n"), timeout=10 + SLACK)["stdout"]["data"]

    return victim_job(start, poll, token)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_touch_a_sibling_job(lab, user, mode):
    """A confined job renices, limits, deprioritises and kills another job of the same
    session: each fails and the other job is as it was, still running."""
    need_user(user)
    image = image_for(())
    lab.require(user, image, ("renice", "prlimit", "ionice"))
    for srv, confined in ((lab.server(user, "off", image), False), (lab.server(user, mode, image), True)):
        jid, vpid, vh = stdio_victim(srv, uuid.uuid4().hex)
        try:
            before = host_state(vh)
            for template in SIBLING_ATTACKS:
                out = srv.job(fill(template, pid=vpid))
                if not confined:
                    assert out.ok, "control: unconfined, %r should work: %r" % (template, out)
                    continue
                assert not out.ok, "a %s job's %r against another job succeeded: %r" % (mode, template, out)
            if confined:
                assert not state_diff(before, host_state(vh)), \
                    "a %s job changed another job: %s" % (mode, state_diff(before, host_state(vh)))
                assert srv.s.status(jid)["state"] == "running"
            else:
                srv.s.until_done(jid, timeout=10 + SLACK)
        finally:
            srv.s.cleanup(jid)


# ---- self-directed forms still work ---------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_can_still_nice_itself(lab, user, mode):
    need_user(user)
    srv = lab.server(user, mode, image_for(()))
    out = srv.job("nice -n 5 true")
    assert out.ok, out
    out = srv.job("a=$(cut -d' ' -f19 /proc/self/stat); b=$(nice -n 5 cut -d' ' -f19 /proc/self/stat); echo $a $b")
    assert out.ok, out
    a, b = map(int, out.out.split())
    assert b == min(a + 5, 19), out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_can_still_lower_its_own_limits(lab, user, mode):
    need_user(user)
    image = image_for(())
    lab.require(user, image, ("prlimit",))
    srv = lab.server(user, mode, image)
    out = srv.job("ulimit -n 100 && ulimit -n")
    assert out.ok and out.out == "100\n", out
    out = srv.job("prlimit --nofile=100:100 true")
    assert out.ok, out
    out = srv.job("prlimit --nofile=100:100 sh -c 'ulimit -n'")
    assert out.ok and out.out == "100\n", out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_can_still_pin_itself(lab, user, mode):
    """taskset without -p (sched_setaffinity of pid 0) is the job's own business."""
    need_user(user)
    image = image_for(())
    lab.require(user, image, ("taskset",))
    srv = lab.server(user, mode, image)
    cpu = min(srv.baseline["affinity"])
    out = srv.job("taskset -c %d cat /proc/self/status" % cpu)
    assert out.ok, out
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", out.out, re.M)
    assert m and m.group(1) == str(cpu), out


# ---- over HTTP: another session's job --------------------------------------

LISTENING = re.compile(r"serving MCP on (https?)://(\S+?)/mcp")


class HttpSrv:
    """An `mcp-exec --listen 127.0.0.1:0` server as `user` on this target (in the
    container target with the host's network)."""

    def __init__(self, lab, user, env):
        self.token = "tok-" + uuid.uuid4().hex  # without one the server would make its own
        env = lab.full_env(dict(env, MCP_EXEC_TOKEN=self.token))
        self.argv = lab.argv(user, env, listen="127.0.0.1:0", image=image_for(()))
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=process_env(env))
        self._cond = threading.Condition()
        self.lines = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        deadline = time.monotonic() + 15 + SLACK
        with self._cond:
            while True:
                m = next((LISTENING.search(l) for l in self.lines if l and LISTENING.search(l)), None)
                if m:
                    break
                assert None not in self.lines, "the HTTP server exited: %s" % "".join(self.lines[:-1])
                left = deadline - time.monotonic()
                assert left > 0, "no listening line: %s" % "".join(self.lines)
                self._cond.wait(left)
        self.host, _, port = m.group(2).rpartition(":")
        self.port = int(port)
        self.hpid = _PidOf(self.argv, self.proc).host_pid(10 + SLACK)

    def _read(self):
        for raw in iter(self.proc.stderr.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append(None)
            self._cond.notify_all()

    def post(self, msg, headers, timeout=JOB_TIMEOUT):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": "Bearer " + self.token}
        h.update(headers)
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=h)
            r = c.getresponse()
            body = r.read()
            rh = {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
        if r.status == 202 or not body:
            return r.status, rh, None
        if rh.get("content-type", "").startswith("text/event-stream"):
            datas = [l[5:].strip() for l in body.decode().splitlines() if l.startswith("data:")]
            body = datas[-1].encode()
        return r.status, rh, json.loads(body.decode())

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.hpid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(10 + SLACK)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.hpid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.kill()
                self.proc.wait(10)
        self._t.join(5)


class HttpSession:
    VERSION = "2025-06-18"

    def __init__(self, srv):
        self.srv = srv
        self._id = 0
        status, h, reply = srv.post({"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize", "params": {
            "protocolVersion": self.VERSION, "capabilities": {},
            "clientInfo": {"name": "attacks", "version": "0"}}}, {})
        assert status == 200 and "result" in reply, (status, reply)
        self.sid = h["mcp-session-id"]
        status, _, _ = srv.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers())
        assert status == 202, status

    def next_id(self):
        self._id += 1
        return self._id

    def headers(self):
        return {"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": self.VERSION}

    def tool_raw(self, name, args):
        status, _, reply = self.srv.post({"jsonrpc": "2.0", "id": self.next_id(), "method": "tools/call",
                                          "params": {"name": name, "arguments": args}}, self.headers())
        assert status == 200 and "result" in reply, (status, reply)
        return reply["result"]

    def tool(self, name, args):
        res = self.tool_raw(name, args)
        assert not res.get("isError"), res
        return json.loads(res["content"][0]["text"])

    def job(self, command):
        return Outcome(self.tool_raw("execute", {"command": command, "capture": "all"}))


def http_server(lab, user, confined):
    key = (user, confined)
    h = lab.http_pool.get(key)
    if h is not None and not h.alive():
        h.stop()
        h = None
    if h is None:
        h = HttpSrv(lab, user, {"MCP_EXEC_SANDBOX": "read-only"} if confined else {})
        lab.http_pool[key] = h
    return h


HTTP_ATTACKS = [
    pytest.param(("renice -n 10 -p {{pid}}", "nice", "renice"), id="renice"),
    pytest.param(("prlimit --pid {{pid}} --nofile=5:5", "limits", "prlimit"), id="prlimit"),
    pytest.param(("kill -KILL {{pid}}", "alive", None), id="kill"),
    pytest.param(("kill -STOP {{pid}}", "alive", None), id="stop"),
]


@pytest.mark.parametrize("attack", HTTP_ATTACKS)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_http_job_cannot_touch_another_sessions_job(lab, user, attack):
    """Session 1's confined job against session 2's job (pid from its `echo $$`):
    it fails, and session 2's job is unchanged and still running.  The same
    attack from an unconfined server's session works (the control)."""
    need_user(user)
    template, kind, tool = attack
    if tool:
        lab.require(user, image_for(()), (tool,))
    for confined in (False, True):
        srv = http_server(lab, user, confined)
        s1, s2 = HttpSession(srv), HttpSession(srv)
        token = uuid.uuid4().hex

        def start(command, env):
            r = s2.tool("execute", {"command": command, "nowait": True, "env": env})
            assert r["state"] == "running", r
            return r["job_id"]

        def poll(jid):
            def said():
                data = s2.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["data"]
                return data if data.endswith("\n") else None
            return wait_until(said, 10 + SLACK, "the victim's pid")

        jid, vpid, vh = victim_job(start, poll, token)
        try:
            before = host_state(vh)
            out = s1.job(fill(template, pid=vpid))
            after = host_state(vh)
            if not confined:
                assert out.ok, "control: unconfined, %r against another session's job should work: %r" % (
                    template, out)
                if kind == "alive":
                    # a signal takes effect when the victim next runs: await it
                    wait_until(lambda: (host_state(vh) or {"state": "X"})["state"] in ("T", "t", "Z", "X"),
                               10 + SLACK, "the control's signal stopping or ending the victim")
                else:
                    assert after is not None and after[kind] != before[kind], (before, after)
                continue
            if after and after["state"] in ("T", "t"):
                os.kill(vh, signal.SIGCONT)
            changed = state_diff(before, after)
            assert not changed, "session 1's confined job changed session 2's job with %r: %s; job: %r" % (
                template, changed, out)
            assert not out.ok, "session 1's confined %r against session 2's job succeeded: %r" % (template, out)
            assert s2.tool("status", {"job_id": jid})["state"] == "running"
            assert srv.alive()
        finally:
            try:
                os.kill(vh, signal.SIGCONT)
            except OSError:
                pass
            s2.tool_raw("kill", {"job_id": jid, "signal": "KILL", "timeout": 5})


# ==========================================================================
# D. No settings: unconfined, as in 1.0
# ==========================================================================

@pytest.mark.parametrize("user", USERS)
def test_unconfined_job_still_changes_metadata_outside(lab, user):
    need_user(user)
    case = Case(lab, user)
    before = snapshot(case.dir)
    out = lab.server(user, "off", image_for(())).job(
        "chmod 600 {f} && touch -d {date} {f} && echo more >> {f} && touch {d}/new".format(
            f=case.f, d=case.dir, date=DATE))
    assert out.ok, out
    after = snapshot(case.dir)
    assert after["victim"]["mode"] == oct(0o100600), after["victim"]
    assert after["victim"]["mtime_ns"] != before["victim"]["mtime_ns"]
    assert after["victim"]["content"] == b"original\nmore\n"
    assert "new" in after


@pytest.mark.parametrize("user", USERS)
def test_unconfined_job_still_reaches_another_job(lab, user):
    need_user(user)
    image = image_for(())
    lab.require(user, image, ("renice",))
    srv = lab.server(user, "off", image)
    jid, vpid, vh = stdio_victim(srv, uuid.uuid4().hex)
    try:
        out = srv.job("renice -n 7 -p %d" % vpid)
        assert out.ok, out
        assert host_state(vh)["nice"] == 7
    finally:
        srv.s.cleanup(jid)


@pytest.mark.parametrize("user", USERS)
def test_unconfined_result_carries_no_sandbox_or_usage(lab, user):
    need_user(user)
    out = lab.server(user, "off", image_for(())).job("echo plain")
    assert out.ok and out.out == "plain\n", out
    assert "sandbox" not in out.r and "usage" not in out.r, out.r


def test_unconfined_root_job_keeps_the_servers_capabilities(lab):
    need_user("root")
    srv = lab.server("root", "off", image_for(()))
    out = srv.job("cat /proc/self/status")
    assert out.ok, out
    assert status_field(out.out, "CapEff", 16) == cap_eff(srv.hpid), (out.out, hex(cap_eff(srv.hpid)))


# ==========================================================================
# E. A sandboxed job reaches no host object outside its sandbox
# ==========================================================================

# System call numbers for section E (the same on every architecture for io_uring).
NR_E = {
    "x86_64": {"add_key": 248, "keyctl": 250, "mq_unlink": 241},
    "aarch64": {"add_key": 217, "keyctl": 219, "mq_unlink": 181},
}.get(platform.machine())
NR_IO_URING_SETUP = 425
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEYCTL_LINK, KEYCTL_UNLINK = -3, -4, 8, 9
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
TIOCGPTN, TIOCSPTLCK = 0x80045430, 0x40045431


def in_namespace_of(hpid, kind, fn):
    """fn() on a thread that first joined process hpid's namespace of this kind ("net"
    or "ipc") when it is not the test's own.  The container target's server lives in
    namespaces of its own, where an abstract socket or a message queue the test made in
    its own would be out of every job's reach, confined or not; made in the server's,
    the attack is the one a job there could really make.  Only that thread moves (both
    kinds allow it in a threaded process), and it ends with fn."""
    path = "/proc/%d/ns/%s" % (hpid, kind)
    if os.stat(path).st_ino == os.stat("/proc/self/ns/" + kind).st_ino:
        return fn()
    done = {}

    def run():
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                if _libc.setns(fd, {"net": CLONE_NEWNET, "ipc": CLONE_NEWIPC}[kind]) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, "setns %s: %s" % (path, os.strerror(err)))
            finally:
                os.close(fd)
            done["value"] = fn()
        except BaseException as e:  # pytest.skip and failed asserts too, raised again below
            done["error"] = e

    t = threading.Thread(target=run, name="in-%s-ns-of-%d" % (kind, hpid))
    t.start()
    t.join(30 + SLACK)
    assert not t.is_alive(), "%s still runs in the %s namespace of %d" % (fn, kind, hpid)
    if "error" in done:
        raise done["error"]
    return done["value"]


def seccomp_mode(hpid):
    return status_field(read_file("/proc/%d/status" % hpid, "r") or "", "Seccomp", 10)


def refused_by_runtime(srv, out):
    """Whether an unconfined job's call failed with ENOSYS under a seccomp filter the
    container runtime put on the server (an unconfined server installs none)."""
    return TARGET == "container" and "Function not implemented" in out.err and seccomp_mode(srv.hpid) == 2


def refused_unconfined(srv, call, out):
    """Why call failed for an unconfined job: in a container whose runtime filters system
    calls (podman's default seccomp profile answers add_key, request_key and the io_uring
    calls with ENOSYS) no process there has it, so the sandbox has nothing to take away."""
    if refused_by_runtime(srv, out):
        return ("the container runtime's seccomp filter (podman's default profile) refuses %s to "
                "every process in the container, so even an unconfined job has none: %r" % (call, out))
    return "%s refused even unconfined: %r" % (call, out)


def host_object_attack(lab, user, mode, needs, attack):
    """attack(srv, confined) runs one attempt against srv and says whether it got
    through, or a reason to skip when even the control cannot work.  The control runs
    on the unconfined server and must get through; then the sandboxed server's job
    must not."""
    need_user(user)
    image = image_for(needs)
    lab.require(user, image, needs)
    if NR_E is None:
        pytest.skip("no system call numbers for %s" % platform.machine())
    control = attack(lab.server(user, "off", image), False)
    if control is not True:
        pytest.skip("the control cannot work here: %s" % control)
    srv = lab.server(user, mode, image)
    confined = attack(srv, True)
    assert confined is not True, "a %s job (as %s) got through" % (mode, user)
    srv.assert_serving(mode)


def abstract_socket_attack(srv, confined):
    name = "mcpx-" + uuid.uuid4().hex
    # an abstract name lives in the network namespace its socket was made in
    lsock = in_namespace_of(srv.hpid, "net", lambda: socket.socket(socket.AF_UNIX))
    lsock.bind("\0" + name)
    lsock.listen(4)
    lsock.settimeout(0.2 if confined else 10 + SLACK)
    try:
        out = srv.job(pl('use Socket; socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!"; '
                         'connect($s, pack_sockaddr_un("\\0" . $ARGV[0])) or die "connect: $!"; print "connected\\n"',
                         name))
        try:
            conn, _ = lsock.accept()
            conn.close()
            reached = True
        except OSError:
            reached = False
        if not confined and not (out.ok and reached):
            return "no connection to the test's abstract socket in the server's network namespace: %r" % out
        if confined:
            assert "Operation not permitted" in out.err or not out.ok, out
        return reached or out.ok
    finally:
        lsock.close()


def keyring_attack():
    """A job changes its user's keyring: it adds a key there and unlinks it.  Where the
    container runtime's filter refuses add_key to everything but allows keyctl (podman's
    default profile), the job instead links its session keyring into its user's keyring
    and unlinks it again, a change made with keyctl alone (and in a rootful container
    the keyring is the host user's).  The confined job tries every spelling the control
    needed, and each must be refused."""
    spellings = ["add_key"]

    def job(how):
        if how == "add_key":
            # syscall() wants its string arguments in variables (it may write to them)
            return pl('my ($type, $desc, $data) = ("user", "mcpx-$$", "x"); '
                      'my $id = syscall(%d, $type, $desc, $data, 1, %d); $id >= 0 or die "add_key: $!"; '
                      'syscall(%d, %d, $id, %d); print "added\\n"'
                      % (NR_E["add_key"], KEY_SPEC_USER_KEYRING, NR_E["keyctl"], KEYCTL_UNLINK,
                         KEY_SPEC_USER_KEYRING))
        return pl('syscall(%d, %d, %d, %d) == 0 or die "keyctl link: $!"; '
                  'syscall(%d, %d, %d, %d) == 0 or die "keyctl unlink: $!"; print "linked\\n"'
                  % (NR_E["keyctl"], KEYCTL_LINK, KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING,
                     NR_E["keyctl"], KEYCTL_UNLINK, KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING))

    def attack(srv, confined):
        if not confined:
            out = srv.job(job("add_key"))
            if not out.ok and refused_by_runtime(srv, out):
                spellings.append("keyctl")
                out = srv.job(job("keyctl"))
            if not out.ok:
                return refused_unconfined(srv, spellings[-1], out)
            return True
        got_through = False
        for how in spellings:
            out = srv.job(job(how))
            assert "Operation not permitted" in out.err, (how, out)
            got_through = got_through or out.ok
        return got_through
    return attack


def _mq(name, flags, uid=None):
    _libc.mq_open.restype = ctypes.c_int
    fd = _libc.mq_open(("/" + name).encode(), flags, 0o600, None)
    if fd < 0:
        return ctypes.get_errno()
    if uid is not None:
        os.fchown(fd, uid, uid)  # the queue is the server's user's, as one it made would be
    os.close(fd)
    return 0


def message_queue_attack(user):
    """The queue is made in the server's IPC namespace (see in_namespace_of)."""
    def attack(srv, confined):
        name = "mcpx-" + uuid.uuid4().hex

        def in_ipc(fn):
            return in_namespace_of(srv.hpid, "ipc", fn)

        err = in_ipc(lambda: _mq(name, os.O_CREAT | os.O_RDWR, uid_of(user)))
        if err:
            return "mq_open: %s" % os.strerror(err)
        try:
            out = srv.job(pl('syscall(%d, $ARGV[0]) == 0 or die "mq_unlink: $!"; print "removed\\n"'
                             % NR_E["mq_unlink"], name))
            gone = in_ipc(lambda: _mq(name, os.O_RDONLY)) != 0
            if not confined and not gone:
                return "the job cannot remove the server's user's queue even unconfined: %r" % out
            if confined:
                assert "Operation not permitted" in out.err, out
            return gone
        finally:
            in_ipc(lambda: _libc.mq_unlink(("/" + name).encode()))
    return attack


def io_uring_attack(srv, confined):
    out = srv.job(pl('my $p = "\\0" x 120; my $fd = syscall(%d, 1, $p); $fd >= 0 or die "io_uring_setup: $!"; '
                     'print "ring\\n"' % NR_IO_URING_SETUP))
    if not confined and not out.ok:
        return refused_unconfined(srv, "io_uring_setup", out)
    if confined:
        assert "Function not implemented" in out.err, out
    return out.ok


def server_side_pty(hpid):
    """A pty (master, slave, the slave's name as the server sees it) in the devpts the
    server sees: the container target's /dev/pts is a devpts instance of its own, where
    a pty the test opened in its own would not exist by any name."""
    pts = "/proc/%d/root/dev/pts" % hpid
    if os.stat(pts).st_dev == os.stat("/dev/pts").st_dev:
        master, slave = os.openpty()
        return master, slave, os.ttyname(slave)
    master = os.open(pts + "/ptmx", os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))  # unlockpt
        n = struct.unpack("I", fcntl.ioctl(master, TIOCGPTN, b"\0" * 4))[0]
        slave = os.open("%s/%d" % (pts, n), os.O_RDWR | os.O_NOCTTY)
    except BaseException:
        os.close(master)
        raise
    return master, slave, "/dev/pts/%d" % n


def terminal_attack(user):
    """The test plays a server on a terminal: a line typed there waits unread, and a
    job tries to read it by the terminal's name."""
    def attack(srv, confined):
        master, slave, name = server_side_pty(srv.hpid)
        try:
            os.fchown(slave, uid_of(user), -1)
            os.write(master, b"secret\n")
            out = srv.job("head -n 1 %s" % name)
            if not confined and out.out != "secret\n":
                return "the job cannot read %s even unconfined: %r" % (name, out)
            if confined:
                assert "Permission denied" in out.err, out
                os.set_blocking(slave, False)
                assert os.read(slave, 64) == b"secret\n", "the line typed at the terminal is gone"
            return "secret" in out.out
        finally:
            os.close(master)
            os.close(slave)
    return attack


def fd_listing_attack(user):
    """Listing the server's /proc/PID/fd: a root job still lists the numbers (the
    directory is root's), so for root the attack is opening one (readlink)."""
    def attack(srv, confined):
        if user == "root":
            out = srv.job("readlink /proc/%d/fd/0" % srv.pid)
        else:
            out = srv.job("ls /proc/%d/fd" % srv.pid)
        if not confined and not out.ok:
            return "the server's descriptors are hidden even unconfined: %r" % out
        return out.ok
    return attack


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_reach_an_abstract_socket_with_the_network_on(lab, user, mode):
    host_object_attack(lab, user, mode, ("perl",), abstract_socket_attack)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_change_its_users_keyring(lab, user, mode):
    host_object_attack(lab, user, mode, ("perl",), keyring_attack())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_remove_a_host_message_queue(lab, user, mode):
    host_object_attack(lab, user, mode, ("perl",), message_queue_attack(user))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_gets_no_io_uring(lab, user, mode):
    host_object_attack(lab, user, mode, ("perl",), io_uring_attack)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_read_the_servers_terminal(lab, user, mode):
    host_object_attack(lab, user, mode, (), terminal_attack(user))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_list_the_servers_descriptors(lab, user, mode):
    host_object_attack(lab, user, mode, (), fd_listing_attack(user))


# ==========================================================================
# F. The HTTP listener: who may reach a server started with --listen
# ==========================================================================
#
# Binary target only: each server is started by the test itself (under unshare,
# prlimit or setpriv), and the attacker is a client on the same machine.

TOKEN_FILE_LINE = re.compile(r"the token generated in (\S+) \(")
SYSTEM_PYTHON = "/usr/bin/python3"


def need_binary_target():
    if TARGET != "binary":
        pytest.skip("the listener attacks start the binary themselves (binary target)")


class Listener:
    """An `mcp-exec --listen` server started by the test, behind `prefix` (commands
    that exec it: unshare, prlimit, setpriv), with its stderr read as it comes."""

    def __init__(self, lab, user, env, prefix=(), listen="127.0.0.1:0"):
        argv = list(prefix) + (SETPRIV if user == "nobody" else []) + [lab.binary(user), "--listen", listen]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=process_env(lab.full_env(env)))
        self._cond = threading.Condition()
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()
        self.host = self.port = None
        m = self.wait_line(LISTENING, 15 + SLACK)
        if m:
            self.host, _, port = m.group(2).rpartition(":")
            self.port = int(port)

    def _read(self):
        for raw in iter(self.proc.stderr.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append(None)
            self._cond.notify_all()

    @property
    def text(self):
        with self._cond:
            return "".join(l for l in self.lines if l)

    def wait_line(self, pattern, timeout):
        """The first match of pattern on stderr, or None once the server exited."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if line is None:
                        return None
                    m = pattern.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                assert left > 0, "no %r on stderr: %s" % (pattern.pattern, self.text)
                self._cond.wait(left)

    def request(self, method, path, body=None, headers=None, timeout=JOB_TIMEOUT):
        """(status, body) of one request on a fresh connection."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10 + SLACK)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def listeners(lab):
    made = []

    def start(user, env, **kw):
        srv = Listener(lab, user, env, **kw)
        made.append(srv)
        return srv

    yield start
    for srv in made:
        srv.stop()


def exec_body(argv):
    return json.dumps({"argv": argv}).encode()


def exec_stdout(body):
    """The stdout of a POST /exec event stream."""
    out, event = "", None
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "stdout":
            out += json.loads(line[6:])["data"]
    return out


def own_address():
    """An IPv4 address of this machine other than loopback, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route's source
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


@pytest.mark.parametrize("user", USERS)
def test_listen_name_resolving_off_loopback_needs_a_token(lab, listeners, user):
    """`--listen localhost:0` where the hosts file sends localhost to this machine's
    network address: the bound address decides.  Control: with a token the server
    serves there (the trick works); attack: with no token, and with
    MCP_EXEC_HTTP_AUTH=none, it refuses to start and names the setting."""
    need_binary_target()
    need_user(user)
    ip = own_address()
    if not ip or not shutil.which("unshare"):
        pytest.skip("needs a non-loopback IPv4 address and unshare")
    hosts = os.path.join(lab.base, "hosts-%s" % uuid.uuid4().hex[:8])
    with open(hosts, "w") as f:
        f.write("%s localhost\n" % ip)
    os.chmod(hosts, 0o644)
    prefix = ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts]
    token = uuid.uuid4().hex
    control = listeners(user, {"MCP_EXEC_TOKEN": token}, prefix=prefix, listen="localhost:0")
    assert control.host == ip, "control: localhost did not resolve to %s: %s" % (ip, control.text)
    status, _ = control.request("GET", "/metrics", headers={"Authorization": "Bearer " + token})
    assert status == 200, "control: the server on %s did not answer with its token" % ip
    for env in ({}, {"MCP_EXEC_HTTP_AUTH": "none"}):
        srv = listeners(user, env, prefix=prefix, listen="localhost:0")
        assert srv.host is None, "with %r the server served %s:%s without a token" % (env, srv.host, srv.port)
        assert srv.proc.wait(10 + SLACK) == 2 and "MCP_EXEC_TOKEN" in srv.text and ip in srv.text, srv.text


NOBODY_CLIENT = r"""
import http.client, json, re, sys
port, log = int(sys.argv[1]), sys.argv[2]
m = re.search(r"the token generated in (\S+) \(", log)
token = None
if m:
    try:
        token = open(m.group(1)).read().strip()
    except OSError as e:
        token = None
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
h = {"Content-Type": "application/json"}
if token:
    h["Authorization"] = "Bearer " + token
c.request("POST", "/exec", body=json.dumps({"argv": ["id", "-u"]}), headers=h)
r = c.getresponse()
print(json.dumps({"read_token": token is not None, "status": r.status, "body": r.read().decode()}))
"""


def test_local_user_cannot_run_commands_through_roots_loopback_server(lab, listeners):
    """A server run by root on 127.0.0.1 with no token setting; the attacker is user
    nobody on the same machine.  Control: with MCP_EXEC_HTTP_AUTH=none nobody's
    POST /exec runs `id -u` as root (0).  Attack: by default the server made a token
    nobody cannot read (0600 in a 0700 directory of root's), and nobody's request
    is 401: nothing runs."""
    need_binary_target()
    need_user("nobody")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs %s for the client run as nobody" % SYSTEM_PYTHON)
    runtime = lab.mkdir(os.path.join(lab.base, "run-%s" % uuid.uuid4().hex[:8]), "root", 0o700)

    def as_nobody(srv):
        r = subprocess.run(SETPRIV + [SYSTEM_PYTHON, "-c", NOBODY_CLIENT, str(srv.port), srv.text],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=JOB_TIMEOUT, cwd="/")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    control = listeners("root", {"MCP_EXEC_HTTP_AUTH": "none", "XDG_RUNTIME_DIR": runtime})
    got = as_nobody(control)
    assert got["status"] == 200 and exec_stdout(got["body"].encode()) == "0\n", "control: %r" % got
    srv = listeners("root", {"XDG_RUNTIME_DIR": runtime})
    m = TOKEN_FILE_LINE.search(srv.text)
    assert m, "the server did not say where its token is: %s" % srv.text
    st, dst = os.lstat(m.group(1)), os.lstat(os.path.dirname(m.group(1)))
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, 0) and stat.S_ISREG(st.st_mode), oct(st.st_mode)
    assert (stat.S_IMODE(dst.st_mode), dst.st_uid) == (0o700, 0) and stat.S_ISDIR(dst.st_mode), oct(dst.st_mode)
    token = read_file(m.group(1), "r").strip()
    assert len(token) >= 32 and token not in srv.text
    got = as_nobody(srv)
    assert not got["read_token"] and got["status"] == 401 and "0\n" not in got["body"], got
    status, body = srv.request("POST", "/exec", exec_body(["id", "-u"]), {"Authorization": "Bearer " + token})
    assert status == 200 and exec_stdout(body) == "0\n", (status, body)


@pytest.mark.parametrize("user", USERS)
def test_rebound_host_name_cannot_reach_a_loopback_server(lab, listeners, user):
    """A web page whose name the attacker re-points at 127.0.0.1 (DNS rebinding)
    sends its own name as Host.  Control: a server that lists the name in
    MCP_EXEC_HTTP_HOSTS answers it (/metrics, /exec).  Attack: a server with no
    token (MCP_EXEC_HTTP_AUTH=none) answers 421 naming the setting on every path,
    and the command does not run."""
    need_binary_target()
    need_user(user)
    name = "rebind-%s.example" % uuid.uuid4().hex[:8]
    marker_dir = lab.mkdir(os.path.join(lab.base, "rebind-%s" % uuid.uuid4().hex[:8]), user, 0o777)
    mark = os.path.join(marker_dir, "ran")
    touch = exec_body(["touch", mark])
    control = listeners(user, {"MCP_EXEC_HTTP_AUTH": "none", "MCP_EXEC_HTTP_HOSTS": name})
    host = {"Host": "%s:%d" % (name, control.port), "Content-Type": "application/json"}
    assert control.request("GET", "/metrics", headers=host)[0] == 200, "control: /metrics by name"
    assert control.request("POST", "/exec", touch, host)[0] == 200 and os.path.exists(mark), "control: /exec by name"
    os.unlink(mark)
    srv = listeners(user, {"MCP_EXEC_HTTP_AUTH": "none"})
    host = {"Host": "%s:%d" % (name, srv.port), "Content-Type": "application/json"}
    for method, path, body in (("GET", "/metrics", None), ("GET", "/healthz", None), ("POST", "/exec", touch),
                               ("POST", "/mcp", b"{}")):
        status, text = srv.request(method, path, body, host)
        assert status == 421 and b"MCP_EXEC_HTTP_HOSTS" in text, (path, status, text)
    assert not os.path.exists(mark), "a request naming a foreign Host ran its command"
    assert srv.request("GET", "/metrics", headers={"Host": "127.0.0.1:%d" % srv.port})[0] == 200


def first_bytes(socks, timeout):
    """{socket: the first bytes it received (b"" for a close or a reset)} for the
    sockets that received anything or were closed within timeout."""
    got, waiting = {}, list(socks)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        ready, _, _ = select.select(waiting, [], [], max(0, deadline - time.monotonic()))
        for s in ready:
            try:
                got[s] = s.recv(64)
            except OSError:
                got[s] = b""
            waiting.remove(s)
    return got


@pytest.mark.parametrize("user", USERS)
def test_unauthenticated_flood_does_not_lock_out_the_token(lab, listeners, user):
    """A server with 128 descriptors (prlimit) and a token; 300 keep-alive
    connections each send a request without the token, and 100 more send nothing,
    all held open.  Control: the flood is real: it outnumbers the server's
    descriptors and its requests are answered 401.  Attack: while it is held, a
    fresh connection with the token still runs a command within the deadline, and
    again after the flood is closed."""
    need_binary_target()
    need_user(user)
    if not shutil.which("prlimit"):
        pytest.skip("needs prlimit")
    token = uuid.uuid4().hex
    srv = listeners(user, {"MCP_EXEC_TOKEN": token}, prefix=["prlimit", "--nofile=128:128"])
    limits = read_file("/proc/%d/limits" % srv.proc.pid, "r")
    nofile = int(re.search(r"^Max open files\s+(\d+)", limits, re.M).group(1))
    auth = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    flood = []
    try:
        for i in range(400):
            s = socket.create_connection((srv.host, srv.port), timeout=10 + SLACK)
            flood.append(s)
            if i < 300:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: keep-alive\r\n\r\n" % srv.port)
        assert len(flood) > nofile, "control: the flood (%d) does not outnumber the descriptors (%d)" % (
            len(flood), nofile)
        t0 = time.monotonic()
        status, body = srv.request("POST", "/exec", exec_body(["echo", "during"]), auth, timeout=20 + SLACK)
        assert status == 200 and exec_stdout(body) == "during\n", (status, body)
        assert time.monotonic() - t0 < 20 + SLACK
        answers = first_bytes(flood[:300], 5 + SLACK)
        refused = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 401"))
        assert refused and all(a == b"" or a.startswith(b"HTTP/1.1 401") for a in answers.values()), (
            "control: the flood's requests were not refused 401: %r" % sorted(set(a[:12] for a in answers.values())))
    finally:
        for s in flood:
            s.close()
    status, body = srv.request("POST", "/exec", exec_body(["echo", "after"]), auth, timeout=20 + SLACK)
    assert status == 200 and exec_stdout(body) == "after\n", (status, body)
    assert srv.proc.poll() is None, srv.text


# ==========================================================================
# G. What the server says over HTTP: descriptors and delivery
# ==========================================================================

# What a job's descriptor listing shows beyond 0, 1, 2 and ls's own handle.
STRAY_FDS = "ls -l /proc/self/fd | grep -v -e ' [012] -> ' -e '/proc/' | grep -e '->' || true"


@pytest.mark.parametrize("user", USERS)
def test_http_terminal_of_one_session_never_reaches_anothers_job(lab, user):
    """Session 1 starts terminal jobs without pause while session 2's jobs list their
    descriptors: no listing shows one beyond 0, 1 and 2.  The control: a listing job
    that opens a descriptor of its own shows it, so the listing would see a stray."""
    need_user(user)
    srv = http_server(lab, user, False)
    s1, s2 = HttpSession(srv), HttpSession(srv)
    control = s2.job("exec 7</dev/null; " + STRAY_FDS)
    assert control.ok and "7 -> /dev/null" in control.out, "control: %r" % control
    stop, failures = threading.Event(), []

    def terminals():
        while not stop.is_set():
            try:
                s1.tool_raw("execute", {"command": "true", "tty": True})
            except Exception as e:  # the listing side reports it
                failures.append(e)
                return

    t = threading.Thread(target=terminals, daemon=True)
    t.start()
    listings = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            out = s2.job(STRAY_FDS)
            assert out.ok and out.out == "", "listing %d shows a stray descriptor: %r" % (listings, out)
            listings += 1
    finally:
        stop.set()
        t.join(30 + SLACK)
    assert not failures, failures
    assert listings > 0


def wait_shutting_writes(srv, session, jid):
    """A wait on jid on a connection of its own whose writing end is shut at once (the
    server sees its client leave); returns what response bytes still arrive."""
    body = json.dumps({"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
                       "params": {"name": "wait", "arguments": {"job_ids": [jid], "timeout": 30}}}).encode()
    headers = {"Host": "%s:%d" % (srv.host, srv.port), "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "Content-Length": str(len(body)),
               "Authorization": "Bearer " + srv.token}
    headers.update(session.headers())
    head = "POST /mcp HTTP/1.1\r\n" + "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
    sock = socket.create_connection((srv.host, srv.port), timeout=JOB_TIMEOUT)
    try:
        sock.sendall(head.encode() + body)
        sock.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got.decode("utf-8", "replace")
            got += chunk
    finally:
        sock.close()


@pytest.mark.parametrize("user", USERS)
def test_http_wait_dropped_as_its_job_ends_loses_no_result(lab, user):
    """A wait whose client leaves as the result is made either reaches the client (it can
    still read after shutting its writing end) or leaves the result for the next wait;
    never "delivered to an earlier call" with nothing received.  The control: a wait
    that was answered leaves nothing, so the second wait does tell the two apart."""
    need_user(user)
    srv = http_server(lab, user, False)
    s = HttpSession(srv)
    jid = s.tool("execute", {"command": "echo control", "nowait": True})["job_id"]
    assert "control" in s.tool_raw("wait", {"job_ids": [jid], "timeout": 30})["content"][0]["text"]
    again = s.tool_raw("wait", {"job_ids": [jid], "timeout": 30})
    assert again.get("isError") and "earlier call" in again["content"][0]["text"], "control: %r" % again
    for n in range(60):  # the client's leaving races the reply: many rounds, as an attacker would
        word = "round-%d-%s" % (n, uuid.uuid4().hex[:8])
        jid = s.tool("execute", {"command": "echo " + word, "nowait": True})["job_id"]
        if word in wait_shutting_writes(srv, s, jid):
            continue
        res = s.tool_raw("wait", {"job_ids": [jid], "timeout": 30})
        assert word in res["content"][0]["text"], (
            "round %d: the dropped wait received nothing and the next wait found no result: %r" % (n, res))


# ==========================================================================
# H. waiting_for_input: waiting on descriptors of its own is not a prompt
# ==========================================================================

# Each waits about 3 s on descriptors other than its stdin (the job's open pipe),
# then says done: a blocking execute must run it through.
INPUT_POLLERS = {
    "poll-another-pipe": py("import select,os; r,w=os.pipe(); p=select.poll(); p.register(r); p.poll(3000); "
                            "print(\"done\")"),
    "select-listening-socket": py("import select,socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); "
                                  "select.select([s],[],[],3); print(\"done\")"),
    "epoll-another-pipe": py("import select,os; r,w=os.pipe(); e=select.epoll(); e.register(r); e.poll(3); "
                             "print(\"done\")"),
    "http-server": "timeout 3 python3 -m http.server 0 --bind 127.0.0.1 >/dev/null 2>&1; echo done",
}

# The control: the same poll with stdin in its set, which is a prompt.
STDIN_POLLER = py("import select,sys,os; r,w=os.pipe(); p=select.poll(); p.register(r); p.register(sys.stdin); "
                  "p.poll(); print(\"got\", sys.stdin.readline().strip())")


def check_input_control(srv, user, mode):
    """A poll that holds stdin is reported waiting for input by this server: the
    detection works in this world, so a missing report below means something."""
    out = srv.job(STDIN_POLLER, yield_after=30)
    assert out.r and out.r.get("yielded") is True and out.r.get("waiting_for_input") is True, \
        "control (%s, %s): a poll on stdin is not reported waiting for input: %r" % (user, mode, out)
    jid = out.r["job_id"]
    try:
        srv.s.tool("input", {"job_id": jid, "data": "line\n"})
        done = srv.s.collect(jid, timeout=10 + SLACK)
        assert done["state"] == "success" and done["stdout"]["data"] == "got line\n", done
    finally:
        srv.s.cleanup(jid)


@pytest.mark.parametrize("poller", sorted(INPUT_POLLERS))
@pytest.mark.parametrize("mode", ["off"] + MODES)
@pytest.mark.parametrize("user", USERS)
def test_poller_on_its_own_descriptors_is_not_waiting_for_input(lab, user, mode, poller):
    need_user(user)
    needs = ("python3",)
    image = image_for(needs)
    lab.require(user, image, needs)
    srv = lab.server(user, mode, image)
    key = ("input", user, mode, image)
    if key not in lab.controls:
        check_input_control(srv, user, mode)
        lab.controls[key] = True
    out = srv.job(INPUT_POLLERS[poller], yield_after=30)
    try:
        assert out.r and "waiting_for_input" not in out.r and "yielded" not in out.r, \
            "%s (%s, %s) was taken to wait for input: %r" % (poller, user, mode, out)
        assert out.ok and out.out.endswith("done\n"), out
    finally:
        if out.state == "running":
            srv.s.cleanup(out.r["job_id"])
    srv.assert_serving("%s (%s)" % (poller, mode))


# ==========================================================================
# I. kill reach: a process that left its job's group with setsid
# ==========================================================================

@pytest.mark.parametrize("user", USERS)
def test_setsid_process_cannot_dodge_kill(lab, user):
    need_user(user)
    srv = lab.server(user, "off", image_for(()))
    token = uuid.uuid4().hex
    jid = srv.s.job("setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo $$; exec sleep 1000",
                    env={"MCPX_TOKEN": token})
    pid = int(srv.s.poll_output(jid, lambda d: d.endswith("\n"))["stdout"]["data"])
    # Both must have become sleep: a child still running setsid (or its sh, before the
    # trap) is in the job's group and dies of the control's TERM with the rest.
    wait_until(lambda: sorted(v.split()[0] for v in token_processes(token).values()) == ["sleep", "sleep"],
               10 + SLACK, "the job's two sleeps")
    try:
        # The control: TERM to the job's process group, sent by a sibling job,
        # ends its shell but not the TERM-ignoring sleep in a session of its own.
        out = srv.job("kill -TERM -%d" % pid)
        assert out.ok, out
        left = wait_until(lambda: len(token_processes(token)) == 1 and token_processes(token),
                          10 + SLACK, "the group's sleep to die and the setsid one to stay")
        (escaped,) = left
        # The attack: it still holds the job's pipes; kill ASSURED reaches it.
        k = srv.s.tool("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 1 + SLACK})
        assert k["terminated"] is True, "kill did not end the setsid process: %r" % k
        assert not k.get("already_terminated"), "kill called a job whose process lives already gone: %r" % k
        state = (read_file("/proc/%d/stat" % escaped, "r") or ") X").rsplit(")", 1)[1].split()[0]
        assert state in ("X", "Z"), "kill answered terminated while %d lives: %r" % (escaped, k)
    finally:
        await_no_token_processes(token, timeout=0)


# ==========================================================================
# J. spill: another job's spilled output stays out of a confined job's reach
# ==========================================================================

# A 64 KiB window: the secret, written first, then 600 KB, is only on disk.
SPILL_ENV = {"MCP_EXEC_SPILL": "auto", "MCP_EXEC_MAX_OUTPUT_BYTES": "65536"}


def spill_holds(pid, secret):
    """Whether a deleted regular file pid holds open starts with secret (read from
    the test side, as the server's user or root)."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        link = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(link).endswith(" (deleted)") and stat.S_ISREG(os.stat(link).st_mode):
                with open(link, "rb") as f:
                    if f.read(len(secret)) == secret.encode():
                        return True
        except OSError:
            continue
    return False


def spilled_secret_reached(srv):
    """A job of srv writes a secret that leaves its window; another job then
    looks for it in every regular file the server holds open and every file in a
    spill directory it can name.  Returns that job's Outcome and the count it
    printed."""
    secret = "SPILLED-" + uuid.uuid4().hex
    writer = srv.s.job("echo %s; seq 1 100000" % secret, close_stdin=True)
    try:
        srv.s.until_done(writer, timeout=30 + SLACK)
        sl = srv.s.tool("output", {"job_id": writer, "stdout": {"from": 0, "length": 41}})["stdout"]
        assert sl["data"] == secret + "\n", "the spill does not hold the secret: %r" % sl
        # the file is written a moment later, by a writer of its own
        wait_until(lambda: spill_holds(srv.hpid, secret), 20 + SLACK, "the secret in a spill file of the server")
        out = srv.job("for f in /proc/%d/fd/* /tmp/mcp-exec-spill-*/* /var/tmp/mcp-exec-spill-*/*; do"
                      " [ -f \"$f\" ] && timeout 10 cat \"$f\" 2>/dev/null; done | grep -c %s; true"
                      % (srv.pid, secret))
        counted = out.out.strip()
        return out, int(counted) if counted.isdigit() else None
    finally:
        srv.s.cleanup(writer)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("user", USERS)
def test_sandboxed_job_cannot_read_anothers_spilled_output(lab, user, mode):
    need_user(user)
    image = image_for(())
    lab.require(user, image, ())
    control = lab.start(user, dict(SPILL_ENV), image=image)
    out, count = spilled_secret_reached(control)
    if not count:
        pytest.skip("the control cannot read the spill even unconfined: %r" % out)
    env = dict(SPILL_ENV)
    env.update(lab.mode_env(user, mode))
    srv = lab.start(user, env, image=image)
    out, count = spilled_secret_reached(srv)
    assert out.ok and count == 0, "a %s job (as %s) read another job's spilled output: %r" % (mode, user, out)
    srv.assert_serving(mode)
