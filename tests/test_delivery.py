"""Delivery and drop-in tests for mcp-exec (issue "Drop-in 1.0").

They use the client, the server launcher and the targets of conftest.py:
MCP_EXEC_TARGET=binary (default), pid1 (the binary as PID 1 under `unshare`,
needs root) or container (`podman run -i --rm $MCP_EXEC_IMAGE`), and
MCP_EXEC_BIN for the binary.  Run without xdist:

    MCP_EXEC_BIN=./mcp-exec python3 -m pytest -q test_delivery.py

What is checked:

1. The delivery rule: a finished job's result goes to every call that was
   already blocked on it when it ended (each `wait` naming it, the `kill`
   that ended it, a concurrent `kill`, a blocking `execute`), once per call;
   then the job is forgotten and later calls get `unknown job_id`.  Every
   interleaving runs MCP_EXEC_LOOPS times (default 10; the issue's done-when
   is MCP_EXEC_LOOPS=200 with no failure).
2. `kill` takes real-time signals: "32".."64", RTMIN, RTMIN+n, RTMAX-n.
3. A server started with SIGHUP or SIGINT ignored (nohup) keeps serving when
   that signal arrives, and its jobs still start with the default disposition.
4. The image runs with the server's own path as the command, and with the
   server as the entrypoint.

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
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import (
    EXIT_WITHIN, PODMAN, SLACK, Server, ToolError, idkey, marker, needs_binary_target,
    needs_container_target, server_binary)

# Iterations of every interleaving; 200 is the bar, 10 keeps CI fast.
LOOPS = int(os.environ.get("MCP_EXEC_LOOPS", "10"))
# How long any single reply may take (generous; containers start slower).
REPLY = 20.0 + SLACK
# A server that must NOT exit is watched this long after the signal: the
# absence of an event cannot be awaited, only given time to happen.  A server
# that honours the signal exits within milliseconds.
SURVIVE_WATCH = 1.0 + SLACK
SERVER_PATH = "/usr/local/bin/mcp-exec"  # the server's path inside the image

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


@pytest.fixture
def launch(make_server):
    """Factory for servers started from an argv the test builds; each is shut
    down afterwards."""
    return lambda argv, **kw: make_server(argv=argv, **kw)


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


def reply(s, rid, what, timeout=REPLY):
    """The decoded tool result of request rid; a tool error fails, naming
    the call (`what`) that got it."""
    try:
        return Server.decode(s.tool_response(rid, timeout))
    except ToolError as e:
        raise AssertionError("%s got %s" % (what, e)) from None


def kill(s, jid, sig, timeout=10 + SLACK):
    """An awaited kill; a tool error fails, saying it was the kill's."""
    rid = s.tool_start("kill", {"job_id": jid, "signal": sig, "timeout": timeout})
    return reply(s, rid, "the kill (signal %s)" % sig, timeout=timeout + REPLY)


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


def assert_kill_delivered(k, jid, signal_sent=None):
    """k is a kill answer that ended jid and carries its result."""
    assert k.get("job_id") == jid, k
    assert k.get("terminated") is True, "kill did not report the job terminated: %r" % k
    assert isinstance(k.get("result"), dict), "kill answered without the result: %r" % k
    assert k["result"].get("job_id") == jid, k
    if signal_sent is not None:
        assert k.get("signal_sent") == signal_sent, k
        assert not k.get("already_terminated"), k
        assert set(k) == {"job_id", "terminated", "signal_sent", "result"}, k
    return k["result"]


def assert_forgotten(s, jid):
    """Once delivered, the job is gone: status, wait and kill all say so."""
    assert "unknown job_id" in s.tool_err("status", {"job_id": jid})
    assert "unknown job_id" in s.tool_err("wait", {"job_ids": [jid], "timeout": 0})
    assert "unknown job_id" in s.tool_err("kill", {"job_id": jid, "signal": "KILL", "timeout": 0})
    assert jid not in s.list_ids()


# ==========================================================================
# 1. The delivery rule
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
# 2. Real-time signals
# ==========================================================================

