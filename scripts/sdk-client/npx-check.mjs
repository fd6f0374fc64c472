// Drives mcp-exec started through npx (the packed npm packages installed in
// the folder given) with the official TypeScript SDK client.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const scratch = process.argv[2];
const transport = new StdioClientTransport({ command: "npx", args: ["--no-install", "mcp-exec"], cwd: scratch, stderr: "inherit" });
const client = new Client({ name: "npx-check", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
assert.equal(tools.length, 7);
const res = await client.callTool({ name: "execute", arguments: { command: "echo via npx" } });
const out = JSON.parse(res.content[0].text);
assert.equal(out.stdout.data, "via npx\n");
console.log(`ok npx: ${client.getServerVersion().name} ${client.getServerVersion().version} started by npx --no-install mcp-exec, seven tools, execute -> "${out.stdout.data.trim()}"`);
await client.close();
