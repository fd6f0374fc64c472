"""Acceptance tests of wire 1.3's "a job is its cgroup", written from the page alone.

Black box, from the test's side of the machine: which cgroup v2 directory a job's
processes are in is read from the host's /proc/PID/cgroup (never from a path the
test assumes), and the job's processes are found by an MCPX_TOKEN in their
environment.  What is checked:

  tree       each job gets its own directory under the server's subtree, its first
             process is already in it at its first instruction, the directory is
             gone once the job is forgotten; MCP_EXEC_CGROUP=PATH puts it under PATH
  kill       a setsid child, a double-forked daemon and a fork-hopping process (one
             that forks and exits over and over, so its pid keeps changing) are dead
             when kill answers `terminated: true`; an honest `false` otherwise
  shutdown   EOF and SIGTERM leave none of them alive; a server restarted over the
             subtree of one that was killed empties and removes it
  reports    usage.cgroup (cpu_s of a 0.5 s burner, procs_max), `procs` on status and
             on running wait entries, `survivors` naming what is alive in the cgroup,
             `"tree"` in /healthz, the instructions and --help
  limits     MCP_EXEC_JOB_MEMORY / _PIDS / _CPU: refused at start naming the setting
             where the subtree lacks the controller (decided from what the kernel
             offers), written to the job's cgroup where it has it
  fallback   MCP_EXEC_CGROUP=off, a server run as nobody, and the container target
             without a writable cgroup work on process groups as before and say so

Which servers get a cgroup: on the binary and pid1 targets, a root server where the
cgroup v2 hierarchy is mounted writable; on the container target, the image run with
a private cgroup namespace and a cgroup2 mounted read-write inside it (RW_CGROUP_RECIPE
below).  The default container run (read-only cgroups) and nobody get process groups.
"""

import http.client
import json
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

from tests.helpers import (
    EXIT_WITHIN, IS_ROOT, PODMAN, SLACK, TARGET, assert_forgotten, assert_kill_delivered, await_no_token_processes,
    kill, process_env, read_file, server_argv, server_binary, short, token_processes, wait_until)

AGENT = {"MCP_EXEC_PROFILE": "agent"}
# How long anything this file waits for may take on a loaded 2-core VM.
WITHIN = 15.0 + SLACK

# --------------------------------------------------------------------------
# The host's cgroup v2 hierarchy
# --------------------------------------------------------------------------


