// Drives mcp-exec with the MCP Inspector CLI (@modelcontextprotocol/inspector
// 2.12.0, run through npx from this directory's node_modules) in
// --protocol-era legacy (initialize 2025-11-25) and modern (server/discover,
// pinned 2026-07-28). Every CLI run starts its own server, so a job does not
// outlive it: per era the check runs, in parallel, the handshake probe
// (--method initialize), tools/list --strict (seven tools, each with a title
// and an object outputSchema, no portability error), and all seven tools:
// execute (blocking: exit 0 and structuredContent == text with exit_code 0;
// nowait: a running job), list_jobs (exit 0), and status, output, input, kill
// and wait on an unknown job (each a failing call: isError, exit code 5, the
// CLI's tool_is_error envelope on stderr). One line per CLI run.
// Usage: node check.mjs /path/to/mcp-exec
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const bin = process.argv[2];
assert.ok(bin, "usage: node check.mjs /path/to/mcp-exec");
const here = fileURLToPath(new URL(".", import.meta.url));
// The server refuses MCP_EXEC_* names it does not know (the test scripts
// export MCP_EXEC_BIN); a host launching it passes none.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MCP_EXEC_")));
const TOOLS = ["execute", "input", "kill", "list_jobs", "output", "status", "wait"];

// inspector runs one CLI invocation (the target first, as the CLI requires)
// and resolves to {code, out (parsed --format json stdout), err (stderr)}.
function inspector(era, args) {
  const argv = ["--no-install", "@modelcontextprotocol/inspector", "--cli", bin, "--protocol-era", era, ...args, "--format", "json"];
  return new Promise((resolve) => {
    execFile("npx", argv, { cwd: here, env, timeout: 60000 }, (error, stdout, stderr) => {
      let out;
      try {
        out = JSON.parse(stdout);
      } catch {
        out = undefined;
      }
      resolve({ code: error ? error.code : 0, out, err: stderr.trim(), stdout });
    });
  });
}

const show = (args) => Object.entries(args).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" ");
const callArgs = (tool, args) => ["--method", "tools/call", "--tool-name", tool,
  ...Object.entries(args).flatMap(([k, v]) => ["--tool-arg", `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`])];

// Each step: [what, CLI args, check(result) -> what it saw].
function steps(era, version) {
  const ok = (tool, r) => {
    assert.equal(r.code, 0, `exit code ${r.code}, stderr ${r.err}`);
    const res = r.out?.result;
    assert.ok(res, `no result on stdout: ${r.stdout}`);
    assert.notEqual(res.isError, true);
    const value = JSON.parse(res.content[0].text);
    assert.deepEqual(res.structuredContent, value, `${tool}: structuredContent differs from the text`);
    return value;
  };
  const failing = (tool, args) => [`tools/call ${tool} ${show(args)}`, callArgs(tool, args), (r) => {
    assert.equal(r.code, 5, `exit code ${r.code}, want 5 (isError); stdout ${r.stdout} stderr ${r.err}`);
    const res = r.out?.result;
    assert.equal(res?.isError, true, "isError");
    assert.match(res.content[0].text, /unknown job_id/);
    assert.equal(res.structuredContent, undefined, "an isError result carries no structuredContent");
    assert.match(r.err, /"tool_is_error"/, "stderr error envelope");
    return `exit 5, isError "${res.content[0].text}", no structuredContent`;
  }];
  return [
    ["initialize (handshake probe)", ["--method", "initialize"], (r) => {
      assert.equal(r.code, 0, `exit code ${r.code}, stderr ${r.err}`);
      const res = r.out?.result;
      assert.equal(res?.protocolVersion, version, `protocolVersion in ${r.stdout}`);
      assert.equal(res.serverInfo?.name, "mcp-exec");
      return `exit 0, ${era} ${res.protocolVersion}, server ${res.serverInfo.name} ${res.serverInfo.version}`;
    }],
    ["tools/list --strict", ["--method", "tools/list", "--strict"], (r) => {
      assert.equal(r.code, 0, `exit code ${r.code} (6: a schema portability error), stderr ${r.err}`);
      const tools = r.out?.result?.tools ?? r.out?.tools;
      assert.ok(Array.isArray(tools), `no tools in ${r.stdout.slice(0, 300)}`);
      // The CLI silently drops a tool whose outputSchema it rejects.
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
      for (const t of tools) {
        assert.ok(t.title, `${t.name} has no title`);
        assert.equal(t.outputSchema?.type, "object", `${t.name}.outputSchema.type`);
      }
      return "exit 0, seven tools, each with a title and an object outputSchema, no portability error";
    }],
    [`tools/call execute ${show({ command: "echo hello" })}`, callArgs("execute", { command: "echo hello" }), (r) => {
      const v = ok("execute", r);
      assert.equal(v.state, "success");
      assert.equal(v.exit_code, 0);
      assert.equal(r.out.result.structuredContent.exit_code, 0);
      assert.equal(v.stdout.data, "hello\n");
      return "exit 0, success, structuredContent.exit_code 0, structuredContent == text";
    }],
    [`tools/call execute ${show({ command: "cat", nowait: true })}`, callArgs("execute", { command: "cat", nowait: true }), (r) => {
      const v = ok("execute", r);
      assert.equal(v.state, "running");
      return `exit 0, running job ${v.job_id}, structuredContent == text`;
    }],
    ["tools/call list_jobs", callArgs("list_jobs", {}), (r) => {
      assert.deepEqual(ok("list_jobs", r), { jobs: [] });
      return "exit 0, {jobs: []}, structuredContent == text";
    }],
    failing("status", { job_id: "nope" }),
    failing("output", { job_id: "nope", stdout: "all" }),
    failing("input", { job_id: "nope", data: "x", close: true }),
    failing("kill", { job_id: "nope" }),
    failing("wait", { job_ids: ["nope"], timeout: 1 }),
  ];
}

let failed = 0;
for (const [era, version] of [["legacy", "2025-11-25"], ["modern", "2026-07-28"]]) {
  const list = steps(era, version);
  const results = await Promise.all(list.map(([, args]) => inspector(era, args)));
  list.forEach(([what, , check], i) => {
    try {
      console.log(`ok ${era}: ${what} -> ${check(results[i])}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${era}: ${what}: ${e.message.replace(/\s*\n\s*/g, " ")}`);
    }
  });
}
process.exit(failed ? 1 : 0);
