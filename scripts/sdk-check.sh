#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK client against the built binary.
# Needs node and npm (the npm registry); says so and fails when missing.
# After the per-revision checks it checks the reply budget (default settings)
# and the agent profile (~90 s; SDK_CHECK_SKIP_SLOW=1 skips it).
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/sdk-check.sh
set -euo pipefail
cd "$(dirname "$0")/sdk-client"
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "missing: node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
[ -d node_modules/@modelcontextprotocol/sdk ] || npm ci --no-audit --no-fund --loglevel=error
node check.mjs "${MCP_EXEC_BIN:-$PWD/../../mcp-exec}"