def _v2_mount():
    """Where the host's cgroup v2 hierarchy is mounted (its root, as this
    process sees it), or None."""
    for line in (read_file("/proc/self/mountinfo", "r") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and fields[3] == "/":
            return fields[4]
    return None


CG_MOUNT = _v2_mount()


def cgroup_of(pid):
    """The cgroup v2 path of a host pid, relative to CG_MOUNT, or None."""
    for line in (read_file("/proc/%d/cgroup" % pid, "r") or "").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cg_dir(path):
    """The host directory of a cgroup path."""
    return os.path.join(CG_MOUNT, path.lstrip("/"))


def offered_controllers():
    """The controllers the kernel offers where a server launched by this test
    starts (the test's own cgroup): a server can enable no other."""
    own = cgroup_of(os.getpid()) or "/"
    return set((read_file(os.path.join(cg_dir(own), "cgroup.controllers"), "r") or "").split())


def _own_cgroup_writable():
    own = cgroup_of(os.getpid())
    return bool(CG_MOUNT and own is not None and os.access(cg_dir(own), os.W_OK))


# The container recipe that gives the server a cgroup it may write: a private
# cgroup namespace, a cgroup2 mounted read-write inside it (hence CAP_SYS_ADMIN
# for the mount), then the capability dropped from the bounding set before tini
# and the server start, so neither they nor any job keeps it.  On a hybrid host
# (v1 controllers, as here) podman mounts no cgroup2 at all, so a fresh one
# goes at /sys/fs/cgroup/unified; where podman mounted one read-only at
# /sys/fs/cgroup (a pure v2 host) it is remounted read-write instead.
RW_CGROUP_RECIPE = ("if grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then mount -o remount,rw /sys/fs/cgroup; "
                    "else mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none /sys/fs/cgroup/unified; fi && "
                    "exec setpriv --bounding-set -sys_admin -- /sbin/tini -- /usr/local/bin/mcp-exec \"$@\"")


def _argv(kind, env, args=()):
    """The command line of a server of `kind`:
    own      the target's usual launch
    rw       (container) the image with a writable cgroup
    nobody   the target's launch, as user 65534"""
    if kind == "own":
        return server_argv(env, args=args)
    if TARGET == "container":
        argv = [PODMAN, "run", "-i", "--rm", "--name", "mcp-exec-test-" + uuid.uuid4().hex[:12]]
        for key, value in sorted(env.items()):
            argv += ["-e", "%s=%s" % (key, value)]
        if kind == "nobody":
            return argv + ["--user", "65534:65534", os.environ["MCP_EXEC_IMAGE"]] + list(args)
        return argv + ["--cgroupns=private", "--cap-add=SYS_ADMIN", "--entrypoint", "/bin/sh",
                       os.environ["MCP_EXEC_IMAGE"], "-c", RW_CGROUP_RECIPE, "sh"] + list(args)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", server_binary()]
    if TARGET == "pid1":
        return ["unshare", "--pid", "--fork", "--mount-proc"] + nobody + list(args)
    return nobody + list(args)


# The kinds of server that must run jobs in cgroups here, and those that must not.
if TARGET == "container":
    CGROUP_KINDS = ["rw"]
    GROUP_KINDS = ["own"] + (["nobody"] if IS_ROOT else [])
else:
    CGROUP_KINDS = ["own"] if IS_ROOT and _own_cgroup_writable() else []
    GROUP_KINDS = ["nobody"] if IS_ROOT else []


def needs_cgroup_server():
    """Skip where no server kind of this target gets a writable subtree."""
    if not CGROUP_KINDS:
        pytest.skip("no server kind here gets a writable cgroup v2 subtree (cgroup2 mount %r, root %s)"
                    % (CG_MOUNT, IS_ROOT))


def needs_host_view():
    """The tests that read the job's cgroup from the host need its processes in the host's /proc."""
    if CG_MOUNT is None:
        pytest.skip("no cgroup v2 hierarchy mounted on this host")


@pytest.fixture
def server(make_server):
    """Factory: server(kind, env) -> a Server of that kind with env."""
    def factory(kind="own", env=None, **kw):
        env = dict(env or {})
        if kind == "rw" and TARGET != "container":
            kind = "own"
        argv = None if kind == "own" else _argv(kind, env)
        return make_server(env=env, argv=argv, **kw)
    return factory


def cg_server(server, env=None):
    """A server that must give its jobs cgroups here (skips where none can)."""
    needs_cgroup_server()
    needs_host_view()
    return server(CGROUP_KINDS[0], env)


# --------------------------------------------------------------------------
# Jobs and their cgroups, seen from the host
# --------------------------------------------------------------------------

def token_env(token, **extra):
    """A job's env argument carrying the test's token."""
    env = {"MCPX_TOKEN": token}
    env.update(extra)
    return env


def job_cgroups(token):
    """{host pid: cgroup path} of the live job processes carrying token."""
    out = {}
    for pid in token_processes(token):
        path = cgroup_of(pid)
        if path is not None:
            out[pid] = path
    return out


def the_job_cgroup(token, count=1):
    """The one cgroup path the job's processes (at least count of them) are in."""
    def one():
        paths = job_cgroups(token)
        return len(paths) >= count and len(set(paths.values())) == 1 and next(iter(paths.values()))
    return wait_until(one, WITHIN, lambda: "the job's %d processes in one cgroup (now %r)" % (count, job_cgroups(token)))


def server_cgroup(s):
    """The cgroup path of the server process itself."""
    path = cgroup_of(s.host_pid(10 + SLACK))
    assert path is not None, "the server has no cgroup v2 path"
    return path


def is_under(path, ancestor):
    """path is ancestor or below it."""
    return path == ancestor or path.startswith(ancestor.rstrip("/") + "/")


def dir_gone(path):
    """The cgroup's directory no longer exists."""
    return not os.path.isdir(cg_dir(path))


def populated(path):
    """cgroup.events' populated of the directory; None when it is gone."""
    text = read_file(os.path.join(cg_dir(path), "cgroup.events"), "r")
    if text is None:
        return None
    m = re.search(r"^populated (\d)$", text, re.M)
    return int(m.group(1)) if m else None


def running_entry(s, jid, timeout=0.5):
    """The entry of jid in a wait that times out while it runs."""
    r = s.tool("wait", {"job_ids": [jid], "timeout": timeout}, timeout=timeout + 30)
    entries = r if isinstance(r, list) else r.get("jobs", r.get("results"))
    (entry,) = [e for e in entries if e.get("job_id") == jid]
    assert entry["state"] == "running", entry
    return entry


def ready(s, jid, line="ready\n"):
    """Wait until the job has printed its ready line."""
    s.poll_output(jid, lambda d: d.endswith(line), timeout=WITHIN)


# What escapes a process group, each printing "ready" once it is in place.  The
# fork-hopper forks and exits every 20 ms, so no pid it had stays
# valid; all of them ignore TERM, so only KILL (or cgroup.kill) ends them.
HOPPER = ("perl -MPOSIX -e 'POSIX::setsid(); $SIG{TERM} = q(IGNORE); "
          "while (1) { my $p = fork; exit 0 if $p; select(undef, undef, undef, 0.02) }'")
# (command, the comm values of its processes once in place, the shell's left out)
ESCAPES = {
    "setsid-child": ("setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo ready; wait", ["sleep"]),
    "double-fork": ("(setsid sh -c 'trap \"\" TERM; exec sleep 1000' </dev/null >/dev/null 2>&1 &); "
                    "echo ready; exec sleep 1000", ["sleep", "sleep"]),
    "fork-hopper": ("(%s </dev/null >/dev/null 2>&1 &); echo ready; exec sleep 1000" % HOPPER, ["perl", "sleep"]),
}


def comms(token, names=("sleep", "perl")):
    """{pid: comm} of the job's processes named in names."""
    out = {}
    for pid, desc in token_processes(token).items():
        comm = desc.split()[0]
        if comm in names:
            out[pid] = comm
    return out


def start_escape(s, kind, token):
    """Start the escape `kind`; return (job id, its cgroup path) once every
    process of it is in place (a hopper has hopped, so it ignores TERM)."""
    command, names = ESCAPES[kind]
    jid = s.job(command, env=token_env(token))
    ready(s, jid)
    sleeps = names.count("sleep")

    def in_place():
        now = list(comms(token).values())
        return now.count("sleep") == sleeps and ("perl" in now) == ("perl" in names)
    wait_until(in_place, WITHIN, lambda: "the job's %r (now %r)" % (names, token_processes(token)))
    if "perl" in names:
        first = {p for p, c in comms(token).items() if c == "perl"}
        wait_until(lambda: {p for p, c in comms(token).items() if c == "perl"} - first, WITHIN,
                   "the fork-hopper getting a new pid")
    path = the_job_cgroup(token, len(names))
    return jid, path


def own_job_cgroup(s, token, count=1):
    """The job's cgroup path, which must be its own and not the server's."""
    path = the_job_cgroup(token, count)
    assert path != server_cgroup(s), "the job runs in the server's own cgroup %s" % path
    return path


def assert_none_alive(token, what):
    """No process of the token is alive now (none is waited for)."""
    left = await_no_token_processes(token, timeout=0)
    assert not left, "%s, yet the job's processes live: %r" % (what, left)


# ==========================================================================
# The job's own directory
# ==========================================================================

def test_each_job_has_its_own_cgroup_under_the_servers_subtree(server):
    s = cg_server(server)
    t1, t2 = uuid.uuid4().hex, uuid.uuid4().hex
    j1 = s.job("echo ready; exec sleep 300", env=token_env(t1))
    j2 = s.job("echo ready; exec sleep 300", env=token_env(t2))
    try:
        ready(s, j1)
        ready(s, j2)
        p1, p2 = the_job_cgroup(t1), the_job_cgroup(t2)
        srv = server_cgroup(s)
        assert p1 != p2, "two jobs share the cgroup %s" % p1
        for p in (p1, p2):
            assert p != srv, "the job runs in the server's own cgroup %s" % p
            assert not is_under(srv, p), "the server %s is inside the job's cgroup %s" % (srv, p)
            assert os.path.isdir(cg_dir(p)), p
        assert os.path.dirname(p1) == os.path.dirname(p2), \
            "one directory per job under one subtree, not %s and %s" % (p1, p2)
    finally:
        s.cleanup(j1, j2)


def test_first_process_is_in_the_jobs_cgroup_at_its_first_instruction(server):
    # The shell reads its own /proc/self/cgroup (a redirection of a compound
    # command runs in the shell itself) before it does anything else: a job
    # moved after it started would show the server's cgroup here.
    s = cg_server(server)
    srv = server_cgroup(s)
    first = ("while IFS= read -r l; do case $l in 0::*) echo \"${l#0::}\";; esac; done < /proc/self/cgroup; "
             "exec sleep 300")
    for _ in range(5):
        token = uuid.uuid4().hex
        jid = s.job(first, env=token_env(token))
        try:
            seen = s.poll_output(jid, lambda d: d.endswith("\n"), timeout=WITHIN)["stdout"]["data"].strip()
            path = the_job_cgroup(token)
            # In a private cgroup namespace the job sees its path below the
            # namespace's root: a suffix of the host's.
            assert seen != "/" and path.endswith(seen), \
                "the job's first instruction saw cgroup %r; its cgroup is %r" % (seen, path)
            assert not srv.endswith(seen), "the job's first instruction ran in the server's cgroup %r" % seen
        finally:
            s.cleanup(jid)


@pytest.mark.parametrize("end", ["kill", "wait"])
def test_job_cgroup_is_removed_once_the_job_is_forgotten(server, end):
    s = cg_server(server)
    token = uuid.uuid4().hex
    gate = "/tmp/mcpx-cg-" + uuid.uuid4().hex
    jid = s.job("echo ready; while [ ! -e %s ]; do sleep 0.05; done; rm -f %s" % (gate, gate),
                env=token_env(token))
    ready(s, jid)
    path = own_job_cgroup(s, token)
    assert os.path.isdir(cg_dir(path)), path
    if end == "kill":
        assert_kill_delivered(kill(s, jid, "KILL"), jid)
    else:
        s.sh("touch %s" % gate)
        r = s.collect(jid, timeout=WITHIN)
        assert r["state"] == "success", r
    assert_forgotten(s, jid)
    wait_until(lambda: dir_gone(path), WITHIN, "the forgotten job's cgroup %s going away" % path)


def test_cgroup_path_setting_puts_job_directories_under_it(server):
    needs_cgroup_server()
    needs_host_view()
    if TARGET == "container":
        pytest.skip("PATH names a directory the test makes on the host")
    base = os.path.join(cgroup_of(os.getpid()) or "/", "mcpx-cgt-" + uuid.uuid4().hex[:12])
    os.mkdir(cg_dir(base))
    try:
        s = server("own", {"MCP_EXEC_CGROUP": cg_dir(base)})
        token = uuid.uuid4().hex
        jid = s.job("echo ready; exec sleep 300", env=token_env(token))
        ready(s, jid)
        path = the_job_cgroup(token)
        assert is_under(path, base) and path != base, "the job's cgroup %s is not under PATH %s" % (path, base)
        s.cleanup(jid)
        assert s.close(WITHIN) == 0
    finally:
        _remove_tree(base)


def _remove_tree(path):
    """Remove a cgroup directory the test made, killing what is left in it."""
    root = cg_dir(path)
    if not os.path.isdir(root):
        return
    try:
        with open(os.path.join(root, "cgroup.kill"), "w") as f:
            f.write("1")
    except OSError:
        pass
    for dirpath, dirs, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        deadline = time.monotonic() + 5
        while True:
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)