# The shell ignores TERM, so only the signal asked for can end it.
TERM_PROOF = "trap '' TERM; echo ready; while :; do sleep 0.1; done"


def _kill_with(s, spelling):
    jid = s.job(TERM_PROOF)
    s.poll_output(jid, lambda data: data == "ready\n")
    k = kill(s, jid, spelling, timeout=5 + SLACK)
    result = assert_kill_delivered(k, jid)
    assert result.get("state") == "error", result
    assert result.get("exit_code") == -1, "the shell was killed by a signal: %r" % result
    assert isinstance(result.get("signal"), str) and result["signal"], result
    assert_forgotten(s, jid)
    return k["signal_sent"]


@pytest.mark.parametrize("spelling,number", [
    ("34", 34), ("64", 64),
    ("RTMAX", 64), ("RTMAX-3", 61), ("sigrtmax-3", 61), ("SIGRTMAX", 64),
])
def test_kill_with_realtime_signal_number_or_rtmax_name(ds, spelling, number):
    assert _kill_with(ds, spelling) == number


@pytest.mark.parametrize("spelling", ["32", "33"])
def test_kill_accepts_the_c_librarys_own_realtime_signals(ds, spelling):
    # The C library keeps 32 and 33 for itself and handles them in every
    # program built on it, so a job may well survive them: the signal is
    # accepted and sent, and kill reports what it saw either way.
    jid = ds.job("sleep 30")
    try:
        k = ds.tool("kill", {"job_id": jid, "signal": spelling, "timeout": 0.5})
        assert k["signal_sent"] == int(spelling), k
    finally:
        ds.cleanup(jid)


# RTMIN is 32 for the kernel and 34 for glibc (and `kill -l`); either is
# accepted here, but RTMIN+n must be n above whichever RTMIN is.
@pytest.mark.parametrize("spelling,offset", [
    ("RTMIN", 0), ("RTMIN+2", 2), ("SIGRTMIN+2", 2), ("rtmin+2", 2), ("SigRtMin+5", 5),
])
def test_kill_with_rtmin_name(ds, spelling, offset):
    sent = _kill_with(ds, spelling)
    assert sent - offset in (32, 34), "%s sent signal %d" % (spelling, sent)


@pytest.mark.parametrize("spelling", ["65", "RTMAX+1", "SIGRTMAX+1", "RTMIN+X", "RTMAX-"])
def test_kill_refuses_signal_beyond_realtime_range(ds, spelling):
    jid = ds.job("sleep 30")
    try:
        err = ds.tool_err("kill", {"job_id": jid, "signal": spelling, "timeout": 0})
        assert "unknown signal" in err, err
        assert ds.status(jid)["state"] == "running", "a refused kill must not touch the job"
    finally:
        ds.cleanup(jid)


# ==========================================================================
# 3. A server started with SIGHUP / SIGINT ignored
# ==========================================================================

# Sets dispositions (NAME=ign / NAME=dfl) and execs the rest of argv after
# "--".  Python itself ignores PIPE and XFSZ, which exec would pass on, so
# those go back to default first.
_DISPOSE = """
import os, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
cut = sys.argv.index("--")
for spec in sys.argv[1:cut]:
    name, how = spec.split("=")
    signal.signal(getattr(signal, "SIG" + name), signal.SIG_IGN if how == "ign" else signal.SIG_DFL)
os.execvp(sys.argv[cut + 1], sys.argv[cut + 1:])
"""


def with_dispositions(specs, argv):
    return [sys.executable, "-c", _DISPOSE] + list(specs) + ["--"] + list(argv)


def _ignored_bits(status_text):
    """The SigIgn masks found in /proc/PID/status text, as integers."""
    return [int(m, 16) for m in re.findall(r"^SigIgn:\s*([0-9a-fA-F]+)$", status_text, re.M)]


def _ignores(mask, sig):
    return bool(mask >> (int(sig) - 1) & 1)


