"""End-to-end tests of jobs on a terminal: execute's tty.

A tty job has a terminal of the asked size on stdin and stdout, prompts
and takes input through it, dies as a tree on kill, and `plain` output
strips the terminal's escapes; a REPL that checks for a terminal runs
interactively without being told to; a prompt on the terminal (read -p, a
password prompt on /dev/tty) is waiting for input, so a yield returns on it
with the prompt in recent.
"""

import pytest

from tests.helpers import SLACK, short, timed


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


@pytest.mark.parametrize("command,prompt", [
    ("read -p 'Name? ' x; echo hi $x", "Name? "),
    # as sudo and ssh do: the prompt and the answer go through /dev/tty
    ("exec 0</dev/null; printf '\\033[1mPassword:\\033[0m ' >/dev/tty; read -r x </dev/tty; echo hi $x",
     "Password: "),
], ids=["read-p", "dev-tty"])
def test_tty_prompt_yields_within_2s_with_prompt_in_recent(srv, command, prompt):
    # A terminal prompt blocked the call for the whole yield (50 s):
    # waiting_for_input was never reported for a terminal.
    r, took = timed(srv.tool, "execute", {"command": command, "tty": True, "yield_after": 50}, timeout=70)
    try:
        assert r.get("yielded") is True and r.get("waiting_for_input") is True, short(r)
        assert took < 2 + SLACK, took
        assert r.get("recent") == {"stdout": prompt}, short(r)
        st = srv.status(r["job_id"])
        assert st.get("waiting_for_input") is True and st.get("recent") == {"stdout": prompt}, short(st)
        srv.tool("input", {"job_id": r["job_id"], "data": "bob\n"})
        (w,) = srv.tool("wait", {"job_ids": [r["job_id"]], "timeout": 10 + SLACK})
        assert w["state"] == "success" and w["stdout"]["data"].endswith("hi bob\r\n"), short(w)
    finally:
        srv.cleanup(r["job_id"])
