#!/usr/bin/python3
"""Soak test for mcp-exec: load it, then check that it returns to baseline.

    /usr/bin/python3 scripts/soak.py [BINARY]          full size: N=10000, M=1000
    /usr/bin/python3 scripts/soak.py --small [BINARY]  CI size:   N=1000,  M=100

BINARY defaults to $MCP_EXEC_BIN, else ./mcp-exec.  The server runs with
MCP_EXEC_DEBUG=1 so that the `debug/stats` method reports its goroutines,
open fds, RSS and jobs.  Python 3 standard library only.

Phases, all on one connection:
  warm-up  30 sequential jobs and one full-size round of (b) and (c): the
           runtime's first jobs allocate pools, heap metadata and threads
           that stay, so the baseline is taken after them
  (a)      N sequential short jobs, alternating `true` and `echo hi`
  (b)      M concurrent blocking jobs, each writing 64 KiB to stdout
  (c)      M nowait jobs writing 64 KiB each, collected by `wait`
The baseline and the figures after the load are read with debug/stats
{"collect": true}: the server collects garbage first, so RSS is what it holds,
not the up to 4 MiB of garbage its heap may carry before the next collection.
Then the script polls debug/stats (at most --settle seconds) until the server
is back at baseline, prints before/after, and a last line
`soak: PASS ...` or `soak: FAIL: ... ` with the figures.  It exits 0 only if
open fds and goroutines are exactly at baseline, RSS is within 10% of
baseline or within --rss-slack KiB of it (see RSS_SLACK_KIB), no job is left, and every job gave the right result.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

OUTPUT_BYTES = 64 * 1024


class Client:
    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.cond = threading.Condition()
        self.replies = {}
        self.next_id = 0
        self.closed = False
        self.wlock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" not in msg or "method" in msg:
                continue  # a notification
            with self.cond:
                if msg["id"] in self.replies:
                    raise SystemExit("soak: FAIL: second reply for id %r" % msg["id"])
                self.replies[msg["id"]] = msg
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            sys.stderr.write("server: " + line.decode("utf-8", "replace"))

    def send(self, method, params=None):
        with self.cond:
            self.next_id += 1
            rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.write([msg])
        return rid

    def write(self, msgs):
        data = b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in msgs)
        with self.wlock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def reply(self, rid, timeout=120):
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit("soak: FAIL: no reply to request %d within %ds" % (rid, timeout))
                if self.closed:
                    raise SystemExit("soak: FAIL: the server closed stdout (exit %s)" % self.proc.poll())
                self.cond.wait(min(left, 1.0))
            return self.replies.pop(rid)

    def result(self, method, params=None, timeout=120):
        msg = self.reply(self.send(method, params), timeout)
        if "error" in msg:
            raise SystemExit("soak: FAIL: %s answered %r" % (method, msg["error"]))
        return msg["result"]

    def tool(self, name, args, timeout=120):
        res = self.result("tools/call", {"name": name, "arguments": args}, timeout)
        text = res["content"][0]["text"]
        if res.get("isError"):
            raise SystemExit("soak: FAIL: %s: %s" % (name, text))
        return json.loads(text)

    def stats(self, collect=False):
        """debug/stats; with collect, the server collects garbage first, so
        RSS shows what it holds rather than what it has not yet freed."""
        return self.result("debug/stats", {"collect": True} if collect else None)

    def close(self, timeout=10):
        self.proc.stdin.close()
        return self.proc.wait(timeout)


def check(cond, what):
    if not cond:
        raise SystemExit("soak: FAIL: %s" % what)


def sequential(c, n):
    for i in range(n):
        if i % 2:
            r = c.tool("execute", {"command": "echo hi"})
            check(r["state"] == "success" and r["stdout"]["data"] == "hi\n", "echo hi gave %r" % r)
        else:
            r = c.tool("execute", {"command": "true"})
            check(r["state"] == "success" and r["exit_code"] == 0, "true gave %r" % r)


def output_command():
    return "yes abcdefg | head -c %d" % OUTPUT_BYTES


def check_output(r):
    out = r.get("stdout") or {}
    check(r["state"] == "success" and out.get("total_bytes") == OUTPUT_BYTES
          and out.get("bytes") == OUTPUT_BYTES and len(out.get("data", "")) == OUTPUT_BYTES,
          "a 64 KiB job gave %r" % {k: v for k, v in r.items() if k != "stdout"})


def concurrent(c, m):
    msgs, ids = [], []
    for _ in range(m):
        with c.cond:
            c.next_id += 1
            rid = c.next_id
        ids.append(rid)
        msgs.append({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                     "params": {"name": "execute", "arguments": {"command": output_command()}}})
    c.write(msgs)
    for rid in ids:
        msg = c.reply(rid, timeout=300)
        check("result" in msg and not msg["result"].get("isError"), "concurrent job: %r" % msg)
        check_output(json.loads(msg["result"]["content"][0]["text"]))


def nowait_then_wait(c, m):
    pending = set()
    for _ in range(m):
        r = c.tool("execute", {"command": output_command(), "nowait": True})
        check(r["state"] == "running", "nowait gave %r" % r)
        pending.add(r["job_id"])
    deadline = time.monotonic() + 300
    while pending:
        check(time.monotonic() < deadline, "%d nowait jobs never finished" % len(pending))
        for r in c.tool("wait", {"job_ids": sorted(pending), "timeout": 30}, timeout=60):
            if r["state"] != "running" and r["job_id"] in pending:
                check_output(r)
                pending.discard(r["job_id"])


# RSS_SLACK_KIB: after a collection the runtime still keeps memory that
# does not grow with the load: free spans it has not handed back yet (up to
# 1 MiB was seen right after FreeOSMemory), GC metadata sized by the peak
# heap, a thread's stack. On a baseline near 13 MiB that alone passed 10%
# (+2.1 MiB) in about one run in ten. A leak per job still shows: the
# load runs over a thousand jobs, and a job's windows are 128 KiB. fds and
# goroutines are checked exactly. --rss-slack (KiB) sets it; the report
# says when it was needed; --rss-slack 0 is the strict check.
RSS_SLACK_KIB = 4096


def rss_ok(base, now):
    return now["rss_kib"] <= max(base["rss_kib"] * 1.10, base["rss_kib"] + RSS_SLACK_KIB)


def settled(base, now):
    return (now["open_fds"] == base["open_fds"] and now["goroutines"] == base["goroutines"]
            and rss_ok(base, now) and now["jobs"] == 0)


SERVER_PID = None


def threads():
    """The server's OS thread count (informative; Go keeps idle threads)."""
    try:
        with open("/proc/%d/status" % SERVER_PID) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return -1


