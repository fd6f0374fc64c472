// Drives mcp-exec with the official MCP TypeScript SDK client (v1): for each
// protocol revision it initializes, lists the tools and runs every tool.
// Usage: node check.mjs /path/to/mcp-exec
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import assert from "node:assert/strict";

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

function parse(result) {
  assert.equal(result.content[0].type, "text");
  return JSON.parse(result.content[0].text);
}

async function check(version) {
  const transport = new AskingTransport(version, { command: bin, args: [], stderr: "inherit" });
  const client = new Client({ name: "sdk-check", version: "1.0.0" });
  await client.connect(transport);
  assert.equal(client.getServerVersion().name, "mcp-exec");
  assert.equal(transport.negotiated, version, "the server must echo a supported revision");

  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(),
    ["execute", "input", "kill", "list_jobs", "output", "status", "wait"]);

  const call = async (name, args) => client.callTool({ name, arguments: args });
  const done = parse(await call("execute", { command: "echo hello" }));
  assert.equal(done.state, "success");
  assert.equal(done.stdout.data, "hello\n");

  const started = parse(await call("execute", { command: "cat", nowait: true }));
  assert.equal(started.state, "running");
  const id = started.job_id;
  assert.equal(parse(await call("status", { job_id: id })).state, "running");
  assert.deepEqual(parse(await call("list_jobs", {})).jobs, [{ job_id: id, state: "running" }]);
  assert.equal(parse(await call("input", { job_id: id, data: "ping\n", close: true })).job_id, id);
  const [finished] = parse(await call("wait", { job_ids: [id], timeout: 10 }));
  assert.equal(finished.state, "success");
  assert.equal(finished.stdout.data, "ping\n");

  const sleeper = parse(await call("execute", { command: "sleep 30", nowait: true })).job_id;
  const out = parse(await call("output", { job_id: sleeper, stdout: "all" }));
  assert.equal(out.stdout.total_bytes, 0);
  const killed = parse(await call("kill", { job_id: sleeper }));
  assert.equal(killed.terminated, true);
  assert.equal(killed.result.signal, "terminated");

  const missing = await call("status", { job_id: sleeper });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /unknown job_id/);

  await client.close();
  console.log(`ok ${version}: initialize, tools/list and all seven tools`);
}

for (const version of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
  await check(version);
}
