"""End-to-end tests of the 1.1 additions "calls an agent can live with".

What wire-1.1.md adds for agents, checked against a real server process:
execute's argv, time_limit and yield_after; the result fields timed_out,
yielded, waiting_for_input, uncaptured and kept; slices with a gap (head,
omitted, tail); the reply budget (max_reply_bytes, MCP_EXEC_MAX_REPLY_BYTES,
measured on the raw stdout line); head retention; profiles and the settings'
validation; and that a 1.0 client with no new arguments sees 1.0's objects.

The target, the binary and the client come from conftest.py.  One test is
the issue's own 75-second check; it is marked `slow`:
    pytest -m "not slow" test_agent.py
(or -k "not 75s") leaves it out.
"""

import json
import subprocess
import time

import pytest

from conftest import (MIB, SLACK, TARGET, Server, ToolError, idkey, marker,
                      process_env, server_argv, wait_until)

KIB = 1024
NUL_MIB = "head -c %d /dev/zero" % MIB
DEFAULT_BUDGET = 8 * MIB
# A few seconds of tolerance for "returns at about t".
LATE = 3.0 + SLACK


# --------------------------------------------------------------------------
# A client that measures the reply lines on the wire
# --------------------------------------------------------------------------

class RawServer(Server):
    """A Server that records the length of every response line as it came
    off stdout (without its newline), by request id."""

    def __init__(self, **kw):
        self.line_lens = {}
        super().__init__(**kw)

    def _handle_line(self, raw):
        try:
            msg = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            msg = None
        if isinstance(msg, dict) and "id" in msg and "method" not in msg and msg["id"] is not None:
            self.line_lens[idkey(msg["id"])] = len(raw[:-1] if raw.endswith(b"\n") else raw)
        super()._handle_line(raw)

    def call(self, name, args=None, timeout=30, meta=None):
        """(tools/call result, length of its reply line in bytes)."""
        rid = self.tool_start(name, args, meta)
        res = self.tool_response(rid, timeout)
        return res, self.line_lens[idkey(rid)]

    def tool_line(self, name, args=None, timeout=30):
        """(decoded tool result, length of its reply line); a tool error raises."""
        res, n = self.call(name, args, timeout)
        return self.decode(res), n


@pytest.fixture(scope="module")
def srv(mcp_bin):
    s = RawServer()
    yield s
    assert s.close(10 + SLACK) == 0, "graceful shutdown must exit with status 0"


@pytest.fixture
def raw_server(make_server):
    """Factory of RawServers (keywords as for Server), shut down after the test."""
    return lambda **kw: make_server(cls=RawServer, **kw)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def timed(fn, *args, **kw):
    t0 = time.monotonic()
    r = fn(*args, **kw)
    return r, time.monotonic() - t0


def check_gap(sl, total=None):
    """The invariants of a slice with a gap; returns (head, omitted, tail)."""
    assert "omitted" in sl and "tail" in sl, "expected a slice with a gap: %r" % short(sl)
    om, tail = sl["omitted"], sl["tail"]
    assert set(om) == {"offset", "bytes"}, om
    assert set(tail) == {"data", "offset", "bytes"}, short(tail)
    assert sl["offset"] + sl["bytes"] == om["offset"], short(sl)
    assert om["offset"] + om["bytes"] == tail["offset"], short(sl)
    assert om["bytes"] > 0, short(sl)
    if total is not None:
        assert sl["total_bytes"] == total, short(sl)
        assert tail["offset"] + tail["bytes"] == total, short(sl)
    return sl["data"], om, tail


def short(obj, n=600):
    """A repr of obj with long strings shortened, for assertion messages."""
    def cut(o):
        if isinstance(o, str) and len(o) > 80:
            return o[:40] + "...(%d chars)..." % len(o) + o[-20:]
        if isinstance(o, dict):
            return {k: cut(v) for k, v in o.items()}
        if isinstance(o, list):
            return [cut(v) for v in o]
        return o
    text = repr(cut(obj))
    return text if len(text) <= n else text[:n] + "..."


def assert_nuls(sl):
    """The slice's data (and tail data) are NULs, as many as it says."""
    assert sl["data"] == "\x00" * sl["bytes"], short(sl)
    if "tail" in sl:
        assert sl["tail"]["data"] == "\x00" * sl["tail"]["bytes"], short(sl)


def kept_bytes(sl):
    return sl["bytes"] + (sl["tail"]["bytes"] if "tail" in sl else 0)


def wait_all_done(s, job_ids, timeout=20):
    deadline = time.monotonic() + timeout
    for jid in job_ids:
        s.until_done(jid, max(deadline - time.monotonic(), 0.1))


def descriptions(s):
    """Every description text of tools/list: the tools' and their arguments'."""
    texts = []
    for t in s.result("tools/list")["tools"]:
        texts.append(t.get("description", ""))
        for p in t["inputSchema"].get("properties", {}).values():
            texts.append(p.get("description", ""))
    return "\n".join(texts)


def tool_descriptions(s):
    return {t["name"]: t.get("description", "") for t in s.result("tools/list")["tools"]}


def poll_status(s, jid, pred, timeout, interval=0.1, what="the status"):
    """Call status until pred(status) holds; return that status."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        st = s.status(jid)
        if pred(st):
            return st
        seen.append(st)
        assert time.monotonic() < deadline, "%s never held within %ss; last %r" % (what, timeout, seen[-3:])
        time.sleep(interval)


def run_until_exit(env, timeout=20):
    """Launch the server with env, stdin at EOF; return the CompletedProcess."""
    return subprocess.run(server_argv(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=process_env(env), timeout=timeout + SLACK)


def numbered(first, last):
    """What `seq first last` prints."""
    return b"".join(b"%d\n" % i for i in range(first, last + 1))


# ==========================================================================
# Arguments are checked by name
# ==========================================================================

def test_unknown_argument_named_with_the_new_ones_accepted(srv):
    text = srv.tool_err("execute", {"command": "true", "timeout": 5})
    assert '"timeout"' in text, text
    for name in ("argv", "time_limit", "yield_after", "max_reply_bytes"):
        assert name in text, "accepted list should include %s: %s" % (name, text)


@pytest.mark.parametrize("tool,args", [
    ("status", {"job_id": "1", "max_reply_bytes": 65536}),
    ("input", {"job_id": "1", "max_reply_bytes": 65536}),
    ("list_jobs", {"max_reply_bytes": 65536}),
    ("wait", {"job_ids": ["1"], "yield_after": 1}),
])
def test_max_reply_bytes_only_where_accepted(srv, tool, args):
    extra = [k for k in args if k not in ("job_id", "job_ids")][0]
    text = srv.tool_err(tool, args)
    assert '"%s"' % extra in text and "unknown argument" in text, text


# ==========================================================================
# execute: argv
# ==========================================================================

def test_argv_is_not_split_by_a_shell(srv):
    r = srv.tool("execute", {"argv": ["printf", "%s|", "a b", "c"]})
    assert r["state"] == "success" and r["exit_code"] == 0, r
    assert r["stdout"]["data"] == "a b|c|", r


def test_argv_shell_metacharacters_are_literal(srv):
    r = srv.tool("execute", {"argv": ["echo", "$HOME", "`id`", "a;b", "*", "'q'"]})
    assert r["stdout"]["data"] == "$HOME `id` a;b * 'q'\n", r


def test_argv_program_found_in_path(srv):
    r = srv.tool("execute", {"argv": ["echo", "hi"]})
    assert r["state"] == "success" and r["stdout"]["data"] == "hi\n", r


@pytest.fixture
def tool_dir(srv):
    """A directory in the server's world holding an executable `mcpx-tool-XXXX`."""
    d = marker()
    name = "mcpx-tool-" + d[-8:]
    srv.sh("mkdir -p %s && printf '#!/bin/sh\\necho mine \"$@\"\\n' > %s/%s && chmod +x %s/%s"
           % (d, d, name, d, name))
    yield d, name
    srv.sh("rm -rf %s" % d)


