"""End-to-end tests of the policy settings.

What the policy promises, checked against a real server
process and written the way an attacker would probe it:

  MCP_EXEC_ALLOW       exact spelling of argv[0]; `command` only if the shell is listed
  MCP_EXEC_ROOTS       cwd (default: the first root) resolves, symlinks followed, inside one
  MCP_EXEC_ENV_DENY    names the `env` argument may not set; jobs never see MCP_EXEC_*
  MCP_EXEC_MAX_JOBS    running jobs per session
  MCP_EXEC_JOB_TTL,    finished, uncollected jobs forgotten after TTL / beyond N,
  MCP_EXEC_MAX_FINISHED  saying `unknown job_id: 7 (expired: ...)`
  MCP_EXEC_LAUNCHER    a JSON array prefixed to every job's argv
  setsid               every job leads a session of its own, with no controlling tty
  startup              every bad value exits 2 naming the variable
  descriptions         the policy in force is stated up front
  no settings          1.0 behaviour

The sandbox (MCP_EXEC_SANDBOX, MCP_EXEC_NETWORK) and MCP_EXEC_RLIMITS are not
covered here.

Directory fixtures are built under a fresh tempfile directory that is removed
afterwards.  Those paths exist on the host only: the tests that need them run
on the binary and pid1 targets (pid1 shares the host's filesystem) and skip
on the container target.
"""

import json
import os
import re
import shutil
import tempfile
import threading
import time

import pytest

from tests.helpers import (SLACK, TARGET, Server, assert_startup_refused, close_module_server, marker,
                           needs_host_files, policy_text, run_until_exit, wait_until)

SH = "/bin/sh"
SERVER_PATH = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def execute(s, args, timeout=30):
    """(raw tools/call result, decoded job result or None when it is a tool error)."""
    res = s.tool_raw("execute", args, timeout)
    if res.get("isError"):
        return res, None
    return res, json.loads(res["content"][0]["text"])


def stdout_of(s, args, timeout=30):
    """Run a blocking execute that must succeed; return its stdout text."""
    res, r = execute(s, args, timeout)
    assert r is not None, "expected the job to run, got a tool error: %s" % res["content"][0]["text"]
    assert r["state"] == "success", r
    return r["stdout"]["data"]


def refusal(s, args, timeout=30):
    """The text of execute's tool error; fails when the job ran instead."""
    res, r = execute(s, args, timeout)
    assert res.get("isError") is True, "expected a refusal (isError) for %r, got %r" % (args, r)
    return res["content"][0]["text"]


def names(text, word):
    """word appears in text as written or as a JSON/Go-quoted string."""
    return word in text or json.dumps(word)[1:-1] in text or word.strip() in text


def has_word(text, word):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(word), text) is not None


def raw_execute(s, arguments_json, timeout=30):
    """A tools/call execute whose arguments are sent exactly as the given
    JSON text (duplicate keys, escapes).  Returns the tools/call result, or
    None when the call was answered with a JSON-RPC error (invalid params:
    a refusal too, the job did not start)."""
    rid = s.new_id()
    line = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
            '"params":{"name":"execute","arguments":%s}}\n' % (rid, arguments_json))
    s.send_raw(line.encode("utf-8"))
    msg = s.response(rid, timeout)
    if "error" in msg:
        assert msg["error"].get("code") == -32602, msg
        return None
    return msg["result"]


def gated_job(s, **kw):
    """A nowait job that runs until its stdin is closed (see end_job)."""
    return s.job("exec cat >/dev/null", **kw)


def end_job(s, jid, timeout=20):
    s.tool("input", {"job_id": jid, "close": True})
    return s.until_done(jid, timeout)


def expired_text(s, jid, tool="status", timeout=10):
    """Poll `tool` on jid until it fails saying the job expired; return the text."""
    seen = []

    def gone():
        res = s.tool_raw(tool, {"job_id": jid} if tool != "wait" else {"job_ids": [jid], "timeout": 0})
        if res.get("isError"):
            return res["content"][0]["text"]
        seen.append(res["content"][0]["text"][:200])
        return None

    return wait_until(gone, timeout, lambda: "job %s expiring (last seen %r)" % (jid, seen[-1:]),
                      interval=0.05)


def assert_expired_message(text, jid):
    assert "unknown job_id: %s (expired" % jid in text, \
        "want `unknown job_id: %s (expired: ...)`, got %r" % (jid, text)


@pytest.fixture
def tmp():
    base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-policy-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def gone_marker():
    """A host path a refused job would have created; must still not exist."""
    path = marker()
    yield path
    try:
        os.unlink(path)
    except OSError:
        pass


def module_server(env):
    s = Server(env=env)
    return s


# ==========================================================================
# MCP_EXEC_ALLOW
# ==========================================================================

ALLOW = "git,printenv"


@pytest.fixture(scope="module")
def allow_srv(mcp_bin):
    s = module_server({"MCP_EXEC_ALLOW": ALLOW, "SHELL": SH})
    yield s
    close_module_server(s)


def assert_allow_refusal(text, program):
    assert names(text, program), "the refusal should name the program %r: %s" % (program, text)
    for entry in ALLOW.split(","):
        assert entry in text, "the refusal should list the allowed %r: %s" % (entry, text)


def test_allow_listed_program_runs_via_argv(allow_srv):
    out = stdout_of(allow_srv, {"argv": ["printenv", "ALLOW_PROBE"], "env": {"ALLOW_PROBE": "yes"}})
    assert out == "yes\n"


def test_allow_listed_git_runs_via_argv(allow_srv):
    if TARGET != "container" and shutil.which("git") is None:
        pytest.skip("git is not installed")
    res, r = execute(allow_srv, {"argv": ["git", "--version"]})
    assert r is not None, res
    if TARGET == "container" and r.get("start_error"):
        pytest.skip("the image has no git: %s" % r["start_error"])
    assert r["state"] == "success" and r["stdout"]["data"].startswith("git version"), r


@pytest.mark.parametrize("argv0", [
    "sh", "/bin/sh", "bash", "env", "xargs",
    "/usr/bin/git", "/bin/git", "./git", "../git", "usr/bin/git", "/usr/bin/../bin/git",
    "git ", " git", "git\t", "git\n", "GIT", "Git", "git/", "git.exe",
    "/usr/bin/printenv", "PRINTENV", "printenv ",
    # a matcher that looks for argv[0] inside the raw setting, or a prefix or
    # suffix of an entry, lets these through
    "git,printenv", "it", "gi", "print", "env,git",
    # NUL, look-alikes and width variants: no normalisation of any kind
    "git\u0000", "git\u0000/../sh", "g\u0456t", "\uff47\uff49\uff54", "git\u200b",
])
def test_allow_refuses_any_other_spelling(allow_srv, argv0):
    text = refusal(allow_srv, {"argv": [argv0, "--version"]})
    if "\u0000" in argv0:
        return   # refused as an invalid argv (no NUL in an exec argument): enough
    assert_allow_refusal(text, argv0)


def test_allow_refused_argv_creates_no_job(allow_srv):
    before = allow_srv.list_ids()
    refusal(allow_srv, {"argv": ["sh", "-c", "sleep 30"], "nowait": True})
    refusal(allow_srv, {"argv": ["/usr/bin/git", "status"], "nowait": True})
    assert allow_srv.list_ids() == before


