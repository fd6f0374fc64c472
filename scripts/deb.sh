#!/usr/bin/env bash
# Packs one Linux binary as a Debian package with dpkg-deb: the binary in
# /usr/bin, the man page mcp-exec.1 (generated, checked in), the licence as
# a machine-readable copyright file, the README with the docs/ and
# CHANGELOG.md it links to. Reproducible: file times are the commit's, owners
# root.
# Usage: scripts/deb.sh BINARY ARCH OUTDIR
set -euo pipefail
bin="$(realpath "$1")" arch="$2" out="$(realpath "$3")"
cd "$(dirname "$0")/.."
version="$(cat VERSION)"
when="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
root="$(mktemp -d)"
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$bin" "$root/usr/bin/mcp-exec"
install -D -m 0644 -t "$root/usr/share/doc/mcp-exec" README.md CHANGELOG.md
install -D -m 0644 -t "$root/usr/share/doc/mcp-exec/docs" docs/*.md
mkdir -p "$root/usr/share/man/man1" "$root/DEBIAN"
gzip -9n < mcp-exec.1 > "$root/usr/share/man/man1/mcp-exec.1.gz"
# Debian's machine-readable copyright format 1.0: who, where from, under what.
{
  cat <<HEAD
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: mcp-exec
Upstream-Contact: https://github.com/mcp-exec/mcp-exec/issues
Source: https://github.com/mcp-exec/mcp-exec

Files: *
Copyright: 2026 the mcp-exec authors
License: Expat

License: Expat
HEAD
  # The licence's text, without its title and copyright lines (given above),
  # an empty line written as " ." as the format asks.
  sed -e '1,/^Copyright/d' LICENSE | sed -e '/./,$!d' -e 's/^$/./' -e 's/^/ /'
} > "$root/usr/share/doc/mcp-exec/copyright"
chmod 0644 "$root/usr/share/doc/mcp-exec/copyright"
cat > "$root/DEBIAN/control" <<CONTROL
Package: mcp-exec
Version: $version
Architecture: $arch
Maintainer: mcp-exec maintainers <mcp-exec@users.noreply.github.com>
Homepage: https://github.com/mcp-exec/mcp-exec
Section: utils
Priority: optional
Description: MCP server that runs shell commands as jobs
 A static binary that gives an LLM agent a shell over the Model Context
 Protocol (stdio or Streamable HTTP): jobs in their own process groups,
 bounded output windows, verified kills, an optional kernel sandbox.
CONTROL
find "$root" -exec touch -h -d "@$when" {} +
SOURCE_DATE_EPOCH="$when" dpkg-deb --root-owner-group -Zxz --build "$root" "$out/mcp-exec_${version}_${arch}.deb" >/dev/null
echo "$out/mcp-exec_${version}_${arch}.deb"
