#!/usr/bin/env bash
# Runs the official MCP Go SDK client (github.com/modelcontextprotocol/go-sdk
# v1.8.0, its own module in go-sdk-client, fetched through the Go module
# proxy) against the built binary: once with the SDK's default, which probes
# server/discover and must settle on the modern era (2026-07-28), and once
# pinned to each legacy revision (2025-11-25, 2025-06-18, 2025-03-26,
# 2024-11-05; initialize, echoed). Each run lists the tools, runs all seven
# and checks their structured results from 2025-06-18 on; one line per step.
# Usage: MCP_EXEC_BIN=/path/to/mcp-exec scripts/go-sdk-check.sh
set -euo pipefail
bin=$(realpath "${MCP_EXEC_BIN:-$(dirname "$0")/../mcp-exec}")
cd "$(dirname "$0")/go-sdk-client"
go run . "$bin"
