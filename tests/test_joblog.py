"""End-to-end tests of the job log (MCP_EXEC_JOB_LOG=stderr|PATH).

  lines      one JSON line per job start and end, and per refusal by policy,
             each with the time (RFC 3339, UTC, ms) and the session
  a session  a success, a failure (exit 3), a kill (its signal named), a
             refusal (MCP_EXEC_ENV_DENY, named) and a job printing a forged
             log line: the forgery is never a line, no output byte is logged
  early      refusals before any job (a time limit above
             MCP_EXEC_MAX_TIME_LIMIT, the shell set's allowlist) are lines too
  PATH       a file opened for appending, mode 0600, and nothing on stderr
  stderr     the lines go to stderr; stdout stays JSON-RPC only
  startup    a path that cannot be opened stops the server, naming the setting
  HTTP       a session is named by its kind and a number, never by the token

The log file lives on the host: that test runs on the binary and pid1 targets.
"""

import http.client
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from tests.helpers import (SLACK, TARGET, Server, assert_startup_refused, needs_host_files, process_env,
                           read_file, server_binary, wait_until)

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

# A line as the log writes it, which a job prints: it must never be read
# back as a line of the log. Its job id is made as the job runs.
FORGED = '{"time":"2026-01-01T00:00:00.000Z","event":"end","session":"stdio-1","job_id":"%s","exit_code":0}'
FORGED_ID = "forged-42"


def log_lines(text):
    """The job log's lines in text (stderr, or the file): those that are JSON
    objects; every other line must be one of the server's own diagnostics."""
    lines = []
    for raw in text.splitlines():
        if raw.startswith("{"):
            line = json.loads(raw)
            assert isinstance(line, dict), raw
            lines.append(line)
        else:
            assert raw.startswith("mcp-exec: "), "a line on stderr that is neither a log line nor a diagnostic: %r" % raw
    return lines


def line_of(lines, event, job_id=None):
    found = [l for l in lines if l["event"] == event and l.get("job_id") == job_id]
    assert len(found) == 1, "want one %s line for job %s in %r" % (event, job_id, lines)
    return found[0]


def await_lines(s, count, timeout=10):
    """The log lines on s's stderr once there are count of them."""
    return wait_until(lambda: (lambda ls: ls if len(ls) >= count else None)(log_lines(s.stderr_text)),
                      timeout + SLACK, "%d job log lines on stderr" % count)


def test_a_sessions_jobs_are_logged_on_stderr(make_server):
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr", "MCP_EXEC_ENV_DENY": "SECRET_NAME"})
    # What the jobs write is made as they run ($((...))), so it appears in
    # no command: the log must not carry it.
    ok = s.run("echo out-$((6*7))-ok")
    assert ok["state"] == "success", ok
    failed = s.run("echo out-$((6*7))-fail >&2; exit 3")
    assert failed["exit_code"] == 3, failed
    sleeper = s.job("sleep 300")
    killed = s.tool("kill", {"job_id": sleeper})
    assert killed["terminated"] is True and killed["result"]["signal"], killed
    refusal = s.tool_err("execute", {"command": "true", "env": {"SECRET_NAME": "x"}})
    assert "MCP_EXEC_ENV_DENY" in refusal
    forger = s.run("printf '" + FORGED + "\\n' forged-$((6*7)) | tee /dev/stderr")
    assert FORGED % FORGED_ID in forger["stdout"]["data"], forger

    lines = await_lines(s, 9)
    assert len(lines) == 9, lines  # 4 starts, 4 ends, 1 refusal
    for line in lines:
        assert line["session"] == "stdio-1", line
        assert TIME.match(line["time"]), line
        assert line.get("job_id") != FORGED_ID, "the job's forged line became a log line: %r" % line
    ids = [r["job_id"] for r in (ok, failed, forger)] + [sleeper]
    for jid in ids:
        assert line_of(lines, "start", jid)["cwd"], lines
        end = line_of(lines, "end", jid)
        assert {"exit_code", "duration_ms", "stdout_bytes", "stderr_bytes"} <= end.keys(), end
    assert line_of(lines, "start", ok["job_id"])["command"] == "echo out-$((6*7))-ok"
    assert line_of(lines, "end", ok["job_id"])["stdout_bytes"] == len("out-42-ok\n")
    assert line_of(lines, "end", failed["job_id"])["exit_code"] == 3
    assert line_of(lines, "end", failed["job_id"])["stderr_bytes"] == len("out-42-fail\n")
    assert line_of(lines, "end", sleeper)["signal"] in ("SIGTERM", "SIGKILL"), lines
    refused = line_of(lines, "refused")
    assert refused["setting"] == "MCP_EXEC_ENV_DENY" and refused["command"] == "true", refused
    text = s.stderr_text
    assert "out-42" not in text and FORGED % FORGED_ID not in text, text


def test_a_refused_time_limit_is_logged_with_its_setting(make_server):
    """MCP_EXEC_MAX_TIME_LIMIT refuses a call's argument before any job is
    asked for; the log still has the refusal, and no start."""
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr", "MCP_EXEC_MAX_TIME_LIMIT": "10"})
    assert "MCP_EXEC_MAX_TIME_LIMIT" in s.tool_err("execute", {"command": "sleep 1", "time_limit": 60, "cwd": "/"})
    refused = line_of(await_lines(s, 1), "refused")
    assert refused["setting"] == "MCP_EXEC_MAX_TIME_LIMIT", refused
    assert refused["command"] == "sleep 1" and refused["cwd"] == "/", refused
    assert "time_limit 60" in refused["reason"], refused
    ok = s.run("true")
    assert [l["event"] for l in await_lines(s, 3)] == ["refused", "start", "end"], ok


