"""End-to-end tests of the sandbox.

What the policy promises for the kernel-enforced part,
checked against a real server process and written the way an attacker
trying to get out would probe it:

  MCP_EXEC_SANDBOX   read-only: jobs read and execute anything, write only to
                     /dev/null-like devices and a private, fresh TMPDIR;
                     roots: the same plus everything beneath MCP_EXEC_ROOTS;
                     any other write fails (EACCES), by any route: symlinks,
                     `..`, /proc/self/root, hard links, renames, children,
                     re-exec, background processes, env tricks, mounts
  MCP_EXEC_NETWORK   off: no AF_INET/AF_INET6 socket, no TCP connect or bind,
                     no UDP datagram, loopback included; unix sockets work
  MCP_EXEC_RLIMITS   applied (soft = hard) to every job before it runs
  usage              {wall_ms, user_ms, sys_ms, max_rss_kib} on terminal results
  annotations        readOnlyHint / openWorldHint and the texts state the policy
  startup            bad values exit 2 naming the variable

Every write attack is judged by the host's (or the container's) files
afterwards, not by the job's exit code; and every attack in the table is
also run without the sandbox, where it must work, so a typo cannot pass as
a blocked escape.  Only files a test made are ever targeted.

Directory fixtures are built under a fresh tempfile directory that is
removed afterwards.  Those paths exist on the host only: the tests that need
them run on the binary and pid1 targets and skip on the container target,
where the remaining tests use only fresh names (checked by a later job) and
what the image has (/srv, /tmp, bash, perl; no python3).
"""

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import uuid

import pytest

from tests.helpers import (IS_ROOT, TARGET, Server, assert_startup_refused, await_no_token_processes,
                           close_module_server, needs_host_files, policy_text, server_binary, wait_until)

SH = "/bin/sh"
HOST = TARGET != "container"
DENIED = ("Permission denied", "Operation not permitted", "Read-only file system")
# A write outside the allowed places: refused by Landlock (EACCES) or, where
# the job has a mount namespace of its own, first by a read-only mount (EROFS).
WRITE_DENIED = ("Permission denied", "Read-only file system")


def write_denied(r):
    return any(d in said(r) for d in WRITE_DENIED)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def attempt(s, command=None, timeout=30, **kw):
    """Run a blocking job capturing both streams; return its result (a tool
    error fails the test)."""
    args = {"capture": "all"}
    if command is not None:
        args["command"] = command
    args.update(kw)
    return s.tool("execute", args, timeout=timeout)


def said(r):
    """Everything a job result says: both streams and a start error."""
    return "".join([(r.get("stdout") or {}).get("data", ""), (r.get("stderr") or {}).get("data", ""),
                    r.get("start_error") or ""])


def out_of(s, command, **kw):
    """stdout of a job that must succeed."""
    r = attempt(s, command, **kw)
    assert r["state"] == "success", r
    return r["stdout"]["data"]


def sandbox_env(mode, roots=None, **extra):
    env = {"MCP_EXEC_SANDBOX": mode, "SHELL": SH}
    if roots:
        env["MCP_EXEC_ROOTS"] = roots
    env.update(extra)
    return env


