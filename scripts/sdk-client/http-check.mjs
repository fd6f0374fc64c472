// Drives mcp-exec's HTTP transport (--listen) with the official MCP
// TypeScript SDK client v1 (1.32.2) and its StreamableHTTPClientTransport,
// a server of its own per check, every request carrying the bearer token
// (requestInit headers):
//   for 2025-11-25 (the SDK's own), 2025-06-18 and 2025-03-26 (the
//   revisions with Streamable HTTP): initialize (echoed; an Mcp-Session-Id
//   comes back), tools/list and all seven tools (steps.mjs: one line per
//   step, structuredContent from 2025-06-18 on); on 2025-11-25 also DELETE
//   (terminateSession) and that the ended session is then refused;
//   progress: execute `sleep 1` with onprogress under
//     MCP_EXEC_PROGRESS_INTERVAL=0.2 answers as an SSE stream carrying
//     progress notifications before the result;
//   abort: a blocking execute `sleep 30` aborted through an AbortSignal once
//     its first progress named the job: the SDK rejects the call, sends
//     notifications/cancelled, and the job is gone (status: unknown job_id,
//     list_jobs empty, the process ended);
//   no token: connecting without the Authorization header fails with 401.
// Usage: node http-check.mjs /path/to/mcp-exec
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTools, hasStructured, runSteps } from "./steps.mjs";
import { TOKEN, pidGone, recordingFetch, startServer } from "./http-server.mjs";

const bin = process.argv[2];
assert.ok(bin, "usage: node http-check.mjs /path/to/mcp-exec");
const TIMEOUT = { timeout: 15000 }; // per request: a hang fails the step, not the run

// AskingTransport makes the client ask for one protocol revision (the SDK
// always asks for its newest) and records the revision it was told.
class AskingTransport extends StreamableHTTPClientTransport {
  constructor(version, url, opts) {
    super(url, opts);
    this.version = version;
  }
  setProtocolVersion(version) {
    this.negotiated = version;
    super.setProtocolVersion(version); // the transport sends it as MCP-Protocol-Version
  }
  async send(message, options) {
    if (message.method === "initialize") {
      message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return super.send(message, options);
  }
}

// withServer runs fn(ctx) against a server of its own and a connected client.
async function withServer(env, version, fn) {
  const server = await startServer(bin, env);
  const http = [];
  const transport = new AskingTransport(version, server.url, {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    fetch: recordingFetch(http),
  });
  const client = new Client({ name: "sdk-http-check", version: "1.0.0" });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  try {
    await client.connect(transport);
    return await fn({ client, transport, errors, http, server });
  } catch (e) {
    const err = server.stderr().trim();
    if (err.split("\n").length > 1) e.message += ` (server stderr: ${err.split("\n").slice(1).join(" | ")})`;
    throw e;
  } finally {
    await client.close().catch(() => {});
    await server.stop();
  }
}

const call = (client, name, args, options) =>
  client.callTool({ name, arguments: args }, undefined, { ...TIMEOUT, ...options });

function parse(result, name) {
  assert.notEqual(result.isError, true, `${name} failed: ${result.content?.[0]?.text}`);
  return JSON.parse(result.content[0].text);
}

async function checkVersion(version) {
  const log = (what) => console.log(`ok http ${version}: ${what}`);
  await withServer({}, version, async ({ client, transport, errors, http }) => {
    assert.equal(client.getServerVersion().name, "mcp-exec");
    assert.equal(transport.negotiated, version, "the server must echo a supported revision");
    assert.match(transport.sessionId ?? "", /^[0-9a-f]{32}$/, "initialize must set a 128-bit hex Mcp-Session-Id");
    log(`initialize ${version} -> echoed, Mcp-Session-Id ${transport.sessionId.slice(0, 8)}..., ` +
      `server ${client.getServerVersion().name} ${client.getServerVersion().version}`);

    const structured = hasStructured(version);
    log(`tools/list -> ${checkTools((await client.listTools(undefined, TIMEOUT)).tools, structured)}`);
    await runSteps({ call: (name, args) => call(client, name, args), structured, log });
    assert.deepEqual(errors.map((e) => e.message), [], "the SDK reported errors");
    const get = http.find((h) => h.what === "GET");
    assert.ok(!get || get.status === 405, `GET /mcp (the SDK's standalone SSE stream) -> ${get?.status}, want 405`);
    if (get) log(`GET /mcp (the SDK's standalone SSE stream after initialized) -> 405, taken as "no stream"`);

    if (version === "2025-11-25") {
      const id = transport.sessionId;
      await transport.terminateSession();
      const del = http.findLast((h) => h.what === "DELETE");
      assert.equal(del?.status, 204, "DELETE /mcp");
      // The ended session's id is refused now (404: "initialize again").
      const res = await fetch(transport._url, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json",
          Accept: "application/json, text/event-stream", "Mcp-Session-Id": id, "MCP-Protocol-Version": version },
        body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
      });
      await res.text();
      assert.equal(res.status, 404, "a request on the ended session");
      log(`terminateSession -> DELETE 204; the ended session's id then gets 404`);
      errors.length = 0;
    }
  });
}

