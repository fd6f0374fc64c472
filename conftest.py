"""The fixtures of mcp-exec's end-to-end suites, and their pytest hooks.

test_mcp_exec.py here (the 1.0 contract) and the suites by feature in tests/
all talk to a real server process; the client, the launcher and the target
selection (MCP_EXEC_TARGET: binary, pid1 or container) are in
tests/helpers.py.  Run from the repository root, without xdist (several
fixtures share one server):

    python3 -m pytest -q -p no:cacheprovider test_mcp_exec.py tests/

pytest loads this file before the test files, with the repository root on
sys.path, so `tests.helpers` is imported once and the session's binary and
its list of live servers exist once.  test_mcp_exec.py imports the names it
uses from here (`from conftest import ...`); they are helpers' own.
"""

import signal

import pytest

from tests.helpers import (
    _ALL_SERVERS, EXIT_WITHIN, IS_ROOT, MIB, PODMAN, SLACK, TARGET, TERM_IGNORING_TREE, UNSUPPORTED,
    RawServer, Server, ToolError, assert_inflight_cancelled, close_module_server, await_file, await_no_token_processes, idkey,
    marker, needs_binary_target, needs_container_target, needs_pid1_support, process_env, read_file,
    server_argv, server_binary, start_shutdown_scenario, token_processes, wait_until)

# The client's names a suite at the root (test_mcp_exec.py) imports from here.
__all__ = [
    "EXIT_WITHIN", "IS_ROOT", "MIB", "PODMAN", "SLACK", "TARGET", "TERM_IGNORING_TREE", "Server", "ToolError",
    "assert_inflight_cancelled", "await_file", "await_no_token_processes", "idkey", "marker",
    "needs_binary_target", "needs_container_target", "needs_pid1_support", "process_env", "read_file",
    "server_argv", "server_binary", "start_shutdown_scenario", "token_processes", "wait_until"]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes a minute or more; scripts/test.sh runs it on the binary target only")
    # Servers inherit the test run's signal dispositions, and a server keeps
    # a SIGHUP or SIGINT that was ignored at its start ignored (as under
    # nohup, by design). A run started under nohup would then fail every
    # test that hangs up on a server, for the way it was launched.
    for sig in (signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL if sig == signal.SIGHUP else signal.default_int_handler)


def pytest_collection_modifyitems(items):
    # A conftest cannot skip at module level (pytest aborts when a conftest
    # raises Skipped while it is imported), so every test is skipped instead.
    if UNSUPPORTED:
        skip = pytest.mark.skip(reason=UNSUPPORTED)
        for item in items:
            item.add_marker(skip)


# --------------------------------------------------------------------------
# Fixtures every suite gets
# --------------------------------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def mcp_bin():
    if TARGET == "container":
        return None
    return server_binary()


@pytest.fixture
def make_server(mcp_bin):
    """Factory of Servers (keywords as for Server; cls= a subclass to make),
    each shut down after the test; a shutdown that fails fails the test."""
    made = []

    def factory(cls=None, **kw):
        s = (cls or Server)(**kw)
        made.append(s)
        return s

    yield factory
    failures = []
    for s in made:
        if s.proc.poll() is None:
            try:
                s.close(10 + SLACK)
            except AssertionError as e:
                failures.append(str(e))
    if failures:
        pytest.fail("server teardown: %s" % failures)


@pytest.fixture(scope="module")
def srv(mcp_bin):
    """A RawServer the tests of one module share (a module may define its own
    srv instead, as test_mcp_exec.py does); it must exit with status 0."""
    s = RawServer()
    yield s
    close_module_server(s)


@pytest.fixture
def raw_server(make_server):
    """Factory of RawServers (keywords as for Server), shut down after the test."""
    return lambda **kw: make_server(cls=RawServer, **kw)


@pytest.fixture(autouse=True)
def _no_protocol_problems():
    yield
    problems = []
    for s in list(_ALL_SERVERS):
        problems += s.take_problems()
    _ALL_SERVERS[:] = [s for s in _ALL_SERVERS if s.proc.poll() is None]
    if problems:
        pytest.fail("stdout protocol problems: %s" % problems)
