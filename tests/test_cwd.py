"""End-to-end tests of the working directory kept between calls.

MCP_EXEC_KEEP_CWD=1 (on under MCP_EXEC_PROFILE=agent): in a session, an
execute without `cwd` starts where the previous blocking execute's shell
ended, when that directory still exists and is inside MCP_EXEC_ROOTS; a
blocking execute with `cwd` sets it; nowait jobs do not move it; a yielded
execute moves it when wait delivers it, unless a call set it since;
environment variables never carry over.

The directories are made on the host: the tests run on the binary and pid1
targets and skip on the container target.
"""

import os
import shutil
import tempfile

import pytest

from tests.helpers import needs_host_files

AGENT = {"MCP_EXEC_PROFILE": "agent"}


@pytest.fixture
def tree():
    """base/{a/b, root/sub, outside}, resolved; removed afterwards."""
    needs_host_files()
    base = os.path.realpath(tempfile.mkdtemp(prefix="mcpx-cwd-"))
    for d in ("a/b", "root/sub", "outside"):
        os.makedirs(os.path.join(base, d))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def out(r):
    """A result's stdout text (a stream with no bytes may be left out)."""
    assert r["state"] == "success", r
    return r.get("stdout", {}).get("data", "")


def pwd(s, **kw):
    return out(s.run("pwd -P", **kw)).rstrip("\n")


def test_cd_carries_over_under_the_agent_profile(make_server, tree):
    s = make_server(env=AGENT)
    a, b = os.path.join(tree, "a"), os.path.join(tree, "a", "b")
    out(s.run("cd %s" % b))
    assert pwd(s) == b
    r = s.tool("execute", {"argv": ["pwd", "-P"]})   # argv jobs start there too
    assert out(r) == b + "\n", r
    out(s.run("cd .."))
    assert pwd(s) == a


def test_cd_does_not_carry_over_without_the_setting(make_server, tree):
    for env in ({}, dict(AGENT, MCP_EXEC_KEEP_CWD="0")):
        s = make_server(env=env)
        home = pwd(s)
        out(s.run("cd %s" % tree))
        assert pwd(s) == home, env
        out(s.run("true", cwd=tree))
        assert pwd(s) == home, env


def test_cd_never_carries_outside_the_roots(make_server, tree):
    root, sub = os.path.join(tree, "root"), os.path.join(tree, "root", "sub")
    s = make_server(env=dict(AGENT, MCP_EXEC_ROOTS=root))
    out(s.run("cd %s" % os.path.join(tree, "outside")))
    assert pwd(s) == root, "a shell that ended outside the roots moved the directory"
    out(s.run("cd sub"))
    assert pwd(s) == sub
    out(s.run("cd /"))
    assert pwd(s) == sub, "a shell that ended outside the roots moved the directory"
    # a symlink inside a root that leads out of it is followed, and refused
    os.symlink(os.path.join(tree, "outside"), os.path.join(sub, "out"))
    out(s.run("cd out"))
    assert pwd(s) == sub


def test_nowait_job_does_not_move_the_directory(make_server, tree):
    s = make_server(env=AGENT)
    a = os.path.join(tree, "a")
    out(s.run("cd %s" % a))
    jid = s.job("pwd -P; cd /")                      # starts in the kept directory
    assert out(s.collect(jid)) == a + "\n"
    jid = s.job("cd /", cwd=os.path.join(tree, "outside"))   # nor does its cwd set it
    s.collect(jid)
    assert pwd(s) == a


def test_exit_code_kept_when_cwd_is_tracked(make_server, tree):
    s = make_server(env=AGENT)
    b = os.path.join(tree, "a", "b")
    r = s.run("cd %s; exit 7" % b)
    assert r["state"] == "error" and r["exit_code"] == 7, r
    assert pwd(s) == b
    r = s.run("cd ..; false")
    assert r["exit_code"] == 1, r
    assert pwd(s) == os.path.join(tree, "a")
    r = s.run("cd /; kill -KILL $$")                # a killed shell says nothing: no move
    assert r["exit_code"] == -1 and r.get("signal") == "killed", r
    assert pwd(s) == os.path.join(tree, "a")


def test_env_does_not_carry_over(make_server, tree):
    s = make_server(env=AGENT)
    out(s.run("export MCPX_CARRIED=yes; cd %s" % tree))
    assert out(s.run("echo ${MCPX_CARRIED-unset}; pwd -P")) == "unset\n%s\n" % tree
    out(s.run("true", env={"MCPX_CARRIED": "given"}))
    assert out(s.run("echo ${MCPX_CARRIED-unset}")) == "unset\n"


def test_a_cwd_argument_sets_the_directory(make_server, tree):
    s = make_server(env=AGENT)
    a = os.path.join(tree, "a")
    out(s.run("true", cwd=a))
    assert pwd(s) == a
    assert pwd(s, cwd="b") == os.path.join(a, "b"), "a relative cwd is taken from the kept directory"
    assert pwd(s) == os.path.join(a, "b")


def test_a_directory_that_is_gone_is_not_kept(make_server, tree):
    s = make_server(env=AGENT)
    home = pwd(s)
    out(s.run("cd %s" % os.path.join(tree, "a", "b")))
    os.rmdir(os.path.join(tree, "a", "b"))
    assert pwd(s) == home


def test_yielded_execute_moves_the_directory_when_delivered(make_server, tree):
    s = make_server(env=AGENT)
    a, outside = os.path.join(tree, "a"), os.path.join(tree, "outside")
    r = s.run("cd %s; read line" % a, yield_after=0.3)
    assert r.get("yielded") is True, r
    s.answer(r["job_id"], close=True)
    assert pwd(s) == a
    # a call that set the directory after the yield wins over the yielded end
    r = s.run("cd %s; read line" % tree, yield_after=0.3)
    assert r.get("yielded") is True, r
    out(s.run("true", cwd=outside))
    s.answer(r["job_id"], close=True)
    assert pwd(s) == outside


def test_cd_carries_over_on_a_terminal(make_server, tree):
    s = make_server(env=AGENT)
    r = s.run("cd %s" % tree, tty=True)
    assert r["state"] == "success", r
    assert pwd(s) == tree


def test_cd_carries_over_in_the_sandbox(make_server, tree):
    s = make_server(env=dict(AGENT, MCP_EXEC_SANDBOX="read-only"))
    a = os.path.join(tree, "a")
    out(s.run("cd %s" % a))
    assert pwd(s) == a


def test_own_exit_trap_leaves_the_directory(make_server, tree):
    s = make_server(env=AGENT)
    home = pwd(s)
    assert out(s.run("trap 'echo bye' EXIT; cd %s" % tree)) == "bye\n"
    assert pwd(s) == home