def test_allow_sh_c_via_argv_does_not_run(allow_srv, gone_marker):
    """Only git (and printenv) is listed: `sh -c` through argv is refused and
    its command never runs."""
    needs_host_files()
    for argv in (["sh", "-c", "touch %s" % gone_marker],
                 ["/bin/sh", "-c", "touch %s" % gone_marker],
                 ["env", "sh", "-c", "touch %s" % gone_marker],
                 ["bash", "-c", "touch %s" % gone_marker]):
        refusal(allow_srv, {"argv": argv})
    assert not os.path.exists(gone_marker), "a refused argv ran"


def test_allow_refuses_command_when_the_shell_is_not_listed(allow_srv):
    for command in ("printenv HOME", "git --version", "echo hi"):
        text = refusal(allow_srv, {"command": command})
        assert SH in text, "the refusal should name the shell %s: %s" % (SH, text)
        for entry in ALLOW.split(","):
            assert entry in text, text


def test_allow_refused_command_does_not_run(allow_srv, gone_marker):
    needs_host_files()
    refusal(allow_srv, {"command": "touch %s" % gone_marker})
    refusal(allow_srv, {"command": "touch %s" % gone_marker, "nowait": True})
    assert not os.path.exists(gone_marker)


def test_allow_shell_listed_as_shell_spells_it_runs_command(make_server):
    s = make_server(env={"MCP_EXEC_ALLOW": "/bin/sh", "SHELL": "/bin/sh"})
    assert stdout_of(s, {"command": "echo ok"}) == "ok\n"
    # the argv spelling still has to match exactly
    assert stdout_of(s, {"argv": ["/bin/sh", "-c", "echo argv"]}) == "argv\n"
    text = refusal(s, {"argv": ["sh", "-c", "echo no"]})
    assert "/bin/sh" in text, text


def test_allow_bare_shell_spelling(make_server):
    s = make_server(env={"MCP_EXEC_ALLOW": "sh", "SHELL": "sh"})
    assert stdout_of(s, {"command": "echo bare"}) == "bare\n"


def test_allow_shell_by_its_resolved_path(make_server):
    """$SHELL=sh, the list names the path sh resolves to on the server's PATH."""
    needs_host_files()
    resolved = shutil.which("sh", path=SERVER_PATH)
    assert resolved, "no sh on PATH"
    s = make_server(env={"MCP_EXEC_ALLOW": resolved, "SHELL": "sh"})
    assert stdout_of(s, {"command": "echo resolved"}) == "resolved\n"


def test_allow_default_shell_when_shell_unset(make_server):
    if TARGET == "container":
        pytest.skip("the image decides its own SHELL")
    s = make_server(env={"MCP_EXEC_ALLOW": "/bin/sh", "SHELL": None})
    assert stdout_of(s, {"command": "echo default"}) == "default\n"


def test_allow_bare_sh_allows_the_shell_it_finds_on_path(make_server):
    """$SHELL=/bin/sh and `sh` on PATH is /bin/sh (or the same file): a listed
    bare sh allows commands (docs/policy-and-sandbox.md's own MCP_EXEC_ALLOW=git,grep,ls,sh
    refused every command)."""
    s = make_server(env={"MCP_EXEC_ALLOW": "sh", "SHELL": "/bin/sh"})
    assert stdout_of(s, {"command": "echo yes"}) == "yes\n"
    # the bare name is allowed through argv, spelled exactly; the path is not
    assert stdout_of(s, {"argv": ["sh", "-c", "echo yes"]}) == "yes\n"
    text = refusal(s, {"argv": ["/bin/sh", "-c", "echo no"]})
    assert "MCP_EXEC_ALLOW" in text, text


def test_allow_other_program_does_not_allow_the_shell(make_server):
    s = make_server(env={"MCP_EXEC_ALLOW": "ls", "SHELL": "/bin/sh"})
    text = refusal(s, {"command": "echo no"})
    assert "/bin/sh" in text, text