def snapshot(top):
    """{relative path: what it is} under top, symlinks not followed: names,
    types, file contents and link targets (not modes or times: Landlock does
    not govern chmod or utimes)."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("symlink", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    seen[rel] = ("file", f.read())
            else:
                seen[rel] = ("other", stat.S_IFMT(st.st_mode))
    return seen


def q(text):
    """Single-quote text for sh."""
    return "'" + text.replace("'", "'\\''") + "'"


def execute_annotations(s):
    return [t for t in s.result("tools/list")["tools"] if t["name"] == "execute"][0].get("annotations", {})


# --------------------------------------------------------------------------
# The world: base/root (the root), base/other (a second root), base/outside
# --------------------------------------------------------------------------

class World:
    def __init__(self, base):
        self.base = base
        self.root = os.path.join(base, "root")
        self.other = os.path.join(base, "other")
        self.outside = os.path.join(base, "outside")
        for d in (self.root, self.other, self.outside):
            os.mkdir(d)
        self.roots = "%s:%s" % (self.root, self.other)


class Case:
    """One test's own corner of the world:

    out/victim, out/hardvictim   files ("original\\n")    out/dir/   an empty directory
    root/file                    a file of the root ("mine\\n")
    root/link_out   -> out       a symlink in the root pointing out
    root/victim_link -> out/victim
    root/hard                    a hard link to out/hardvictim, made before the server ran a job
    root/mnt/                    an empty directory (mount point)
    """

    def __init__(self, world):
        self.id = uuid.uuid4().hex[:12]
        self.root = os.path.join(world.root, self.id)
        self.out = os.path.join(world.outside, self.id)
        os.mkdir(self.root)
        os.mkdir(self.out)
        os.mkdir(os.path.join(self.out, "dir"))
        os.mkdir(os.path.join(self.root, "mnt"))
        for path, text in ((self.o("victim"), "original\n"), (self.o("hardvictim"), "original\n"),
                           (self.r("file"), "mine\n")):
            with open(path, "w") as f:
                f.write(text)
        os.symlink(self.out, self.r("link_out"))
        os.symlink(self.o("victim"), self.r("victim_link"))
        os.link(self.o("hardvictim"), self.r("hard"))

    def o(self, *p):
        return os.path.join(self.out, *p)

    def r(self, *p):
        return os.path.join(self.root, *p)

    def fmt(self, template):
        return template.format(root=self.root, out=self.out, id=self.id)


@pytest.fixture(scope="module")
def world(mcp_bin):
    if not HOST:
        pytest.skip("needs directories made on the host; a container has its own filesystem")
    base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-sandbox-"))
    os.chmod(base, 0o755)
    yield World(base)
    subprocess.run(["umount", "-R", "-q", base], stderr=subprocess.DEVNULL)   # a mount that got out
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def case(world):
    return Case(world)


@pytest.fixture(scope="module", params=["read-only", "roots"])
def sandboxed(request, world):
    """A sandboxed server per mode; both have MCP_EXEC_ROOTS (cwd policy), so
    under read-only the roots are as unwritable as anything else."""
    s = Server(env=sandbox_env(request.param, world.roots))
    s.mode = request.param
    yield s
    close_module_server(s)


@pytest.fixture(scope="module")
def unsandboxed(world):
    s = Server(env={"MCP_EXEC_ROOTS": world.roots, "SHELL": SH})
    yield s
    close_module_server(s)


@pytest.fixture(scope="module")
def ro_any(mcp_bin):
    """read-only, no roots: cwd anywhere; runs on every target."""
    s = Server(env=sandbox_env("read-only"))
    yield s
    close_module_server(s)


# ==========================================================================
# Writes outside: the attack table
# ==========================================================================

# Each command tries to change something under {out} (the test's own
# directory outside every root), by one route.  Without the sandbox every
# one of them does change it (test_attack_works_without_the_sandbox).
ATTACKS = {
    "create": "echo x > {out}/new",
    "append": "echo x >> {out}/victim",
    "overwrite": "echo pwned > {out}/victim",
    "truncate-redirect": ": > {out}/victim",
    "truncate-cmd": "truncate -s 0 {out}/victim",
    "truncate-grow": "truncate -s 1M {out}/victim",
    "dd-notrunc": "printf P | dd of={out}/victim conv=notrunc status=none",
    "fallocate": "fallocate -l 1M {out}/victim",
    "tee": "echo pwned | tee {out}/victim",
    "sed-in-place": "sed -i s/original/pwned/ {out}/victim",
    "cp": "cp {root}/file {out}/new",
    "touch-new": "touch {out}/new",
    "perl-open": "perl -e 'open(F, \">>\", \"{out}/victim\") or die \"open: $!\\n\"; print F \"pwned\\n\"'",
    "via-symlink-dir": "echo x > {root}/link_out/new",
    "via-symlink-file": "echo pwned >> {root}/victim_link",
    "via-symlink-made-by-job": "ln -s {out}/victim {root}/mylink; echo pwned >> {root}/mylink",
    "via-symlink-dir-made-by-job": "ln -s {out} {root}/mydir; echo x > {root}/mydir/new",
    "dotdot": "cd {root} && echo x > ../../outside/{id}/new",
    "dotdot-through-symlink": "echo x > {root}/link_out/../{id}/new",
    "proc-self-root": "echo x > /proc/self/root{out}/new",
    "proc-self-cwd": "cd {out} && echo x > /proc/self/cwd/new",
    "proc-thread-self-root": "echo x > /proc/thread-self/root{out}/new",
    "proc-fd-of-dir": "exec 3<{out}; echo x > /proc/self/fd/3/new",
    "dev-fd-of-dir": "exec 3<{out}; echo x > /dev/fd/3/new",
    "nested-shells": "sh -c 'sh -c \"echo x > {out}/new\"'",
    "exec-shell": "exec /bin/sh -c 'echo x > {out}/new'",
    "env-i": "env -i /bin/sh -c 'echo x > {out}/new'",
    "setsid": "setsid -w /bin/sh -c 'echo x > {out}/new'",
    "bash": "bash -c 'echo x > {out}/new'",
    "subshell-pipeline": "echo x | (cat > {out}/new)",
    "mkdir": "mkdir {out}/newdir",
    "rmdir": "rmdir {out}/dir",
    "unlink": "rm -f {out}/victim",
    "mkfifo": "mkfifo {out}/fifo",
    "symlink-out": "ln -s /etc {out}/sl",
    "hardlink-out": "ln {root}/file {out}/hl",
    "rename-out": "mv {root}/file {out}/moved",
    "rename-out-perl": "perl -e 'rename(\"{root}/file\", \"{out}/moved\") or die \"rename: $!\\n\"'",
    "rename-over-victim": "perl -e 'rename(\"{root}/file\", \"{out}/victim\") or die \"rename: $!\\n\"'",
    "rename-dir-out": "mv {root}/mnt {out}/moved",
    "mv-victim-in": "mv {out}/victim {root}/stolen",
    "mv-victim-in-perl": "perl -e 'rename(\"{out}/victim\", \"{root}/stolen\") or die \"rename: $!\\n\"'",
    "mv-dir-in": "mv {out}/dir {root}/stolen",
    "new-hardlink-in-then-write": "ln {out}/victim {root}/hl_in && echo pwned >> {root}/hl_in",
    "cwd-out-relative": "cd {out} && echo x > new",
    "tmpdir-env-in-command": "TMPDIR={out} mktemp",
    "mount-bind-in-new-namespace": "unshare -m sh -c 'mount --bind {out} {root}/mnt && echo x > {root}/mnt/new'",
}


def attack_result(s, c, name):
    r = attempt(s, c.fmt(ATTACKS[name]), timeout=30)
    assert r["state"] != "running", r
    return r


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_leaves_outside_untouched(sandboxed, case, name):
    """ATTACK: change a file or directory outside every root.  Whatever the
    job says, the outside tree is exactly as it was; under read-only the
    root is untouched too."""
    before_out = snapshot(case.out)
    before_root = snapshot(case.root)
    r = attack_result(sandboxed, case, name)
    assert snapshot(case.out) == before_out, \
        "ESCAPE (%s, %s): the outside changed; job said %r" % (sandboxed.mode, name, said(r))
    if sandboxed.mode == "read-only":
        assert snapshot(case.root) == before_root, \
            "ESCAPE (read-only, %s): the root changed; job said %r" % (name, said(r))
    assert r["state"] == "error", "the attack %s reported success under the sandbox: %r" % (name, r)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_works_without_the_sandbox(unsandboxed, case, name):
    """Control: the same command without the sandbox does change the outside,
    so each row of the table is a real attack."""
    if name.startswith("mount") and not IS_ROOT:
        pytest.skip("mount needs root")
    before = snapshot(case.out)
    r = attack_result(unsandboxed, case, name)
    assert snapshot(case.out) != before, "the attack %s did nothing even unsandboxed: %r" % (name, said(r))


@pytest.mark.parametrize("command", [
    "echo x > {out}/new", "echo pwned >> {out}/victim", ": > {out}/victim", "rm {out}/victim",
])
def test_plain_write_outside_is_refused(sandboxed, case, command):
    """A plain write outside fails: "Permission denied" or "Read-only file system"."""
    r = attempt(sandboxed, case.fmt(command))
    assert r["state"] == "error", r
    assert write_denied(r), r


def test_sandbox_in_argv_mode(sandboxed, case):
    before = snapshot(case.out)
    for argv in (["touch", case.o("new")], ["sh", "-c", "echo x > %s" % case.o("new")],
                 ["/usr/bin/env", "-i", "truncate", "-s", "0", case.o("victim")],
                 ["rm", "-rf", case.o("dir")], ["mv", case.r("file"), case.o("moved")]):
        r = attempt(sandboxed, argv=argv)
        assert r["state"] == "error", r
    assert snapshot(case.out) == before


def test_sandbox_in_nowait_jobs(sandboxed, case):
    before = snapshot(case.out)
    jid = sandboxed.job("echo x > %s/new; echo pwned >> %s/victim" % (case.out, case.out))
    r = sandboxed.collect(jid)
    assert r["state"] == "error", r
    assert snapshot(case.out) == before


# ==========================================================================
# Writes inside: what each mode does allow
# ==========================================================================

INSIDE = ("cd {root} && echo new > new && echo more >> file && mkdir d && mkfifo d/fifo"
          " && ln -s file sl && ln file hl && mv new d/moved && rm hl && echo ok")


def test_roots_mode_writes_beneath_the_roots(make_server, world, case):
    s = make_server(env=sandbox_env("roots", world.roots))
    assert out_of(s, case.fmt(INSIDE)) == "ok\n"
    with open(case.r("d", "moved")) as f:
        assert f.read() == "new\n"
    with open(case.r("file")) as f:
        assert f.read() == "mine\nmore\n"
    # the second root too, and a job's own cwd default (the first root)
    assert out_of(s, "echo x > %s/f-%s && echo ok" % (world.other, case.id)) == "ok\n"
    assert os.path.exists(os.path.join(world.other, "f-" + case.id))
    assert out_of(s, "echo x > f-%s && pwd -P" % case.id) == world.root + "\n"
    assert os.path.exists(os.path.join(world.root, "f-" + case.id))


def test_read_only_mode_writes_nothing_in_the_roots(sandboxed, world, case):
    if sandboxed.mode != "read-only":
        pytest.skip("read-only only")
    before = snapshot(case.root)
    r = attempt(sandboxed, case.fmt(INSIDE))
    assert r["state"] == "error" and "ok" not in r["stdout"]["data"], r
    assert snapshot(case.root) == before
    r = attempt(sandboxed, "echo x > f-%s" % case.id)
    assert r["state"] == "error" and write_denied(r), r
    assert not os.path.exists(os.path.join(world.root, "f-" + case.id))


def test_read_only_still_reads_and_executes_everything(ro_any):
    out = out_of(ro_any, "head -c 4 /bin/sh | od -c | head -1; cat /etc/hostname >/dev/null && echo read;"
                         " /bin/true && echo exec; ls / >/dev/null && echo list")
    assert "E   L   F" in out and "read\nexec\nlist\n" in out, out


def test_read_only_cwd_outside_roots_still_cannot_write(ro_any, case):
    """read-only without roots: cwd may be anywhere, writing there may not."""
    before = snapshot(case.out)
    r = attempt(ro_any, "echo x > new; touch new2; mkdir d", cwd=case.out)
    assert r["state"] == "error" and write_denied(r), r
    assert snapshot(case.out) == before


# ==========================================================================
# Hard links
# ==========================================================================

def test_existing_hard_link_read_only_refused(sandboxed, case):
    """read-only: a hard link inside the tree to an outside file cannot be
    written through (nothing is writable but TMPDIR and the devices)."""
    if sandboxed.mode != "read-only":
        pytest.skip("read-only only")
    r = attempt(sandboxed, "echo pwned >> %s; : > %s" % (case.r("hard"), case.r("hard")))
    assert r["state"] == "error", r
    with open(case.o("hardvictim")) as f:
        assert f.read() == "original\n"


def test_existing_hard_link_in_a_root_is_inside(sandboxed, case):
    """roots: Landlock authorizes by path.  A hard link that someone already
    placed inside a writable root is a name inside the root, so writing
    through it is allowed, and the shared inode (also named outside) changes.
    That is not an escape: it took a process allowed to write both places to
    make the link.  Documents the behaviour; see the next test for the part
    that must be refused (a sandboxed job making such a link)."""
    if sandboxed.mode != "roots":
        pytest.skip("roots only")
    r = attempt(sandboxed, "echo added >> %s" % case.r("hard"))
    assert r["state"] == "success", r
    with open(case.o("hardvictim")) as f:
        assert f.read() == "original\nadded\n"


def test_new_hard_link_from_outside_into_a_root_refused(sandboxed, case):
    """A sandboxed job cannot link an outside file into a root (Landlock
    refuses links that would gain rights: EXDEV or EACCES), so it cannot
    make itself a writable name for it."""
    r = attempt(sandboxed, "ln %s %s" % (case.o("victim"), case.r("hl_in")))
    assert r["state"] == "error", r
    assert not os.path.lexists(case.r("hl_in")), "ESCAPE: a hard link to an outside file was made in the root"
    assert os.stat(case.o("victim")).st_nlink == 1


# ==========================================================================
# Children, background processes, re-launch, env
# ==========================================================================

def test_background_process_outliving_the_shell_is_sandboxed(sandboxed, case):
    """ATTACK: the shell leaves a background process behind that writes after
    the shell has exited.  It reports what happened on the job's stdout."""
    token = uuid.uuid4().hex
    cmd = ("( sleep 0.3; echo x > {out}/late; echo late-rc=$?;"
           "  setsid sh -c 'echo x > {out}/later; echo later-rc=$?' ) &"
           " echo started").format(out=case.out)
    jid = sandboxed.job(cmd, env={"MCPX_TOKEN": token}, capture="all")
    try:
        out = sandboxed.poll_output(jid, lambda d: "later-rc=" in d, timeout=20)["stdout"]["data"]
    except AssertionError:
        out = None    # the server ended the background processes: then they wrote nothing
    left = await_no_token_processes(token, timeout=10)
    assert not left, left
    assert not os.path.exists(case.o("late")), "ESCAPE: a background process wrote outside (%r)" % out
    assert not os.path.exists(case.o("later")), "ESCAPE: a setsid grandchild wrote outside (%r)" % out
    if out is not None:
        assert "late-rc=0" not in out and "later-rc=0" not in out, out
    sandboxed.cleanup(jid)


