#!/usr/bin/env bash
# Builds the release files into dist/: static binaries for linux/amd64,
# linux/arm64, darwin/amd64 and darwin/arm64, stripped and reproducible (the
# same source gives byte-identical files: -trimpath, no build id, no VCS
# stamp, the commit passed in), a Debian package for each Linux binary, and
# SHA256SUMS. Usage: scripts/dist.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
version="$(cat VERSION)"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
rm -rf "$out"
mkdir -p "$out"
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os="${target%/*}" arch="${target#*/}"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.version=$version -X main.commit=$commit" \
    -o "$out/mcp-exec-$version-$os-$arch" .
done
for arch in amd64 arm64; do
  scripts/deb.sh "$out/mcp-exec-$version-linux-$arch" "$arch" "$out"
done
(cd "$out" && sha256sum -- * > SHA256SUMS)
cat "$out/SHA256SUMS"