def _fake_programs(tmp, gone_marker):
    evil = os.path.join(tmp, "evil")
    os.mkdir(evil)
    for name in ("git", "printenv", "sh"):
        path = os.path.join(evil, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho pwned\n: > %s\n" % gone_marker)
        os.chmod(path, 0o755)
    return evil


@pytest.mark.parametrize("case", ["git-path", "printenv-path-first", "printenv-dot"])
def test_allow_env_path_cannot_swap_the_listed_program(make_server, tmp, gone_marker, case):
    """ATTACK: argv[0] spelled as listed, but the caller's env PATH points at
    a directory with a program of that name.

    execute's argv[0] is "looked up in the job's PATH", and MCP_EXEC_ALLOW
    says `git` is "looked up in PATH" without saying whose. Read as an
    attacker: if a caller-set PATH decides which file a listed name runs, the
    allow list decides nothing.  Accepted: a refusal, or the real program
    (looked up on the server's PATH), or a start failure; never the fake."""
    needs_host_files()
    evil = _fake_programs(tmp, gone_marker)
    s = make_server(env={"MCP_EXEC_ALLOW": ALLOW, "SHELL": SH})
    args = {
        "git-path": {"argv": ["git", "--version"], "env": {"PATH": evil}},
        "printenv-path-first": {"argv": ["printenv", "HOME"], "env": {"PATH": evil + ":" + SERVER_PATH}},
        "printenv-dot": {"argv": ["printenv", "HOME"], "env": {"PATH": "."}, "cwd": evil},
    }[case]
    res, r = execute(s, args)
    if r is not None:
        out = (r.get("stdout") or {}).get("data", "") + (r.get("stderr") or {}).get("data", "")
        assert "pwned" not in out, "a caller's PATH swapped the allowed program: %r" % r
    assert not os.path.exists(gone_marker), "the fake program ran"


def test_allow_env_path_cannot_swap_the_listed_shell(make_server, tmp, gone_marker):
    """ATTACK: the shell is listed as `sh`; a caller's PATH with a fake `sh`
    first must not make `command` run the fake (the shell is the server's)."""
    needs_host_files()
    evil = _fake_programs(tmp, gone_marker)
    s = make_server(env={"MCP_EXEC_ALLOW": "sh", "SHELL": "sh"})
    res, r = execute(s, {"command": "echo real", "env": {"PATH": evil + ":" + SERVER_PATH}})
    assert r is not None, res
    assert r["state"] == "success" and r["stdout"]["data"] == "real\n", r
    assert not os.path.exists(gone_marker), "the fake shell ran"


# ==========================================================================
# MCP_EXEC_ROOTS
# ==========================================================================

class Tree:
    """A directory layout for the roots tests:

    base/root/            first root          base/outside/
    base/root/sub/deeper  directories         base/sub/        (outside, named like root/sub)
    base/root/..dots      a name starting with two dots (inside: not a `..` segment)
    base/root/file        a regular file      base/rootx/      (a sibling sharing a prefix)
    base/root/in   -> sub           (symlink that stays inside)
    base/root/out  -> base/outside  (symlink pointing out)
    base/root/up   -> ..            (relative symlink to the parent)
    base/root/slash -> /
    base/root/loop -> loop
    base/root/dangling -> base/nosuch
    base/other/sub        second root
    base/link_root -> real_root,  base/real_root/sub   (a root that is itself a symlink)
    """

    def __init__(self, base):
        self.base = base
        j = lambda *p: os.path.join(base, *p)
        self.root, self.other, self.outside = j("root"), j("other"), j("outside")
        self.rootx, self.real_root, self.link_root = j("rootx"), j("real_root"), j("link_root")
        for d in ("root/sub/deeper", "root/..dots", "other/sub", "outside", "sub", "rootx", "real_root/sub"):
            os.makedirs(j(d))
        with open(j("root", "file"), "w") as f:
            f.write("not a directory\n")
        os.symlink("sub", j("root", "in"))
        os.symlink(self.outside, j("root", "out"))
        os.symlink("..", j("root", "up"))
        os.symlink("/", j("root", "slash"))
        os.symlink("loop", j("root", "loop"))
        os.symlink(j("nosuch"), j("root", "dangling"))
        os.symlink("real_root", self.link_root)
        self.roots = [self.root, self.other]


@pytest.fixture(scope="module")
def tree(mcp_bin):
    if TARGET == "container":
        pytest.skip("needs directories made on the host; a container has its own filesystem")
    base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-roots-"))
    os.chmod(base, 0o755)
    t = Tree(base)
    yield t
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def roots_srv(tree):
    s = module_server({"MCP_EXEC_ROOTS": "%s:%s" % (tree.root, tree.other), "SHELL": SH})
    yield s
    close_module_server(s)


def inside(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def assert_roots_refusal(text, tree):
    assert tree.root in text, "the refusal should name the roots: %s" % text


def test_roots_default_cwd_is_the_first_root(roots_srv, tree):
    assert stdout_of(roots_srv, {"command": "pwd -P"}) == tree.root + "\n"
    assert stdout_of(roots_srv, {"argv": ["pwd", "-P"]}) == tree.root + "\n"


@pytest.mark.parametrize("cwd,expected", [
    ("root", "root"),
    ("root/", "root"),
    ("root/.", "root"),
    ("root/sub", "root/sub"),
    ("root/sub/", "root/sub"),
    ("root//sub", "root/sub"),
    ("root/./sub", "root/sub"),
    ("root/sub/../sub", "root/sub"),
    ("root/sub/deeper/..", "root/sub"),
    ("root/in", "root/sub"),
    ("root/in/", "root/sub"),
    ("root/in/deeper", "root/sub/deeper"),
    ("root/up/root/sub", "root/sub"),    # out through a symlink and back in: resolves inside
    ("root/..dots", "root/..dots"),      # a check on "starts with .." would refuse it
    ("root/sub/../..dots/", "root/..dots"),
    ("other", "other"),
    ("other/sub/", "other/sub"),
])
def test_roots_cwd_inside_runs_there(roots_srv, tree, cwd, expected):
    out = stdout_of(roots_srv, {"command": "pwd -P", "cwd": os.path.join(tree.base, cwd)})
    assert out == os.path.join(tree.base, expected) + "\n"


@pytest.mark.parametrize("cwd", [
    "{base}", "{base}/", "/", "/tmp", "/etc",
    "{base}/outside", "{base}/sub",
    "{base}/rootx", "{base}/rootx/",                           # shares the root's prefix
    "{base}/root/..", "{base}/root/../", "{base}/root/../outside",
    "{base}/root/sub/../../outside", "{base}/root/./../outside",
    "{base}/root/out", "{base}/root/out/",                     # symlink pointing out
    "{base}/root/up", "{base}/root/up/", "{base}/root/up/outside",
    "{base}/root/in/../..", "{base}/root/in/../../outside",
    "{base}/root/slash", "{base}/root/slash/etc", "{base}/root/slash{base}/outside",
    "{base}/root/loop", "{base}/root/loop/",
    "/proc/self/cwd/..", "/proc/thread-self/cwd/..",
    "/proc/self/root{base}/outside", "/proc/self/root/",
    "..", "../..", "../outside", "../../../../../../..",
])
def test_roots_cwd_escape_refused(roots_srv, tree, gone_marker, cwd):
    cwd = cwd.format(base=tree.base)
    text = refusal(roots_srv, {"command": "pwd -P > %s" % gone_marker, "cwd": cwd})
    assert_roots_refusal(text, tree)
    assert not os.path.exists(gone_marker), "the refused job ran"


@pytest.mark.parametrize("cwd", [
    # relative spellings: relative to what is not specified; wherever they
    # land, the job's physical cwd must be inside a root
    "", ".", "sub", "root/sub", "in", "../root/sub", "./up/root",
    # the kernel resolves `..` after a symlink physically: root/out/.. is
    # base, so root/out/../sub is base/sub (outside), while a lexical clean
    # says root/sub (inside)
    "{base}/root/out/../sub", "{base}/root/up/../root",
    # lexically root/sub, but the kernel cannot enter root/sub/nosuch
    "{base}/root/sub/nosuch/..",
    # /proc/self is the server, or the job, depending on who resolves it
    "/proc/self/cwd", "/proc/self/cwd/.", "/proc/self/root{base}/root/sub",
    # a NUL cuts a C string: whatever was checked, the kernel sees the prefix
    "{base}/root/sub\u0000/../../outside", "{base}/outside\u0000{base}/root",
    # longer than PATH_MAX
    "{base}/root/" + "x" * 5000, "{base}/root/" + "sub/.." * 1000,
])
def test_roots_cwd_lands_inside_or_is_refused(roots_srv, tree, cwd):
    cwd = cwd.format(base=tree.base)
    res, r = execute(roots_srv, {"command": "pwd -P", "cwd": cwd})
    if r is None:
        assert_roots_refusal(res["content"][0]["text"], tree)
        return
    if r["state"] != "success":
        assert r.get("start_error"), r
        return
    where = r["stdout"]["data"].rstrip("\n")
    assert inside(where, tree.roots), "cwd %r ran the job in %s, outside %s" % (cwd, where, tree.roots)


def _flip_symlink(path, inside_dir, outside_dir, stop):
    """Retarget the symlink path between a directory inside and one outside."""
    n = 0
    while not stop.is_set():
        n += 1
        tmpname = "%s.%d" % (path, n)
        os.symlink(inside_dir if n % 2 else outside_dir, tmpname)
        os.replace(tmpname, path)


def _swap_dir(path, inside_dir, outside_dir, stop):
    """Turn the real directory path into a symlink to outside_dir and back."""
    while not stop.is_set():
        os.rename(path, path + ".real")
        os.symlink(outside_dir, path)
        os.unlink(path)
        os.rename(path + ".real", path)
        # leave the real directory in place a little longer, so that more
        # checks see it
        for _ in range(20):
            if stop.is_set():
                break
            os.stat(path)


@pytest.mark.parametrize("how", ["symlink-retargeted", "directory-swapped-for-symlink"])
def test_roots_cwd_swapped_while_jobs_start(roots_srv, tree, how):
    """ATTACK (time of check, time of use): while jobs start with cwd
    root/flip, something in the root (another job, say) keeps changing what
    that name is: a symlink retargeted between inside and outside, or a real
    directory briefly replaced by a symlink pointing out.  A server that
    resolves and checks a path, and then has the kernel resolve it again at
    chdir, can be raced into starting a job outside every root.  Bounded by
    count and time; a pass is no proof, a failure is."""
    flip = os.path.join(tree.root, "flip")
    stop = threading.Event()
    if how == "symlink-retargeted":
        os.symlink(tree.root + "/sub", flip)
        target = _flip_symlink
    else:
        os.mkdir(flip)
        target = _swap_dir
    t = threading.Thread(target=target, args=(flip, tree.root + "/sub", tree.outside, stop), daemon=True)
    t.start()
    escaped, ran, refused = [], 0, 0
    try:
        deadline = time.monotonic() + 20
        for _ in range(600):
            if time.monotonic() > deadline or len(escaped) >= 3:
                break
            res, r = execute(roots_srv, {"command": "pwd -P", "cwd": flip})
            if r is None:
                refused += 1
                continue
            if r["state"] != "success":
                continue
            ran += 1
            where = r["stdout"]["data"].rstrip("\n")
            if not inside(where, tree.roots):
                escaped.append(where)
    finally:
        stop.set()
        t.join(5)
        for name in os.listdir(tree.root):
            if name.startswith("flip"):
                path = os.path.join(tree.root, name)
                if os.path.islink(path) or not os.path.isdir(path):
                    os.unlink(path)
                else:
                    os.rmdir(path)
    assert not escaped, "%d job(s) started outside the roots, in %s (%d ran, %d refused)" % (
        len(escaped), sorted(set(escaped)), ran, refused)


def test_roots_argv_mode_is_checked_too(roots_srv, tree, gone_marker):
    text = refusal(roots_srv, {"argv": ["touch", gone_marker], "cwd": tree.outside})
    assert_roots_refusal(text, tree)
    text = refusal(roots_srv, {"argv": ["touch", gone_marker], "cwd": tree.outside, "nowait": True})
    assert_roots_refusal(text, tree)
    assert not os.path.exists(gone_marker)
    assert stdout_of(roots_srv, {"argv": ["pwd", "-P"], "cwd": tree.root + "/in"}) == tree.root + "/sub\n"


def test_roots_refusal_names_every_root(roots_srv, tree):
    text = refusal(roots_srv, {"command": "true", "cwd": tree.outside})
    assert tree.root in text and tree.other in text, text


@pytest.mark.parametrize("cwd", ["root/file", "root/file/", "root/nosuch", "root/dangling", "root/in/nosuch"])
def test_roots_cwd_that_is_not_a_directory_does_not_run(roots_srv, tree, gone_marker, cwd):
    """Inside a root but no directory there: a refusal or a start failure,
    never a job running somewhere else."""
    res, r = execute(roots_srv, {"command": "pwd -P > %s" % gone_marker, "cwd": os.path.join(tree.base, cwd)})
    if r is not None:
        assert r["state"] == "error" and r.get("start_error"), r
    assert not os.path.exists(gone_marker), "the job ran"


def test_roots_refused_cwd_creates_no_job(roots_srv, tree):
    before = roots_srv.list_ids()
    refusal(roots_srv, {"command": "sleep 30", "cwd": tree.outside, "nowait": True})
    assert roots_srv.list_ids() == before


def test_roots_root_that_is_a_symlink(make_server, tree):
    s = make_server(env={"MCP_EXEC_ROOTS": tree.link_root, "SHELL": SH})
    assert stdout_of(s, {"command": "pwd -P"}) == tree.real_root + "\n"
    for cwd in (tree.link_root, tree.link_root + "/", tree.link_root + "/sub", tree.real_root + "/sub"):
        out = stdout_of(s, {"command": "pwd -P", "cwd": cwd})
        assert inside(out.rstrip("\n"), [tree.real_root]), (cwd, out)
    for cwd in (tree.link_root + "/..", tree.base, tree.root, tree.outside):
        text = refusal(s, {"command": "true", "cwd": cwd})
        assert tree.link_root in text or tree.real_root in text, text


def test_roots_root_with_a_trailing_slash(make_server, tree):
    s = make_server(env={"MCP_EXEC_ROOTS": tree.root + "/", "SHELL": SH})
    assert stdout_of(s, {"command": "pwd -P"}) == tree.root + "\n"
    assert stdout_of(s, {"command": "pwd -P", "cwd": tree.root + "/sub"}) == tree.root + "/sub\n"
    assert stdout_of(s, {"command": "pwd -P", "cwd": tree.root}) == tree.root + "\n"
    for cwd in (tree.rootx, tree.rootx + "/", tree.base):
        refusal(s, {"command": "true", "cwd": cwd})


def test_roots_slash_allows_everything(make_server):
    """ROOTS=/ : a `root + "/"` prefix test would refuse every cwd."""
    s = make_server(env={"MCP_EXEC_ROOTS": "/", "SHELL": SH})
    assert stdout_of(s, {"command": "pwd -P"}) == "/\n"
    assert stdout_of(s, {"command": "pwd -P", "cwd": "/"}) == "/\n"
    assert stdout_of(s, {"command": "pwd -P", "cwd": "/etc"}) == "/etc\n"


@pytest.mark.parametrize("value", ["/no/such/dir", "/etc/passwd", "/tmp:/no/such/dir", "/no/such/dir:/tmp"])
def test_roots_bad_root_stops_startup(mcp_bin, value):
    assert_startup_refused({"MCP_EXEC_ROOTS": value}, "MCP_EXEC_ROOTS")


def test_roots_root_that_is_a_dangling_symlink_stops_startup(mcp_bin, tmp):
    needs_host_files()
    link = os.path.join(tmp, "dangling")
    os.symlink(os.path.join(tmp, "nosuch"), link)
    p = run_until_exit({"MCP_EXEC_ROOTS": link})
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2 and "MCP_EXEC_ROOTS" in err, (p.returncode, err)


# ==========================================================================
# MCP_EXEC_ENV_DENY and the server's own variables
# ==========================================================================

DENY = ["LD_PRELOAD", "SECRET_TOKEN", "PATH"]


@pytest.fixture(scope="module")
def deny_srv(mcp_bin):
    s = module_server({"MCP_EXEC_ENV_DENY": ",".join(DENY), "SHELL": SH})
    yield s
    close_module_server(s)


@pytest.mark.parametrize("name", DENY)
def test_env_deny_refuses_a_denied_name(deny_srv, gone_marker, name):
    text = refusal(deny_srv, {"command": "touch %s" % gone_marker, "env": {name: "/x"}})
    assert name in text, "the refusal should name %s: %s" % (name, text)
    refusal(deny_srv, {"command": "touch %s" % gone_marker, "env": {name: "/x"}, "nowait": True})
    if TARGET != "container":
        assert not os.path.exists(gone_marker), "the refused job ran"


def test_env_deny_refusal_names_every_denied_name_asked(deny_srv):
    text = refusal(deny_srv, {"command": "true",
                              "env": {"FINE": "1", "LD_PRELOAD": "a", "SECRET_TOKEN": "b"}})
    assert "LD_PRELOAD" in text and "SECRET_TOKEN" in text, text


def test_env_deny_empty_value_is_still_setting(deny_srv):
    text = refusal(deny_srv, {"command": "true", "env": {"SECRET_TOKEN": ""}})
    assert "SECRET_TOKEN" in text, text


def test_env_deny_other_names_still_pass(deny_srv):
    assert stdout_of(deny_srv, {"command": "printenv FINE", "env": {"FINE": "ok"}}) == "ok\n"
    assert stdout_of(deny_srv, {"argv": ["printenv", "FINE"], "env": {"FINE": "ok"}}) == "ok\n"


def test_env_deny_is_case_sensitive(deny_srv):
    """Decision: the spec's list is of variable *names*, and on Linux names
    are case-sensitive: `path` is another variable than `PATH`, and no
    program reads `ld_preload` as `LD_PRELOAD`.  So the exact spellings are
    denied and other cases pass; what matters is that they do not change the
    denied variables the job sees."""
    out = stdout_of(deny_srv, {
        "command": 'printf "%s|%s|%s|%s\\n" "$path" "$ld_preload" "$Secret_Token" "${LD_PRELOAD-unset}"; '
                   'printenv PATH',
        "env": {"path": "/nowhere", "ld_preload": "/evil.so", "Secret_Token": "s"}})
    first, path = out.split("\n")[:2]
    assert first == "/nowhere|/evil.so|s|unset", out
    assert path and path != "/nowhere", out


@pytest.mark.parametrize("name", ["SECRET_TOKEN=x", "LD_PRELOAD=/evil.so", "SECRET_TOKEN\u0000", "PATH=/evil"])
def test_env_deny_name_smuggled_with_equals_or_nul(deny_srv, name):
    """ATTACK: an env name carrying `=` (or a NUL) becomes the entry
    `SECRET_TOKEN=x=...` in the job's environment, which sets SECRET_TOKEN.
    Accepted: a refusal (any tool error), or a job that does not see the
    denied variable; never a job that does."""
    denied = name.split("=")[0].rstrip("\u0000")
    res, r = execute(deny_srv, {
        "command": 'if [ "${%s+set}" = set ]; then echo "LEAKED=$%s"; else echo clean; fi' % (denied, denied)
        if denied != "PATH" else 'echo "$PATH"',
        "env": {name: "y"}})
    if r is None or r["state"] != "success":
        return
    out = r["stdout"]["data"]
    if denied == "PATH":
        assert "/evil" not in out, "a smuggled name set PATH: %r" % r
    else:
        assert out == "clean\n", "a smuggled name set %s: %r" % (denied, r)


def test_env_deny_duplicate_keys(deny_srv):
    """ATTACK: JSON with a duplicated key, an escaped name, or `env` given
    twice.  Whatever copy a parser keeps, a refusal is fine; a job that runs
    must not see a denied variable."""
    probe = 'echo \\"[${SECRET_TOKEN-unset}][${LD_PRELOAD-unset}]\\"'
    for env_json in ('"env":{"SECRET_TOKEN":"a","SECRET_TOKEN":"b"}',
                     '"env":{"FINE":"1","LD_PRELOAD":"x","FINE":"2"}',
                     '"env":{"\\u0053ECRET_TOKEN":"escaped"}',
                     '"env":{"LD_PRELOAD":"x","LD_PRELOAD":"x"}',
                     '"env":{"FINE":"1"},"env":{"SECRET_TOKEN":"late"}',
                     '"env":{"SECRET_TOKEN":"early"},"env":{"FINE":"1"}'):
        args = '{"command":"%s",%s}' % (probe, env_json)
        res = raw_execute(deny_srv, args)
        if res is None or res.get("isError"):
            continue
        r = json.loads(res["content"][0]["text"])
        assert r["state"] == "success" and r["stdout"]["data"] == "[unset][unset]\n", \
            "a denied name got through with %s: %r" % (args, r)


def test_env_deny_job_does_not_see_the_servers_own_settings(deny_srv):
    out = stdout_of(deny_srv, {"command": "env"})
    assert "MCP_EXEC_" not in out, out


def test_jobs_never_see_mcp_exec_variables(make_server):
    s = make_server(env={"MCP_EXEC_DEBUG": "1", "MCP_EXEC_DEFAULT_TIMEOUT": "61",
                         "MCP_EXEC_PROGRESS_INTERVAL": "9", "MCP_EXEC_MAX_JOBS": "50", "SHELL": SH})
    for args in ({"command": "env"}, {"argv": ["env"]}, {"command": "cat /proc/$$/environ | tr '\\0' '\\n'"},
                 {"command": "sh -c env"}, {"argv": ["env"], "env": {"FINE": "1"}}):
        out = stdout_of(s, args)
        assert "MCP_EXEC_" not in out, (args, out)
        assert "PATH=" in out, (args, out)   # the rest of the environment is inherited
    # a nowait job, read with output
    # Waits for the whole listing (its end line), not for PATH= alone: a
    # variable printed after PATH would otherwise go unchecked.
    jid = s.job("env; echo env-listed; exec cat >/dev/null")
    out = s.poll_output(jid, lambda d: "PATH=" in d and d.endswith("env-listed\n"))["stdout"]["data"]
    s.cleanup(jid)
    assert "MCP_EXEC_" not in out, out


def test_env_deny_bad_settings_stop_startup(mcp_bin):
    for value in ("A,,B", ","):
        p = run_until_exit({"MCP_EXEC_ENV_DENY": value})
        err = p.stderr.decode("utf-8", "replace")
        # an empty item is a typo; if a build accepts it, it must at least run
        if p.returncode != 0:
            assert p.returncode == 2 and "MCP_EXEC_ENV_DENY" in err, (value, p.returncode, err)


# ==========================================================================
# Every way of starting a job goes through the policy
# ==========================================================================

@pytest.mark.parametrize("extra", [{"tty": True}, {"tty": {"rows": 10, "cols": 40}}, {"yield_after": 5},
                                   {"time_limit": 5}, {"nowait": True, "close_stdin": True, "stdin": "x"}])
def test_other_execute_paths_apply_the_policy(make_server, tree, gone_marker, extra):
    """ATTACK: tty jobs, yielding and time-limited calls may take another
    start path; each must still be refused where the policy says so.  (A
    build without `tty` refuses it as an unknown argument: also no job.)"""
    s = make_server(env={"MCP_EXEC_ALLOW": "printenv", "MCP_EXEC_ROOTS": tree.root,
                         "MCP_EXEC_ENV_DENY": "SECRET_TOKEN", "SHELL": SH})
    touch = ["touch", gone_marker]
    for args in ({"argv": ["sh", "-c", "touch %s" % gone_marker]},
                 {"command": "touch %s" % gone_marker},
                 {"argv": ["printenv"], "cwd": tree.outside},
                 {"argv": ["printenv"], "env": {"SECRET_TOKEN": "x"}},
                 {"argv": touch}):
        args = dict(args, **extra)
        refusal(s, args)
    assert not os.path.exists(gone_marker)
    assert s.list_ids() == []


# ==========================================================================
# MCP_EXEC_MAX_JOBS
# ==========================================================================

def assert_limit_refusal(text, limit, running):
    assert has_word(text, str(limit)), "the refusal should name the limit %d: %s" % (limit, text)
    for jid in running:
        assert has_word(text, jid), "the refusal should name running job %s: %s" % (jid, text)


def test_max_jobs_refuses_beyond_the_limit_naming_it(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "2", "SHELL": SH})
    a, b = gated_job(s), gated_job(s)
    try:
        for args in ({"command": "echo third", "nowait": True},
                     {"command": "echo third"},                     # blocking: refused, not queued
                     {"argv": ["echo", "third"], "nowait": True}):
            t0 = time.monotonic()
            text = refusal(s, args, timeout=10)
            assert time.monotonic() - t0 < 5 + SLACK, "a refusal must not wait for a slot"
            assert_limit_refusal(text, 2, [a, b])
        assert sorted(s.list_ids()) == sorted([a, b]), "a refused job must leave no trace"
        # one ends, uncollected: finished jobs do not count against the limit
        end_job(s, a)
        c = gated_job(s)
        text = refusal(s, {"command": "true", "nowait": True})
        assert_limit_refusal(text, 2, [b, c])
        assert not has_word(text, a), "a finished job is not running: %s" % text
        s.cleanup(b)
        assert stdout_of(s, {"command": "echo fourth"}) == "fourth\n"
        s.cleanup(c)
    finally:
        s.cleanup(a, b)


def test_max_jobs_counts_a_blocking_execute(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "1", "SHELL": SH})
    rid = s.tool_start("execute", {"command": "exec sleep 300"})
    ids = wait_until(lambda: s.list_ids(), 10, "the blocking job appearing in list_jobs")
    text = refusal(s, {"command": "echo no", "nowait": True})
    assert_limit_refusal(text, 1, ids)
    k = s.tool("kill", {"job_id": ids[0], "signal": "KILL"})
    assert k["terminated"] is True, k
    s.tool_response(rid, 20)   # the blocking call ends with the job
    assert stdout_of(s, {"command": "echo freed"}) == "freed\n"


