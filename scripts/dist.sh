#!/usr/bin/env bash
# Builds the release files into dist/: static binaries for linux/amd64,
# linux/arm64, darwin/amd64 and darwin/arm64, stripped and reproducible (the
# same source gives byte-identical files: -trimpath, no build id, no VCS
# stamp, the commit passed in), a .tar.gz archive of each (the binary,
# LICENSE, README.md and the man page), a Debian package for each Linux
# binary, and SHA256SUMS. Needs only a checkout (or an unpacked source tree),
# go, GNU tar and dpkg-deb: nothing built before. Usage: scripts/dist.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
version="$(cat VERSION)"
commit="$(scripts/commit.sh)"
# Every file time in the archives: SOURCE_DATE_EPOCH when the caller sets it,
# else the commit's, so two builds of one commit agree.
when="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
rm -rf "$out"
mkdir -p "$out"
# build GOOS GOARCH FILE: one reproducible static binary.
build() {
  CGO_ENABLED=0 GOOS="$1" GOARCH="$2" go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X main.commit=$commit" -o "$3" .
}
# archive BINARY: BINARY.tar.gz holding BINARY's directory-named copy with
# LICENSE, README.md and mcp-exec.1, reproducibly: sorted names, one mtime,
# owner 0/0 and modes fixed, and gzip without a name or time.
archive() {
  local name stage
  name="$(basename "$1")"
  stage="$(mktemp -d)"
  mkdir -m 0755 "$stage/$name"
  install -m 0755 "$1" "$stage/$name/mcp-exec"
  install -m 0644 LICENSE README.md mcp-exec.1 "$stage/$name/"
  tar --sort=name --mtime="@$when" --owner=0 --group=0 --numeric-owner \
    --mode='go-w' --format=gnu -C "$stage" -cf - "$name" | gzip -9n > "$1.tar.gz"
  rm -rf "$stage"
}
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os="${target%/*}" arch="${target#*/}"
  build "$os" "$arch" "$out/mcp-exec-$version-$os-$arch"
  archive "$out/mcp-exec-$version-$os-$arch"
done
for arch in amd64 arm64; do
  scripts/deb.sh "$out/mcp-exec-$version-linux-$arch" "$arch" "$out"
done
(cd "$out" && sha256sum -- * > SHA256SUMS)
cat "$out/SHA256SUMS"