# ==========================================================================
# kill reaches every process of the cgroup, and says dead only when it is
# ==========================================================================

@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_kill_ends_what_left_the_process_group(server, escape):
    s = cg_server(server)
    token = uuid.uuid4().hex
    jid, path = start_escape(s, escape, token)
    try:
        k = kill(s, jid, "KILL")
        # checked at once: terminated means nothing of the job is alive now
        alive = token_processes(token)
        assert_kill_delivered(k, jid)
        assert not alive, "kill said terminated while %r lived" % alive
        assert populated(path) in (None, 0), "kill said terminated while %s is populated" % path
    finally:
        await_no_token_processes(token, timeout=0)


@pytest.mark.parametrize("escape", ["setsid-child", "fork-hopper"])
def test_kill_with_term_says_not_terminated_while_a_term_ignorer_lives(server, escape):
    s = cg_server(server)
    token = uuid.uuid4().hex
    jid, path = start_escape(s, escape, token)
    try:
        k = s.tool("kill", {"job_id": jid, "signal": "TERM", "timeout": 1}, timeout=WITHIN)
        assert k.get("terminated") is False, "kill said terminated while a TERM-ignoring process lives: %r" % k
        assert token_processes(token), "the TERM-ignoring process died of TERM"
        k = s.tool("kill", {"job_id": jid, "signal": "ASSURED", "timeout": 2}, timeout=WITHIN)
        alive = token_processes(token)
        assert k.get("terminated") is True, "ASSURED did not end the job: %r" % short(k)
        assert not alive, "kill said terminated while %r lived" % alive
    finally:
        await_no_token_processes(token, timeout=0)


