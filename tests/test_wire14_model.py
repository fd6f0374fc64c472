"""End-to-end tests of what reaches the model under the agent profile (wire 1.4).

Job environment defaults for a reader; carriage-return redraws shown as
their last frame; capture with grep; highlights of the lines a cut result
did not show; and the sentence an until that found nothing says about an
empty stream.  Secrets masking is a separate piece and not tested here.

How the page is read where it leaves room:

- Everything here is the agent profile's (or a setting's); the compat
  profile is checked to answer as before for each piece.
- The environment defaults are set only where neither the server's
  environment nor the call's env names the variable; an empty value in env
  removes the variable from the job's environment (MCP_EXEC_JOB_ENV_DEFAULTS
  on; off keeps 1.0's env, where "" sets an empty value).
"""

import json

import pytest

from tests.helpers import SLACK, TARGET, assert_startup_refused

AGENT = {"MCP_EXEC_PROFILE": "agent"}
# The server's own environment without the variables the defaults give, so
# what a job sees is the defaults' doing (a terminal's TERM would win).
CLEAN = {"NO_COLOR": None, "FORCE_COLOR": None, "PAGER": None, "GIT_PAGER": None, "TERM": None}
# printenv, not $TERM: bash sets TERM=dumb for itself (not exported) when unset.
SHOW_ENV = 'for v in NO_COLOR PAGER GIT_PAGER TERM FORCE_COLOR; do echo "$v=$(printenv $v || echo unset)"; done'


def shown_env(srv, **kw):
    """The five variables as a job of srv sees them."""
    r = srv.run(SHOW_ENV, **kw)
    assert r["state"] == "success", r
    return dict(line.split("=", 1) for line in r["stdout"]["data"].replace("\r", "").splitlines())


# ==========================================================================
# 1. The job environment defaults
# ==========================================================================

def test_agent_jobs_get_the_environment_defaults(make_server):
    s = make_server(env=dict(AGENT, **CLEAN))
    assert shown_env(s) == {"NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb",
                            "FORCE_COLOR": "unset"}
    # A terminal job keeps the TERM its terminal has (none here): no dumb.
    assert shown_env(s, tty=True)["TERM"] == "unset"


def test_the_call_and_the_server_win_and_empty_removes(make_server):
    s = make_server(env=dict(AGENT, **dict(CLEAN, PAGER="less", FORCE_COLOR="1")))
    got = shown_env(s, env={"GIT_PAGER": "more", "TERM": ""})
    # The server's PAGER and FORCE_COLOR win (no NO_COLOR), the call's
    # GIT_PAGER wins, and an empty TERM removes it.
    assert got == {"NO_COLOR": "unset", "PAGER": "less", "GIT_PAGER": "more", "TERM": "unset",
                   "FORCE_COLOR": "1"}, got
    got = shown_env(s, env={"PAGER": "", "FORCE_COLOR": ""})
    assert got == {"NO_COLOR": "1", "PAGER": "unset", "GIT_PAGER": "cat", "TERM": "dumb",
                   "FORCE_COLOR": "unset"}, got


def test_defaults_off_and_compat_keep_the_environment(make_server):
    for env in (dict(AGENT, MCP_EXEC_JOB_ENV_DEFAULTS="off", **CLEAN), dict(CLEAN)):
        s = make_server(env=env)
        assert shown_env(s, env={"PAGER": ""}) == {"NO_COLOR": "unset", "PAGER": "", "GIT_PAGER": "unset",
                                                   "TERM": "unset", "FORCE_COLOR": "unset"}, env
        s.close()


def test_execute_says_so_under_the_profile_only(make_server):
    def execute_text(s):
        (tool,) = [t for t in s.result("tools/list")["tools"] if t["name"] == "execute"]
        return tool["description"]
    assert "NO_COLOR=1" in execute_text(make_server(env=AGENT))
    assert "NO_COLOR" not in execute_text(make_server(env=dict(AGENT, MCP_EXEC_JOB_ENV_DEFAULTS="off")))
    assert "NO_COLOR" not in execute_text(make_server())