def test_argv_looked_up_in_the_jobs_path(srv, tool_dir):
    d, name = tool_dir
    r = srv.tool("execute", {"argv": [name, "x y"], "env": {"PATH": d + ":/usr/bin:/bin"}})
    assert r["state"] == "success", r
    assert r["stdout"]["data"] == "mine x y\n", r


def test_argv_not_found_without_the_jobs_path(srv, tool_dir):
    d, name = tool_dir
    r = srv.tool("execute", {"argv": [name]})
    assert r["state"] == "error" and name in r.get("start_error", ""), r


def test_argv_path_override_is_the_only_path_searched(srv, tool_dir):
    # The job's PATH holds only the tool's directory: printf is not on it,
    # even though the server's own PATH has it.
    d, _ = tool_dir
    r = srv.tool("execute", {"argv": ["printf", "x"], "env": {"PATH": d}})
    assert r["state"] == "error", r
    assert "printf" in r.get("start_error", ""), r


def test_argv_relative_path_runs_without_lookup(srv, tool_dir):
    d, name = tool_dir
    r = srv.tool("execute", {"argv": ["./" + name, "rel"], "cwd": d})
    assert r["state"] == "success" and r["stdout"]["data"] == "mine rel\n", r


@pytest.mark.parametrize("argv0", ["/etc/passwd", "/tmp"])
def test_argv_not_a_program_is_a_start_error(srv, argv0):
    r = srv.tool("execute", {"argv": [argv0]})
    assert r["state"] == "error" and argv0 in r.get("start_error", ""), r


@pytest.mark.parametrize("nowait", [False, True])
def test_argv_missing_program_is_a_start_error(srv, nowait):
    prog = "mcpx-no-such-program-" + marker()[-8:]
    args = {"argv": [prog, "arg"]}
    if nowait:
        args["nowait"] = True
    r = srv.tool("execute", args)
    assert r["state"] == "error", r
    assert "exit_code" in r, r
    assert prog in r.get("start_error", ""), r
    # delivered at once: the job is gone
    assert "unknown job_id" in srv.tool_err("status", {"job_id": r["job_id"]})


def test_command_and_argv_together_refused(srv):
    text = srv.tool_err("execute", {"command": "echo a", "argv": ["echo", "b"]})
    assert "command" in text and "argv" in text, text


def test_neither_command_nor_argv_refused(srv):
    text = srv.tool_err("execute", {"nowait": True})
    assert "command" in text, text


@pytest.mark.parametrize("argv", [[], [""], ["echo", 1], "echo hi", [None], {"0": "echo"}])
def test_bad_argv_refused_naming_it(srv, argv):
    text = srv.tool_err("execute", {"argv": argv})
    assert "argv" in text, text


# ==========================================================================
# execute: time_limit
# ==========================================================================