def test_survivors_name_what_is_alive_in_the_cgroup(server):
    # The shell ends at once; a setsid daemon is left in the cgroup with
    # the pipes closed, so the result is final and names it.
    s = cg_server(server)
    token = uuid.uuid4().hex
    m = "/tmp/mcpx-cg-" + uuid.uuid4().hex
    # the shell ends only once the daemon has become sleep, so the name is sure
    r = s.run("(setsid sh -c 'echo $$ > %s; exec sleep 300' </dev/null >/dev/null 2>&1 &); "
              "until [ \"$(cat /proc/$(cat %s 2>/dev/null)/comm 2>/dev/null)\" = sleep ]; do sleep 0.02; done; "
              "rm -f %s" % (m, m, m), env=token_env(token))
    try:
        assert r["state"] == "success", r
        survivors = r.get("survivors") or []
        assert [v.get("name") for v in survivors] == ["sleep"], \
            "survivors must name the daemon still in the cgroup, and only it: %r" % r
        if TARGET == "binary":
            assert [v["pid"] for v in survivors] == list(token_processes(token)), r
    finally:
        await_no_token_processes(token, timeout=0)


# ==========================================================================
# Shutdown empties every job's cgroup
# ==========================================================================

@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_shutdown_ends_every_escaped_process(server, how):
    s = cg_server(server)
    tokens = {escape: uuid.uuid4().hex for escape in ESCAPES}
    paths = [start_escape(s, escape, token)[1] for escape, token in sorted(tokens.items())]
    srv = server_cgroup(s)
    assert srv not in paths, "a job runs in the server's own cgroup %s" % srv
    if how == "eof":
        s.close_stdin()
    else:
        s.send_signal(signal.SIGTERM)
    s.wait_exit(EXIT_WITHIN + WITHIN)
    for escape, token in sorted(tokens.items()):
        assert_none_alive(token, "the server exited (%s) with a %s job" % (how, escape))
    for p in paths:
        wait_until(lambda: dir_gone(p), WITHIN, "the cgroup %s going away at shutdown" % p)


