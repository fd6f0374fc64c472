// Drives mcp-exec's HTTP transport (--listen) with the official MCP
// TypeScript client v2 (@modelcontextprotocol/client 2.4.0) and its
// StreamableHTTPClientTransport, a server of its own per check, every
// request carrying the bearer token (requestInit headers):
//   pin 2026-07-28    modern only, sessionless: server/discover must offer
//                     2026-07-28; tools/list (ttlMs, cacheScope) and all seven
//                     tools (../sdk-client/steps.mjs, one line per step),
//                     resultType "complete" on every result off the wire, no
//                     Mcp-Session-Id ever, MCP-Protocol-Version / Mcp-Method /
//                     Mcp-Name on every request;
//   auto              server/discover probe over HTTP must find it modern, then
//                     the same steps;
//   legacy            the default: initialize 2025-11-25 (echoed, a session),
//                     the same steps;
//   modern progress   execute `sleep 1` with onprogress under
//                     MCP_EXEC_PROGRESS_INTERVAL=0.2: an SSE response with
//                     progress before the result;
//   modern abort      a blocking execute `sleep 30` aborted through an
//                     AbortSignal after its first progress: the client closes
//                     that request's stream (the 2026-07-28 cancellation, no
//                     notifications/cancelled) and the job is gone (process
//                     ended, status: unknown job_id, list_jobs empty).
// Usage: node http-check.mjs /path/to/mcp-exec
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTools, runSteps } from "../sdk-client/steps.mjs";
import { TOKEN, pidGone, startServer } from "../sdk-client/http-server.mjs";

const bin = process.argv[2];
assert.ok(bin, "usage: node http-check.mjs /path/to/mcp-exec");
const MODERN = "2026-07-28";
const TIMEOUT = 15000; // per request: a hang fails the step, not the run

// headerFetch records every request's MCP headers and the response's status,
// content type and Mcp-Session-Id.
function headerFetch(log) {
  return async (url, init) => {
    const h = new Headers(init?.headers);
    let body;
    try {
      body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
    } catch {}
    const res = await fetch(url, init);
    log.push({
      method: init?.method ?? "GET", rpc: body?.method, id: body?.id, name: body?.params?.name,
      version: h.get("mcp-protocol-version"), mcpMethod: h.get("mcp-method"), mcpName: h.get("mcp-name"),
      session: h.get("mcp-session-id"), auth: h.get("authorization"),
      status: res.status, type: res.headers.get("content-type") ?? "", setSession: res.headers.get("mcp-session-id"),
    });
    return res;
  };
}

async function withServer(env, mode, fn) {
  const server = await startServer(bin, env);
  const http = [];
  const transport = new StreamableHTTPClientTransport(server.url, {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    fetch: headerFetch(http),
  });
  const client = new Client({ name: "ts2-http-check", version: "1.0.0" }, { versionNegotiation: { mode } });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  try {
    await client.connect(transport);
    // Tap the raw replies (the client hides resultType).
    const results = [];
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (message.result) results.push(message.result);
      deliver?.(message, extra);
    };
    return await fn({ client, transport, errors, http, results });
  } catch (e) {
    const lines = server.stderr().trim().split("\n").slice(1);
    if (lines.length) e.message += ` (server stderr: ${lines.join(" | ")})`;
    throw e;
  } finally {
    await client.close().catch(() => {});
    await server.stop();
  }
}

async function checkMode(name, mode, wantEra, wantVersion) {
  const log = (what) => console.log(`ok http ${name}: ${what}`);
  await withServer({}, mode, async ({ client, transport, errors, http, results }) => {
    const era = client.getProtocolEra();
    const version = client.getNegotiatedProtocolVersion();
    assert.equal(`${era} ${version}`, `${wantEra} ${wantVersion}`, "negotiated era and version");
    const server = client.getServerVersion();
    assert.equal(server?.name, "mcp-exec", "server name");
    if (era === "modern") {
      const d = client.getDiscoverResult();
      assert.ok(d.supportedVersions.includes(MODERN), `supportedVersions ${JSON.stringify(d.supportedVersions)}`);
      assert.ok(d.capabilities?.tools, "discover: capabilities.tools");
      log(`server/discover -> modern ${version} (supportedVersions ${d.supportedVersions.join(",")}, ` +
        `ttlMs ${d.ttlMs}, cacheScope ${d.cacheScope}), server ${server.name} ${server.version}`);
    } else {
      assert.match(transport.sessionId ?? "", /^[0-9a-f]{32}$/, "initialize must set a 128-bit hex Mcp-Session-Id");
      log(`initialize -> legacy ${version}, Mcp-Session-Id ${transport.sessionId.slice(0, 8)}..., server ${server.name} ${server.version}`);
    }

    const list = await client.listTools(undefined, { timeout: TIMEOUT });
    let what = checkTools(list.tools, true);
    if (era === "modern") {
      assert.equal(typeof list.ttlMs, "number", "tools/list ttlMs");
      assert.ok(["public", "private"].includes(list.cacheScope), `tools/list cacheScope ${list.cacheScope}`);
      what += `, ttlMs ${list.ttlMs}, cacheScope ${list.cacheScope}`;
    }
    log(`tools/list -> ${what}`);
    await runSteps({
      call: (tool, args) => client.callTool({ name: tool, arguments: args }, { timeout: TIMEOUT }),
      structured: true, log,
    });
    assert.ok(http.every((h) => h.auth === `Bearer ${TOKEN}`), "a request went without the bearer token");
    const bad = http.filter((h) => h.status >= 300 && !(h.method === "GET" && h.status === 405));
    assert.deepEqual(bad, [], "HTTP requests that failed");
    if (era === "modern") {
      const nonComplete = results.filter((r) => r.resultType !== "complete");
      assert.deepEqual(nonComplete, [], "modern results without resultType \"complete\"");
      const posts = http.filter((h) => h.method === "POST" && h.rpc && h.id !== undefined);
      for (const h of posts) {
        assert.equal(h.version, MODERN, `${h.rpc}: MCP-Protocol-Version header`);
        assert.equal(h.mcpMethod, h.rpc, `${h.rpc}: Mcp-Method header`);
        if (h.rpc === "tools/call") assert.equal(h.mcpName, h.name, "tools/call: Mcp-Name header");
      }
      assert.deepEqual(http.filter((h) => h.session || h.setSession), [], "an Mcp-Session-Id in the modern era");
      log(`all ${results.length} results carry resultType "complete"; all ${posts.length} requests carried ` +
        `MCP-Protocol-Version ${MODERN} and Mcp-Method (tools/call Mcp-Name), none a session`);
    }
    assert.deepEqual(errors.map((e) => e.message), [], "the client reported errors");
  });
}