def test_max_jobs_start_failures_and_kills_free_their_slot(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "1", "SHELL": SH})
    for _ in range(5):
        res, r = execute(s, {"command": "true", "cwd": "/no/such/dir", "nowait": True})
        assert r is not None and r.get("start_error"), res
        res, r = execute(s, {"argv": ["/no/such/program"], "nowait": True})
        assert r is not None and r.get("start_error"), res
    for _ in range(5):
        jid = gated_job(s)
        refusal(s, {"command": "true", "nowait": True})
        assert s.tool("kill", {"job_id": jid, "signal": "KILL"})["terminated"] is True
    for _ in range(3):
        r = s.tool("execute", {"command": "exec sleep 30", "time_limit": 0.2})
        assert r.get("timed_out") is True, r
    assert stdout_of(s, {"command": "echo still-one-slot"}) == "still-one-slot\n"


def test_max_jobs_holds_under_concurrent_starts(make_server):
    """ATTACK: many nowait executes at once; the limit must hold exactly."""
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "2", "SHELL": SH})
    rids = [s.tool_start("execute", {"command": "exec cat >/dev/null", "nowait": True}) for _ in range(8)]
    started, refused = [], []
    for rid in rids:
        res = s.tool_response(rid, 20)
        if res.get("isError"):
            refused.append(res["content"][0]["text"])
        else:
            started.append(json.loads(res["content"][0]["text"])["job_id"])
    try:
        assert len(started) == 2 and len(refused) == 6, (started, refused)
        running = [j["job_id"] for j in s.tool("list_jobs")["jobs"] if j["state"] == "running"]
        assert sorted(running) == sorted(started)
    finally:
        s.cleanup(*started)