# ==========================================================================
# 2. Carriage-return redraws show their last frame
# ==========================================================================

FRAMES = "for i in $(seq 2000); do printf '\\rprogress %d%%' $i; done; echo"


def test_two_thousand_redraws_come_back_as_one_line(make_server):
    s = make_server(env=AGENT)
    r = s.run(FRAMES)
    out = r["stdout"]
    assert out["data"] == "progress 2000%\n", out
    assert len(out["data"].encode()) < 200
    # Offsets and counts stay the raw bytes': the next page starts past them all.
    assert out["offset"] == 0 and out["bytes"] == out["total_bytes"] > 20000, out
    assert "omitted" not in out and "kept" not in r, r


def test_output_plain_false_reads_the_kept_bytes(make_server):
    s = make_server(env=AGENT)
    jid = s.job(FRAMES + "; exec sleep 30")
    s.poll_output(jid, lambda data: data == "progress 2000%\n")
    plain = s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]
    raw = s.tool("output", {"job_id": jid, "stdout": "all", "plain": False})["stdout"]
    assert plain["data"] == "progress 2000%\n", plain
    assert raw["data"].startswith("\rprogress 1%\rprogress 2%") and raw["data"].count("\r") == 2000, raw["data"][:80]
    assert (plain["offset"], plain["bytes"]) == (raw["offset"], raw["bytes"]) == (0, len(raw["data"].encode()))
    # A line end written as \r\n is a line end, not a redraw.
    jid2 = s.job("printf 'one\\r\\ntwo\\r\\n'")
    assert s.tool("wait", {"job_ids": [jid2], "timeout": 10})[0]["stdout"]["data"] == "one\ntwo\n"
    s.tool("kill", {"job_id": jid, "signal": "KILL"})


def test_recent_shows_the_last_frame(make_server):
    s = make_server(env=AGENT)
    r = s.run("for i in $(seq 500); do printf '\\r%d/500 done' $i; done; exec sleep 30", yield_after=1.5)
    assert r["yielded"] is True and r["recent"] == {"stdout": "500/500 done"}, r
    s.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})


def test_compat_keeps_the_raw_frames(make_server):
    s = make_server()
    out = s.run(FRAMES)["stdout"]
    assert out["data"].count("\r") == 2000 and out["data"].endswith("progress 2000%\n"), out["data"][-40:]


# ==========================================================================
# 3. capture takes output's object forms, grep included
# ==========================================================================

# A failing build: 5,000 lines on stderr, one error in the middle, exit 2.
BUILD = ("for i in $(seq 2500); do echo \"  CC      src/unit$i.o\"; done >&2; "
         "echo \"main.c:42: error: expected ';'\" >&2; "
         "for i in $(seq 2500); do echo \"  CC      lib/part$i.o\"; done >&2; exit 2")
ERROR_LINE = "main.c:42: error: expected ';'"


def test_capture_grep_answers_a_failing_build_in_a_few_hundred_bytes(make_server):
    s = make_server(env=AGENT)
    res = s.tool_raw("execute", {"command": BUILD, "capture": {"on_error": {"stderr": {"grep": "error:"}}}})
    text = res["content"][0]["text"]
    assert len(text) < 400, text  # about 120 KB of output
    r = json.loads(text)
    assert res["structuredContent"] == r, res
    assert r["state"] == "error" and r["exit_code"] == 2, r
    g = r["stderr"]
    assert [m["line"] for m in g["matches"]] == [ERROR_LINE] and g["match_count"] == 1, g
    assert g["dropped_bytes"] == 0 and g["searched"]["from"] == 0, g
    # The offset is the line's: output reads it there; the job is kept for that.
    assert r["kept"] is True and r["uncaptured"] == {"stderr": g["searched"]["to"]}, r
    o = s.tool("output", {"job_id": r["job_id"], "stderr": {"from": g["matches"][0]["offset"], "length": len(ERROR_LINE)}})
    assert o["stderr"]["data"] == ERROR_LINE, o
    # The other object forms, as output takes them.
    r = s.run("seq 1 100; exit 1", capture={"on_error": {"stdout": {"tail": 2}, "stderr": "none"}})
    assert r["stdout"]["data"] == "99\n100\n", r
    r = s.run("seq 1 100", capture={"on_success": {"stdout": {"grep": "^5", "max": 2, "context": 1}}})
    assert [(m["line"], m["before"], m["after"]) for m in r["stdout"]["matches"]] == [("5", ["4"], ["6"]), ("50", ["49"], ["51"])], r
    assert r["stdout"]["match_count"] == 11 and r["stdout"]["next"] > 0, r