def assert_jobs_start_with_default(s, sig):
    """A job's shell, and a command it runs, do not ignore sig."""
    out = s.sh("grep SigIgn /proc/$$/status; grep SigIgn /proc/self/status")
    masks = _ignored_bits(out)
    assert len(masks) == 2, out
    for mask in masks:
        assert not _ignores(mask, sig), \
            "a job inherited %s ignored from the server (SigIgn %x)" % (signal.Signals(sig).name, mask)


@pytest.mark.parametrize("how,sig", [("nohup", signal.SIGHUP), ("sig_ign", signal.SIGHUP),
                                     ("sig_ign", signal.SIGINT)],
                         ids=["nohup-HUP", "ignored-HUP", "ignored-INT"])
def test_server_started_with_signal_ignored_survives_it_and_jobs_get_default(launch, how, sig):
    needs_binary_target()
    name = signal.Signals(sig).name[3:]
    if how == "nohup":
        prefix = ["nohup"]
    else:
        prefix = with_dispositions([name + "=ign"], [])
    # The launcher really does start its program with the signal ignored.
    probe = subprocess.run(prefix + ["grep", "SigIgn", "/proc/self/status"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=30)
    assert _ignores(_ignored_bits(probe.stdout)[0], sig), probe

    s = launch(prefix + [server_binary()])
    assert_jobs_start_with_default(s, sig)
    s.send_signal(sig)
    try:
        rc = s.proc.wait(SURVIVE_WATCH)
    except subprocess.TimeoutExpired:
        rc = None
    assert rc is None, "the server exited (status %s) on %s although it was started with it ignored" \
        % (rc, name)
    s.roundtrip()
    assert s.run("echo still serving")["stdout"]["data"] == "still serving\n"
    assert_jobs_start_with_default(s, sig)
    assert s.close() == 0


def test_normally_started_server_exits_promptly_on_sighup(launch):
    needs_binary_target()
    # Default disposition set explicitly, in case the test runner itself
    # runs under nohup.
    s = launch(with_dispositions(["HUP=dfl"], [server_binary()]))
    assert_jobs_start_with_default(s, signal.SIGHUP)
    t0 = time.monotonic()
    s.send_signal(signal.SIGHUP)
    try:
        rc = s.proc.wait(EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not exit within %ss of SIGHUP" % EXIT_WITHIN)
    assert rc == 0, "shutdown on SIGHUP must exit with status 0; stderr: %s" % s.stderr_text[-2000:]
    assert time.monotonic() - t0 < EXIT_WITHIN


# ==========================================================================
# 4. The image as a drop-in
# ==========================================================================

def podman_run(*middle):
    """`podman run -i --rm --name N` + middle: the image's argv, built here."""
    return [PODMAN, "run", "-i", "--rm", "--name", "mcp-exec-delivery-" + uuid.uuid4().hex[:12]] \
        + list(middle)


def test_image_with_server_path_as_command_serves(launch):
    needs_container_target()
    image = os.environ["MCP_EXEC_IMAGE"]
    s = launch(podman_run(image, SERVER_PATH))
    assert s.init_result["serverInfo"]["name"] == "mcp-exec"
    jid = s.job("echo drop-in; echo to-stderr >&2")
    r = s.collect(jid, timeout=REPLY)
    assert r.get("state") == "success" and r.get("exit_code") == 0, r
    assert r["stdout"]["data"] == "drop-in\n", r
    assert_forgotten(s, jid)
    assert s.close(timeout=10 + SLACK) == 0, "graceful shutdown must exit with status 0"


def test_image_with_server_as_entrypoint_runs_it_as_pid1(launch):
    needs_container_target()
    image = os.environ["MCP_EXEC_IMAGE"]
    s = launch(podman_run("--entrypoint", SERVER_PATH, image))
    jid = s.job("cat /proc/1/comm")
    r = s.collect(jid, timeout=REPLY)
    assert r.get("state") == "success", r
    assert r["stdout"]["data"] == "mcp-exec\n", "PID 1 is not the server: %r" % r
    assert s.close(timeout=10 + SLACK) == 0, "graceful shutdown must exit with status 0"
