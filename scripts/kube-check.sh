#!/usr/bin/env bash
# Tests deploy/kubernetes/ with no cluster: checks every manifest against the
# project's own rules (scripts/kube-lint.py), applies them all to a real
# kube-apiserver (scripts/kube-apiserver: built from the Go module proxy,
# run with etcd on loopback; a dry run with strict field validation in a
# namespace that enforces the restricted Pod Security level, the
# agent-sandbox CRDs installed; see its check.py), then plays a copy of
# mcp-exec.yaml's Deployment with `podman kube play` and talks to it:
#
#   - the copy differs only in the image (the one built in this run), a
#     hostPort on 127.0.0.1 (a free port), and a suffix on the names it uses;
#   - the token comes from secret-example.yaml's Secret: podman 4.3 plays a
#     Secret document but stores it in a form its own secretKeyRef cannot
#     read, so the Secret's data is given to `podman secret create` instead,
#     in the form secretKeyRef reads ({"key": base64});
#   - scripts/kube-client.py waits for /healthz, asks the probes' paths (podman
#     runs no readiness probe, and a liveness probe only with systemd and curl
#     in the image), checks 401 without the token,
#     runs initialize, execute (as the manifest's user, writing to $TMPDIR)
#     and wait, and leaves a `sleep` job running;
#   - stopping the pod (SIGTERM, the manifest's grace period) must end it in
#     time with the server exiting 0 (it drained), no process of that job may
#     remain, and `podman kube down` removes it all.
#
#   scripts/kube-check.sh               builds the image (scripts/offline-image.sh)
#   MCP_EXEC_IMAGE=name:tag scripts/kube-check.sh   uses an image already built
#
# KUBE_CHECK_DROP_ENV="NAME ..." leaves those variables out of the played
# copy, to try the manifest against an image older than one of its settings.
set -euo pipefail
cd "$(dirname "$0")/.."
PODMAN=${PODMAN:-podman}
DIR=${KUBE_DIR:-deploy/kubernetes}  # another directory: to try broken manifests
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

echo "kube-check: structure of $DIR/*.yaml"
# A failure here is reported after the API server's verdict, so one run
# shows both.
lint_failed=""
$PY scripts/kube-lint.py check $DIR/*.yaml || lint_failed=1

work=$(mktemp -d)
name="" secret=""
cleanup() {
  if [ -n "$name" ]; then $PODMAN kube down "$work/play.json" >/dev/null 2>&1 || true; fi
  if [ -n "$secret" ]; then $PODMAN secret rm "$secret" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Before the long build: the server's store.
command -v etcd >/dev/null || { echo "kube-check: etcd is missing (Debian: apt-get install etcd-server)" >&2; exit 1; }

# The first build takes minutes (its modules through the Go module proxy,
# pinned by go.sum); later ones only link, from the Go build cache.
KUBE_VERSION=v1.34.4  # the k8s.io/kubernetes of scripts/kube-apiserver/go.mod
echo "kube-check: building kube-apiserver $KUBE_VERSION (scripts/kube-apiserver)"
CGO_ENABLED=0 go -C scripts/kube-apiserver build -trimpath -o "$work/kube-apiserver" \
  -ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" \
  k8s.io/kubernetes/cmd/kube-apiserver
echo "kube-check: $DIR/*.yaml applied to it (dry run, strict, restricted Pod Security)"
$PY scripts/kube-apiserver/check.py "$work/kube-apiserver" "$DIR"
if [ -n "$lint_failed" ]; then echo "kube-check: $DIR/*.yaml break the project's rules (above)" >&2; exit 1; fi

image=${MCP_EXEC_IMAGE:-$(scripts/offline-image.sh)}
scripts/podman-setup.sh

port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run=$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')
{ read -r deployment; read -r secret_name; read -r token; read -r grace; read -r uid; read -r probes; read -r metrics_token; } < <(
  $PY scripts/kube-lint.py play-copy $DIR/mcp-exec.yaml $DIR/secret-example.yaml "$image" "$port" "-kc$run" "$work" \
    ${KUBE_CHECK_DROP_ENV:-})
[ -n "$probes" ] || { echo "kube-check: could not make the copy to play" >&2; exit 1; }

secret=$secret_name
$PODMAN secret create "$secret" "$work/secret.json" >/dev/null
echo "kube-check: podman kube play ($image, 127.0.0.1:$port)"
name=$deployment
# Played from $work: podman 4.3 builds the image instead when the working
# directory holds a file or directory named like it (./mcp-exec here), even
# with --build=false.
# Its complaints about healthcheck timers without systemd are shown only on failure.
(cd "$work" && $PODMAN kube play play.json >/dev/null 2>"$work/play.err") || { cat "$work/play.err" >&2; exit 1; }
container="$deployment-pod-0-mcp-exec"

sleep_seconds="1000.$((16#${run:0:4}))"  # a sleep no other process runs: findable on the host
if ! METRICS_TOKEN="$metrics_token" $PY scripts/kube-client.py "http://127.0.0.1:$port" "$token" "$sleep_seconds" "$uid" $probes; then
  echo "kube-check: the end of the server's log:" >&2
  $PODMAN logs --tail 5 "$container" >&2 || true
  exit 1
fi
pgrep -f "sleep $sleep_seconds" >/dev/null || { echo "kube-check: the sleep job is not on the host's process table" >&2; exit 1; }

# What a cluster does when the pod is deleted: SIGTERM, then SIGKILL after
# the grace period. podman 4.3's kube down alone ends the containers with
# SIGKILL (status 137), so the pod is stopped with the manifest's grace first.
started=$(date +%s%N)
$PODMAN pod stop -t "$grace" "$deployment-pod-0" >/dev/null 2>"$work/stop.err" || { cat "$work/stop.err" >&2; exit 1; }
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
status=$($PODMAN inspect "$container" --format '{{.State.ExitCode}}')
$PODMAN kube down "$work/play.json" >/dev/null 2>&1
name=""
echo "kube-check: the pod stopped in ${elapsed_ms} ms (grace ${grace} s); the server exited with $status"
if [ "$elapsed_ms" -ge $((grace * 1000)) ]; then
  echo "kube-check: the pod did not stop within its grace period" >&2; exit 1
fi
if [ "$status" != 0 ]; then
  echo "kube-check: the server did not drain and exit 0 on SIGTERM (status $status)" >&2; exit 1
fi
if pgrep -af "sleep $sleep_seconds" >&2; then
  echo "kube-check: the sleep job outlived its server" >&2; exit 1
fi
echo "kube-check: ok"
