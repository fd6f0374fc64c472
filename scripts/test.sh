#!/usr/bin/env bash
# Runs every test suite: formatting, vet, Go unit tests under the race
# detector, the fuzz targets briefly, the pytest e2e and fault suites against
# the binary and as bare PID 1, the official MCP client checks (TypeScript
# SDK v1 and client v2, Go SDK, Inspector CLI), a reduced soak, the e2e and fault suites in a
# container, and the Kubernetes manifests applied to a real kube-apiserver and played with podman (scripts/kube-check.sh). Installs what it can (Debian packages as root); says exactly
# what is missing otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

# apt_install PACKAGE: installs Debian's PACKAGE when we may (root, apt-get).
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing $1 (Debian)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  fi
}

# need_python MODULE PACKAGE: /usr/bin/python3 imports MODULE, installing
# Debian's PACKAGE when it does not and we may.
need_python() {
  /usr/bin/python3 -c "import $1" 2>/dev/null || apt_install "$2"
  /usr/bin/python3 -c "import $1" 2>/dev/null || {
    echo "missing: $1 for /usr/bin/python3 (Debian: apt-get install $2)" >&2; exit 1; }
}

# need_command COMMAND PACKAGE: COMMAND is on the PATH, installing Debian's
# PACKAGE when it is not and we may.
need_command() {
  command -v "$1" >/dev/null || apt_install "$2"
  command -v "$1" >/dev/null || { echo "missing: $1 (Debian: apt-get install $2)" >&2; exit 1; }
}

step "gofmt"
unformatted=$(gofmt -l . | grep -v '^testdata/' || true)
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi

step "go vet (linux, darwin)"
go vet ./...
GOOS=darwin go vet ./...

step "build"
make -s build
./mcp-exec --version

step "go test -race (unit tests, transcripts, fuzz corpora)"
go test -race -count=1 ./...

step "fuzz targets, briefly (scripts/fuzz.sh 600 is the full run)"
scripts/fuzz.sh "${FUZZ_SECONDS:-5}"

need_python pytest python3-pytest
need_python yaml python3-yaml # scripts/kube-lint.py reads the manifests with it
need_python jsonschema python3-jsonschema # server.json against the MCP Registry's schema
need_command mandoc mandoc # the man page's lint
export MCP_EXEC_BIN="$PWD/mcp-exec"
# The suites every target runs: the 1.0 contract (test_mcp_exec.py) and the
# suites by feature in tests/. The tool sets' suite needs host files and
# runs on the binary and PID 1 targets, HTTP, the command line and the documents' checks on
# the binary only (the Kubernetes manifests' structure too), the images'
# suite in the container only.
every_target=(test_mcp_exec.py tests/test_protocol.py tests/test_jobs.py tests/test_output.py
  tests/test_waiting_for_input.py tests/test_terminal.py tests/test_delivery.py tests/test_kill.py
  tests/test_server_signals.py tests/test_faults.py tests/test_policy.py tests/test_sandbox.py
  tests/test_attacks.py tests/test_until_grep.py tests/test_cwd.py tests/test_wire12.py tests/test_life.py
  tests/test_joblog.py tests/test_tasks.py tests/test_wire13.py tests/test_cgroup.py
  tests/test_wire14_tree.py tests/test_wire14_model.py)
step "pytest: binary target"
MCP_EXEC_TARGET=binary /usr/bin/python3 -m pytest -q -p no:cacheprovider "${every_target[@]}" tests/test_toolsets.py tests/test_http.py tests/test_docs.py tests/test_release.py tests/test_kube.py tests/test_cli.py
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  step "pytest: bare PID 1 target (unshare --pid)"
  MCP_EXEC_TARGET=pid1 /usr/bin/python3 -m pytest -q -p no:cacheprovider -m "not slow" "${every_target[@]}" tests/test_toolsets.py
else
  echo "skipped: the bare PID 1 target needs root and unshare" >&2
fi

step "official MCP clients: TypeScript SDK 1.32.2 (legacy revisions)"
./scripts/sdk-check.sh
step "official MCP clients: TypeScript client 2.4.0 (legacy, auto, pinned 2026-07-28)"
./scripts/ts2-check.sh
step "official MCP clients: Go SDK 1.8.0 (server/discover default, each legacy revision pinned)"
./scripts/go-sdk-check.sh
step "official MCP clients: Inspector CLI 2.12.0 (--protocol-era legacy and modern)"
./scripts/inspector-check.sh
step "official MCP clients over HTTP: TypeScript SDK 1.32.2 (progress over SSE, abort), TypeScript client 2.4.0 (pinned 2026-07-28), Go SDK 1.8.0 streamable"
./scripts/http-clients-check.sh

step "release files: make dist twice (identical), npx from the packed npm packages, the .deb installed and removed"
./scripts/package-check.sh

step "the arm64 binary under qemu-user (what the emulator cannot run is named in scripts/qemu-deselect.txt)"
./scripts/arm64-check.sh

step "soak, reduced size (scripts/soak.py without --small is the full run)"
# At this size the baseline is ~6 MiB and idle RSS moves by up to ~1 MiB even
# after a collection (see scripts/soak.py); the full size passes strictly.
/usr/bin/python3 scripts/soak.py --small --rss-slack 8192 ./mcp-exec

# The container target needs podman (or PODMAN=docker) and a Debian mirror
# for the offline base image and the toolbox's packages. It is required in CI;
# elsewhere it is skipped with a reason when the machine cannot run containers.
step "pytest: container target (offline images: default and toolbox)"
if image=$(scripts/offline-image.sh) && toolbox=$(scripts/offline-image.sh toolbox); then
  make -s image-sizes
  MCP_EXEC_TARGET=container MCP_EXEC_IMAGE="$image" MCP_EXEC_TOOLBOX_IMAGE="$toolbox" /usr/bin/python3 -m pytest -q -p no:cacheprovider -m "not slow" "${every_target[@]}" tests/test_image.py
  step "kube-check: deploy/kubernetes/ applied to a kube-apiserver, played with podman kube play (the image above)"
  need_command etcd etcd-server  # the kube-apiserver's store
  need_command openssl openssl  # its service-account signing key
  MCP_EXEC_IMAGE="$image" ./scripts/kube-check.sh
elif [ "${CI:-}" = true ]; then
  echo "the container images could not be built" >&2; exit 1
else
  echo "skipped: no container engine here (see scripts/podman-setup.sh)" >&2
fi