def test_max_jobs_cancelled_execute_frees_its_slot(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "1", "SHELL": SH})
    for _ in range(3):
        rid = s.tool_start("execute", {"command": "exec sleep 300"})
        wait_until(lambda: s.list_ids(), 10, "the blocking job appearing in list_jobs")
        s.cancel(rid)
        msg = s.response(rid, 20)
        assert msg.get("error", {}).get("code") == -32800, msg
        wait_until(lambda: not s.list_ids(), 10, "the cancelled job leaving list_jobs")
        assert stdout_of(s, {"command": "echo next"}) == "next\n"


def test_max_jobs_counts_a_yielded_execute(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "1", "SHELL": SH})
    r = s.tool("execute", {"command": "exec cat >/dev/null", "yield_after": 0.2})
    assert r.get("yielded") is True and r["state"] == "running", r
    text = refusal(s, {"command": "true"})
    assert_limit_refusal(text, 1, [r["job_id"]])
    end_job(s, r["job_id"])
    assert stdout_of(s, {"command": "echo freed"}) == "freed\n"


def test_max_jobs_zero_is_no_limit(make_server):
    s = make_server(env={"MCP_EXEC_MAX_JOBS": "0", "SHELL": SH})
    ids = [gated_job(s) for _ in range(10)]
    try:
        assert len(set(ids)) == 10
    finally:
        s.cleanup(*ids)


