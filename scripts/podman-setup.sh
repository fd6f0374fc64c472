#!/usr/bin/env bash
# Makes podman usable on a Debian machine without registry access: installs
# podman and runc when missing (as root), and, when no containers.conf is in
# force, writes the one that works on these VMs (runc with cgroupfs, and
# ulimits the VM allows). Prints nothing when podman is already set up.
set -euo pipefail
PODMAN=${PODMAN:-podman}
[ "$PODMAN" = podman ] || exit 0  # docker or another engine: its owner sets it up

if ! command -v podman >/dev/null; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || {
    echo "missing: podman (Debian: apt-get install podman runc)" >&2; exit 1; }
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null
fi

conf=/etc/containers/containers.conf
if [ -z "${CONTAINERS_CONF:-}" ] && [ ! -s "$conf" ] && [ "$(id -u)" = 0 ]; then
  command -v runc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null
  mkdir -p /etc/containers
  cat > "$conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi
