// Drives mcp-exec with the official MCP TypeScript SDK client (v1, legacy era
// only): for each protocol revision it initializes, lists the tools and runs
// every tool (steps.mjs: one line per step; from 2025-06-18 on each result's
// structuredContent is checked against its text, and the SDK validates it
// against the tool's outputSchema); then
// it checks the two 1.1 promises a TypeScript host depends on: a huge result
// arrives cut to the reply budget without ending the session, and under
// MCP_EXEC_PROFILE=agent a long command and its wait both come back inside
// the SDK's default 60 s request timeout; and 1.2's until on execute and
// output's grep.
// Usage: node check.mjs /path/to/mcp-exec
// SDK_CHECK_SKIP_SLOW=1 skips the agent-profile check (it takes ~90 s).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import assert from "node:assert/strict";
import { checkTools, hasStructured, runSteps } from "./steps.mjs";

const bin = process.argv[2];
assert.ok(bin, "usage: node check.mjs /path/to/mcp-exec");

// AskingTransport makes the client ask for one protocol revision: the SDK
// always asks for its newest, so the initialize request is rewritten.
class AskingTransport extends StdioClientTransport {
  constructor(version, params) {
    super(params);
    this.version = version;
  }
  setProtocolVersion(version) {
    this.negotiated = version; // the client calls this with the server's answer
  }
  async send(message, options) {
    if (message.method === "initialize") {
      message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return super.send(message, options);
  }
}

// testEnv is this process's environment without MCP_EXEC_* settings: each
// check starts its server with exactly the settings it names.
function testEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MCP_EXEC_")));
}

function parse(result) {
  assert.equal(result.content[0].type, "text");
  return JSON.parse(result.content[0].text);
}

async function check(version) {
  const log = (what) => console.log(`ok ${version}: ${what}`);
  const transport = new AskingTransport(version, { command: bin, args: [], stderr: "inherit" });
  const client = new Client({ name: "sdk-check", version: "1.0.0" });
  try {
    await client.connect(transport);
    assert.equal(client.getServerVersion().name, "mcp-exec");
    assert.equal(transport.negotiated, version, "the server must echo a supported revision");
    log(`initialize ${version} -> echoed, server ${client.getServerVersion().name} ${client.getServerVersion().version}`);

    // listTools first, as a host does: the SDK then validates every
    // structuredContent against the tool's outputSchema.
    const structured = hasStructured(version);
    log(`tools/list -> ${checkTools((await client.listTools()).tools, structured)}`);
    await runSteps({ call: (name, args) => client.callTool({ name, arguments: args }), structured, log });
  } finally {
    await client.close();
  }
}

// MeteredTransport records the length in bytes of every line the server
// writes (without its newline), as read from its stdout: the SDK does not
// expose them.
class MeteredTransport extends StdioClientTransport {
  lines = [];
  current = 0;
  async start() {
    await super.start();
    this._process.stdout.on("data", (chunk) => {
      let from = 0;
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, from)) {
        this.lines.push(this.current + nl - from);
        this.current = 0;
        from = nl + 1;
      }
      this.current += chunk.length - from;
    });
  }
  // longestSince is the longest line completed after lines.length was mark.
  longestSince(mark) {
    return Math.max(0, ...this.lines.slice(mark));
  }
}

// connect starts a server with env added to the SDK's default environment
// and returns the client, its transport and the errors the SDK reported
// (a line over its 10 MiB limit shows up there before the session closes).
async function connect(env) {
  const transport = new MeteredTransport({ command: bin, args: [], stderr: "inherit", env });
  const client = new Client({ name: "sdk-check", version: "1.0.0" });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  try {
    await client.connect(transport);
    await client.listTools(); // as a host does (the SDK then checks structuredContent too)
  } catch (e) {
    await client.close();
    throw e;
  }
  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args });
    assert.notEqual(result.isError, true, `${name} failed: ${result.content?.[0]?.text}`);
    return parse(result);
  };
  return { client, transport, errors, call };
}

