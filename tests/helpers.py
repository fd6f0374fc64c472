"""The client and driver code the end-to-end suites share.

Every suite talks to a real mcp-exec process over newline-delimited JSON-RPC
on stdio.  Which process that is depends on MCP_EXEC_TARGET:

  binary     (default) the static binary itself
  pid1       the binary as PID 1 of a fresh pid namespace (unshare, needs root)
  container  `podman run -i --rm IMAGE` (IMAGE from MCP_EXEC_IMAGE)

The binary comes from MCP_EXEC_BIN, or is built from the repository once per
session.  Only the Python 3 standard library and pytest are needed.

Here: the target selection, the binary locator and the launcher, the client
(Server, and RawServer that measures reply lines), the scan of the host's
process table for a test's processes, and the waits and checks more than one
suite uses.  The fixtures are in conftest.py at the repository root, which
imports this module; the suites import their names from here:

    from tests.helpers import Server, wait_until
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

# --------------------------------------------------------------------------
# Target selection
# --------------------------------------------------------------------------

TARGET = os.environ.get("MCP_EXEC_TARGET", "binary")
# The repository: the binary is built from it when MCP_EXEC_BIN is not set.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
PODMAN = os.environ.get("PODMAN", "podman")

if TARGET not in ("binary", "pid1", "container"):
    raise RuntimeError("MCP_EXEC_TARGET must be binary, pid1 or container, not %r" % TARGET)

# Why the chosen target cannot run on this machine, or None.
UNSUPPORTED = None
if TARGET == "pid1" and not IS_ROOT:
    UNSUPPORTED = "MCP_EXEC_TARGET=pid1 needs root for `unshare --pid --fork --mount-proc`"
elif TARGET == "container" and not os.environ.get("MCP_EXEC_IMAGE"):
    UNSUPPORTED = "MCP_EXEC_TARGET=container needs MCP_EXEC_IMAGE (the image to run)"



def needs_pid1_support():
    if TARGET != "container" and not IS_ROOT:
        pytest.skip("bare-PID-1 tests need root (unshare --pid)")


def needs_binary_target():
    if TARGET != "binary":
        pytest.skip("the server's own signal dispositions are set only when the test launches "
                    "the binary itself (MCP_EXEC_TARGET=binary)")


def needs_container_target():
    if TARGET != "container":
        pytest.skip("runs the image itself: needs MCP_EXEC_TARGET=container and MCP_EXEC_IMAGE")


# Extra seconds of slack for process start-up in a container.
SLACK = 3.0 if TARGET == "container" else 0.0
# Seconds a server may take to exit after its client vanished or a signal.
EXIT_WITHIN = 5.0 + SLACK

MIB = 1024 * 1024

# A tree whose every member ignores SIGTERM; prints "up" when complete.
TERM_IGNORING_TREE = "trap '' TERM; sleep 300 & sleep 300 & echo up; wait; sleep 300"


# --------------------------------------------------------------------------
# Locating / building the binary and building server command lines
# --------------------------------------------------------------------------

_BIN = None
_BIN_LOCK = threading.Lock()


def server_binary():
    """Path of the mcp-exec binary: $MCP_EXEC_BIN, or built once per session."""
    global _BIN
    with _BIN_LOCK:
        if _BIN is None:
            given = os.environ.get("MCP_EXEC_BIN")
            if given:
                _BIN = os.path.abspath(given)
            else:
                outdir = tempfile.mkdtemp(prefix="mcp-exec-test-build-")
                atexit.register(shutil.rmtree, outdir, True)
                out = os.path.join(outdir, "mcp-exec")
                env = dict(os.environ, CGO_ENABLED="0")
                r = subprocess.run(["go", "build", "-o", out, "."], cwd=REPO, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   universal_newlines=True, timeout=900)
                if r.returncode != 0:
                    raise RuntimeError("go build failed:\n" + r.stdout)
                _BIN = out
        return _BIN


def server_argv(env, pid1=False, args=()):
    """The one place that decides how a server process is launched.

    env   -- variables for the server (value None means: make sure it is unset)
    pid1  -- run the server as PID 1 without any init in front of it
    args  -- extra command-line arguments for mcp-exec (e.g. --version)
    For binary/pid1 targets `env` reaches the server via the process
    environment (see process_env); for the container target via `-e`.
    """
    env = env or {}
    if TARGET == "container":
        argv = [PODMAN, "run", "-i", "--rm", "--name", "mcp-exec-test-" + uuid.uuid4().hex[:12]]
        for key, value in sorted(env.items()):
            if value is not None:
                argv += ["-e", "%s=%s" % (key, value)]
            else:  # podman's own defaults (TERM=xterm) would otherwise reach the server
                argv += ["--unsetenv", key]
        if pid1:
            argv += ["--entrypoint", "/usr/local/bin/mcp-exec"]
        return argv + [os.environ["MCP_EXEC_IMAGE"]] + list(args)
    binary = server_binary()
    if TARGET == "pid1" or pid1:
        return ["unshare", "--pid", "--fork", "--mount-proc", binary] + list(args)
    return [binary] + list(args)


def process_env(env):
    """Environment of the launched process (the server, or podman)."""
    # Not what make passes down either: a job running make would then think
    # it is a sub-make (and print "Entering directory") when `make test` runs
    # the suites.
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MCP_EXEC_") and k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    if TARGET == "container":
        return base
    for key, value in (env or {}).items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = str(value)
    return base


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------

def wait_until(pred, timeout=10, what="the condition", interval=0.02):
    """Call pred() until it returns something true, and return that; fail
    after `timeout` seconds, saying `what` (or what() returns) never held."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        assert time.monotonic() < deadline, \
            "%s did not happen within %ss" % (what() if callable(what) else what, timeout)
        time.sleep(interval)