def test_restarted_server_cleans_a_leftover_subtree(server):
    needs_cgroup_server()
    needs_host_view()
    if TARGET == "container":
        pytest.skip("a container's cgroup goes with the container; the leftover is a host server's")
    base = os.path.join(cgroup_of(os.getpid()) or "/", "mcpx-cgt-" + uuid.uuid4().hex[:12])
    os.mkdir(cg_dir(base))
    env = {"MCP_EXEC_CGROUP": cg_dir(base)}
    token = uuid.uuid4().hex
    try:
        first = server("own", env)
        jid = first.job("setsid sleep 1000 & echo ready; exec sleep 1000", env=token_env(token))
        ready(first, jid)
        path = own_job_cgroup(first, token, 2)
        os.kill(first.host_pid(), signal.SIGKILL)
        first.wait_exit(WITHIN)
        assert os.path.isdir(cg_dir(path)), "the killed server's job cgroup should be left over"
        second = server("own", env)
        second.roundtrip()
        wait_until(lambda: not token_processes(token) and dir_gone(path), WITHIN,
                   lambda: "the leftover job cgroup %s emptied and removed (left: %r)"
                   % (path, token_processes(token)))
        assert second.sh("echo fine") == "fine\n"
    finally:
        await_no_token_processes(token, timeout=0)
        _remove_tree(base)