// checkCutSlice checks a stream slice cut to head + tail around a gap, of a
// stream that wrote total NUL bytes, all still in the window.
function checkCutSlice(name, s, total) {
  assert.ok(s, `${name}: missing`);
  assert.equal(s.total_bytes, total, `${name}.total_bytes`);
  assert.ok(s.omitted && s.tail, `${name}: no omitted/tail, so it was not cut: ${JSON.stringify({ ...s, data: undefined })}`);
  assert.equal(s.offset, 0, `${name}.offset (the window holds the whole stream)`);
  assert.equal(s.truncated, false, `${name}.truncated`);
  assert.equal(s.offset + s.bytes, s.omitted.offset, `${name}: offset + bytes = omitted.offset`);
  assert.ok(s.omitted.bytes > 0, `${name}.omitted.bytes > 0`);
  assert.equal(s.omitted.offset + s.omitted.bytes, s.tail.offset, `${name}: omitted.offset + omitted.bytes = tail.offset`);
  assert.equal(s.tail.offset + s.tail.bytes, total, `${name}: the tail ends at total_bytes`);
  assert.equal(s.data.length, s.bytes, `${name}: data holds bytes NULs`);
  assert.equal(s.tail.data.length, s.tail.bytes, `${name}: tail.data holds tail.bytes NULs`);
  assert.match(s.data + s.tail.data, /^\0*$/, `${name}: only NULs`);
  return `${name} ${s.bytes} + ${s.tail.bytes} of ${total} bytes`;
}

// checkBudget: with default settings, a result that was a 14.7 MB line in
// 1.0 (over the SDK's 10 MiB limit: "ReadBuffer exceeded maximum size", and
// the session closed) arrives cut under the 8 MiB default reply budget, and
// the session goes on.
async function checkBudget() {
  const { client, transport, errors, call } = await connect({});
  try {
    const mark = transport.lines.length;
    let r;
    try {
      r = await call("execute", {
        command: "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2",
        capture: { on_success: "all", on_error: "all" },
      });
    } catch (e) {
      throw new Error(`${e.message}${errors.length ? ` (the SDK reported: ${errors.map((x) => x.message).join("; ")})` : ""}`);
    }
    const line = transport.longestSince(mark);
    assert.equal(r.state, "success");
    assert.equal(r.exit_code, 0);
    assert.equal(r.kept, true, "a cut result carries kept: true");
    const cuts = [checkCutSlice("stdout", r.stdout, 1048576), checkCutSlice("stderr", r.stderr, 1048576)];
    assert.ok(line <= 8388608, `reply line ${line} bytes, over the 8 MiB default budget`);

    // The session survived, and the kept job is still readable.
    await client.ping();
    const ok = await call("execute", { command: "echo ok" });
    assert.equal(ok.state, "success");
    assert.equal(ok.stdout.data, "ok\n");
    assert.equal((await call("status", { job_id: r.job_id })).state, "success");
    const gap = await call("output", { job_id: r.job_id, stdout: { from: r.stdout.omitted.offset, length: 16 } });
    assert.equal(gap.stdout.offset, r.stdout.omitted.offset, "output reads the gap");
    assert.equal(gap.stdout.data, "\0".repeat(16), "output reads the gap");
    assert.deepEqual(errors, [], "the SDK reported errors");
    console.log(`ok reply budget: 2 MiB of NULs arrive cut in a ${line}-byte line (${cuts.join(", ")}); ` +
      "ping, execute, status and output on the kept job still work");
  } finally {
    await client.close();
  }
}

// step names what failed: the SDK's time-out error does not say.
async function step(what, promise) {
  try {
    return await promise;
  } catch (e) {
    e.message = `${what}: ${e.message}`;
    throw e;
  }
}

