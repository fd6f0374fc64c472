"""End-to-end tests of mcp-exec's 1.0 contract.

The suite talks to a real server process over newline-delimited JSON-RPC on
stdio; the target (MCP_EXEC_TARGET: binary, pid1 or container), the binary
(MCP_EXEC_BIN, or built once per session) and the client are in
tests/helpers.py, which conftest.py re-exports with the fixtures every suite
shares.  Run it without xdist: several fixtures share one server.

Process state is checked through the server wherever possible (a job prints a
pid, a later job inspects /proc), so the same tests work when the server lives
in another pid namespace or container.
"""

import base64
import json
import os
import random
import signal
import subprocess
import time
import uuid

import pytest

from conftest import (
    MIB, SLACK, TARGET, TERM_IGNORING_TREE, Server, assert_inflight_cancelled, await_file,
    await_no_token_processes, idkey, marker, needs_pid1_support, process_env, server_argv,
    start_shutdown_scenario, wait_until)

SUPPORTED_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
NEWEST_VERSION = "2025-11-25"
# RELEASE is the number the server must report: VERSION, the one place it is written.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as f:
    RELEASE = f.read().strip()

TOOL_ARGS = {
    "execute": {"command", "cwd", "env", "stdin", "close_stdin", "nowait", "capture"},
    "wait": {"job_ids", "timeout"},
    "status": {"job_id"},
    "output": {"job_id", "stdout", "stderr"},
    "input": {"job_id", "data", "close"},
    "kill": {"job_id", "signal", "timeout"},
    "list_jobs": set(),
}
TOOL_REQUIRED = {
    "execute": {"command"},
    "wait": {"job_ids"},
    "status": {"job_id"},
    "output": {"job_id"},
    "input": {"job_id"},
    "kill": {"job_id"},
    "list_jobs": set(),
}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def run_server_once(env=None, args=(), timeout=20):
    """Run the server to completion with stdin at EOF; return CompletedProcess."""
    return subprocess.run(server_argv(env or {}, args=args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=process_env(env or {}), timeout=timeout + SLACK)


def assert_no_survivors(token, timeout=3):
    """No process carrying MCPX_TOKEN=token is left (only meaningful where the
    server's processes are visible on the host)."""
    left = await_no_token_processes(token, timeout=timeout)
    assert not left, "job processes outlived the server: %s" % left


def seq_bytes(n):
    """What `seq 1 n` prints."""
    return b"".join(b"%d\n" % i for i in range(1, n + 1))


def b64(data):
    return base64.b64encode(data).decode("ascii")


def pid_written_to(s, path, timeout=20):
    """The pid a job wrote to path in the server's world, once it is there."""
    return int(wait_until(lambda: s.sh("cat %s 2>/dev/null || true" % path).strip(), timeout,
                          "a pid in %s" % path))


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def srv(mcp_bin):
    s = Server()
    yield s
    assert s.close() == 0, "graceful shutdown must exit with status 0"


@pytest.fixture(scope="session")
def small(mcp_bin):
    """A server with a 1000-byte window per stream."""
    s = Server(env={"MCP_EXEC_MAX_OUTPUT_BYTES": "1000"})
    yield s
    assert s.close() == 0, "graceful shutdown must exit with status 0"


@pytest.fixture
def fresh(make_server):
    return make_server()


@pytest.fixture
def pid1_server(make_server):
    needs_pid1_support()
    return make_server(pid1=True)


@pytest.fixture
def idle_job(srv):
    jid = srv.job("exec sleep 600")
    yield jid
    srv.cleanup(jid)


# ==========================================================================
# Protocol: lifecycle and framing
# ==========================================================================

def test_initialize_result_shape(fresh):
    r = fresh.init_result
    assert r["protocolVersion"] == "2025-06-18"
    assert r["capabilities"] == {"tools": {}}, r  # the wire shape, exactly
    assert r["serverInfo"]["name"] == "mcp-exec"
    assert isinstance(r["serverInfo"]["version"], str) and r["serverInfo"]["version"]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_initialize_echoes_supported_version(make_server, version):
    s = make_server(initialize=False)
    r = s.result("initialize", {"protocolVersion": version, "capabilities": {},
                                "clientInfo": {"name": "t", "version": "1"}})
    assert r["protocolVersion"] == version


@pytest.mark.parametrize("params", [
    {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    {"protocolVersion": "2099-12-31", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    {"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    {},
], ids=["ancient", "future", "modern-era", "no-version"])
def test_initialize_unknown_version_gets_newest(make_server, params):
    s = make_server(initialize=False)
    r = s.result("initialize", params)
    assert r["protocolVersion"] == NEWEST_VERSION


def test_ping_before_initialize(make_server):
    s = make_server(initialize=False)
    assert s.result("ping") == {}


def test_ping_returns_empty_object(srv):
    assert srv.result("ping") == {}


@pytest.mark.parametrize("method", ["server/discover", "resources/list", "prompts/list",
                                    "tasks/list", "no/such/method"])
def test_unknown_method_before_initialize(make_server, method):
    s = make_server(initialize=False)
    err = s.error(method, {})
    assert err["code"] == -32601
    assert s.result("ping") == {}


def test_unknown_method_after_initialize(srv):
    assert srv.error("server/discover", {})["code"] == -32601


@pytest.mark.parametrize("method,params", [
    ("notifications/initialized", None),
    ("notifications/cancelled", {"requestId": 987654321}),
    ("notifications/progress", {"progressToken": "x", "progress": 1}),
    ("notifications/whatever", {}),
    ("ping", None),  # a request without id is a notification
])
def test_notifications_are_never_answered(fresh, method, params):
    fresh.notify(method, params)
    fresh.roundtrip()
    fresh.roundtrip()
    with fresh._cond:
        assert not fresh.null_id, fresh.null_id
        assert not fresh.responses, fresh.responses


@pytest.mark.parametrize("line", [b"{", b"not json at all", b'{"jsonrpc":"2.0","id":1,',
                                  b"\xff\xfe{}", b'{"jsonrpc":"2.0","id":3,"method":"ping"}}'],
                         ids=["brace", "words", "truncated", "bad-utf8", "trailing-garbage"])
def test_parse_error_then_next_line_served(srv, line):
    srv.send_raw(line + b"\n")
    err = srv.null_id_error()
    assert err["error"]["code"] == -32700
    assert srv.result("ping") == {}


@pytest.mark.parametrize("rid", [0, 1, -5, 2 ** 53 + 1, 2 ** 64 + 3, 123456789012345678901234567890,
                                 "7", "", "id with spaces ü", "0"],
                         ids=["zero", "one", "negative", "2^53+1", "2^64+3", "huge", "str7",
                              "empty-str", "unicode-str", "str0"])
def test_request_id_echoed_exactly(srv, rid):
    msg = srv.request("ping", id=rid)
    assert msg["result"] == {}
    assert type(msg["id"]) is type(rid) and msg["id"] == rid


def test_string_and_number_ids_are_distinct(srv):
    srv.start("ping", id="77")
    srv.start("ping", id=77)
    a = srv.response("77")
    b = srv.response(77)
    assert a["id"] == "77" and b["id"] == 77


def test_raw_big_id_text_echoed(srv):
    srv.send_raw(b'{"jsonrpc":"2.0","id":9007199254740995,"method":"ping"}\n')
    msg = srv.response(9007199254740995)
    assert msg["id"] == 9007199254740995


@pytest.mark.parametrize("line", [
    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
    b'[{"jsonrpc":"2.0","id":880001,"method":"ping"},{"jsonrpc":"2.0","id":880002,"method":"ping"}]',
], ids=["null-id", "fractional-id", "batch"])
def test_invalid_request_gets_32600_with_null_id(srv, line):
    srv.send_raw(line + b"\n")
    err = srv.null_id_error()
    assert err["error"]["code"] == -32600
    srv.roundtrip()
    with srv._cond:  # batch members must not be answered individually
        assert idkey(880001) not in srv.answered and idkey(880002) not in srv.answered


@pytest.mark.parametrize("line", [
    b'{"id":%d,"method":"ping"}',
    b'{"jsonrpc":"1.0","id":%d,"method":"ping"}',
], ids=["missing-jsonrpc", "wrong-jsonrpc"])
def test_bad_jsonrpc_member_gets_32600(srv, line):
    rid = srv.new_id()
    srv.send_raw(line % rid + b"\n")
    deadline = time.monotonic() + 20
    while True:
        with srv._cond:
            if srv.null_id:
                msg = srv.null_id.pop(0)
                break
            if idkey(rid) in srv.responses:
                msg = srv.responses.pop(idkey(rid))[1]
                break
        assert time.monotonic() < deadline, "no reply to a request with a bad jsonrpc member"
        time.sleep(0.01)
    assert msg.get("error", {}).get("code") == -32600, msg


def test_trailing_carriage_return_accepted(srv):
    rid = srv.new_id()
    srv.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\r\n' % rid)
    assert srv.response(rid)["result"] == {}


def test_tool_call_with_crlf_line(srv):
    rid = srv.new_id()
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": "execute", "arguments": {"command": "echo crlf"}}})
    srv.send_raw(line.encode() + b"\r\n")
    res = srv.tool_response(rid)
    assert json.loads(res["content"][0]["text"])["stdout"]["data"] == "crlf\n"


def test_empty_line_does_not_break_the_stream(srv):
    srv.send_raw(b"\n")
    srv.roundtrip()
    with srv._cond:
        srv.null_id.clear()  # an error reply for an empty line is acceptable either way


def test_overlong_line_rejected_then_next_line_served(fresh):
    pad = b"a" * (17 * 1024 * 1024)
    fresh.send_raw(b'{"jsonrpc":"2.0","id":4242,"method":"ping","params":{"pad":"' + pad + b'"}}\n')
    err = fresh.null_id_error(timeout=60)
    assert err["error"]["code"] == -32700
    assert err["id"] is None
    assert fresh.result("ping") == {}
    assert not fresh.has_response(4242)
    r = fresh.run("echo still-alive")
    assert r["stdout"]["data"] == "still-alive\n"


def test_line_below_cap_is_served(fresh):
    pad = "b" * (15 * 1024 * 1024)
    rid = fresh.start("ping", {"pad": pad})
    assert fresh.response(rid, timeout=60)["result"] == {}
    data = "c" * (8 * 1024 * 1024)
    r = fresh.run("wc -c", stdin=data, close_stdin=True, timeout=60)
    assert r["stdout"]["data"].strip() == str(len(data))


def test_no_output_without_requests(make_server):
    s = make_server(initialize=False)
    s.close()
    assert s._seq == 0, "server wrote to stdout without being asked"


def test_tools_call_params_not_object(srv):
    assert srv.error("tools/call", [1, 2])["code"] == -32602


def test_tools_call_without_name(srv):
    assert srv.error("tools/call", {"arguments": {}})["code"] == -32602


def test_unknown_tool(srv):
    err = srv.error("tools/call", {"name": "format_disk", "arguments": {}})
    assert err["code"] == -32602
    assert "unknown tool" in err["message"]


def test_tools_list_exactly_seven(srv):
    tools = srv.result("tools/list")["tools"]
    names = [t["name"] for t in tools]
    assert sorted(names) == sorted(TOOL_ARGS)
    for t in tools:
        assert isinstance(t.get("description"), str) and t["description"]


@pytest.mark.parametrize("name", sorted(TOOL_ARGS))
def test_tool_input_schema(srv, name):
    tools = {t["name"]: t for t in srv.result("tools/list")["tools"]}
    schema = tools[name]["inputSchema"]
    assert schema["type"] == "object"
    props = schema.get("properties", {})
    assert isinstance(props, dict)
    assert TOOL_ARGS[name] <= set(props), "missing properties: %s" % (TOOL_ARGS[name] - set(props))
    required = set(schema.get("required", []))
    assert TOOL_REQUIRED[name] <= required
    assert required <= set(props)


def test_version_flag():
    r = run_server_once(args=["--version"])
    assert r.returncode == 0, r
    assert RELEASE.encode() in r.stdout + r.stderr


def test_help_lists_variables():
    r = run_server_once(args=["--help"])
    text = (r.stdout + r.stderr).decode()
    for var in ("MCP_EXEC_DEFAULT_TIMEOUT", "MCP_EXEC_MAX_OUTPUT_BYTES", "MCP_EXEC_PROGRESS_INTERVAL"):
        assert var in text


def test_server_info_version_matches_release(fresh):
    assert fresh.init_result["serverInfo"]["version"] == RELEASE


@pytest.mark.parametrize("var,value", [
    ("MCP_EXEC_MAX_OUTPUT_BYTES", "abc"),
    ("MCP_EXEC_MAX_OUTPUT_BYTES", "-5"),
    ("MCP_EXEC_DEFAULT_TIMEOUT", "-1"),
    ("MCP_EXEC_DEFAULT_TIMEOUT", "soon"),
    ("MCP_EXEC_PROGRESS_INTERVAL", "abc"),
    ("MCP_EXEC_FOO", "1"),
])
def test_configuration_error_exits_2(var, value):
    r = run_server_once(env={var: value})
    assert r.returncode == 2, r
    assert r.stdout == b"", "configuration errors belong on stderr, got stdout %r" % r.stdout
    lines = [l for l in r.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    assert len(lines) == 1, lines
    assert var in lines[0]
    if var == "MCP_EXEC_FOO":
        assert "MCP_EXEC_MAX_OUTPUT_BYTES" in lines[0] and "MCP_EXEC_DEFAULT_TIMEOUT" in lines[0]


def test_valid_configuration_accepted(make_server):
    s = make_server(env={"MCP_EXEC_DEFAULT_TIMEOUT": "2.5", "MCP_EXEC_MAX_OUTPUT_BYTES": "4096",
                         "MCP_EXEC_PROGRESS_INTERVAL": "0.5"})
    assert s.run("echo ok")["stdout"]["data"] == "ok\n"


# ==========================================================================
# execute
# ==========================================================================

def test_execute_success_default_capture(srv):
    r = srv.run("echo hello; echo oops >&2")
    assert r["state"] == "success" and r["exit_code"] == 0
    assert isinstance(r["job_id"], str)
    assert r["stdout"] == {"data": "hello\n", "offset": 0, "bytes": 6, "total_bytes": 6,
                           "truncated": False}
    assert "stderr" not in r
    assert "signal" not in r and "start_error" not in r


def test_execute_error_default_capture(srv):
    r = srv.run("echo out; echo err >&2; exit 3")
    assert r["state"] == "error" and r["exit_code"] == 3
    assert r["stderr"]["data"] == "err\n"
    assert r["stderr"]["total_bytes"] == 4
    assert "stdout" not in r


@pytest.mark.parametrize("code", [0, 1, 2, 126, 127, 255])
def test_exit_status_table(srv, code):
    r = srv.run("exit %d" % code)
    assert r["exit_code"] == code
    assert r["state"] == ("success" if code == 0 else "error")
    assert "signal" not in r


def test_exit_127_command_not_found(srv):
    r = srv.run("no_such_command_mcpx_42")
    assert r["state"] == "error" and r["exit_code"] == 127


def test_exit_126_not_executable(srv):
    f = marker()
    r = srv.run("echo 'echo hi' > %s; chmod 644 %s; %s; rc=$?; rm -f %s; exit $rc" % (f, f, f, f))
    assert r["exit_code"] == 126


@pytest.mark.parametrize("sig,word", [("TERM", "terminated"), ("KILL", "killed"),
                                      ("HUP", "hangup"), ("INT", "interrupt")])
def test_death_by_signal(srv, sig, word):
    jid = srv.job("echo $$; exec sleep 300")
    out = srv.poll_output(jid, lambda d: d.endswith("\n"))
    pid = int(out["stdout"]["data"].strip())
    srv.sh("kill -s %s %d" % (sig, pid))
    r = srv.collect(jid)
    assert r["state"] == "error"
    assert r["exit_code"] == -1
    assert r["signal"] == word


def test_self_terminating_shell_reports_signal(srv):
    r = srv.run("kill -s TERM $$; sleep 5")
    assert r["state"] == "error" and r["exit_code"] == -1 and r["signal"] == "terminated"


def test_execute_cwd(srv):
    assert srv.run("pwd", cwd="/")["stdout"]["data"] == "/\n"


@pytest.mark.parametrize("nowait", [False, True])
def test_start_failure_bad_cwd(srv, nowait):
    r = srv.tool("execute", {"command": "echo never", "cwd": "/nonexistent/mcpx/dir", "nowait": nowait})
    assert r["state"] == "error"
    assert r["exit_code"] == -1
    assert isinstance(r.get("start_error"), str) and r["start_error"]
    assert "unknown job_id" in srv.tool_err("status", {"job_id": r["job_id"]})
    assert r["job_id"] not in srv.list_ids()


def test_execute_env_is_merged(srv):
    r = srv.run('echo "$MCPX_A|$MCPX_B|${PATH:+path-kept}"', env={"MCPX_A": "one", "MCPX_B": "two words"})
    assert r["stdout"]["data"] == "one|two words|path-kept\n"


def test_execute_env_overrides(srv):
    r = srv.run('echo "$HOME"', env={"HOME": "/mcpx-home"})
    assert r["stdout"]["data"] == "/mcpx-home\n"


def test_execute_stdin_and_close(srv):
    r = srv.run("cat", stdin="line one\nline two ü\n", close_stdin=True)
    assert r["stdout"]["data"] == "line one\nline two ü\n"
    assert r["stdout"]["bytes"] == len("line one\nline two ü\n".encode())


def test_execute_stdin_stays_open_by_default(srv):
    jid = srv.job("cat", stdin="first\n")
    srv.poll_output(jid, lambda d: d == "first\n")
    assert srv.status(jid)["state"] == "running"
    st = srv.tool("input", {"job_id": jid, "data": "second\n", "close": True})
    assert st["job_id"] == jid and "state" in st
    r = srv.collect(jid)
    assert r["state"] == "success" and r["stdout"]["data"] == "first\nsecond\n"


def test_nowait_answer_is_exactly_running(srv):
    r = srv.tool("execute", {"command": "true", "nowait": True})
    assert r == {"job_id": r["job_id"], "state": "running"}
    assert isinstance(r["job_id"], str)
    assert srv.collect(r["job_id"])["state"] == "success"


def test_job_ids_are_distinct_strings(srv):
    ids = [srv.job("true") for _ in range(5)]
    assert len(set(ids)) == 5 and all(isinstance(i, str) for i in ids)
    for i in ids:
        srv.collect(i)


def test_null_means_absent(srv):
    r = srv.tool("execute", {"command": "echo x", "cwd": None, "env": None, "stdin": None,
                             "close_stdin": None, "nowait": None, "capture": None})
    assert r["state"] == "success" and r["stdout"]["data"] == "x\n"


def test_unknown_argument_refused_by_name(srv):
    # 1.1: an unknown argument is an error naming it and the accepted ones
    # (1.0 ignored it, so a misspelled or invented argument did nothing).
    text = srv.tool_err("execute", {"command": "echo x", "frobnicate": {"a": 1}})
    assert 'unknown argument "frobnicate" for execute' in text, text
    for name in TOOL_ARGS["execute"]:
        assert name in text, text
    text = srv.tool_err("list_jobs", {"x": 1})
    assert 'unknown argument "x" for list_jobs' in text, text


def test_integer_job_ids_mean_their_decimal_strings(srv):
    jid = srv.job("exit 3")
    srv.until_done(jid)
    assert srv.tool("status", {"job_id": int(jid)})["exit_code"] == 3
    r = srv.tool("wait", {"job_ids": [int(jid)], "timeout": 5})
    assert r[0]["job_id"] == jid and r[0]["exit_code"] == 3, r


def test_job_runs_in_own_process_group(srv):
    out = srv.sh("echo $$ $(cut -d' ' -f5 /proc/$$/stat)").split()
    assert out[0] == out[1], "pid %s but pgid %s" % tuple(out)


def test_job_sees_only_fds_0_1_2(srv):
    out = srv.sh("exec ls /proc/self/fd").split()
    # ls opens one directory descriptor of its own, the lowest free one.
    assert sorted(out, key=int) == ["0", "1", "2", "3"], out


def test_job_stdin_is_a_pipe_not_server_stdin(srv):
    link = srv.sh("readlink /proc/$$/fd/0").strip()
    assert link.startswith("pipe:"), link
    if TARGET != "container":
        ino = os.fstat(srv.proc.stdin.fileno()).st_ino
        assert link != "pipe:[%d]" % ino


def test_job_reading_stdin_does_not_eat_requests(srv):
    jid = srv.job("head -c 10")
    for _ in range(5):
        srv.roundtrip()
    srv.tool("input", {"job_id": jid, "data": "0123456789"})
    r = srv.collect(jid)
    assert r["stdout"]["data"] == "0123456789"


def test_shell_variable_is_used(make_server):
    s = make_server(env={"SHELL": "/bin/bash"})
    if s.run("test -x /bin/bash")["exit_code"] != 0:
        pytest.skip("no /bin/bash where the server runs")
    out = s.sh('readlink /proc/$$/exe; readlink -f /bin/bash; echo "${BASH_VERSION:+bash}"').split("\n")
    assert out[0] == out[1] and out[2] == "bash", out


def test_unset_shell_means_bin_sh(make_server):
    if TARGET == "container":
        pytest.skip("the image decides its own SHELL (/bin/bash; tests/test_image.py checks it)")
    s = make_server(env={"SHELL": None})
    out = s.sh("readlink /proc/$$/exe; readlink -f /bin/sh").split("\n")
    assert out[0] == out[1], out


def test_missing_shell_is_a_start_failure(make_server):
    s = make_server(env={"SHELL": "/nonexistent/mcpx-shell"})
    r = s.tool("execute", {"command": "echo hi"})
    assert r["state"] == "error" and r["exit_code"] == -1 and r.get("start_error")
    assert s.tool("list_jobs") == {"jobs": []}


def test_execute_big_stdin_to_non_reader_returns(srv):
    data = "x" * (1024 * 1024)
    t0 = time.monotonic()
    r = srv.run("exit 3", stdin=data, close_stdin=True, timeout=30)
    assert r["exit_code"] == 3
    assert time.monotonic() - t0 < 15


def test_execute_stdin_200kb(srv):
    data = "".join(random.Random(1).choice("abcdefgh\n") for _ in range(200 * 1024))
    r = srv.run("wc -c", stdin=data, close_stdin=True)
    assert r["stdout"]["data"].strip() == str(len(data))


# ==========================================================================
# wait
# ==========================================================================

def test_wait_delivers_and_deletes(srv):
    jid = srv.job("echo done")
    srv.until_done(jid)
    r = srv.tool("wait", {"job_ids": [jid], "timeout": 5})
    assert len(r) == 1
    assert r[0]["job_id"] == jid and r[0]["state"] == "success" and r[0]["exit_code"] == 0
    assert r[0]["stdout"]["data"] == "done\n"
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


@pytest.mark.parametrize("timeout", [0, -1, -0.5])
def test_wait_nonpositive_timeout_is_instant_poll(srv, idle_job, timeout):
    t0 = time.monotonic()
    r = srv.tool("wait", {"job_ids": [idle_job], "timeout": timeout})
    assert time.monotonic() - t0 < 2 + SLACK
    assert r == [{"job_id": idle_job, "state": "running"}]


def test_wait_timeout_elapses(srv, idle_job):
    t0 = time.monotonic()
    r = srv.tool("wait", {"job_ids": [idle_job], "timeout": 0.4})
    elapsed = time.monotonic() - t0
    assert r == [{"job_id": idle_job, "state": "running"}]
    assert 0.3 <= elapsed < 5 + SLACK


def test_wait_returns_when_any_finishes_in_order(srv, idle_job):
    quick = srv.job("read line; echo got $line", stdin="go\n")
    r = srv.tool("wait", {"job_ids": [idle_job, quick], "timeout": 30})
    assert [e["job_id"] for e in r] == [idle_job, quick]
    assert r[0] == {"job_id": idle_job, "state": "running"}
    assert r[1]["state"] == "success" and r[1]["stdout"]["data"] == "got go\n"
    assert srv.status(idle_job)["state"] == "running"


def test_wait_duplicate_ids(srv):
    jid = srv.job("echo dup")
    srv.until_done(jid)
    r = srv.tool("wait", {"job_ids": [jid, jid], "timeout": 5})
    assert len(r) == 2
    assert all(e["job_id"] == jid and e["state"] == "success" for e in r)
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


def test_wait_unknown_id_fails_whole_call(srv):
    jid = srv.job("echo keep")
    srv.until_done(jid)
    msg = srv.tool_err("wait", {"job_ids": [jid, "no-such-job-mcpx"], "timeout": 0})
    assert "unknown job_id" in msg
    assert srv.status(jid)["state"] == "success"  # not delivered
    assert srv.collect(jid)["stdout"]["data"] == "keep\n"


def test_wait_empty_list(srv):
    assert "non-empty" in srv.tool_err("wait", {"job_ids": []})


def test_wait_default_timeout_from_env(make_server):
    s = make_server(env={"MCP_EXEC_DEFAULT_TIMEOUT": "0.5"})
    jid = s.job("exec sleep 300")
    t0 = time.monotonic()
    r = s.tool("wait", {"job_ids": [jid]})
    assert r == [{"job_id": jid, "state": "running"}]
    assert time.monotonic() - t0 < 10
    s.cleanup(jid)


def test_wait_applies_capture_policy(srv):
    jid = srv.job("echo o; echo e >&2", capture={"on_success": "all"})
    r = srv.collect(jid)
    assert r["stdout"]["data"] == "o\n" and r["stderr"]["data"] == "e\n"


# ==========================================================================
# status / output
# ==========================================================================

def test_status_running(srv, idle_job):
    assert srv.status(idle_job) == {"job_id": idle_job, "state": "running"}


def test_status_never_deletes(srv):
    jid = srv.job("echo x; exit 5")
    st = srv.until_done(jid)
    assert st == {"job_id": jid, "state": "error", "exit_code": 5}
    for _ in range(3):
        assert srv.status(jid) == st
    assert jid in srv.list_ids()
    assert srv.collect(jid)["exit_code"] == 5


def test_status_of_signalled_job(srv):
    jid = srv.job("kill -s KILL $$")
    st = srv.until_done(jid)
    assert st["state"] == "error" and st["exit_code"] == -1 and st["signal"] == "killed"
    srv.collect(jid)


def test_output_without_streams_equals_status(srv):
    jid = srv.job("echo a; echo b >&2")
    st = srv.until_done(jid)
    assert srv.tool("output", {"job_id": jid}) == st
    assert srv.tool("output", {"job_id": jid, "stdout": "none", "stderr": None}) == st
    srv.collect(jid)


def test_output_live_on_running_job(srv):
    jid = srv.job("echo ready; read x; echo after $x")
    out = srv.poll_output(jid, lambda d: d == "ready\n")
    assert out["state"] == "running"
    assert out["stdout"]["total_bytes"] == 6
    srv.tool("input", {"job_id": jid, "data": "go\n"})
    r = srv.collect(jid)
    assert r["stdout"]["data"] == "ready\nafter go\n"


def test_output_never_deletes(srv):
    jid = srv.job("echo keep")
    srv.until_done(jid)
    for _ in range(2):
        out = srv.tool("output", {"job_id": jid, "stdout": "all", "stderr": "all"})
        assert out["stdout"]["data"] == "keep\n" and out["stderr"]["data"] == ""
    assert jid in srv.list_ids()
    srv.collect(jid)


@pytest.fixture(scope="module")
def lines_job(srv):
    """A finished, uncollected job: stdout 'l1\\nl2\\nl3\\n', stderr 'a\\nb\\nc' (unterminated)."""
    jid = srv.job("printf 'l1\\nl2\\nl3\\n'; printf 'a\\nb\\nc' >&2")
    srv.until_done(jid)
    yield jid
    srv.collect(jid)


@pytest.mark.parametrize("spec,stream,expected", [
    ("all", "stdout", {"data": "l1\nl2\nl3\n", "offset": 0, "bytes": 9, "total_bytes": 9, "truncated": False}),
    ({"tail": 1}, "stdout", {"data": "l3\n", "offset": 6, "bytes": 3, "total_bytes": 9, "truncated": False}),
    ({"tail": 2}, "stdout", {"data": "l2\nl3\n", "offset": 3, "bytes": 6, "total_bytes": 9, "truncated": False}),
    ({"tail": 3}, "stdout", {"data": "l1\nl2\nl3\n", "offset": 0, "bytes": 9, "total_bytes": 9, "truncated": False}),
    ({"tail": 50}, "stdout", {"data": "l1\nl2\nl3\n", "offset": 0, "bytes": 9, "total_bytes": 9, "truncated": False}),
    ({"tail": 1}, "stderr", {"data": "c", "offset": 4, "bytes": 1, "total_bytes": 5, "truncated": False}),
    ({"tail": 2}, "stderr", {"data": "b\nc", "offset": 2, "bytes": 3, "total_bytes": 5, "truncated": False}),
    ({"from": 3}, "stdout", {"data": "l2\nl3\n", "offset": 3, "bytes": 6, "total_bytes": 9, "truncated": False}),
    ({"from": 3, "length": 2}, "stdout", {"data": "l2", "offset": 3, "bytes": 2, "total_bytes": 9, "truncated": False}),
    ({"from": 0, "length": 100}, "stdout", {"data": "l1\nl2\nl3\n", "offset": 0, "bytes": 9, "total_bytes": 9, "truncated": False}),
    ({"from": 9}, "stdout", {"data": "", "offset": 9, "bytes": 0, "total_bytes": 9, "truncated": False}),
    ({"from": 500, "length": 4}, "stdout", {"data": "", "offset": 9, "bytes": 0, "total_bytes": 9, "truncated": False}),
    ({"from": -7, "length": 2}, "stdout", {"data": "l1", "offset": 0, "bytes": 2, "total_bytes": 9, "truncated": False}),
    ({"from": 2, "length": -1}, "stdout", {"data": "", "bytes": 0, "total_bytes": 9, "truncated": False}),
], ids=["all", "tail1", "tail2", "tail3", "tail50", "tail1-unterminated", "tail2-unterminated",
        "from", "from-length", "length-past-end", "from-at-end", "from-beyond-end", "negative-from",
        "negative-length"])
def test_stream_specs(srv, lines_job, spec, stream, expected):
    out = srv.tool("output", {"job_id": lines_job, stream: spec})
    got = out[stream]
    for key, value in expected.items():
        assert got[key] == value, (key, got)
    assert "dropped_bytes" not in got
    other = "stderr" if stream == "stdout" else "stdout"
    assert other not in out


def test_output_crlf_tail_keeps_endings(srv):
    jid = srv.job("printf 'a\\r\\nb\\r\\n'")
    srv.until_done(jid)
    out = srv.tool("output", {"job_id": jid, "stdout": {"tail": 1}})
    assert out["stdout"]["data"] == "b\r\n"
    srv.collect(jid)


def test_output_empty_stream(srv):
    jid = srv.job("true")
    srv.until_done(jid)
    out = srv.tool("output", {"job_id": jid, "stdout": "all", "stderr": {"tail": 3}})
    for s in ("stdout", "stderr"):
        assert out[s]["data"] == "" and out[s]["bytes"] == 0 and out[s]["total_bytes"] == 0
        assert out[s]["truncated"] is False
    srv.collect(jid)


# ==========================================================================
# Capture policies
# ==========================================================================

CAP_CMD_OK = "echo out; echo err >&2"
CAP_CMD_FAIL = "echo out; echo err >&2; exit 4"


@pytest.mark.parametrize("cmd,capture,has_out,has_err", [
    (CAP_CMD_OK, {"on_success": "all"}, True, True),
    (CAP_CMD_OK, {"on_success": "none"}, False, False),
    (CAP_CMD_OK, {"on_success": "stderr"}, False, True),
    (CAP_CMD_OK, {"on_error": "all"}, True, False),  # on_success keeps its default
    (CAP_CMD_FAIL, {"on_error": "stdout"}, True, False),
    (CAP_CMD_FAIL, {"on_error": "none"}, False, False),
    (CAP_CMD_FAIL, {"on_error": "all"}, True, True),
    (CAP_CMD_FAIL, {"on_success": "all"}, False, True),  # on_error keeps its default
    (CAP_CMD_OK, {"on_success": {"stderr": "all"}}, False, True),
    (CAP_CMD_FAIL, {"on_error": {"stdout": "all", "stderr": "all"}}, True, True),
], ids=["ok-all", "ok-none", "ok-stderr", "ok-default", "fail-stdout", "fail-none", "fail-all",
        "fail-default", "ok-object", "fail-object"])
def test_capture_policy(srv, cmd, capture, has_out, has_err):
    r = srv.run(cmd, capture=capture)
    assert ("stdout" in r) == has_out, r
    assert ("stderr" in r) == has_err, r
    if has_out:
        assert r["stdout"]["data"] == "out\n"
    if has_err:
        assert r["stderr"]["data"] == "err\n"


def test_capture_with_stream_specs(srv):
    r = srv.run("seq 1 5; seq 10 12 >&2",
                capture={"on_success": {"stdout": {"tail": 2}, "stderr": {"from": 3, "length": 3}}})
    assert r["stdout"]["data"] == "4\n5\n" and r["stdout"]["offset"] == 6
    assert r["stderr"]["data"] == "11\n" and r["stderr"]["offset"] == 3


# ==========================================================================
# Argument errors
# ==========================================================================

@pytest.mark.parametrize("name,args", [
    ("execute", {}),
    ("execute", {"cwd": "/"}),
    ("wait", {}),
    ("wait", {"timeout": 0}),
    ("status", {}),
    ("output", {"stdout": "all"}),
    ("input", {"data": "x"}),
    ("kill", {}),
    ("kill", {"signal": "KILL"}),
])
def test_missing_required_argument(srv, name, args):
    assert "is required" in srv.tool_err(name, args)


@pytest.mark.parametrize("name,args", [
    ("status", {"job_id": 5.5}),
    ("status", {"job_id": ["J"]}),
    ("wait", {"job_ids": "J"}),
    ("wait", {"job_ids": [True]}),
    ("wait", {"job_ids": ["J"], "timeout": "soon"}),
    ("execute", {"command": 5}),
    ("execute", {"command": "true", "env": "A=1"}),
    ("execute", {"command": "true", "env": {"A": 1}}),
    ("execute", {"command": "true", "cwd": 5}),
    ("execute", {"command": "true", "nowait": "yes"}),
    ("execute", {"command": "true", "capture": "bogus"}),
    ("execute", {"command": "true", "capture": {"on_success": "bogus"}}),
    ("execute", {"command": "true", "capture": {"on_error": {"stdout": "bogus"}}}),
    ("output", {"job_id": "J", "stdout": "bogus"}),
    ("output", {"job_id": "J", "stdout": {"tail": "x"}}),
    ("output", {"job_id": "J", "stderr": 42}),
    ("output", {"job_id": "J", "stdout": {"from": "x"}}),
    ("kill", {"job_id": "J", "timeout": "x"}),
    ("input", {"job_id": "J", "data": 5}),
])
def test_invalid_argument(srv, idle_job, name, args):
    args = json.loads(json.dumps(args).replace('"J"', json.dumps(idle_job)))
    msg = srv.tool_err(name, args)
    assert "invalid" in msg.lower(), msg
    assert srv.status(idle_job)["state"] == "running"


@pytest.mark.parametrize("name,args", [
    ("status", {}),
    ("output", {"stdout": "all"}),
    ("input", {"data": "x"}),
    ("kill", {}),
    ("wait", {"timeout": 0}),
])
def test_unknown_job_id(srv, name, args):
    args = dict(args)
    if name == "wait":
        args["job_ids"] = ["no-such-job-mcpx"]
    else:
        args["job_id"] = "no-such-job-mcpx"
    assert "unknown job_id" in srv.tool_err(name, args)


# ==========================================================================
# Exactly-once delivery
# ==========================================================================

@pytest.mark.parametrize("deliverer", ["execute", "wait", "kill"])
@pytest.mark.parametrize("name,args", [
    ("status", {}),
    ("output", {"stdout": "all"}),
    ("input", {"data": "x"}),
    ("kill", {}),
    ("wait", {"timeout": 0}),
])
def test_after_delivery_every_tool_says_unknown(srv, deliverer, name, args):
    if deliverer == "execute":
        jid = srv.run("echo once")["job_id"]
    elif deliverer == "wait":
        jid = srv.job("echo once")
        srv.collect(jid)
    else:
        jid = srv.job("exec sleep 300")
        r = srv.tool("kill", {"job_id": jid, "signal": "KILL"})
        assert r["terminated"] is True
    args = dict(args)
    if name == "wait":
        args["job_ids"] = [jid]
    else:
        args["job_id"] = jid
    assert "unknown job_id" in srv.tool_err(name, args)
    assert jid not in srv.list_ids()


def test_many_concurrent_blocking_executes(srv):
    ids = {}
    for i in range(40):
        ids[i] = srv.tool_start("execute", {"command": "echo job-%d; exit %d" % (i, i % 5),
                                            "capture": {"on_error": "stdout"}})
    seen = set()
    for i, rid in ids.items():
        r = srv.decode(srv.tool_response(rid))
        assert r["exit_code"] == i % 5
        assert r["stdout"]["data"] == "job-%d\n" % i
        seen.add(r["job_id"])
    assert len(seen) == 40


def test_reaper_stress_exit_codes(srv):
    ids = [srv.job("sleep 0.05 & exit 7") for _ in range(200)]
    pending = list(ids)
    results = {}
    deadline = time.monotonic() + 60
    while pending:
        assert time.monotonic() < deadline, "jobs never finished: %s" % pending
        r = srv.tool("wait", {"job_ids": pending, "timeout": 10}, timeout=30)
        for e in r:
            if e["state"] != "running":
                assert e["job_id"] not in results, "delivered twice"
                results[e["job_id"]] = e
        pending = [j for j in pending if j not in results]
    assert all(e["exit_code"] == 7 for e in results.values()), \
        sorted(set(e.get("exit_code") for e in results.values()))


# ==========================================================================
# Byte window: KB scale (1000-byte window)
# ==========================================================================

@pytest.fixture(scope="module")
def window_job(small):
    """Uncollected job on the 1000-byte server: stdout = seq 1 1000 (3893 bytes),
    stderr = first 1000 bytes of the same."""
    jid = small.job("seq 1 1000; seq 1 1000 | head -c 1000 >&2")
    small.until_done(jid)
    yield jid
    small.collect(jid)


SEQ1000 = seq_bytes(1000)
T1000 = len(SEQ1000)  # 3893
WSTART = T1000 - 1000


def test_window_all_reports_truncation(small, window_job):
    s = small.tool("output", {"job_id": window_job, "stdout": "all"})["stdout"]
    assert s["total_bytes"] == T1000
    assert s["data"].encode() == SEQ1000[-1000:]
    assert s["offset"] == WSTART and s["bytes"] == 1000
    assert s["truncated"] is True and s["dropped_bytes"] == WSTART


def test_window_exactly_full_not_truncated(small, window_job):
    s = small.tool("output", {"job_id": window_job, "stderr": "all"})["stderr"]
    assert s["data"].encode() == SEQ1000[:1000]
    assert s["total_bytes"] == 1000 and s["offset"] == 0 and s["bytes"] == 1000
    assert s["truncated"] is False and "dropped_bytes" not in s


@pytest.mark.parametrize("frm,length,offset,nbytes,dropped", [
    # dropped_bytes counts the requested bytes that fell below the window start
    (0, 100, WSTART, 100, 100),
    (0, None, WSTART, 1000, WSTART),
    (WSTART - 100, 200, WSTART, 200, 100),
    (WSTART - 1, None, WSTART, 1000, 1),
    (-50, 10, WSTART, 10, 10),
    (WSTART, 200, WSTART, 200, None),
    (T1000 - 10, 5, T1000 - 10, 5, None),
    (T1000 - 10, None, T1000 - 10, 10, None),
    (T1000 + 5, 10, T1000, 0, None),
], ids=["head", "head-to-end", "straddle", "one-dropped", "negative", "window-start", "near-end", "to-end", "beyond"])
def test_window_from_math(small, window_job, frm, length, offset, nbytes, dropped):
    spec = {"from": frm}
    if length is not None:
        spec["length"] = length
    s = small.tool("output", {"job_id": window_job, "stdout": spec})["stdout"]
    assert s["offset"] == offset and s["bytes"] == nbytes, s
    assert s["data"].encode() == SEQ1000[offset:offset + nbytes]
    assert s["total_bytes"] == T1000
    if dropped is None:
        assert s["truncated"] is False and "dropped_bytes" not in s
    else:
        assert s["truncated"] is True and s["dropped_bytes"] == dropped


def test_window_tail_inside_window(small, window_job):
    s = small.tool("output", {"job_id": window_job, "stdout": {"tail": 3}})["stdout"]
    assert s["data"] == "998\n999\n1000\n"
    assert s["offset"] == T1000 - len(b"998\n999\n1000\n")
    assert s["truncated"] is False


def test_window_tail_more_than_retained(small, window_job):
    s = small.tool("output", {"job_id": window_job, "stdout": {"tail": 100000}})["stdout"]
    assert s["truncated"] is True and s["dropped_bytes"] == WSTART
    assert s["offset"] == WSTART and s["data"].encode() == SEQ1000[-1000:]


def test_window_pagination_from_zero(small, window_job):
    pos, pages, got = 0, 0, b""
    first = None
    while True:
        s = small.tool("output", {"job_id": window_job, "stdout": {"from": pos, "length": 333}})["stdout"]
        if first is None:
            first = s
        if s["bytes"] == 0:
            break
        got += s["data"].encode()
        pos = s["offset"] + s["bytes"]
        pages += 1
        assert pages < 100
    assert first["truncated"] is True and first["offset"] == WSTART
    assert got == SEQ1000[-1000:]
    assert pos == T1000


def test_window_many_small_writes(small):
    r = small.run("i=1; while [ $i -le 600 ]; do echo $i; i=$((i+1)); done", timeout=60)
    expected = seq_bytes(600)
    s = r["stdout"]
    assert s["total_bytes"] == len(expected)
    assert s["data"].encode() == expected[-1000:]
    assert s["truncated"] is True and s["dropped_bytes"] == len(expected) - 1000


def test_window_streams_are_independent(small):
    r = small.run("seq 1 300; seq 1 100 >&2", capture={"on_success": "all"})
    assert r["stdout"]["total_bytes"] == len(seq_bytes(300)) and r["stdout"]["truncated"] is True
    assert r["stderr"]["data"].encode() == seq_bytes(100) and r["stderr"]["truncated"] is False


def test_window_one_byte_over(small):
    r = small.run("seq 1 1000 | head -c 1001")
    s = r["stdout"]
    assert s["total_bytes"] == 1001 and s["bytes"] == 1000 and s["offset"] == 1
    assert s["truncated"] is True and s["dropped_bytes"] == 1
    assert s["data"].encode() == SEQ1000[1:1001]


# ==========================================================================
# Byte window: MB scale (default 1 MiB window)
# ==========================================================================

SEQ300K = seq_bytes(300000)


@pytest.fixture(scope="module")
def mb_job(srv):
    jid = srv.job("seq 1 300000")
    srv.until_done(jid, timeout=60)
    yield jid
    srv.collect(jid)


def test_mb_window_all(srv, mb_job):
    s = srv.tool("output", {"job_id": mb_job, "stdout": "all"}, timeout=60)["stdout"]
    total = len(SEQ300K)
    assert s["total_bytes"] == total
    assert s["bytes"] == MIB and s["offset"] == total - MIB
    assert s["truncated"] is True and s["dropped_bytes"] == total - MIB
    assert s["data"].encode() == SEQ300K[-MIB:]


def test_mb_window_range_in_middle(srv, mb_job):
    total = len(SEQ300K)
    frm = total - MIB // 2
    s = srv.tool("output", {"job_id": mb_job, "stdout": {"from": frm, "length": 100000}})["stdout"]
    assert s["offset"] == frm and s["bytes"] == 100000 and s["truncated"] is False
    assert s["data"].encode() == SEQ300K[frm:frm + 100000]


def test_mb_window_dropped_range(srv, mb_job):
    total = len(SEQ300K)
    s = srv.tool("output", {"job_id": mb_job, "stdout": {"from": 1000, "length": 50}})["stdout"]
    assert s["truncated"] is True and s["dropped_bytes"] == 50  # all 50 requested bytes are gone
    assert s["offset"] == total - MIB and s["bytes"] == 50
    assert s["data"].encode() == SEQ300K[total - MIB:total - MIB + 50]


def test_mb_window_tail(srv, mb_job):
    s = srv.tool("output", {"job_id": mb_job, "stdout": {"tail": 3}})["stdout"]
    assert s["data"] == "299998\n299999\n300000\n"
    assert s["truncated"] is False


def test_mb_pagination_reassembles(srv, mb_job):
    total = len(SEQ300K)
    pos, got = total - MIB, []
    while pos < total:
        s = srv.tool("output", {"job_id": mb_job, "stdout": {"from": pos, "length": 150001}}, timeout=60)["stdout"]
        assert s["offset"] == pos and s["bytes"] > 0
        got.append(s["data"].encode())
        pos = s["offset"] + s["bytes"]
    assert b"".join(got) == SEQ300K[-MIB:]


@pytest.mark.parametrize("n,truncated", [(MIB, False), (MIB + 1, True), (MIB - 1, False)],
                         ids=["exact", "plus-one", "minus-one"])
def test_mb_window_edges(srv, n, truncated):
    r = srv.run("seq 1 300000 | head -c %d" % n, timeout=60)
    s = r["stdout"]
    assert s["total_bytes"] == n
    assert s["truncated"] is truncated
    assert s["bytes"] == min(n, MIB)
    assert s["data"].encode() == SEQ300K[:n][-MIB:]
    if truncated:
        assert s["dropped_bytes"] == n - MIB


# ==========================================================================
# Character alignment and pagination
# ==========================================================================

MB_TEXT = "aé€😀b"  # 61 | c3 a9 | e2 82 ac | f0 9f 98 80 | 62


@pytest.fixture(scope="module")
def mb_text_job(srv):
    jid = srv.job("printf '%%s' %s | base64 -d" % b64(MB_TEXT.encode()))
    srv.until_done(jid)
    yield jid
    srv.collect(jid)


@pytest.mark.parametrize("frm,length,unaligned,offset,nbytes,data", [
    (0, 1, None, 0, 1, "a"),
    (1, 1, None, 1, 2, "é"),
    (2, 1, None, 1, 2, "é"),
    (2, 2, None, 1, 5, "é€"),
    (3, 3, None, 3, 3, "€"),
    (4, None, None, 3, 8, "€😀b"),
    (7, 1, None, 6, 4, "😀"),
    (8, 1, False, 6, 4, "😀"),
    (9, 2, None, 6, 5, "😀b"),
    (5, 2, None, 3, 7, "€😀"),
    (2, 1, True, 2, 1, "\ufffd"),
    (0, 2, True, 0, 2, "a\ufffd"),
    (0, 3, True, 0, 3, "aé"),
], ids=["ascii", "end-in-2byte", "start-in-2byte", "both-ends", "exact-3byte", "open-end",
        "inside-4byte", "explicit-aligned", "4byte-then-ascii", "last-byte-of-3byte",
        "unaligned-cont", "unaligned-split", "unaligned-whole"])
def test_alignment(srv, mb_text_job, frm, length, unaligned, offset, nbytes, data):
    spec = {"from": frm}
    if length is not None:
        spec["length"] = length
    if unaligned is not None:
        spec["unaligned"] = unaligned
    s = srv.tool("output", {"job_id": mb_text_job, "stdout": spec})["stdout"]
    assert (s["offset"], s["bytes"], s["data"]) == (offset, nbytes, data)
    assert s["total_bytes"] == 11


@pytest.mark.parametrize("start", [6, 7, 8, 9])
def test_alignment_every_byte_of_4byte_char(srv, mb_text_job, start):
    s = srv.tool("output", {"job_id": mb_text_job, "stdout": {"from": start, "length": 1}})["stdout"]
    assert s["offset"] == 6 and s["bytes"] == 4 and s["data"] == "😀"


def _mixed_text(n, seed):
    rnd = random.Random(seed)
    alphabet = ["a", "Z", "\n", "é", "ß", "€", "中", "😀", "𝄞", "\u0000"]
    return "".join(rnd.choice(alphabet) for _ in range(n))


@pytest.mark.parametrize("length", [1, 3, 7, 64])
def test_paginate_multibyte_stream_to_end(srv, length):
    text = _mixed_text(700, seed=length)
    raw = text.encode()
    jid = srv.job("printf '%%s' %s | base64 -d" % b64(raw))
    srv.until_done(jid)
    try:
        pos, pieces, pages = 0, [], 0
        while True:
            s = srv.tool("output", {"job_id": jid, "stdout": {"from": pos, "length": length}})["stdout"]
            assert s["offset"] == pos, "pages must be contiguous: %r" % s
            assert s["truncated"] is False
            if s["bytes"] == 0:
                break
            assert len(s["data"].encode()) == s["bytes"]
            assert s["bytes"] >= min(length, len(raw) - pos)
            pieces.append(s["data"])
            pos = s["offset"] + s["bytes"]
            pages += 1
            assert pages <= len(raw) + 1
        assert pos == len(raw) == s["total_bytes"]
        assert "".join(pieces).encode() == raw
    finally:
        srv.collect(jid)


def test_stdin_utf8_roundtrip_via_input(srv):
    text = _mixed_text(2000, seed=99)
    jid = srv.job("cat")
    srv.tool("input", {"job_id": jid, "data": text, "close": True})
    r = srv.collect(jid)
    assert r["stdout"]["data"] == text
    assert r["stdout"]["bytes"] == len(text.encode()) == r["stdout"]["total_bytes"]


# ==========================================================================
# Binary torture
# ==========================================================================

def test_nul_bytes_kept(srv):
    r = srv.run("printf 'a\\000b\\000\\000c'")
    assert r["stdout"]["data"] == "a\x00b\x00\x00c"
    assert r["stdout"]["bytes"] == 6 and r["stdout"]["total_bytes"] == 6


def test_invalid_utf8_replaced_but_counted_raw(srv):
    raw = b"A\xff\xfeB\xc3C\xe2\x82D"
    r = srv.run("printf '%%s' %s | base64 -d" % b64(raw))
    s = r["stdout"]
    assert s["bytes"] == len(raw) and s["total_bytes"] == len(raw)
    data = s["data"]
    assert "\ufffd" in data
    assert data.replace("\ufffd", "") == "ABCD"


def test_all_byte_values(srv):
    raw = bytes(range(256)) * 4
    r = srv.run("printf '%%s' %s | base64 -d" % b64(raw))
    s = r["stdout"]
    assert s["bytes"] == 1024 and s["total_bytes"] == 1024
    assert s["data"].startswith("".join(chr(i) for i in range(128)))
    assert set(s["data"]) <= set(chr(i) for i in range(128)) | {"\ufffd"}


def test_invalid_utf8_offsets_paginate(srv):
    raw = b"\xff" * 10 + "é".encode() + b"\x80\x80xyz"
    jid = srv.job("printf '%%s' %s | base64 -d" % b64(raw))
    srv.until_done(jid)
    try:
        pos, total_bytes = 0, 0
        while True:
            s = srv.tool("output", {"job_id": jid, "stdout": {"from": pos, "length": 3}})["stdout"]
            if s["bytes"] == 0:
                break
            assert s["offset"] == pos
            total_bytes += s["bytes"]
            pos += s["bytes"]
        assert total_bytes == len(raw)
    finally:
        srv.collect(jid)


def test_base64_fidelity_random_binary(srv):
    raw = random.Random(7).randbytes(96 * 1024) if hasattr(random.Random, "randbytes") \
        else bytes(random.Random(7).getrandbits(8) for _ in range(96 * 1024))
    enc = b64(raw)
    r = srv.run("base64 -d | base64 | tr -d '\\n'", stdin=enc, close_stdin=True, timeout=60)
    assert r["stdout"]["data"] == enc
    r2 = srv.run("base64 -d", stdin=enc, close_stdin=True, timeout=60)
    assert r2["stdout"]["total_bytes"] == len(raw) and r2["stdout"]["bytes"] == len(raw)
    r3 = srv.run("base64 -d | wc -c", stdin=enc, close_stdin=True, timeout=60)
    assert r3["stdout"]["data"].strip() == str(len(raw))


def test_binary_on_stderr(srv):
    raw = b"\x00\x01\xfe\xff\n"
    r = srv.run("printf '%%s' %s | base64 -d >&2; exit 1" % b64(raw))
    assert r["stderr"]["bytes"] == 5 and r["stderr"]["data"].startswith("\x00\x01")


# ==========================================================================
# input
# ==========================================================================

def test_input_200kb(srv):
    data = "0123456789abcdef" * (200 * 1024 // 16)
    jid = srv.job("wc -c")
    st = srv.tool("input", {"job_id": jid, "data": data, "close": True}, timeout=60)
    assert st["job_id"] == jid and st["state"] in ("running", "success")
    r = srv.collect(jid)
    assert r["stdout"]["data"].strip() == str(200 * 1024)


def test_input_returns_status_object(srv):
    jid = srv.job("cat >/dev/null")
    st = srv.tool("input", {"job_id": jid, "data": "hello"})
    assert st == {"job_id": jid, "state": "running"}
    srv.tool("input", {"job_id": jid, "data": "", "close": True})
    assert srv.collect(jid)["state"] == "success"


def test_input_after_close(srv):
    jid = srv.job("cat >/dev/null; exec sleep 300")
    srv.tool("input", {"job_id": jid, "data": "x", "close": True})
    try:
        assert "already closed" in srv.tool_err("input", {"job_id": jid, "data": "y"})
    finally:
        srv.cleanup(jid)


def test_input_after_close_stdin_at_execute(srv):
    jid = srv.job("exec sleep 300", stdin="abc", close_stdin=True)
    try:
        assert "already closed" in srv.tool_err("input", {"job_id": jid, "data": "y"})
    finally:
        srv.cleanup(jid)


def test_input_to_finished_job(srv):
    jid = srv.job("true")
    srv.until_done(jid)
    assert "no longer running" in srv.tool_err("input", {"job_id": jid, "data": "late"})
    srv.collect(jid)


def test_input_blocked_write_is_cancellable(srv):
    jid = srv.job("exec sleep 300")
    try:
        rid = srv.tool_start("input", {"job_id": jid, "data": "z" * (4 * MIB)})
        srv.roundtrip()
        assert srv.status(jid)["state"] == "running"
        assert not srv.has_response(rid), "a 4 MiB write to a non-reader cannot have completed"
        srv.cancel(rid)
        msg = srv.response(rid)
        assert msg["error"]["code"] == -32800
        assert srv.status(jid)["state"] == "running"
    finally:
        srv.cleanup(jid)


# ==========================================================================
# kill
# ==========================================================================

@pytest.mark.parametrize("sig,num,word", [
    (None, 15, "terminated"), ("TERM", 15, "terminated"), ("SIGTERM", 15, "terminated"),
    ("15", 15, "terminated"), ("KILL", 9, "killed"), ("SIGKILL", 9, "killed"), ("9", 9, "killed"),
    ("HUP", 1, "hangup"), ("INT", 2, "interrupt"),
])
def test_kill_signals(srv, sig, num, word):
    jid = srv.job("exec sleep 300")
    args = {"job_id": jid}
    if sig is not None:
        args["signal"] = sig
    r = srv.tool("kill", args)
    assert r["job_id"] == jid and r["terminated"] is True
    assert r["signal_sent"] == num
    assert not r.get("escalated")
    res = r["result"]
    assert res["job_id"] == jid and res["state"] == "error"
    assert res["exit_code"] == -1 and res["signal"] == word
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


def test_kill_unknown_signal(srv, idle_job):
    assert "unknown signal" in srv.tool_err("kill", {"job_id": idle_job, "signal": "SIGNOPE"})
    assert srv.status(idle_job)["state"] == "running"


def test_kill_whole_tree(srv):
    jid = srv.job("sleep 300 & echo $!; sleep 300 & echo $!; wait")
    out = srv.poll_output(jid, lambda d: d.count("\n") == 2)
    pids = [int(x) for x in out["stdout"]["data"].split()]
    r = srv.tool("kill", {"job_id": jid})
    assert r["terminated"] is True
    for p in pids:
        assert srv.proc_state(p) == "gone"


def test_kill_term_ignoring_tree_survives(srv):
    jid = srv.job("trap '' TERM; sleep 300 & echo $$ $!; wait")
    out = srv.poll_output(jid, lambda d: d.endswith("\n"))
    shell_pid, child_pid = out["stdout"]["data"].split()
    try:
        t0 = time.monotonic()
        r = srv.tool("kill", {"job_id": jid, "signal": "TERM", "timeout": 0.5})
        assert time.monotonic() - t0 < 5 + SLACK
        assert r["terminated"] is False
        assert r["signal_sent"] == 15
        assert "state" in r and "result" not in r
        detail = r["detail"]
        assert isinstance(detail, str) and detail
        assert child_pid in detail or "sleep" in detail, "detail does not name the survivor: %r" % detail
        assert srv.status(jid)["state"] == "running"
        assert jid in srv.list_ids()
    finally:
        r = srv.tool("kill", {"job_id": jid, "signal": "KILL"})
    assert r["terminated"] is True and r["result"]["signal"] == "killed"
    assert srv.proc_state(int(child_pid)) == "gone"


def test_kill_assured_escalates(srv):
    jid = srv.job(TERM_IGNORING_TREE)
    srv.poll_output(jid, lambda d: d == "up\n")
    r = srv.tool("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 0.5})
    assert r["terminated"] is True
    assert r["escalated"] is True
    assert r["signal_sent"] == 9
    assert r["result"]["exit_code"] == -1 and r["result"]["signal"] == "killed"
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


def test_kill_assured_without_need_to_escalate(srv):
    jid = srv.job("exec sleep 300")
    r = srv.tool("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 5})
    assert r["terminated"] is True and not r.get("escalated")
    assert r["signal_sent"] == 15 and r["result"]["signal"] == "terminated"


def test_kill_timeout_zero_on_survivor(srv):
    jid = srv.job(TERM_IGNORING_TREE)
    srv.poll_output(jid, lambda d: d == "up\n")
    try:
        t0 = time.monotonic()
        r = srv.tool("kill", {"job_id": jid, "signal": "TERM", "timeout": 0})
        assert time.monotonic() - t0 < 2 + SLACK
        assert r["terminated"] is False and r["detail"]
    finally:
        srv.cleanup(jid)


def test_kill_surviving_children_after_shell_died(srv):
    # The child prints its pid only once it ignores TERM ($! could be printed
    # before the subshell ran its trap, and then TERM killed it).
    jid = srv.job("sh -c 'trap \"\" TERM; echo $$; exec sleep 300' & wait")
    out = srv.poll_output(jid, lambda d: d.endswith("\n"))
    child = int(out["stdout"]["data"])
    r = srv.tool("kill", {"job_id": jid, "signal": "TERM", "timeout": 0.5})
    assert r["terminated"] is False
    assert r["detail"]
    assert srv.proc_state(child) not in ("gone", "Z")
    # The shell is dead but the group still has a member: KILL must reach it.
    r = srv.tool("kill", {"job_id": jid, "signal": "KILL", "timeout": 5})
    assert r["terminated"] is True
    assert r["result"]["state"] == "error"
    assert srv.proc_state(child) == "gone"


def test_kill_orphaned_grandchild_of_finished_job(srv):
    jid = srv.job("sh -c 'sleep 300 >/dev/null 2>&1 & echo $!'")
    srv.until_done(jid)
    out = srv.tool("output", {"job_id": jid, "stdout": "all"})
    grandchild = int(out["stdout"]["data"])
    assert out["state"] == "success"
    assert srv.proc_state(grandchild) not in ("gone", "Z")
    r = srv.tool("kill", {"job_id": jid, "signal": "TERM"})
    assert r["terminated"] is True
    assert not r.get("already_terminated")
    assert r["result"]["state"] == "success" and r["result"]["exit_code"] == 0
    assert srv.proc_state(grandchild) == "gone"


def test_kill_already_terminated(srv):
    jid = srv.job("echo bye; exit 4")
    srv.until_done(jid)
    r = srv.tool("kill", {"job_id": jid})
    assert r["terminated"] is True and r["already_terminated"] is True
    assert r["result"]["exit_code"] == 4 and r["result"]["state"] == "error"
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_kills_both_report_terminated(srv, round_):
    # A TERM-ignoring child keeps the group alive for a moment after the
    # shell dies, so both kills are surely under way when the job ends.
    jid = srv.job("(trap '' TERM; echo ready; exec sleep 2) & exec sleep 300")
    srv.poll_output(jid, lambda d: d == "ready\n")
    args = {"job_id": jid, "signal": "TERM", "timeout": 10}
    a = srv.tool_start("kill", args)
    b = srv.tool_start("kill", args)
    for r in (srv.tool_response(a), srv.tool_response(b)):
        body = Server.decode(r)
        assert body["terminated"] is True, body
        assert body["result"]["job_id"] == jid and body["result"]["signal"] == "terminated", body
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


def test_kill_during_blocked_wait_both_get_result(srv):
    jid = srv.job("exec sleep 300")
    w = srv.tool_start("wait", {"job_ids": [jid], "timeout": 30})
    srv.roundtrip()
    k = srv.tool_start("kill", {"job_id": jid, "signal": "TERM"})
    waited, killed = Server.decode(srv.tool_response(w)), Server.decode(srv.tool_response(k))
    assert waited[0]["state"] == "error" and waited[0]["signal"] == "terminated", waited
    assert killed["terminated"] is True and killed["result"] == waited[0], killed
    assert "unknown job_id" in srv.tool_err("status", {"job_id": jid})


def test_two_blocked_waits_both_get_result(srv):
    jid = srv.job("read x")
    a = srv.tool_start("wait", {"job_ids": [jid], "timeout": 30})
    b = srv.tool_start("wait", {"job_ids": [jid], "timeout": 30})
    srv.roundtrip()
    srv.tool("input", {"job_id": jid, "data": "go\n"})
    for r in (srv.tool_response(a), srv.tool_response(b)):
        assert Server.decode(r) == [{"job_id": jid, "state": "success", "exit_code": 0,
                                     "stdout": {"data": "", "offset": 0, "bytes": 0,
                                                "total_bytes": 0, "truncated": False}}]
    assert "unknown job_id" in srv.tool_err("wait", {"job_ids": [jid], "timeout": 0})


# ==========================================================================
# Orphans, pipes held by descendants, reaping
# ==========================================================================

def test_terminal_while_grandchild_holds_pipes(srv):
    gate = marker()
    jid = srv.job("(while [ ! -e %s ]; do sleep 0.05; done; echo late) & echo early" % gate)
    try:
        st = srv.until_done(jid)
        assert st["state"] == "success"
        assert srv.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["data"] == "early\n"
        srv.sh("touch %s" % gate)
        srv.poll_output(jid, lambda d: d == "early\nlate\n")
    finally:
        srv.sh("touch %s" % gate)
        srv.collect(jid)
        srv.sh("rm -f %s" % gate)


def test_blocking_execute_returns_while_orphan_holds_pipes(srv):
    gate = marker()
    t0 = time.monotonic()
    r = srv.run("(while [ ! -e %s ]; do sleep 0.05; done) & echo early" % gate, timeout=20)
    try:
        assert r["state"] == "success" and r["stdout"]["data"].startswith("early\n")
        assert time.monotonic() - t0 < 3 + SLACK
    finally:
        srv.sh("touch %s; sleep 0.2; rm -f %s" % (gate, gate))


def test_blocking_execute_with_streaming_orphan(srv):
    t0 = time.monotonic()
    r = srv.run("echo x; (while :; do echo y; sleep 0.01; done) & echo $! >&2", timeout=20,
                capture={"on_success": "all"})
    assert time.monotonic() - t0 < 2.5 + SLACK, "settle window far beyond ~500 ms"
    assert r["state"] == "success"
    assert r["stdout"]["data"].startswith("x\n")
    pid = int(r["stderr"]["data"].strip())
    srv.sh("kill %d" % pid)
    srv.wait_proc_gone(pid)


def test_orphan_is_reparented_to_server_and_reaped(srv):
    jid = srv.job("echo $PPID; sh -c 'sleep 300 >/dev/null 2>&1 & echo $!'")
    out = srv.poll_output(jid, lambda d: d.count("\n") == 2)
    server_pid, orphan = [int(x) for x in out["stdout"]["data"].split()]
    srv.until_done(jid)
    ppid = srv.sh("awk '/^PPid:/{print $2}' /proc/%d/status" % orphan).strip()
    assert int(ppid) == server_pid, "orphan reparented to %s, not the server %d" % (ppid, server_pid)
    srv.sh("kill %d" % orphan)
    srv.wait_proc_gone(orphan)
    srv.collect(jid)


def _zombies_of(s, ppid):
    out = s.sh("cat /proc/[0-9]*/stat 2>/dev/null | awk '$4 == %d && $3 == \"Z\" {print $1}'" % ppid)
    return out.split()


def _await_no_zombies_of(s, ppid, timeout=10):
    wait_until(lambda: not _zombies_of(s, ppid), timeout,
               lambda: "reaping the zombies %s of pid %d" % (_zombies_of(s, ppid), ppid), interval=0.05)


def test_no_zombies_left_after_churn(srv):
    server_pid = int(srv.sh("echo $PPID"))
    for _ in range(20):
        srv.run("sh -c 'true & true &'; true &")
    _await_no_zombies_of(srv, server_pid)


# ==========================================================================
# Bare PID 1
# ==========================================================================

def test_pid1_server_is_pid_1(pid1_server):
    assert pid1_server.sh("echo $PPID").strip() == "1"


def test_pid1_reaps_orphans(pid1_server):
    s = pid1_server
    jid = s.job("sh -c 'sleep 0.3 >/dev/null 2>&1 & echo $!'")
    st = s.until_done(jid)
    assert st["state"] == "success"
    orphan = int(s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["data"])
    s.collect(jid)
    s.wait_proc_gone(orphan)
    _await_no_zombies_of(s, 1)


def test_pid1_exit_status_routing(pid1_server):
    s = pid1_server
    ids = [s.job("sleep 0.05 & exit 7") for _ in range(60)]
    ids += [s.job("exit 3") for _ in range(20)]
    ids += [s.job("(sleep 0.02 &) ; exit 0") for _ in range(20)]
    want = {j: 7 for j in ids[:60]}
    want.update({j: 3 for j in ids[60:80]})
    want.update({j: 0 for j in ids[80:]})
    got = {}
    deadline = time.monotonic() + 60
    while len(got) < len(ids):
        assert time.monotonic() < deadline
        pending = [j for j in ids if j not in got]
        for e in s.tool("wait", {"job_ids": pending, "timeout": 10}, timeout=30):
            if e["state"] != "running":
                got[e["job_id"]] = e["exit_code"]
    assert got == want


def test_pid1_signal_death_reported(pid1_server):
    s = pid1_server
    jid = s.job("exec sleep 300")
    r = s.tool("kill", {"job_id": jid, "signal": "HUP"})
    assert r["terminated"] is True and r["result"]["signal"] == "hangup"


def test_pid1_kill_orphaned_grandchild(pid1_server):
    s = pid1_server
    jid = s.job("sh -c 'trap \"\" TERM; sleep 300 >/dev/null 2>&1 & echo $!'")
    s.until_done(jid)
    grandchild = int(s.tool("output", {"job_id": jid, "stdout": "all"})["stdout"]["data"])
    r = s.tool("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 0.5})
    assert r["terminated"] is True and r.get("escalated") is True
    assert s.proc_state(grandchild) == "gone"


def test_pid1_sigterm_graceful_shutdown(pid1_server):
    s = pid1_server
    token = uuid.uuid4().hex
    jid = s.job(TERM_IGNORING_TREE, env={"MCPX_TOKEN": token})
    s.poll_output(jid, lambda d: d == "up\n")
    t0 = time.monotonic()
    s.send_signal(signal.SIGTERM)
    rc = s.wait_exit(10)
    assert time.monotonic() - t0 < 5 + SLACK
    assert rc == 0
    assert_no_survivors(token)


# ==========================================================================
# list_jobs
# ==========================================================================

def test_list_jobs_empty(fresh):
    assert fresh.tool("list_jobs") == {"jobs": []}


def test_list_jobs_oldest_first_and_states(fresh):
    a = fresh.job("exec sleep 300")
    b = fresh.job("exit 2")
    c = fresh.job("echo c")
    fresh.until_done(b)
    fresh.until_done(c)
    jobs = fresh.tool("list_jobs")["jobs"]
    assert [j["job_id"] for j in jobs] == [a, b, c]
    assert [j["state"] for j in jobs] == ["running", "error", "success"]
    assert all(set(j) >= {"job_id", "state"} for j in jobs)
    fresh.collect(b)
    assert fresh.list_ids() == [a, c]
    fresh.run("echo blocking")                 # delivered at once: never listed
    fresh.tool("execute", {"command": "true", "cwd": "/nonexistent/mcpx"})  # start failure
    assert fresh.list_ids() == [a, c]
    fresh.cleanup(a)
    fresh.collect(c)
    assert fresh.tool("list_jobs") == {"jobs": []}


def test_listed_jobs_are_waitable(fresh):
    ids = [fresh.job("exit %d" % i) for i in range(5)]
    for j in ids:
        fresh.until_done(j)
    listed = fresh.list_ids()
    assert listed == ids
    r = fresh.tool("wait", {"job_ids": listed, "timeout": 5})
    assert [e["exit_code"] for e in r] == [0, 1, 2, 3, 4]
    assert fresh.list_ids() == []


# ==========================================================================
# Cancellation
# ==========================================================================

def test_cancel_blocking_execute_tears_down_job(srv):
    m = marker()
    rid = srv.tool_start("execute", {"command": "echo $$ > %s; exec sleep 300" % m})
    pid = pid_written_to(srv, m)
    before = set(srv.list_ids())
    srv.cancel(rid)
    msg = srv.response(rid)
    assert msg["error"]["code"] == -32800
    assert srv.proc_state(pid) == "gone"
    assert set(srv.list_ids()) <= before
    srv.sh("rm -f %s" % m)


def test_cancel_blocking_execute_of_term_ignoring_tree(srv):
    m = marker()
    rid = srv.tool_start("execute", {"command": "trap '' TERM; sleep 300 & echo $! > %s; wait" % m})
    pid = pid_written_to(srv, m)
    srv.cancel(rid)
    msg = srv.response(rid, timeout=30)
    assert msg["error"]["code"] == -32800
    assert srv.proc_state(pid) == "gone"
    srv.sh("rm -f %s" % m)


def test_cancelled_execute_never_listed(fresh):
    m = marker()
    rid = fresh.tool_start("execute", {"command": "touch %s; exec sleep 300" % m})
    await_file(fresh, m)
    fresh.cancel(rid)
    assert fresh.response(rid)["error"]["code"] == -32800
    assert fresh.tool("list_jobs") == {"jobs": []}
    fresh.sh("rm -f %s" % m)


def test_cancel_execute_blocked_writing_stdin(fresh):
    m = marker()
    rid = fresh.tool_start("execute", {"command": "echo $$ > %s; exec sleep 300" % m,
                                       "stdin": "s" * (4 * MIB), "close_stdin": True})
    pid = pid_written_to(fresh, m)
    assert not fresh.has_response(rid)
    fresh.cancel(rid)
    assert fresh.response(rid)["error"]["code"] == -32800
    assert fresh.proc_state(pid) == "gone"
    assert fresh.tool("list_jobs") == {"jobs": []}
    fresh.sh("rm -f %s" % m)


def test_cancel_wait_leaves_job(srv, idle_job):
    rid = srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 60})
    srv.roundtrip()
    srv.cancel(rid)
    assert srv.response(rid)["error"]["code"] == -32800
    assert srv.status(idle_job)["state"] == "running"


def test_cancel_kill_leaves_job(srv):
    jid = srv.job(TERM_IGNORING_TREE)
    srv.poll_output(jid, lambda d: d == "up\n")
    try:
        rid = srv.tool_start("kill", {"job_id": jid, "signal": "TERM", "timeout": 60})
        srv.roundtrip()
        srv.cancel(rid)
        assert srv.response(rid)["error"]["code"] == -32800
        assert srv.status(jid)["state"] == "running"
        assert jid in srv.list_ids()
    finally:
        srv.cleanup(jid)


def test_cancel_with_string_request_id(srv, idle_job):
    rid = "wait-" + uuid.uuid4().hex
    srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 60}, id=rid)
    srv.roundtrip()
    srv.cancel(rid)
    msg = srv.response(rid)
    assert msg["id"] == rid and msg["error"]["code"] == -32800


def test_double_cancel_single_reply(srv, idle_job):
    rid = srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 60})
    srv.roundtrip()
    srv.cancel(rid)
    srv.cancel(rid)
    assert srv.response(rid)["error"]["code"] == -32800
    srv.cancel(rid)
    srv.roundtrip()
    srv.roundtrip()  # a second reply for rid would be recorded as a protocol problem


def test_late_cancel_ignored(srv):
    jid = srv.job("true")
    srv.until_done(jid)
    rid = srv.tool_start("wait", {"job_ids": [jid], "timeout": 5})
    res = srv.tool_response(rid)
    assert srv.decode(res)[0]["state"] == "success"
    srv.cancel(rid)
    srv.roundtrip()
    assert srv.run("echo fine")["stdout"]["data"] == "fine\n"


@pytest.mark.parametrize("bad", ["mismatched", "string-of-number", "null", "object", "array", "missing"])
def test_cancel_that_does_not_match_is_ignored(srv, idle_job, bad):
    rid = srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 0.8})
    srv.roundtrip()
    if bad == "missing":
        srv.notify("notifications/cancelled", {"reason": "no id"})
    else:
        value = {"mismatched": rid + 100000, "string-of-number": str(rid), "null": None,
                 "object": {"id": rid}, "array": [rid]}[bad]
        srv.notify("notifications/cancelled", {"requestId": value})
    res = srv.tool_response(rid, timeout=20)
    assert srv.decode(res) == [{"job_id": idle_job, "state": "running"}]


def test_cancel_of_cancel_target_by_other_type_keeps_number_id(srv, idle_job):
    rid_num = srv.new_id()
    srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 60}, id=rid_num)
    srv.tool_start("wait", {"job_ids": [idle_job], "timeout": 0.5}, id=str(rid_num))
    srv.roundtrip()
    srv.cancel(rid_num)
    assert srv.response(rid_num)["error"]["code"] == -32800
    res = srv.tool_response(str(rid_num), timeout=20)
    assert srv.decode(res) == [{"job_id": idle_job, "state": "running"}]


