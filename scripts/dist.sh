#!/usr/bin/env bash
# Builds the release files into dist/: static binaries for linux/amd64,
# linux/arm64, darwin/amd64 and darwin/arm64, stripped and reproducible (the
# same source gives byte-identical files: -trimpath, no build id, no VCS
# stamp, the commit passed in), a Debian package for each Linux binary, and
# SHA256SUMS. Needs only a checkout (or an unpacked source tree), go and
# dpkg-deb: nothing built before. Usage: scripts/dist.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
version="$(cat VERSION)"
commit="$(scripts/commit.sh)"
rm -rf "$out"
mkdir -p "$out"
# build GOOS GOARCH FILE: one reproducible static binary.
build() {
  CGO_ENABLED=0 GOOS="$1" GOARCH="$2" go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.commit=$commit" -o "$3" .
}
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os="${target%/*}" arch="${target#*/}"
  build "$os" "$arch" "$out/mcp-exec-$version-$os-$arch"
done
# The packages' man page is the --help of a binary this machine can run: the
# one just built for it, or, on a platform not released, one built aside.
# --help reads the same on every platform, so the packages do not depend on
# where they were made.
host="$out/mcp-exec-$version-$(go env GOOS)-$(go env GOARCH)"
if [ ! -x "$host" ]; then
  aside="$(mktemp -d)"
  trap 'rm -rf "$aside"' EXIT
  host="$aside/mcp-exec"
  build "$(go env GOOS)" "$(go env GOARCH)" "$host"
fi
for arch in amd64 arm64; do
  scripts/deb.sh "$out/mcp-exec-$version-linux-$arch" "$arch" "$out" "$host"
done
(cd "$out" && sha256sum -- * > SHA256SUMS)
cat "$out/SHA256SUMS"
