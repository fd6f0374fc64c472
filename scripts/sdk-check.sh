#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK client (@modelcontextprotocol/sdk
# 1.32.2, pinned by sdk-client/package-lock.json; legacy era only) against the
# built binary: for each revision 2025-11-25, 2025-06-18, 2025-03-26 and
# 2024-11-05 it initializes (echoed), lists the tools and runs all seven,
# checking their structured results from 2025-06-18 on (one line per step).
# Needs node and npm (the npm registry); says so and fails when missing.
# After the per-revision checks it checks the reply budget (default settings),
# job events, the exec and shell tool sets (MCP_EXEC_TOOLS), 2025-11-25 tasks through
# client.experimental.tasks and the agent profile (~90 s; SDK_CHECK_SKIP_SLOW=1 skips it).
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/sdk-check.sh
set -euo pipefail
bin=$(realpath "${MCP_EXEC_BIN:-$(dirname "$0")/../mcp-exec}")
cd "$(dirname "$0")/sdk-client"
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "missing: node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
[ -d node_modules/@modelcontextprotocol/sdk ] || npm ci --no-audit --no-fund --loglevel=error
node check.mjs "$bin"