const parse = (r, name) => {
  assert.notEqual(r.isError, true, `${name} failed: ${r.content?.[0]?.text}`);
  return JSON.parse(r.content[0].text);
};

async function checkProgress() {
  const log = (what) => console.log(`ok http modern progress: ${what}`);
  await withServer({ MCP_EXEC_PROGRESS_INTERVAL: "0.2" }, { pin: MODERN }, async ({ client, errors, http }) => {
    await client.listTools(undefined, { timeout: TIMEOUT });
    const progress = [];
    const r = parse(await client.callTool({ name: "execute", arguments: { command: "sleep 1; echo slept" } },
      { timeout: TIMEOUT, onprogress: (p) => progress.push(p) }), "execute");
    assert.equal(r.state, "success");
    assert.equal(r.stdout.data, "slept\n");
    const post = http.find((h) => h.rpc === "tools/call");
    assert.match(post?.type ?? "", /^text\/event-stream/, `the call with a progressToken answered ${post?.type}`);
    assert.ok(progress.length >= 1, "no progress notification arrived");
    assert.deepEqual(errors.map((e) => e.message), [], "the client reported errors");
    log(`execute {command:"sleep 1; echo slept"} with onprogress -> SSE response, ${progress.length} progress ` +
      `notification(s) (last: ${JSON.stringify(progress.at(-1).message ?? progress.at(-1).progress)}), then success`);
  });
}

async function checkAbort() {
  const log = (what) => console.log(`ok http modern abort: ${what}`);
  const dir = mkdtempSync(join(tmpdir(), "ts2-http-check-"));
  try {
    await withServer({ MCP_EXEC_PROGRESS_INTERVAL: "0.2" }, { pin: MODERN }, async ({ client, errors, http }) => {
      await client.listTools(undefined, { timeout: TIMEOUT });
      const pidFile = join(dir, "pid");
      const ac = new AbortController();
      let jobId;
      const pending = client.callTool({ name: "execute", arguments: { command: `echo $$ > ${pidFile}; exec sleep 30` } }, {
        timeout: TIMEOUT, signal: ac.signal,
        onprogress: (p) => {
          jobId ??= p.message?.match(/job (\S+)/)?.[1];
          ac.abort("check: abort after the first progress");
        },
      });
      await assert.rejects(pending, (e) => {
        assert.match(String(e.message), /abort/i, `the aborted call rejected with ${e}`);
        return true;
      });
      assert.ok(jobId, "the first progress message did not name the job");
      const pid = Number(readFileSync(pidFile, "utf8"));
      assert.ok(pid > 0, "no pid written");
      assert.deepEqual(http.filter((h) => h.rpc === "notifications/cancelled"), [],
        "the modern client cancels by closing the stream, without notifications/cancelled");
      log(`execute {command:"sleep 30"} aborted after its first progress (job ${jobId}) -> the call rejects, ` +
        `the request's SSE stream closed, no notifications/cancelled`);
      assert.ok(await pidGone(pid, 5000), `process ${pid} of the aborted job is still alive after 5 s`);
      const st = await client.callTool({ name: "status", arguments: { job_id: jobId } }, { timeout: TIMEOUT });
      assert.equal(st.isError, true, `status of the aborted job: ${st.content?.[0]?.text}`);
      assert.match(st.content[0].text, /unknown job_id/);
      const jobs = parse(await client.callTool({ name: "list_jobs", arguments: {} }, { timeout: TIMEOUT }), "list_jobs").jobs;
      assert.deepEqual(jobs, [], "list_jobs after the abort");
      assert.deepEqual(errors.map((e) => e.message), [], "the client reported errors");
      log(`then the job is gone: process ${pid} ended, status {job_id:${jobId}} -> isError "unknown job_id", list_jobs -> []`);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let failed = 0;
for (const [name, run] of [
  [`pin ${MODERN}`, () => checkMode(`pin ${MODERN}`, { pin: MODERN }, "modern", MODERN)],
  ["auto", () => checkMode("auto", "auto", "modern", MODERN)],
  ["legacy", () => checkMode("legacy", "legacy", "legacy", "2025-11-25")],
  ["modern progress", checkProgress],
  ["modern abort", checkAbort],
]) {
  try {
    await run();
  } catch (e) {
    failed++;
    console.log(`FAIL http ${name}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
  }
}
process.exit(failed ? 1 : 0);