@pytest.mark.parametrize("env", [
    {"MCP_EXEC_SANDBOX": "off"},
    {"MCP_EXEC_SANDBOX": "roots", "MCP_EXEC_ROOTS": "/"},
    {"TMPDIR": "{out}"},
    {"LD_PRELOAD": "", "LANDLOCK": "0", "HOME": "{out}"},
], ids=["sandbox-off", "roots-slash", "tmpdir", "misc"])
def test_env_argument_cannot_lift_the_sandbox(sandboxed, case, env):
    """ATTACK: the `env` argument names the server's own settings, or points
    TMPDIR at an outside directory.  A refusal is fine; a job that runs must
    still not write outside (TMPDIR stays the job's private directory, or
    at least is not made writable)."""
    env = {k: case.fmt(v) for k, v in env.items()}
    before = snapshot(case.out)
    res = sandboxed.tool_raw("execute", {
        "command": 'echo x > {out}/new; echo x > "$TMPDIR/new"; echo x > "$HOME/new2"; touch {out}/t'
        .format(out=case.out), "env": env, "capture": "all"})
    assert snapshot(case.out) == before, "ESCAPE via env %r: %s" % (env, res["content"][0]["text"][:500])


def test_sandbox_with_allow_list(make_server, world, case):
    s = make_server(env=sandbox_env("read-only", world.roots, MCP_EXEC_ALLOW="touch,sh,/bin/sh"))
    before = snapshot(case.out)
    for args in ({"argv": ["touch", case.o("new")]}, {"argv": ["sh", "-c", "echo x > %s" % case.o("new")]},
                 {"command": "touch %s" % case.o("new")}):
        r = attempt(s, **args)
        assert r["state"] == "error" and write_denied(r), r
    assert snapshot(case.out) == before
    assert out_of(s, None, argv=["sh", "-c", 'touch "$TMPDIR/ok" && echo ok']) == "ok\n"


# ==========================================================================
# The server's own binary, the server's environment
# ==========================================================================