# ==========================================================================
# What the cgroup reports
# ==========================================================================

# A burner of 0.5 s of CPU in a process that left the group: its time counts.
BURNER = "setsid perl -e '1 while (times)[0] + (times)[1] < 0.5' & wait"


def test_usage_counts_the_cgroups_cpu(server):
    s = cg_server(server, dict(AGENT, MCP_EXEC_USAGE="1"))
    r = s.run(BURNER, timeout=WITHIN * 2)
    assert r["state"] == "success", r
    cg = (r.get("usage") or {}).get("cgroup")
    assert isinstance(cg, dict), "usage has no cgroup part: %r" % r
    assert 0.4 <= cg.get("cpu_s", -1) <= 2.0, "a 0.5 s CPU burner counted %r" % cg
    assert isinstance(cg.get("procs_max"), int) and cg["procs_max"] >= 2, cg
    if "memory" not in offered_controllers():
        assert "memory_peak_bytes" not in cg, "no memory controller is offered here: %r" % cg
    elif "memory_peak_bytes" in cg:
        assert cg["memory_peak_bytes"] > 0, cg


def _procs_job(s, token, setsid):
    # sh and two sleeps in the group; with setsid, one more outside it
    extra = "setsid sleep 300 & " if setsid else ""
    jid = s.job("sleep 300 & sleep 300 & %secho ready; wait" % extra, env=token_env(token))
    ready(s, jid)
    return jid


def test_procs_counts_every_process_of_the_cgroup(server):
    s = cg_server(server, AGENT)
    token = uuid.uuid4().hex
    jid = _procs_job(s, token, setsid=True)
    try:
        wait_until(lambda: len(token_processes(token)) == 4, WITHIN, "the job's four processes")
        st = s.status(jid)
        assert st.get("procs") == 4, "status must count sh, three sleeps: %r" % st
        entry = running_entry(s, jid)
        assert entry.get("procs") == 4, "a running wait entry must count them too: %r" % entry
    finally:
        s.cleanup(jid)
        await_no_token_processes(token, timeout=0)


# ==========================================================================
# Per-job limits
# ==========================================================================

LIMITS = {
    "MCP_EXEC_JOB_MEMORY": ("memory", str(64 * 1024 * 1024)),
    "MCP_EXEC_JOB_PIDS": ("pids", "32"),
    "MCP_EXEC_JOB_CPU": ("cpu", "0.5"),
}


def _limit_refused(var, controller, value, kind):
    argv = _argv(kind, {var: value}) if kind != "own" else server_argv({var: value})
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=process_env({var: value}), timeout=30 + SLACK)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2, "%s=%s was not refused at start (exit %s): %s" % (var, value, p.returncode, err)
    assert var in err, err
    reason = _reason(err)
    assert controller in reason and "cgroup" in reason, \
        "the refusal does not say the cgroup lacks the %s controller: %s" % (controller, err)
    assert p.stdout == b"", p.stdout[:300]


def _reason(err):
    """A refusal's words besides the setting names it lists, lower-cased (a
    list of valid settings would name every controller)."""
    return re.sub(r"MCP_EXEC_\w+", "", err).lower()


