"""Acceptance tests of wire 1.4's "a job is its tree" and "Ports", from the page alone.

Black box: every server is the test's own, every job that matters carries a
fresh MCPX_TOKEN in its environment, and what is alive is read from the host's
/proc at the moment a reply arrives (a pid a server reports is mapped through
/proc/PID/status's NSpid, so the same checks hold when the server is PID 1 of
a pid namespace of its own).  What is checked:

  lingering   a delivered job whose tree still runs (a setsid daemon, a double
              fork, nohup) says so in its result, stays reachable by status,
              wait, output, list_jobs and kill until its tree is empty, counts
              toward MCP_EXEC_MAX_JOBS, keeps its time_limit, and dies with the
              session; a tree that empties by itself stops lingering (one
              "emptied" event)
  survivors   exact: only live processes, each with the name it has, never a
              process caught between fork and exec, never a dying one; a kill
              that ended the tree names none
  ports       running and lingering entries carry `listening` (IPv4 and IPv6
              forms, sorted, absent when none); `until: {"listening": ...}`
              returns when the port opens, whatever the program prints or
              buffers, and also after the shell that started it has exited
  compat      outside the agent profile nothing of this appears, and a delivered
              id is forgotten as in 1.0
  terminals   a long REPL exchange on a terminal ending in exit() is not reported
              as waiting for input

How the page is read where it leaves room (repeated beside the tests):

- list_jobs' `jobs` keeps its 1.0 meaning (results not yet handed out): a
  lingering job's result was handed out, so it is not in `jobs`; it is in
  `lingering` only.
- "the kill shape": `job_id`, `terminated` and `signal_sent` are always there;
  `escalated`, `survivors` and `detail` may be left out when they say nothing
  (`escalated` false, no survivor); `result` is never there.
- After a lingering tree is gone (emptied or killed), its id is forgotten:
  `status` answers an `unknown job_id` error, or (if an implementation keeps
  it a little longer) an entry that no longer says `lingering`.
- A dash `sh -c 'sleep 1777'` forks rather than execs, so a setsid daemon's
  tree is sh and sleep: both are legitimate survivors.  `setsid`/`nohup`
  (programs that exec) never are.
- `until: {"listening": P}` on a job whose shell has already exited: what
  comes back when the port opens may be the job's result (delivered, and
  lingering) or a running entry; either way it carries `matched`.
- `"listening": [..]` is sorted; the tests only compare lists whose string
  order and numeric order agree (equal addresses, five-digit ports).
- The job events the agent profile turns on (stdio, legacy era) are "where job
  events are on": a tree that empties sends exactly one "emptied".
- On process groups the server makes a best effort: the lingering tests run
  on both trees (the daemons here are reachable on process groups through the
  server as subreaper); what only a cgroup can promise (a tree that never
  settles, the exact `procs` of a tree outside its group) is checked on cgroup
  trees only.
- A refusal under MCP_EXEC_MAX_JOBS names the lingering job's id (1.1 has it
  name the running ids; a lingering id is what the model must kill).
- A lingering job's time_limit counts from the job's start, not from delivery.
- With more than 20 listening sockets, which 20 are shown is not assumed; only
  that there are 20 of the job's own, sorted.
- The REPL test also holds every exchange to 1.3's `input`: the answer's
  `recent` holds the printed value.
"""

import os
import re
import shutil
import socket
import tempfile
import time
import uuid

import pytest

from tests.helpers import (EXIT_WITHIN, SLACK, TARGET, needs_host_files, read_file, server_comms, short,
                           timed, wait_until)

AGENT = {"MCP_EXEC_PROFILE": "agent"}
# How long anything this file waits for may take on a loaded 2-core VM.
WITHIN = 15.0 + SLACK
# "At once": a call that must not wait for its timeout comes back within this.
PROMPTLY = 5.0 + SLACK

SLEEP = "sleep 1777"

# Daemons that outlive the job's shell, each printing "started"; all their
# output goes to /dev/null, so the job's pipes close with its shell.
DAEMONS = {
    "setsid": "setsid sh -c '%s' >/dev/null 2>&1 & echo started" % SLEEP,
    "double-fork": "(sh -c '%s &' </dev/null >/dev/null 2>&1) ; echo started" % SLEEP,
    "nohup": "nohup %s </dev/null >/dev/null 2>&1 & echo started" % SLEEP,
}
# Names a survivor of each daemon may have once the tree has settled.
SETTLED_NAMES = {"setsid": {"sh", "sleep"}, "double-fork": {"sleep"}, "nohup": {"sleep"}}

TREE = re.compile(r'"?tree"?\s*[:=]\s*"?(cgroup|process-group)\b')
TREES = {"auto": {}, "pgroup": {"MCP_EXEC_CGROUP": "off"}}


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------

def start(make_server, tree="auto", profile=True, **extra):
    """A fresh server: the agent profile (unless profile=False), the tree
    `auto` (the target's own choice) or `pgroup` (cgroups off), extra settings."""
    env = dict(AGENT) if profile else {}
    env.update(TREES[tree])
    env.update({k: str(v) for k, v in extra.items()})
    s = make_server(env=env)
    s.tree = tree_in_force(s)
    if tree == "pgroup":
        assert s.tree == "process-group", "MCP_EXEC_CGROUP=off must run on process groups"
    return s


