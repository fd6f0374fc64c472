#!/usr/bin/env bash
# Builds the mcp-exec images with no registry: the runtime base is a Debian
# minbase root filesystem made by debootstrap from this machine's apt mirror
# (trimmed of apt lists, .deb files, docs, man pages and translations, and
# cached, so later runs take seconds), and the binary is the static one built
# here. The project's Containerfile does the rest, so these images have the
# same layout as a registry build: /usr/local/bin/mcp-exec behind /sbin/tini,
# SHELL=/bin/bash.
#
#   scripts/offline-image.sh            -> localhost/mcp-exec:$(cat VERSION)
#   scripts/offline-image.sh toolbox    -> localhost/mcp-exec-toolbox:$(cat VERSION)
#                                          (the Containerfile's toolbox stage:
#                                          the above plus git, ripgrep, python3,
#                                          make, file, jq, findutils, diffutils,
#                                          less, installed from the apt mirror)
#   IMAGE=name:tag TOOLBOX_IMAGE=name:tag scripts/offline-image.sh [toolbox]
#
# It prints the name of the image asked for, and nothing else on stdout.
# `toolbox` builds the default image too (they share the base layers). The
# tool layer is cached: a new binary rebuilds it only if the base changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PODMAN=${PODMAN:-podman}
VERSION=$(cat VERSION)
IMAGE=${IMAGE:-localhost/mcp-exec:$VERSION}
TOOLBOX_IMAGE=${TOOLBOX_IMAGE:-localhost/mcp-exec-toolbox:$VERSION}
BASE=${BASE:-localhost/mcp-exec-base:bookworm-slim}
CACHE=${MCP_EXEC_CACHE:-/var/cache/mcp-exec}

case "${1:-}" in
  "") toolbox=false ;;
  toolbox|--toolbox) toolbox=true ;;
  *) echo "usage: $0 [toolbox]" >&2; exit 2 ;;
esac

scripts/podman-setup.sh

# apt_mirror prints the Debian archive URI apt is configured with ($MIRROR
# when set): the first one ending in /debian, else the first that is not a
# security archive.
apt_mirror() {
  local uris uri
  if [ -n "${MIRROR:-}" ]; then echo "$MIRROR"; return; fi
  uris=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
            grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/\[[^]]*\]//' | awk '{print $2}'
          } | grep -v security || true)
  uri=$(grep -E '/debian/?$' <<<"$uris" | head -n1 || true)
  [ -n "$uri" ] || uri=$(head -n1 <<<"$uris")
  [ -n "$uri" ] || { echo "no Debian mirror found in the apt configuration (set MIRROR)" >&2; return 1; }
  echo "$uri"
}

# slim_rootfs trims a debootstrap tree to what a container needs, and tells
# dpkg and apt to keep it that way for packages installed later (the toolbox).
slim_rootfs() {
  local root=$1
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
    "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/debootstrap
  find "$root"/usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
  find "$root"/usr/share/doc -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
    "$root"/usr/share/lintian "$root"/usr/share/linda
  cat > "$root"/etc/dpkg/dpkg.cfg.d/01-container-slim <<'CFG'
# container image: no documentation, manual pages or translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
  cat > "$root"/etc/apt/apt.conf.d/01-container-slim <<'CFG'
// container image: no .deb files or package caches left behind
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
APT::Install-Recommends "false";
CFG
}

if ! $PODMAN image exists "$BASE"; then
  tarball="$CACHE/base-bookworm-slim.tar"
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    echo "building the base root filesystem (debootstrap, about a minute)" >&2
    debootstrap --variant=minbase --include=procps,tini bookworm "$root" "$(apt_mirror)" >/dev/null
    slim_rootfs "$root"
    mkdir -p "$CACHE"
    tar --numeric-owner -C "$root" -c . > "$tarball.part" && mv "$tarball.part" "$tarball"
  fi
  $PODMAN import -q "$tarball" "$BASE" >/dev/null
fi

make -s build
build() {
  $PODMAN build -q -f Containerfile "$@" \
    --build-arg GO_IMAGE="$BASE" --build-arg BASE_IMAGE="$BASE" --build-arg PREBUILT=mcp-exec . >/dev/null
}
build -t "$IMAGE"
if $toolbox; then
  build --target toolbox -t "$TOOLBOX_IMAGE"
  echo "$TOOLBOX_IMAGE"
else
  echo "$IMAGE"
fi
