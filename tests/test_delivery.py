"""End-to-end tests of the delivery rule.

A finished job's result goes to every call that was already blocked on it
when it ended (each `wait` naming it, the `kill` that ended it, a concurrent
`kill`, a blocking `execute`), once per call; then the job is forgotten and
later calls get `unknown job_id` (under the agent profile: "delivered to an
earlier call", and a result whose capture left bytes out stays readable by
`status` and `output`, as a cut one does).  Every interleaving runs MCP_EXEC_LOOPS
times (default 10; MCP_EXEC_LOOPS=200 is the thorough run).

"Blocked" is proved, not guessed: the shared server sends progress every
0.05 s, and a call carrying a progressToken that has sent a progress
notification is certainly blocked.  Where a process tree must outlive the
shell for a while, the test holds it alive and releases it itself (a helper
job kills it), so no interleaving depends on a timer.
"""

import itertools
import json
import os
import re
import time
import uuid

import pytest

from tests.helpers import (REPLY, SLACK, Server, assert_forgotten, assert_kill_delivered, idkey, kill, marker, reply,
                           wait_until)

# Iterations of every interleaving; 10 keeps CI fast, 200 is the thorough run.
LOOPS = int(os.environ.get("MCP_EXEC_LOOPS", "10"))

# A job whose shell dies on TERM while a TERM-ignoring member of its process
# group lives on until the test kills it: `kill` then blocks in the group
# drain for as long as the test wants.  The member prints its pid (it is the
# process that `exec sleep` turns into) once it ignores TERM.
HELD_GROUP = "(trap '' TERM; exec sh -c 'echo held $$; exec sleep 300') & exec sleep 300"

# A job whose shell, on TERM, keeps running until a marker file exists (the
# %s), then exits 7: `kill` blocks waiting for the shell itself, reporting
# progress, for as long as the test wants.
TERM_HOLDS_SHELL = ("trap 'while [ ! -e %s ]; do sleep 0.02; done; exit 7' TERM; echo ready;"
                    " while :; do sleep 0.05; done")

_tokens = itertools.count(1)


def new_token():
    return "tok-%d-%s" % (next(_tokens), uuid.uuid4().hex[:6])


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shared(mcp_bin):
    """One server for the whole file: start-up is paid once, not per loop."""
    s = Server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.05"})
    s.held_pids = set()  # TERM-ignoring members a test has not released yet
    yield s
    if s.proc.poll() is None:
        assert s.close() == 0, "graceful shutdown must exit with status 0"


@pytest.fixture
def ds(shared):
    """The shared server, with every job and held process of the test gone
    afterwards (a failed iteration must not leak into the next test)."""
    assert shared.proc.poll() is None, \
        "the shared server has exited (%s); stderr: %s" % (shared.proc.poll(), shared.stderr_text[-2000:])
    yield shared
    if shared.proc.poll() is not None:
        return
    release_all(shared)
    shared.cleanup(*shared.list_ids())


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def repeat(body, *args):
    """Run one interleaving LOOPS times; a failure says which iteration."""
    for i in range(LOOPS):
        try:
            body(*args)
        except AssertionError as e:
            raise AssertionError("iteration %d of %d: %s" % (i + 1, LOOPS, e)) from e


def start_together(s, *calls):
    """Send several tools/call requests, (name, arguments) each, in a single
    write, so the server has them all as soon as it reads the first; return
    their ids in order."""
    ids, data = [], b""
    for name, args in calls:
        rid = s.new_id()
        ids.append(rid)
        msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
               "params": {"name": name, "arguments": args}}
        data += json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\n"
    s.send_raw(data)
    return ids


def await_blocked(s, rid, token, timeout=REPLY, answered_ok=False):
    """Return once call rid (sent with progressToken token) has sent a
    progress notification, i.e. is certainly blocked.  An answer before
    that fails, unless answered_ok (then the answer counts as well)."""
    key = idkey(rid)
    deadline = time.monotonic() + timeout
    with s._cond:
        while True:
            if s.progress(token):
                return
            if key in s.responses:
                if answered_ok:
                    return
                raise AssertionError("call %s answered before it blocked: %r" % (rid, s.responses[key][1]))
            remaining = deadline - time.monotonic()
            assert remaining > 0, "call %s never reported progress within %ss" % (rid, timeout)
            assert not s.stdout_closed, "server closed stdout; stderr: %s" % s.stderr_text[-2000:]
            s._cond.wait(min(remaining, 0.5))