def test_job_cannot_replace_the_server_binary(make_server, world):
    """ATTACK: overwrite, truncate, delete or replace the binary the server
    runs from (and re-executes as its launcher).  On the host a copy made
    for this test is the target, never MCP_EXEC_BIN itself."""
    if HOST:
        bindir = os.path.join(world.base, "bin-" + uuid.uuid4().hex[:8])
        os.mkdir(bindir)
        binary = os.path.join(bindir, "mcp-exec")
        shutil.copy2(server_binary(), binary)
        argv = ([binary] if TARGET == "binary" else
                ["unshare", "--pid", "--fork", "--mount-proc", binary])
        s = make_server(env=sandbox_env("read-only"), argv=argv)
    else:
        binary = "/usr/local/bin/mcp-exec"
        s = make_server(env=sandbox_env("read-only"))
    digest = out_of(s, "sha256sum %s" % binary)
    b = q(binary)
    for attack in ("echo x >> %s" % b, ": > %s" % b, "truncate -s 0 %s" % b, "rm -f %s" % b,
                   "mv %s %s.old" % (b, b), "ln -sf /bin/true %s" % b,
                   "cp /bin/true %s.new; mv -f %s.new %s" % (b, b, b),
                   "cp /bin/true \"$TMPDIR/x\" && mv -f \"$TMPDIR/x\" %s" % b):
        attempt(s, attack)
    assert out_of(s, "sha256sum %s" % binary) == digest, "ESCAPE: the server binary changed"
    assert out_of(s, "ls %s" % q(os.path.dirname(binary))).split() == (
        ["mcp-exec"] if HOST else out_of(s, "ls /usr/local/bin").split())
    # and the server still starts jobs (its launcher is intact)
    assert out_of(s, "echo alive") == "alive\n"


def test_job_cannot_read_the_servers_environment(make_server):
    """ATTACK: the spec keeps MCP_EXEC_* from jobs; a job reading its parent's
    /proc/PID/environ would get them all (and secrets such as a token).
    Under the sandbox the server lies outside the job's Landlock domain."""
    s = make_server(env=sandbox_env("read-only"))
    out = out_of(s, "cat /proc/$PPID/comm; tr '\\0' '\\n' < /proc/$PPID/environ 2>&1 | grep -c MCP_EXEC_ || true")
    comm, count = out.split("\n")[:2]
    if comm != "mcp-exec":
        pytest.skip("the job's parent is %r, not the server" % comm)
    assert count == "0", "a sandboxed job read the server's MCP_EXEC_* variables: %r" % out


FORGE = r'''printf '{"jsonrpc":"2.0","method":"notifications/forged-by-job"}\n' > /proc/$PPID/fd/1 && echo FORGED'''

POKE = r'''perl -e 'open(M, "+<", "/proc/$ARGV[0]/mem") or die "open mem: $!\n";
open(P, "<", "/proc/$ARGV[0]/maps") or die "maps: $!\n";
my ($a) = map { /^([0-9a-f]+)-\S+ rw-p/ ? hex($1) : () } <P>;
sysseek(M, $a, 0) or die "seek: $!\n"; sysread(M, my $b, 8) == 8 or die "read: $!\n";
sysseek(M, $a, 0); syswrite(M, $b) == 8 or die "write: $!\n"; print "POKED\n"' $PPID'''


def test_job_cannot_write_the_servers_stdout_or_memory(ro_any):
    """ATTACK (every target): the job's parent is the unsandboxed server.
    Writing to /proc/$PPID/fd/1 would put a forged JSON-RPC line on the
    client's stream; opening /proc/$PPID/mem for writing would let the job
    rewrite the server (the probe writes back the bytes it read).  Without
    the sandbox both work for a job of the same user; with it, neither."""
    comm = out_of(ro_any, "cat /proc/$PPID/comm").strip()
    if comm != "mcp-exec":
        pytest.skip("the job's parent is %r, not the server" % comm)
    r = attempt(ro_any, FORGE)
    assert "FORGED" not in r["stdout"]["data"], r
    ro_any.roundtrip()
    assert not [n for n in ro_any.notifications if "forged" in json.dumps(n)], \
        "ESCAPE: a sandboxed job wrote a line onto the server's stdout"
    r = attempt(ro_any, POKE)
    assert "POKED" not in r["stdout"]["data"], "ESCAPE: a sandboxed job can write the server's memory: %r" % r


# ==========================================================================
# Writes anywhere else (every target): new names only
# ==========================================================================

PLACES = ["/", "/etc", "/usr/local/bin", "/usr/bin", "/var/tmp", "/tmp", "/dev/shm", "/root", "/srv",
          "/run", "/var/lib"]


def test_read_only_no_new_file_anywhere_but_tmpdir(ro_any):
    """ATTACK (every target): create a fresh name in common writable places
    (/tmp outside TMPDIR, /dev/shm, /var/tmp, /etc, ...).  Checked by a later
    job and, on the host, by the test itself."""
    name = "mcpx-sbx-" + uuid.uuid4().hex
    paths = [os.path.join(d, name) for d in PLACES]
    try:
        cmd = "; ".join("echo x > %s; mkdir %s.d; ln -s / %s.l; mkfifo %s.p" % (p, p, p, p) for p in paths)
        attempt(ro_any, cmd)
        check = "; ".join("for x in %s %s.d %s.l %s.p; do test -e $x -o -L $x && echo LEAK $x; done"
                          % (p, p, p, p) for p in paths) + "; true"
        assert out_of(ro_any, check) == "", "ESCAPE: created outside TMPDIR"
        if HOST:
            assert not [p for p in paths for sfx in ("", ".d", ".l", ".p") if os.path.lexists(p + sfx)]
    finally:
        if HOST:
            for p in paths:
                for sfx in ("", ".l", ".p"):
                    if os.path.lexists(p + sfx):
                        os.unlink(p + sfx)
                if os.path.isdir(p + ".d"):
                    os.rmdir(p + ".d")


def test_roots_mode_on_every_target(make_server):
    """roots with a root that exists on every target: writing beneath it
    works, a sibling of it and /tmp stay unwritable."""
    if HOST:
        base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-sbx-roots-"))
        root = os.path.join(base, "srv")
        os.mkdir(root)
    else:
        base, root = None, "/srv"
    try:
        s = make_server(env=sandbox_env("roots", root))
        name = "mcpx-sbx-" + uuid.uuid4().hex
        out = out_of(s, "mkdir {r}/{n} && echo x > {r}/{n}/f && cat {r}/{n}/f && pwd -P;"
                        " echo x > /tmp/{n} 2>/dev/null || echo denied; test -e /tmp/{n} || echo absent;"
                        " echo x > {r}/../{n} 2>/dev/null || echo denied2".format(r=root, n=name))
        assert out == "x\n%s\ndenied\nabsent\ndenied2\n" % root, out
    finally:
        if base:
            shutil.rmtree(base, ignore_errors=True)


