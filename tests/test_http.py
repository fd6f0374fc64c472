"""Adversarial end-to-end tests of the HTTP transport (`mcp-exec --listen ADDR`).

  /mcp       Streamable HTTP: legacy sessions (Mcp-Session-Id, DELETE, 405 for GET,
             MCP-Protocol-Version), modern 2026-07-28 requests (no session, headers
             checked against the body: -32020, -32022, 404 + -32601), JSON or SSE
             replies, a closed response stream cancelling its request
  isolation  each legacy session its own jobs; another's job id answers as unknown
  auth       bearer token (query strings do not count), 401 + WWW-Authenticate closing
             the connection, Origin 403, a non-loopback address without a token refused
             at start, a generated token in a private file when none is set,
             MCP_EXEC_HTTP_AUTH=none, a foreign Host 421 (MCP_EXEC_HTTP_HOSTS)
  limits     16 MiB bodies (413), slow header clients cut off, MCP_EXEC_MAX_SESSIONS,
             MCP_EXEC_SESSION_IDLE, MCP_EXEC_MAX_JOBS across sessions
  gateway    /healthz, /metrics, POST /exec (SSE stdout/stderr/exit events)
  lifecycle  SIGTERM with requests in flight; 1,000 parallel requests; clients that
             vanish mid-stream; no fd, goroutine or process leaked afterwards

Every server here is started by the test itself with `--listen 127.0.0.1:0`; the
real address is read from the `serving MCP on http://ADDR/mcp` line on stderr.
Only the Python standard library and pytest are used.
"""

import http.client
import io
import itertools
import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest

from tests.helpers import (SLACK, TARGET, ToolError, await_no_token_processes, marker, process_env, read_file,
                           server_binary, token_processes, wait_until)

if TARGET != "binary":
    pytest.skip("the HTTP transport tests start the binary themselves with --listen 127.0.0.1:0 and "
                "read its /proc entries (fds, RSS, children); MCP_EXEC_TARGET=%s runs it elsewhere" % TARGET,
                allow_module_level=True)

MODERN = "2026-07-28"
LEGACY_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
TOKEN = "tok-" + uuid.uuid4().hex
ALLOWED_ORIGIN = "http://allowed.example:8080"
ACCEPT_BOTH = "application/json, text/event-stream"
HEX32 = re.compile(r"[0-9a-f]{32}")
MIB = 1024 * 1024
LISTENING = re.compile(r"serving MCP on (https?)://(\S+?)/mcp")
# Where a server with no token configured says it wrote the one it made.
TOKEN_FILE = re.compile(r"the token generated in (\S+) \(")

_ids = itertools.count(1)


def next_id():
    return next(_ids)


# --------------------------------------------------------------------------
# The server process
# --------------------------------------------------------------------------

class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    @property
    def ctype(self):
        return self.headers.get("content-type", "")

    def json(self):
        assert self.ctype.startswith("application/json"), "not a JSON reply: %r" % self
        return json.loads(self.body.decode("utf-8"))

    def events(self):
        return parse_sse(self.body)

    def __repr__(self):
        return "<HTTP %s %r %.400r>" % (self.status, self.headers, self.body)


def parse_sse(raw):
    """[(event, data)] of a complete text/event-stream body."""
    return list(iter_sse(io.BytesIO(raw)))