async function checkProgress() {
  const log = (what) => console.log(`ok http progress: ${what}`);
  await withServer({ MCP_EXEC_PROGRESS_INTERVAL: "0.2" }, "2025-11-25", async ({ client, errors, http }) => {
    await client.listTools(undefined, TIMEOUT);
    const progress = [];
    const mark = http.length;
    const r = parse(await call(client, "execute", { command: "sleep 1; echo slept" },
      { onprogress: (p) => progress.push(p) }), "execute");
    assert.equal(r.state, "success");
    assert.equal(r.stdout.data, "slept\n");
    const post = http.slice(mark).find((h) => h.what.startsWith("tools/call"));
    assert.match(post?.type ?? "", /^text\/event-stream/, `the call with a progressToken answered ${JSON.stringify(post)}`);
    assert.ok(progress.length >= 1, "no progress notification arrived");
    assert.ok(progress.every((p, i) => typeof p.progress === "number" && (i === 0 || p.progress > progress[i - 1].progress)),
      `progress must increase: ${JSON.stringify(progress)}`);
    assert.deepEqual(errors.map((e) => e.message), [], "the SDK reported errors");
    log(`execute {command:"sleep 1; echo slept"} with onprogress -> SSE response, ${progress.length} progress ` +
      `notification(s) (last: ${JSON.stringify(progress.at(-1).message ?? progress.at(-1).progress)}), then success`);
  });
}

async function checkAbort() {
  const log = (what) => console.log(`ok http abort: ${what}`);
  const dir = mkdtempSync(join(tmpdir(), "sdk-http-check-"));
  try {
    await withServer({ MCP_EXEC_PROGRESS_INTERVAL: "0.2" }, "2025-11-25", async ({ client, errors, http }) => {
      await client.listTools(undefined, TIMEOUT);
      const pidFile = join(dir, "pid");
      const ac = new AbortController();
      let jobId;
      const t0 = performance.now();
      const pending = call(client, "execute", { command: `echo $$ > ${pidFile}; exec sleep 30` }, {
        signal: ac.signal,
        onprogress: (p) => {
          jobId ??= p.message?.match(/job (\S+)/)?.[1];
          ac.abort("check: abort after the first progress");
        },
      });
      await assert.rejects(pending, (e) => {
        assert.match(String(e.message), /abort/i, `the aborted call rejected with ${e}`);
        return true;
      });
      const ms = performance.now() - t0;
      assert.ok(jobId, "the first progress message did not name the job");
      const pid = Number(readFileSync(pidFile, "utf8"));
      assert.ok(pid > 0, "no pid written");
      // The SDK POSTs notifications/cancelled without waiting for it.
      let cancelled;
      for (const end = Date.now() + 3000; !(cancelled = http.find((h) => h.what === "notifications/cancelled")) && Date.now() < end;) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(cancelled?.status, 202, `notifications/cancelled POST: ${JSON.stringify(cancelled)}`);
      log(`execute {command:"sleep 30"} aborted after its first progress (job ${jobId}, ${ms.toFixed(0)} ms) -> ` +
        `the call rejects, notifications/cancelled POSTed (202)`);

      assert.ok(await pidGone(pid, 5000), `process ${pid} of the aborted job is still alive after 5 s`);
      const st = await call(client, "status", { job_id: jobId });
      assert.equal(st.isError, true, `status of the aborted job: ${st.content?.[0]?.text}`);
      assert.match(st.content[0].text, /unknown job_id/);
      assert.deepEqual(parse(await call(client, "list_jobs", {}), "list_jobs").jobs, [], "list_jobs after the abort");
      log(`then the job is gone: process ${pid} ended, status {job_id:${jobId}} -> isError "unknown job_id", list_jobs -> []`);
      // The session goes on.
      assert.equal(parse(await call(client, "execute", { command: "echo after" }), "execute").stdout.data, "after\n");
      // Over HTTP mcp-exec sends a cancelled request no reply, as the spec
      // says it SHOULD (docs/http.md). Should a -32800 reply come on the
      // request's still open SSE stream, the SDK, which forgot the request
      // when it aborted, reports it through onerror ("Received a response
      // for an unknown message ID") and goes on: that error is tolerated
      // here, and named, and any other error fails.
      const late = /^Received a response for an unknown message ID: .*"code":-32800/;
      const other = errors.filter((e) => !late.test(e.message));
      assert.deepEqual(other.map((e) => e.message), [], "the SDK reported errors");
      log(`the session goes on (execute echo after -> "after\\n"); ` + (errors.length
        ? `the cancelled request was still answered -32800, which the SDK reported: "${errors[0].message}"`
        : "no reply came for the cancelled request"));
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function checkNoToken() {
  const server = await startServer(bin);
  const client = new Client({ name: "sdk-http-check", version: "1.0.0" });
  try {
    await assert.rejects(client.connect(new StreamableHTTPClientTransport(server.url)), (e) => {
      assert.match(String(e.message), /401|bearer token/i, `connect without a token failed with ${e}`);
      return true;
    });
    console.log(`ok http no token: connect without Authorization -> rejected (401, a bearer token is required)`);
  } finally {
    await client.close().catch(() => {});
    await server.stop();
  }
}

let failed = 0;
const checks = [
  ...["2025-11-25", "2025-06-18", "2025-03-26"].map((v) => [v, () => checkVersion(v)]),
  ["progress", checkProgress],
  ["abort", checkAbort],
  ["no token", checkNoToken],
];
for (const [name, run] of checks) {
  try {
    await run();
  } catch (e) {
    failed++;
    console.log(`FAIL http ${name}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
  }
}
process.exit(failed ? 1 : 0);
