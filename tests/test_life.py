"""End-to-end tests of what one server's life costs the machine.

A host may start a server per conversation or per tool call, so the life of
one that answers `initialize` and sees stdin close must do no more than that
needs: no walk of every process's /proc files at exit, no descriptor flags
flipped for each read of stdin. strace records what the server asks of the
kernel; without strace these tests are skipped.
"""

import json
import re
import shutil
import subprocess

import pytest

from tests.helpers import (EXIT_WITHIN, await_no_token_processes, marker, needs_binary_target, process_env,
                           server_argv, server_binary)

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "life", "version": "1"}}}

# One open of /proc/PID/... as strace -f writes it: "PID openat(..., "/proc/N/...".
PROC_OPEN = re.compile(r'^(\d+)\s+openat\([^,]*, "/proc/(\d+)/')
# One fcntl on stdin that sets its flags.
STDIN_SETFL = re.compile(r'^\d+\s+fcntl\(0, F_SETFL')


def traced_life(tmp_path, requests, env=None, answered_first=False):
    """Runs the server under strace -f for one life: the request lines,
    then stdin closed (with answered_first, once every request with an id
    has its reply). Returns the trace's lines and the replies."""
    needs_binary_target()  # strace must see the server itself, not unshare or podman
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: what the server asks of the kernel cannot be recorded")
    trace = tmp_path / "trace"
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    argv = ["strace", "-f", "-qq", "-e", "trace=openat,fcntl", "-o", str(trace), server_binary()]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=process_env(env)) as server:
        replies = []
        if answered_first:
            server.stdin.write(lines)
            server.stdin.flush()
            # Each readline has the server's own deadline: a call that never
            # answers is killed by communicate's timeout below.
            while len(replies) < sum(1 for r in requests if "id" in r):
                line = server.stdout.readline()
                if not line:
                    break
                replies.append(json.loads(line))
            lines = ""
        out, err = server.communicate(lines, timeout=EXIT_WITHIN + 30)
    assert server.returncode == 0, err
    replies += [json.loads(line) for line in out.splitlines()]
    return trace.read_text().splitlines(), replies


def tools_call(rid, name, args):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args}}


def test_a_session_that_ran_no_job_reads_no_proc_at_exit(tmp_path):
    trace, replies = traced_life(tmp_path, [INITIALIZE])
    assert [r["id"] for r in replies] == [1]
    opened = [line for line in trace if PROC_OPEN.match(line)]
    assert opened == [], "a life with no job opened /proc files of processes:\n" + "\n".join(opened[:20])


def test_reading_stdin_flips_no_descriptor_flags_per_read(tmp_path):
    # Twenty requests, read one by one or in batches: stdin's flags are set
    # once at most (it joins the runtime's poller), never around each read.
    requests = [INITIALIZE] + [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(2, 22)]
    trace, replies = traced_life(tmp_path, requests)
    assert len(replies) == 21
    flips = [line for line in trace if STDIN_SETFL.match(line)]
    assert len(flips) <= 1, "stdin's flags were set %d times:\n%s" % (len(flips), "\n".join(flips))
    fcntls = [line for line in trace if re.match(r'^\d+\s+fcntl\(', line)]
    assert len(fcntls) <= 20, "%d fcntl calls in one life:\n%s" % (len(fcntls), "\n".join(fcntls[:40]))


def test_the_exit_sweep_reads_only_the_servers_own_tree(tmp_path):
    # A job still running at stdin's end is torn down with every process
    # below the server; what is read to find them is the /proc of the
    # server's own threads and descendants, never of the machine's others
    # (strace -f names every one of those in its lines).
    job = tools_call(2, "execute", {"command": "sleep 300 & sleep 300 & wait", "nowait": True})
    trace, replies = traced_life(tmp_path, [INITIALIZE, job])
    assert "job_id" in replies[1]["result"]["content"][0]["text"]
    ours = {int(line.split()[0]) for line in trace if line.split() and line.split()[0].isdigit()}
    strangers = [line for line in trace if PROC_OPEN.match(line) and int(PROC_OPEN.match(line).group(2)) not in ours]
    assert strangers == [], "the exit sweep read /proc of processes outside the server's tree:\n" + "\n".join(strangers[:20])


def test_survivors_of_a_shell_are_found_in_the_servers_own_tree(tmp_path):
    # The shell ends while a child it started still runs in its group: the
    # result names that survivor, found below the server (a child
    # subreaper), without reading /proc of the machine's other processes.
    job = tools_call(2, "execute", {"command": "sleep 300 >/dev/null 2>&1 & echo started"})
    trace, replies = traced_life(tmp_path, [INITIALIZE, job], answered_first=True)
    assert "started" in replies[1]["result"]["content"][0]["text"]
    ours = {int(line.split()[0]) for line in trace if line.split() and line.split()[0].isdigit()}
    strangers = [line for line in trace if PROC_OPEN.match(line) and int(PROC_OPEN.match(line).group(2)) not in ours]
    assert strangers == [], "finding survivors read /proc of processes outside the server's tree:\n" + "\n".join(strangers[:20])


def test_a_job_started_as_stdin_closes_is_torn_down_at_exit():
    # The execute call is read, then stdin ends before its job has started:
    # the first look at the registry finds no job, so the job must be found
    # by a second look once the call has replied, not left running.
    token = marker()
    job = tools_call(2, "execute", {"command": "sleep 300 & sleep 300 & wait", "nowait": True,
                                    "env": {"MCPX_TOKEN": token}})
    lines = json.dumps(INITIALIZE) + "\n" + json.dumps(job) + "\n"
    r = subprocess.run(server_argv({}), input=lines, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=process_env({}), timeout=EXIT_WITHIN + 10)
    assert r.returncode == 0, r.stderr
    left = await_no_token_processes(token)
    assert left == {}, "the job started as stdin closed outlived the server: %s" % left