def iter_sse(resp):
    """Yield (event, data) from a live response as each event completes."""
    event, data = None, []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data or event:
                yield (event or "message", "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)


class HttpServer:
    """An `mcp-exec --listen` process and a small HTTP client for it."""

    def __init__(self, env=None, listen="127.0.0.1:0", expect_start=True):
        self.env = dict(env or {})
        self.token = self.env.get("MCP_EXEC_TOKEN")
        self.token_file = None  # the file of the token the server made, when it made one
        self.proc = subprocess.Popen([server_binary(), "--listen", listen], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=process_env(self.env))
        self.pid = self.proc.pid
        self._cond = threading.Condition()
        self.stderr_lines = []
        self.stdout = b""
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._err.start()
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._out.start()
        self.addr = None
        if expect_start:
            m = self.wait_stderr(LISTENING, 10 + SLACK)
            self.addr = m.group(2)
            host, _, port = self.addr.rpartition(":")
            self.host, self.port = host.strip("[]"), int(port)
            if self.token is None and "MCP_EXEC_TOKEN_FILE" not in self.env:
                # no token given: the server made one, in a file its user (ours) reads
                m = TOKEN_FILE.search(self.stderr_text)
                if m:
                    self.token_file = m.group(1)
                    self.token = read_file(self.token_file, "r").strip()

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            with self._cond:
                self.stderr_lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self.stderr_lines.append(None)
            self._cond.notify_all()

    def _read_stdout(self):
        data = self.proc.stdout.read()
        with self._cond:
            self.stdout = data

    @property
    def stderr_text(self):
        with self._cond:
            return "".join(l for l in self.stderr_lines if l)

    def wait_stderr(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.stderr_lines:
                    if line is None:
                        raise AssertionError("server exited (%r) before printing %r; stderr: %s"
                                             % (self.proc.poll(), pattern.pattern, self.stderr_text))
                    m = pattern.search(line)
                    if m:
                        return m
                remaining = deadline - time.monotonic()
                assert remaining > 0, "no %r on stderr within %ss: %s" % (pattern.pattern, timeout, self.stderr_text)
                self._cond.wait(remaining)

    # ---- HTTP ----------------------------------------------------------

    def conn(self, timeout=30):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def auth_headers(self, token=True):
        if token is True:
            token = self.token
        return {"Authorization": "Bearer " + token} if token else {}

    def request(self, method, path, body=None, headers=None, token=True, timeout=30, conn=None):
        h = self.auth_headers(token)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        own = conn is None
        c = conn or self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return Reply(r.status, r.getheaders(), r.read())
        finally:
            if own:
                c.close()

    def post_mcp(self, msg, headers=None, **kw):
        h = {"Accept": ACCEPT_BOTH}
        h.update(headers or {})
        return self.request("POST", "/mcp", msg, h, **kw)

    def modern(self, method, params=None, id=None, headers=None, version=MODERN, **kw):
        msg = modern_msg(method, params, id=next_id() if id is None else id, version=version)
        h = modern_headers(msg)
        h.update(headers or {})
        return self.post_mcp(msg, h, **kw)

    def modern_tool(self, name, args, **kw):
        r = self.modern("tools/call", {"name": name, "arguments": args}, **kw)
        assert r.status == 200, r
        return tool_value(r.json())

    def exec_events(self, body, timeout=60, **kw):
        r = self.request("POST", "/exec", body, timeout=timeout, **kw)
        assert r.status == 200, r
        assert r.ctype.startswith("text/event-stream"), r
        return [(e, json.loads(d)) for e, d in r.events()]

    def healthz(self):
        r = self.request("GET", "/healthz", token=None)
        assert r.status == 200, r
        return r.json()

    def metrics(self):
        r = self.request("GET", "/metrics")
        assert r.status == 200, r
        return parse_metrics(r.body.decode())

    # ---- /proc ---------------------------------------------------------

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def rss_kib(self):
        status = read_file("/proc/%d/status" % self.pid, "r") or ""
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return int(m.group(1)) if m else 0

    def descendants(self):
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            for task in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else []:
                kids = (read_file("/proc/%d/task/%s/children" % (pid, task), "r") or "").split()
                for k in kids:
                    found.append(int(k))
                    todo.append(int(k))
        return found

    # ---- lifecycle -----------------------------------------------------

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("server did not exit within %ss of SIGTERM" % timeout)
        self._err.join(5)
        self._out.join(5)
        return self.proc.returncode


def modern_msg(method, params=None, id=1, version=MODERN):
    p = dict(params or {})
    meta = dict(p.get("_meta") or {})
    meta.setdefault("io.modelcontextprotocol/protocolVersion", version)
    meta.setdefault("io.modelcontextprotocol/clientCapabilities", {})
    p["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": p}


def modern_headers(msg):
    h = {"MCP-Protocol-Version": msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
         "Mcp-Method": msg["method"]}
    if msg["method"] == "tools/call":
        h["Mcp-Name"] = msg["params"]["name"]
    return h


def tool_value(msg):
    assert "error" not in msg, "tools/call answered a JSON-RPC error: %r" % msg
    res = msg["result"]
    text = res["content"][0]["text"]
    if res.get("isError"):
        raise ToolError(text)
    return json.loads(text)


def tool_error_text(msg):
    assert "error" not in msg, msg
    res = msg["result"]
    assert res.get("isError") is True, "expected a tool error: %r" % res
    return res["content"][0]["text"]


def parse_metrics(text):
    """{name or name{labels}: value} of Prometheus text; every line must parse."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)', line)
        assert m, "not a Prometheus sample line: %r" % line
        out[m.group(1)] = float(m.group(2))
    return out


class Session:
    """A legacy MCP session over HTTP."""

    def __init__(self, srv, version="2025-06-18", token=True):
        self.srv, self.version, self.token = srv, version, token
        r = srv.post_mcp({"jsonrpc": "2.0", "id": next_id(), "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "http-e2e", "version": "0"}}}, token=token)
        assert r.status == 200, r
        self.init_result = r.json()["result"]
        self.sid = r.headers.get("mcp-session-id")
        assert self.sid and HEX32.fullmatch(self.sid), "Mcp-Session-Id must be 128-bit hex: %r" % r
        r = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert r.status == 202, r

    def headers(self, extra=None):
        h = {"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": self.version}
        h.update(extra or {})
        return h

    def post(self, msg, headers=None, **kw):
        kw.setdefault("token", self.token)
        return self.srv.post_mcp(msg, self.headers(headers), **kw)

    def call(self, method, params=None, **kw):
        msg = {"jsonrpc": "2.0", "id": next_id(), "method": method}
        if params is not None:
            msg["params"] = params
        r = self.post(msg, **kw)
        assert r.status == 200, r
        reply = r.json()
        assert reply.get("id") == msg["id"], (msg, reply)
        return reply

    def tool_msg(self, name, args, **kw):
        return self.call("tools/call", {"name": name, "arguments": args}, **kw)

    def tool(self, name, args=None, **kw):
        return tool_value(self.tool_msg(name, args or {}, **kw))

    def tool_err(self, name, args=None, **kw):
        return tool_error_text(self.tool_msg(name, args or {}, **kw))

    def job(self, command, **kw):
        args = {"command": command, "nowait": True}
        args.update(kw)
        r = self.tool("execute", args)
        assert r["state"] == "running", r
        assert HEX32.fullmatch(r["job_id"]), "job ids must be 32 hex chars: %r" % r
        return r["job_id"]

    def delete(self):
        return self.srv.request("DELETE", "/mcp", headers={"Mcp-Session-Id": self.sid}, token=self.token)


def wait_token(tok, count=1, timeout=10):
    return wait_until(lambda: len(token_processes(tok)) >= count and token_processes(tok), timeout,
                      "%d job process(es) carrying MCPX_TOKEN=%s" % (count, tok))


def assert_no_token_processes(tok, timeout=5.0):
    left = await_no_token_processes(tok, timeout=timeout)
    assert not left, "job processes left running: %r" % left


def raw_socket(srv, timeout=30):
    s = socket.create_connection((srv.host, srv.port), timeout=timeout)
    return s


def raw_head(srv, method, path, headers, length=None):
    h = dict(srv.auth_headers())
    h["Host"] = srv.addr
    h.update(headers)
    if length is not None:
        h["Content-Length"] = str(length)
    lines = ["%s %s HTTP/1.1" % (method, path)] + ["%s: %s" % kv for kv in h.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_status_line(sock, timeout):
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def abort(sock):
    """Close a socket with a RST, as a crashed client does."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def abort_response(conn, resp):
    """Reset the connection under a response being read (http.client keeps the
    socket open while the response's file object refers to it)."""
    sock = conn.sock
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except (OSError, AttributeError):
        pass
    conn.close()
    resp.close()


def vanish(conn):
    """Drop an http.client connection from under its response."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass
    conn.close()


# --------------------------------------------------------------------------
# The shared server: token, one allowed origin, fast progress, debug/stats
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def srv():
    s = HttpServer({"MCP_EXEC_TOKEN": TOKEN, "MCP_EXEC_ALLOWED_ORIGINS": ALLOWED_ORIGIN,
                    "MCP_EXEC_PROGRESS_INTERVAL": "0.2", "MCP_EXEC_DEBUG": "1"})
    # warm up every path once, then take the baseline the leak test compares with
    sess = Session(s)
    sess.tool("execute", {"command": "echo warm"})
    s.exec_events({"command": "echo warm"})
    s.modern_tool("list_jobs", {})
    assert sess.delete().status == 204
    s.baseline = {"fds": s.fds(), "goroutines": debug_stats(s)["goroutines"]}
    yield s
    assert s.stop() == 0, s.stderr_text
    assert s.stdout == b"", "an HTTP server must write nothing on stdout: %r" % s.stdout[:300]


def debug_stats(srv):
    sess = Session(srv)
    try:
        return sess.call("debug/stats", {"collect": True})["result"]
    finally:
        sess.delete()


@pytest.fixture
def servers():
    """Factory of extra HTTP servers, each stopped after the test."""
    made = []

    def make(env=None, **kw):
        s = HttpServer(env, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


# --------------------------------------------------------------------------
# Start-up
# --------------------------------------------------------------------------

def test_port_zero_prints_the_real_address(srv):
    assert srv.port > 0 and srv.host == "127.0.0.1", srv.addr
    assert srv.healthz()["status"] == "ok"


def test_listen_from_the_environment(servers):
    env = {"MCP_EXEC_LISTEN": "127.0.0.1:0"}
    p = subprocess.Popen([server_binary()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=process_env(env))
    try:
        line = b""
        deadline = time.monotonic() + 10 + SLACK
        while not LISTENING.search(line.decode()) and time.monotonic() < deadline:
            line += p.stderr.read1(4096) if hasattr(p.stderr, "read1") else p.stderr.readline()
        m = LISTENING.search(line.decode())
        assert m, "MCP_EXEC_LISTEN did not start the HTTP transport: %r" % line
        host, _, port = m.group(2).rpartition(":")
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200
        c.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


@pytest.mark.parametrize("listen", ["0.0.0.0:0", ":0", "[::]:0"])
def test_non_loopback_without_token_refused_at_startup(listen):
    r = subprocess.run([server_binary(), "--listen", listen], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=process_env({}), timeout=10 + SLACK)
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = r.stderr.decode()
    assert "MCP_EXEC_TOKEN" in err and "serving" not in err, err


def test_non_loopback_with_token_file_starts(servers, tmp_path):
    f = tmp_path / "token"
    f.write_text("  %s\n" % TOKEN)
    s = servers({"MCP_EXEC_TOKEN_FILE": str(f)}, listen="0.0.0.0:0")
    s.host, s.token = "127.0.0.1", TOKEN
    assert s.request("GET", "/metrics", token=None).status == 401
    assert s.request("GET", "/metrics").status == 200
    Session(s).delete()


def test_loopback_without_token_makes_a_private_one(servers, tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    s = servers({"XDG_RUNTIME_DIR": str(run)})
    path = run / "mcp-exec" / ("http-%d.token" % s.port)
    assert s.token_file == str(path), s.stderr_text
    assert oct(path.stat().st_mode & 0o777) == oct(0o600) and oct(path.parent.stat().st_mode & 0o777) == oct(0o700)
    assert s.token and s.token not in s.stderr_text
    r = s.request("GET", "/metrics", token=None)
    assert r.status == 401 and str(path).encode() in r.body, r
    assert s.request("GET", "/metrics").status == 200
    assert s.stop() == 0
    assert not path.exists(), "a port the kernel picked is not asked for again: its token file should go"
    # On a fixed port the file stays for the next start: a client set up once keeps working.
    listen = "127.0.0.1:%d" % s.port
    first = servers({"XDG_RUNTIME_DIR": str(run)}, listen=listen)
    assert first.token_file == str(path) and first.stop() == 0, first.stderr_text
    assert path.read_text().strip() == first.token, "the generated token's file did not stay"
    printed = subprocess.run([server_binary(), "--token-file", "--listen", listen],
                             env=dict({k: v for k, v in os.environ.items() if not k.startswith("MCP_EXEC_")}, XDG_RUNTIME_DIR=str(run)),
                             capture_output=True, text=True, timeout=10)
    assert printed.returncode == 0 and printed.stdout == str(path) + "\n", printed
    again = servers({"XDG_RUNTIME_DIR": str(run)}, listen=listen)
    assert again.token == first.token and again.request("GET", "/metrics").status == 200, again.stderr_text
    assert again.stop() == 0
    # A file others may read is not trusted: a new token replaces it.
    path.chmod(0o644)
    third = servers({"XDG_RUNTIME_DIR": str(run)}, listen=listen)
    assert third.token != first.token and oct(path.stat().st_mode & 0o777) == oct(0o600), third.stderr_text


# What a job of the server runs to call its own server: it reads the token
# file, asks list_jobs in the outside client's session and starts a nowait
# job as a 2026-07-28 client, and prints one JSON line per answer.
CALL_HOME = r"""
import http.client, json, sys
token_file, port, sid, mark = sys.argv[1:5]
token = open(token_file).read().strip()
def post(body, headers):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=20)
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    h.update(headers)
    c.request("POST", "/mcp", json.dumps(body), h)
    r = c.getresponse()
    print(json.dumps({"status": r.status, "body": r.read().decode()}), flush=True)
post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
      "params": {"name": "list_jobs", "arguments": {}}},
     {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"})
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
      "params": {"name": "execute", "arguments": {"command": "sleep 300 # " + mark, "nowait": True}, "_meta": meta}},
     {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute"})
"""


@pytest.mark.parametrize("sandbox", ["off", "read-only"])
def test_job_is_no_client_of_its_own_server(servers, tmp_path, sandbox):
    """A job can read the token the server generated, but a connection from
    one of the server's own jobs is refused (403) whatever token it shows:
    it could otherwise list, read and kill other clients' jobs, or start a
    job its own kill never reaches. The outside client still sees its own."""
    import sys
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    script = tmp_path / "call_home.py"
    script.write_text(CALL_HOME)
    env = {"XDG_RUNTIME_DIR": str(run), "MCP_EXEC_SANDBOX": sandbox, "SHELL": "/bin/sh"}
    try:
        s = servers(env)
    except AssertionError as e:
        if sandbox != "off" and "MCP_EXEC_SANDBOX" in str(e):
            pytest.skip("the kernel cannot enforce MCP_EXEC_SANDBOX=%s here: %s" % (sandbox, e))
        raise
    assert s.token_file and s.token, s.stderr_text
    sess = Session(s)
    mine = sess.job("sleep 60 # " + marker())
    mark = marker()
    r = sess.tool("execute", {"command": "%s %s %s %d %s %s" % (sys.executable, script, s.token_file, s.port, sess.sid, mark)})
    assert r["exit_code"] == 0, r
    answers = [json.loads(line) for line in r["stdout"]["data"].splitlines()]
    assert len(answers) == 2, r
    for a in answers:
        assert a["status"] == 403, a
        err = json.loads(a["body"])["error"]
        assert err["message"].startswith("refused: this connection comes from a process of one of this "
                                         "server's own jobs (pid "), err
        assert "may not act as a client of the server that runs it" in err["message"], err
    listed = sess.tool("list_jobs")
    assert mine in json.dumps(listed), listed
    modern = s.modern_tool("list_jobs", {})
    assert mark not in json.dumps(modern), "the job started a job through its own server: %r" % modern
    sess.tool("kill", {"job_id": mine, "signal": "KILL"})
    sess.delete()


def test_auth_none_serves_without_a_token_and_says_so(servers):
    s = servers({"MCP_EXEC_HTTP_AUTH": "none"})
    assert "MCP_EXEC_HTTP_AUTH=none" in s.stderr_text and "token generated" not in s.stderr_text
    assert s.request("GET", "/metrics", token=None).status == 200


@pytest.mark.parametrize("env", [{"MCP_EXEC_HTTP_AUTH": "none", "MCP_EXEC_TOKEN": TOKEN},
                                 {"MCP_EXEC_HTTP_AUTH": "open"}])
def test_auth_setting_contradictions_refused(env):
    r = subprocess.run([server_binary(), "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=process_env(env), timeout=10 + SLACK)
    assert r.returncode == 2 and b"MCP_EXEC_HTTP_AUTH" in r.stderr and b"serving" not in r.stderr, r.stderr


def test_auth_none_off_loopback_refused():
    r = subprocess.run([server_binary(), "--listen", "0.0.0.0:0"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=process_env({"MCP_EXEC_HTTP_AUTH": "none"}), timeout=10 + SLACK)
    assert r.returncode == 2 and b"MCP_EXEC_TOKEN" in r.stderr and b"serving" not in r.stderr, r.stderr


def test_refused_request_closes_its_connection(srv):
    sock = raw_socket(srv)
    try:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n" % srv.addr.encode())
        sock.settimeout(10 + SLACK)
        data = b""
        while True:  # the server closes the connection after its 401: recv sees the end
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        assert data.startswith(b"HTTP/1.1 401") and b"Connection: close" in data, data[:200]
    finally:
        sock.close()


def test_foreign_host_refused_with_421(srv):
    r = srv.request("GET", "/metrics", headers={"Host": "rebind.example:%d" % srv.port})
    assert r.status == 421 and b"MCP_EXEC_HTTP_HOSTS" in r.body, r
    assert srv.request("GET", "/metrics", headers={"Host": "localhost:%d" % srv.port}).status == 200


def test_off_loopback_answers_any_host(servers):
    s = servers({"MCP_EXEC_TOKEN": TOKEN}, listen="0.0.0.0:0")
    s.host = "127.0.0.1"
    assert s.request("GET", "/metrics", headers={"Host": "10.1.2.3:8080"}).status == 200
    assert s.request("GET", "/metrics", headers={"Host": "mcp-exec.agents.svc:8080"}).status == 200


# --------------------------------------------------------------------------
# Legacy sessions
# --------------------------------------------------------------------------

def test_initialize_issues_a_fresh_session_id(srv):
    a, b = Session(srv), Session(srv)
    assert a.sid != b.sid
    assert a.init_result["protocolVersion"] == "2025-06-18"
    assert a.call("ping")["result"] == {}
    a.delete(), b.delete()


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_each_legacy_version_header_is_accepted(srv, version):
    s = Session(srv, version=version)
    assert s.init_result["protocolVersion"] == version
    assert s.call("ping")["result"] == {}
    assert s.delete().status == 204


def test_post_without_session_id_is_400(srv):
    r = srv.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status == 400, r


@pytest.mark.parametrize("sid", [uuid.uuid4().hex, "0" * 32, "x", "../" * 20])
def test_unknown_session_id_is_404(srv, sid):
    r = srv.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Mcp-Session-Id": sid})
    assert r.status == 404, r


def test_delete_ends_the_session_and_its_jobs(srv):
    s = Session(srv)
    tok = uuid.uuid4().hex
    s.job("sleep 300", env={"MCPX_TOKEN": tok})
    wait_token(tok)
    r = s.delete()
    assert r.status == 204, r
    assert_no_token_processes(tok)
    r = s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status == 404, "a deleted session must answer 404: %r" % r
    assert s.delete().status == 404


def test_get_mcp_is_405(srv):
    s = Session(srv)
    r = srv.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": s.sid})
    assert r.status == 405, r
    s.delete()


@pytest.mark.parametrize("bad", ["1999-01-01", MODERN, "garbage", "2025-6-18"])
def test_unsupported_protocol_version_header_is_400(srv, bad):
    s = Session(srv)
    r = s.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, {"MCP-Protocol-Version": bad})
    assert r.status == 400, r
    s.delete()


def test_notifications_get_202_and_no_body(srv):
    s = Session(srv)
    r = s.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})
    assert r.status == 202 and r.body == b"", r
    s.delete()


def test_reply_is_json_without_progress_token_even_when_sse_accepted(srv):
    s = Session(srv)
    r = s.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "execute", "arguments": {"command": "echo hi"}}})
    assert r.status == 200 and r.ctype.startswith("application/json"), r
    assert tool_value(r.json())["stdout"]["data"] == "hi\n"
    s.delete()


def test_sse_stream_carries_progress_then_the_reply(srv):
    s = Session(srv)
    msg = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
           "params": {"name": "execute", "arguments": {"command": "sleep 1; echo done"},
                      "_meta": {"progressToken": "pt-1"}}}
    r = s.post(msg)
    assert r.status == 200 and r.ctype.startswith("text/event-stream"), r
    # the exact framing: event: message / data: {json} / blank line
    assert re.fullmatch(rb"(event: message\ndata: \{[^\n]*\}\n\n)+", r.body), r.body[:500]
    msgs = [json.loads(d) for e, d in r.events()]
    assert all(e == "message" for e, _ in r.events())
    progress, final = msgs[:-1], msgs[-1]
    assert final["id"] == 77 and tool_value(final)["stdout"]["data"] == "done\n", final
    assert progress, "a 1 s call with a 0.2 s progress interval sent no progress"
    for p in progress:
        assert p["method"] == "notifications/progress" and p["params"]["progressToken"] == "pt-1", p
    s.delete()


def test_progress_token_without_sse_accept_gets_json(srv):
    s = Session(srv)
    msg = {"jsonrpc": "2.0", "id": 78, "method": "tools/call",
           "params": {"name": "execute", "arguments": {"command": "sleep 0.5; echo x"},
                      "_meta": {"progressToken": 5}}}
    r = s.post(msg, {"Accept": "application/json"})
    assert r.status == 200 and r.ctype.startswith("application/json"), r
    assert tool_value(r.json())["stdout"]["data"] == "x\n"
    s.delete()


def _start_blocking(srv, headers, msg, timeout=30):
    c = srv.conn(timeout)
    h = srv.auth_headers()
    h.update({"Content-Type": "application/json", "Accept": ACCEPT_BOTH})
    h.update(headers)
    c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=h)
    return c


def test_closing_the_response_cancels_a_blocking_execute(srv):
    s = Session(srv)
    tok = uuid.uuid4().hex
    c = _start_blocking(srv, s.headers(), {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"command": "sleep 300", "env": {"MCPX_TOKEN": tok}}}})
    wait_token(tok)
    vanish(c)
    assert_no_token_processes(tok, timeout=5 + SLACK)
    # the session survives, the id may be used again, and no job is left behind
    assert s.call("ping")["result"] == {}
    assert s.tool("list_jobs")["jobs"] == []
    s.delete()


def test_client_vanishing_mid_sse_stream_cancels(srv):
    s = Session(srv)
    tok = uuid.uuid4().hex
    c = _start_blocking(srv, s.headers(), {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"command": "sleep 300", "env": {"MCPX_TOKEN": tok}},
        "_meta": {"progressToken": "v"}}})
    resp = c.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/event-stream")
    ev = next(iter_sse(resp))
    assert json.loads(ev[1])["method"] == "notifications/progress"
    wait_token(tok)
    abort_response(c, resp)
    assert_no_token_processes(tok, timeout=5 + SLACK)
    assert s.tool("list_jobs")["jobs"] == []
    s.delete()


def test_notifications_need_a_session_too(srv):
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert srv.post_mcp(note).status == 400
    assert srv.post_mcp(note, {"Mcp-Session-Id": uuid.uuid4().hex}).status == 404


def test_parallel_requests_in_one_session(srv):
    s = Session(srv)
    results, lock = {}, threading.Lock()

    def one(i):
        r = s.tool("execute", {"command": "sleep 0.2; echo %d" % i})
        with lock:
            results[i] = r["stdout"]["data"]

    ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert results == {i: "%d\n" % i for i in range(20)}
    assert time.monotonic() - t0 < 3, "one session's requests ran one at a time"
    s.delete()


def test_delete_with_a_request_in_flight(srv):
    s = Session(srv)
    tok = uuid.uuid4().hex
    c = _start_blocking(srv, s.headers(), {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"command": "sleep 300", "env": {"MCPX_TOKEN": tok}}}})
    wait_token(tok)
    assert s.delete().status == 204
    assert_no_token_processes(tok)
    # the in-flight request is answered (an error) or its connection closed, promptly
    got = _finish_within(c, 3 + SLACK)
    assert not (isinstance(got, str) and "hangs" in got), got
    if isinstance(got, tuple):
        assert "error" in got[1] or tool_value(got[1])["state"] != "success", got


# --------------------------------------------------------------------------
# Isolation
# --------------------------------------------------------------------------

def _normalize(text, jid):
    return text.replace(jid, "<ID>")


def test_another_sessions_job_is_unknown(srv):
    a, b = Session(srv), Session(srv)
    tok = uuid.uuid4().hex
    jid = a.job("sleep 300", env={"MCPX_TOKEN": tok})
    wait_token(tok)
    never = uuid.uuid4().hex
    calls = [("status", {}), ("output", {}), ("kill", {"signal": "KILL"}), ("input", {"data": "x"})]
    for name, extra in calls:
        theirs = b.tool_err(name, dict(extra, job_id=jid))
        unknown = b.tool_err(name, dict(extra, job_id=never))
        assert "unknown job_id" in theirs, theirs
        assert _normalize(theirs, jid) == _normalize(unknown, never), (name, theirs, unknown)
    m_theirs = b.tool_msg("wait", {"job_ids": [jid], "timeout": 0.1})
    m_unknown = b.tool_msg("wait", {"job_ids": [never], "timeout": 0.1})
    assert json.dumps(m_theirs["result"]).replace(jid, "<ID>") == \
        json.dumps(m_unknown["result"]).replace(never, "<ID>"), (m_theirs, m_unknown)
    assert b.tool("list_jobs")["jobs"] == []
    # the modern era's jobs belong to the credential, not to a's session
    with pytest.raises(ToolError, match="unknown job_id"):
        srv.modern_tool("status", {"job_id": jid})
    assert jid not in [j["job_id"] for j in srv.modern_tool("list_jobs", {})["jobs"]]
    # nothing b did touched a's job
    assert token_processes(tok), "another session's kill reached the job"
    assert a.tool("status", {"job_id": jid})["state"] == "running"
    a.delete(), b.delete()
    assert_no_token_processes(tok)


def test_a_session_id_is_not_shared_by_guessing(srv):
    a = Session(srv)
    ids = {Session(srv).sid for _ in range(20)}
    assert len(ids) == 20 and a.sid not in ids
    # no two ids share a long prefix: they are random, not counters
    assert len({i[:8] for i in ids}) == 20
    a.delete()


# --------------------------------------------------------------------------
# The modern era over HTTP
# --------------------------------------------------------------------------

def test_modern_discover_needs_no_session(srv):
    r = srv.modern("server/discover")
    assert r.status == 200, r
    res = r.json()["result"]
    assert res["supportedVersions"] == [MODERN] and res["resultType"] == "complete"
    assert "mcp-session-id" not in r.headers, r


def test_modern_tool_call(srv):
    out = srv.modern_tool("execute", {"command": "echo modern"})
    assert out["stdout"]["data"] == "modern\n"


@pytest.mark.parametrize("case", ["version-missing", "version-other", "version-legacy", "method-missing",
                                  "method-other", "name-missing", "name-other"])
def test_modern_header_mismatch_is_400_32020(srv, case):
    msg = modern_msg("tools/call", {"name": "list_jobs", "arguments": {}}, id=41)
    h = modern_headers(msg)
    what, _, how = case.partition("-")
    key = {"version": "MCP-Protocol-Version", "method": "Mcp-Method", "name": "Mcp-Name"}[what]
    if how == "missing":
        del h[key]
    else:
        h[key] = {"version": "2025-06-18" if how == "legacy" else "2026-07-29", "method": "tools/list",
                  "name": "execute"}[what]
    r = srv.post_mcp(msg, h)
    assert r.status == 400, r
    e = r.json()
    assert e["id"] == 41 and e["error"]["code"] == -32020, e


def test_modern_unsupported_version_is_400_32022(srv):
    r = srv.modern("tools/list", version="2099-01-01", id=42)
    assert r.status == 400, r
    e = r.json()["error"]
    assert e["code"] == -32022 and MODERN in e["data"]["supported"], e


def test_modern_unknown_method_is_404_32601(srv):
    r = srv.modern("no/such/method", id=43)
    assert r.status == 404, r
    assert r.json()["error"]["code"] == -32601


def test_modern_jobs_belong_to_the_credential(srv):
    tok = uuid.uuid4().hex
    r = srv.modern_tool("execute", {"command": "sleep 300", "nowait": True, "env": {"MCPX_TOKEN": tok}})
    jid = r["job_id"]
    assert HEX32.fullmatch(jid), r
    # another connection with the same token sees it; a legacy session does not
    assert srv.modern_tool("status", {"job_id": jid})["state"] == "running"
    s = Session(srv)
    assert "unknown job_id" in s.tool_err("status", {"job_id": jid})
    s.delete()
    srv.modern_tool("kill", {"job_id": jid, "signal": "KILL"})
    assert_no_token_processes(tok)


def test_modern_closing_the_response_cancels(srv):
    tok = uuid.uuid4().hex
    msg = modern_msg("tools/call", {"name": "execute", "arguments": {"command": "sleep 300",
                                                                      "env": {"MCPX_TOKEN": tok}}}, id=next_id())
    c = _start_blocking(srv, modern_headers(msg), msg)
    wait_token(tok)
    vanish(c)
    assert_no_token_processes(tok, timeout=5 + SLACK)


def _modern_blocking(srv, rid, command, tok=None):
    args = {"command": command}
    if tok:
        args["env"] = {"MCPX_TOKEN": tok}
    msg = modern_msg("tools/call", {"name": "execute", "arguments": args}, id=rid)
    return _start_blocking(srv, modern_headers(msg), msg)


def _finish(conn):
    """(status, reply); the reply is None when the response carries none
    (204: a cancelled request, to which MCP sends no reply)."""
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, (json.loads(body) if body else None)


def test_modern_clients_may_use_the_same_request_id(srv):
    """Two independent modern clients (same credential) each number their
    requests from 1: over HTTP every request has its own response, so ids
    need not be unique across clients."""
    ta = uuid.uuid4().hex
    ca = _modern_blocking(srv, 1, "sleep 1; echo A", ta)
    wait_token(ta)
    r = srv.modern("tools/call", {"name": "execute", "arguments": {"command": "echo B"}}, id=1)
    a_status, a_reply = _finish(ca)
    assert a_status == 200 and tool_value(a_reply)["stdout"]["data"] == "A\n", a_reply
    assert r.status == 200, r
    b_reply = r.json()
    assert "error" not in b_reply, "client B was refused because client A used the same id: %r" % b_reply
    assert tool_value(b_reply)["stdout"]["data"] == "B\n"


def _finish_within(conn, seconds):
    """(status, reply) of a blocking request, or a string saying why there is none."""
    conn.sock.settimeout(seconds)
    try:
        return _finish(conn)
    except socket.timeout:
        conn.close()
        return "no response within %ss: the request hangs" % seconds
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        return "connection closed: %r" % e


def _modern_same_id_attack(srv, attack):
    ta = uuid.uuid4().hex
    ca = _modern_blocking(srv, 7, "sleep 1.5; echo A", ta)
    wait_token(ta)
    if attack == "vanishing-requests":
        # a padded body takes the server a few ms to decode: by then it has seen
        # the client go, and its answer races the cancellation of "id 7"
        msg = modern_msg("tools/call", {"name": "list_jobs", "arguments": {}, "pad": "p" * (2 * MIB)}, id=7)
        body = json.dumps(msg).encode()
        h = dict(modern_headers(msg), **{"Content-Type": "application/json", "Accept": ACCEPT_BOTH})
        req = raw_head(srv, "POST", "/mcp", h, length=len(body)) + body
        for i in range(20):
            sock = raw_socket(srv)
            sock.sendall(req)
            sock.close()
            if i % 4 == 3 and not token_processes(ta):
                break
    else:
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
            "requestId": 7, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        srv.post_mcp(note, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"})
    alive = bool(token_processes(ta))
    got = _finish_within(ca, 4)
    await_no_token_processes(ta, timeout=1)
    return alive, got


@pytest.mark.parametrize("attack", ["vanishing-requests", "cancel-notification"])
def test_modern_clients_cannot_cancel_each_other(srv, attack):
    """A modern client that vanishes, or sends notifications/cancelled, cancels
    its own request only: never another client's request that has the same id."""
    alive, got = _modern_same_id_attack(srv, attack)
    assert isinstance(got, tuple) and got[0] == 200 and "error" not in got[1], \
        "another client's %s cancelled client A's request (job alive afterwards: %s): %r" % (attack, alive, got)
    assert tool_value(got[1])["stdout"]["data"] == "A\n", got


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_cancelled_request_does_not_hang_its_response(srv, era):
    """A request cancelled by its own client's notifications/cancelled gets no
    JSON-RPC reply (MCP), but its HTTP response must still end (closed or
    answered), not hang until the client gives up, and its job must go."""
    if era == "modern":
        pytest.skip("over HTTP a 2026-07-28 request is cancelled by closing its response: its "
                    "notifications/cancelled names an id other clients of the credential may use too "
                    "(test_modern_clients_cannot_cancel_each_other)")
    tok = uuid.uuid4().hex
    args = {"command": "sleep 300", "env": {"MCPX_TOKEN": tok}}
    if era == "modern":
        c = _modern_blocking(srv, 8, args["command"], tok)
        h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"}
    else:
        sess = Session(srv)
        h = sess.headers()
        c = _start_blocking(srv, h, {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                     "params": {"name": "execute", "arguments": args}})
    wait_token(tok)
    r = srv.post_mcp({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}, h)
    assert r.status == 202, r
    assert_no_token_processes(tok, timeout=5 + SLACK)
    got = _finish_within(c, 3 + SLACK)
    assert not (isinstance(got, str) and "hangs" in got), got
    if era == "legacy":
        sess.delete()


# --------------------------------------------------------------------------
# Auth and Origin
# --------------------------------------------------------------------------

@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer ", "Bearer wrong", "Bearer " + TOKEN + "x",
                                  "Bearer " + TOKEN[:-1], "Basic " + TOKEN, "Token " + TOKEN,
                                  "Bearer  " + TOKEN, TOKEN])