def test_the_exec_sets_refusal_is_logged_in_its_default_cwd(make_server):
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr", "MCP_EXEC_TOOLS": "exec", "MAX_TIMEOUT_SECONDS": "10",
                         "DEFAULT_CWD": "/"})
    res = s.tool_raw("exec", {"command": "sleep 1", "timeout_seconds": 60})
    assert res.get("isError") is True and "MCP_EXEC_MAX_TIME_LIMIT" in res["content"][0]["text"], res
    refused = line_of(await_lines(s, 1), "refused")
    assert refused["setting"] == "MCP_EXEC_MAX_TIME_LIMIT" and refused["cwd"] == "/", refused


def test_the_shell_sets_allowlist_refusal_is_logged(make_server):
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr", "MCP_EXEC_TOOLS": "shell", "MCP_EXEC_ALLOW": "echo"})
    res = s.tool_raw("sh_run", {"command": "rm", "args": ["-rf", "x"], "cwd": "/"})
    assert res.get("isError") is True and "not allowlisted" in res["content"][0]["text"], res
    refused = line_of(await_lines(s, 1), "refused")
    assert refused["setting"] == "MCP_EXEC_ALLOW" and refused["argv"] == ["rm", "-rf", "x"], refused
    assert refused["reason"].startswith("Command 'rm' is not allowlisted"), refused


def test_a_command_with_newlines_stays_in_its_line(make_server):
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr"})
    command = "true\n" + FORGED % "inside-the-command" + "\n"
    s.run(command)
    lines = await_lines(s, 2)
    assert [l["event"] for l in lines] == ["start", "end"], lines
    assert lines[0]["command"] == command, lines


def test_argv_is_logged_as_words(make_server):
    s = make_server(env={"MCP_EXEC_JOB_LOG": "stderr"})
    r = s.tool("execute", {"argv": ["/bin/echo", "a b", "x" * 200]})
    assert r["state"] == "success", r
    start = line_of(await_lines(s, 2), "start", r["job_id"])
    assert "command" not in start, start
    assert start["argv"] == ["/bin/echo", "a b", "x" * (120 - len("/bin/echo") - len("a b"))], start


def test_the_log_goes_to_a_file_appended_and_private(make_server):
    needs_host_files()
    d = tempfile.mkdtemp(prefix="mcp-exec-joblog-")
    path = os.path.join(d, "jobs.log")
    with open(path, "w") as f:
        f.write("an older line\n")
    os.chmod(path, 0o600)
    fresh = os.path.join(d, "fresh.log")
    for target in (path, fresh):
        s = make_server(env={"MCP_EXEC_JOB_LOG": target})
        r = s.run("echo out-$((6*7))")
        assert r["state"] == "success", r
        assert s.close(10 + SLACK) == 0
        assert log_lines(s.stderr_text) == [], "the log went to stderr too: %s" % s.stderr_text
    text = read_file(path, "r")
    assert text.startswith("an older line\n"), text
    lines = log_lines(text.split("\n", 1)[1])
    assert [l["event"] for l in lines] == ["start", "end"], lines
    assert "out-42" not in text
    assert os.stat(fresh).st_mode & 0o777 == 0o600, oct(os.stat(fresh).st_mode)
    assert [l["event"] for l in log_lines(read_file(fresh, "r"))] == ["start", "end"]


def test_no_log_without_the_setting(make_server):
    s = make_server()
    s.run("true")
    assert s.close(10 + SLACK) == 0
    assert log_lines(s.stderr_text) == []


def test_a_log_that_cannot_be_opened_stops_the_server():
    err = assert_startup_refused({"MCP_EXEC_JOB_LOG": "/nonexistent-dir-%s/jobs.log" % uuid.uuid4().hex},
                                 "MCP_EXEC_JOB_LOG")
    assert "no such file or directory" in err, err
    assert_startup_refused({"MCP_EXEC_JOB_LOG": "stdout"}, "MCP_EXEC_JOB_LOG")


def test_http_sessions_are_named_without_the_token():
    if TARGET != "binary":
        pytest.skip("starts the binary itself with --listen 127.0.0.1:0")
    token = "tok-" + uuid.uuid4().hex
    proc = subprocess.Popen([server_binary(), "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=process_env({"MCP_EXEC_TOKEN": token, "MCP_EXEC_JOB_LOG": "stderr"}))
    lines, cond = [], threading.Condition()

    def read():
        for raw in iter(proc.stderr.readline, b""):
            with cond:
                lines.append(raw.decode("utf-8", "replace"))
                cond.notify_all()
    threading.Thread(target=read, daemon=True).start()
    try:
        addr = wait_until(lambda: next((m.group(1) for m in map(re.compile(r"serving MCP on http://(\S+?)/mcp").search, list(lines)) if m), None),
                          10 + SLACK, "the listening line")
        host, _, port = addr.rpartition(":")
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("POST", "/exec", body=json.dumps({"command": "echo out-$((6*7))"}),
                  headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        assert r.status == 200 and b"out-42" in body, body
        c.close()
        logged = wait_until(lambda: (lambda ls: ls if len(ls) >= 2 else None)(log_lines("".join(list(lines)))),
                            10 + SLACK, "the job's two lines")
        assert [l["session"] for l in logged] == ["http-exec-1"] * 2, logged
        text = "".join(list(lines))
        assert token not in text and "out-42\n" not in text, text
    finally:
        proc.terminate()
        proc.wait(10 + SLACK)