# ==========================================================================
# Progress
# ==========================================================================

@pytest.fixture(scope="module")
def progress_srv(mcp_bin):
    s = Server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    yield s
    assert s.close() == 0, "graceful shutdown must exit with status 0"


@pytest.mark.parametrize("token", ["tok-" + uuid.uuid4().hex[:6], 424242], ids=["string", "integer"])
def test_progress_during_blocking_execute(progress_srv, token):
    s = progress_srv
    gate = marker()
    rid = s.tool_start("execute", {"command": "while [ ! -e %s ]; do sleep 0.05; done" % gate},
                       meta={"progressToken": token})
    s.wait_notifications(lambda m: m.get("method") == "notifications/progress"
                         and m["params"].get("progressToken") == token, count=3)
    # Let the job finish only after progress has been observed: deterministic.
    s.sh("touch %s" % gate)
    seq, msg = s.response_seq(rid, timeout=30)
    s.sh("rm -f %s" % gate)
    assert "result" in msg
    notes = s.progress(token)
    assert len(notes) >= 3
    values = [p["progress"] for _, p in notes]
    assert values[0] == 1
    assert all(b > a for a, b in zip(values, values[1:])), values
    assert all(isinstance(p.get("message"), str) and p["message"] for _, p in notes)
    assert all(type(p["progressToken"]) is type(token) for _, p in notes)
    assert all(nseq < seq for nseq, _ in notes), "progress after the response"
    time.sleep(0.7)  # three intervals: nothing more may arrive for a finished request
    assert len(s.progress(token)) == len(notes)