def tree_in_force(s):
    m = TREE.search(s.init_result.get("instructions") or "")
    return m.group(1) if m else None


def python3():
    """A python3 that starts fast (not a version manager's shim), where the server runs."""
    if TARGET == "container":
        pytest.skip("no python3 where the server runs (the default image has none)")
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p):
            return p
    pytest.skip("needs python3 in /usr/bin or /usr/local/bin")


def same_network():
    """Ports the server's jobs open are the test's to connect to (not in a container)."""
    if TARGET == "container":
        pytest.skip("the container has a network namespace of its own")


# --------------------------------------------------------------------------
# The job's processes, from the host, in the server's pid numbering
# --------------------------------------------------------------------------

def token_env(token, **extra):
    env = {"MCPX_TOKEN": token}
    env.update(extra)
    return env


def job_procs(token):
    """{pid as the server numbers it: (comm, state letter)} of every process
    carrying MCPX_TOKEN=token (server and launchers left out), zombies too."""
    needle = ("MCPX_TOKEN=" + token).encode()
    skip = server_comms()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = read_file("/proc/%s/environ" % entry)
        if not env or needle not in env.split(b"\0"):
            continue
        stat = read_file("/proc/%s/stat" % entry)
        status = read_file("/proc/%s/status" % entry, "r")
        if stat is None or status is None:
            continue
        stat = stat.decode("utf-8", "replace")
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2:].split()[0]
        if comm in skip:
            continue
        m = re.search(r"^NSpid:\s*(.*)$", status, re.M)
        pid = int(m.group(1).split()[-1]) if m else int(entry)
        found[pid] = (comm, state)
    return found


def alive(token):
    """{pid: comm} of the token's processes that are alive (not zombies)."""
    return {p: c for p, (c, st) in job_procs(token).items() if st not in ("Z", "X")}


def await_gone(token, timeout=WITHIN):
    """Wait until no process of the token exists at all; fail naming what is left."""
    wait_until(lambda: not job_procs(token), timeout,
               lambda: "the job's processes going away (left: %r)" % job_procs(token))


