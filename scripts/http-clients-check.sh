#!/usr/bin/env bash
# Runs the official MCP clients against the built binary's HTTP transport
# (mcp-exec --listen 127.0.0.1:0, MCP_EXEC_TOKEN set; a server of its own
# per check, the bearer token on every request; one ok/FAIL line per step):
#   ts1  TypeScript SDK 1.32.2 StreamableHTTPClientTransport
#        (sdk-client/http-check.mjs): 2025-11-25, 2025-06-18 and 2025-03-26
#        with all seven tools, DELETE of the session, progress over SSE,
#        cancellation by AbortSignal (the job then gone), 401 without a token;
#   ts2  TypeScript client 2.4.0 (ts2-client/http-check.mjs): pinned to
#        2026-07-28, auto and legacy with all seven tools, modern progress
#        over SSE and abort (the request's stream closed, the job then gone);
#   go   Go SDK 1.8.0 StreamableClientTransport (go-sdk-client, -http): the
#        default (discover -> 2026-07-28), an unknown revision (-32022,
#        retried), 2025-11-25, 2025-06-18 and 2025-03-26 with all seven
#        tools, modern progress and cancellation by context.
# Needs node (>= 20) and npm (the npm registry) and go (the Go module proxy).
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/http-clients-check.sh [ts1|ts2|go]...
set -uo pipefail
bin=$(realpath "${MCP_EXEC_BIN:-$(dirname "$0")/../mcp-exec}")
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- ts1 ts2 go
failed=0
for which in "$@"; do
  case $which in
    ts1|ts2)
      dir=$here/sdk-client pkg=@modelcontextprotocol/sdk
      [ "$which" = ts2 ] && dir=$here/ts2-client pkg=@modelcontextprotocol/client
      command -v node >/dev/null && command -v npm >/dev/null || {
        echo "FAIL $which: missing node and npm (Debian: apt-get install nodejs npm)"; failed=1; continue; }
      [ -d "$dir/node_modules/$pkg" ] || (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || {
        echo "FAIL $which: npm ci in $dir"; failed=1; continue; }
      (cd "$dir" && node http-check.mjs "$bin") || failed=1 ;;
    go)
      (cd "$here/go-sdk-client" && go run . -http "$bin") || failed=1 ;;
    *)
      echo "usage: $0 [ts1|ts2|go]..." >&2; exit 2 ;;
  esac
done
exit $failed