def test_progress_during_wait(progress_srv):
    s = progress_srv
    jid = s.job("exec sleep 300")
    try:
        rid = s.tool_start("wait", {"job_ids": [jid], "timeout": 1.0}, meta={"progressToken": "w1"})
        res = s.tool_response(rid, timeout=20)
        assert s.decode(res) == [{"job_id": jid, "state": "running"}]
        assert len(s.progress("w1")) >= 2
    finally:
        s.cleanup(jid)


def test_no_progress_without_token(progress_srv):
    s = progress_srv
    jid = s.job("exec sleep 300")
    before = len([1 for _, m in s.notifications if m.get("method") == "notifications/progress"])
    s.tool("wait", {"job_ids": [jid], "timeout": 0.8})
    after = len([1 for _, m in s.notifications if m.get("method") == "notifications/progress"])
    assert after == before
    s.cleanup(jid)


# ==========================================================================
# Concurrency
# ==========================================================================

def test_blocking_wait_does_not_delay_other_requests(srv):
    jid = srv.job("read x; echo got $x")
    rid = srv.tool_start("wait", {"job_ids": [jid], "timeout": 60})
    t0 = time.monotonic()
    srv.roundtrip()
    assert srv.status(jid)["state"] == "running"
    srv.result("tools/list")
    assert srv.run("echo side")["stdout"]["data"] == "side\n"
    assert time.monotonic() - t0 < 5 + SLACK
    assert not srv.has_response(rid)
    srv.tool("input", {"job_id": jid, "data": "it\n"})
    r = srv.decode(srv.tool_response(rid))
    assert r[0]["state"] == "success" and r[0]["stdout"]["data"] == "got it\n"