# ==========================================================================
# MCP_EXEC_JOB_TTL and MCP_EXEC_MAX_FINISHED
# ==========================================================================

TTL = 1.0


def test_job_ttl_forgets_a_finished_uncollected_job(make_server):
    s = make_server(env={"MCP_EXEC_JOB_TTL": str(TTL), "SHELL": SH})
    t0 = time.monotonic()
    jid = s.job("echo done")
    st = s.until_done(jid)
    assert st["state"] == "success", st
    assert jid in s.list_ids()
    text = expired_text(s, jid, timeout=TTL + 5 + SLACK)
    took = time.monotonic() - t0
    assert took >= TTL - 0.05, "forgotten %.2fs after it started, before the TTL of %ss" % (took, TTL)
    assert_expired_message(text, jid)
    assert jid not in s.list_ids(), "list_jobs must drop an expired job"


def test_job_ttl_every_tool_says_expired(make_server):
    s = make_server(env={"MCP_EXEC_JOB_TTL": str(TTL), "SHELL": SH})
    jid = s.job("echo done")
    s.until_done(jid)
    expired_text(s, jid, timeout=TTL + 5 + SLACK)
    live = gated_job(s)
    try:
        for tool, args in (("status", {"job_id": jid}),
                           ("output", {"job_id": jid, "stdout": "all"}),
                           ("input", {"job_id": jid, "data": "x"}),
                           ("kill", {"job_id": jid}),
                           ("wait", {"job_ids": [jid], "timeout": 0}),
                           ("wait", {"job_ids": [live, jid], "timeout": 0})):
            text = s.tool_err(tool, args)
            assert_expired_message(text, jid)
        assert s.status(live)["state"] == "running", "a failed wait must leave the other job alone"
        # 1.1: a job_id may be a JSON integer; 7 means "7"
        if jid.isdigit():
            assert_expired_message(s.tool_err("status", {"job_id": int(jid)}), jid)
            assert_expired_message(s.tool_err("wait", {"job_ids": [int(jid)], "timeout": 0}), jid)
    finally:
        s.cleanup(live)
    # an id that never existed is unknown, not expired
    text = s.tool_err("status", {"job_id": "987654"})
    assert "unknown job_id" in text and "expired" not in text, text


def test_job_ttl_never_expires_a_running_job(make_server):
    s = make_server(env={"MCP_EXEC_JOB_TTL": str(TTL), "SHELL": SH})
    running = gated_job(s)
    clock = s.job("true")            # started after `running`, finishes at once
    s.until_done(clock)
    expired_text(s, clock, timeout=TTL + 5 + SLACK)
    # `running` has now run longer than the TTL
    assert s.status(running)["state"] == "running"
    assert running in s.list_ids()
    # the TTL counts from the end: just finished, it is still there
    end_job(s, running)
    r = s.collect(running)
    assert r["state"] == "success", r


def test_job_ttl_collected_before_expiry_is_delivered(make_server):
    s = make_server(env={"MCP_EXEC_JOB_TTL": "30", "SHELL": SH})
    jid = s.job("echo kept")
    s.until_done(jid)
    assert s.collect(jid)["stdout"]["data"] == "kept\n"


def test_max_finished_forgets_the_oldest(make_server):
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "2", "SHELL": SH})
    ids = []
    for n in range(1, 5):
        jid = s.job("echo %d" % n)
        s.until_done(jid)
        ids.append(jid)
    for old in ids[:2]:
        assert_expired_message(expired_text(s, old, timeout=5), old)
    assert s.list_ids() == ids[2:]
    for n, jid in zip((3, 4), ids[2:]):
        assert s.collect(jid)["stdout"]["data"] == "%d\n" % n