def start_held(s):
    """A HELD_GROUP job, its TERM-ignoring member armed; returns (job_id, pid)."""
    jid = s.job(HELD_GROUP)
    out = s.poll_output(jid, lambda data: re.search(r"held \d+\n", data) is not None)
    pid = int(re.search(r"held (\d+)\n", out["stdout"]["data"]).group(1))
    s.held_pids.add(pid)
    return jid, pid


def release(s, pid):
    """Kill a held member from a helper job in the server's world."""
    s.held_pids.discard(pid)
    r = s.run("kill -KILL %d" % pid, timeout=REPLY)
    assert r["state"] == "success", "could not release held pid %d: %r" % (pid, r)


def release_all(s):
    for pid in list(s.held_pids):
        s.held_pids.discard(pid)
        s.run("kill -KILL %d 2>/dev/null; true" % pid, timeout=REPLY)


def start_term_holding(s):
    """A TERM_HOLDS_SHELL job with its trap set; returns (job_id, gate):
    the shell exits once the file gate exists."""
    gate = marker()
    jid = s.job(TERM_HOLDS_SHELL % gate)
    s.poll_output(jid, lambda data: data == "ready\n")
    return jid, gate


def assert_signalled(r, jid, word):
    """r is jid's terminal result for death by the signal strsignal calls word."""
    assert r.get("job_id") == jid, r
    assert r.get("state") == "error", r
    assert r.get("exit_code") == -1, r
    assert r.get("signal") == word, r
    assert "start_error" not in r, r


# ==========================================================================
# The delivery rule
# ==========================================================================

def _kill_during_blocked_wait(s):
    jid = s.job("sleep 30")
    tok = new_token()
    wait_id = s.tool_start("wait", {"job_ids": [jid], "timeout": 60}, meta={"progressToken": tok})
    await_blocked(s, wait_id, tok)
    k = kill(s, jid, "KILL")
    result = assert_kill_delivered(k, jid, signal_sent=9)
    assert_signalled(result, jid, "killed")
    assert reply(s, wait_id, "the blocked wait") == [result], \
        "the blocked wait must get the same result as the kill"
    assert_forgotten(s, jid)


def test_kill_during_blocked_wait_delivers_to_both(ds):
    repeat(_kill_during_blocked_wait, ds)


def _kill_racing_wait(s):
    # No gate: the kill goes out right behind the wait, so the two race
    # inside the server.  The wait was read first, so it was waiting first.
    jid = s.job("sleep 30")
    wait_id = s.tool_start("wait", {"job_ids": [jid], "timeout": 60})
    kill_id = s.tool_start("kill", {"job_id": jid, "signal": "KILL", "timeout": 10 + SLACK})
    result = assert_kill_delivered(reply(s, kill_id, "the kill"), jid, signal_sent=9)
    assert_signalled(result, jid, "killed")
    assert reply(s, wait_id, "the racing wait") == [result], \
        "the racing wait must get the same result as the kill"
    assert_forgotten(s, jid)


def test_kill_sent_right_behind_wait_delivers_to_both(ds):
    repeat(_kill_racing_wait, ds)


def _kill_during_two_blocked_waits(s):
    # "each wait naming it": two waits, one of them naming the job twice.
    jid = s.job("sleep 30")
    tok1, tok2 = new_token(), new_token()
    w1 = s.tool_start("wait", {"job_ids": [jid], "timeout": 60}, meta={"progressToken": tok1})
    w2 = s.tool_start("wait", {"job_ids": [jid, jid], "timeout": 60}, meta={"progressToken": tok2})
    await_blocked(s, w1, tok1)
    await_blocked(s, w2, tok2)
    k = kill(s, jid, "KILL")
    result = assert_kill_delivered(k, jid, signal_sent=9)
    assert_signalled(result, jid, "killed")
    assert reply(s, w1, "the first blocked wait") == [result]
    assert reply(s, w2, "the second blocked wait") == [result, result]
    assert_forgotten(s, jid)


def test_kill_during_two_blocked_waits_delivers_to_all(ds):
    repeat(_kill_during_two_blocked_waits, ds)


def _wait_during_kill_drain(s):
    jid, pid = start_held(s)
    kill_id = s.tool_start("kill", {"job_id": jid, "signal": "TERM", "timeout": 10 + SLACK})
    # The shell dies of the TERM; the held member keeps the group, and so
    # the kill, waiting.
    st = s.until_done(jid, timeout=REPLY)
    assert_signalled(st, jid, "terminated")
    assert not s.has_response(kill_id), "kill answered while its process group was still alive"
    tok = new_token()
    wait_id = s.tool_start("wait", {"job_ids": [jid], "timeout": 60}, meta={"progressToken": tok})
    # The wait may answer at once (the job has ended) or block until the
    # kill is done; either way it must be in the server before the release.
    await_blocked(s, wait_id, tok, answered_ok=True)
    assert not s.has_response(kill_id), "kill answered while its process group was still alive"
    release(s, pid)
    result = assert_kill_delivered(reply(s, kill_id, "the draining kill"), jid, signal_sent=15)
    assert_signalled(result, jid, "terminated")
    assert reply(s, wait_id, "the wait sent during the drain") == [result], \
        "the wait must get the same result as the kill"
    assert_forgotten(s, jid)