@pytest.mark.parametrize("method,path", [("POST", "/mcp"), ("GET", "/metrics"), ("POST", "/exec"),
                                         ("DELETE", "/mcp")])
def test_missing_or_wrong_token_is_401(srv, auth, method, path):
    h = {"Authorization": auth} if auth is not None else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}} \
        if path == "/mcp" else ({"command": "echo pwned"} if path == "/exec" else None)
    if method == "DELETE":
        body = None
    r = srv.request(method, path, body, h, token=None)
    assert r.status == 401, r
    assert r.headers.get("www-authenticate", "").lower().startswith("bearer"), r
    assert b"pwned" not in r.body


@pytest.mark.parametrize("query", ["token=" + TOKEN, "access_token=" + TOKEN, "auth=Bearer%20" + TOKEN])
def test_token_in_query_string_does_not_count(srv, query):
    r = srv.request("GET", "/metrics?" + query, token=None)
    assert r.status == 401, r
    r = srv.request("POST", "/exec?" + query, {"command": "echo pwned"}, token=None)
    assert r.status == 401 and b"pwned" not in r.body, r


def test_healthz_needs_no_token(srv):
    h = srv.healthz()
    assert h["status"] == "ok", h


@pytest.mark.parametrize("origin", ["http://evil.example", "null", ALLOWED_ORIGIN + "/",
                                    "http://allowed.example", "https://allowed.example:8080"])