def test_blocking_execute_does_not_delay_ping(srv):
    m = marker()
    rid = srv.tool_start("execute", {"command": "while [ ! -e %s ]; do sleep 0.05; done; echo released" % m})
    for _ in range(3):
        t0 = time.monotonic()
        srv.roundtrip()
        assert time.monotonic() - t0 < 2 + SLACK
    assert not srv.has_response(rid)
    srv.sh("touch %s" % m)
    r = srv.decode(srv.tool_response(rid))
    assert r["stdout"]["data"] == "released\n"
    srv.sh("rm -f %s" % m)


def test_blocking_kill_does_not_delay_status(srv):
    jid = srv.job(TERM_IGNORING_TREE)
    srv.poll_output(jid, lambda d: d == "up\n")
    rid = srv.tool_start("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 2})
    t0 = time.monotonic()
    assert srv.status(jid)["state"] == "running"
    srv.roundtrip()
    assert time.monotonic() - t0 < 1.5 + SLACK
    r = srv.decode(srv.tool_response(rid, timeout=30))
    assert r["terminated"] is True and r["escalated"] is True


# ==========================================================================
# stdout hygiene
# ==========================================================================

def test_job_output_never_reaches_server_stdout(fresh):
    fresh.run("echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'; echo NOISE; echo NOISE >&2; "
              "printf 'no newline'")
    fresh.roundtrip()
    with fresh._cond:
        assert not fresh.problems and not fresh.null_id
        assert idkey(1) not in fresh.responses


# ==========================================================================
# Graceful shutdown
# ==========================================================================

def test_shutdown_on_stdin_eof(fresh):
    token = uuid.uuid4().hex
    inflight = start_shutdown_scenario(fresh, token)
    t0 = time.monotonic()
    fresh.close_stdin()
    rc = fresh.wait_exit(10 + SLACK)
    elapsed = time.monotonic() - t0
    fresh._reader.join(5)
    assert elapsed < 5 + SLACK, "took %.1fs" % elapsed
    assert rc == 0
    assert_inflight_cancelled(fresh, inflight)
    assert_no_survivors(token)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["TERM", "INT", "HUP"])
