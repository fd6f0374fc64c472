#!/usr/bin/env bash
# Packs one Linux binary as a Debian package with dpkg-deb: the binary in
# /usr/bin, a man page made from its --help, the README with the docs/ and
# CHANGELOG.md it links to. Reproducible: file times are the commit's, owners
# root.
# Usage: scripts/deb.sh BINARY ARCH OUTDIR [HELP_BINARY]
# HELP_BINARY prints the --help the man page is made of (default BINARY): a
# build this machine can run, when BINARY is for another architecture.
set -euo pipefail
bin="$(realpath "$1")" arch="$2" out="$(realpath "$3")" help_bin="$(realpath "${4:-$1}")"
cd "$(dirname "$0")/.."
version="$(cat VERSION)"
when="$(git log -1 --format=%ct 2>/dev/null || echo 0)"
root="$(mktemp -d)"
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$bin" "$root/usr/bin/mcp-exec"
install -D -m 0644 -t "$root/usr/share/doc/mcp-exec" README.md CHANGELOG.md
install -D -m 0644 -t "$root/usr/share/doc/mcp-exec/docs" docs/*.md
mkdir -p "$root/usr/share/man/man1" "$root/DEBIAN"
{
  echo '.TH MCP-EXEC 1 "" "mcp-exec '"$version"'" "User Commands"'
  echo '.SH NAME'
  echo 'mcp-exec \- an MCP server that runs shell commands as jobs'
  echo '.SH DESCRIPTION'
  echo '.nf'
  "$help_bin" --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
  echo '.fi'
  echo '.SH SEE ALSO'
  echo '/usr/share/doc/mcp-exec/README.md'
} | gzip -9n > "$root/usr/share/man/man1/mcp-exec.1.gz"
cat > "$root/DEBIAN/control" <<CONTROL
Package: mcp-exec
Version: $version
Architecture: $arch
Maintainer: mcp-exec developers <mcp-exec@example.invalid>
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