def test_foreign_origin_is_403(srv, origin):
    r = srv.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}},
        {"Origin": origin})
    assert r.status == 403, r
    assert "mcp-session-id" not in r.headers
    r = srv.request("POST", "/exec", {"command": "echo pwned"}, {"Origin": origin})
    assert r.status == 403 and b"pwned" not in r.body, r


def test_allowed_origin_is_served(srv):
    s = Session(srv)
    r = s.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"Origin": ALLOWED_ORIGIN})
    assert r.status == 200, r
    s.delete()


# --------------------------------------------------------------------------
# Bodies and slow clients
# --------------------------------------------------------------------------

def _oversized(srv, path, headers, body_prefix, size, chunked=False):
    """Send a body of `size` bytes starting with body_prefix (padding after it)
    from a thread, and return the response head the server sends meanwhile
    (b"" if it sends none within 20 s)."""
    sock = raw_socket(srv, timeout=20)
    h = dict(headers, **{"Content-Type": "application/json"})
    if chunked:
        h["Transfer-Encoding"] = "chunked"
    sock.sendall(raw_head(srv, "POST", path, h, length=None if chunked else size))

    def send(data):
        sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)

    def sender():
        try:
            send(body_prefix)
            pad = b" " * (64 * 1024)
            left = size - len(body_prefix)
            while left > 0:
                n = min(left, len(pad))
                send(pad[:n])
                left -= n
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may stop reading once it has answered

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    abort(sock)
    t.join(5)
    return got


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_16_mib_is_413(srv, chunked):
    s = Session(srv)
    got = _oversized(srv, "/mcp", {"Mcp-Session-Id": s.sid, "MCP-Protocol-Version": s.version},
                     b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"', 16 * MIB + 4096, chunked)
    assert got.startswith(b"HTTP/1.1 413"), got[:300]
    assert s.call("ping")["result"] == {}
    s.delete()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_exec_body_over_16_mib_is_413(srv, chunked):
    got = _oversized(srv, "/exec", {}, b'{"command":"echo pwned","stdin":"', 16 * MIB + 4096, chunked)
    assert got.startswith(b"HTTP/1.1 413"), got[:300]


def test_body_just_under_16_mib_is_not_refused(srv):
    s = Session(srv)
    pad = "a" * (16 * MIB - 200)
    r = s.post({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"pad": pad}})
    assert r.status != 413, r
    s.delete()