def test_shutdown_on_signal(fresh, sig):
    token = uuid.uuid4().hex
    inflight = start_shutdown_scenario(fresh, token)
    t0 = time.monotonic()
    fresh.send_signal(sig)
    rc = fresh.wait_exit(10 + SLACK)
    elapsed = time.monotonic() - t0
    fresh._reader.join(5)
    assert elapsed < 5 + SLACK, "took %.1fs" % elapsed
    assert rc == 0
    assert_inflight_cancelled(fresh, inflight)
    assert_no_survivors(token)


def test_shutdown_idle_server_exits_zero(fresh):
    assert fresh.close() == 0


def test_shutdown_with_many_running_jobs(fresh):
    token = uuid.uuid4().hex
    for _ in range(20):
        fresh.job("exec sleep 300", env={"MCPX_TOKEN": token})
    t0 = time.monotonic()
    assert fresh.close(10 + SLACK) == 0
    assert time.monotonic() - t0 < 5 + SLACK
    assert_no_survivors(token)


# ==========================================================================
# Additional contract details
# ==========================================================================

def test_server_environment_reaches_jobs(make_server):
    s = make_server(env={"MCPX_FROM_SERVER": "inherited"})
    r = s.run('echo "$MCPX_FROM_SERVER/$MCPX_EXTRA"', env={"MCPX_EXTRA": "layered"})
    assert r["stdout"]["data"] == "inherited/layered\n"