// checkAgentProfile: under MCP_EXEC_PROFILE=agent a 90 s command called with
// the SDK's default 60 s request timeout yields at 50 s as a running job,
// and wait (default timeout 50 s) collects it, every call inside 60 s. A
// wait on a job that never ends meanwhile returns by itself before 60 s.
async function checkAgentProfile() {
  // The rest of our environment, without MCP_EXEC_* variables: the server
  // refuses unknown ones (MCP_EXEC_BIN) and explicit ones would override the
  // profile's defaults that this check is about.
  const env = testEnv();
  const { client, errors, call } = await connect({ ...env, MCP_EXEC_PROFILE: "agent" });
  let idle;
  try {
    const t0 = performance.now();
    const secs = () => ((performance.now() - t0) / 1000).toFixed(1);
    const blocking = step("execute sleep 90", call("execute", { command: "sleep 90; echo done" }))
      .then((r) => [r, performance.now() - t0]);
    blocking.catch(() => {}); // awaited below; a failure meanwhile is not unhandled
    // Meanwhile: wait with no timeout on a job that never ends.
    idle = (await call("execute", { command: "exec sleep 600", nowait: true })).job_id;
    const w0 = performance.now();
    const [idleEntry] = await step("wait with no timeout on a running job", call("wait", { job_ids: [idle] }));
    const idleMs = performance.now() - w0;
    assert.equal(idleEntry.state, "running", "wait on a running job times out with it running");
    assert.ok(idleMs >= 49500 && idleMs < 60000, `wait with no timeout returned after ${idleMs} ms, want 50 s`);
    await call("kill", { job_id: idle, signal: "KILL" });
    idle = undefined;

    const [yielded, yieldMs] = await blocking;
    assert.equal(yielded.state, "running", `execute returned ${JSON.stringify(yielded)}`);
    assert.equal(yielded.yielded, true);
    assert.ok(yieldMs >= 49500 && yieldMs < 60000, `execute yielded after ${yieldMs} ms, want 50 s`);
    const id = yielded.job_id;
    let entry, waits = 0;
    do {
      assert.ok(++waits <= 3, `job still running after ${waits - 1} waits (${secs()} s)`);
      [entry] = await step(`wait #${waits} at ${secs()} s`, call("wait", { job_ids: [id] }));
      assert.equal(entry.job_id, id);
    } while (entry.state === "running");
    assert.equal(entry.state, "success");
    assert.equal(entry.exit_code, 0);
    assert.equal(entry.stdout.data, "done\n");
    assert.deepEqual(errors, [], "the SDK reported errors");
    console.log(`ok agent profile: sleep 90 yielded at ${(yieldMs / 1000).toFixed(1)} s, collected by ${waits} wait(s) ` +
      `at ${secs()} s; a wait with no timeout returned after ${(idleMs / 1000).toFixed(1)} s`);
  } finally {
    if (idle !== undefined) await call("kill", { job_id: idle, signal: "KILL" }).catch(() => {});
    await client.close();
  }
}

// checkJobEvents: with MCP_EXEC_JOB_EVENTS=1 a nowait job's end reaches the
// client as notifications/job, with no polling.
async function checkJobEvents() {
  const env = testEnv();
  const { client, call } = await connect({ ...env, MCP_EXEC_JOB_EVENTS: "1" });
  try {
    const events = [];
    let heard;
    const finished = new Promise((resolve) => { heard = resolve; });
    client.fallbackNotificationHandler = async (n) => {
      if (n.method !== "notifications/job") return;
      events.push(n.params);
      if (n.params.event === "finished") heard(n.params);
    };
    const { job_id } = await call("execute", { command: "sleep 0.3; echo later", nowait: true });
    const timer = setTimeout(() => heard(null), 10000);
    const end = await finished;
    clearTimeout(timer);
    assert.ok(end, "no notifications/job finished within 10 s");
    assert.equal(end.job_id, job_id);
    assert.equal(end.state, "success");
    assert.deepEqual(events.map((e) => e.event), ["started", "finished"]);
    console.log(`ok job events: execute {nowait} -> notifications/job started, then finished (job ${job_id}, ${end.runtime_ms} ms, exit ${end.exit_code}) without a wait`);
    await call("wait", { job_ids: [job_id], timeout: 10 });
  } finally {
    await client.close();
  }
}