def test_wait_arriving_during_kill_drain_gets_result_and_kill_too(ds):
    repeat(_wait_during_kill_drain, ds)


def _two_blocked_kills(s):
    jid, gate = start_term_holding(s)
    try:
        tok1, tok2 = new_token(), new_token()
        args = {"job_id": jid, "signal": "TERM", "timeout": 10 + SLACK}
        k1 = s.tool_start("kill", args, meta={"progressToken": tok1})
        k2 = s.tool_start("kill", args, meta={"progressToken": tok2})
        await_blocked(s, k1, tok1)
        await_blocked(s, k2, tok2)
        assert s.run("touch %s" % gate)["state"] == "success"
        r1 = assert_kill_delivered(reply(s, k1, "the first blocked kill"), jid, signal_sent=15)
        r2 = assert_kill_delivered(reply(s, k2, "the second blocked kill"), jid, signal_sent=15)
        assert r1.get("state") == "error" and r1.get("exit_code") == 7 and "signal" not in r1, r1
        assert r1 == r2, "both kills must get the same result"
        assert_forgotten(s, jid)
    finally:
        s.run("rm -f %s" % gate)


def test_two_blocked_kills_both_get_result(ds):
    repeat(_two_blocked_kills, ds)


def _two_racing_kills(s):
    # No gate: both kills race inside the server.  They go out in one write:
    # sent one by one, the second could reach the server after the first
    # had delivered the result, and `unknown job_id` would then be right.
    jid = s.job("sleep 30")
    args = {"job_id": jid, "signal": "TERM", "timeout": 10 + SLACK}
    k1, k2 = start_together(s, ("kill", args), ("kill", args))
    r1 = assert_kill_delivered(reply(s, k1, "the first kill"), jid)
    r2 = assert_kill_delivered(reply(s, k2, "the second kill"), jid)
    assert_signalled(r1, jid, "terminated")
    assert r1 == r2, "both kills must get the same result"
    assert_forgotten(s, jid)


def test_two_kills_sent_back_to_back_both_get_result(ds):
    repeat(_two_racing_kills, ds)


def _kill_during_blocking_execute(s):
    tok = new_token()
    exec_id = s.tool_start("execute", {"command": "sleep 30"}, meta={"progressToken": tok})
    await_blocked(s, exec_id, tok)
    ids = s.list_ids()
    assert len(ids) == 1, "expected only the blocking execute's job, got %r" % ids
    jid = ids[0]
    k = kill(s, jid, "TERM")
    result = assert_kill_delivered(k, jid, signal_sent=15)
    assert_signalled(result, jid, "terminated")
    assert reply(s, exec_id, "the blocking execute") == result, \
        "the blocking execute must get the same result as the kill"
    assert_forgotten(s, jid)


def test_kill_during_blocking_execute_delivers_to_both(ds):
    repeat(_kill_during_blocking_execute, ds)


def _kill_one_of_several_waited(s):
    a, b, c = s.job("sleep 30"), s.job("sleep 30"), s.job("sleep 30")
    try:
        tok = new_token()
        wait_id = s.tool_start("wait", {"job_ids": [a, b, c], "timeout": 60}, meta={"progressToken": tok})
        await_blocked(s, wait_id, tok)
        k = kill(s, b, "TERM")
        result = assert_kill_delivered(k, b, signal_sent=15)
        assert_signalled(result, b, "terminated")
        assert reply(s, wait_id, "the blocked multi-wait") == \
            [{"job_id": a, "state": "running"}, result, {"job_id": c, "state": "running"}]
        assert s.list_ids() == [a, c], "the jobs still running must stay"
        assert_forgotten(s, b)
        for jid in (a, c):
            assert kill(s, jid, "KILL").get("terminated") is True
        assert s.list_ids() == []
    finally:
        s.cleanup(a, c)  # after a failure; harmless (unknown job_id) otherwise


def test_kill_of_one_job_in_a_blocked_multi_wait(ds):
    repeat(_kill_one_of_several_waited, ds)