def kill_leftovers(token):
    """Kill from the host whatever the token left (so a failure cannot disturb later tests)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            env = read_file("/proc/%s/environ" % entry)
            if env and ("MCPX_TOKEN=" + token).encode() in env.split(b"\0"):
                try:
                    os.kill(int(entry), 9)
                except OSError:
                    pass


@pytest.fixture
def tokens():
    """Factory of fresh tokens; whatever carries one is killed after the test."""
    made = []

    def make():
        t = uuid.uuid4().hex
        made.append(t)
        return t

    yield make
    for t in made:
        kill_leftovers(t)


def check_survivors(survivors, token, names, what):
    """survivors is exact: a list of live processes, each named as it is
    now, and every live process of the token is in it."""
    now = alive(token)  # read first: right after the reply
    assert isinstance(survivors, list) and survivors, "%s: no survivors list: %r" % (what, survivors)
    for v in survivors:
        assert isinstance(v, dict) and isinstance(v.get("pid"), int) and isinstance(v.get("name"), str), \
            "%s: a survivor must be {pid, name, state}: %r" % (what, v)
        assert v["pid"] in now, "%s: survivor %r is not alive at reply time (live: %r)" % (what, v, now)
        assert v["name"] == now[v["pid"]], "%s: survivor %r is named %r now" % (what, v, now[v["pid"]])
        assert v["name"] in names, "%s: %r is not a settled process of the tree (allowed %r)" % (what, v, names)
    got = [v["pid"] for v in survivors]
    assert len(got) == len(set(got)), "%s: a pid named twice: %r" % (what, survivors)
    assert set(got) == set(now), "%s: survivors %r, but the tree is %r" % (what, survivors, now)
    assert "sleep" in [v["name"] for v in survivors], what


def lingering_of(lj):
    """list_jobs' lingering entries by id; {} when the key is absent (it must
    not be an empty list)."""
    if "lingering" not in lj:
        return {}
    assert isinstance(lj["lingering"], list) and lj["lingering"], \
        "`lingering` must be absent when there is none: %r" % lj
    return {e["job_id"]: e for e in lj["lingering"]}


def no_longer_lingering(s, jid):
    """jid is not lingering any more: list_jobs has no lingering key (no other
    lingering job in these tests), and status says unknown or not lingering."""
    lj = s.tool("list_jobs")
    if "lingering" in lj:
        return False
    res = s.tool_raw("status", {"job_id": jid})
    if res.get("isError"):
        assert "unknown job_id" in res["content"][0]["text"], res
        return True
    return s.decode(res).get("lingering") is not True


def prose(obj):
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in prose(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in prose(v)]
    return []


def run_daemon(s, kind, token, **kw):
    """A blocking execute of the daemon `kind`: (its reply, decoded)."""
    res = s.tool_raw("execute", dict({"command": DAEMONS[kind], "env": token_env(token)}, **kw),
                     timeout=WITHIN + 60)
    return res, s.decode(res)


def lingering_daemon(s, kind, token, **kw):
    """Start a daemon and check the lingering result; return its job id."""
    _, r = run_daemon(s, kind, token, **kw)
    assert r.get("state") == "success" and r.get("lingering") is True, \
        "a result delivered with %s's sleep alive must say lingering: %s" % (kind, short(r))
    return r["job_id"]


def kill_answer(s, jid, signal="TERM", timeout=5):
    res = s.tool_raw("kill", {"job_id": jid, "signal": signal, "timeout": timeout}, timeout=timeout * 2 + WITHIN)
    return s.decode(res)


def check_kill_shape(k, jid):
    """k is 1.0's kill shape for a lingering job: no result, and
    terminated exactly when no survivor is named."""
    assert k.get("job_id") == jid, k
    assert "result" not in k, "a lingering job's result was delivered already: %s" % short(k)
    assert isinstance(k.get("terminated"), bool), k
    assert isinstance(k.get("signal_sent"), int) and k["signal_sent"] > 0, k
    if "escalated" in k:
        assert isinstance(k["escalated"], bool), k
    if "detail" in k:
        assert isinstance(k["detail"], str) and k["detail"], k
    survivors = k.get("survivors") or []
    assert isinstance(survivors, list), k
    assert k["terminated"] is (not survivors), "terminated must be true exactly when no survivor is named: %r" % k
    return survivors


# --------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------

def free_port():
    """A port nothing listens on now, five digits (so string and number order agree)."""
    for _ in range(100):
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            p = so.getsockname()[1]
        if p >= 10000:
            return p
    raise AssertionError("no five-digit free port")


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def http_server(py, port, bind="127.0.0.1", unbuffered=False):
    return "%s %s-m http.server %s --bind %s" % (py, "-u " if unbuffered else "", port, bind)


SERVING = re.compile(r"Serving HTTP on \S+ port (\d+)")


def served_port(s, jid, count=1):
    """The ports an unbuffered http.server job printed (count of them)."""
    out = s.poll_output(jid, lambda d: len(SERVING.findall(d)) >= count, timeout=WITHIN)
    return [int(p) for p in SERVING.findall(out["stdout"]["data"])]


def wait_for_port_in_shell(port):
    """Shell that waits (bounded) until something listens on 127.0.0.1:port (read from /proc/net/tcp)."""
    return ("i=0; until grep -q ':%04X 00000000:0000 0A' /proc/net/tcp || [ $i -ge 300 ]; "
            "do sleep 0.05; i=$((i+1)); done" % port)


def running_entry(s, jid, timeout=0.5):
    (entry,) = s.tool("wait", {"job_ids": [jid], "timeout": timeout}, timeout=timeout + WITHIN)
    assert entry["job_id"] == jid and entry["state"] == "running", short(entry)
    return entry


def jobs_entry(s, jid):
    found = [e for e in s.tool("list_jobs")["jobs"] if e["job_id"] == jid]
    assert len(found) == 1, "job %s not listed once in jobs" % jid
    return found[0]


# ==========================================================================
# Lingering: the delivered result, status, wait, output, list_jobs, kill
# ==========================================================================

@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("kind", sorted(DAEMONS))
def test_daemon_left_running_makes_the_delivered_job_linger(make_server, tokens, kind, tree):
    s = start(make_server, tree)
    token = tokens()
    res, r = run_daemon(s, kind, token)
    what = "%s daemon (%s tree) result" % (kind, s.tree)
    # survivors first, as close to the reply as the test can be
    check_survivors(r.get("survivors"), token, SETTLED_NAMES[kind], what)
    assert r.get("state") == "success" and r.get("exit_code") == 0, short(r)
    assert r.get("lingering") is True, "%s: lingering must be true: %s" % (what, short(r))
    if "survivors_count" in r:
        assert r["survivors_count"] == len(r["survivors"]), short(r)
    assert "listening" not in r, "nothing listens: %s" % short(r)
    jid = r["job_id"]
    texts = prose(r) + [c.get("text", "") for c in res["content"][1:]]
    said = [t for t in texts if "kill" in t and re.search(r"\b%s\b" % re.escape(jid), t) and len(t.split()) >= 4]
    assert said, "%s: the text must say the processes keep running and that kill with job_id %s ends them: %s" % (
        what, jid, short(res))
    try:
        assert jid in lingering_of(s.tool("list_jobs")), "a lingering id must be listed"
    finally:
        s.cleanup(jid)


@pytest.mark.parametrize("tree", sorted(TREES))
def test_status_of_a_lingering_job_answers_its_delivered_state_and_tree(make_server, tokens, tree):
    s = start(make_server, tree)
    token = tokens()
    jid = lingering_daemon(s, "setsid", token)
    st = s.status(jid)
    check_survivors(st.get("survivors"), token, SETTLED_NAMES["setsid"], "status of the lingering job")
    assert st["job_id"] == jid and st.get("state") == "success" and st.get("exit_code") == 0, short(st)
    assert st.get("lingering") is True, short(st)
    assert isinstance(st.get("procs"), int) and not isinstance(st["procs"], bool) and st["procs"] >= 1, short(st)
    if s.tree == "cgroup":
        assert st["procs"] == len(alive(token)), "procs %r, the tree is %r" % (st, alive(token))
    assert "stdout" not in st and "listening" not in st, short(st)
    s.cleanup(jid)


def test_wait_naming_a_lingering_job_returns_its_entry_at_once(make_server, tokens):
    s = start(make_server)
    token = tokens()
    jid = lingering_daemon(s, "double-fork", token)
    res, took = timed(s.tool_raw, "wait", {"job_ids": [jid], "timeout": 30}, timeout=60)
    assert not res.get("isError"), "wait naming a lingering job must not fail: %s" % short(res)
    (e,) = s.decode(res)
    assert took <= PROMPTLY, "wait held a lingering job for %.1fs" % took
    assert e["job_id"] == jid and e.get("state") == "success" and e.get("lingering") is True, short(e)
    assert "stdout" not in e and "stderr" not in e, "the entry, not the result again: %s" % short(e)
    assert isinstance(e.get("procs"), int), short(e)
    check_survivors(e.get("survivors"), token, SETTLED_NAMES["double-fork"], "wait's lingering entry")
    # asked again, the same entry: the id did not become delivered-and-forgotten
    (e2,) = s.tool("wait", {"job_ids": [jid], "timeout": 0})
    assert e2.get("lingering") is True, short(e2)
    s.cleanup(jid)


def test_output_of_a_lingering_job_reads_its_streams(make_server, tokens):
    s = start(make_server)
    token = tokens()
    jid = lingering_daemon(s, "nohup", token)
    o = s.tool("output", {"job_id": jid, "stdout": "all", "stderr": "all"})
    assert o["stdout"]["data"] == "started\n" and o["stdout"]["total_bytes"] == 8, short(o)
    g = s.tool("output", {"job_id": jid, "stdout": {"grep": "^start"}})
    assert "started" in str(g["stdout"]), short(g)
    s.cleanup(jid)


def test_list_jobs_lists_lingering_jobs_oldest_first_with_counts(make_server, tokens):
    s = start(make_server)
    t1, t2 = tokens(), tokens()
    j1 = lingering_daemon(s, "setsid", t1)
    j2 = lingering_daemon(s, "nohup", t2)
    running = s.job("exec sleep 300")
    try:
        lj = s.tool("list_jobs")
        ids = [e["job_id"] for e in lj["jobs"]]
        # `jobs` stays what wait can still deliver: the running job, not the delivered ones
        assert running in ids and j1 not in ids and j2 not in ids, short(lj)
        ling = lj.get("lingering")
        assert isinstance(ling, list) and [e["job_id"] for e in ling] == [j1, j2], \
            "lingering must list both, oldest first: %s" % short(lj)
        for e, t in zip(ling, (t1, t2)):
            assert set(e) <= {"job_id", "procs", "survivors", "listening"}, short(e)
            for key in ("procs", "survivors"):
                assert isinstance(e.get(key), int) and not isinstance(e[key], bool), \
                    "%s must be an integer: %r" % (key, e)
            assert e["survivors"] == len(alive(t)), "%r, tree %r" % (e, alive(t))
            assert e["procs"] >= e["survivors"] >= 1, e
            assert "listening" not in e, e
    finally:
        s.cleanup(running, j1, j2)


@pytest.mark.parametrize("tree", sorted(TREES))
def test_kill_of_a_lingering_job_ends_its_tree_in_the_kill_shape(make_server, tokens, tree):
    s = start(make_server, tree)
    token = tokens()
    jid = lingering_daemon(s, "setsid", token)
    k = kill_answer(s, jid, "TERM", timeout=5)
    left = alive(token)
    assert check_kill_shape(k, jid) == [], "a TERM-able tree must die: %s" % short(k)
    assert k["terminated"] is True, short(k)
    assert not left, "kill answered terminated with %r alive" % left
    await_gone(token)
    assert "lingering" not in s.tool("list_jobs"), "the killed job is still lingering"
    res = s.tool_raw("status", {"job_id": jid})
    if res.get("isError"):
        assert "unknown job_id" in res["content"][0]["text"], res
    else:
        assert s.decode(res).get("lingering") is not True, short(res)


def test_kill_of_a_lingering_tree_that_ignores_term_names_what_survived(make_server, tokens):
    s = start(make_server)
    token = tokens()
    r = s.run("setsid sh -c 'trap \"\" TERM; exec %s' </dev/null >/dev/null 2>&1 & echo started" % SLEEP,
              env=token_env(token), timeout=WITHIN + 60)
    assert r.get("lingering") is True, short(r)
    jid = r["job_id"]
    k = kill_answer(s, jid, "TERM", timeout=1)
    survivors = check_kill_shape(k, jid)
    assert k["terminated"] is False and survivors, "the sleep ignores TERM: %s" % short(k)
    check_survivors(survivors, token, {"sleep"}, "kill's survivors")
    assert jid in lingering_of(s.tool("list_jobs")), "a tree that survived its kill still lingers"
    k = kill_answer(s, jid, "KILL", timeout=5)
    assert check_kill_shape(k, jid) == [] and k["terminated"] is True, short(k)
    assert not alive(token), alive(token)
    wait_until(lambda: no_longer_lingering(s, jid), WITHIN, "the killed job leaving lingering")


def test_a_tree_that_empties_by_itself_stops_lingering_with_one_event(make_server, tokens):
    s = start(make_server)
    token = tokens()
    r = s.run("setsid sh -c 'sleep 2' >/dev/null 2>&1 & echo started", env=token_env(token), timeout=WITHIN + 60)
    jid = r["job_id"]
    assert r.get("lingering") is True, "the sleep 2 is alive at delivery: %s" % short(r)
    assert jid in lingering_of(s.tool("list_jobs"))
    wait_until(lambda: no_longer_lingering(s, jid), 2 + WITHIN, "the emptied tree leaving lingering")
    await_gone(token)

    def emptied(m):
        p = m.get("params") or {}
        return m.get("method") == "notifications/job" and p.get("job_id") == jid and p.get("event") == "emptied"
    s.wait_notifications(emptied, 1, timeout=WITHIN)
    s.roundtrip()
    found = [m for _, m in s.notifications if emptied(m)]
    assert len(found) == 1, "exactly one emptied event: %r" % found


def test_lingering_jobs_count_toward_max_jobs(make_server, tokens):
    s = start(make_server, MCP_EXEC_MAX_JOBS=1)
    token = tokens()
    jid = lingering_daemon(s, "setsid", token)
    text = s.tool_err("execute", {"command": "echo second"})
    assert re.search(r"\b%s\b" % re.escape(jid), text), "the refusal must name the lingering job: %s" % text
    s.tool_err("execute", {"command": "echo third", "nowait": True})
    k = kill_answer(s, jid, "KILL")
    assert k.get("terminated") is True, short(k)
    wait_until(lambda: no_longer_lingering(s, jid), WITHIN, "the killed job leaving lingering")
    assert s.run("echo free")["stdout"]["data"] == "free\n"


def test_a_lingering_job_keeps_its_time_limit(make_server, tokens):
    s = start(make_server, MCP_EXEC_KILL_GRACE=1)
    token = tokens()
    limit = 4.0
    t0 = time.monotonic()
    jid = lingering_daemon(s, "setsid", token, time_limit=limit)
    assert alive(token), "the daemon must be alive at delivery"

    def gone():
        return not alive(token)
    wait_until(gone, limit + WITHIN, "the lingering daemon ending at its time_limit of %ss" % limit, interval=0.05)
    took = time.monotonic() - t0
    assert took >= limit - 0.5, "the daemon died after %.1fs, before its %ss time limit" % (took, limit)
    wait_until(lambda: no_longer_lingering(s, jid), WITHIN, "the timed-out job leaving lingering")


@pytest.mark.parametrize("tree", sorted(TREES))
def test_session_end_kills_lingering_trees(make_server, tokens, tree):
    s = start(make_server, tree)
    ts = {kind: tokens() for kind in DAEMONS}
    for kind, t in sorted(ts.items()):
        lingering_daemon(s, kind, t)
    assert all(alive(t) for t in ts.values())
    s.close_stdin()
    assert s.wait_exit(EXIT_WITHIN + WITHIN) == 0
    for kind, t in sorted(ts.items()):
        wait_until(lambda: not alive(t), WITHIN,
                   lambda: "the %s daemon dying with the session (left %r)" % (kind, alive(t)))


def test_a_never_settling_lingering_tree_is_killed_whole(make_server, tokens):
    """A fork-hopper (forks and exits every 20 ms, ignores TERM) left behind
    by the shell: only a cgroup holds it; the lingering id's KILL ends it."""
    s = start(make_server)
    if s.tree != "cgroup":
        pytest.skip("a process that keeps changing its pid outside the job's group is held only by a cgroup "
                    "(tree here: %s)" % s.tree)
    token = tokens()
    hopper = ("perl -MPOSIX -e 'POSIX::setsid(); $SIG{TERM} = q(IGNORE); "
              "while (1) { my $p = fork; exit 0 if $p; select(undef, undef, undef, 0.02) }'")
    r = s.run("(%s </dev/null >/dev/null 2>&1 &); echo started" % hopper, env=token_env(token),
              timeout=WITHIN + 60)
    assert r.get("lingering") is True, short(r)
    jid = r["job_id"]
    assert jid in lingering_of(s.tool("list_jobs"))
    k = kill_answer(s, jid, "KILL")
    assert check_kill_shape(k, jid) == [] and k["terminated"] is True, short(k)
    left = alive(token)
    assert not left, "kill said terminated while %r lived" % left