def _parallel_pings(srv, threads, per_thread):
    """Each thread its own session and keep-alive connection; returns failures."""
    failures = []

    def worker(i):
        try:
            s = Session(srv)
            c = srv.conn(30)
            try:
                for k in range(per_thread):
                    rid = i * 100000 + k
                    if k % 5 == 4:
                        msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
                            "name": "execute", "arguments": {"command": "echo %d-%d" % (i, k)}}}
                    elif k % 5 == 3:
                        msg = modern_msg("tools/call", {"name": "list_jobs", "arguments": {}}, id=rid)
                    elif k % 5 == 2:
                        msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                               "params": {"name": "list_jobs", "arguments": {}}}
                    else:
                        msg = {"jsonrpc": "2.0", "id": rid, "method": "ping"}
                    h = modern_headers(msg) if k % 5 == 3 else s.headers()
                    r = srv.post_mcp(msg, h, conn=c)
                    if r.status != 200:
                        failures.append((i, k, repr(r)))
                        continue
                    reply = r.json()
                    if reply.get("id") != rid or "error" in reply:
                        failures.append((i, k, reply))
                    elif k % 5 == 4 and tool_value(reply)["stdout"]["data"] != "%d-%d\n" % (i, k):
                        failures.append((i, k, reply))
            finally:
                c.close()
                s.delete()
        except Exception as e:  # noqa: BLE001 -- every failure is reported
            failures.append((i, "exception", repr(e)))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return failures