def test_roots_sandbox_without_roots_exits_2(mcp_bin):
    assert_startup_refused({"MCP_EXEC_SANDBOX": "roots"}, "MCP_EXEC_SANDBOX")


def test_allowed_devices_are_writable(ro_any):
    out = out_of(ro_any, "for d in /dev/null /dev/zero /dev/random /dev/urandom; do echo x > $d && echo ok; done;"
                         " { head -c 1 /dev/zero > /dev/full; } 2>&1 | grep -c 'No space'; true")
    assert out == "ok\nok\nok\nok\n1\n", out


# ==========================================================================
# TMPDIR: private, fresh, writable
# ==========================================================================

def test_tmpdir_is_fresh_empty_and_writable(ro_any):
    out = out_of(ro_any, 'case "$TMPDIR" in /*) ;; *) echo "not absolute: $TMPDIR"; exit 1;; esac;'
                         ' test -d "$TMPDIR" && test -z "$(ls -A "$TMPDIR")" && echo empty;'
                         ' echo data > "$TMPDIR/f" && cat "$TMPDIR/f";'
                         ' f=$(mktemp) && echo m > "$f" && case "$f" in "$TMPDIR"/*) echo mktemp-inside;; esac;'
                         ' d=$(mktemp -d) && touch "$d/x" && echo mktemp-d; mkfifo "$TMPDIR/p" && echo fifo')
    assert out == "empty\ndata\nmktemp-inside\nmktemp-d\nfifo\n", out


def test_tmpdir_in_argv_mode_and_roots_mode(make_server, ro_any):
    assert out_of(ro_any, None, argv=["sh", "-c", 'touch "$TMPDIR/a" && echo ok']) == "ok\n"
    root = "/srv" if not HOST else tempfile.mkdtemp(prefix="mcpx-sbx-")
    try:
        s = make_server(env=sandbox_env("roots", root))
        assert out_of(s, 'touch "$TMPDIR/a" && mktemp >/dev/null && echo ok') == "ok\n"
    finally:
        if HOST:
            shutil.rmtree(root, ignore_errors=True)


def test_tmpdir_differs_per_job(ro_any):
    seen = set()
    for _ in range(3):
        seen.add(out_of(ro_any, 'echo "$TMPDIR"'))
    a = ro_any.job('echo "$TMPDIR"; exec cat >/dev/null')
    b = ro_any.job('echo "$TMPDIR"; exec cat >/dev/null')
    try:
        ta = ro_any.poll_output(a, lambda d: d.endswith("\n"))["stdout"]["data"]
        tb = ro_any.poll_output(b, lambda d: d.endswith("\n"))["stdout"]["data"]
        seen |= {ta, tb}
        assert len(seen) == 5, "every job should get its own TMPDIR: %r" % seen
    finally:
        ro_any.cleanup(a, b)


def test_tmpdir_of_another_job_is_not_writable(ro_any):
    """ATTACK: job B writes into job A's TMPDIR while A runs (a private
    directory is private), and a later job into an earlier job's."""
    # The secret is written before the path is shown: the test reads the
    # directory as soon as it sees the path.
    a = ro_any.job('echo secret > "$TMPDIR/s"; echo "$TMPDIR"; exec cat >/dev/null')
    try:
        ta = ro_any.poll_output(a, lambda d: d.endswith("\n"))["stdout"]["data"].strip()
        r = attempt(ro_any, 'echo x > {t}/evil; : > {t}/s; rm -f {t}/s; mkdir {t}/d'.format(t=q(ta)))
        assert r["state"] == "error", r
        listing = out_of(ro_any, "ls -A %s 2>/dev/null; true" % q(ta))
        assert "evil" not in listing and "d" not in listing.split(), \
            "ESCAPE: a job wrote into another job's TMPDIR: %r" % listing
        if HOST and os.path.isdir(ta):
            assert sorted(os.listdir(ta)) == ["s"]
            with open(os.path.join(ta, "s")) as f:
                assert f.read() == "secret\n"
    finally:
        ro_any.cleanup(a)
    old = out_of(ro_any, 'echo "$TMPDIR"').strip()
    r = attempt(ro_any, "echo x > %s/late" % q(old))
    assert not out_of(ro_any, "ls -A %s 2>/dev/null; true" % q(old)).strip(), \
        "ESCAPE: a job wrote into an earlier job's TMPDIR"


# ==========================================================================
# Network
# ==========================================================================

@pytest.fixture(scope="module")
def net_off(mcp_bin):
    s = Server(env={"MCP_EXEC_NETWORK": "off", "SHELL": SH})
    yield s
    close_module_server(s)


@pytest.fixture(scope="module")
def net_on(mcp_bin):
    s = Server(env={"SHELL": SH})
    yield s
    close_module_server(s)


@pytest.fixture
def tcp_listener():
    needs_host_files()
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.bind(("127.0.0.1", 0))
    l.listen(16)
    l.setblocking(False)
    yield l
    l.close()


@pytest.fixture
def udp_listener():
    needs_host_files()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    u.setblocking(False)
    yield u
    u.close()


def accepted(l):
    try:
        c, _ = l.accept()
    except BlockingIOError:
        return False
    c.close()
    return True


def received(u):
    got = []
    while True:
        try:
            got.append(u.recv(65536))
        except BlockingIOError:
            return got


CONNECTS = {
    "bash-dev-tcp": "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo CONNECTED",
    "perl": "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\") "
            "or die \"connect: $!\\n\"; print \"CONNECTED\\n\"'",
    "python3": "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); "
               "print(\"CONNECTED\")'",
    "nested": "sh -c \"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo CONNECTED\"",
    "setsid-env-i": "setsid -w env -i bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED'",
    "exec-bash": "exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED'",
}


@pytest.mark.parametrize("how", sorted(CONNECTS))
def test_network_off_tcp_connect_to_loopback_fails(net_off, net_on, tcp_listener, how):
    port = tcp_listener.getsockname()[1]
    cmd = CONNECTS[how].format(port=port)
    r = attempt(net_off, cmd)
    assert "CONNECTED" not in r["stdout"]["data"], "ESCAPE: TCP connect under network off: %r" % said(r)
    assert not accepted(tcp_listener), "ESCAPE: the test's listener got a connection under network off"
    # control: the same with the network on connects
    r = attempt(net_on, cmd)
    assert "CONNECTED" in r["stdout"]["data"], r
    assert wait_until(lambda: accepted(tcp_listener), 5, "the control connection")


