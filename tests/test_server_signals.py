"""End-to-end tests of signals sent to the server process itself.

A server started with SIGHUP or SIGINT ignored (nohup) keeps serving when
that signal arrives, and its jobs still start with the default disposition;
a server started normally exits promptly, with status 0, on SIGHUP.
"""

import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import (EXIT_WITHIN, SLACK, await_no_token_processes, marker, needs_binary_target, server_binary,
                           token_processes, wait_until)

# A server that must NOT exit is watched this long after the signal: the
# absence of an event cannot be awaited, only given time to happen.  A server
# that honours the signal exits within milliseconds.
SURVIVE_WATCH = 1.0 + SLACK


@pytest.fixture
def launch(make_server):
    """Factory for servers started from an argv the test builds; each is shut
    down afterwards."""
    return lambda argv, **kw: make_server(argv=argv, **kw)


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


# A job that leaves its group twice over: a TERM-ignoring sleep in a session of
# its own, and a shell that keeps starting a new session for its successor.
_ESCAPING = ("setsid sh -c 'trap \"\" TERM; exec sleep 1000' & "
             "setsid sh -c 'trap \"\" TERM; while :; do setsid sh -c \"trap \\\"\\\" TERM; sleep 0.05\" & sleep 0.02; done' & "
             "echo up; wait")


@pytest.mark.parametrize("how", ["stdin-closed", "SIGTERM"])
def test_shutdown_leaves_no_setsid_process_behind(launch, how):
    needs_binary_target()
    token = marker().rsplit("-", 1)[1]
    s = launch([server_binary()])
    jid = s.job(_ESCAPING, env={"MCPX_TOKEN": token})
    s.poll_output(jid, lambda d: d == "up\n")
    wait_until(lambda: len(token_processes(token)) >= 3, 10, "the escaped processes")
    t0 = time.monotonic()
    if how == "SIGTERM":
        s.send_signal(signal.SIGTERM)
    else:
        s.close_stdin()
    try:
        rc = s.proc.wait(EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not exit within %ss" % EXIT_WITHIN)
    assert rc == 0, s.stderr_text[-2000:]
    assert time.monotonic() - t0 < EXIT_WITHIN
    # Nothing it started is left once it has exited (zombies re-parented to
    # our init may still wait to be reaped).
    left = {p: d for p, d in token_processes(token).items() if not d.endswith(" Z")}
    if left:
        await_no_token_processes(token, timeout=0)  # kills them, so they cannot disturb later tests
    assert not left, "processes outlived the server's shutdown: %r; stderr: %s" % (left, s.stderr_text[-2000:])
    assert "shutdown: every process the server started is gone" in s.stderr_text, s.stderr_text[-2000:]
