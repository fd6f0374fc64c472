// Drives mcp-exec with the official MCP TypeScript client v2
// (@modelcontextprotocol/client 2.4.0 on @modelcontextprotocol/core 2.4.0)
// in each of its version-negotiation modes (ClientOptions.versionNegotiation):
//   legacy            the default: initialize 2025-11-25, which the server echoes;
//   auto              server/discover probe (on a short-lived sibling process),
//                     which must find the dual-era server modern (2026-07-28);
//   {pin:2026-07-28}  modern only: server/discover must offer 2026-07-28.
// Each mode lists the tools and drives all seven (../sdk-client/steps.mjs, one
// line per step): every tool has a title and an object outputSchema, and every
// successful result's structuredContent equals its text (the client also
// validates it against the outputSchema). In the modern era it also checks the
// discover result, tools/list's ttlMs and cacheScope, and resultType
// "complete" on every result read off the wire.
// Usage: node check.mjs /path/to/mcp-exec
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import assert from "node:assert/strict";
import { checkTools, runSteps } from "../sdk-client/steps.mjs";

const bin = process.argv[2];
assert.ok(bin, "usage: node check.mjs /path/to/mcp-exec");
const MODERN = "2026-07-28";

async function check(name, mode, wantEra, wantVersion) {
  const log = (what) => console.log(`ok ${name}: ${what}`);
  // The transport's default environment (HOME, PATH, ...) has no MCP_EXEC_*
  // variables: the server refuses unknown ones such as MCP_EXEC_BIN.
  const transport = new StdioClientTransport({ command: bin, args: [], stderr: "inherit" });
  const client = new Client({ name: "ts2-check", version: "1.0.0" }, { versionNegotiation: { mode } });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  try {
    await client.connect(transport);
    // Tap the raw replies (the client hides resultType): in the modern era
    // every result must carry resultType "complete".
    const results = [];
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (message.result) results.push(message.result);
      deliver?.(message, extra);
    };
    const era = client.getProtocolEra();
    const version = client.getNegotiatedProtocolVersion();
    assert.equal(`${era} ${version}`, `${wantEra} ${wantVersion}`, "negotiated era and version");
    const server = client.getServerVersion();
    assert.equal(server?.name, "mcp-exec", "server name");
    if (era === "modern") {
      const d = client.getDiscoverResult();
      assert.ok(d.supportedVersions.includes(MODERN), `supportedVersions ${JSON.stringify(d.supportedVersions)}`);
      assert.ok(d.capabilities?.tools, "discover: capabilities.tools");
      assert.equal(typeof d.ttlMs, "number", "discover: ttlMs");
      assert.ok(["public", "private"].includes(d.cacheScope), `discover: cacheScope ${d.cacheScope}`);
      log(`server/discover -> modern ${version} (supportedVersions ${d.supportedVersions.join(",")}, ` +
        `ttlMs ${d.ttlMs}, cacheScope ${d.cacheScope}), server ${server.name} ${server.version}`);
    } else {
      log(`initialize -> legacy ${version}, server ${server.name} ${server.version}`);
    }

    // listTools first, as a host does: callTool then validates each
    // structuredContent against the tool's outputSchema.
    const list = await client.listTools();
    let what = checkTools(list.tools, true);
    if (era === "modern") {
      assert.equal(typeof list.ttlMs, "number", "tools/list ttlMs");
      assert.ok(["public", "private"].includes(list.cacheScope), `tools/list cacheScope ${list.cacheScope}`);
      what += `, ttlMs ${list.ttlMs}, cacheScope ${list.cacheScope}`;
    }
    log(`tools/list -> ${what}`);
    await runSteps({ call: (tool, args) => client.callTool({ name: tool, arguments: args }), structured: true, log });
    if (era === "modern") {
      const bad = results.filter((r) => r.resultType !== "complete");
      assert.deepEqual(bad, [], "modern results without resultType \"complete\"");
      log(`all ${results.length} results on the wire carry resultType "complete"`);
    }
    assert.deepEqual(errors.map((e) => e.message), [], "the client reported errors");
  } finally {
    await client.close();
  }
}

let failed = 0;
for (const [name, mode, era, version] of [
  ["legacy", "legacy", "legacy", "2025-11-25"],
  ["auto", "auto", "modern", MODERN],
  [`pin ${MODERN}`, { pin: MODERN }, "modern", MODERN],
]) {
  try {
    await check(name, mode, era, version);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
  }
}
process.exit(failed ? 1 : 0);