UDP_SENDS = {
    "bash-dev-udp": "bash -c 'echo dgram > /dev/udp/127.0.0.1/{port}' && echo SENT",
    "perl-sendto": "perl -MSocket -e 'socket(S, PF_INET, SOCK_DGRAM, 0) or die \"socket: $!\\n\"; "
                   "send(S, \"dgram\", 0, pack_sockaddr_in({port}, inet_aton(\"127.0.0.1\"))) "
                   "or die \"send: $!\\n\"; print \"SENT\\n\"'",
    "python3-sendto": "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                      ".sendto(b\"dgram\", (\"127.0.0.1\", {port})); print(\"SENT\")'",
}


@pytest.mark.parametrize("how", sorted(UDP_SENDS))
def test_network_off_udp_to_loopback_fails(net_off, net_on, udp_listener, how):
    port = udp_listener.getsockname()[1]
    cmd = UDP_SENDS[how].format(port=port)
    r = attempt(net_off, cmd)
    assert "SENT" not in r["stdout"]["data"], "ESCAPE: UDP send under network off: %r" % said(r)
    assert received(udp_listener) == [], "ESCAPE: the test's UDP socket got a datagram under network off"
    r = attempt(net_on, cmd)
    assert "SENT" in r["stdout"]["data"], r
    assert wait_until(lambda: received(udp_listener), 5, "the control datagram")


SOCKETS = {
    "tcp-bind-listen": "perl -MSocket -e 'socket(S, PF_INET, SOCK_STREAM, 0) or die \"socket: $!\\n\";"
                       " bind(S, pack_sockaddr_in(0, inet_aton(\"127.0.0.1\"))) or die \"bind: $!\\n\";"
                       " listen(S, 1) or die \"listen: $!\\n\"; print \"OPENED\\n\"'",
    "udp-bind": "perl -MSocket -e 'socket(S, PF_INET, SOCK_DGRAM, 0) or die \"socket: $!\\n\";"
                " bind(S, pack_sockaddr_in(0, inet_aton(\"127.0.0.1\"))) or die \"bind: $!\\n\"; print \"OPENED\\n\"'",
    "inet6-stream": "perl -e 'socket(S, 10, 1, 0) or die \"socket: $!\\n\"; print \"OPENED\\n\"'",
    "inet6-dgram": "perl -e 'socket(S, 10, 2, 0) or die \"socket: $!\\n\"; print \"OPENED\\n\"'",
    "inet-dgram-icmp": "perl -e 'socket(S, 2, 2, 1) or die \"socket: $!\\n\"; print \"OPENED\\n\"'",
}


@pytest.mark.parametrize("what", sorted(SOCKETS))
def test_network_off_no_inet_sockets(net_off, net_on, what):
    r = attempt(net_off, SOCKETS[what])
    assert "OPENED" not in r["stdout"]["data"], "ESCAPE: %s under network off: %r" % (what, said(r))
    assert r["state"] == "error", r
    if what != "inet-dgram-icmp":      # ping sockets depend on net.ipv4.ping_group_range
        assert "OPENED" in attempt(net_on, SOCKETS[what])["stdout"]["data"]


def test_network_off_connect_is_a_permission_error(net_off, net_on):
    """Every target: connecting to 127.0.0.1:1 (nothing listens) is refused
    by the sandbox, not by the peer."""
    cmd = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/1'"
    r = attempt(net_off, cmd)
    assert r["state"] == "error", r
    assert "Connection refused" not in said(r), r
    assert any(d in said(r) for d in DENIED), r
    r = attempt(net_on, cmd)
    assert "Connection refused" in said(r), r


def test_network_off_unix_sockets_work(net_off):
    out = out_of(net_off, "perl -MSocket -e 'socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die \"$!\\n\";"
                          " syswrite($a, \"ping\"); sysread($b, my $x, 4); print \"$x\\n\"'")
    assert out == "ping\n"


def test_network_off_with_sandbox_and_argv(make_server, tcp_listener):
    s = make_server(env=sandbox_env("read-only", MCP_EXEC_NETWORK="off"))
    port = tcp_listener.getsockname()[1]
    r = attempt(s, None, argv=["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED" % port])
    assert "CONNECTED" not in r["stdout"]["data"], r
    assert not accepted(tcp_listener)


# The x86-64 kernel also takes i386 system calls through `int 0x80`, with
# i386 numbers (socket = 359): a seccomp filter that checks the number but
# not the architecture lets them through.  The socket then sends UDP (not
# covered by Landlock) with ordinary calls.
INT80_SOCKET = r'''
import ctypes, mmap, socket, sys
code = bytes([0x53, 0xb8, 0x67, 0x01, 0x00, 0x00, 0xbb, 0x02, 0x00, 0x00, 0x00,
              0xb9, 0x02, 0x00, 0x00, 0x00, 0x31, 0xd2, 0xcd, 0x80, 0x5b, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
fd = fn()
print("fd", fd)
if fd >= 0:
    s = socket.socket(fileno=fd)
    s.sendto(b"int80", ("127.0.0.1", int(sys.argv[1])))
    print("SENT")
'''

# An x32 system call number (bit 30 set) for socket.
X32_SOCKET = r'''
import ctypes, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(0x40000000 | 41, 2, 2, 0)
print("fd", fd, ctypes.get_errno())
if fd >= 0:
    socket.socket(fileno=fd).sendto(b"x32", ("127.0.0.1", int(sys.argv[1])))
    print("SENT")
'''


@pytest.mark.parametrize("program", ["int80", "x32"])
def test_network_off_other_syscall_abis(net_off, net_on, udp_listener, program):
    """ATTACK: create the socket through another system call ABI."""
    if os.uname().machine != "x86_64" or shutil.which("python3") is None:
        pytest.skip("x86-64 with python3 only")
    src = INT80_SOCKET if program == "int80" else X32_SOCKET
    port = udp_listener.getsockname()[1]
    cmd = "python3 -c %s %d" % (q(src), port)
    r = attempt(net_off, cmd)
    assert "SENT" not in r["stdout"]["data"], "ESCAPE: %s socket under network off: %r" % (program, said(r))
    assert received(udp_listener) == [], "ESCAPE: a datagram arrived through the %s ABI" % program
    if program == "int80":
        # control: the same code does send where the network is on (when the
        # kernel has ia32 emulation enabled)
        r = attempt(net_on, cmd)
        if "SENT" in r["stdout"]["data"]:
            assert wait_until(lambda: received(udp_listener), 5, "the control datagram")


# io_uring can create and use sockets without the socket(2) system call
# (IORING_OP_SOCKET, kernel 5.19+), and send with IORING_OP_SENDMSG.
IO_URING_UDP = r'''
import ctypes, mmap, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
ring = libc.syscall(425, 4, params)
if ring < 0:
    print("setup", ctypes.get_errno()); sys.exit(0)
p = params.raw
sq_entries, cq_entries = struct.unpack_from("II", p, 0)
sq_off = struct.unpack_from("IIIIIII", p, 40)      # head tail mask entries flags dropped array
cq_off = struct.unpack_from("IIIIII", p, 80)       # head tail mask entries overflow cqes
sq_len = sq_off[6] + sq_entries * 4
cq_len = cq_off[5] + cq_entries * 16
sqm = mmap.mmap(ring, max(sq_len, cq_len), offset=0)
cqm = sqm
sqes = mmap.mmap(ring, sq_entries * 64, offset=0x10000000)
def submit(op, fd=0, off=0, addr=0, length=0, flags=0):
    tail = struct.unpack_from("I", sqm, sq_off[1])[0]
    idx = tail & struct.unpack_from("I", sqm, sq_off[2])[0]
    sqe = struct.pack("BBHiQQIIQ", op, 0, 0, fd, off, addr, length, flags, 42) + bytes(24)
    sqes[idx * 64:idx * 64 + 64] = sqe
    struct.pack_into("I", sqm, sq_off[6] + idx * 4, idx)
    struct.pack_into("I", sqm, sq_off[1], tail + 1)
    n = libc.syscall(426, ring, 1, 1, 1, None, 0)      # enter, GETEVENTS
    head = struct.unpack_from("I", cqm, cq_off[0])[0]
    idx = head & struct.unpack_from("I", cqm, cq_off[2])[0]
    res = struct.unpack_from("QiI", cqm, cq_off[5] + idx * 16)[1]
    struct.pack_into("I", cqm, cq_off[0], head + 1)
    return n, res
n, fd = submit(45, fd=2, off=2, length=0)       # IORING_OP_SOCKET(AF_INET, SOCK_DGRAM)
print("socket", n, fd)
if fd >= 0:
    socket.socket(fileno=fd).sendto(b"uring", ("127.0.0.1", int(sys.argv[1])))
    print("SENT")
'''


def test_network_off_io_uring_socket(net_off, net_on, udp_listener):
    """ATTACK: make the socket with io_uring's IORING_OP_SOCKET, which a
    seccomp filter on socket(2) never sees; UDP is not Landlock's."""
    if shutil.which("python3") is None or os.uname().machine != "x86_64":
        pytest.skip("x86-64 with python3 only")
    port = udp_listener.getsockname()[1]
    cmd = "python3 -c %s %d" % (q(IO_URING_UDP), port)
    r = attempt(net_off, cmd)
    assert "SENT" not in r["stdout"]["data"], "ESCAPE: io_uring socket under network off: %r" % said(r)
    assert received(udp_listener) == [], "ESCAPE: a datagram arrived through io_uring"
    r = attempt(net_on, cmd)
    if "SENT" in r["stdout"]["data"]:
        assert wait_until(lambda: received(udp_listener), 5, "the control datagram")


# ==========================================================================
# Resource limits
# ==========================================================================

def limits(s, **kw):
    """{name: (soft, hard)} from the job's /proc/self/limits."""
    out = out_of(s, None, argv=["cat", "/proc/self/limits"], **kw)
    table = {}
    for line in out.splitlines()[1:]:
        m = re.match(r"(.+?)\s{2,}(\S+)\s+(\S+)", line)
        if m:
            table[m.group(1).strip()] = (m.group(2), m.group(3))
    return table


RLIMITS = "cpu=60,as=4G,nproc=512,fsize=1M,nofile=4096,core=0,stack=8M,memlock=64K,data=unlimited"
EXPECTED = {
    "Max cpu time": ("60", "60"),
    "Max address space": ("4294967296", "4294967296"),
    "Max processes": ("512", "512"),
    "Max file size": ("1048576", "1048576"),
    "Max open files": ("4096", "4096"),
    "Max core file size": ("0", "0"),
    "Max stack size": ("8388608", "8388608"),
    "Max locked memory": ("65536", "65536"),
    "Max data size": ("unlimited", "unlimited"),
}


@pytest.mark.parametrize("sandbox", ["off", "read-only"])
def test_rlimits_applied_soft_equals_hard(make_server, sandbox):
    s = make_server(env=sandbox_env(sandbox, MCP_EXEC_RLIMITS=RLIMITS))
    got = limits(s)
    for name, want in EXPECTED.items():
        assert got.get(name) == want, "%s: want %s, got %s" % (name, want, got.get(name))
    # through the shell (command mode) and in a nowait job too
    assert out_of(s, "ulimit -n") == "4096\n"
    jid = s.job("ulimit -n; grep 'Max file size' /proc/self/limits")
    r = s.collect(jid)
    assert r["stdout"]["data"].startswith("4096\nMax file size") and "1048576" in r["stdout"]["data"], r


@pytest.mark.parametrize("sandbox", ["off", "read-only"])
def test_rlimit_fsize_stops_a_big_write(make_server, sandbox):
    s = make_server(env=sandbox_env(sandbox, MCP_EXEC_RLIMITS="fsize=1M"))
    where = '"$TMPDIR"' if sandbox != "off" else "$(mktemp -d)"
    out = out_of(s, "d=%s; (trap '' XFSZ; head -c 3000000 /dev/zero > $d/big) 2>&1 | head -c 300;"
                    " echo; wc -c < $d/big; rm -f $d/big; [ \"$d\" = \"$TMPDIR\" ] || rmdir $d" % where)
    size = int(out.strip().splitlines()[-1])
    assert size <= 1048576, out
    assert "File too large" in out, out


def test_rlimits_do_not_bind_the_server(make_server):
    """nofile=32 is the jobs' limit, not the server's: it still runs 24 jobs
    at once (each takes server descriptors for its pipes)."""
    s = make_server(env={"MCP_EXEC_RLIMITS": "nofile=32", "SHELL": SH})
    ids = [s.job("exec cat >/dev/null") for _ in range(24)]
    try:
        assert out_of(s, "ulimit -n") == "32\n"
        states = {j["job_id"]: j["state"] for j in s.tool("list_jobs")["jobs"]}
        assert all(states.get(j) == "running" for j in ids), states
    finally:
        s.cleanup(*ids)


def test_rlimit_cpu_ends_a_spinning_job(make_server):
    s = make_server(env={"MCP_EXEC_RLIMITS": "cpu=1", "SHELL": SH})
    r = attempt(s, "exec perl -e '1 while 1'", timeout=30)
    assert r["state"] != "success", r
    assert r["usage"]["user_ms"] + r["usage"]["sys_ms"] >= 800, r["usage"]


# ==========================================================================
# usage
# ==========================================================================

USAGE_KEYS = {"wall_ms", "user_ms", "sys_ms", "max_rss_kib"}


def check_usage(r):
    u = r.get("usage")
    assert isinstance(u, dict) and set(u) == USAGE_KEYS, r
    for k, v in u.items():
        assert isinstance(v, int) and not isinstance(v, bool) and v >= 0, (k, v)
    return u


@pytest.fixture(scope="module", params=["off", "read-only"])
def usage_srv(request, mcp_bin):
    # Unconfined, usage is reported only when asked for (MCP_EXEC_USAGE=1),
    # so a 1.0 client's results stay as they were; confinement turns it on.
    extra = {"MCP_EXEC_USAGE": "1"} if request.param == "off" else {}
    s = Server(env=sandbox_env(request.param, **extra))
    yield s
    close_module_server(s)


def test_usage_absent_with_no_settings(mcp_bin):
    s = Server(env={"SHELL": SH})
    try:
        r = s.tool("execute", {"command": "true"})
        assert "usage" not in r, r
    finally:
        close_module_server(s)


def test_usage_wall_time(usage_srv):
    u = check_usage(attempt(usage_srv, "sleep 0.3"))
    assert 250 <= u["wall_ms"] < 30000, u


def test_usage_cpu_time(usage_srv):
    u = check_usage(attempt(usage_srv, "perl -e 'my $s = (times)[0]; 1 while (times)[0] - $s < 0.3'"))
    assert u["user_ms"] >= 150, u
    assert u["wall_ms"] >= u["user_ms"] - 50, u


def test_usage_max_rss(usage_srv):
    small = check_usage(attempt(usage_srv, "true"))
    big = check_usage(attempt(usage_srv, "perl -e '$x = \"a\" x 60_000_000; print length $x' >/dev/null"))
    assert big["max_rss_kib"] >= 50000, big
    assert small["max_rss_kib"] < 50000, small


def test_usage_on_failed_and_argv_jobs(usage_srv):
    check_usage(attempt(usage_srv, "exit 3"))
    check_usage(attempt(usage_srv, None, argv=["sleep", "0.05"]))


def test_usage_on_wait_status_and_not_while_running(usage_srv):
    jid = usage_srv.job("exec cat >/dev/null")
    st = usage_srv.status(jid)
    assert st["state"] == "running" and "usage" not in st, st
    w = usage_srv.tool("wait", {"job_ids": [jid], "timeout": 0})
    assert w[0]["state"] == "running" and "usage" not in w[0], w
    out = usage_srv.tool("output", {"job_id": jid})
    assert "usage" not in out, out
    lj = [j for j in usage_srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
    assert lj and "usage" not in lj[0], lj
    usage_srv.tool("input", {"job_id": jid, "close": True})
    st = usage_srv.until_done(jid)
    check_usage(st)
    check_usage(usage_srv.collect(jid))


def test_usage_on_kill_result(usage_srv):
    jid = usage_srv.job("exec sleep 300")
    k = usage_srv.tool("kill", {"job_id": jid})
    assert k["terminated"] is True, k
    u = check_usage(k["result"])
    assert u["wall_ms"] < 60000, u


def test_usage_absent_on_start_failure(usage_srv):
    r = attempt(usage_srv, None, argv=["/nonexistent/mcpx-no-such-program"])
    assert r.get("start_error"), r
    assert "usage" not in r, r


def test_usage_on_yielded_then_collected_job(usage_srv):
    r = usage_srv.tool("execute", {"command": "sleep 0.4", "yield_after": 0.05})
    assert r["state"] == "running" and r.get("yielded") is True and "usage" not in r, r
    u = check_usage(usage_srv.collect(r["job_id"]))
    assert u["wall_ms"] >= 350, u


# ==========================================================================
# What the model is told
# ==========================================================================

def test_annotations_state_the_sandbox(make_server):
    plain = make_server(env={"SHELL": SH})
    assert execute_annotations(plain).get("readOnlyHint") is not True
    ro = make_server(env=sandbox_env("read-only", MCP_EXEC_NETWORK="off"))
    a = execute_annotations(ro)
    assert a.get("readOnlyHint") is True, a
    assert a.get("openWorldHint") is False, a
    net = make_server(env={"MCP_EXEC_NETWORK": "off", "SHELL": SH})
    assert execute_annotations(net).get("openWorldHint") is False
    assert execute_annotations(net).get("readOnlyHint") is not True


def test_texts_state_sandbox_network_and_rlimits(make_server):
    plain = policy_text(make_server(env={"SHELL": SH}))
    s = make_server(env=sandbox_env("read-only", MCP_EXEC_NETWORK="off", MCP_EXEC_RLIMITS="nofile=4321,cpu=77"))
    instructions = s.init_result.get("instructions") or ""
    desc = [t for t in s.result("tools/list")["tools"] if t["name"] == "execute"][0]["description"]
    for where, text in (("instructions", instructions), ("execute description", desc)):
        assert "read-only" in text, "%s should name the sandbox mode:\n%s" % (where, text)
        assert re.search(r"network", text, re.I), "%s should say the network is off:\n%s" % (where, text)
        assert "4321" in text and "77" in text, "%s should state the rlimits:\n%s" % (where, text)
    assert "4321" not in plain


# ==========================================================================
# Startup validation
# ==========================================================================

@pytest.mark.parametrize("var,value", [
    ("MCP_EXEC_SANDBOX", "yes"),
    ("MCP_EXEC_SANDBOX", "on"),
    ("MCP_EXEC_SANDBOX", "1"),
    ("MCP_EXEC_SANDBOX", "readonly"),
    ("MCP_EXEC_SANDBOX", "read-only,roots"),
    ("MCP_EXEC_SANDBOX", "root"),
    ("MCP_EXEC_NETWORK", "maybe"),
    ("MCP_EXEC_NETWORK", "2"),
    ("MCP_EXEC_NETWORK", "offline-ish"),
    ("MCP_EXEC_RLIMITS", "cpu=abc"),
    ("MCP_EXEC_RLIMITS", "bogus=1"),
    ("MCP_EXEC_RLIMITS", "cpu"),
    ("MCP_EXEC_RLIMITS", "cpu=-1"),
    ("MCP_EXEC_RLIMITS", "cpu=1.5"),
    ("MCP_EXEC_RLIMITS", "nofile=4096x"),
    ("MCP_EXEC_RLIMITS", "as=4Q"),
    ("MCP_EXEC_RLIMITS", "=5"),
    ("MCP_EXEC_RLIMITS", "nofile="),
    ("MCP_EXEC_RLIMITS", "nofile=99999999999999999999999"),
    ("MCP_EXEC_RLIMITS", "fsize=1G;cpu=1"),
])
def test_bad_sandbox_setting_exits_2_naming_it(mcp_bin, var, value):
    assert_startup_refused({var: value, "MCP_EXEC_ROOTS": "/"} if var == "MCP_EXEC_SANDBOX" else {var: value}, var)


@pytest.mark.parametrize("env", [
    {"MCP_EXEC_SANDBOX": "off"},
    {"MCP_EXEC_SANDBOX": "read-only"},
    {"MCP_EXEC_SANDBOX": "roots", "MCP_EXEC_ROOTS": "/tmp"},
    {"MCP_EXEC_NETWORK": "on"},
    {"MCP_EXEC_NETWORK": "off"},
    {"MCP_EXEC_RLIMITS": "cpu=60,as=4G,nproc=512,fsize=1G,nofile=4096"},
    {"MCP_EXEC_RLIMITS": "core=unlimited,rss=1T,msgqueue=800K,sigpending=100,locks=10,nice=0,rtprio=0"},
], ids=lambda e: ",".join("%s=%s" % kv for kv in e.items()))
def test_good_sandbox_setting_starts(make_server, env):
    s = make_server(env=dict(env, SHELL=SH))
    assert out_of(s, "echo ok") == "ok\n"