def test_max_finished_holds_for_jobs_that_end_at_once(make_server):
    """Many jobs that end as soon as they start, one after the other, with
    MCP_EXEC_MAX_FINISHED=1: after each, at most one finished job is left
    waiting (a short settling time allowed), never two for good."""
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "1", "SHELL": SH})
    over = []
    for n in range(300):
        jid = s.job("true")
        s.until_done(jid)
        seen = []

        def at_most_one():
            jobs = s.tool("list_jobs")["jobs"]
            seen[:] = [j for j in jobs if j["state"] != "running"]
            return len(seen) <= 1

        try:
            wait_until(at_most_one, 2, "at most one finished job")
        except AssertionError:
            over.append((jid, list(seen)))
            if len(over) >= 3:
                break
    assert not over, "more finished jobs kept than MCP_EXEC_MAX_FINISHED=1: %r" % over


def test_max_finished_does_not_count_running_jobs(make_server):
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "1", "SHELL": SH})
    running = [gated_job(s) for _ in range(3)]
    try:
        a = s.job("echo a")
        s.until_done(a)
        b = s.job("echo b")
        s.until_done(b)
        assert_expired_message(expired_text(s, a, timeout=5), a)
        for jid in running:
            assert s.status(jid)["state"] == "running"
        assert s.list_ids() == running + [b]
        assert s.collect(b)["stdout"]["data"] == "b\n"
    finally:
        s.cleanup(*running)


def test_tiny_ttl_never_takes_a_result_from_a_call_collecting_it(make_server):
    """A blocking execute or a blocked wait is collecting its job: however
    small the TTL, it gets the result (exactly once), never `expired`."""
    s = make_server(env={"MCP_EXEC_JOB_TTL": "0.000001", "SHELL": SH})
    for n in range(50):
        assert stdout_of(s, {"command": "echo %d" % n}) == "%d\n" % n
    for _ in range(10):
        jid = gated_job(s)
        rid = s.tool_start("wait", {"job_ids": [jid], "timeout": 20})
        s.roundtrip()
        s.tool("input", {"job_id": jid, "close": True})
        res = s.tool_response(rid, 30)
        assert not res.get("isError"), res
        assert json.loads(res["content"][0]["text"])[0]["state"] == "success", res


def test_tiny_ttl_forgets_every_job_that_ends_at_once(make_server):
    """Jobs that end the moment they start, under a TTL far below the time a
    start takes: every one is forgotten all the same, none stays for good
    (a job can end before the server has filed it)."""
    s = make_server(env={"MCP_EXEC_JOB_TTL": "0.000000001", "SHELL": SH})
    for _ in range(300):
        s.job("true")
    left = []

    def none_left():
        left[:] = s.tool("list_jobs")["jobs"]
        return not left

    wait_until(none_left, 5, lambda: "every finished job expiring (left: %r)" % left[:10])


def test_max_finished_never_takes_a_result_from_a_blocking_execute(make_server):
    """Blocking executes finishing together, MCP_EXEC_MAX_FINISHED=1: each
    one's result is delivered to it, not forgotten for the next."""
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "1", "SHELL": SH})
    for _ in range(5):
        rids = [(n, s.tool_start("execute", {"command": "echo %d" % n})) for n in range(8)]
        for n, rid in rids:
            res = s.tool_response(rid, 30)
            assert not res.get("isError"), res
            assert json.loads(res["content"][0]["text"])["stdout"]["data"] == "%d\n" % n


def test_max_finished_and_ttl_leave_kept_results_alone(make_server):
    """A result cut to fit the reply budget was delivered (collected); its
    job stays readable for MCP_EXEC_KEPT_SECONDS, not forgotten as an
    uncollected one."""
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "1", "MCP_EXEC_JOB_TTL": str(TTL), "SHELL": SH})
    r = s.tool("execute", {"command": "head -c 200000 /dev/zero | tr '\\0' a", "max_reply_bytes": 4096})
    assert r.get("kept") is True, {k: v for k, v in r.items() if k != "stdout"}
    for n in range(3):
        jid = s.job("echo %d" % n)
        s.until_done(jid)
    clock = s.job("true")
    s.until_done(clock)
    expired_text(s, clock, timeout=TTL + 5 + SLACK)    # the TTL has passed
    assert s.status(r["job_id"])["state"] == "success"


def test_ttl_and_max_finished_together(make_server):
    s = make_server(env={"MCP_EXEC_MAX_FINISHED": "1", "MCP_EXEC_JOB_TTL": str(TTL), "SHELL": SH})
    a = s.job("true")
    s.until_done(a)
    b = s.job("true")
    s.until_done(b)
    assert_expired_message(expired_text(s, a, timeout=5), a)
    assert_expired_message(expired_text(s, b, timeout=TTL + 5 + SLACK), b)
    assert s.list_ids() == []


# ==========================================================================
# MCP_EXEC_LAUNCHER
# ==========================================================================

def test_launcher_prefixes_command_and_argv_jobs(make_server):
    s = make_server(env={"MCP_EXEC_LAUNCHER": '["env", "LAUNCHED=1"]', "SHELL": SH})
    assert stdout_of(s, {"command": "echo $LAUNCHED"}) == "1\n"
    assert stdout_of(s, {"argv": ["printenv", "LAUNCHED"]}) == "1\n"
    assert stdout_of(s, {"argv": ["sh", "-c", "echo $LAUNCHED$OWN"], "env": {"OWN": "2"}}) == "12\n"
    jid = s.job("echo $LAUNCHED")
    s.until_done(jid)
    assert s.collect(jid)["stdout"]["data"] == "1\n"
    out = stdout_of(s, {"command": "env"})
    assert "MCP_EXEC_" not in out, "the launcher is part of the job: no MCP_EXEC_* for it either"


def test_launcher_receives_the_jobs_whole_argv(make_server):
    show = 'for a in "$@"; do printf "<%s>" "$a"; done'
    s = make_server(env={"MCP_EXEC_LAUNCHER": json.dumps(["/bin/sh", "-c", show, "launcher"]),
                         "SHELL": SH})
    assert stdout_of(s, {"command": "echo hi"}) == "</bin/sh><-c><echo hi>"
    out = stdout_of(s, {"argv": ["printf", "x y", "$HOME", ""]})
    first, rest = out.split(">", 1)
    assert first in ("<printf",) or first.endswith("/printf"), out
    assert rest == "<x y><$HOME><>", out


def test_launcher_with_allow_checks_the_jobs_program(make_server):
    s = make_server(env={"MCP_EXEC_LAUNCHER": '["env", "LAUNCHED=1"]',
                         "MCP_EXEC_ALLOW": "printenv", "SHELL": SH})
    assert stdout_of(s, {"argv": ["printenv", "LAUNCHED"]}) == "1\n"
    text = refusal(s, {"argv": ["env"]})
    assert "env" in text and "printenv" in text, text
    refusal(s, {"command": "echo $LAUNCHED"})


def test_launcher_jobs_keep_their_session_and_kill(make_server):
    s = make_server(env={"MCP_EXEC_LAUNCHER": '["env", "LAUNCHED=1"]', "SHELL": SH})
    jid = s.job("sleep 300 & echo $!; wait")
    pid = int(s.poll_output(jid, lambda d: d.endswith("\n"))["stdout"]["data"])
    k = s.tool("kill", {"job_id": jid})
    assert k["terminated"] is True, k
    s.wait_proc_gone(pid)


@pytest.mark.parametrize("value", ["[1]", "not json", '{"argv": ["env"]}', '"env"', '["env", 1]',
                                   "null", '[["env"]]', '["env"', "[null]"])
