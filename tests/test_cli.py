"""End-to-end tests of the command line, on the binary target only (the
test starts the binary itself, with the arguments and stdin it needs).

  arguments  --listen=ADDR and --listen ADDR; a missing value, an unknown
             argument: one line on stderr naming it and --help, exit 2
  terminal   stdin a terminal: one line on stderr says the server waits for
             MCP messages and points to --help; stdout stays empty.
             A pipe on stdin: no such line.
"""

import os
import pty
import select
import subprocess
import time

import pytest

from tests.helpers import TARGET, process_env, server_binary

if TARGET != "binary":
    pytest.skip("the command line's tests start the binary themselves (MCP_EXEC_TARGET=binary)",
                allow_module_level=True)

DEADLINE = 10.0  # seconds: far above what a start and one line need on a loaded VM
HINT = "waiting for MCP messages"


def run(*args):
    return subprocess.run([server_binary(), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=process_env({}), timeout=DEADLINE)


@pytest.mark.parametrize("args,says", [
    (["--bogus"], 'unknown argument "--bogus"'),
    (["--listen"], "--listen needs an address, e.g. --listen 127.0.0.1:8080"),
    (["--listen="], "--listen needs an address"),
    (["--listen", "127.0.0.1:0", "stray"], 'unknown argument "stray"'),
])
def test_usage_error_is_one_line_pointing_to_help(args, says):
    r = run(*args)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.count("\n") == 1 and says in err and "--help" in err, err
    assert r.stdout == b""


@pytest.mark.parametrize("form", [["--listen=127.0.0.1:0"], ["--listen", "127.0.0.1:0"]])
def test_listen_takes_both_forms(form):
    p = subprocess.Popen([server_binary(), *form], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=process_env({"MCP_EXEC_HTTP_AUTH": "none"}))
    try:
        line = read_line_with(p.stderr.fileno(), "serving MCP on http://127.0.0.1:")
        assert line, "no serving line on stderr"
    finally:
        p.terminate()
        p.wait(timeout=DEADLINE)


def test_help_ends_with_examples_and_the_docs_path():
    r = run("--help")
    assert r.returncode == 0
    tail = r.stdout.decode().rsplit("Examples:", 1)[-1]
    assert "| mcp-exec" in tail and "mcp-exec --listen 127.0.0.1:8080" in tail
    assert "docs/" in tail and "/usr/share/doc/mcp-exec" in tail


def read_line_with(fd, text, deadline=DEADLINE):
    """The first line read from fd containing text, or None at EOF or the deadline."""
    buf = b""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        for line in buf.decode(errors="replace").splitlines():
            if text in line:
                return line
    return None


def test_terminal_stdin_gets_one_hint_on_stderr_and_nothing_on_stdout():
    master, slave = pty.openpty()
    p = subprocess.Popen([server_binary()], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=process_env({}))
    os.close(slave)
    try:
        line = read_line_with(p.stderr.fileno(), HINT)
        assert line and "--help" in line, line
    finally:
        os.close(master)  # the terminal hangs up: the server's stdin ends
    out, err = p.communicate(timeout=DEADLINE)
    assert out == b"", out
    assert HINT not in err.decode(), "the hint is said once"


def test_pipe_stdin_gets_no_hint():
    p = subprocess.run([server_binary()], input=b"", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=process_env({}), timeout=DEADLINE)
    assert HINT not in p.stderr.decode() and p.stdout == b""