# ==========================================================================
# Agent profile: what a delivered result left out stays in reach
# ==========================================================================

AGENT = {"MCP_EXEC_PROFILE": "agent"}
WARNS = "echo built; echo 'warning: unused variable x' >&2"


def test_uncaptured_stderr_readable_after_delivery(make_server):
    # The result said stderr had 27 bytes, and output then answered
    # unknown job_id: the warning was gone.
    s = make_server(env=AGENT)
    r = s.run(WARNS)
    assert r["stdout"]["data"] == "built\n" and "stderr" not in r, r
    assert r.get("uncaptured") == {"stderr": 27} and r.get("kept") is True, r
    jid = r["job_id"]
    out = s.tool("output", {"job_id": jid, "stderr": "all"})
    assert out["stderr"]["data"] == "warning: unused variable x\n", out
    assert s.status(jid)["state"] == "success"
    # still delivered: wait and kill say so, list_jobs does not list it
    assert "already delivered" in s.tool_err("wait", {"job_ids": [jid], "timeout": 0})
    assert "already delivered" in s.tool_err("kill", {"job_id": jid})
    assert jid not in s.list_ids()


def test_uncaptured_of_a_failure_and_of_a_wait_readable_after_delivery(make_server):
    s = make_server(env=dict(AGENT, MCP_EXEC_CAPTURE='{"on_success":"stdout","on_error":"stderr"}'))
    r = s.run("echo 'FAIL: test_parse at line 3'; echo 'exit status 1' >&2; exit 1")
    assert r.get("uncaptured") == {"stdout": 27} and r.get("kept") is True, r
    assert s.tool("output", {"job_id": r["job_id"], "stdout": "all"})["stdout"]["data"] == \
        "FAIL: test_parse at line 3\n"
    jid = s.job(WARNS)
    done = s.collect(jid)
    assert done.get("kept") is True, done
    assert s.tool("output", {"job_id": jid, "stderr": {"tail": 1}})["stderr"]["data"] == "warning: unused variable x\n"


def test_uncaptured_result_forgotten_after_kept_seconds(make_server):
    s = make_server(env=dict(AGENT, MCP_EXEC_KEPT_SECONDS="1"))
    jid = s.run(WARNS)["job_id"]

    def gone():
        res = s.tool_raw("status", {"job_id": jid})
        return res.get("isError") and res["content"][0]["text"]
    text = wait_until(gone, 5 + SLACK, "the kept job %s being forgotten" % jid, interval=0.1)
    assert text == "unknown job_id: %s (delivered to an earlier call)" % jid, text


def test_uncaptured_outside_the_profile_is_not_kept(make_server):
    # 1.0: a delivered job is gone, whatever its capture left out.
    s = make_server()
    r = s.run(WARNS)
    assert r.get("uncaptured") == {"stderr": 27} and "kept" not in r, r
    assert s.tool_err("output", {"job_id": r["job_id"], "stderr": "all"}).startswith("unknown job_id: %s" % r["job_id"])


def test_delivered_id_says_delivered(make_server):
    s = make_server(env=AGENT)
    jid = s.run("true")["job_id"]
    want = "unknown job_id: %s (delivered to an earlier call)" % jid
    assert s.tool_err("status", {"job_id": jid}) == want
    assert s.tool_err("wait", {"job_ids": [jid], "timeout": 0}) == want
    assert s.tool_err("kill", {"job_id": jid}) == want
    assert s.tool_err("output", {"job_id": int(jid), "stdout": "all"}) == want
    # an id never issued stays plainly unknown
    assert s.tool_err("status", {"job_id": "5"}) == "unknown job_id: 5"


def test_delivered_ids_remembered_beyond_a_thousand(make_server):
    s = make_server(env=AGENT)
    first = s.run("true")["job_id"]
    jids = [s.job("true") for _ in range(1100)]
    s.tool("wait", {"job_ids": jids, "timeout": 20})
    while True:  # a wait delivers what has finished by then; the rest on the next
        left = [j for j in jids if j in s.list_ids()]
        if not left:
            break
        s.tool("wait", {"job_ids": left, "timeout": 20})
    for jid in (first, jids[0], jids[-1]):
        assert s.tool_err("status", {"job_id": jid}) == "unknown job_id: %s (delivered to an earlier call)" % jid


def test_delivered_id_says_delivered_outside_the_profile_too(make_server):
    # 1.0 promises only the phrase "unknown job_id", which the text keeps.
    s = make_server()
    jid = s.run("true")["job_id"]
    assert s.tool_err("status", {"job_id": jid}) == "unknown job_id: %s (delivered to an earlier call)" % jid
