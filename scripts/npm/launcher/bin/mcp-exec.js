#!/usr/bin/env node
// mcp-exec's npm launcher: finds the binary of this platform, installed as
// one of the optional dependencies, and runs it in this process's place as
// nearly as Node allows: stdio passed through, signals forwarded, its exit
// status returned. No install script, no network.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

const arch = { x64: "x64", arm64: "arm64" }[process.arch];
const pkg = `@mcp-exec/${process.platform}-${arch}`;
let bin;
try {
  bin = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "mcp-exec");
} catch {
  console.error(`mcp-exec: no binary for ${process.platform}/${process.arch} (the package ${pkg} is not installed; ` +
    "builds exist for linux and darwin, x64 and arm64)");
  process.exit(1);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => child.kill(sig));
}
child.on("error", (e) => {
  console.error(`mcp-exec: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  process.exit(code ?? 1);
});