// checkUntilGrep: under the agent profile, execute with until returns on a
// server's ready line with the job running, a wait with until matches that
// line again though it was written before the wait, and output's grep finds
// one line of a 5 MB kept result in one small reply; the SDK checks each
// structuredContent against the tools' outputSchemas.
async function checkUntilGrep() {
  const env = testEnv();
  const { client, errors, call } = await connect({ ...env, MCP_EXEC_PROFILE: "agent" });
  let server;
  try {
    const started = await call("execute", {
      command: "echo starting; sleep 0.3; echo 'listening on :8080'; exec sleep 60",
      until: { pattern: "^listening on" },
    });
    server = started.job_id;
    assert.equal(started.state, "running", JSON.stringify(started));
    assert.deepEqual(started.matched, { stream: "stdout", offset: 9, line: "listening on :8080", next: 28 });
    const [again] = await call("wait", { job_ids: [server], timeout: 10, until: { pattern: "^listening on" } });
    assert.deepEqual(again.matched, started.matched, "a line written before the wait matches");
    await call("kill", { job_id: server, signal: "KILL" });
    server = undefined;

    const big = await call("execute", { command: "seq 1 650000; echo 'error: checksum mismatch'; seq 1 1000" });
    assert.equal(big.kept, true, "a cut result is kept");
    const reply = await client.callTool({ name: "output", arguments: { job_id: big.job_id, stdout: { grep: "^error:" } } });
    const text = reply.content[0].text;
    const found = JSON.parse(text).stdout;
    assert.equal(found.match_count, 1, text);
    assert.equal(found.matches[0].line, "error: checksum mismatch", text);
    assert.ok(Buffer.byteLength(text) <= 1024, `the search answered ${Buffer.byteLength(text)} bytes`);
    assert.deepEqual(errors, [], "the SDK reported errors");
    console.log(`ok until and grep: execute {until} -> running, matched at offset ${started.matched.offset}; ` +
      `wait {until} matched the earlier line; grep of ${big.stdout.total_bytes} bytes -> 1 match in ${Buffer.byteLength(text)} bytes`);
  } finally {
    if (server !== undefined) await call("kill", { job_id: server, signal: "KILL" }).catch(() => {});
    await client.close();
  }
}

// checkToolSets: MCP_EXEC_TOOLS=exec,shell through the SDK: exec answers
// its text with the summary last; the shell set's tools list, run, start,
// its lifecycle events and cursor-followed output all pass the SDK's
// checks (structured results included, on the SDK's newest revision).
async function checkToolSets() {
  const env = testEnv();
  const { client } = await connect({ ...env, MCP_EXEC_TOOLS: "exec,shell", MCP_EXEC_ALLOW: "/bin/sh,sh,echo", MCP_EXEC_TOOL_PREFIX: "t" });
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names, ["exec", "t_run", "t_start", "t_poll", "t_output", "t_kill", "t_allowed"]);
    const text = async (name, args) => {
      const r = await client.callTool({ name, arguments: args });
      assert.notEqual(r.isError, true, `${name}: ${r.content?.[0]?.text}`);
      return r.content[0].text;
    };
    const exec = await text("exec", { command: "echo hi; echo warn >&2; exit 2" });
    const summary = JSON.parse(exec.slice(exec.lastIndexOf("[exec summary]\n") + 15));
    assert.equal(summary.exit, 2);
    assert.equal(summary.stdout_bytes, 3);
    assert.ok(exec.startsWith("[stdout tail]\nhi\n[stderr tail]\nwarn\n"), exec);
    const run = JSON.parse(await text("t_run", { command: "echo", args: ["a b", 7] }));
    assert.deepEqual(run, { exit: 0, stderr: "", stdout: "a b 7\n", "timed-out": false });
    const events = [];
    let heard;
    const ended = new Promise((resolve) => { heard = resolve; });
    client.fallbackNotificationHandler = async (n) => {
      if (n.method !== "notifications/job") return;
      events.push(n.params);
      if (n.params.state !== "started") heard(n.params);
    };
    const { job } = JSON.parse(await text("t_start", { command: "sh", args: ["-c", "for i in 1 2 3; do echo $i; sleep 0.1; done"] }));
    const timer = setTimeout(() => heard(null), 10000);
    const end = await ended;
    clearTimeout(timer);
    assert.ok(end, "no terminal notifications/job within 10 s");
    assert.deepEqual(events.map((e) => [e.job, e.state, e.logger, e.command]),
      [[job, "started", "t_start", "sh"], [job, "exited", "t_start", "sh"]]);
    let out = "", cursor;
    for (;;) {
      const o = JSON.parse(await text("t_output", cursor ? { job, cursor } : { job }));
      out += o.stdout;
      cursor = o.cursor;
      if (o.eof) break;
    }
    assert.equal(out, "1\n2\n3\n");
    const refused = await client.callTool({ name: "t_run", arguments: { command: "rm" } });
    assert.equal(refused.isError, true);
    assert.equal(refused.content[0].text, "Command 'rm' is not allowlisted. Allowed: /bin/sh, echo, sh");
    console.log(`ok tool sets: exec (summary exit ${summary.exit}), t_run, t_start -> notifications/job started and exited, t_output by cursor, allowlist refusal`);
  } finally {
    await client.close();
  }
}

