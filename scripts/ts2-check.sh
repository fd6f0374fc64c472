#!/usr/bin/env bash
# Runs the official MCP TypeScript client v2 (@modelcontextprotocol/client and
# @modelcontextprotocol/core 2.4.0, pinned by ts2-client/package-lock.json)
# against the built binary in its three version-negotiation modes: legacy
# (initialize 2025-11-25), auto (server/discover probe, must find the modern
# era) and pinned {pin: "2026-07-28"}. Each mode runs all seven tools and
# checks their structured results; one line per step.
# Needs node (>= 20) and npm (the npm registry); says so and fails when missing.
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/ts2-check.sh
set -euo pipefail
bin=$(realpath "${MCP_EXEC_BIN:-$(dirname "$0")/../mcp-exec}")
cd "$(dirname "$0")/ts2-client"
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "missing: node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
[ -d node_modules/@modelcontextprotocol/client ] || npm ci --no-audit --no-fund --loglevel=error
node check.mjs "$bin"
