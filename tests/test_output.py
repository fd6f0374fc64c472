"""End-to-end tests of how much output a reply carries.

The reply budget (max_reply_bytes, MCP_EXEC_MAX_REPLY_BYTES, measured on the
raw stdout line) cuts results into slices with a gap (head, omitted, tail)
and defers what a wait cannot fit; head retention (MCP_EXEC_KEEP_HEAD_BYTES)
keeps a stream's first bytes beside its window; `kept` jobs are forgotten
after MCP_EXEC_KEPT_SECONDS; `uncaptured` counts the lines a capture policy
left out.  Under the agent profile a cut result keeps a head and a tail of
comparable size in every protocol era, and results leave out empty streams
and usage.
"""

import json
import time

import pytest

from tests.helpers import MIB, SLACK, ToolError, check_gap, descriptions, idkey, numbered, short, wait_until

NUL_MIB = "head -c %d /dev/zero" % MIB
DEFAULT_BUDGET = 8 * MIB


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
# Agent profile: both ends of a cut result, compact results
# ==========================================================================

AGENT = {"MCP_EXEC_PROFILE": "agent"}


def assert_head_and_tail(r, total):
    """A kept result whose stdout is cut to a head from the stream's first
    byte and a tail of comparable size, the gap named; returns the slice."""
    assert r.get("kept") is True, short(r)
    out = r["stdout"]
    head, om, tail = check_gap(out, total=total)
    assert out["offset"] == 0 and head.startswith("1\n2\n3\n"), short(out)
    assert out["bytes"] > 0 and tail["bytes"] > 0, short(out)
    assert out["bytes"] <= 2 * tail["bytes"] and tail["bytes"] <= 2 * out["bytes"], \
        "head of %d bytes, tail of %d: not comparable" % (out["bytes"], tail["bytes"])
    return out


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18"])
def test_cut_result_keeps_a_head_and_a_tail(raw_server, version):
    # The 6.9 MB of seq 1 1000000 went out as 0 head bytes and a tail under
    # 2025-06-18; under 2024-11-05 its text was 57 KB.
    s = raw_server(env=AGENT, version=version)
    total = len(numbered(1, 1000000))
    res, n = s.call("execute", {"command": "seq 1 1000000"})
    text = res["content"][0]["text"]
    assert n <= 65536 and len(text) <= 32 * 1024, (n, len(text))
    out = assert_head_and_tail(s.decode(res), total)
    assert out["bytes"] >= 8192, short(out)  # the head comes from head retention (16 KiB)


@pytest.mark.parametrize("env", [AGENT, dict(AGENT, MCP_EXEC_KEEP_HEAD_BYTES="0")])
def test_cut_result_keeps_both_ends_under_a_small_budget(raw_server, env):
    # Without head retention the head is the window's start: with a stream
    # shorter than the window, the stream's start.
    s = raw_server(env=env)
    total = len(numbered(1, 100000))
    res, n = s.call("execute", {"command": "seq 1 100000", "max_reply_bytes": 16384})
    assert n <= 16384, n
    assert_head_and_tail(s.decode(res), total)


def test_text_of_a_5mb_result_is_at_most_32kib(raw_server):
    s = raw_server(env=AGENT, version="2024-11-05")
    res, _ = s.call("execute", {"command": "seq 1 800000 | head -c 5000000"})
    assert len(res["content"][0]["text"]) <= 32 * 1024
    assert_head_and_tail(s.decode(res), 5000000)


def test_wait_and_output_all_keep_both_ends_under_a_small_budget(raw_server):
    s = raw_server(env=AGENT)
    total = len(numbered(1, 300000))
    a = s.job("seq 1 300000")
    b = s.job("seq 1 300000 >&2; exit 1")
    wait_all_done(s, [a, b])
    res, n = s.call("wait", {"job_ids": [a, b], "timeout": 0, "max_reply_bytes": 8192})
    assert n <= 8192, n
    ra, rb = s.decode(res)
    assert_head_and_tail(ra, total)
    assert_head_and_tail(dict(rb, stdout=rb["stderr"]), total)
    res, n = s.call("output", {"job_id": a, "stdout": "all", "max_reply_bytes": 4096})
    assert n <= 4096, n
    assert_head_and_tail(dict(s.decode(res), kept=True), total)


def test_wait_that_defers_delivers_the_first_result_whole(srv):
    # Each try to fit started from the slices the try before had cut: all
    # five were deferred, at every wait, and each deferred entry said kept.
    jids = [srv.job("echo hi") for _ in range(5)]
    wait_all_done(srv, jids)
    entries = srv.tool("wait", {"job_ids": jids, "timeout": 0, "max_reply_bytes": 1024})
    assert entries[0]["stdout"]["data"] == "hi\n" and "deferred" not in entries[0], entries
    assert not any(e.get("kept") for e in entries), entries
    srv.tool("wait", {"job_ids": jids[1:], "timeout": 0})


def test_agent_result_of_true_is_compact(raw_server):
    s = raw_server(env=AGENT)
    res, _ = s.call("execute", {"command": "true"})
    text = res["content"][0]["text"]
    assert len(text) <= 160, text
    assert json.loads(text) == {"job_id": "1", "state": "success", "exit_code": 0}, text
    r = s.tool("execute", {"command": "echo oops >&2; exit 3"})
    assert "stdout" not in r and r["stderr"]["data"] == "oops\n" and "usage" not in r, r


def test_agent_usage_not_turned_on_by_confinement(raw_server):
    s = raw_server(env=dict(AGENT, MCP_EXEC_RLIMITS="nofile=4096"))  # confined: usage outside the profile
    assert "usage" not in s.tool("execute", {"command": "true"})


def test_agent_usage_only_when_asked(raw_server):
    s = raw_server(env=dict(AGENT, MCP_EXEC_USAGE="1"))
    # wire 1.3 adds what the job's cgroup counted, where it has one
    assert set(s.tool("execute", {"command": "true"})["usage"]) - {"cgroup"} == {"wall_ms", "user_ms", "sys_ms", "max_rss_kib"}


def test_results_outside_the_profile_keep_their_empty_streams(srv):
    r = srv.tool("execute", {"command": "true"})
    assert r == {"job_id": r["job_id"], "state": "success", "exit_code": 0,
                 "stdout": {"data": "", "offset": 0, "bytes": 0, "total_bytes": 0, "truncated": False}}, r
