"""End-to-end tests of until over what a job already wrote, until on execute,
and output's grep.

wait's until.pattern matches the complete lines a job's windows keep (from
the oldest kept byte, or from until.from) as well as new ones, and
matched.next is the from that looks past a line; execute takes the same
until and returns, the job left running, on the line; output's
{"grep": RE2, ...} lists the kept lines of a stream that match, on running
jobs and on kept results.
"""

import json
import time

from tests.helpers import SLACK, short, wait_until

AGENT = {"MCP_EXEC_PROFILE": "agent"}


def output_text(s, args):
    """output's reply text, and its decoded result."""
    res = s.tool_raw("output", args)
    assert not res.get("isError"), res
    text = res["content"][0]["text"]
    return text, json.loads(text)


# ==========================================================================
# until over output already written
# ==========================================================================

def test_until_matches_a_line_written_before_the_wait(srv):
    jid = srv.job("echo booting; echo 'Serving HTTP on 0.0.0.0 port 8000'; exec sleep 30")
    wait_until(lambda: "Serving HTTP" in srv.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["data"],
               10 + SLACK, "the ready line")
    t0 = time.monotonic()
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 30, "until": {"pattern": "^Serving HTTP"}})
    took = time.monotonic() - t0
    assert e["state"] == "running", e
    assert e["matched"] == {"stream": "stdout", "offset": 8, "line": "Serving HTTP on 0.0.0.0 port 8000",
                            "next": 42}, e
    assert took < 2 + SLACK, "a line already written took %.1f s to match" % took
    # next, given as from, looks past the line: nothing more within the timeout.
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 0.3,
                             "until": {"pattern": "^Serving HTTP", "from": 42}})
    assert "matched" not in e, e
    assert srv.tool("kill", {"job_id": jid, "signal": "KILL"})["terminated"] is True


def test_until_from_inside_a_line_skips_its_rest(srv):
    jid = srv.job("echo 'ready now'; exec sleep 30")
    wait_until(lambda: srv.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["total_bytes"] == 10,
               10 + SLACK, "the line")
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 0.3, "until": {"pattern": "now", "from": 3}})
    assert "matched" not in e, e
    srv.tool("kill", {"job_id": jid, "signal": "KILL"})


# ==========================================================================
# until on execute
# ==========================================================================

def test_execute_until_returns_on_the_line_with_the_job_running(srv):
    t0 = time.monotonic()
    r = srv.tool("execute", {"command": "echo starting; sleep 0.5; echo 'listening on :8080'; exec sleep 60",
                             "until": {"pattern": "listening on"}})
    took = time.monotonic() - t0
    assert r["state"] == "running" and "yielded" not in r, r
    assert r["matched"] == {"stream": "stdout", "offset": 9, "line": "listening on :8080", "next": 28}, r
    assert took < 5 + SLACK, took
    assert srv.status(r["job_id"])["state"] == "running"
    assert srv.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})["terminated"] is True


def test_execute_until_gives_the_result_of_a_job_that_ends_first(srv):
    r = srv.tool("execute", {"command": "echo built; exit 2", "until": {"pattern": "never"}, "capture": "all"})
    assert r["state"] == "error" and r["exit_code"] == 2 and r["stdout"]["data"] == "built\n", r
    assert "matched" not in r, r


def test_execute_until_idle(srv):
    r = srv.tool("execute", {"command": "echo warming up; exec sleep 60", "until": {"idle": 0.5}})
    assert r["state"] == "running" and r["idle"] is True, r
    srv.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})


def test_execute_until_refused_with_nowait(srv):
    text = srv.tool_err("execute", {"command": "true", "nowait": True, "until": {"pattern": "x"}})
    assert "until" in text and "nowait" in text, text
    text = srv.tool_err("execute", {"command": "true", "until": {"pattern": "("}})
    assert "until.pattern" in text, text


# ==========================================================================
# output grep
# ==========================================================================

def test_grep_finds_a_line_in_a_5mb_result_in_one_call(raw_server):
    s = raw_server(env=AGENT)
    # About 5 MB; the line sits near the end, which the window keeps.
    r = s.tool("execute", {"command": "seq 1 650000; echo 'error: checksum mismatch in block 17'; seq 1 1000"},
               timeout=60)
    assert r["state"] == "success" and r.get("kept") is True, short(r)
    text, g = output_text(s, {"job_id": r["job_id"], "stdout": {"grep": "^error:"}})
    assert len(text.encode()) <= 1024, "the search answered %d bytes: %s" % (len(text.encode()), text)
    found = g["stdout"]
    assert found["match_count"] == 1, found
    (m,) = found["matches"]
    assert m["line"] == "error: checksum mismatch in block 17", m
    assert found["searched"]["to"] == r["stdout"]["total_bytes"], found
    # The offset is the line's: a byte range read there starts with it.
    text, at = output_text(s, {"job_id": r["job_id"], "stdout": {"from": m["offset"], "length": 6}})
    assert at["stdout"]["data"] == "error:", at


def test_grep_on_a_running_job_with_context_and_paging(srv):
    jid = srv.job("seq 1 100; exec sleep 30")
    wait_until(lambda: srv.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["total_bytes"] == 292,
               10 + SLACK, "seq's output")
    _, r = output_text(srv, {"job_id": jid, "stdout": {"grep": "5$", "max": 2, "context": 1}})
    g = r["stdout"]
    assert r["state"] == "running" and g["match_count"] == 10, g
    assert [(m["line"], m["before"], m["after"]) for m in g["matches"]] == [("5", ["4"], ["6"]), ("15", ["14"], ["16"])], g
    assert g["searched"] == {"from": 0, "to": 292}, g
    _, r = output_text(srv, {"job_id": jid, "stdout": {"grep": "5$", "from": g["next"]}})
    assert [m["line"] for m in r["stdout"]["matches"]] == ["25", "35", "45", "55", "65", "75", "85", "95"], r
    assert r["stdout"]["match_count"] == 8, r
    srv.tool("kill", {"job_id": jid, "signal": "KILL"})


def test_grep_refusals_say_what_is_allowed(srv):
    jid = srv.job("true")
    for spec, words in (({"grep": "("}, "RE2"), ({"grep": "x", "max": -1}, "from 1 to 1000"),
                        ({"grep": "x", "context": 50}, "from 0 to 20"), ({"grep": "x", "lines": 3}, "unknown key")):
        text = srv.tool_err("output", {"job_id": jid, "stdout": spec})
        assert words in text and "stdout" in text, text
    text = srv.tool_err("execute", {"command": "true", "capture": {"on_success": {"stdout": {"grep": "x"}}}})
    assert "grep is for output" in text, text
