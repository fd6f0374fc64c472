#!/usr/bin/env bash
# Packs the npm packages, esbuild's way: "mcp-exec", a launcher with one
# optional dependency per platform, and "@mcp-exec/<os>-<cpu>", each holding
# that platform's binary from dist/ (scripts/dist.sh). npm installs only the
# one matching the machine (os and cpu fields): no install script, nothing
# fetched at run time. Usage: scripts/npm-pack.sh [DIST] [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dist="$(cd "${1:-dist}" && pwd)"
out="$(mkdir -p "${2:-$dist/npm}" && cd "${2:-$dist/npm}" && pwd)"
version="$(cat VERSION)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
platforms="linux-x64:linux-amd64 linux-arm64:linux-arm64 darwin-x64:darwin-amd64 darwin-arm64:darwin-arm64"
deps=""
for p in $platforms; do
  name="${p%%:*}" goname="${p#*:}"
  os="${name%-*}" cpu="${name#*-}"
  dir="$work/$name"
  install -D -m 0755 "$dist/mcp-exec-$version-$goname" "$dir/bin/mcp-exec"
  cat > "$dir/package.json" <<JSON
{
  "name": "@mcp-exec/$name",
  "version": "$version",
  "description": "The mcp-exec binary for $os/$cpu",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/mcp-exec"]
}
JSON
  deps="$deps${deps:+,}
    \"@mcp-exec/$name\": \"$version\""
  (cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
done
dir="$work/launcher"
cp -r scripts/npm/launcher "$dir"
cp README.md CHANGELOG.md "$dir/"
cp -r docs "$dir/docs" # the README links to them
cat > "$dir/package.json" <<JSON
{
  "name": "mcp-exec",
  "version": "$version",
  "description": "An MCP server that runs shell commands as jobs (a static binary; this package starts the one for your platform)",
  "license": "MIT",
  "bin": {"mcp-exec": "bin/mcp-exec.js"},
  "files": ["bin/mcp-exec.js", "README.md", "CHANGELOG.md", "docs/"],
  "optionalDependencies": {$deps
  }
}
JSON
(cd "$dir" && npm pack --silent --pack-destination "$out" >/dev/null)
ls "$out"
