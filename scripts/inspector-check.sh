#!/usr/bin/env bash
# Runs the MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0, pinned
# by inspector-client/package-lock.json, run with npx from there) against the
# built binary in --protocol-era legacy and modern: the handshake probe,
# tools/list --strict, every one of the seven tools (execute, list_jobs, and a
# failing call of each job tool, which must exit 5), and execute's structured
# result; one line per CLI run. The Inspector declares node >= 22.19 but runs
# on node 20 (npm's engine warning is silenced).
# Needs node and npm (the npm registry); says so and fails when missing.
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/inspector-check.sh
set -euo pipefail
bin=$(realpath "${MCP_EXEC_BIN:-$(dirname "$0")/../mcp-exec}")
cd "$(dirname "$0")/inspector-client"
command -v node >/dev/null && command -v npm >/dev/null && command -v npx >/dev/null || {
  echo "missing: node, npm and npx (Debian: apt-get install nodejs npm)" >&2; exit 1; }
# Not npm ci: vite 8.4.0 (an Inspector dependency) declares an optional
# dependency, napi-windows-process-start-time, that the registry does not have
# (404), and npm ci refuses the lock file for it. npm install --no-save
# installs exactly the locked versions and leaves the lock file as it is.
[ -d node_modules/@modelcontextprotocol/inspector ] ||
  npm install --no-save --no-audit --no-fund --loglevel=error
node check.mjs "$bin"
