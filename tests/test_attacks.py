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
  K  kill reach          a job's process that left its group and session with setsid, and
                         outlived the shell that started it, cannot dodge `kill`: a signal to
                         the job's group misses it (the control), the server's kill still ends
                         it, and says terminated only once it is gone

Every attack is first run UNCONFINED against a fresh target of the same kind, where it
must visibly work (the control), so no test can pass because of a typo or a missing
tool; then confined, where it must fail and leave the target exactly as it was
(files: lstat incl. ctime, content, link targets, xattrs and flags, before and after;
processes: /proc/PID/limits, nice, affinity and I/O priority read from the test side).
A control that cannot work here (a tool or python3 missing in the image, a capability
the server's user lacks even unconfined, one CPU, no xattr support) skips with the
reason.

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
import signal
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
        env = lab.full_env(env)
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
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
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
# K. kill reach: a process that left its job's group with setsid
# ==========================================================================

@pytest.mark.parametrize("user", USERS)
def test_setsid_process_cannot_dodge_kill(lab, user):
    need_user(user)
    srv = lab.server(user, "off", image_for(()))
    token = uuid.uuid4().hex
    jid = srv.s.job("setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo $$; exec sleep 1000",
                    env={"MCPX_TOKEN": token})
    pid = int(srv.s.poll_output(jid, lambda d: d.endswith("\n"))["stdout"]["data"])
    wait_until(lambda: len(token_processes(token)) == 2, 10 + SLACK, "the job's two sleeps")
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
