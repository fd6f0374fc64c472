#!/usr/bin/env python3
"""The MCP session scripts/kube-check.sh runs against the played pod, over
HTTP with the standard library only.

  kube-client.py URL TOKEN SLEEP_SECONDS UID PROBE_PATH...

Waits (60 s at most) for URL/healthz to answer 200, then: each PROBE_PATH
(the manifest's readiness and liveness probes, which podman does not run)
must answer 200 without a token; a request without
the token must get 401 and one with a wrong token too; initialize opens a
session; a blocking execute must run as UID and write to $TMPDIR; a
`sleep SLEEP_SECONDS` job is started with nowait and a wait of one second
must find it still running; /metrics must count it, and with the metrics
token (METRICS_TOKEN in the environment, when set) answer too while /mcp
refuses that token with 401. The job is left running
on purpose: the caller stops the pod and checks that the server drained it.
Prints what it checked; exits 1 with the reason when a check fails.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

DEADLINE_SECONDS = 60


def request(url, method="GET", body=None, headers=None, timeout=30):
    """(status, headers, body text) of one request; HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def fail(why):
    print("kube-client: " + why, file=sys.stderr)
    sys.exit(1)


def main(url, token, sleep_seconds, uid, *probe_paths):
    deadline = time.monotonic() + DEADLINE_SECONDS
    last = None
    while True:
        try:
            status, _, text = request(url + "/healthz", timeout=2)
            if status == 200:
                break
            last = "status %d: %s" % (status, text)
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            fail("/healthz did not answer 200 within %d s (last: %s)" % (DEADLINE_SECONDS, last))
        time.sleep(0.25)  # polling: nothing to await from outside the pod
    print("healthz: " + text.strip())
    for path in probe_paths:
        status, _, text = request(url + path, timeout=5)
        if status != 200:
            fail("the probe's path %s answered %d: %s" % (path, status, text.strip()))
    print("probes: %s answer 200" % " ".join(probe_paths))

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    mcp_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for what, extra in (("without a token", {}), ("with a wrong token", {"Authorization": "Bearer wrong"})):
        status, _, _ = request(url + "/mcp", "POST", ping, dict(mcp_headers, **extra))
        if status != 401:
            fail("a request %s got %d, not 401" % (what, status))
        print("a request %s: 401" % what)

    auth = dict(mcp_headers, Authorization="Bearer " + token)
    status, headers, text = request(url + "/mcp", "POST", {
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "kube-check", "version": "0"}}}, auth)
    sid = headers.get("Mcp-Session-Id") if status == 200 else None
    if not sid:
        fail("initialize with the token got %d: %s" % (status, text))
    session = dict(auth, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"})
    status, _, text = request(url + "/mcp", "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    if status != 202:
        fail("notifications/initialized got %d: %s" % (status, text))
    print("initialize: session %s" % sid)

    calls = iter(range(2, 1000))

    def tool(name, arguments):
        status, _, text = request(url + "/mcp", "POST", {"jsonrpc": "2.0", "id": next(calls), "method": "tools/call",
                                                         "params": {"name": name, "arguments": arguments}}, session)
        if status != 200:
            fail("%s got %d: %s" % (name, status, text))
        reply = json.loads(text)
        if "error" in reply or reply["result"].get("isError"):
            fail("%s failed: %s" % (name, text))
        return json.loads(reply["result"]["content"][0]["text"])

    r = tool("execute", {"command": 'echo "$(id -u):$(id -g)" && echo kept > "$TMPDIR/kube-check" && cat "$TMPDIR/kube-check" && pwd',
                         "capture": "all"})
    out = (r.get("stdout") or {}).get("data", "")
    if r.get("exit_code") != 0 or out.split("\n")[:2] != ["%s:%s" % (uid, uid), "kept"]:
        fail("execute as %s writing to $TMPDIR: %r" % (uid, r))
    print("execute: %r" % out)

    job = tool("execute", {"command": "sleep %s" % sleep_seconds, "nowait": True})
    if job.get("state") != "running":
        fail("execute nowait: %r" % job)
    waited = tool("wait", {"job_ids": [job["job_id"]], "timeout": 1})
    states = [j.get("state") for j in (waited if isinstance(waited, list) else waited.get("jobs", []))]
    if states != ["running"]:
        fail("wait on the sleep job: %r" % waited)
    print("wait: job %s still running" % job["job_id"])

    status, _, text = request(url + "/metrics", headers={"Authorization": "Bearer " + token})
    if status != 200 or "\nmcp_exec_running_jobs 1\n" not in "\n" + text:
        fail("/metrics does not count the running job (%d): %s" % (status, text[:2000]))
    print("metrics: mcp_exec_running_jobs 1")
    scrape = os.environ.get("METRICS_TOKEN", "")
    if scrape:
        status, _, _ = request(url + "/metrics", headers={"Authorization": "Bearer " + scrape})
        if status != 200:
            fail("/metrics with the metrics token: %d, not 200" % status)
        status, _, _ = request(url + "/mcp", "POST", ping, dict(mcp_headers, Authorization="Bearer " + scrape))
        if status != 401:
            fail("/mcp with the metrics token: %d, not 401" % status)
        print("metrics token: /metrics 200, /mcp 401")


if __name__ == "__main__":
    if len(sys.argv) < 6:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