# ==========================================================================
# Killing a dev server: no dying process is named
# ==========================================================================

def test_twenty_kills_of_a_dev_server_name_no_dying_process(make_server, tokens):
    py = python3()
    s = start(make_server)
    for i in range(20):
        token = tokens()
        jid = s.job(http_server(py, 0, unbuffered=True) + " 2>&1", env=token_env(token))
        served_port(s, jid)
        k = kill_answer(s, jid, "TERM", timeout=5)
        left = alive(token)
        assert k.get("terminated") is True, "kill %d: %s" % (i, short(k))
        assert not k.get("survivors"), "kill %d named a dying process: %s" % (i, short(k))
        assert not (k.get("result") or {}).get("survivors"), "kill %d's result named one: %s" % (i, short(k))
        assert not left, "kill %d answered terminated with %r alive" % (i, left)


# ==========================================================================
# Ports: listening on running and lingering entries
# ==========================================================================

def test_a_running_dev_server_is_listed_with_its_port(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    token = tokens()
    jid = s.job(http_server(py, 0, unbuffered=True), env=token_env(token))
    try:
        (port,) = served_port(s, jid)
        want = ["127.0.0.1:%d" % port]
        assert s.status(jid).get("listening") == want, short(s.status(jid))
        assert running_entry(s, jid).get("listening") == want
        assert jobs_entry(s, jid).get("listening") == want
    finally:
        s.cleanup(jid)


def test_an_ipv6_wildcard_bind_is_written_in_brackets(make_server, tokens):
    py = python3()
    same_network()
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        with socket.socket(socket.AF_INET6) as so:
            so.bind(("::", 0))
    except OSError as e:
        pytest.skip("cannot bind [::]: %s" % e)
    s = start(make_server)
    jid = s.job(http_server(py, 0, bind="::", unbuffered=True), env=token_env(tokens()))
    try:
        (port,) = served_port(s, jid)
        assert s.status(jid).get("listening") == ["[::]:%d" % port], short(s.status(jid))
    finally:
        s.cleanup(jid)


def test_two_ports_of_one_job_are_both_listed_sorted(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    ports = {free_port()}
    while len(ports) < 2:
        ports.add(free_port())
    p1, p2 = sorted(ports)
    jid = s.job("%s & %s & wait" % (http_server(py, p2, unbuffered=True), http_server(py, p1, unbuffered=True)),
                env=token_env(tokens()))
    try:
        served_port(s, jid, 2)
        st = s.status(jid)
        assert st.get("listening") == ["127.0.0.1:%d" % p1, "127.0.0.1:%d" % p2], short(st)
    finally:
        s.cleanup(jid)


def test_an_ipv4_mapped_bind_is_written_as_ipv4(make_server, tokens):
    py = python3()
    same_network()
    try:
        with socket.socket(socket.AF_INET6) as so:
            so.bind(("::ffff:127.0.0.1", 0))
    except OSError as e:
        pytest.skip("cannot bind an IPv4-mapped IPv6 address: %s" % e)
    s = start(make_server)
    jid = s.job("exec %s -u -c 'import socket, time\ns = socket.socket(socket.AF_INET6)\n"
                "s.bind((\"::ffff:127.0.0.1\", 0)); s.listen(1)\nprint(\"port\", s.getsockname()[1])\n"
                "time.sleep(300)'" % py, env=token_env(tokens()))
    try:
        out = s.poll_output(jid, lambda d: re.match(r"port \d+\n$", d), timeout=WITHIN)
        port = int(out["stdout"]["data"].split()[1])
        assert s.status(jid).get("listening") == ["127.0.0.1:%d" % port], short(s.status(jid))
    finally:
        s.cleanup(jid)


def test_listening_lists_at_most_twenty_sorted(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    jid = s.job("exec %s -u -c 'import socket, time\nports = []\nkeep = []\n"
                "for i in range(25):\n so = socket.socket(); so.bind((\"127.0.0.1\", 0)); so.listen(1)\n"
                " keep.append(so); ports.append(so.getsockname()[1])\n"
                "print(\" \".join(map(str, ports)))\ntime.sleep(300)'" % py, env=token_env(tokens()))
    try:
        out = s.poll_output(jid, lambda d: d.endswith("\n"), timeout=WITHIN)
        ports = [int(p) for p in out["stdout"]["data"].split()]
        assert len(ports) == 25
        got = s.status(jid).get("listening")
        assert isinstance(got, list) and len(got) == 20, "at most 20: %s" % short(got)
        # sorted: as strings or by port number (the page does not say which; same address here)
        by_port = sorted(got, key=lambda a: int(a.rsplit(":", 1)[1]))
        assert (got == sorted(got) or got == by_port) and len(set(got)) == 20, got
        mine = {"127.0.0.1:%d" % p for p in ports}
        assert set(got) <= mine, "listed sockets the job does not hold: %r" % (set(got) - mine)
    finally:
        s.cleanup(jid)


def test_listening_is_absent_without_a_listening_socket(make_server, tokens):
    """A job with only an outgoing connection (to the test's own listener)
    listens on nothing: no `listening` key anywhere."""
    py = python3()
    same_network()
    s = start(make_server)
    with socket.socket() as lsn:
        lsn.bind(("127.0.0.1", 0))
        lsn.listen(4)
        port = lsn.getsockname()[1]
        jid = s.job("exec %s -u -c 'import socket, time\ns = socket.create_connection((\"127.0.0.1\", %d))\n"
                    "print(\"connected\")\ntime.sleep(300)'" % (py, port), env=token_env(tokens()))
        try:
            s.poll_output(jid, lambda d: d == "connected\n", timeout=WITHIN)
            conn, _ = lsn.accept()
            conn.close()
            assert "listening" not in s.status(jid), short(s.status(jid))
            assert "listening" not in running_entry(s, jid)
            assert "listening" not in jobs_entry(s, jid)
        finally:
            s.cleanup(jid)
    sleeper = s.job("exec sleep 300")
    assert "listening" not in s.status(sleeper)
    s.cleanup(sleeper)


def test_a_lingering_dev_server_is_listed_with_its_port(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    token = tokens()
    port = free_port()
    want = ["127.0.0.1:%d" % port]
    # the shell ends only once the port is open, so the delivered result can see it
    r = s.run("setsid %s >/dev/null 2>&1 & %s; echo started" % (http_server(py, port), wait_for_port_in_shell(port)),
              env=token_env(token), timeout=WITHIN + 60)
    jid = r["job_id"]
    try:
        assert port_open(port), "the dev server must be up when the shell ends"
        assert r.get("lingering") is True and r.get("listening") == want, short(r)
        st = s.status(jid)
        assert st.get("lingering") is True and st.get("listening") == want, short(st)
        assert lingering_of(s.tool("list_jobs"))[jid].get("listening") == want
        k = kill_answer(s, jid, "TERM")
        assert k.get("terminated") is True and not k.get("survivors"), short(k)
        assert not port_open(port), "the port is still open after the kill"
    finally:
        s.cleanup(jid)


# ==========================================================================
# until: {"listening": ...}
# ==========================================================================

def test_execute_until_listening_returns_when_a_buffered_server_opens_its_port(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    port = free_port()
    r, took = timed(s.tool, "execute", {"command": http_server(py, port), "env": token_env(tokens()),
                                        "until": {"listening": port}, "yield_after": 30}, timeout=60 + WITHIN)
    try:
        assert port_open(port), "returned before the port was open: %s" % short(r)
        assert r.get("state") == "running" and "yielded" not in r, short(r)
        assert r.get("matched") == {"listening": "127.0.0.1:%d" % port}, short(r)
        assert took <= PROMPTLY, "the port opened in well under a second; the call took %.1fs" % took
    finally:
        s.cleanup(r["job_id"])


def test_wait_until_listening_returns_when_a_buffered_server_opens_its_port(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    port = free_port()
    jid = s.job("sleep 0.5; exec " + http_server(py, port), env=token_env(tokens()))
    try:
        (e,), took = timed(s.tool, "wait", {"job_ids": [jid], "timeout": 30, "until": {"listening": port}},
                           timeout=60 + WITHIN)
        assert port_open(port), short(e)
        assert e.get("state") == "running" and e.get("matched") == {"listening": "127.0.0.1:%d" % port}, short(e)
        assert took <= PROMPTLY, took
    finally:
        s.cleanup(jid)


def _npm_project(py, port):
    d = tempfile.mkdtemp(prefix="mcpx-w14-npm-")
    with open(os.path.join(d, "package.json"), "w") as f:
        f.write('{"name": "mcpx-dev", "version": "1.0.0", "private": true, '
                '"scripts": {"dev": "%s"}}\n' % http_server(py, port))
    return d


@pytest.mark.parametrize("via", ["shell", "npm"])
@pytest.mark.parametrize("call", ["execute", "wait"])
def test_until_listening_watches_the_tree_after_the_shell_has_exited(make_server, tokens, via, call):
    """`npm run dev > log 2>&1 &`: the shell is gone at once, the server
    comes up later, prints nothing to the job: until waits for the port."""
    py = python3()
    same_network()
    needs_host_files()
    if via == "npm" and not shutil.which("npm"):
        pytest.skip("no npm here")
    s = start(make_server)
    token = tokens()
    port = free_port()
    proj = _npm_project(py, port)
    log = os.path.join(proj, "log")
    if via == "npm":
        command = "npm run dev > %s 2>&1 &" % log
    else:
        command = "sh -c 'sleep 1; exec %s' > %s 2>&1 &" % (http_server(py, port), log)
    env = token_env(token, NPM_CONFIG_UPDATE_NOTIFIER="false", NPM_CONFIG_FUND="false")
    jid = None
    try:
        if call == "execute":
            r, took = timed(s.tool, "execute", {"command": command, "env": env, "cwd": proj,
                                                "until": {"listening": port}, "yield_after": 40},
                            timeout=60 + WITHIN)
        else:
            jid = s.job(command, env=env, cwd=proj)
            (r,), took = timed(s.tool, "wait", {"job_ids": [jid], "timeout": 40, "until": {"listening": port}},
                               timeout=60 + WITHIN)
        jid = r["job_id"]
        assert port_open(port), "returned before the port opened: %s" % short(r)
        assert r.get("matched") == {"listening": "127.0.0.1:%d" % port}, short(r)
        assert "yielded" not in r and took < 30, (took, short(r))
        if r.get("state") != "running":
            assert r.get("lingering") is True, "delivered with the server alive: %s" % short(r)
        k = kill_answer(s, jid, "TERM")
        assert k.get("terminated") is True and not k.get("survivors"), short(k)
        assert not port_open(port), "the dev server outlived the kill of its job"
    finally:
        if jid is not None:
            s.cleanup(jid)
        shutil.rmtree(proj, ignore_errors=True)


def test_until_listening_true_returns_on_any_port(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    r = s.tool("execute", {"command": http_server(py, 0), "env": token_env(tokens()),
                           "until": {"listening": True}, "yield_after": 30}, timeout=60 + WITHIN)
    try:
        m = (r.get("matched") or {}).get("listening")
        assert isinstance(m, str) and re.fullmatch(r"127\.0\.0\.1:\d+", m), short(r)
        port = int(m.rsplit(":", 1)[1])
        assert port > 0 and port_open(port), short(r)
        assert r.get("state") == "running", short(r)
    finally:
        s.cleanup(r["job_id"])


def test_until_pattern_beside_listening_returns_on_the_line_first(make_server, tokens):
    s = start(make_server)
    port = free_port()
    r, took = timed(s.tool, "execute", {"command": "echo ready; exec sleep 300", "env": token_env(tokens()),
                                        "until": {"pattern": "^ready", "listening": port}, "yield_after": 30},
                    timeout=60 + WITHIN)
    try:
        m = r.get("matched") or {}
        assert m.get("line") == "ready" and m.get("stream") == "stdout" and "listening" not in m, short(r)
        assert took <= PROMPTLY, took
    finally:
        s.cleanup(r["job_id"])


def test_until_listening_beside_a_pattern_returns_on_the_port_first(make_server, tokens):
    py = python3()
    same_network()
    s = start(make_server)
    port = free_port()
    r, took = timed(s.tool, "execute", {"command": http_server(py, port), "env": token_env(tokens()),
                                        "until": {"pattern": "^never printed$", "listening": port},
                                        "yield_after": 30}, timeout=60 + WITHIN)
    try:
        assert r.get("matched") == {"listening": "127.0.0.1:%d" % port}, short(r)
        assert port_open(port) and took <= PROMPTLY, (took, short(r))
    finally:
        s.cleanup(r["job_id"])


def test_until_listening_returns_when_the_tree_empties_without_a_port(make_server, tokens):
    """The backgrounded program ends without ever listening: the call comes
    back when the tree is empty, not at its yield."""
    s = start(make_server)
    token = tokens()
    port = free_port()
    r, took = timed(s.tool, "execute", {"command": "(sleep 1 </dev/null >/dev/null 2>&1 &); echo started",
                                        "env": token_env(token), "until": {"listening": port},
                                        "yield_after": 40}, timeout=60 + WITHIN)
    assert 0.8 <= took < 1 + PROMPTLY, "the tree emptied after 1 s; the call took %.1fs" % took
    assert "matched" not in r and "yielded" not in r, short(r)
    assert r.get("state") == "success", short(r)
    assert not alive(token)


# ==========================================================================
# Outside the agent profile: 1.0
# ==========================================================================

def test_without_the_profile_a_delivered_daemon_job_is_forgotten_as_in_1_0(make_server, tokens):
    s = start(make_server, profile=False)
    token = tokens()
    _, r = run_daemon(s, "setsid", token)
    jid = r["job_id"]
    assert r["state"] == "success" and "lingering" not in r, short(r)
    assert alive(token), "the daemon runs on (nothing ends it before shutdown)"
    lj = s.tool("list_jobs")
    assert lj == {"jobs": []}, lj
    for name, args in (("status", {"job_id": jid}), ("wait", {"job_ids": [jid], "timeout": 0}),
                       ("kill", {"job_id": jid, "signal": "TERM", "timeout": 1}),
                       ("output", {"job_id": jid, "stdout": "all"})):
        text = s.tool_err(name, args)
        assert "unknown job_id" in text, "%s: %s" % (name, text)
    assert alive(token), "a refused kill must not touch the tree"
    s.close_stdin()
    assert s.wait_exit(EXIT_WITHIN + WITHIN) == 0
    wait_until(lambda: not alive(token), WITHIN, lambda: "shutdown ending the tree (left %r)" % alive(token))


# ==========================================================================
# A REPL on a terminal, exited by input
# ==========================================================================

def test_exit_of_a_terminal_repl_after_fifty_exchanges_is_not_waiting_for_input(make_server):
    py = python3()
    s = start(make_server)
    jid = s.job("exec %s -q" % py, tty=True)
    try:
        s.poll_output(jid, lambda d: d.rstrip().endswith(">>>"), timeout=WITHIN)
        for i in range(50):
            want = str(1000000 + i)
            r = s.tool("input", {"job_id": jid, "data": "print(%d+%d)\n" % (100000 + i, 900000)},
                       timeout=WITHIN + 30)
            assert r.get("state") == "running", "exchange %d: %s" % (i, short(r))
            lines = (((r.get("recent") or {}).get("stdout")) or "").replace("\r", "").split("\n")
            assert want in lines, "exchange %d: the answer %s is not in recent: %s" % (i, want, short(r))
        r = s.tool("input", {"job_id": jid, "data": "exit()\n"}, timeout=WITHIN + 30)
        assert r.get("waiting_for_input") is not True, "the REPL exited, it waits for nothing: %s" % short(r)
        if r.get("state") == "running":
            r = s.collect(jid, timeout=WITHIN)
        assert r.get("state") == "success" and r.get("exit_code") == 0, short(r)
    finally:
        s.cleanup(jid)