@pytest.mark.parametrize("var", sorted(LIMITS))
def test_job_limit_is_refused_or_enforced_as_the_kernel_allows(server, var):
    controller, value = LIMITS[var]
    needs_cgroup_server()
    needs_host_view()
    kind = CGROUP_KINDS[0]
    if controller not in offered_controllers():
        # not offered where the server starts: no subtree below can have it
        _limit_refused(var, controller, value, kind)
        return
    if TARGET == "container":
        pytest.skip("%s is offered on the host; whether the container's cgroup has it is podman's choice"
                    % controller)
    s = server(kind, {var: value})
    token = uuid.uuid4().hex
    jid = s.job("echo ready; exec sleep 300", env=token_env(token))
    try:
        ready(s, jid)
        path = the_job_cgroup(token)
        files = {"memory": "memory.max", "pids": "pids.max", "cpu": "cpu.max"}
        text = (read_file(os.path.join(cg_dir(path), files[controller]), "r") or "").split()
        if controller == "cpu":
            assert text and text[0] != "max" and abs(int(text[0]) / int(text[1]) - 0.5) < 0.01, text
        else:
            assert text == [value], "%s of the job's cgroup is %r, not %s" % (files[controller], text, value)
    finally:
        s.cleanup(jid)


def test_job_killed_for_memory_says_oom_killed(server):
    needs_cgroup_server()
    needs_host_view()
    if "memory" not in offered_controllers():
        pytest.skip("no memory controller offered here (the refusal is tested instead)")
    s = server(CGROUP_KINDS[0], {"MCP_EXEC_JOB_MEMORY": str(64 * 1024 * 1024)})
    r = s.run("exec perl -e '$x = q(x) x (512 * 1024 * 1024); print length $x'", timeout=WITHIN * 2)
    assert r.get("oom_killed") is True, r
    assert str(r.get("signal", "")).upper().lstrip("SIG").startswith("KILL"), r


@pytest.mark.parametrize("kind", ["off"] + GROUP_KINDS)
def test_job_limit_without_a_cgroup_is_refused(kind, mcp_bin):
    env_kind = "own" if kind == "off" else kind
    var = "MCP_EXEC_JOB_PIDS"
    value = "32"
    env = {var: value}
    if kind == "off":
        env["MCP_EXEC_CGROUP"] = "off"
    argv = server_argv(env) if env_kind == "own" else _argv(env_kind, env)
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=process_env(env), timeout=30 + SLACK)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2, "%s without a cgroup was not refused (exit %s): %s" % (var, p.returncode, err)
    assert var in err and p.stdout == b"", err
    assert "cgroup" in _reason(err), "the refusal does not say there is no cgroup to enforce it in: %s" % err


# ==========================================================================
# Which tree is in force: instructions, --help, /healthz
# ==========================================================================

TREE = re.compile(r'"?tree"?\s*[:=]\s*"?(cgroup|process-group)\b')


def _said_tree(text, where):
    m = TREE.search(text or "")
    assert m, "%s does not say which tree is in force (\"tree\": \"cgroup\" or \"process-group\"): %.600r" % (
        where, text)
    return m.group(1)


def _tree_cases():
    cases = [(k, {}, "cgroup") for k in CGROUP_KINDS]
    cases += [(k, {"MCP_EXEC_CGROUP": "off"}, "process-group") for k in CGROUP_KINDS or ["own"]]
    cases += [(k, {}, "process-group") for k in GROUP_KINDS]
    return cases


TREE_CASES = _tree_cases()
TREE_IDS = ["%s-%s" % (k, "off" if e else "auto") for k, e, _ in TREE_CASES]


@pytest.mark.parametrize("kind,env,tree", TREE_CASES, ids=TREE_IDS)
def test_instructions_say_which_tree_is_in_force(server, kind, env, tree):
    s = server(kind, dict(AGENT, **env))
    assert _said_tree(s.init_result.get("instructions"), "the instructions") == tree


@pytest.mark.parametrize("kind,env,tree", TREE_CASES, ids=TREE_IDS)
def test_help_says_which_tree_is_in_force(kind, env, tree, mcp_bin):
    argv = _argv(kind, env, args=["--help"]) if kind != "own" else server_argv(env, args=["--help"])
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=process_env(env), timeout=30 + SLACK)
    assert p.returncode == 0, p.stdout[-600:]
    assert _said_tree(p.stdout.decode("utf-8", "replace"), "--help") == tree