// checkTasks: the 2025-11-25 form of MCP tasks through the SDK's
// client.experimental.tasks: a client that declares capabilities.tasks
// sees execute's execution.taskSupport; callToolStream creates the task at
// once, polls tasks/get and fetches tasks/result, whose result is the
// call's own (its job then delivered: wait finds it gone); tasks/list
// lists it; cancelTask kills a running one's tree and the stream ends cancelled.
async function checkTasks() {
  const transport = new StdioClientTransport({ command: bin, args: [], stderr: "inherit", env: testEnv() });
  const client = new Client({ name: "sdk-check", version: "1.0.0" }, { capabilities: { tasks: {} } });
  await client.connect(transport);
  try {
    assert.ok(client.getServerCapabilities().tasks?.requests?.tools?.call, "capabilities.tasks.requests.tools.call");
    const execute = (await client.listTools()).tools.find((t) => t.name === "execute");
    assert.equal(execute.execution?.taskSupport, "optional");
    const seen = [];
    let result;
    for await (const m of client.experimental.tasks.callToolStream({ name: "execute", arguments: { command: "sleep 0.5; echo task" } }, undefined, { task: { ttl: 60000 } })) {
      seen.push(m.type === "taskStatus" ? m.task.status : m.type);
      if (m.type === "error") throw m.error;
      if (m.type === "result") result = m.result;
    }
    assert.equal(seen[0], "taskCreated");
    assert.equal(seen.at(-1), "result");
    const out = parse(result);
    assert.equal(out.stdout.data, "task\n");
    assert.deepEqual(result.structuredContent, out);
    const taskId = result._meta["io.modelcontextprotocol/related-task"].taskId;
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, "completed");
    assert.ok((await client.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === taskId));
    const again = await client.callTool({ name: "wait", arguments: { job_ids: [out.job_id], timeout: 0 } });
    assert.equal(again.isError, true, "the task collected the job: wait must find it delivered");

    const stream = client.experimental.tasks.callToolStream({ name: "execute", arguments: { command: "sleep 300" } }, undefined, { task: {} });
    const created = (await stream.next()).value;
    assert.equal(created.type, "taskCreated");
    const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
    assert.equal(cancelled.status, "cancelled");
    let last;
    for await (const m of stream) last = m;
    assert.equal(last.type, "error");
    assert.match(last.error.message, /cancelled/);
    console.log(`ok tasks 2025-11-25: callToolStream ${seen.join(" -> ")}, getTask, listTasks, result delivered once, cancelTask -> cancelled`);
  } finally {
    await client.close();
  }
}

let failed = 0;
for (const version of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
  try {
    await check(version);
  } catch (e) {
    failed++;
    console.log(`FAIL ${version}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
  }
}
for (const [name, run, skip] of [
  ["reply budget", checkBudget, false],
  ["job events", checkJobEvents, false],
  ["tool sets", checkToolSets, false],
  ["until and grep", checkUntilGrep, false],
  ["tasks", checkTasks, false],
  ["agent profile", checkAgentProfile, process.env.SDK_CHECK_SKIP_SLOW === "1"],
]) {
  if (skip) {
    console.log(`skip ${name} (SDK_CHECK_SKIP_SLOW=1)`);
    continue;
  }
  try {
    await run();
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
  }
}
process.exit(failed ? 1 : 0);
