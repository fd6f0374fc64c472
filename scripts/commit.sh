#!/usr/bin/env bash
# Prints the commit a build is stamped with (main.commit, shown by --version):
# the checkout's HEAD as 12 hex digits, with "-dirty" when tracked files
# differ from it, or "unknown" when the source is not the top of a git
# checkout (an unpacked tarball, even one lying inside another repository).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(git rev-parse --show-prefix 2>/dev/null || echo none)" != "" ] \
  || ! head="$(git rev-parse --short=12 HEAD 2>/dev/null)"; then
  echo unknown
  exit 0
fi
git diff --quiet HEAD -- 2>/dev/null || head="$head-dirty"
echo "$head"
