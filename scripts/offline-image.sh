#!/usr/bin/env bash
# Builds the mcp-exec image with no registry: the runtime base is a Debian
# minbase root filesystem made by debootstrap from this machine's apt mirror
# (cached, so later runs take seconds), and the binary is the static one
# built here. The project's Containerfile does the rest, so this image has the
# same layout as a registry build: /usr/local/bin/mcp-exec behind /sbin/tini.
#
#   scripts/offline-image.sh            -> localhost/mcp-exec:$(cat VERSION)
#   IMAGE=name:tag scripts/offline-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PODMAN=${PODMAN:-podman}
IMAGE=${IMAGE:-localhost/mcp-exec:$(cat VERSION)}
BASE=${BASE:-localhost/mcp-exec-base:bookworm}
CACHE=${MCP_EXEC_CACHE:-/var/cache/mcp-exec}

scripts/podman-setup.sh

# apt_mirror prints the first Debian archive URI apt is configured with.
apt_mirror() {
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || uri=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || { echo "no Debian mirror found in the apt configuration" >&2; return 1; }
  echo "$uri"
}

if ! $PODMAN image exists "$BASE"; then
  tarball="$CACHE/base-bookworm.tar"
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    echo "building the base root filesystem (debootstrap, about a minute)" >&2
    debootstrap --variant=minbase --include=procps,tini bookworm "$root" "$(apt_mirror)" >/dev/null
    mkdir -p "$CACHE"
    tar -C "$root" -c . > "$tarball.part" && mv "$tarball.part" "$tarball"
  fi
  $PODMAN import -q "$tarball" "$BASE" >/dev/null
fi

make -s build
$PODMAN build -q -f Containerfile -t "$IMAGE" \
  --build-arg GO_IMAGE="$BASE" --build-arg BASE_IMAGE="$BASE" --build-arg PREBUILT=mcp-exec . >/dev/null
echo "$IMAGE"