def test_capture_grep_refusals(make_server):
    s = make_server(env=AGENT)
    text = s.tool_err("execute", {"command": "true", "capture": {"on_success": {"stdout": {"grep": "("}}}})
    assert "RE2" in text and "capture" in text, text
    text = s.tool_err("execute", {"command": "true", "capture": {"on_success": {"stdout": "tail"}}})
    assert '{"grep": RE2}' in text, text
    # Outside the profile capture takes no grep, in 1.3's words; nor does the
    # default capture, which other tool sets use too.
    text = make_server().tool_err("execute", {"command": "true", "capture": {"on_success": {"stdout": {"grep": "x"}}}})
    assert "grep is for output" in text and "invalid" in text, text
    assert_startup_refused({"MCP_EXEC_CAPTURE": '{"on_error": {"stderr": {"grep": "x"}}}'}, "MCP_EXEC_CAPTURE")


# ==========================================================================
# 4. highlights: the failure lines a cut result did not show
# ==========================================================================

def test_a_failing_builds_error_is_in_the_first_replys_highlights(make_server):
    s = make_server(env=AGENT)
    r = s.run(BUILD)
    assert r["state"] == "error" and r["exit_code"] == 2 and r["kept"] is True, r
    err = r["stderr"]
    gap = err["omitted"]
    assert ERROR_LINE not in err["data"] and ERROR_LINE not in err["tail"]["data"], "the error was shown: no gap to search"
    assert r["highlights"] == [{"stream": "stderr", "offset": r["highlights"][0]["offset"], "line": ERROR_LINE}], r["highlights"]
    assert r["highlights_total"] == 1, r
    at = r["highlights"][0]["offset"]
    assert gap["offset"] <= at < gap["offset"] + gap["bytes"], (at, gap)
    # The offset is exact: output from it reads the line.
    o = s.tool("output", {"job_id": r["job_id"], "stderr": {"from": at, "length": len(ERROR_LINE) + 1}})
    assert o["stderr"]["data"] == ERROR_LINE + "\n", o
    # One sentence says how much was not shown and how to reach it.
    assert r["note"] == "%d bytes of stderr were not shown; output with grep reaches them." % gap["bytes"], r["note"]


def test_highlights_are_failure_forms_the_first_and_last_ten(make_server):
    s = make_server(env=AGENT)
    # Bare words are not failures; 30 distinct error lines (each written
    # twice) and 4,000 lines of padding around them.
    command = ("seq 1 2000 | sed 's/^/cc -Werror -c f/'; echo 'build: 0 errors'; "
               "for i in $(seq 30); do echo \"f$i.c:1: error: bad $i\"; echo \"f$i.c:1: error: bad $i\"; done; "
               "seq 1 2000 | sed 's/^/cc -Werror -c g/'; exit 1")
    r = s.run(command, capture={"on_error": "stdout"})
    lines = [h["line"] for h in r["highlights"]]
    want = ["f%d.c:1: error: bad %d" % (i, i) for i in list(range(1, 11)) + list(range(21, 31))]
    assert lines == want, lines
    assert r["highlights_total"] == 60, r["highlights_total"]
    assert all(h["stream"] == "stdout" for h in r["highlights"])


