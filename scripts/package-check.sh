#!/usr/bin/env bash
# Builds the release files (scripts/dist.sh) twice and checks they are
# byte-identical, and that every file says VERSION and carries the licence
# and the man page; packs the npm packages and drives the server through npx
# from them with the TypeScript SDK client (offline: nothing is fetched);
# installs the .deb, talks to /usr/bin/mcp-exec, and removes the package
# (root only). Needs go, node/npm and dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(cat VERSION)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
scripts/dist.sh "$work/a" >/dev/null
scripts/dist.sh "$work/b" >/dev/null
cmp "$work/a/SHA256SUMS" "$work/b/SHA256SUMS"
echo "ok dist: built twice, identical: $(wc -l < "$work/a/SHA256SUMS") files (SHA256SUMS)"

fail() { echo "FAIL $*" >&2; exit 1; }
# Each archive: one directory named like it, holding the binary, LICENSE,
# README.md and the man page, owned by 0/0, all at one time.
for os_arch in linux-amd64 linux-arm64 darwin-amd64 darwin-arm64; do
  name="mcp-exec-$version-$os_arch"
  listing="$(tar -tvzf "$work/a/$name.tar.gz")"
  names="$(tar -tzf "$work/a/$name.tar.gz" | sort | tr '\n' ' ')"
  [ "$names" = "$name/ $name/LICENSE $name/README.md $name/mcp-exec $name/mcp-exec.1 " ] || fail "archive $name: $names"
  owners="$(awk '{print $2}' <<<"$listing" | sort -u)"
  [ "$owners" = "0/0" ] || fail "archive $name: owners $owners"
  [ "$(awk '{print $4, $5}' <<<"$listing" | sort -u | wc -l)" = 1 ] || fail "archive $name: more than one file time"
done
# The .deb: VERSION, the copyright file in Debian's format, the man page.
for arch in amd64 arm64; do
  deb="$work/a/mcp-exec_${version}_$arch.deb"
  [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "deb $arch: Version $(dpkg-deb -f "$deb" Version)"
  case "$(dpkg-deb -f "$deb" Maintainer)" in *example.invalid*|'') fail "deb $arch: Maintainer" ;; esac
  # sed, not head or grep -q: a reader that stops early makes the writer's
  # SIGPIPE fail the pipeline under pipefail.
  format="$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/mcp-exec/copyright | sed -n 1p)"
  [ "$format" = 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ] || fail "deb $arch: copyright"
  dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/man/man1/mcp-exec.1.gz | gzip -d | cmp -s - mcp-exec.1 || fail "deb $arch: man page"
done
echo "ok dist: archives (binary, LICENSE, README.md, mcp-exec.1; 0/0, one time) and .deb (Version $version, copyright, man page)"

scripts/npm-pack.sh "$work/a" "$work/npm" >/dev/null
# Every npm package is VERSION and carries LICENSE; the launcher names the
# server as server.json does, which the MCP Registry checks.
for tgz in "$work"/npm/*.tgz; do
  tar -xOzf "$tgz" package/package.json | /usr/bin/python3 -c '
import json, sys
p, version, name = json.load(sys.stdin), sys.argv[1], json.load(open("server.json"))["name"]
assert p["version"] == version, (p["name"], p["version"])
assert all(v == version for v in p.get("optionalDependencies", {}).values()), p
assert p["name"] != "mcp-exec" or p["mcpName"] == name, p
' "$version" || fail "npm $(basename "$tgz")"
  tar -tzf "$tgz" | grep -x package/LICENSE >/dev/null || fail "npm $(basename "$tgz"): no LICENSE"
done
echo "ok npm: $(ls "$work"/npm/*.tgz | wc -l) packages at $version with LICENSE, mcpName $(/usr/bin/python3 -c 'import json; print(json.load(open("server.json"))["name"])')"
mkdir "$work/scratch"
echo '{"name":"scratch","private":true}' > "$work/scratch/package.json"
arch="$(node -p process.arch)"
(cd "$work/scratch" && npm install --offline --no-audit --no-fund --loglevel=error \
  "$work/npm/mcp-exec-linux-$arch-$version.tgz" "$work/npm/mcp-exec-$version.tgz" >/dev/null)
[ -d scripts/sdk-client/node_modules/@modelcontextprotocol/sdk ] || (cd scripts/sdk-client && npm ci --no-audit --no-fund --loglevel=error)
(cd scripts/sdk-client && node npx-check.mjs "$work/scratch")

if [ "$(id -u)" = 0 ] && command -v dpkg >/dev/null; then
  deb="$work/a/mcp-exec_${version}_$(dpkg --print-architecture).deb"
  if dpkg -s mcp-exec >/dev/null 2>&1; then echo "mcp-exec is already installed as a package: not touching it" >&2; exit 1; fi
  dpkg -i "$deb" >/dev/null
  trap 'dpkg -r mcp-exec >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  # A client that reads the reply before it closes stdin (closing first
  # would cancel the call).
  reply="$(/usr/bin/python3 -c '
import json, os, subprocess
env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_EXEC_")}  # the server refuses settings it does not know
p = subprocess.Popen(["/usr/bin/mcp-exec"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "execute", "arguments": {"command": "echo from the deb"}}}) + "\n")
p.stdin.flush()
print(p.stdout.readline().strip())
p.stdin.close()
p.wait()
')"
  [ -f /usr/share/man/man1/mcp-exec.1.gz ] || { echo "FAIL deb: no man page" >&2; exit 1; }
  dpkg -r mcp-exec >/dev/null
  case "$reply" in *'from the deb'*) ;; *) echo "FAIL deb: $reply" >&2; exit 1 ;; esac
  [ ! -e /usr/bin/mcp-exec ] || { echo "FAIL deb: /usr/bin/mcp-exec left after removal" >&2; exit 1; }
  echo "ok deb: installed $(basename "$deb") (binary, man page, README), /usr/bin/mcp-exec answered, removed"
else
  echo "skip deb: installing a package needs root and dpkg"
fi
