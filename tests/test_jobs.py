"""End-to-end tests of what execute starts and how long a call waits.

Checked against a real server process: arguments checked by name; argv (a
program and its arguments, no shell); time_limit, which ends a job with TERM
then KILL; yield_after, which hands a still-running job back to the caller;
wait's until (a pattern or idle output); survivors a finished job leaves
behind; the agent profile and the settings' validation; and that a client
using none of these arguments sees exactly the result objects it always saw.

One test runs a job for 75 seconds; it is marked `slow`:
    pytest -m "not slow" tests/test_jobs.py
leaves it out.
"""

import time

import pytest

from tests.helpers import (MIB, SLACK, assert_startup_refused, check_gap, descriptions, marker, numbered,
                           poll_status, short, timed)

NUL_MIB = "head -c %d /dev/zero" % MIB
# A few seconds of tolerance for "returns at about t".
LATE = 3.0 + SLACK


def tool_descriptions(s):
    return {t["name"]: t.get("description", "") for t in s.result("tools/list")["tools"]}


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
def test_75s_execute_yields_at_5s_and_wait_collects(srv):
    """A 75 s blocking execute with yield_after 5
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
    assert s.answer(r["job_id"], "z\n", close=True)["stdout"]["data"] == "got z\n"


def test_agent_profile_keeps_heads(raw_server):
    # Spill (on under the profile) would keep every byte: the kept head is
    # what a window without it still has.
    s = raw_server(env={"MCP_EXEC_PROFILE": "agent", "MCP_EXEC_MAX_OUTPUT_BYTES": "1000", "MCP_EXEC_SPILL": "off"})
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
    assert_startup_refused({var: value}, var)


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
    assert e["state"] == "running" and e["matched"] == {"stream": "stdout", "offset": 0, "line": "ready 1", "next": 8}, e
    assert time.monotonic() - t0 < 10 + SLACK
    (e,) = srv.tool("wait", {"job_ids": [jid], "timeout": 20 + SLACK, "until": {"idle": 0.3}})
    assert e["state"] == "running" and e["idle"] is True, e
    assert srv.tool("kill", {"job_id": jid, "signal": "KILL"})["terminated"] is True
    assert "until" in srv.tool_err("wait", {"job_ids": [jid], "until": {"pattern": "x", "idle": 1}})
