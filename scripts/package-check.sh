#!/usr/bin/env bash
# Builds the release files (scripts/dist.sh) twice and checks they are
# byte-identical; packs the npm packages and drives the server through npx
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

scripts/npm-pack.sh "$work/a" "$work/npm" >/dev/null
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