def read_file(path, mode="rb"):
    """The contents of path, or None when it cannot be read (a process that
    has just exited takes its /proc files with it)."""
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def marker():
    """A fresh path under /tmp for a test's gate or marker file."""
    return "/tmp/mcpx-" + uuid.uuid4().hex


# --------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------

def idkey(value):
    """The key a request id is filed under: 77 and "77" are different ids."""
    return json.dumps(value, sort_keys=True)


class ToolError(AssertionError):
    pass


_ALL_SERVERS = []


class Server:
    """An mcp-exec process plus a newline-delimited JSON-RPC client.

    The process is the one server_argv builds for the target, or `argv` when
    a test builds the command line itself (a launcher in front, the image run
    another way); `env` then still reaches the launched process."""

    def __init__(self, env=None, pid1=False, initialize=True, version="2025-06-18", argv=None):
        self.env = dict(env or {})
        self.pid1 = pid1
        self.argv = list(argv) if argv is not None else server_argv(self.env, pid1=pid1)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=process_env(self.env))
        self._wlock = threading.Lock()
        self._cond = threading.Condition()
        self._next_id = 1000
        self._seq = 0
        self.responses = {}      # idkey -> (seq, message), until taken
        self.answered = set()    # idkey of every response ever seen
        self.null_id = []        # responses carrying id null
        self.notifications = []  # (seq, message)
        self.problems = []       # protocol violations seen on stdout
        self.stdout_closed = False
        self.stderr_chunks = []
        self.closed = False
        self.read_gate = threading.Event()  # clear it to simulate a client that stops reading
        self.read_gate.set()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._errreader = threading.Thread(target=self._read_stderr, daemon=True)
        self._errreader.start()
        _ALL_SERVERS.append(self)
        if initialize:
            self.init_result = self.result("initialize", {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "mcp-exec-e2e", "version": "0"}})
            self.notify("notifications/initialized")

    # ---- reading -------------------------------------------------------

    def _read_stdout(self):
        while True:
            self.read_gate.wait()
            raw = self.proc.stdout.readline()
            if not raw:
                break
            self._handle_line(raw)
        with self._cond:
            self.stdout_closed = True
            self._cond.notify_all()

    def _handle_line(self, raw):
        problem = None
        msg = None
        if not raw.endswith(b"\n"):
            problem = "stdout line without newline terminator: %r" % raw[:200]
        try:
            msg = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            problem = "non-JSON line on stdout: %r" % raw[:300]
            msg = None
        if msg is not None and (not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0"):
            problem = "not a JSON-RPC 2.0 message on stdout: %r" % raw[:300]
            msg = None
        with self._cond:
            self._seq += 1
            seq = self._seq
            if problem:
                self.problems.append(problem)
            if msg is not None:
                if "method" in msg:
                    self.notifications.append((seq, msg))
                    if "id" in msg:
                        self.problems.append("server sent a request: %r" % raw[:300])
                elif "id" not in msg:
                    self.problems.append("response without id: %r" % raw[:300])
                elif msg["id"] is None:
                    self.null_id.append(msg)
                else:
                    key = idkey(msg["id"])
                    if key in self.answered:
                        self.problems.append("second response for id %s: %r" % (key, raw[:300]))
                    self.answered.add(key)
                    self.responses[key] = (seq, msg)
            self._cond.notify_all()

    def _read_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read1(65536)
                          if hasattr(self.proc.stderr, "read1")
                          else self.proc.stderr.read(4096), b""):
            self.stderr_chunks.append(chunk)

    @property
    def stderr_text(self):
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    # ---- writing -------------------------------------------------------

    def send_raw(self, data):
        with self._wlock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, obj):
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.send_raw(line.encode("utf-8"))

    def new_id(self):
        with self._cond:
            self._next_id += 1
            return self._next_id

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def cancel(self, request_id, reason="test"):
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    def start(self, method, params=None, id=None):
        if id is None:
            id = self.new_id()
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return id

    def response(self, id, timeout=30):
        """Wait for the response to request `id` and return the message."""
        key = idkey(id)
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self.responses:
                if self.problems:
                    raise AssertionError("protocol problems: %s" % self.problems)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("no response to id %s within %ss (server exit=%s)\nstderr: %s"
                                         % (key, timeout, self.proc.poll(), self.stderr_text[-2000:]))
                if self.stdout_closed:
                    raise AssertionError("server closed stdout before answering id %s (exit=%s)\nstderr: %s"
                                         % (key, self.proc.poll(), self.stderr_text[-2000:]))
                self._cond.wait(min(remaining, 0.5))
            return self.responses.pop(key)[1]

    def response_seq(self, id, timeout=30):
        key = idkey(id)
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self.responses:
                remaining = deadline - time.monotonic()
                assert remaining > 0, "no response to %s" % key
                self._cond.wait(min(remaining, 0.5))
            return self.responses.pop(key)

    def has_response(self, id):
        with self._cond:
            return idkey(id) in self.answered

    def request(self, method, params=None, id=None, timeout=30):
        return self.response(self.start(method, params, id), timeout)

    def result(self, method, params=None, timeout=30):
        msg = self.request(method, params, timeout=timeout)
        assert "error" not in msg, "unexpected error reply: %r" % msg
        assert "result" in msg, msg
        return msg["result"]

    def error(self, method, params=None, timeout=30, id=None):
        msg = self.request(method, params, id=id, timeout=timeout)
        assert "error" in msg and "result" not in msg, "expected an error reply: %r" % msg
        return msg["error"]

    def null_id_error(self, timeout=30):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.null_id:
                remaining = deadline - time.monotonic()
                assert remaining > 0, "no error reply with id null within %ss" % timeout
                assert not self.stdout_closed, "server closed stdout; stderr: %s" % self.stderr_text
                self._cond.wait(min(remaining, 0.5))
            return self.null_id.pop(0)

    def wait_notifications(self, pred, count=1, timeout=10):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [(s, m) for (s, m) in self.notifications if pred(m)]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                assert remaining > 0, "expected %d matching notifications, got %r" % (count, found)
                self._cond.wait(min(remaining, 0.5))

    def progress(self, token):
        """(seq, params) of every progress notification for token so far."""
        with self._cond:
            return [(seq, m["params"]) for seq, m in self.notifications
                    if m.get("method") == "notifications/progress"
                    and isinstance(m.get("params"), dict) and m["params"].get("progressToken") == token]

    def roundtrip(self):
        """A ping round trip: everything sent before it has been read by the server."""
        assert self.result("ping") == {}

    # ---- tools ---------------------------------------------------------

    def tool_start(self, name, args=None, meta=None, id=None):
        params = {"name": name, "arguments": {} if args is None else args}
        if meta is not None:
            params["_meta"] = meta
        return self.start("tools/call", params, id=id)

    def tool_response(self, id, timeout=30):
        msg = self.response(id, timeout)
        assert "error" not in msg, "tools/call answered with a JSON-RPC error: %r" % msg
        res = msg["result"]
        assert isinstance(res.get("content"), list) and res["content"], res
        item = res["content"][0]
        assert item.get("type") == "text" and isinstance(item.get("text"), str), res
        return res

    def tool_raw(self, name, args=None, timeout=30, meta=None):
        return self.tool_response(self.tool_start(name, args, meta), timeout)

    @staticmethod
    def decode(res):
        text = res["content"][0]["text"]
        if res.get("isError"):
            raise ToolError("tool error: %s" % text)
        return json.loads(text)

    def tool(self, name, args=None, timeout=30):
        return self.decode(self.tool_raw(name, args, timeout))

    def tool_err(self, name, args=None, timeout=30):
        res = self.tool_raw(name, args, timeout)
        assert res.get("isError") is True, "expected a tool error, got %r" % res
        return res["content"][0]["text"]

    # ---- job helpers ---------------------------------------------------

    def run(self, command, timeout=30, **kw):
        args = {"command": command}
        args.update(kw)
        return self.tool("execute", args, timeout=timeout)

    def job(self, command, **kw):
        args = {"command": command, "nowait": True}
        args.update(kw)
        r = self.tool("execute", args)
        assert r == {"job_id": r.get("job_id"), "state": "running"}, r
        assert isinstance(r["job_id"], str) and r["job_id"]
        return r["job_id"]

    def sh(self, command, timeout=30):
        """Run a helper command in the server's world; return its stdout."""
        r = self.run(command, timeout=timeout)
        assert r["state"] == "success", "helper %r failed: %r" % (command, r)
        return r.get("stdout", {}).get("data", "")  # the agent profile leaves out an empty stream

    def status(self, job_id):
        return self.tool("status", {"job_id": job_id})

    def until_done(self, job_id, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            st = self.status(job_id)
            if st["state"] != "running":
                return st
            assert time.monotonic() < deadline, "job %s still running after %ss" % (job_id, timeout)
            time.sleep(0.02)

    def poll_output(self, job_id, pred, stream="stdout", timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            out = self.tool("output", {"job_id": job_id, stream: "all"})
            if pred(out[stream]["data"]):
                return out
            assert time.monotonic() < deadline, "output of %s never matched: %.300r" % (job_id, out)
            time.sleep(0.02)

    def collect(self, job_id, timeout=20):
        r = self.tool("wait", {"job_ids": [job_id], "timeout": timeout}, timeout=timeout + 10)
        assert len(r) == 1 and r[0]["state"] != "running", r
        return r[0]

    def answer(self, job_id, data=None, close=False, timeout=20):
        """Write data to a job's stdin (and close it) and return its final
        result: from the input call itself when the job ended within its
        yield_after (the agent profile's default since 1.3, which delivers
        it), else from a wait."""
        args = {"job_id": job_id}
        if data is not None:
            args["data"] = data
        if close:
            args["close"] = True
        r = self.tool("input", args, timeout=timeout + 10)
        if r.get("state", "running") != "running":
            return r
        return self.collect(job_id, timeout=timeout)

    def cleanup(self, *job_ids):
        """Kill and forget jobs; errors (already gone) are fine."""
        for jid in job_ids:
            try:
                self.tool_raw("kill", {"job_id": jid, "signal": "KILL", "timeout": 5}, timeout=20)
            except AssertionError:
                pass

    def proc_state(self, pid):
        """'gone', or the state letter of /proc/PID/stat, seen from the server."""
        out = self.sh("if [ -e /proc/%d/stat ]; then cut -d' ' -f3 /proc/%d/stat 2>/dev/null || echo gone;"
                      " else echo gone; fi" % (pid, pid)).strip()
        return out or "gone"

    def wait_proc_gone(self, pid, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            st = self.proc_state(pid)
            if st == "gone":
                return
            assert time.monotonic() < deadline, "pid %d still present (state %s)" % (pid, st)
            time.sleep(0.05)

    def list_ids(self):
        return [j["job_id"] for j in self.tool("list_jobs")["jobs"]]

    # ---- lifecycle -----------------------------------------------------

    def close_stdin(self):
        with self._wlock:
            if not self.closed:
                self.closed = True
                try:
                    self.proc.stdin.close()
                except (BrokenPipeError, OSError):
                    pass

    def wait_exit(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError("server did not exit within %ss" % timeout)

    def close(self, timeout=10):
        self.close_stdin()
        try:
            return self.wait_exit(timeout)
        finally:
            self._reader.join(5)

    def take_problems(self):
        with self._cond:
            problems, self.problems = self.problems, []
            stray = list(self.null_id)
            self.null_id = []
        if stray:
            problems.append("unexpected replies with id null: %r" % stray)
        return problems

    # ---- signals to the server process ---------------------------------

    def host_pid(self, timeout=10):
        """Host pid of the mcp-exec process itself, on any target."""
        if TARGET == "container" and "--name" in self.argv:
            return self._container_server_pid(timeout)
        if self.argv[0] != "unshare":
            return self.proc.pid
        path = "/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)
        kids = wait_until(lambda: (read_file(path, "r") or "").split(), timeout,
                          "unshare forking the server", interval=0.01)
        return int(kids[0])

    def _container_server_pid(self, timeout):
        name = self.argv[self.argv.index("--name") + 1]

        def container_pid():
            r = subprocess.run([PODMAN, "inspect", "--format", "{{.State.Pid}}", name],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True, timeout=30)
            return int(r.stdout.strip() or 0) if r.returncode == 0 else 0

        pid = wait_until(container_pid, timeout, "a pid for container %s" % name, interval=0.05)
        # behind tini the server is PID 1's only child
        while (read_file("/proc/%d/comm" % pid, "r") or "").strip() != "mcp-exec":
            kids = (read_file("/proc/%d/task/%d/children" % (pid, pid), "r") or "").split()
            assert kids, "cannot find mcp-exec under host pid %d" % pid
            pid = int(kids[0])
        return pid

    def send_signal(self, sig):
        if TARGET == "container":
            name = self.argv[self.argv.index("--name") + 1]
            subprocess.run([PODMAN, "kill", "--signal", signal.Signals(sig).name, name],
                           check=True, timeout=30, stdout=subprocess.DEVNULL)
        else:
            os.kill(self.host_pid(), sig)


# --------------------------------------------------------------------------
# Host-side process accounting (only meaningful where the server's processes
# are visible: a container's are, in the host's /proc)
# --------------------------------------------------------------------------
#
# A test gives its jobs (or its whole server) a unique MCPX_TOKEN in their
# environment; every process started below them inherits it, so scanning
# /proc/*/environ for the token finds what the test left behind.

# Processes that carry a server's environment without being jobs: launchers
# (unshare for pid1; podman, conmon and tini for a container) and the server.
_LAUNCHER_COMMS = {"unshare", "tini", "podman", "conmon"}
_server_comms = None


def server_comms():
    """/proc comm values of the server and of what launches it.  The
    server's is the file name of the binary actually run (MCP_EXEC_BIN may be
    /tmp/x/mcp-exec-new), cut to the 15 bytes the kernel keeps, and in the
    image always mcp-exec."""
    global _server_comms
    if _server_comms is None:
        comms = _LAUNCHER_COMMS | {"mcp-exec"}
        if TARGET != "container":
            name = os.fsencode(os.path.basename(server_binary()))[:15]
            comms.add(name.decode("utf-8", "replace"))
        _server_comms = comms
    return _server_comms


def token_processes(token):
    """{pid: 'comm state'} of every job process carrying MCPX_TOKEN=token
    (the server itself and its launcher excluded)."""
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
        if stat is None:
            continue
        stat = stat.decode("utf-8", "replace")
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2:].split()[0]
        if comm in skip:
            continue
        found[int(entry)] = "%s %s" % (comm, state)
    return found


def await_no_token_processes(token, ignore=(), timeout=5.0):
    """Wait until no job process with the token is left (apart from the pids
    in `ignore`); return the survivors (killed, so they cannot disturb later
    tests) or {}."""
    deadline = time.monotonic() + timeout
    while True:
        left = {p: d for p, d in token_processes(token).items() if p not in ignore}
        if not left:
            return {}
        if time.monotonic() > deadline:
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            return left
        time.sleep(0.05)


# --------------------------------------------------------------------------
# Shutdown with calls in flight
# --------------------------------------------------------------------------

def await_file(s, path, timeout=20):
    """Wait until path exists in the server's world (a job touched it)."""
    wait_until(lambda: s.run("test -e %s" % path)["exit_code"] == 0, timeout,
               "%s appearing" % path)


def start_shutdown_scenario(s, token):
    """One nowait TERM-ignoring tree, one in-flight blocking execute, one
    in-flight wait, all carrying MCPX_TOKEN=token.  Returns the ids of the
    in-flight requests."""
    env = {"MCPX_TOKEN": token}
    jid = s.job(TERM_IGNORING_TREE, env=env)
    s.poll_output(jid, lambda d: d == "up\n")
    m = marker()
    ex = s.tool_start("execute", {"command": "trap '' TERM; touch %s; sleep 300 & wait" % m, "env": env})
    await_file(s, m)
    s.sh("rm -f %s" % m)
    wt = s.tool_start("wait", {"job_ids": [jid], "timeout": 120})
    s.roundtrip()
    if TARGET != "container":
        assert token_processes(token), "the survivor scan must see the running jobs"
    return [ex, wt]


def assert_inflight_cancelled(s, ids):
    """Each request in ids was answered, with -32800 (request cancelled)."""
    for rid in ids:
        with s._cond:
            entry = s.responses.pop(idkey(rid), None)
        assert entry is not None, "in-flight request %s was never answered" % rid
        assert entry[1].get("error", {}).get("code") == -32800, entry



# --------------------------------------------------------------------------
# A client that measures the reply lines on the wire
# --------------------------------------------------------------------------

class RawServer(Server):
    """A Server that records the length of every response line as it came
    off stdout (without its newline), by request id."""

    def __init__(self, **kw):
        self.line_lens = {}
        super().__init__(**kw)

    def _handle_line(self, raw):
        try:
            msg = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            msg = None
        if isinstance(msg, dict) and "id" in msg and "method" not in msg and msg["id"] is not None:
            self.line_lens[idkey(msg["id"])] = len(raw[:-1] if raw.endswith(b"\n") else raw)
        super()._handle_line(raw)

    def call(self, name, args=None, timeout=30, meta=None):
        """(tools/call result, length of its reply line in bytes)."""
        rid = self.tool_start(name, args, meta)
        res = self.tool_response(rid, timeout)
        return res, self.line_lens[idkey(rid)]

    def tool_line(self, name, args=None, timeout=30):
        """(decoded tool result, length of its reply line); a tool error raises."""
        res, n = self.call(name, args, timeout)
        return self.decode(res), n


# --------------------------------------------------------------------------
# Servers a module shares, servers that must not start
# --------------------------------------------------------------------------

def close_module_server(s):
    """Shut down a server a module shared; it must exit with status 0."""
    if s.proc.poll() is None:
        assert s.close(10 + SLACK) == 0, "graceful shutdown must exit with status 0"


def run_until_exit(env, timeout=20):
    """Launch the server with env, stdin at EOF; return the CompletedProcess."""
    return subprocess.run(server_argv(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=process_env(env), timeout=timeout + SLACK)


def assert_startup_refused(env, var):
    """A server started with env exits with status 2, names var on stderr
    and writes nothing to stdout; returns its stderr text."""
    p = run_until_exit(env)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2, "exit %s for %s; stderr: %s" % (p.returncode, env, err)
    assert var in err, err
    assert p.stdout == b"", p.stdout[:300]
    return err


def needs_host_files():
    """Skip where the test's host-side files and processes are not the
    server's (the container target)."""
    if TARGET == "container":
        pytest.skip("needs files or processes made on the host; a container has its own")


# --------------------------------------------------------------------------
# What a model reads, and results in assertion messages
# --------------------------------------------------------------------------

def policy_text(s):
    """Everything a model reads up front: initialize instructions, tool and
    argument descriptions, tool annotations."""
    parts = [s.init_result.get("instructions") or ""]
    for t in s.result("tools/list")["tools"]:
        parts += [t.get("description", ""), json.dumps(t.get("annotations", {}))]
        parts += [p.get("description", "") for p in t["inputSchema"].get("properties", {}).values()]
    return "\n".join(parts)


def descriptions(s):
    """Every description text of tools/list: the tools' and their arguments'."""
    texts = []
    for t in s.result("tools/list")["tools"]:
        texts.append(t.get("description", ""))
        for p in t["inputSchema"].get("properties", {}).values():
            texts.append(p.get("description", ""))
    return "\n".join(texts)


def short(obj, n=600):
    """A repr of obj with long strings shortened, for assertion messages."""
    def cut(o):
        if isinstance(o, str) and len(o) > 80:
            return o[:40] + "...(%d chars)..." % len(o) + o[-20:]
        if isinstance(o, dict):
            return {k: cut(v) for k, v in o.items()}
        if isinstance(o, list):
            return [cut(v) for v in o]
        return o
    text = repr(cut(obj))
    return text if len(text) <= n else text[:n] + "..."


def timed(fn, *args, **kw):
    """(fn's return value, seconds it took)."""
    t0 = time.monotonic()
    r = fn(*args, **kw)
    return r, time.monotonic() - t0


# --------------------------------------------------------------------------
# Results delivered by kill and wait
# --------------------------------------------------------------------------

# How long any single reply may take (generous; containers start slower).
REPLY = 20.0 + SLACK


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


# --------------------------------------------------------------------------
# Job states and slices of output
# --------------------------------------------------------------------------

def check_gap(sl, total=None):
    """The invariants of a slice with a gap; returns (head, omitted, tail)."""
    assert "omitted" in sl and "tail" in sl, "expected a slice with a gap: %r" % short(sl)
    om, tail = sl["omitted"], sl["tail"]
    assert set(om) == {"offset", "bytes"}, om
    assert set(tail) == {"data", "offset", "bytes"}, short(tail)
    assert sl["offset"] + sl["bytes"] == om["offset"], short(sl)
    assert om["offset"] + om["bytes"] == tail["offset"], short(sl)
    assert om["bytes"] > 0, short(sl)
    if total is not None:
        assert sl["total_bytes"] == total, short(sl)
        assert tail["offset"] + tail["bytes"] == total, short(sl)
    return sl["data"], om, tail


def poll_status(s, jid, pred, timeout, interval=0.1, what="the status"):
    """Call status until pred(status) holds; return that status."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        st = s.status(jid)
        if pred(st):
            return st
        seen.append(st)
        assert time.monotonic() < deadline, "%s never held within %ss; last %r" % (what, timeout, seen[-3:])
        time.sleep(interval)


def numbered(first, last):
    """What `seq first last` prints."""
    return b"".join(b"%d\n" % i for i in range(first, last + 1))
