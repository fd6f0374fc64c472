#!/usr/bin/env bash
# Packs the npm packages, esbuild's way: "mcp-exec", a launcher with one
# optional dependency per platform, and "@mcp-exec/<os>-<cpu>", each holding
# that platform's binary from dist/ (scripts/dist.sh). npm installs only the
# one matching the machine (os and cpu fields): no install script, nothing
# fetched at run time. Every package carries LICENSE; the launcher's mcpName
# is the server's name in the MCP Registry (server.json).
#
# Usage: scripts/npm-pack.sh [DIST] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dist="$(cd "${1:-dist}" && pwd)"
out="$(mkdir -p "${2:-$dist/npm}" && cd "${2:-$dist/npm}" && pwd)"
version="$(cat VERSION)"
# The registry checks that the package names the server it is listed under.
mcp_name="$(/usr/bin/python3 -c 'import json; print(json.load(open("server.json"))["name"])')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
platforms="linux-x64:linux-amd64 linux-arm64:linux-arm64 darwin-x64:darwin-amd64 darwin-arm64:darwin-arm64"
deps=""
for p in $platforms; do
  name="${p%%:*}" goname="${p#*:}"
  os="${name%-*}" cpu="${name#*-}"
  dir="$work/$name"
  install -D -m 0755 "$dist/mcp-exec-$version-$goname" "$dir/bin/mcp-exec"
  install -m 0644 LICENSE "$dir/LICENSE"
  cat > "$dir/package.json" <<JSON
{
  "name": "@mcp-exec/$name",
  "version": "$version",
  "description": "The mcp-exec binary for $os/$cpu",
  "license": "MIT",
  "repository": {"type": "git", "url": "git+https://github.com/mcp-exec/mcp-exec.git"},
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/mcp-exec", "LICENSE"]
}
JSON
  deps="$deps${deps:+,}
    \"@mcp-exec/$name\": \"$version\""
  (cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
done
dir="$work/launcher"
cp -r scripts/npm/launcher "$dir"
cp README.md CHANGELOG.md LICENSE "$dir/"
cp -r docs "$dir/docs" # the README links to them
cat > "$dir/package.json" <<JSON
{
  "name": "mcp-exec",
  "version": "$version",
  "description": "An MCP server that runs shell commands as jobs (a static binary; this package starts the one for your platform)",
  "license": "MIT",
  "mcpName": "$mcp_name",
  "homepage": "https://github.com/mcp-exec/mcp-exec",
  "repository": {"type": "git", "url": "git+https://github.com/mcp-exec/mcp-exec.git"},
  "bugs": "https://github.com/mcp-exec/mcp-exec/issues",
  "bin": {"mcp-exec": "bin/mcp-exec.js"},
  "files": ["bin/mcp-exec.js", "README.md", "CHANGELOG.md", "LICENSE", "docs/"],
  "optionalDependencies": {$deps
  }
}
JSON
(cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
ls "$out"