def test_time_limit_terminates(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 30", "time_limit": 0.5})
    assert r["state"] == "error", r
    assert r.get("signal") == "terminated", r
    assert r.get("timed_out") is True, r
    assert r["exit_code"] == -1, r
    assert 0.4 <= took <= 0.5 + LATE, took


def test_time_limit_kills_a_term_ignoring_tree(raw_server):
    s = raw_server(env={"MCP_EXEC_KILL_GRACE": "0.5"})
    r, took = timed(s.tool, "execute", {
        "command": "trap '' TERM; sleep 30 & echo $! >&2; wait; echo survived-wait >&2; sleep 30",
        "time_limit": 0.5})
    assert r["state"] == "error", r
    assert r.get("signal") == "killed", r
    assert r.get("timed_out") is True, r
    assert 0.8 <= took <= 1.0 + LATE, took
    # the whole group got the KILL: the background sleep is gone too
    pid = int(r["stderr"]["data"].split()[0])
    assert "survived-wait" not in r["stderr"]["data"], r
    s.wait_proc_gone(pid, timeout=5 + SLACK)


def test_time_limit_kills_an_exec_that_ignores_term(raw_server):
    s = raw_server(env={"MCP_EXEC_KILL_GRACE": "0.5"})
    r, took = timed(s.tool, "execute", {"command": "sh -c \"trap '' TERM; exec sleep 30\"",
                                        "time_limit": 0.5})
    assert r.get("timed_out") is True and r["state"] == "error", r
    # The outer shell may die of the TERM itself (when it forks rather than
    # execs the inner one), or of the KILL.
    assert r.get("signal") in ("killed", "terminated"), r
    assert took <= 1.0 + LATE, took


def test_time_limit_default_grace_is_not_short(srv):
    # MCP_EXEC_KILL_GRACE defaults to 5 s: a TERM-ignoring job outlives its
    # limit by about that long, then is killed.
    t0 = time.monotonic()
    jid = srv.job("trap '' TERM; sleep 30 & wait", time_limit=0.5)
    try:
        r = srv.tool("wait", {"job_ids": [jid], "timeout": 3})
        assert r[0]["state"] == "running", r
        r = srv.collect(jid, timeout=10 + SLACK)
        took = time.monotonic() - t0
        assert r.get("signal") == "killed" and r.get("timed_out") is True, r
        assert 5.0 <= took <= 5.5 + LATE, took
    finally:
        srv.cleanup(jid)


@pytest.mark.parametrize("command,state", [("echo hi", "success"), ("exit 3", "error"),
                                           ("sleep 0.2; echo late", "success")])
def test_job_ending_before_its_limit_has_no_timed_out(srv, command, state):
    r = srv.tool("execute", {"command": command, "time_limit": 5})
    assert r["state"] == state, r
    assert "timed_out" not in r, r


def test_job_killed_by_a_client_before_its_limit_has_no_timed_out(srv):
    jid = srv.job("sleep 30", time_limit=20)
    k = srv.tool("kill", {"job_id": jid})
    assert k["terminated"] is True, k
    assert k["result"].get("signal") == "terminated", k
    assert "timed_out" not in k["result"], k


def test_time_limit_with_nowait_collected_by_wait(srv):
    jid = srv.job("sleep 30", time_limit=0.5)
    st = poll_status(srv, jid, lambda st: st["state"] != "running", 5 + SLACK, 0.05)
    assert st.get("signal") == "terminated", st
    assert st.get("timed_out") is True, "status of a timed-out job: %r" % st
    r = srv.collect(jid, timeout=5)
    assert r.get("timed_out") is True and r.get("signal") == "terminated", r


def test_time_limit_server_default(raw_server):
    s = raw_server(env={"MCP_EXEC_TIME_LIMIT": "0.5"})
    r, took = timed(s.tool, "execute", {"command": "sleep 30"})
    assert r.get("timed_out") is True and r.get("signal") == "terminated", r
    assert took <= 0.5 + LATE, took
    # an explicit time_limit wins over the default
    r = s.tool("execute", {"command": "sleep 1; echo ok", "time_limit": 10})
    assert r["state"] == "success" and r["stdout"]["data"] == "ok\n", r
    assert "timed_out" not in r, r


@pytest.mark.parametrize("value", [0, -1, "x", True, [1], {"s": 1}])
def test_bad_time_limit_refused_naming_it(srv, value):
    text = srv.tool_err("execute", {"command": "echo never", "time_limit": value})
    assert "time_limit" in text, text


# ==========================================================================
# execute: yield_after
# ==========================================================================

def test_yield_after_returns_the_running_job(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 5; echo done", "yield_after": 1})
    assert r == {"job_id": r.get("job_id"), "state": "running", "yielded": True}, r
    assert 0.9 <= took <= 1 + LATE, took
    jid = r["job_id"]
    assert jid in srv.list_ids()
    assert srv.status(jid)["state"] == "running"
    done = srv.collect(jid, timeout=20)
    assert done["state"] == "success", done
    assert done["stdout"]["data"] == "done\n", done
    assert "yielded" not in done, done


def test_yield_after_job_that_ends_first_returns_its_result(srv):
    r, took = timed(srv.tool, "execute", {"command": "echo quick", "yield_after": 5})
    assert r["state"] == "success" and r["stdout"]["data"] == "quick\n", r
    assert "yielded" not in r, r
    assert took < 4 + SLACK


def test_yield_after_zero_blocks_to_the_end(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 2; echo done", "yield_after": 0})
    assert r["state"] == "success" and r["stdout"]["data"] == "done\n", r
    assert "yielded" not in r, r
    assert took >= 1.9, took


def test_yield_after_server_default(raw_server):
    s = raw_server(env={"MCP_EXEC_YIELD_AFTER": "1"})
    r, took = timed(s.tool, "execute", {"command": "sleep 5; echo done"})
    assert r == {"job_id": r.get("job_id"), "state": "running", "yielded": True}, r
    assert 0.9 <= took <= 1 + LATE, took
    done = s.collect(r["job_id"], timeout=20)
    assert done["stdout"]["data"] == "done\n", done
    # an explicit 0 overrides the default and blocks to the end
    r, took = timed(s.tool, "execute", {"command": "sleep 2; echo end", "yield_after": 0})
    assert r["state"] == "success" and r["stdout"]["data"] == "end\n", r
    assert took >= 1.9, took


def test_yielded_job_still_ends_at_its_time_limit(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 30", "yield_after": 1, "time_limit": 2.5})
    assert r.get("yielded") is True, r
    done, more = timed(srv.collect, r["job_id"], timeout=10 + SLACK)
    assert done.get("timed_out") is True and done.get("signal") == "terminated", done
    assert took + more <= 2.5 + LATE, (took, more)


def test_time_limit_ended_job_that_exits_on_term_is_timed_out(srv):
    r = srv.tool("execute", {"command": "trap 'exit 7' TERM; sleep 30 & wait", "time_limit": 0.5})
    assert r["state"] == "error" and r["exit_code"] == 7, r
    assert r.get("timed_out") is True, r


def test_time_limit_with_argv(srv):
    r, took = timed(srv.tool, "execute", {"argv": ["sleep", "30"], "time_limit": 0.5})
    assert r.get("timed_out") is True and r.get("signal") == "terminated", r
    assert took <= 0.5 + LATE


@pytest.mark.parametrize("bad", [{"time_limit": -1}, {"yield_after": -1}, {"max_reply_bytes": 10},
                                 {"argv": [""]}])
def test_a_refused_execute_starts_nothing(srv, bad):
    m = marker()
    args = dict({"command": "touch %s" % m, "nowait": True}, **bad)
    if "argv" in bad:
        args.pop("command")
        args["argv"] = ["touch", m] if bad["argv"] != [""] else ["", m]
    srv.tool_err("execute", args)
    time.sleep(0.3)  # a job started by mistake would have touched it by now
    assert srv.run("test -e %s" % m)["exit_code"] != 0, "a refused execute ran its command"


@pytest.mark.parametrize("value", [-1, "x", True, [1]])
def test_bad_yield_after_refused_naming_it(srv, value):
    text = srv.tool_err("execute", {"command": "echo never", "yield_after": value})
    assert "yield_after" in text, text


@pytest.mark.slow
def test_issue_check_75s_execute_yields_at_5s_and_wait_collects(srv):
    """The issue's own check: a 75 s blocking execute with yield_after 5
    returns running at ~5 s; the job's full result is later collected by wait."""
    cmd = "i=1; while [ $i -le 75 ]; do echo line $i; sleep 1; i=$((i+1)); done; echo done"
    r, took = timed(srv.tool, "execute", {"command": cmd, "yield_after": 5}, timeout=30)
    assert r.get("state") == "running" and r.get("yielded") is True, r
    assert 4.9 <= took <= 5 + LATE, took
    jid = r["job_id"]
    deadline = time.monotonic() + 100 + SLACK
    while True:
        res = srv.tool("wait", {"job_ids": [jid], "timeout": 30}, timeout=60)
        if res[0]["state"] != "running":
            break
        assert time.monotonic() < deadline, "job still running"
    done = res[0]
    assert done["state"] == "success", short(done)
    expected = "".join("line %d\n" % i for i in range(1, 76)) + "done\n"
    assert done["stdout"]["data"] == expected, short(done)


# ==========================================================================
# waiting_for_input
# ==========================================================================

def test_waiting_for_input_reported_everywhere_then_cleared_by_eof(srv):
    t0 = time.monotonic()
    jid = srv.job("wc -l", stdin="a\nb\n")
    try:
        first = srv.status(jid)
        if time.monotonic() - t0 < 0.9:
            assert "waiting_for_input" not in first, \
                "waiting_for_input needs the job to be blocked for >= 1 s: %r" % first
        st = poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                         what="waiting_for_input on status")
        assert time.monotonic() - t0 >= 0.9, "reported before the job could have waited 1 s"
        assert st["state"] == "running", st
        assert st == {"job_id": jid, "state": "running", "waiting_for_input": True}, st
        entries = [j for j in srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
        assert entries == [{"job_id": jid, "state": "running", "waiting_for_input": True}], entries
        w = srv.tool("wait", {"job_ids": [jid], "timeout": 0})
        assert w == [{"job_id": jid, "state": "running", "waiting_for_input": True}], w
        out = srv.tool("output", {"job_id": jid, "stdout": "all"})
        assert out.get("waiting_for_input") is True, out
        st = srv.tool("input", {"job_id": jid, "close": True})
        assert st["job_id"] == jid
        done = srv.collect(jid, timeout=10)
        assert done["state"] == "success", done
        assert done["stdout"]["data"].strip() == "2", done
        assert "waiting_for_input" not in done, done
    finally:
        srv.cleanup(jid)


def test_blocking_read_yields_waiting_for_input_long_before_yield_after(srv):
    r, took = timed(srv.tool, "execute", {"command": "read x; echo got $x", "yield_after": 60}, timeout=70)
    assert r.get("state") == "running" and r.get("yielded") is True, r
    assert r.get("waiting_for_input") is True, r
    assert 0.9 <= took <= 1 + LATE, took
    jid = r["job_id"]
    srv.tool("input", {"job_id": jid, "data": "hello\n"})
    done = srv.collect(jid, timeout=10)
    assert done["state"] == "success" and done["stdout"]["data"] == "got hello\n", done


def test_reading_another_pipe_is_not_waiting_for_input(srv):
    jid = srv.job("sleep 5 | cat")
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            st = srv.status(jid)
            assert st["state"] == "running", st
            assert "waiting_for_input" not in st, st
            time.sleep(0.2)
        entries = [j for j in srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
        assert entries == [{"job_id": jid, "state": "running"}], entries
    finally:
        srv.cleanup(jid)


def test_reading_another_pipe_does_not_yield_a_blocking_execute(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 2.5 | cat; echo fin", "yield_after": 60}, timeout=70)
    assert r["state"] == "success" and r["stdout"]["data"] == "fin\n", r
    assert took >= 2.4, took


def test_waiting_for_input_through_a_duplicated_descriptor(srv):
    # the reader holds the job's stdin pipe on fd 3, not fd 0
    r, took = timed(srv.tool, "execute", {"command": "exec 3<&0 0</dev/null; read x <&3; echo got $x",
                                          "yield_after": 30}, timeout=40)
    assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
    assert took <= 1 + LATE, took
    srv.tool("input", {"job_id": r["job_id"], "data": "fd3\n"})
    assert srv.collect(r["job_id"])["stdout"]["data"] == "got fd3\n"


def test_waiting_for_input_of_a_grandchild(srv):
    r, took = timed(srv.tool, "execute", {"command": "sh -c 'sh -c \"head -n 1\"'; echo after",
                                          "yield_after": 30}, timeout=40)
    assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
    assert took <= 1 + LATE, took
    srv.tool("input", {"job_id": r["job_id"], "data": "line\n"})
    assert srv.collect(r["job_id"])["stdout"]["data"] == "line\nafter\n"


def test_waiting_for_input_clears_once_the_reader_has_its_line(srv):
    jid = srv.job("while read x; do echo \"<$x>\"; sleep 3; done")
    try:
        poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                    what="waiting_for_input")
        srv.tool("input", {"job_id": jid, "data": "a\n"})
        srv.poll_output(jid, lambda d: d == "<a>\n")
        # the loop now sleeps for 3 s: not waiting for input
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            st = srv.status(jid)
            assert "waiting_for_input" not in st, st
            time.sleep(0.1)
        # and it comes back once the loop reads again
        poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                    what="waiting_for_input again")
    finally:
        srv.cleanup(jid)


def test_waiting_for_input_of_an_event_loop_reader(srv):
    """A Node.js program waiting for a line (readline, prompts of npm and
    friends) waits for stdin in epoll_wait, not in read(2); to the caller it
    is just as much a job waiting for input."""
    if srv.run("command -v node >/dev/null")["exit_code"] != 0:
        pytest.skip("no node in the server's world")
    cmd = ("node -e \"process.stdin.once('data', d => { console.log('got ' + String(d).trim());"
           " process.exit(0) })\"")
    r, took = timed(srv.tool, "execute", {"command": cmd, "yield_after": 4}, timeout=20)
    try:
        assert r.get("yielded") is True, r
        assert r.get("waiting_for_input") is True, \
            "a node process blocked on stdin (epoll) is not reported: %r after %.1fs" % (r, took)
        assert took <= 1 + LATE, took
    finally:
        srv.cleanup(r["job_id"])


def test_progress_says_waiting_for_input(raw_server):
    s = raw_server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    jid = s.job("read x; echo got $x")
    token = "wfi-" + marker()[-8:]
    rid = s.tool_start("wait", {"job_ids": [jid], "timeout": 30}, meta={"progressToken": token})

    def says_waiting(m):
        p = m.get("params") or {}
        return (m.get("method") == "notifications/progress" and p.get("progressToken") == token
                and "waiting for input" in str(p.get("message", "")))
    s.wait_notifications(says_waiting, timeout=10 + SLACK)
    assert not s.has_response(rid), "wait must keep blocking while the job waits for input"
    s.tool("input", {"job_id": jid, "data": "yes\n"})
    done = s.decode(s.tool_response(rid, timeout=10))
    assert done[0]["state"] == "success" and done[0]["stdout"]["data"] == "got yes\n", done


def test_progress_of_blocking_execute_says_waiting_for_input(raw_server):
    s = raw_server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    token = "wfx-" + marker()[-8:]
    rid = s.tool_start("execute", {"command": "read x"}, meta={"progressToken": token})

    def says_waiting(m):
        p = m.get("params") or {}
        return (m.get("method") == "notifications/progress" and p.get("progressToken") == token
                and "waiting for input" in str(p.get("message", "")))
    s.wait_notifications(says_waiting, timeout=10 + SLACK)
    s.cancel(rid)
    msg = s.response(rid, timeout=10 + SLACK)
    assert msg.get("error", {}).get("code") == -32800, msg


# ==========================================================================
# Reply budget
# ==========================================================================

def test_reply_budget_cuts_one_big_stream(srv):
    budget = 65536
    res, n = srv.call("execute", {"command": NUL_MIB, "capture": "all", "max_reply_bytes": budget})
    r = srv.decode(res)
    assert n <= budget, "reply line of %d bytes over the budget of %d" % (n, budget)
    assert n >= budget // 4, "the cut left most of the budget unused: %d bytes" % n
    assert r["state"] == "success", short(r)
    assert r.get("kept") is True, short(r)
    out = r["stdout"]
    head, om, tail = check_gap(out, total=MIB)
    assert out["offset"] == 0 and out["bytes"] > 0 and tail["bytes"] > 0, short(out)
    assert out["truncated"] is False, short(out)
    assert_nuls(out)
    assert r["stderr"]["data"] == "" and "omitted" not in r["stderr"], short(r)
    assert "uncaptured" not in r, short(r)
    jid = r["job_id"]

    # the kept job stays readable: the gap by output, the status by status
    gap = srv.tool("output", {"job_id": jid, "stdout": {"from": om["offset"], "length": 1000}})
    assert gap["stdout"]["offset"] == om["offset"], short(gap)
    assert gap["stdout"]["bytes"] == 1000 and gap["stdout"]["data"] == "\x00" * 1000, short(gap)
    assert gap["stdout"]["truncated"] is False, short(gap)
    assert gap["state"] == "success" and gap["exit_code"] == 0, short(gap)
    st = srv.status(jid)
    assert st["state"] == "success" and st["exit_code"] == 0, st

    # but it was delivered: wait and kill do not find it, list_jobs does not show it
    assert "unknown job_id" in srv.tool_err("wait", {"job_ids": [jid], "timeout": 0})
    assert "unknown job_id" in srv.tool_err("kill", {"job_id": jid})
    assert jid not in srv.list_ids()


def test_reply_budget_never_splits_a_utf8_character(srv):
    unit = "é€😀"
    text = unit * 32768
    raw = text.encode("utf-8")
    cmd = "s='%s'; i=0; while [ $i -lt 15 ]; do s=\"$s$s\"; i=$((i+1)); done; printf '%%s' \"$s\"" % unit
    for budget in (4096, 10007, 65536, 100003):
        res, n = srv.call("execute", {"command": cmd, "max_reply_bytes": budget})
        r = srv.decode(res)
        assert n <= budget, (budget, n)
        out = r["stdout"]
        head, om, tail = check_gap(out, total=len(raw))
        assert r.get("kept") is True, short(r)
        assert "\ufffd" not in head and "\ufffd" not in tail["data"], short(out)
        assert len(head.encode("utf-8")) == out["bytes"], short(out)
        assert len(tail["data"].encode("utf-8")) == tail["bytes"], short(out)
        # each part is exactly the stream's bytes at its offsets
        assert raw[out["offset"]:out["offset"] + out["bytes"]].decode("utf-8") == head
        assert raw[tail["offset"]:tail["offset"] + tail["bytes"]].decode("utf-8") == tail["data"]
        # the reading of the gap starts on a character too
        gap = srv.tool("output", {"job_id": r["job_id"],
                                  "stdout": {"from": om["offset"], "length": 50, "unaligned": True}})
        assert "\ufffd" not in gap["stdout"]["data"][:1], (budget, short(gap))


def test_reply_budget_shares_fairly_between_streams(srv):
    budget = 65536
    cmd = "%s; %s >&2" % (NUL_MIB, NUL_MIB)
    res, n = srv.call("execute", {"command": cmd, "capture": "all", "max_reply_bytes": budget})
    r = srv.decode(res)
    assert n <= budget, n
    assert r.get("kept") is True
    check_gap(r["stdout"], total=MIB)
    check_gap(r["stderr"], total=MIB)
    assert_nuls(r["stdout"])
    assert_nuls(r["stderr"])
    a, b = kept_bytes(r["stdout"]), kept_bytes(r["stderr"])
    assert min(a, b) >= 0.5 * max(a, b), "unfair shares: stdout %d, stderr %d bytes" % (a, b)


def test_reply_budget_keeps_a_small_stream_whole(srv):
    budget = 65536
    cmd = "printf '%%0100d' 7; %s >&2" % NUL_MIB
    res, n = srv.call("execute", {"command": cmd, "capture": "all", "max_reply_bytes": budget})
    r = srv.decode(res)
    assert n <= budget, n
    assert r["stdout"] == {"data": "0" * 99 + "7", "offset": 0, "bytes": 100, "total_bytes": 100,
                           "truncated": False}, short(r)
    check_gap(r["stderr"], total=MIB)
    assert r.get("kept") is True


def test_reply_budget_of_a_wait_delivering_several_results(srv):
    budget = 65536
    jids = [srv.job(NUL_MIB, capture="all") for _ in range(3)]
    wait_all_done(srv, jids)
    res, n = srv.call("wait", {"job_ids": jids, "timeout": 0, "max_reply_bytes": budget})
    rs = srv.decode(res)
    assert n <= budget, "wait reply of %d bytes over %d" % (n, budget)
    assert [x["job_id"] for x in rs] == jids
    shares = []
    for x in rs:
        assert x["state"] == "success" and x.get("kept") is True, short(x)
        check_gap(x["stdout"], total=MIB)
        assert_nuls(x["stdout"])
        shares.append(kept_bytes(x["stdout"]))
    assert min(shares) >= 0.5 * max(shares), shares
    listed = srv.list_ids()
    for jid in jids:
        assert jid not in listed
        assert srv.status(jid)["state"] == "success"


def test_reply_budget_of_kill_and_output(srv):
    budget = 65536
    jid = srv.job(NUL_MIB + "; exec sleep 30", capture="all")
    # Polled with empty reads: all of it no longer fits a reply of the
    # default budget once the reply carries structuredContent too.
    wait_until(lambda: srv.tool("output", {"job_id": jid, "stdout": {"from": 0, "length": 0}})["stdout"]["total_bytes"] == MIB,
               20, "the job's 1 MiB written")
    # output cuts its slice too, but it delivers nothing: no kept
    res, n = srv.call("output", {"job_id": jid, "stdout": "all", "max_reply_bytes": budget})
    o = srv.decode(res)
    assert n <= budget, n
    check_gap(o["stdout"], total=MIB)
    assert "kept" not in o, short(o)
    res, n = srv.call("kill", {"job_id": jid, "signal": "KILL", "max_reply_bytes": budget})
    k = srv.decode(res)
    assert n <= budget, n
    assert k["terminated"] is True, short(k)
    assert k["result"].get("kept") is True, short(k)
    assert k["result"].get("signal") == "killed"
    check_gap(k["result"]["stdout"], total=MIB)
    assert srv.status(jid).get("signal") == "killed"


def test_reply_budget_at_its_minimum(srv):
    budget = 1024
    cmd = "%s; %s >&2; exit 1" % (NUL_MIB, NUL_MIB)
    res, n = srv.call("execute", {"command": cmd, "capture": {"on_error": "all"}, "max_reply_bytes": budget})
    r = srv.decode(res)
    assert n <= budget, "reply line of %d bytes over the minimum budget of %d" % (n, budget)
    assert r["state"] == "error" and r["exit_code"] == 1, short(r)
    for name in ("stdout", "stderr"):
        sl = r[name]
        if "omitted" in sl:
            check_gap(sl, total=MIB)
        else:  # cut to nothing is acceptable at 1024, but must still be honest
            assert sl["total_bytes"] == MIB
    r = srv.tool("execute", {"command": "echo hi", "max_reply_bytes": 1024})
    assert r["stdout"]["data"] == "hi\n" and "kept" not in r, r


def test_reply_budget_server_setting_and_per_call_override(raw_server):
    s = raw_server(env={"MCP_EXEC_MAX_REPLY_BYTES": "65536"})
    res, n = s.call("execute", {"command": NUL_MIB})
    r = s.decode(res)
    assert n <= 65536, n
    assert r.get("kept") is True
    check_gap(r["stdout"], total=MIB)
    res, n = s.call("execute", {"command": NUL_MIB, "max_reply_bytes": 200000})
    r = s.decode(res)
    assert 65536 < n <= 200000, n
    check_gap(r["stdout"], total=MIB)
    assert "64 KiB" in descriptions(s)


def test_default_budget_8mib_cuts_both_streams_and_session_goes_on(srv):
    cmd = "%s; %s >&2" % (NUL_MIB, NUL_MIB)
    res, n = srv.call("execute", {"command": cmd, "capture": "all"}, timeout=60)
    r = srv.decode(res)
    assert n <= DEFAULT_BUDGET, "reply line of %d bytes over 8 MiB" % n
    assert r.get("kept") is True, short(r)
    for name in ("stdout", "stderr"):
        check_gap(r[name], total=MIB)
        assert_nuls(r[name])
    assert srv.result("ping") == {}
    assert srv.tool("execute", {"command": "echo ok"})["stdout"]["data"] == "ok\n"


def test_default_budget_leaves_a_fitting_result_whole(srv):
    # Half a MiB of NULs: 7 bytes each in the text block and 6 more in
    # structuredContent (2025-06-18) make 6.5 MiB, under the 8 MiB default.
    half = MIB // 2
    res, n = srv.call("execute", {"command": "head -c %d /dev/zero" % half}, timeout=60)
    r = srv.decode(res)
    assert n <= DEFAULT_BUDGET, n
    assert "kept" not in r, short(r)
    assert r["stdout"]["bytes"] == half and "omitted" not in r["stdout"], short(r)
    assert r["stdout"]["data"] == "\x00" * half
    # delivered uncut: gone, as in 1.0
    assert "unknown job_id" in srv.tool_err("status", {"job_id": r["job_id"]})


def test_reply_budget_counts_a_long_request_id(srv):
    budget = 65536
    rid = "id-" + "x" * 30000
    srv.start("tools/call", {"name": "execute", "arguments": {
        "command": NUL_MIB, "max_reply_bytes": budget}}, id=rid)
    r = srv.decode(srv.response(rid)["result"])
    n = srv.line_lens[idkey(rid)]
    assert n <= budget, "a 30000-byte id pushed the line to %d bytes" % n
    check_gap(r["stdout"], total=MIB)


@pytest.mark.parametrize("cmd", [
    "head -c %d /dev/urandom" % MIB,
    "yes '\"\\<>&' | head -c %d" % MIB,
    "head -c %d /dev/zero | tr '\\0' '\\1'" % MIB,
    "yes \"$(printf '\\342\\200\\250')\" | head -c %d" % MIB,
])
def test_reply_budget_with_costly_characters(srv, cmd):
    budget = 65536
    res, n = srv.call("execute", {"command": cmd, "capture": "all", "max_reply_bytes": budget})
    r = srv.decode(res)
    assert n <= budget, (cmd, n)
    check_gap(r["stdout"], total=MIB)
    assert r.get("kept") is True


def test_wait_cuts_the_big_result_and_keeps_a_small_one_whole(srv):
    budget = 65536
    small = srv.job("echo small", capture="all")
    big = srv.job(NUL_MIB, capture="all")
    wait_all_done(srv, [small, big])
    res, n = srv.call("wait", {"job_ids": [small, big], "timeout": 0, "max_reply_bytes": budget})
    a, b = srv.decode(res)
    assert n <= budget, n
    assert a["stdout"]["data"] == "small\n" and "omitted" not in a["stdout"], short(a)
    assert "kept" not in a, short(a)
    assert b.get("kept") is True
    check_gap(b["stdout"], total=MIB)


def test_wait_of_many_results_defers_what_does_not_fit(srv):
    # Five results with output cannot all fit in 1024 bytes (each goes out
    # twice: text and structuredContent); those that do not are deferred
    # (status entries that say so) and stay for the next wait.
    budget = 1024
    jids = [srv.job("echo hi") for _ in range(5)]
    wait_all_done(srv, jids)
    res, n = srv.call("wait", {"job_ids": jids, "timeout": 0, "max_reply_bytes": budget})
    assert n <= budget, "a %d-byte line over its budget of %d" % (n, budget)
    entries = srv.decode(res)
    assert [e["job_id"] for e in entries] == jids
    deferred = [e["job_id"] for e in entries if e.get("deferred")]
    delivered = [e["job_id"] for e in entries if "stdout" in e]
    assert deferred and len(deferred) + len(delivered) == len(jids), entries
    assert all(e["state"] == "success" for e in entries), entries
    listed = [j["job_id"] for j in srv.tool("list_jobs")["jobs"]]
    assert [j for j in listed if j in jids] == deferred, listed
    again = srv.tool("wait", {"job_ids": deferred, "timeout": 0})
    assert all(e["stdout"]["data"] == "hi\n" for e in again), again


def test_wait_whose_entries_alone_exceed_the_budget_delivers_cut(srv):
    # One entry per job id is wait's shape: 40 entries cannot fit in 1024
    # bytes, so nothing is deferred and the results go out cut to nothing.
    jids = [srv.job("echo hi") for _ in range(40)]
    wait_all_done(srv, jids)
    res, n = srv.call("wait", {"job_ids": jids, "timeout": 0, "max_reply_bytes": 1024})
    entries = srv.decode(res)
    assert not any(e.get("deferred") for e in entries), entries[:3]
    assert all(e["state"] == "success" and e["stdout"]["bytes"] == 0 for e in entries), entries[:3]


def test_list_jobs_stays_under_the_server_budget(raw_server):
    s = raw_server(env={"MCP_EXEC_MAX_REPLY_BYTES": "1024"})
    jids = [s.job("exec sleep 60") for _ in range(60)]
    res, n = s.call("list_jobs")
    assert n <= 1024, "list_jobs of 60 jobs answered a %d-byte line over the 1024-byte budget" % n
    listed = s.decode(res)
    ids = [j["job_id"] for j in listed["jobs"]]
    assert ids and ids == jids[:len(ids)], "the oldest jobs first: %r" % ids
    assert listed.get("omitted") == len(jids) - len(ids), listed
    s.cleanup(*jids)


def test_tool_error_stays_under_the_budget(srv):
    budget = 1024
    res, n = srv.call("wait", {"job_ids": ["9" * 100000], "timeout": 0, "max_reply_bytes": budget})
    assert res.get("isError") is True
    assert "unknown job_id" in res["content"][0]["text"]
    assert n <= budget, "a tool error echoing a 100000-byte id took a %d-byte line" % n


@pytest.mark.parametrize("value", [100, 1023, 0, -5, "x", 1.5, True, "65536"])
def test_bad_max_reply_bytes_refused_naming_it(srv, value):
    text = srv.tool_err("execute", {"command": "echo never", "max_reply_bytes": value})
    assert "max_reply_bytes" in text, text


@pytest.mark.parametrize("tool", ["wait", "output", "kill"])
def test_bad_max_reply_bytes_on_other_tools(srv, tool):
    args = {"wait": {"job_ids": ["1"]}, "output": {"job_id": "1"}, "kill": {"job_id": "1"}}[tool]
    args = dict(args, max_reply_bytes=100)
    text = srv.tool_err(tool, args)
    assert "max_reply_bytes" in text, text


def test_kept_job_forgotten_after_kept_seconds(raw_server):
    s = raw_server(env={"MCP_EXEC_KEPT_SECONDS": "1"})
    t0 = time.monotonic()
    r = s.tool("execute", {"command": NUL_MIB, "max_reply_bytes": 4096})
    assert r.get("kept") is True, short(r)
    jid = r["job_id"]
    if time.monotonic() - t0 < 0.8:
        assert s.status(jid)["state"] == "success"

    def gone():
        try:
            s.status(jid)
            return False
        except ToolError as e:
            assert "unknown job_id" in str(e), e
            return True
    wait_until(gone, 5 + SLACK, "the kept job %s being forgotten" % jid, interval=0.1)
    assert time.monotonic() - t0 >= 0.9, "forgotten before MCP_EXEC_KEPT_SECONDS=1 passed"
    assert "unknown job_id" in s.tool_err("output", {"job_id": jid, "stdout": "all"})


# ==========================================================================
# Head retention
# ==========================================================================

def test_head_retention_all_is_head_gap_tail(raw_server):
    s = raw_server(env={"MCP_EXEC_KEEP_HEAD_BYTES": "100", "MCP_EXEC_MAX_OUTPUT_BYTES": "1000"})
    expected = numbered(1000, 1999)  # 1000 lines of 5 bytes
    assert len(expected) == 5000
    jid = s.job("seq 1000 1999", close_stdin=True)
    s.until_done(jid)
    o = s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]
    head, om, tail = check_gap(o, total=5000)
    assert o["offset"] == 0 and o["bytes"] == 100, short(o)
    assert head == expected[:100].decode(), short(o)
    assert om == {"offset": 100, "bytes": 3900}, om
    assert tail["offset"] == 4000 and tail["bytes"] == 1000, tail
    assert tail["data"] == expected[4000:].decode()
    # a range inside the head is served from it, exactly
    r = s.tool("output", {"job_id": jid, "stdout": {"from": 10, "length": 20}})["stdout"]
    assert r == {"data": expected[10:30].decode(), "offset": 10, "bytes": 20, "total_bytes": 5000,
                 "truncated": False}, r
    # and one inside the window from the window
    r = s.tool("output", {"job_id": jid, "stdout": {"from": 4500, "length": 25}})["stdout"]
    assert r["data"] == expected[4500:4525].decode() and r["offset"] == 4500, r
    # the delivered result has the same shape, and the gap is not "uncaptured"
    done = s.collect(jid)
    d = done["stdout"]
    check_gap(d, total=5000)
    assert d["data"] == head and d["tail"] == tail, short(d)
    assert "uncaptured" not in done, short(done)


def test_head_retention_then_budget_cut_keeps_one_gap(raw_server):
    s = raw_server(env={"MCP_EXEC_KEEP_HEAD_BYTES": "100000", "MCP_EXEC_MAX_OUTPUT_BYTES": "100000"})
    expected = numbered(1, 70000)
    jid = s.job("seq 1 70000", close_stdin=True)
    s.until_done(jid)
    res, n = s.call("output", {"job_id": jid, "stdout": "all", "max_reply_bytes": 4096})
    assert n <= 4096, n
    o = s.decode(res)["stdout"]
    head, om, tail = check_gap(o, total=len(expected))
    assert head.encode() == expected[o["offset"]:o["offset"] + o["bytes"]]
    assert tail["data"].encode() == expected[tail["offset"]:tail["offset"] + tail["bytes"]]
    assert o["offset"] == 0
    s.cleanup(jid)


def test_head_retention_never_splits_a_character(raw_server):
    s = raw_server(env={"MCP_EXEC_KEEP_HEAD_BYTES": "100", "MCP_EXEC_MAX_OUTPUT_BYTES": "1000"})
    unit = "é€😀"  # 9 bytes: 100 falls inside the é of the 12th unit
    raw = (unit * 1024).encode()
    cmd = "s='%s'; i=0; while [ $i -lt 10 ]; do s=\"$s$s\"; i=$((i+1)); done; printf '%%s' \"$s\"" % unit
    jid = s.job(cmd, close_stdin=True)
    s.until_done(jid)
    o = s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]
    head, om, tail = check_gap(o, total=len(raw))
    problems = []
    if "\ufffd" in head or len(head.encode()) != o["bytes"]:
        problems.append("head ends inside a character: bytes %d, data ends %r" % (o["bytes"], head[-3:]))
    if "\ufffd" in tail["data"] or len(tail["data"].encode()) != tail["bytes"]:
        problems.append("tail starts inside a character: offset %d, data starts %r"
                        % (tail["offset"], tail["data"][:3]))
    assert not problems, problems
    s.cleanup(jid)


def test_head_range_reaching_into_the_gap_says_so(raw_server):
    s = raw_server(env={"MCP_EXEC_KEEP_HEAD_BYTES": "100", "MCP_EXEC_MAX_OUTPUT_BYTES": "1000"})
    expected = numbered(1000, 1999)
    jid = s.job("seq 1000 1999", close_stdin=True)
    s.until_done(jid)
    r = s.tool("output", {"job_id": jid, "stdout": {"from": 90, "length": 20}})["stdout"]
    assert r["data"].encode().startswith(expected[90:100]) and r["offset"] == 90, r
    # bytes 100..110 were dropped: the slice must not look complete and short
    assert r.get("truncated") is True or "omitted" in r, \
        "range 90..110 reaches 10 dropped bytes but the slice says nothing: %r" % r
    s.cleanup(jid)


# ==========================================================================
# uncaptured
# ==========================================================================

def test_uncaptured_stdout_of_a_failure(srv):
    r = srv.tool("execute", {"command": "head -c 4096 /dev/zero | tr '\\0' a; echo oops >&2; exit 1"})
    assert r["state"] == "error", short(r)
    assert r["stderr"]["data"] == "oops\n"
    assert "stdout" not in r
    assert r.get("uncaptured") == {"stdout": 4096}, short(r)


def test_uncaptured_stderr_of_a_success(srv):
    r = srv.tool("execute", {"command": "echo out; printf 'warning: 17 bytes' >&2"})
    assert r["state"] == "success"
    assert r.get("uncaptured") == {"stderr": 17}, r


def test_uncaptured_omits_empty_streams(srv):
    r = srv.tool("execute", {"command": "echo err >&2; exit 2"})
    assert "uncaptured" not in r, r
    r = srv.tool("execute", {"command": "exit 1"})
    assert "uncaptured" not in r, r
    r = srv.tool("execute", {"command": "true"})
    assert "uncaptured" not in r, r


def test_uncaptured_absent_when_everything_captured(srv):
    r = srv.tool("execute", {"command": "echo a; echo b >&2", "capture": "all"})
    assert "uncaptured" not in r, r


def test_uncaptured_with_capture_none(srv):
    r = srv.tool("execute", {"command": "echo abc; echo de >&2", "capture": "none"})
    assert r.get("uncaptured") == {"stdout": 4, "stderr": 3}, r


def test_uncaptured_counts_lines_a_tail_left_out(srv):
    r = srv.tool("execute", {"command": "printf 'a\\nbb\\nccc\\n'",
                             "capture": {"on_success": {"stdout": {"tail": 1}}}})
    assert r["stdout"]["data"] == "ccc\n", r
    assert r.get("uncaptured") == {"stdout": 5}, r


def test_uncaptured_on_a_kill_result(srv):
    jid = srv.job("printf '%0100d' 0; exec sleep 30")
    srv.poll_output(jid, lambda d: len(d) == 100)
    k = srv.tool("kill", {"job_id": jid})
    assert k["terminated"] is True
    assert k["result"].get("uncaptured") == {"stdout": 100}, k


def test_uncaptured_not_counted_for_a_budget_cut(srv):
    r = srv.tool("execute", {"command": NUL_MIB, "max_reply_bytes": 8192})
    assert r.get("kept") is True
    assert "uncaptured" not in r, short(r)


# ==========================================================================
# Profiles and settings
# ==========================================================================

def test_agent_profile(raw_server):
    s = raw_server(env={"MCP_EXEC_PROFILE": "agent"})
    instr = s.init_result.get("instructions", "")
    assert "yield_after" in instr and "nowait" in instr, instr
    text = descriptions(s)
    assert "64 KiB" in text, text
    assert "50 s" in text, text
    d = tool_descriptions(s)
    assert "50 s" in d["wait"], d["wait"]
    # a failure returns both streams
    r = s.tool("execute", {"command": "echo out; echo err >&2; exit 3"})
    assert r["state"] == "error"
    assert r["stdout"]["data"] == "out\n" and r["stderr"]["data"] == "err\n", r
    assert "uncaptured" not in r, r
    # a success only stdout
    r = s.tool("execute", {"command": "echo out; echo err >&2"})
    assert r["stdout"]["data"] == "out\n" and "stderr" not in r, r
    # the 64 KiB reply budget
    res, n = s.call("execute", {"command": NUL_MIB})
    r = s.decode(res)
    assert n <= 65536, n
    assert r.get("kept") is True
    # yield_after is on by default: a job waiting for input comes back
    r, took = timed(s.tool, "execute", {"command": "read x; echo got $x"}, timeout=70)
    assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
    assert took <= 1 + LATE
    s.tool("input", {"job_id": r["job_id"], "data": "z\n", "close": True})
    assert s.collect(r["job_id"])["stdout"]["data"] == "got z\n"


def test_agent_profile_keeps_heads(raw_server):
    s = raw_server(env={"MCP_EXEC_PROFILE": "agent", "MCP_EXEC_MAX_OUTPUT_BYTES": "1000"})
    expected = numbered(1, 10000)
    jid = s.job("seq 1 10000", close_stdin=True)
    s.until_done(jid)
    o = s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]
    head, om, tail = check_gap(o, total=len(expected))
    assert o["offset"] == 0 and o["bytes"] == 16384, short(o)
    assert head.encode() == expected[:16384]
    assert tail["bytes"] == 1000 and tail["data"].encode() == expected[-1000:]
    s.cleanup(jid)


def test_explicit_settings_win_over_the_agent_profile(raw_server):
    s = raw_server(env={"MCP_EXEC_PROFILE": "agent", "MCP_EXEC_MAX_REPLY_BYTES": "131072",
                        "MCP_EXEC_CAPTURE": '{"on_success":"stdout","on_error":"stderr"}',
                        "MCP_EXEC_YIELD_AFTER": "0"})
    text = descriptions(s)
    assert "128 KiB" in text and "64 KiB" not in text, text
    assert "128 KiB" in s.init_result.get("instructions", "")
    res, n = s.call("execute", {"command": NUL_MIB})
    assert 65536 < n <= 131072, n
    r = s.tool("execute", {"command": "echo out; echo err >&2; exit 3"})
    assert "stdout" not in r and r["stderr"]["data"] == "err\n", r
    r, took = timed(s.tool, "execute", {"command": "sleep 1.5; echo x"})
    assert r["state"] == "success" and "yielded" not in r, r


def test_capture_setting(raw_server):
    s = raw_server(env={"MCP_EXEC_CAPTURE": '{"on_success":"all","on_error":"none"}'})
    r = s.tool("execute", {"command": "echo o; echo e >&2"})
    assert r["stdout"]["data"] == "o\n" and r["stderr"]["data"] == "e\n", r
    r = s.tool("execute", {"command": "echo o; echo e >&2; exit 1"})
    assert "stdout" not in r and "stderr" not in r, r
    assert r.get("uncaptured") == {"stdout": 2, "stderr": 2}, r


@pytest.mark.parametrize("var,value", [
    ("MCP_EXEC_PROFILE", "bogus"),
    ("MCP_EXEC_MAX_REPLY_BYTES", "100"),
    ("MCP_EXEC_MAX_REPLY_BYTES", "1023"),
    ("MCP_EXEC_CAPTURE", '{"on_success":"x"}'),
    ("MCP_EXEC_CAPTURE", "stdout,stderr"),
    ("MCP_EXEC_YIELD_AFTER", "-1"),
    ("MCP_EXEC_TIME_LIMIT", "soon"),
    ("MCP_EXEC_KILL_GRACE", "-0.5"),
    ("MCP_EXEC_KEPT_SECONDS", "x"),
    ("MCP_EXEC_KEEP_HEAD_BYTES", "-1"),
])
def test_bad_setting_exits_2_naming_it(mcp_bin, var, value):
    p = run_until_exit({var: value})
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2, "exit %s for %s=%s; stderr: %s" % (p.returncode, var, value, err)
    assert var in err, err
    assert p.stdout == b"", p.stdout[:300]


# ==========================================================================
# Compatibility: no settings, no new arguments, 1.0's objects
# ==========================================================================

def test_plain_results_have_exactly_the_1_0_keys(srv):
    r = srv.tool("execute", {"command": "echo hi"})
    assert set(r) == {"job_id", "state", "exit_code", "stdout"}, r
    r = srv.tool("execute", {"command": "echo bad >&2; exit 4"})
    assert set(r) == {"job_id", "state", "exit_code", "stderr"}, r
    r = srv.tool("execute", {"command": "kill -TERM $$"})
    assert set(r) == {"job_id", "state", "exit_code", "signal", "stderr"}, r
    r = srv.tool("execute", {"command": "echo o; echo e >&2"})
    assert set(r) == {"job_id", "state", "exit_code", "stdout", "uncaptured"}, r
    r = srv.tool("execute", {"command": "cat", "stdin": "x", "close_stdin": True})
    assert set(r) == {"job_id", "state", "exit_code", "stdout"}, r


def test_plain_running_entries_have_exactly_the_1_0_keys(srv):
    jid = srv.job("sleep 1.5; echo z")
    try:
        assert srv.status(jid) == {"job_id": jid, "state": "running"}
        assert srv.tool("wait", {"job_ids": [jid], "timeout": 0}) == [{"job_id": jid, "state": "running"}]
        assert {"job_id": jid, "state": "running"} in srv.tool("list_jobs")["jobs"]
        r, took = timed(srv.tool, "execute", {"command": "sleep 1.2; echo blocked"})
        assert set(r) == {"job_id", "state", "exit_code", "stdout"}, r
        assert took >= 1.1
        done = srv.collect(jid)
        assert set(done) == {"job_id", "state", "exit_code", "stdout"}, done
    finally:
        srv.cleanup(jid)


def test_plain_kill_result_has_exactly_the_1_0_keys(srv):
    jid = srv.job("exec sleep 30")
    k = srv.tool("kill", {"job_id": jid})
    assert set(k) == {"job_id", "terminated", "signal_sent", "result"}, k
    assert set(k["result"]) == {"job_id", "state", "exit_code", "signal", "stderr"}, k


def test_plain_instructions_and_descriptions_state_the_defaults(srv):
    text = descriptions(srv)
    assert "8 MiB" in text, "the default budget should be stated"
    assert "64 KiB" not in text


def test_survivors_reported(srv):
    # A shell that exits leaving a background process says so; a kill of a
    # job still running ends such processes too (kill's own tests check that).
    r = srv.tool("execute", {"command": "sleep 100 >/dev/null 2>&1 & echo started"})
    assert r["state"] == "success", short(r)
    assert r.get("survivors_count") == 1, short(r)
    (s,) = r["survivors"]
    # What was alive as the shell exited: sleep, or its forked shell not yet exec'd.
    assert s["name"] in ("sleep", "sh", "bash", "dash") and isinstance(s["pid"], int) and s["state"] in ("S", "R", "D"), s
    clean = srv.tool("execute", {"command": "true"})
    assert "survivors" not in clean and "survivors_count" not in clean, short(clean)


def test_wait_until_pattern_and_idle(srv):
    jid = srv.tool("execute", {"command": "sleep 0.5; printf 're'; sleep 0.2; echo 'ady 1'; exec sleep 30",
                               "nowait": True})["job_id"]
    t0 = time.monotonic()
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 20 + SLACK, "until": {"pattern": r"^ready \d$"}})
    assert e["state"] == "running" and e["matched"] == {"stream": "stdout", "offset": 0, "line": "ready 1"}, e
    assert time.monotonic() - t0 < 10 + SLACK
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 20 + SLACK, "until": {"idle": 0.3}})
    assert e["state"] == "running" and e["idle"] is True, e
    assert srv.tool("kill", {"job_id": jid, "signal": "KILL"})["terminated"] is True
    assert "until" in srv.tool_err("wait", {"job_ids": [jid], "until": {"pattern": "x", "idle": 1}})


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
