"""End-to-end tests of input detection: waiting_for_input.

A job blocked reading its own stdin (directly, through a duplicated
descriptor, in a grandchild or in an event loop) is reported as
waiting_for_input by status, output, wait, list_jobs and progress, and a
blocking execute yields it long before yield_after; reading another pipe
is not waiting for input, and neither is a process that polls, selects or
waits in epoll on other descriptors (a socket, another pipe) while its stdin
is a pipe; the flag clears once the reader has its line or stdin is closed.  Under the agent profile the first look decides (the job
blocked reading now and silent for 1 s), and an entry that waits carries
the job's newest lines in "recent"; a yielded result carries them under
any profile.  The answer to an `input` says waiting_for_input only when
the job read again after the write: a REPL given exit() never does.
"""

import time

import pytest

from tests.helpers import SLACK, RawServer, await_file, close_module_server, marker, poll_status, short, timed

# A few seconds of tolerance for "returns at about t".
LATE = 3.0 + SLACK


# ==========================================================================
# waiting_for_input
# ==========================================================================

def test_waiting_for_input_reported_everywhere_then_cleared_by_eof(srv):
    t0 = time.monotonic()
    jid = srv.job("wc -l", stdin="a\nb\n")
    try:
        first = srv.status(jid)
        if time.monotonic() - t0 < 0.9:
            assert "waiting_for_input" not in first, \
                "waiting_for_input needs the job to be blocked for >= 1 s: %r" % first
        st = poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                         what="waiting_for_input on status")
        assert time.monotonic() - t0 >= 0.9, "reported before the job could have waited 1 s"
        assert st["state"] == "running", st
        assert st == {"job_id": jid, "state": "running", "waiting_for_input": True}, st
        entries = [j for j in srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
        assert entries == [{"job_id": jid, "state": "running", "waiting_for_input": True}], entries
        w = srv.tool("wait", {"job_ids": [jid], "timeout": 0})
        assert w == [{"job_id": jid, "state": "running", "waiting_for_input": True}], w
        out = srv.tool("output", {"job_id": jid, "stdout": "all"})
        assert out.get("waiting_for_input") is True, out
        st = srv.tool("input", {"job_id": jid, "close": True})
        assert st["job_id"] == jid
        done = srv.collect(jid, timeout=10)
        assert done["state"] == "success", done
        assert done["stdout"]["data"].strip() == "2", done
        assert "waiting_for_input" not in done, done
    finally:
        srv.cleanup(jid)


def test_blocking_read_yields_waiting_for_input_long_before_yield_after(srv):
    r, took = timed(srv.tool, "execute", {"command": "read x; echo got $x", "yield_after": 60}, timeout=70)
    assert r.get("state") == "running" and r.get("yielded") is True, r
    assert r.get("waiting_for_input") is True, r
    assert 0.9 <= took <= 1 + LATE, took
    jid = r["job_id"]
    srv.tool("input", {"job_id": jid, "data": "hello\n"})
    done = srv.collect(jid, timeout=10)
    assert done["state"] == "success" and done["stdout"]["data"] == "got hello\n", done


def test_reading_another_pipe_is_not_waiting_for_input(srv):
    jid = srv.job("sleep 5 | cat")
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            st = srv.status(jid)
            assert st["state"] == "running", st
            assert "waiting_for_input" not in st, st
            time.sleep(0.2)
        entries = [j for j in srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
        assert entries == [{"job_id": jid, "state": "running"}], entries
    finally:
        srv.cleanup(jid)


def test_reading_another_pipe_does_not_yield_a_blocking_execute(srv):
    r, took = timed(srv.tool, "execute", {"command": "sleep 2.5 | cat; echo fin", "yield_after": 60}, timeout=70)
    assert r["state"] == "success" and r["stdout"]["data"] == "fin\n", r
    assert took >= 2.4, took


def test_waiting_for_input_through_a_duplicated_descriptor(srv):
    # the reader holds the job's stdin pipe on fd 3, not fd 0
    r, took = timed(srv.tool, "execute", {"command": "exec 3<&0 0</dev/null; read x <&3; echo got $x",
                                          "yield_after": 30}, timeout=40)
    assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
    assert took <= 1 + LATE, took
    srv.tool("input", {"job_id": r["job_id"], "data": "fd3\n"})
    assert srv.collect(r["job_id"])["stdout"]["data"] == "got fd3\n"


def test_waiting_for_input_of_a_grandchild(srv):
    r, took = timed(srv.tool, "execute", {"command": "sh -c 'sh -c \"head -n 1\"'; echo after",
                                          "yield_after": 30}, timeout=40)
    assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
    assert took <= 1 + LATE, took
    srv.tool("input", {"job_id": r["job_id"], "data": "line\n"})
    assert srv.collect(r["job_id"])["stdout"]["data"] == "line\nafter\n"


def test_waiting_for_input_clears_once_the_reader_has_its_line(srv):
    jid = srv.job("while read x; do echo \"<$x>\"; sleep 3; done")
    try:
        poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                    what="waiting_for_input")
        srv.tool("input", {"job_id": jid, "data": "a\n"})
        srv.poll_output(jid, lambda d: d == "<a>\n")
        # the loop now sleeps for 3 s: not waiting for input
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            st = srv.status(jid)
            assert "waiting_for_input" not in st, st
            time.sleep(0.1)
        # and it comes back once the loop reads again
        poll_status(srv, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                    what="waiting_for_input again")
    finally:
        srv.cleanup(jid)


def test_waiting_for_input_of_an_event_loop_reader(srv):
    """A Node.js program waiting for a line (readline, prompts of npm and
    friends) waits for stdin in epoll_wait, not in read(2); to the caller it
    is just as much a job waiting for input."""
    if srv.run("command -v node >/dev/null")["exit_code"] != 0:
        pytest.skip("no node in the server's world")
    cmd = ("node -e \"process.stdin.once('data', d => { console.log('got ' + String(d).trim());"
           " process.exit(0) })\"")
    r, took = timed(srv.tool, "execute", {"command": cmd, "yield_after": 4}, timeout=20)
    try:
        assert r.get("yielded") is True, r
        assert r.get("waiting_for_input") is True, \
            "a node process blocked on stdin (epoll) is not reported: %r after %.1fs" % (r, took)
        assert took <= 1 + LATE, took
    finally:
        srv.cleanup(r["job_id"])


def test_progress_says_waiting_for_input(raw_server):
    s = raw_server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    jid = s.job("read x; echo got $x")
    token = "wfi-" + marker()[-8:]
    rid = s.tool_start("wait", {"job_ids": [jid], "timeout": 30}, meta={"progressToken": token})

    def says_waiting(m):
        p = m.get("params") or {}
        return (m.get("method") == "notifications/progress" and p.get("progressToken") == token
                and "waiting for input" in str(p.get("message", "")))
    s.wait_notifications(says_waiting, timeout=10 + SLACK)
    assert not s.has_response(rid), "wait must keep blocking while the job waits for input"
    s.tool("input", {"job_id": jid, "data": "yes\n"})
    done = s.decode(s.tool_response(rid, timeout=10))
    assert done[0]["state"] == "success" and done[0]["stdout"]["data"] == "got yes\n", done


def test_progress_of_blocking_execute_says_waiting_for_input(raw_server):
    s = raw_server(env={"MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    token = "wfx-" + marker()[-8:]
    rid = s.tool_start("execute", {"command": "read x"}, meta={"progressToken": token})

    def says_waiting(m):
        p = m.get("params") or {}
        return (m.get("method") == "notifications/progress" and p.get("progressToken") == token
                and "waiting for input" in str(p.get("message", "")))
    s.wait_notifications(says_waiting, timeout=10 + SLACK)
    s.cancel(rid)
    msg = s.response(rid, timeout=10 + SLACK)
    assert msg.get("error", {}).get("code") == -32800, msg


# ==========================================================================
# The first look, and recent
# ==========================================================================

# The first-look tests set a short input wait, so that a job is reported
# a fraction of a second after it goes quiet, not after the default second.
SHORT_INPUT_WAIT = {"MCP_EXEC_INPUT_WAIT_MS": "100"}
# How long a job stays silent before it says so: the short wait, and half a
# second for a loaded machine to schedule the pump that stamps its output.
QUIET_S = 0.1 + 0.5


def when_quiet(m):
    """A shell fragment to put just before a job's read: it touches m once
    the job has written nothing for QUIET_S, and writes nothing itself.
    Silence is elapsed time, not an event the test could await, and looking
    at the job meanwhile would start a clock; so the job, not the test,
    measures it, and the test awaits m (await_silence). The timer is not
    the shell's child: its exit would wake the shell out of its read just
    as the test looks."""
    return "( (sleep %s; touch %s) & ) </dev/null >/dev/null 2>&1; " % (QUIET_S, m)


def await_silence(s, m):
    """Wait until a job started with when_quiet(m) has been silent and
    idle for longer than the server's input wait."""
    await_file(s, m)


def without_procs(st):
    """A running job's status under the agent profile without `procs`, the
    count of its processes wire 1.3 added, checked here to be one."""
    st = dict(st)
    procs = st.pop("procs", None)
    assert procs is None or (isinstance(procs, int) and procs >= 1), st
    return st


def test_waiting_for_input_on_first_look(raw_server):
    # A status on a job blocked reading stdin for 2.5 s said nothing: the
    # first look only started a clock, and a second call had to come a
    # second later.
    s = raw_server(env=dict(SHORT_INPUT_WAIT, MCP_EXEC_PROFILE="agent"))
    m1, m2 = marker(), marker()
    first = s.job("echo 'Proceed? [y/N]'; %sread x; echo got $x" % when_quiet(m1))
    second = s.job("%sread x" % when_quiet(m2))
    try:
        await_silence(s, m1)
        st = without_procs(s.status(first))
        assert st == {"job_id": first, "state": "running", "waiting_for_input": True,
                      "recent": {"stdout": "Proceed? [y/N]\n"}}, st
        await_silence(s, m2)
        entries = [e for e in s.tool("list_jobs")["jobs"] if e["job_id"] == second]
        assert entries == [{"job_id": second, "state": "running", "waiting_for_input": True}], entries
        done = s.answer(first, "y\n", timeout=10 + SLACK)
        assert done["stdout"]["data"].endswith("got y\n") and "recent" not in done, done
    finally:
        s.cleanup(first, second)
        s.sh("rm -f %s %s" % (m1, m2))


def test_first_look_outside_the_profile_keeps_the_replies_a_1_0_client_gets(raw_server):
    s = raw_server(env=SHORT_INPUT_WAIT)
    m = marker()
    jid = s.job("echo hello; %sread x" % when_quiet(m))
    try:
        await_silence(s, m)
        assert s.status(jid) == {"job_id": jid, "state": "running"}
        st = poll_status(s, jid, lambda st: st.get("waiting_for_input") is True, 10 + SLACK,
                         what="waiting_for_input by a later look")
        assert st == {"job_id": jid, "state": "running", "waiting_for_input": True}, st
    finally:
        s.cleanup(jid)
        s.sh("rm -f %s" % m)


def test_yielded_build_shows_its_last_lines(srv):
    cmd = ("for i in $(seq 1 40); do echo \"compiling unit $i\"; done; "
           "echo 'warning: unused variable x' >&2; printf ' 10%%\\r 55%%\\r'; exec sleep 60")
    r, took = timed(srv.tool, "execute", {"command": cmd, "yield_after": 2}, timeout=30)
    try:
        assert r.get("yielded") is True and r["state"] == "running", r
        assert r.get("recent") == {"stdout": "compiling unit 39\ncompiling unit 40\n 55%",
                                   "stderr": "warning: unused variable x\n"}, r
        assert "waiting_for_input" not in r, r
    finally:
        srv.cleanup(r["job_id"])


def test_recent_is_left_out_of_a_reply_it_would_not_fit(srv):
    # 3 lines of 130 control bytes escape to some 2.3 KB twice over.
    cmd = "for i in 1 2 3; do head -c 130 /dev/zero | tr '\\0' '\\1'; echo; done; exec sleep 60"
    big = srv.tool("execute", {"command": cmd, "yield_after": 1, "max_reply_bytes": 1024}, timeout=30)
    small = srv.tool("execute", {"command": "echo fits; exec sleep 60", "yield_after": 1,
                                 "max_reply_bytes": 1024}, timeout=30)
    try:
        assert big.get("yielded") is True and "recent" not in big, big
        assert small.get("recent") == {"stdout": "fits\n"}, small
    finally:
        srv.cleanup(big["job_id"], small["job_id"])


# ==========================================================================
# Pollers: a process waiting on other descriptors is not waiting for input
# ==========================================================================

# Each waits about 3 s on descriptors other than stdin, then says done; stdin
# stays the job's open pipe all along.
POLLERS = {
    "poll-another-pipe": "python3 -c 'import select,os; r,w=os.pipe(); p=select.poll(); p.register(r); "
                         "p.poll(3000); print(\"done\")'",
    "select-listening-socket": "python3 -c 'import select,socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); "
                               "s.listen(); select.select([s],[],[],3); print(\"done\")'",
    "epoll-another-pipe": "python3 -c 'import select,os; r,w=os.pipe(); e=select.epoll(); e.register(r); "
                          "e.poll(3); print(\"done\")'",
    "http-server": "timeout 3 python3 -m http.server 0 --bind 127.0.0.1 >/dev/null 2>&1; echo done",
}

# A server that answers after 3 s, and curl waiting for it (in poll on its
# socket): the port comes back through a fifo.
SLOW_CURL = ("d=$(mktemp -d); mkfifo $d/port; "
             "python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); "
             "print(s.getsockname()[1], flush=True); c,_=s.accept(); time.sleep(3); "
             "c.sendall(b\"HTTP/1.0 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\ndone\\n\"); c.close()' >$d/port & "
             "read port <$d/port; curl -s http://127.0.0.1:$port/; wait; rm -r $d")


@pytest.fixture(scope="module")
def agent_srv(mcp_bin):
    """A server under the agent profile, where the first look decides."""
    s = RawServer(env={"MCP_EXEC_PROFILE": "agent"})
    yield s
    close_module_server(s)


def need(s, *tools):
    for tool in tools:
        if s.run("command -v %s >/dev/null" % tool)["exit_code"] != 0:
            pytest.skip("no %s in the server's world" % tool)


def assert_ran_through(s, command):
    """A blocking execute of command runs to its end, about 3 s, without
    yielding or a report of input wanted."""
    r, took = timed(s.tool, "execute", {"command": command, "yield_after": 60}, timeout=70)
    try:
        assert "waiting_for_input" not in r and "yielded" not in r, \
            "a process waiting on other descriptors was taken to wait for input after %.1fs: %r" % (took, r)
        assert r["state"] == "success" and r["stdout"]["data"].endswith("done\n"), r
        assert took >= 2.8, took
    finally:
        if r.get("state") == "running":
            s.cleanup(r["job_id"])


@pytest.mark.parametrize("profile", ["compat", "agent"])
@pytest.mark.parametrize("poller", sorted(POLLERS))
def test_a_poller_on_other_descriptors_does_not_yield_execute(request, poller, profile):
    # poll or select on a pipe or socket of its own, with stdin a pipe, made
    # execute yield after a second with waiting_for_input.
    s = request.getfixturevalue("srv" if profile == "compat" else "agent_srv")
    need(s, "python3", *(["timeout"] if poller == "http-server" else []))
    assert_ran_through(s, POLLERS[poller])


@pytest.mark.parametrize("profile", ["compat", "agent"])
def test_curl_waiting_for_a_slow_server_does_not_yield_execute(request, profile):
    s = request.getfixturevalue("srv" if profile == "compat" else "agent_srv")
    need(s, "python3", "curl", "mkfifo")
    assert_ran_through(s, SLOW_CURL)


def test_a_poller_is_never_reported_by_status(agent_srv):
    need(agent_srv, "python3")
    cmd = "python3 -c 'import select,os; r,w=os.pipe(); p=select.poll(); p.register(r); p.poll()'"
    jid = agent_srv.job(cmd)
    try:
        # it polls from its start: looks over 2.5 s, past the 1 s any report
        # needs, never see it waiting for input
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            st = without_procs(agent_srv.status(jid))
            assert st == {"job_id": jid, "state": "running"}, st
            time.sleep(0.25)
        entries = [j for j in agent_srv.tool("list_jobs")["jobs"] if j["job_id"] == jid]
        assert entries == [{"job_id": jid, "state": "running"}], entries
    finally:
        agent_srv.cleanup(jid)


# Each waits on a set that holds stdin (after a pipe of its own), then echoes
# the line it reads.
STDIN_POLLERS = {
    "select": "python3 -c 'import select,sys,os; r,w=os.pipe(); select.select([r,sys.stdin],[],[]); "
              "print(\"got\", sys.stdin.readline().strip())'",
    "poll": "python3 -c 'import select,sys,os; r,w=os.pipe(); p=select.poll(); p.register(r); "
            "p.register(sys.stdin); p.poll(); print(\"got\", sys.stdin.readline().strip())'",
    "select-dup": "exec 3<&0 0</dev/null; python3 -c 'import select,os; r,w=os.pipe(); select.select([r,3],[],[]); "
                  "print(\"got\", os.read(3, 100).decode().strip())'",
}


@pytest.mark.parametrize("poller", sorted(STDIN_POLLERS))
def test_a_poller_on_stdin_yields_execute_waiting_for_input(srv, poller):
    need(srv, "python3")
    r, took = timed(srv.tool, "execute", {"command": STDIN_POLLERS[poller], "yield_after": 60}, timeout=70)
    try:
        assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
        assert took <= 1 + LATE, took
        srv.tool("input", {"job_id": r["job_id"], "data": "line\n"})
        done = srv.collect(r["job_id"], timeout=10 + SLACK)
        assert done["state"] == "success" and done["stdout"]["data"] == "got line\n", done
    finally:
        srv.cleanup(r["job_id"])


@pytest.mark.parametrize("repl", ["python3", "bash --norc -i"])
def test_a_repl_on_a_terminal_waits_for_input(srv, repl):
    # Python's REPL and bash's readline wait for a key in pselect6 on the
    # terminal, not in read: that set holds the terminal.
    need(srv, repl.split()[0])
    r, took = timed(srv.tool, "execute", {"command": repl, "tty": True, "yield_after": 30}, timeout=40)
    try:
        assert r.get("yielded") is True and r.get("waiting_for_input") is True, r
        assert took <= 2 + LATE, took
    finally:
        srv.cleanup(r["job_id"])


# ==========================================================================
# input's answer: a REPL that reads again waits for input, one that exits not
# ==========================================================================

# Terminal REPLs a test starts, each ended by exit().
REPL_EXCHANGES = 50


def tty_repl(s, command="python3"):
    """A REPL started on a terminal, at its first prompt."""
    jid = s.job(command, tty=True)
    s.poll_output(jid, lambda d: ">>> " in d.rsplit("\n", 1)[-1], timeout=20 + SLACK)
    return jid


def test_input_that_exits_a_terminal_repl_never_says_waiting_for_input(agent_srv):
    # input of exit() to python on a terminal answered waiting_for_input:
    # true while python exited, 1 in 28 exchanges: a look after the write
    # found python in the wait it had slept in as the bytes came, not yet
    # woken for them, and took it for a new read. Half the REPLs are given
    # exit() at their first prompt, half after an exchange.
    need(agent_srv, "python3")
    s = agent_srv
    wrong = []
    for i in range(REPL_EXCHANGES):
        jid = tty_repl(s)
        try:
            if i % 2:
                r = s.tool("input", {"job_id": jid, "data": "%d+1\n" % i}, timeout=30 + SLACK)
                assert r["state"] == "running" and r.get("waiting_for_input") is True, short(r)
            r = s.tool("input", {"job_id": jid, "data": "exit()\n"}, timeout=30 + SLACK)
            if r.get("waiting_for_input") is not None:
                wrong.append((i, short(r)))
            if r["state"] == "running":  # it answered quiet, its end to come
                r = s.collect(jid, timeout=20 + SLACK)
            assert r["state"] == "success" and r["exit_code"] == 0, short(r)
        finally:
            s.cleanup(jid)
    assert not wrong, "%d of %d exit() answers said waiting_for_input: %s" % (len(wrong), REPL_EXCHANGES, wrong)


def test_input_to_a_terminal_repl_that_reads_again_says_waiting_for_input(agent_srv):
    # The control: python back at its prompt after an expression has read
    # again since the write, and is waiting for input.
    need(agent_srv, "python3")
    s = agent_srv
    jid = tty_repl(s)
    try:
        for i in range(1, 11):
            r = s.tool("input", {"job_id": jid, "data": "%d*7\n" % i, "yield_after": 30}, timeout=40 + SLACK)
            assert r["state"] == "running" and r.get("waiting_for_input") is True, short(r)
            assert str(i * 7) in r.get("recent", {}).get("stdout", "").splitlines(), short(r)
    finally:
        s.cleanup(jid)
