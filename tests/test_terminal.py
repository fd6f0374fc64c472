"""End-to-end tests of jobs on a terminal: execute's tty.

A tty job has a terminal of the asked size on stdin and stdout, prompts
and takes input through it, dies as a tree on kill, and `plain` output
strips the terminal's escapes; a REPL that checks for a terminal runs
interactively without being told to.
"""

import pytest

from tests.helpers import SLACK, short


def test_tty_mode(srv):
    r = srv.tool("execute", {"command": "test -t 0 && test -t 1 && stty size", "tty": {"rows": 33, "cols": 101}})
    assert r["state"] == "success" and r["stdout"]["data"] == "33 101\r\n", short(r)
    jid = srv.tool("execute", {"command": "read -p 'Continue? ' a; echo \"got $a\"", "tty": True, "nowait": True})["job_id"]
    srv.poll_output(jid, lambda d: "Continue? " in d)
    srv.tool("input", {"job_id": jid, "data": "yes\n"})
    (w,) = srv.tool("wait", {"job_ids": [jid], "timeout": 10 + SLACK})
    assert w["state"] == "success" and "got yes\r\n" in w["stdout"]["data"], short(w)
    # A tty job's tree dies on kill; plain strips the terminal's escapes.
    jid = srv.tool("execute", {"command": "printf '\\033[1mbold\\033[0m\\r\\n'; exec sleep 300", "tty": True,
                               "nowait": True})["job_id"]
    out = srv.poll_output(jid, lambda d: "bold" in d)
    plain = srv.tool("output", {"job_id": jid, "stdout": "all", "plain": True})["stdout"]
    assert plain["data"] == "bold\n" and plain["bytes"] == out["stdout"]["bytes"], plain
    assert srv.tool("kill", {"job_id": jid})["terminated"] is True
    assert "tty" in srv.tool_err("execute", {"command": "true", "tty": {"rows": 0}})


def test_tty_python_repl_without_i(srv):
    if srv.tool("execute", {"command": "command -v python3"})["state"] != "success":
        pytest.skip("no python3 where the server runs (the default image has none)")
    jid = srv.tool("execute", {"command": "python3", "tty": True, "nowait": True})["job_id"]
    srv.poll_output(jid, lambda d: ">>> " in d)
    srv.tool("input", {"job_id": jid, "data": "print(6*7)\n", "close": True})
    (w,) = srv.tool("wait", {"job_ids": [jid], "timeout": 20 + SLACK})
    assert w["state"] == "success" and "\r\n42\r\n" in w["stdout"]["data"], short(w)
