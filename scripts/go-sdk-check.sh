#!/usr/bin/env bash
# Runs the official MCP Go SDK client (its own module; fetched through the Go
# module proxy) against the built binary.
set -euo pipefail
bin="${MCP_EXEC_BIN:-$PWD/mcp-exec}"
cd "$(dirname "$0")/go-sdk-client"
go run . "$bin"