def test_default_cwd_is_server_cwd(srv):
    out = srv.sh("pwd -P; readlink /proc/$PPID/cwd").split("\n")
    assert out[0] == out[1], out


def test_tools_call_without_arguments_member(srv):
    msg = srv.request("tools/call", {"name": "list_jobs"})
    assert "result" in msg and not msg["result"].get("isError")
    assert "jobs" in json.loads(msg["result"]["content"][0]["text"])


def test_tools_call_without_params(srv):
    assert srv.error("tools/call")["code"] == -32602


def test_error_reply_echoes_string_id(srv):
    msg = srv.request("no/such/method", {}, id="req-" + uuid.uuid4().hex)
    assert msg["error"]["code"] == -32601
    assert isinstance(msg["id"], str) and msg["id"].startswith("req-")


def test_kill_result_carries_capture(srv):
    jid = srv.job("echo hi; exec sleep 300", capture={"on_error": "stdout"})
    srv.poll_output(jid, lambda d: d == "hi\n")
    r = srv.tool("kill", {"job_id": jid})
    assert r["terminated"] is True
    assert r["result"]["stdout"]["data"] == "hi\n"
    assert "stderr" not in r["result"]


def test_kill_default_timeout_is_5s(srv):
    jid = srv.job(TERM_IGNORING_TREE)
    srv.poll_output(jid, lambda d: d == "up\n")
    try:
        t0 = time.monotonic()
        r = srv.tool("kill", {"job_id": jid, "signal": "TERM"}, timeout=30)
        elapsed = time.monotonic() - t0
        assert r["terminated"] is False
        assert 4.0 <= elapsed < 9.0 + SLACK, elapsed
    finally:
        srv.cleanup(jid)