def test_slow_header_clients_are_cut_off_while_others_are_served(srv):
    stalled = []
    for i in range(3):
        s = raw_socket(srv)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow-%d: " % i)
        stalled.append(s)
    trickler = raw_socket(srv)
    trickler.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    stop = threading.Event()

    def trickle():  # a header byte every 0.5 s: progress, but never the end
        try:
            while not stop.wait(0.5):
                trickler.sendall(b"X-A: b\r\n")
        except OSError:
            return

    tt = threading.Thread(target=trickle, daemon=True)
    tt.start()
    # meanwhile everyone else is served promptly
    t1 = time.monotonic()
    assert not _parallel_pings(srv, 10, 10)
    assert time.monotonic() - t1 < 8, "other clients were held up by the slow ones"
    closed_after = []
    for s in stalled + [trickler]:
        got = read_status_line(s, 10 + 5 + SLACK - (time.monotonic() - t0))
        closed_after.append(time.monotonic() - t0)
        assert not got.startswith(b"HTTP/1.1 2"), got
        s.close()
    stop.set()
    assert max(closed_after) <= 10 + 2 + SLACK, "slow header clients were closed after %r s" % closed_after


# --------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------

def test_max_sessions(servers):
    s = servers({"MCP_EXEC_MAX_SESSIONS": "3"})
    sessions = [Session(s) for _ in range(3)]
    r = s.post_mcp({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}})
    assert r.status == 503, r
    e = r.json()["error"]
    assert "MCP_EXEC_MAX_SESSIONS" in e["message"], e
    assert "mcp-session-id" not in r.headers
    assert sessions[0].delete().status == 204
    Session(s)


def test_max_sessions_holds_under_concurrent_initialize(servers):
    s = servers({"MCP_EXEC_MAX_SESSIONS": "2"})
    statuses, lock = [], threading.Lock()
    go = threading.Barrier(40)

    def init():
        go.wait()
        r = s.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}})
        with lock:
            statuses.append(r.status)

    ts = [threading.Thread(target=init) for _ in range(40)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert statuses.count(200) <= 2, "MCP_EXEC_MAX_SESSIONS=2 but %d initializes succeeded" % statuses.count(200)
    assert set(statuses) <= {200, 503}, statuses
    assert s.healthz()["sessions"] <= 2


def test_idle_session_ends_with_its_job(servers):
    s = servers({"MCP_EXEC_SESSION_IDLE": "1"})
    idle = Session(s)
    tok = uuid.uuid4().hex
    idle.job("sleep 300", env={"MCPX_TOKEN": tok})
    pids = wait_token(tok)
    busy, busy_reply = Session(s), []
    # a session whose request is in flight past the idle time is not idle
    t = threading.Thread(target=lambda: busy_reply.append(busy.tool("execute", {"command": "sleep 2.5; echo ok"})))
    t.start()
    assert_no_token_processes(tok, timeout=1 + 3 + SLACK)
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid) or \
            (read_file("/proc/%d/stat" % pid, "r") or "x) Z").split(")")[-1].split()[0] == "Z"
    r = idle.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status == 404, "an expired session must answer 404: %r" % r
    t.join(10)
    assert busy_reply and busy_reply[0]["stdout"]["data"] == "ok\n", busy_reply
    assert busy.call("ping")["result"] == {}


def test_max_jobs_across_sessions(servers):
    s = servers({"MCP_EXEC_MAX_JOBS": "2", "MCP_EXEC_TOKEN": TOKEN})
    tok = uuid.uuid4().hex
    a, b, c = Session(s), Session(s), Session(s)
    ja = a.job("sleep 300", env={"MCPX_TOKEN": tok})
    b.job("sleep 300", env={"MCPX_TOKEN": tok})
    err = c.tool_err("execute", {"command": "echo three"})
    assert "MCP_EXEC_MAX_JOBS" in err, err
    with pytest.raises(ToolError, match="MCP_EXEC_MAX_JOBS"):
        s.modern_tool("execute", {"command": "echo modern"})
    r = s.request("POST", "/exec", {"command": "echo gateway"})
    assert r.status != 200 or b"gateway" not in r.body, "/exec ran past MCP_EXEC_MAX_JOBS: %r" % r
    assert b"MCP_EXEC_MAX_JOBS" in r.body, r
    assert s.metrics()["mcp_exec_running_jobs"] == 2
    a.tool("kill", {"job_id": ja, "signal": "KILL"})
    assert c.tool("execute", {"command": "echo three"})["stdout"]["data"] == "three\n"
    assert b.delete().status == 204
    assert c.tool("execute", {"command": "echo four"})["stdout"]["data"] == "four\n"
    assert_no_token_processes(tok)


def test_exec_releases_its_job_slot(servers):
    s = servers({"MCP_EXEC_MAX_JOBS": "1"})
    for i in range(5):
        assert _stream(s.exec_events({"command": "echo %d" % i}), "stdout") == "%d\n" % i
    tok = uuid.uuid4().hex
    c = s.conn(30)
    c.request("POST", "/exec", json.dumps({"command": "echo up; sleep 300", "env": {"MCPX_TOKEN": tok}}),
              dict(s.auth_headers(), **{"Content-Type": "application/json"}))
    resp = c.getresponse()
    next(iter_sse(resp))
    vanish(c)
    assert_no_token_processes(tok)
    wait_until(lambda: s.healthz()["running_jobs"] == 0, 5, "the slot of a vanished /exec coming back")
    sess = Session(s)
    assert sess.tool("execute", {"command": "echo after"})["stdout"]["data"] == "after\n"


# --------------------------------------------------------------------------
# /healthz and /metrics
# --------------------------------------------------------------------------

def test_healthz_shape(srv):
    r = srv.request("GET", "/healthz", token=None)
    assert r.status == 200 and r.ctype.startswith("application/json"), r
    assert r.json()["status"] == "ok"


def test_metrics_names_and_values(servers):
    s = servers({"MCP_EXEC_TOKEN": TOKEN})
    before = s.metrics()
    names = ["mcp_exec_sessions", "mcp_exec_running_jobs", "mcp_exec_jobs_started_total",
             "mcp_exec_jobs_finished_total", "mcp_exec_output_bytes_total", "mcp_exec_resident_bytes",
             "mcp_exec_open_fds"]
    for n in names:
        assert n in before, "no %s in /metrics: %r" % (n, sorted(before))
    r = s.request("GET", "/metrics")
    assert r.ctype.startswith("text/plain"), r
    assert s.request("GET", "/metrics", token=None).status == 401
    sess = Session(s)
    tok = uuid.uuid4().hex
    sess.job("sleep 300", env={"MCPX_TOKEN": tok})
    s.exec_events({"command": "head -c 5000 /dev/zero"})
    # The /exec job stops counting as running when its end is published,
    # after its process is reaped, which may come after its exit event.
    m = wait_until(lambda: (lambda m: m if m["mcp_exec_running_jobs"] == 1 and m["mcp_exec_jobs_finished_total"]
                                      - before["mcp_exec_jobs_finished_total"] >= 1 else None)(s.metrics()),
                   10, lambda: "one running and one more finished job in /metrics (now %r)" % s.metrics())
    assert m["mcp_exec_sessions"] == 1, m
    assert m["mcp_exec_running_jobs"] == 1, m
    assert m["mcp_exec_jobs_started_total"] - before["mcp_exec_jobs_started_total"] >= 2, m
    assert m["mcp_exec_jobs_finished_total"] - before["mcp_exec_jobs_finished_total"] >= 1, m
    assert m["mcp_exec_output_bytes_total"] - before["mcp_exec_output_bytes_total"] >= 5000, m
    assert m.get('mcp_exec_http_responses_total{code="401"}', 0) >= 1, m
    assert m.get('mcp_exec_http_responses_total{code="200"}', 0) >= 3, m
    assert 1 * MIB < m["mcp_exec_resident_bytes"] < 512 * MIB, m
    assert abs(m["mcp_exec_open_fds"] - s.fds()) <= 4, (m, s.fds())
    sess.delete()
    assert_no_token_processes(tok)
    wait_until(lambda: s.metrics()["mcp_exec_sessions"] == 0, 10,
               lambda: "mcp_exec_sessions back to 0 (now %r)" % s.metrics()["mcp_exec_sessions"])