def test_launcher_bad_json_stops_startup(mcp_bin, value):
    assert_startup_refused({"MCP_EXEC_LAUNCHER": value}, "MCP_EXEC_LAUNCHER")


# ==========================================================================
# Jobs lead a session of their own
# ==========================================================================

PROBE = "echo $$; cut -d' ' -f5,6,7 /proc/$$/stat; tty || true"


def check_session(out):
    pid, ids, tty = out.split("\n")[:3]
    pgid, sid, tty_nr = ids.split()
    assert pgid == pid, "the job's process group should be its pid: %r" % out
    assert sid == pid, "the job should lead a session of its own (setsid): %r" % out
    assert tty_nr == "0", "the job should have no controlling terminal: %r" % out
    assert tty == "not a tty", out


@pytest.fixture(scope="module")
def plain_srv(mcp_bin):
    s = module_server({"SHELL": SH})
    yield s
    close_module_server(s)


def test_job_leads_its_own_session(plain_srv):
    check_session(stdout_of(plain_srv, {"command": PROBE}))
    check_session(stdout_of(plain_srv, {"argv": ["sh", "-c", PROBE]}))
    jid = plain_srv.job(PROBE)
    plain_srv.until_done(jid)
    check_session(plain_srv.collect(jid)["stdout"]["data"])


def test_job_sessions_are_distinct(plain_srv):
    a = stdout_of(plain_srv, {"command": "cut -d' ' -f6 /proc/$$/stat"})
    b = stdout_of(plain_srv, {"command": "cut -d' ' -f6 /proc/$$/stat"})
    assert a != b, (a, b)


def test_kill_still_kills_the_whole_group(plain_srv):
    jid = plain_srv.job("sleep 300 & echo $! $$; cut -d' ' -f6 /proc/$!/stat; wait")
    out = plain_srv.poll_output(jid, lambda d: d.count("\n") >= 2)["stdout"]["data"]
    (bg, job), sid = out.split("\n")[0].split(), out.split("\n")[1]
    assert sid == job, "the background child is in the job's session: %r" % out
    k = plain_srv.tool("kill", {"job_id": jid})
    assert k["terminated"] is True and k["result"]["signal"] == "terminated", k
    plain_srv.wait_proc_gone(int(bg))


# ==========================================================================
# Startup validation
# ==========================================================================

@pytest.mark.parametrize("var,value", [
    ("MCP_EXEC_MAX_JOBS", "-1"),
    ("MCP_EXEC_MAX_JOBS", "x"),
    ("MCP_EXEC_MAX_JOBS", "1.5"),
    ("MCP_EXEC_MAX_JOBS", "2 jobs"),
    ("MCP_EXEC_JOB_TTL", "x"),
    ("MCP_EXEC_JOB_TTL", "-1"),
    ("MCP_EXEC_JOB_TTL", "NaN"),
    ("MCP_EXEC_JOB_TTL", "10s"),
    ("MCP_EXEC_MAX_FINISHED", "-1"),
    ("MCP_EXEC_MAX_FINISHED", "many"),
    ("MCP_EXEC_ROOTS", "/no/such/dir"),
    ("MCP_EXEC_LAUNCHER", "[1]"),
    ("MCP_EXEC_LAUNCHER", "{"),
])
def test_bad_policy_setting_exits_2_naming_it(mcp_bin, var, value):
    assert_startup_refused({var: value}, var)


@pytest.mark.parametrize("var,value", [
    ("MCP_EXEC_MAX_JOBS", "3"), ("MCP_EXEC_MAX_JOBS", "0"), ("MCP_EXEC_JOB_TTL", "0.5"),
    ("MCP_EXEC_JOB_TTL", "0"), ("MCP_EXEC_MAX_FINISHED", "10"), ("MCP_EXEC_ALLOW", "git"),
    ("MCP_EXEC_ROOTS", "/"), ("MCP_EXEC_ENV_DENY", "PATH"), ("MCP_EXEC_LAUNCHER", '["env"]'),
])
def test_good_policy_setting_starts(make_server, var, value):
    s = make_server(env={var: value})
    assert s.result("ping") == {}


# ==========================================================================
# The policy is stated up front
# ==========================================================================

def test_policy_stated_in_descriptions_or_instructions(make_server):
    plain = policy_text(make_server(env={}))
    s = make_server(env={"MCP_EXEC_ALLOW": "git,printenv,/usr/bin/jq", "MCP_EXEC_MAX_JOBS": "7"})
    text = policy_text(s)
    for prog in ("git", "printenv", "/usr/bin/jq"):
        assert prog in text, "the allowed program %s should be stated:\n%s" % (prog, text)
    assert "/usr/bin/jq" not in plain
    assert len(re.findall(r"\b7\b", text)) > len(re.findall(r"\b7\b", plain)), \
        "the job limit 7 should be stated:\n%s" % text


def test_roots_stated_in_descriptions_or_instructions(make_server, tree):
    s = make_server(env={"MCP_EXEC_ROOTS": "%s:%s" % (tree.root, tree.other)})
    text = policy_text(s)
    assert tree.root in text and tree.other in text, "the roots should be stated:\n%s" % text


# ==========================================================================
# No settings: 1.0 behaviour
# ==========================================================================

def test_no_settings_cwd_anywhere(plain_srv):
    assert stdout_of(plain_srv, {"command": "pwd -P", "cwd": "/"}) == "/\n"
    assert stdout_of(plain_srv, {"command": "pwd -P", "cwd": "/etc/"}) == "/etc\n"
    assert stdout_of(plain_srv, {"argv": ["pwd"], "cwd": "/proc/self/root/etc"}).strip() in ("/etc", "/proc/self/root/etc")


def test_no_settings_any_env_name(plain_srv):
    out = stdout_of(plain_srv, {
        "command": 'printf "%s|%s|%s\\n" "$SECRET_TOKEN" "$LD_PRELOAD" "$PATH"',
        "env": {"SECRET_TOKEN": "s", "LD_PRELOAD": "", "PATH": "/usr/local/bin:/usr/bin:/bin"}})
    assert out == "s||/usr/local/bin:/usr/bin:/bin\n"


def test_no_settings_any_program(plain_srv):
    assert stdout_of(plain_srv, {"argv": ["/bin/sh", "-c", "echo a"]}) == "a\n"
    assert stdout_of(plain_srv, {"argv": ["sh", "-c", "echo b"]}) == "b\n"
    assert stdout_of(plain_srv, {"command": "echo c"}) == "c\n"


def test_no_settings_any_number_of_jobs(plain_srv):
    ids = [gated_job(plain_srv) for _ in range(16)]
    try:
        jobs = {j["job_id"]: j["state"] for j in plain_srv.tool("list_jobs")["jobs"]}
        assert all(jobs.get(j) == "running" for j in ids), jobs
    finally:
        plain_srv.cleanup(*ids)


def test_no_settings_finished_jobs_are_kept(plain_srv):
    """A finished job outlives what a small TTL or finished-job limit would
    allow: several later jobs finish, and it is still there."""
    first = plain_srv.job("echo first")
    plain_srv.until_done(first)
    later = []
    for n in range(5):
        jid = plain_srv.job("echo %d" % n)
        plain_srv.until_done(jid)
        later.append(jid)
    assert plain_srv.status(first)["state"] == "success"
    assert plain_srv.collect(first)["stdout"]["data"] == "first\n"
    for jid in later:
        plain_srv.collect(jid)
