// The tool steps every JavaScript client check runs (scripts/sdk-client with
// the TypeScript SDK v1, scripts/ts2-client with the TypeScript client v2):
// all seven tools, one line printed per step, and the structured result
// checked where the protocol revision has one. No dependencies: each check
// passes in its own client's callTool.
import assert from "node:assert/strict";

export const TOOLS = ["execute", "input", "kill", "list_jobs", "output", "status", "wait"];

// hasStructured: from 2025-06-18 on (and in the modern era) tools carry a
// title and an outputSchema, and successful results a structuredContent.
export function hasStructured(version) {
  return version >= "2025-06-18";
}

// checkTools checks a tools/list answer: the seven tools, and per revision
// either title + outputSchema (root type "object") on every tool or neither.
export function checkTools(tools, structured) {
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema?.type, "object", `${t.name}.inputSchema.type`);
    if (structured) {
      assert.ok(typeof t.title === "string" && t.title, `${t.name} has no title`);
      assert.equal(t.outputSchema?.type, "object", `${t.name}.outputSchema.type`);
    } else {
      assert.equal(t.outputSchema, undefined, `${t.name}.outputSchema before 2025-06-18`);
    }
  }
  return structured ? "seven tools, each with a title and an object outputSchema" : "seven tools, no outputSchema (before 2025-06-18)";
}

// runSteps drives all seven tools through call(name, args), which returns the
// CallToolResult as the client delivers it. log prints one line per step.
export async function runSteps({ call, structured, log }) {
  // ok: a successful result; its text is the 1.0 JSON and, when structured,
  // structuredContent is that JSON (wait: wrapped as {results: [...]}).
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.notEqual(r.isError, true, `${name} failed: ${r.content?.[0]?.text}`);
    assert.equal(r.content[0].type, "text");
    const value = JSON.parse(r.content[0].text);
    if (structured) {
      assert.ok(r.structuredContent && typeof r.structuredContent === "object" && !Array.isArray(r.structuredContent),
        `${name}: structuredContent is ${JSON.stringify(r.structuredContent)}, want an object`);
      assert.deepEqual(r.structuredContent, name === "wait" ? { results: value } : value,
        `${name}: structuredContent differs from the text`);
    } else {
      assert.equal(r.structuredContent, undefined, `${name}: structuredContent before 2025-06-18`);
    }
    return value;
  };
  const sc = structured ? ", structuredContent == text" : "";

  const done = await ok("execute", { command: "echo hello" });
  assert.equal(done.state, "success");
  assert.equal(done.exit_code, 0);
  assert.equal(done.stdout.data, "hello\n");
  log(`execute {command:"echo hello"} -> success, exit_code 0, stdout "hello\\n"${sc}`);

  const started = await ok("execute", { command: "cat", nowait: true });
  assert.equal(started.state, "running");
  const id = started.job_id;
  log(`execute {command:"cat", nowait:true} -> running job ${id}${sc}`);
  assert.equal((await ok("status", { job_id: id })).state, "running");
  log(`status {job_id:${id}} -> running${sc}`);
  assert.deepEqual((await ok("list_jobs", {})).jobs, [{ job_id: id, state: "running" }]);
  log(`list_jobs -> [{job_id:${id}, state:running}]${sc}`);
  assert.equal((await ok("input", { job_id: id, data: "ping\n", close: true })).job_id, id);
  log(`input {job_id:${id}, data:"ping\\n", close:true} -> ok${sc}`);
  const waited = await ok("wait", { job_ids: [id], timeout: 10 });
  assert.equal(waited.length, 1);
  assert.equal(waited[0].state, "success");
  assert.equal(waited[0].stdout.data, "ping\n");
  log(`wait {job_ids:[${id}], timeout:10} -> [success, stdout "ping\\n"]${structured ? ", structuredContent == {results: text}" : ""}`);

  const sleeper = (await ok("execute", { command: "sleep 30", nowait: true })).job_id;
  const out = await ok("output", { job_id: sleeper, stdout: "all" });
  assert.equal(out.state, "running");
  assert.equal(out.stdout.total_bytes, 0);
  log(`output {job_id:${sleeper} (sleep 30), stdout:"all"} -> running, 0 bytes${sc}`);
  const killed = await ok("kill", { job_id: sleeper });
  assert.equal(killed.terminated, true);
  assert.equal(killed.result.signal, "terminated");
  log(`kill {job_id:${sleeper}} -> terminated by "terminated"${sc}`);

  const missing = await call("status", { job_id: sleeper });
  assert.equal(missing.isError, true, "status of a delivered job must be a tool error");
  assert.match(missing.content[0].text, /unknown job_id/);
  assert.equal(missing.structuredContent, undefined, "an isError result carries no structuredContent");
  log(`status {job_id:${sleeper}} after kill -> isError "unknown job_id", no structuredContent`);
}