LISTENING = re.compile(r"serving MCP on http://(\S+?)/mcp")


@pytest.mark.parametrize("kind,env,tree", [c for c in TREE_CASES], ids=TREE_IDS)
def test_healthz_says_which_tree_is_in_force(kind, env, tree, mcp_bin):
    if TARGET != "binary":
        pytest.skip("the HTTP transport is tested on the binary target, which the test starts with --listen")
    argv = _argv(kind, env, args=["--listen", "127.0.0.1:0"]) if kind != "own" else \
        [server_binary(), "--listen", "127.0.0.1:0"]
    # a token of the test's: nobody has no home to keep a generated one in
    env = dict(env, MCP_EXEC_TOKEN="tok-" + uuid.uuid4().hex)
    if kind != "own":
        argv = _argv(kind, env, args=["--listen", "127.0.0.1:0"])
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=process_env(env), cwd="/")
    try:
        seen = b""
        deadline = time.monotonic() + WITHIN
        while not LISTENING.search(seen.decode("utf-8", "replace")):
            assert time.monotonic() < deadline and p.poll() is None, "no listening line: %r" % seen
            seen += p.stderr.readline()
        host, _, port = LISTENING.search(seen.decode()).group(1).rpartition(":")
        c = http.client.HTTPConnection(host, int(port), timeout=WITHIN)
        c.request("GET", "/healthz")
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        assert r.status == 200, body
        assert body.get("tree") == tree, "/healthz: %r" % body
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(WITHIN)


# ==========================================================================
# Without a cgroup: process groups, as before
# ==========================================================================

def _group_cases():
    cases = [(k, {"MCP_EXEC_CGROUP": "off"}) for k in CGROUP_KINDS or ["own"]]
    cases += [(k, {}) for k in GROUP_KINDS]
    return cases


GROUP_CASES = _group_cases()
GROUP_IDS = ["%s-%s" % (k, "off" if e else "auto") for k, e in GROUP_CASES]


@pytest.mark.parametrize("kind,env", GROUP_CASES, ids=GROUP_IDS)
def test_without_a_cgroup_the_job_shares_the_servers_cgroup(server, kind, env):
    needs_host_view()
    s = server(kind, env)
    token = uuid.uuid4().hex
    jid = s.job("echo ready; exec sleep 300", env=token_env(token), cwd="/tmp")
    try:
        ready(s, jid)
        assert the_job_cgroup(token) == server_cgroup(s), "a job without a cgroup tree got a cgroup of its own"
    finally:
        s.cleanup(jid)


@pytest.mark.parametrize("kind,env", GROUP_CASES, ids=GROUP_IDS)
def test_without_a_cgroup_kill_still_reaches_a_setsid_child(server, kind, env):
    s = server(kind, env)
    token = uuid.uuid4().hex
    jid = s.job("setsid sleep 1000 & echo ready; wait", env=token_env(token), cwd="/tmp")
    try:
        ready(s, jid)
        wait_until(lambda: list(comms(token).values()) == ["sleep"], WITHIN, "the job's setsid sleep")
        k = kill(s, jid, "TERM")
        alive = token_processes(token)
        assert_kill_delivered(k, jid)
        assert not alive, "kill said terminated while %r lived" % alive
    finally:
        await_no_token_processes(token, timeout=0)


@pytest.mark.parametrize("kind,env", GROUP_CASES, ids=GROUP_IDS)
def test_without_a_cgroup_procs_counts_the_process_group(server, kind, env):
    s = server(kind, dict(AGENT, **env))
    token = uuid.uuid4().hex
    jid = _procs_job(s, token, setsid=False)
    try:
        wait_until(lambda: len(token_processes(token)) == 3, WITHIN, "the job's three processes")
        st = s.status(jid)
        assert st.get("procs") == 3, "status must count the group's sh and two sleeps: %r" % st
        assert running_entry(s, jid).get("procs") == 3
    finally:
        s.cleanup(jid)
        await_no_token_processes(token, timeout=0)