# --------------------------------------------------------------------------
# POST /exec
# --------------------------------------------------------------------------

def _exit_of(events):
    assert events and events[-1][0] == "exit", events[-3:]
    assert [e for e, _ in events].count("exit") == 1
    return events[-1][1]


def _stream(events, name):
    return "".join(d["data"] for e, d in events if e == name)


def test_exec_streams_stdout_stderr_and_exit(srv):
    ev = srv.exec_events({"command": "echo out; echo err >&2; exit 3"})
    assert _stream(ev, "stdout") == "out\n" and _stream(ev, "stderr") == "err\n", ev
    ex = _exit_of(ev)
    assert ex["exit_code"] == 3 and ex["timed_out"] is False, ex
    assert ex["stdout_bytes"] == 4 and ex["stderr_bytes"] == 4 and ex["truncated"] is False, ex
    assert isinstance(ex["duration_ms"], int) and isinstance(ex["usage"], dict), ex
    for key in ("wall_ms", "user_ms", "sys_ms", "max_rss_kib"):
        assert key in ex["usage"], ex


def test_exec_every_byte_in_order(srv):
    # 5.5 MB, five times the window, read as fast as it comes: nothing dropped
    ev = srv.exec_events({"command": "seq 1 800000"})
    want = "".join("%d\n" % i for i in range(1, 800001))
    next_off = 0
    for e, d in ev:
        if e == "stdout":
            assert d["offset"] == next_off, (d["offset"], next_off)
            next_off += len(d["data"].encode())
        assert e != "dropped", "output within the window was dropped: %r" % d
    assert _stream(ev, "stdout") == want
    assert _exit_of(ev)["stdout_bytes"] == len(want)


def account(events, stream="stdout"):
    """Walk a stream's events: (forwarded, dropped, gaps), where gaps lists the
    (expected offset, event offset) of every jump no `dropped` event announced."""
    forwarded = dropped = next_off = 0
    gaps = []
    for e, d in events:
        if e == stream:
            if d["offset"] != next_off:
                gaps.append((next_off, d["offset"]))
            forwarded += len(d["data"].encode())
            next_off = d["offset"] + len(d["data"].encode())
        elif e == "dropped" and d.get("stream") == stream:
            if d["offset"] != next_off:
                gaps.append((next_off, d["offset"]))
            dropped += d["bytes"]
            next_off = d["offset"] + d["bytes"]
    return forwarded, dropped, gaps


def test_exec_output_beyond_the_window_is_accounted_for(srv):
    # 5.9 MB written at full speed: what is not forwarded must be announced by
    # `dropped` events, so forwarded + dropped == stdout_bytes and offsets never jump.
    ev = srv.exec_events({"command": "seq 1 800000"})
    forwarded, dropped, gaps = account(ev)
    ex = _exit_of(ev)
    assert ex["stdout_bytes"] == 5488895, ex
    assert not gaps, "stdout jumped over bytes no dropped event announced (expected, got): %r" % gaps[:5]
    assert forwarded + dropped == ex["stdout_bytes"], (forwarded, dropped, ex)


def test_exec_argv_cwd_env_stdin(srv, tmp_path):
    ev = srv.exec_events({"argv": ["sh", "-c", 'pwd; echo "$FOO"; cat'], "cwd": str(tmp_path),
                          "env": {"FOO": "bar baz"}, "stdin": "from stdin"})
    assert _stream(ev, "stdout") == "%s\nbar baz\nfrom stdin" % tmp_path, ev
    assert _exit_of(ev)["exit_code"] == 0


def test_exec_jobs_do_not_see_the_token(srv):
    ev = srv.exec_events({"command": "env"})
    assert TOKEN not in _stream(ev, "stdout")
    s = Session(srv)
    assert TOKEN not in s.tool("execute", {"command": "env"})["stdout"]["data"]
    s.delete()


def test_exec_signal_in_exit(srv):
    ev = srv.exec_events({"command": "kill -KILL $$"})
    ex = _exit_of(ev)
    assert "signal" in ex and "KILL" in str(ex["signal"]).upper(), ex


@pytest.mark.parametrize("body", [
    {"command": "echo x", "bogus": 1},
    {"command": "echo x", "timeout": 5},
    {"command": "echo x", "argv": ["echo", "x"]},
    {},
    {"command": "echo x", "timeout_seconds": -1},
    {"command": "echo x", "max_output_bytes": -5},
    {"command": 7},
])
def test_exec_bad_bodies_are_400(srv, body):
    r = srv.request("POST", "/exec", body)
    assert r.status == 400, r


def test_exec_malformed_json_is_400(srv):
    r = srv.request("POST", "/exec", b"{not json", {"Content-Type": "application/json"})
    assert r.status == 400, r


def test_exec_get_is_405(srv):
    assert srv.request("GET", "/exec").status == 405


def test_exec_policy_refusals_are_403(servers, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    s = servers({"MCP_EXEC_ALLOW": "echo,sh", "MCP_EXEC_ROOTS": str(root), "MCP_EXEC_ENV_DENY": "LD_PRELOAD"})
    assert s.request("POST", "/exec", {"argv": ["cat", "/etc/passwd"]}).status == 403
    assert s.request("POST", "/exec", {"argv": ["echo", "x"], "cwd": "/"}).status == 403
    assert s.request("POST", "/exec", {"argv": ["echo", "x"], "env": {"LD_PRELOAD": "/x.so"}}).status == 403
    ev = s.exec_events({"argv": ["echo", "ok"]})
    assert _stream(ev, "stdout") == "ok\n"


def test_exec_timeout_seconds(srv):
    tok = uuid.uuid4().hex
    t0 = time.monotonic()
    ev = srv.exec_events({"command": "echo started; sleep 300", "timeout_seconds": 0.5, "env": {"MCPX_TOKEN": tok}})
    took = time.monotonic() - t0
    ex = _exit_of(ev)
    assert ex["timed_out"] is True, ex
    assert _stream(ev, "stdout") == "started\n"
    assert took < 0.5 + 5 + 2 + SLACK, took
    assert_no_token_processes(tok)


def test_exec_max_output_bytes(srv):
    ev = srv.exec_events({"command": "head -c 5000 /dev/zero | tr '\\0' o; head -c 5000 /dev/zero | tr '\\0' e >&2",
                          "max_output_bytes": 1000})
    forwarded = len(_stream(ev, "stdout")) + len(_stream(ev, "stderr"))
    assert forwarded <= 1000, forwarded
    ex = _exit_of(ev)
    assert ex["truncated"] is True and ex["stdout_bytes"] == 5000 and ex["stderr_bytes"] == 5000, ex


def test_exec_client_disconnect_kills_the_job(srv):
    tok = uuid.uuid4().hex
    c = srv.conn(30)
    h = srv.auth_headers()
    h["Content-Type"] = "application/json"
    c.request("POST", "/exec", json.dumps({"command": "echo up; sleep 300", "env": {"MCPX_TOKEN": tok}}), h)
    resp = c.getresponse()
    assert resp.status == 200
    assert next(iter_sse(resp))[0] == "stdout"
    wait_token(tok)
    vanish(c)
    assert_no_token_processes(tok, timeout=5 + SLACK)


class TaskSession(Session):
    """A 2025-11-25 session over HTTP whose client declared capabilities.tasks."""

    def __init__(self, srv):
        self.srv, self.version, self.token = srv, "2025-11-25", True
        r = srv.post_mcp({"jsonrpc": "2.0", "id": next_id(), "method": "initialize", "params": {
            "protocolVersion": self.version, "capabilities": {"tasks": {}},
            "clientInfo": {"name": "http-e2e", "version": "0"}}})
        assert r.status == 200, r
        self.sid = r.headers.get("mcp-session-id")
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202


TASKS_EXT = "io.modelcontextprotocol/tasks"


def modern_tasks(method, params):
    p = dict(params)
    p["_meta"] = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXT: {}}}}
    return p