def test_a_long_line_is_cut_around_its_match(make_server):
    s = make_server(env=AGENT)
    command = ("seq 1 20000; printf '%s' \"$(printf 'é%.0s' $(seq 1000))\"; echo ' fatal: disk full'; seq 1 20000; exit 1")
    r = s.run(command, capture={"on_error": "stdout"})
    (h,) = r["highlights"]
    raw = h["line"].encode()
    assert len(raw) <= 300 and h["line"].endswith("fatal: disk full") and "\ufffd" not in h["line"], h
    o = s.tool("output", {"job_id": r["job_id"], "stdout": {"from": h["offset"], "length": len(raw)}})
    assert o["stdout"]["data"] == h["line"], o


def test_highlights_off_and_outside_the_profile(make_server):
    for env in (dict(AGENT, MCP_EXEC_HIGHLIGHT="off"), {"MCP_EXEC_MAX_REPLY_BYTES": "65536"}):
        r = make_server(env=env).run(BUILD)
        assert "omitted" in r["stderr"], r
        assert "highlights" not in r and "note" not in r, env
    # A pattern of one's own.
    r = make_server(env=dict(AGENT, MCP_EXEC_HIGHLIGHT="unit1234[.]o")).run(BUILD)
    assert [h["line"] for h in r["highlights"]] == ["  CC      src/unit1234.o"], r["highlights"]
    assert_startup_refused(dict(AGENT, MCP_EXEC_HIGHLIGHT="("), "MCP_EXEC_HIGHLIGHT")


# ==========================================================================
# 5. An until that found nothing says why when its stream is empty
# ==========================================================================

# A server whose ready line sits in python's buffer while stdout is a pipe.
SERVER = "exec python3 -c 'import time; print(\"Serving on port 8000\"); time.sleep(60)'"


def test_until_on_a_buffered_server_says_why(make_server):
    if TARGET == "container":
        pytest.skip("no python3 where the server runs (the default image has none)")
    s = make_server(env=dict(AGENT, PYTHONUNBUFFERED=None))  # python buffers a pipe unless told otherwise
    r = s.run(SERVER, yield_after=1.5, until={"pattern": "^Serving", "stream": "stdout"})
    assert r["state"] == "running" and r["yielded"] is True and "matched" not in r, r
    note = r["note"]
    assert note.startswith("stdout is empty:") and "buffer" in note and "tty:true" in note, note
    assert len(note) < 200, note
    # A wait with the same until, timed out, says the same.
    (e,) = s.tool("wait", {"job_ids": [r["job_id"]], "timeout": 0.5, "until": {"pattern": "^Serving", "stream": "stdout"}})
    assert e["note"] == note, e
    s.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})
    # On a terminal the line is not held: it matches, and nothing needs saying.
    r = s.run(SERVER, yield_after=10, until={"pattern": "^Serving"}, tty=True)
    assert r["matched"]["line"].startswith("Serving on port 8000") and "note" not in r, r
    s.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})


def test_until_note_only_for_empty_streams_and_the_profile(make_server):
    s = make_server(env=AGENT)
    r = s.run("echo booting; exec sleep 30", yield_after=1, until={"pattern": "^Serving"})
    assert r["yielded"] is True and "note" not in r, r  # it wrote: the pattern is what did not come
    s.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})
    r = s.run("echo booting; exec sleep 30", yield_after=1, until={"pattern": "^Serving", "stream": "stderr"})
    assert r["note"].startswith("stderr is empty:"), r
    s.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})
    c = make_server()
    r = c.run("exec sleep 30", yield_after=1, until={"pattern": "^Serving"})
    assert r["yielded"] is True and "note" not in r, r
    c.tool("kill", {"job_id": r["job_id"], "signal": "KILL"})
