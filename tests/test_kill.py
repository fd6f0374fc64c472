"""End-to-end tests of kill's signals beyond the named ones.

`kill` takes real-time signals: "32".."64", RTMIN, RTMIN+n, RTMAX-n, in
any case and with or without SIG; RTMIN+n is n above whichever RTMIN the
C library or the kernel names; anything past the real-time range is
refused without touching the job.
"""

import os
import re
import shutil
import signal

import pytest

from tests.helpers import (SLACK, Server, assert_forgotten, assert_kill_delivered, close_module_server, kill,
                           needs_binary_target, read_file, wait_until)


@pytest.fixture(scope="module")
def shared(mcp_bin):
    """One server for the whole file."""
    s = Server()
    yield s
    close_module_server(s)


@pytest.fixture
def ds(shared):
    """The shared server, with every job of the test gone afterwards."""
    assert shared.proc.poll() is None, \
        "the shared server has exited (%s); stderr: %s" % (shared.proc.poll(), shared.stderr_text[-2000:])
    yield shared
    if shared.proc.poll() is None:
        shared.cleanup(*shared.list_ids())


# ==========================================================================
# Real-time signals
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


# ==========================================================================
# The job's whole tree: setsid children, and survivors that are alive
# ==========================================================================

def _state(pid):
    """The /proc state letter of pid, or None when there is no such process."""
    stat = read_file("/proc/%d/stat" % pid, "r")
    return None if stat is None else stat[stat.rindex(")") + 2:].split()[0]


def _named_pids(detail):
    """The pids a kill's detail names as survivors: "PID (COMM, STATE)"."""
    return [int(p) for p in re.findall(r"(\d+) \(", detail)]


def _kill_is_truthful(k, pids=()):
    """A kill answer never claims a dead tree while one of pids lives, and
    names no process that is gone."""
    if k["terminated"]:
        for pid in pids:
            assert _state(pid) in (None, "Z"), "kill answered terminated while %d lives: %r" % (pid, k)
        return
    for pid in _named_pids(k["detail"]):
        state = _state(pid)
        assert state is not None, "kill named %d, which is gone: %r" % (pid, k)


def test_kill_of_an_http_server_started_with_until_names_no_dead_process(ds):
    needs_binary_target()  # the test reads the server's pids from its own /proc
    if shutil.which("python3") is None:
        pytest.skip("needs python3")
    for _ in range(6):
        r = ds.tool("execute", {"command": "python3 -u -m http.server 0 --bind 127.0.0.1",
                                "until": {"pattern": "^Serving HTTP"}})
        assert r["state"] == "running" and "matched" in r, r
        k = kill(ds, r["job_id"], "TERM")
        _kill_is_truthful(k)
        if k["terminated"]:
            assert_kill_delivered(k, r["job_id"])
        else:
            ds.cleanup(r["job_id"])


@pytest.mark.parametrize("command", [
    "setsid sleep 1000 & echo $!; wait",
    "(setsid sleep 1000 & echo $!); exec sleep 1000",
    "(setsid sleep 1000 & echo $!)",
], ids=["setsid-child", "double-fork", "shell-exited"])
def test_kill_reaches_a_process_that_left_the_group_with_setsid(ds, command):
    needs_binary_target()
    jid = ds.job(command)
    pid = int(ds.poll_output(jid, lambda data: data.endswith("\n"))["stdout"]["data"].strip())
    try:
        wait_until(lambda: (read_file("/proc/%d/comm" % pid, "r") or "").strip() == "sleep", 10, "the setsid sleep")
        k = kill(ds, jid, "TERM")
        _kill_is_truthful(k, [pid])
        assert k["terminated"], "a sleep that dies of TERM survived: %r" % k
    finally:
        if (read_file("/proc/%d/comm" % pid, "r") or "").strip() == "sleep":
            os.kill(pid, signal.SIGKILL)