def test_tasks_belong_to_their_session_or_token(srv):
    a, b = TaskSession(srv), TaskSession(srv)
    made = a.call("tools/call", {"name": "execute", "arguments": {"command": "echo legacy"}, "task": {}})
    tid = made["result"]["task"]["taskId"]
    assert b.call("tasks/get", {"taskId": tid})["error"]["code"] == -32602, "another session sees the task"
    res = a.call("tasks/result", {"taskId": tid})["result"]
    assert json.loads(res["content"][0]["text"])["stdout"]["data"] == "legacy\n"
    # 2026-07-28: a yielding execute becomes the token's task, which no
    # legacy session reaches.
    r = srv.modern("tools/call", modern_tasks("tools/call", {
        "name": "execute", "arguments": {"command": "sleep 1; echo modern", "yield_after": 0.3}}))
    task = r.json()["result"]
    assert task["resultType"] == "task", task
    assert a.call("tasks/get", {"taskId": task["taskId"]})["error"]["code"] == -32602

    def ended():
        got = srv.modern("tasks/get", modern_tasks("tasks/get", {"taskId": task["taskId"]})).json()["result"]
        return got if got["status"] != "working" else None
    got = wait_until(ended, timeout=20 + SLACK, what="the modern task to end", interval=0.1)
    assert got["status"] == "completed", got
    assert json.loads(got["result"]["content"][0]["text"])["stdout"]["data"] == "modern\n"


def test_exec_client_vanishing_mid_flood(srv):
    tok = uuid.uuid4().hex
    c = srv.conn(30)
    h = srv.auth_headers()
    h["Content-Type"] = "application/json"
    c.request("POST", "/exec", json.dumps({"command": "yes flood", "env": {"MCPX_TOKEN": tok}}), h)
    resp = c.getresponse()
    it = iter_sse(resp)
    for _ in range(5):
        next(it)
    time.sleep(0.3)  # stop reading a moment: the server blocks on a full socket
    abort_response(c, resp)
    assert_no_token_processes(tok, timeout=5 + SLACK)


def test_exec_100mb_streams_with_bounded_memory(srv):
    debug_stats(srv)  # {"collect": true}: earlier tests' garbage (16 MiB bodies) is returned first
    before = srv.rss_kib()
    c = srv.conn(120)
    h = srv.auth_headers()
    h["Content-Type"] = "application/json"
    c.request("POST", "/exec", json.dumps({"command": "head -c 100000000 /dev/zero"}), h)
    resp = c.getresponse()
    assert resp.status == 200
    peak, events, n = srv.rss_kib(), [], 0
    for e, d in iter_sse(resp):
        n += 1
        if n % 20 == 0:
            peak = max(peak, srv.rss_kib())
        ev = json.loads(d)
        if e in ("stdout", "stderr"):
            ev = {"offset": ev["offset"], "data": "\0" * len(ev["data"])}  # keep the counts, not the bytes
        events.append((e, ev))
    c.close()
    peak = max(peak, srv.rss_kib())
    ex = _exit_of(events)
    assert ex["stdout_bytes"] == 100000000 and ex["exit_code"] == 0, ex
    assert peak < 64 * 1024, "server RSS reached %d KiB (from %d) while streaming 100 MB" % (peak, before)
    forwarded, dropped, gaps = account(events)
    assert not gaps, "stdout jumped over bytes no dropped event announced (expected, got): %r" % gaps[:5]
    assert forwarded + dropped == 100000000, (forwarded, dropped)


# --------------------------------------------------------------------------
# Load, then leaks (keep these last: the leak test compares with the baseline
# taken when the shared server started)
# --------------------------------------------------------------------------

def test_1000_parallel_requests(srv):
    t0 = time.monotonic()
    failures = _parallel_pings(srv, 50, 20)
    assert not failures, "%d of 1000 requests failed, e.g. %r" % (len(failures), failures[:5])
    assert time.monotonic() - t0 < 60
    assert srv.healthz()["status"] == "ok"


def test_zz_nothing_leaked_and_still_serving(srv):
    base = srv.baseline

    def settled():
        now = {"fds": srv.fds(), "goroutines": debug_stats(srv)["goroutines"]}
        ok = now["fds"] <= base["fds"] + 2 and now["goroutines"] <= base["goroutines"] + 3
        return now if ok else None

    wait_until(settled, 10, lambda: "fds/goroutines back to baseline %r (now fds=%d, stats=%r)"
               % (base, srv.fds(), debug_stats(srv)))
    assert srv.descendants() == [], "processes left under the server: %r" % srv.descendants()
    # The count drops when the server publishes a job's end, which follows
    # the reaping of its processes instead of coming with it (the pumps drain
    # the pipes first): test_exec_client_vanishing_mid_flood's job, its pump
    # held back for the reader that left, stayed counted for 4s (both of
    # teardown's graces) with no process left. Still above 0 after the
    # deadline is a leaked slot, and fails.
    wait_until(lambda: srv.healthz()["running_jobs"] == 0, 10,
               lambda: "running_jobs back to 0 (healthz now: %r)" % srv.healthz())
    s = Session(srv)
    assert s.tool("execute", {"command": "echo alive"})["stdout"]["data"] == "alive\n"
    s.delete()


# --------------------------------------------------------------------------
# Shutdown (its own server)
# --------------------------------------------------------------------------

def test_sigterm_with_requests_in_flight(servers):
    s = servers({"MCP_EXEC_TOKEN": TOKEN, "MCP_EXEC_PROGRESS_INTERVAL": "0.2"})
    tok = uuid.uuid4().hex
    env = {"MCPX_TOKEN": tok}
    sess = Session(s)
    sess.job("trap '' TERM; sleep 300 & sleep 300 & echo up; wait; sleep 300", env=env)
    outcomes, lock = {}, threading.Lock()
    marks = {k: marker() for k in ("json", "sse", "exec", "modern")}

    def run(kind, fn):
        try:
            res = fn()
        except (OSError, http.client.HTTPException) as e:
            res = "closed: %r" % e
        with lock:
            outcomes[kind] = res

    def blocking(kind, msg, headers):
        c = _start_blocking(s, headers, msg, timeout=20)
        resp = c.getresponse()
        body = resp.read()
        c.close()
        return (resp.status, body)

    cmd = "trap '' TERM; touch %s; sleep 300 & wait"
    threads = [
        threading.Thread(target=run, args=("json", lambda: blocking("json", {
            "jsonrpc": "2.0", "id": 501, "method": "tools/call", "params": {
                "name": "execute", "arguments": {"command": cmd % marks["json"], "env": env}}}, sess.headers()))),
        threading.Thread(target=run, args=("sse", lambda: blocking("sse", {
            "jsonrpc": "2.0", "id": 502, "method": "tools/call", "params": {
                "name": "execute", "arguments": {"command": cmd % marks["sse"], "env": env},
                "_meta": {"progressToken": 1}}}, sess.headers()))),
        threading.Thread(target=run, args=("exec", lambda: (lambda r: (r.status, r.body))(
            s.request("POST", "/exec", {"command": cmd % marks["exec"], "env": env}, timeout=20)))),
    ]
    mmsg = modern_msg("tools/call", {"name": "execute", "arguments": {"command": cmd % marks["modern"],
                                                                      "env": env}}, id=503)
    threads.append(threading.Thread(target=run, args=("modern", lambda: blocking("modern", mmsg,
                                                                                 modern_headers(mmsg)))))
    for t in threads:
        t.start()
    for m in marks.values():
        wait_until(lambda: os.path.exists(m), 10, "%s appearing" % m)
    assert len(token_processes(tok)) >= 7
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    try:
        s.proc.wait(5 + SLACK)
    except subprocess.TimeoutExpired:
        raise AssertionError("server still running %ss after SIGTERM" % (5 + SLACK))
    took = time.monotonic() - t0
    for t in threads:
        t.join(5)
        assert not t.is_alive(), "an in-flight request was neither answered nor closed"
    for m in marks.values():
        try:
            os.unlink(m)
        except OSError:
            pass
    left = await_no_token_processes(tok, timeout=0.5)
    assert not left, "jobs survived the server: %r" % left
    assert took < 5 + SLACK, took
    for kind in ("json", "modern"):
        got = outcomes[kind]
        if isinstance(got, tuple):  # answered: an error reply, never a hang or a success
            assert got[0] in (200, 503), (kind, got)
            reply = json.loads(got[1])
            assert "error" in reply, (kind, reply)
    with pytest.raises(OSError):
        socket.create_connection((s.host, s.port), timeout=2).close()