def fmt(st, nthreads=None):
    return "fds=%d goroutines=%d rss=%dKiB (heap %dKiB, runtime total %dKiB) jobs=%d children=%d threads=%d" % (
        st["open_fds"], st["goroutines"], st["rss_kib"], st.get("heap_kib", -1), st.get("runtime_kib", -1),
        st["jobs"], st["children"], threads() if nthreads is None else nthreads)


def main():
    global RSS_SLACK_KIB
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", nargs="?", default=os.environ.get("MCP_EXEC_BIN", "./mcp-exec"))
    ap.add_argument("--small", action="store_true", help="CI size: N=1000, M=100")
    ap.add_argument("-n", type=int, help="sequential jobs (default 10000, --small 1000)")
    ap.add_argument("-m", type=int, help="concurrent and nowait jobs (default 1000, --small 100)")
    ap.add_argument("--warmup", type=int, default=30,
                    help="sequential warm-up jobs before the baseline (default 30); the warm-up also runs "
                         "one full-size round of the concurrent and nowait phases")
    ap.add_argument("--gctrace", action="store_true",
                    help="run the server with GODEBUG=gctrace=1 (its GC lines go to stderr)")
    ap.add_argument("--settle", type=float, default=60, help="seconds to wait for the baseline (default 60)")
    ap.add_argument("--rss-slack", type=int, default=RSS_SLACK_KIB,
                    help="KiB of RSS growth accepted beyond 10%% (default 2048; 0 = strict 10%%)")
    a = ap.parse_args()
    RSS_SLACK_KIB = a.rss_slack
    n = a.n if a.n is not None else (1000 if a.small else 10000)
    m = a.m if a.m is not None else (100 if a.small else 1000)

    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_EXEC_")}
    env["MCP_EXEC_DEBUG"] = "1"
    # (c) collects its jobs with one wait: from 2025-06-18 each result goes
    # out twice (text and structuredContent), which the default 8 MiB reply
    # budget would cut; the soak checks every byte arrives, not the cut.
    env["MCP_EXEC_MAX_REPLY_BYTES"] = str(256 << 20)
    if a.gctrace:
        env["GODEBUG"] = "gctrace=1"
    c = Client([a.binary], env)
    global SERVER_PID
    SERVER_PID = c.proc.pid
    c.result("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "soak", "version": "1"}})
    c.write([{"jsonrpc": "2.0", "method": "notifications/initialized"}])

    t0 = time.monotonic()
    # The warm-up runs each phase once at full burst size, so one-time costs
    # (the runtime's heap metadata and OS threads, sized by the largest
    # burst) are in the baseline; what the soak then looks for is growth
    # with the number of jobs. The server hands a burst's memory back after a
    # second without requests (trimWhenIdle), so the baseline is taken in that
    # settled state, like the final figures.
    sequential(c, a.warmup)
    concurrent(c, m)
    nowait_then_wait(c, m)
    time.sleep(2.5)
    base = c.stats(collect=True)
    base_threads = threads()
    print("soak: N=%d M=%d; baseline after a warm-up of %d sequential and %d+%d burst jobs: %s"
          % (n, m, a.warmup, m, m, fmt(base)), flush=True)

    t = time.monotonic()
    sequential(c, n)
    print("soak: (a) %d sequential jobs in %.1fs: %s" % (n, time.monotonic() - t, fmt(c.stats())), flush=True)
    t = time.monotonic()
    concurrent(c, m)
    print("soak: (b) %d concurrent 64 KiB jobs in %.1fs: %s" % (m, time.monotonic() - t, fmt(c.stats())),
          flush=True)
    t = time.monotonic()
    nowait_then_wait(c, m)
    print("soak: (c) %d nowait 64 KiB jobs collected by wait in %.1fs: %s"
          % (m, time.monotonic() - t, fmt(c.stats())), flush=True)

    peak = c.stats()
    t = time.monotonic()
    deadline = t + a.settle
    after = peak
    while not settled(base, after) and time.monotonic() < deadline:
        # Sampled exactly like the baseline: after a quiet spell long enough
        # for the server to trim (trimWhenIdle). Rapid polling would itself
        # allocate and keep fresh pages resident until the next collection.
        time.sleep(2.5)
        after = c.stats(collect=True)
    settle_s = time.monotonic() - t
    left = c.tool("list_jobs", {})["jobs"]
    before_line, after_line = fmt(base, base_threads), fmt(after)
    rc = c.close()

    rss_pct = 100.0 * (after["rss_kib"] - base["rss_kib"]) / base["rss_kib"]
    figures = ("fds %d->%d, goroutines %d->%d, rss %d->%d KiB (%+.1f%%), jobs %d->%d; "
               "settled in %.1fs, total %.0fs, exit %s"
               % (base["open_fds"], after["open_fds"], base["goroutines"], after["goroutines"],
                  base["rss_kib"], after["rss_kib"], rss_pct, base["jobs"], after["jobs"],
                  settle_s, time.monotonic() - t0, rc))
    print("soak: before: %s" % before_line)
    print("soak: after:  %s" % after_line)
    problems = []
    if after["open_fds"] != base["open_fds"]:
        problems.append("open fds %d != baseline %d" % (after["open_fds"], base["open_fds"]))
    if after["goroutines"] != base["goroutines"]:
        problems.append("goroutines %d != baseline %d" % (after["goroutines"], base["goroutines"]))
    if not rss_ok(base, after):
        problems.append("RSS %d KiB is %.1f%% above baseline %d KiB" % (after["rss_kib"], rss_pct,
                                                                          base["rss_kib"]))
    if after["jobs"] or left:
        problems.append("%d jobs left" % max(after["jobs"], len(left)))
    if rc != 0:
        problems.append("server exit status %s" % rc)
    if problems:
        print("soak: FAIL: %s; %s" % ("; ".join(problems), figures))
        return 1
    strict = "within 10%" if after["rss_kib"] <= base["rss_kib"] * 1.10 else \
        "beyond 10%% but within the %d KiB slack" % RSS_SLACK_KIB
    print("soak: PASS N=%d M=%d (RSS %s): %s" % (n, m, strict, figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