def test_progress_during_kill(progress_srv):
    s = progress_srv
    jid = s.job(TERM_IGNORING_TREE)
    s.poll_output(jid, lambda d: d == "up\n")
    rid = s.tool_start("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 0.8},
                       meta={"progressToken": "k1"})
    r = s.decode(s.tool_response(rid, timeout=30))
    assert r["terminated"] is True and r["escalated"] is True
    notes = s.progress("k1")
    assert len(notes) >= 2
    assert [p["progress"] for _, p in notes][0] == 1


def test_delivery_has_no_settle_delay(srv):
    times = []
    for _ in range(9):
        t0 = time.monotonic()
        srv.run("true")
        times.append(time.monotonic() - t0)
    times.sort()
    assert times[len(times) // 2] < 0.25 + SLACK, times


@pytest.mark.skipif(TARGET == "container", reason="uses a file in /tmp shared with the host")
def test_slow_client_does_not_stall_capture(fresh):
    big = fresh.job("seq 1 300000")
    fresh.until_done(big, timeout=60)
    gate, done = marker(), marker()
    jid = fresh.job("while [ ! -e %s ]; do sleep 0.05; done; seq 1 400000; echo fin; touch %s"
                    % (gate, done))
    fresh.read_gate.clear()
    try:
        pending = [fresh.tool_start("output", {"job_id": big, "stdout": "all"}) for _ in range(12)]
        open(gate, "w").close()
        wait_until(lambda: os.path.exists(done), 30,
                   "the job's capture getting past a slow client", interval=0.05)
    finally:
        fresh.read_gate.set()
    for rid in pending:
        fresh.tool_response(rid, timeout=60)
    r = fresh.collect(jid)
    assert r["stdout"]["total_bytes"] == len(seq_bytes(400000)) + 4
    assert r["stdout"]["data"].endswith("400000\nfin\n")
    fresh.collect(big)
    for f in (gate, done):
        os.unlink(f)


def test_shutdown_answers_blocked_input_with_32800(fresh):
    token = uuid.uuid4().hex
    sink = fresh.job("exec sleep 300", env={"MCPX_TOKEN": token})
    rid = fresh.tool_start("input", {"job_id": sink, "data": "z" * (4 * MIB)})
    fresh.roundtrip()
    assert not fresh.has_response(rid)
    fresh.close_stdin()
    assert fresh.wait_exit(10 + SLACK) == 0
    fresh._reader.join(5)
    assert_inflight_cancelled(fresh, [rid])
    assert_no_survivors(token)
