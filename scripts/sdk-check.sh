#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK client against the built binary.
# Needs node and npm (the npm registry); says so and fails when missing.
set -euo pipefail
cd "$(dirname "$0")/sdk-client"
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "missing: node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
[ -d node_modules/@modelcontextprotocol/sdk ] || npm ci --no-audit --no-fund --loglevel=error
node check.mjs "${MCP_EXEC_BIN:-$PWD/../../mcp-exec}"
