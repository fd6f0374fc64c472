#!/usr/bin/env python3
"""Checks the structure of deploy/kubernetes/*.yaml with no cluster, and
makes the copy of a manifest that `podman kube play` runs in
scripts/kube-check.sh.

  kube-lint.py check FILE...
      the project's own rules, which no API server checks: only the kinds
      and API versions this project ships; one replica, recreated; every pod
      spec runs as a numeric non-root user with a read-only root and an
      emptyDir at TMPDIR, has a token and a listen address, probes /healthz
      on a declared port, has requests and limits and sets
      MCP_EXEC_MEMORY_LIMIT below the memory limit; Services (and their named
      target ports), NetworkPolicies, claims and warm pools select or name
      what the files define; egress is denied; and every agent-sandbox pod
      template is the Deployment's pod spec (runtimeClassName aside).
  kube-lint.py play-copy MANIFEST SECRET IMAGE HOSTPORT SUFFIX OUTDIR [DROP_ENV...]
      writes OUTDIR/play.json (MANIFEST's Deployment with IMAGE, a hostPort on
      127.0.0.1, SUFFIX appended to the names it uses and the DROP_ENV
      variables left out; the Service is not played by podman) and
      OUTDIR/secret.json (SECRET's data as `podman secret create` wants it for
      secretKeyRef: {"key": base64}), and prints on seven lines the
      Deployment's name, the secret's name, the token, the grace period in
      seconds, the runAsUser, the probes' paths and the metrics token.

YAML is read with PyYAML (Debian: python3-yaml), a key given twice refused.
These are the project's own rules; scripts/kube-apiserver/check.py applies
the manifests to a real API server for the API's.
"""

import base64
import json
import re
import sys

try:
    import yaml
except ImportError:
    sys.exit("kube-lint: missing PyYAML for %s (Debian: apt-get install python3-yaml)" % sys.executable)

# --------------------------------------------------------------------------
# Reading the files
# --------------------------------------------------------------------------


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping:
    PyYAML keeps the last, the API server refuses the object."""

    def construct_mapping(self, node, deep=False):
        keys = []
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,), key_node.start_mark)
            keys.append(key)
        return super().construct_mapping(node, deep)


# --------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------

UNITS = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3,
         "K": 1024, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}

# apiVersion of every kind checked.
KINDS = {
    "Deployment": "apps/v1", "Service": "v1", "Secret": "v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Sandbox": "agents.x-k8s.io/v1beta1",
    "SandboxTemplate": "extensions.agents.x-k8s.io/v1beta1",
    "SandboxClaim": "extensions.agents.x-k8s.io/v1beta1",
    "SandboxWarmPool": "extensions.agents.x-k8s.io/v1beta1",
}


def quantity(text, where, problems):
    """Bytes of a Kubernetes quantity (256Mi) or an MCP_EXEC size (256MiB)."""
    m = re.fullmatch(r"([0-9]+)([a-zA-Z]*)", str(text))
    if not m or m.group(2) not in UNITS:
        problems.append("%s: %r is not a size" % (where, text))
        return None
    return int(m.group(1)) * UNITS[m.group(2)]


def get(obj, path, default=None):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return default
        obj = obj[part]
    return obj


def check_pod(spec, where, problems):
    """What mcp-exec needs of its pod beyond the restricted Pod Security
    level, which the API server enforces (scripts/kube-apiserver/check.py)."""
    if not isinstance(spec, dict):
        problems.append("%s: no pod spec" % where)
        return
    pod_sc = spec.get("securityContext") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    containers = spec.get("containers") or []
    if not containers:
        problems.append("%s: no containers" % where)
    for c in containers:
        at = "%s: container %s" % (where, c.get("name"))
        sc = c.get("securityContext") or {}

        def effective(key):
            return sc.get(key, pod_sc.get(key))

        # The restricted level takes a user name too; podman's play and the
        # image's file modes need the number.
        for key in ("runAsUser", "runAsGroup"):
            value = effective(key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append("%s: %s must be a numeric id above 0, not %r" % (at, key, value))
        # Not part of the restricted level: the server writes only to TMPDIR.
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append("%s: readOnlyRootFilesystem must be true" % at)

        env = {}
        for e in c.get("env") or []:
            env[e.get("name")] = e
        mounts = {}
        for m in c.get("volumeMounts") or []:
            mounts[m.get("mountPath")] = volumes.get(m.get("name"), {})
        tmpdir = get(env, "TMPDIR.value")
        if not tmpdir or "emptyDir" not in mounts.get(tmpdir, {}):
            problems.append("%s: TMPDIR must be set to the mount path of an emptyDir (the root is read-only), not %r" % (at, tmpdir))
        if "MCP_EXEC_TOKEN" not in env and "MCP_EXEC_TOKEN_FILE" not in env:
            problems.append("%s: no token (MCP_EXEC_TOKEN from a Secret, or MCP_EXEC_TOKEN_FILE)" % at)
        args = c.get("args") or []
        if "--listen" not in args and "MCP_EXEC_LISTEN" not in env:
            problems.append("%s: not listening (--listen or MCP_EXEC_LISTEN)" % at)

        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        for probe in ("readinessProbe", "livenessProbe"):
            http = get(c, probe + ".httpGet")
            if not http:
                problems.append("%s: no %s.httpGet" % (at, probe))
                continue
            if http.get("path") != "/healthz":
                problems.append("%s: %s must probe /healthz, not %r" % (at, probe, http.get("path")))
            if http.get("port") not in ports and http.get("port") not in ports.values():
                problems.append("%s: %s probes port %r, which the container does not declare" % (at, probe, http.get("port")))

        for part in ("requests", "limits"):
            for res in ("cpu", "memory"):
                if get(c, "resources.%s.%s" % (part, res)) is None:
                    problems.append("%s: no resources.%s.%s" % (at, part, res))
        limit = get(c, "resources.limits.memory")
        bound = get(env, "MCP_EXEC_MEMORY_LIMIT.value")
        if bound is None:
            problems.append("%s: MCP_EXEC_MEMORY_LIMIT must be set (below the memory limit)" % at)
        elif limit is not None:
            lb, bb = quantity(limit, at, problems), quantity(bound, at, problems)
            if lb and bb and not 0 < bb < lb:
                problems.append("%s: MCP_EXEC_MEMORY_LIMIT %s is not below the memory limit %s" % (at, bound, limit))


def check_documents(docs):
    """Problems found in docs, a list of (where, document)."""
    problems = []
    by_kind = {}
    for where, d in docs:
        if not isinstance(d, dict):
            problems.append("%s: not a mapping" % where)
            continue
        kind, name = d.get("kind"), get(d, "metadata.name")
        at = "%s: %s %s" % (where, kind, name)
        if kind not in KINDS:
            problems.append("%s: kind %r is not one of %s" % (where, kind, ", ".join(sorted(KINDS))))
            continue
        if d.get("apiVersion") != KINDS[kind]:
            problems.append("%s: apiVersion must be %s, not %r" % (at, KINDS[kind], d.get("apiVersion")))
        by_kind.setdefault(kind, []).append((at, d))

    pods = {}  # the pod labels and spec of every workload, by its description
    for at, d in by_kind.get("Deployment", []):
        spec = d.get("spec") or {}
        if spec.get("replicas") != 1:
            problems.append("%s: replicas must be 1 (a session's jobs live in one process)" % at)
        if get(spec, "strategy.type") != "Recreate":
            problems.append("%s: strategy.type must be Recreate (never two servers for one agent)" % at)
        labels = get(spec, "template.metadata.labels") or {}
        annotations = get(spec, "template.metadata.annotations") or {}
        if annotations.get("prometheus.io/scrape") != "true" or annotations.get("prometheus.io/path") != "/metrics":
            problems.append("%s: the template needs prometheus.io/scrape \"true\" and prometheus.io/path /metrics" % at)
        check_pod(get(spec, "template.spec"), at, problems)
        pods[at] = (labels, get(spec, "template.spec"))
    for kind in ("Sandbox", "SandboxTemplate"):
        for at, d in by_kind.get(kind, []):
            template = get(d, "spec.podTemplate")
            if not isinstance(template, dict):
                problems.append("%s: no spec.podTemplate" % at)
                continue
            check_pod(template.get("spec"), at, problems)
            pods[at] = (get(template, "metadata.labels") or {}, template.get("spec"))

    secrets = {get(d, "metadata.name"): d for _, d in by_kind.get("Secret", [])}
    for at, d in by_kind.get("Secret", []):
        if not (d.get("data") or d.get("stringData")):
            problems.append("%s: no data or stringData" % at)
    if secrets:
        for at, (_, spec) in pods.items():
            for c in (spec or {}).get("containers") or []:
                for e in c.get("env") or []:
                    ref = get(e, "valueFrom.secretKeyRef")
                    if ref and ref.get("name") not in secrets:
                        problems.append("%s: env %s reads secret %s, which the files do not define" % (at, e.get("name"), ref.get("name")))
                    elif ref:
                        s = secrets[ref["name"]]
                        if ref.get("key") not in (s.get("data") or {}) and ref.get("key") not in (s.get("stringData") or {}):
                            problems.append("%s: env %s reads key %s, which secret %s lacks" % (at, e.get("name"), ref.get("key"), ref["name"]))

    def selects(selector):
        return [at for at, (labels, _) in pods.items()
                if selector and all(labels.get(k) == v for k, v in selector.items())]

    for at, d in by_kind.get("Service", []):
        ports = get(d, "spec.ports") or []
        selector = get(d, "spec.selector") or {}
        if pods and not selects(selector):
            problems.append("%s: selector %r selects no pod the files define" % (at, selector))
        # The API server takes any port name; one no selected container
        # declares leaves the Service without endpoints.
        for p in ports:
            target = p.get("targetPort")
            for pod_at in selects(selector) if isinstance(target, str) else []:
                names = {q.get("name") for c in (pods[pod_at][1] or {}).get("containers") or [] for q in c.get("ports") or []}
                if target not in names:
                    problems.append("%s: targetPort %r is not a port name of %s's containers" % (at, target, pod_at))
    for at, d in by_kind.get("NetworkPolicy", []):
        spec = d.get("spec") or {}
        if "Egress" not in (spec.get("policyTypes") or []) or spec.get("egress") not in ([], None):
            problems.append("%s: must deny all egress (policyTypes holds Egress, egress is empty)" % at)
        selector = get(spec, "podSelector.matchLabels") or {}
        if pods and not selects(selector):
            problems.append("%s: podSelector %r selects no pod the files define" % (at, selector))
    # What each reference must name: a claim takes from a warm pool, a pool
    # makes its pods from a template.
    refs = {"SandboxWarmPool": ("spec.sandboxTemplateRef.name", "SandboxTemplate"),
            "SandboxClaim": ("spec.warmPoolRef.name", "SandboxWarmPool")}
    for kind, (path, target) in refs.items():
        names = {get(d, "metadata.name") for _, d in by_kind.get(target, [])}
        for at, d in by_kind.get(kind, []):
            ref = get(d, path)
            if ref not in names:
                problems.append("%s: %s %r names no %s the files define" % (at, path, ref, target))
            if kind == "SandboxWarmPool" and not isinstance(get(d, "spec.replicas"), int):
                problems.append("%s: spec.replicas must be a number" % at)

    # The agent-sandbox pod templates run the Deployment's pod, on whatever runtime.
    deployments = [(at, spec) for at, (_, spec) in pods.items() if ": Deployment " in at]
    for at, (_, spec) in pods.items():
        if ": Deployment " in at or not deployments or not isinstance(spec, dict):
            continue
        ref_at, ref = deployments[0]
        mine = {k: v for k, v in spec.items() if k != "runtimeClassName"}
        theirs = {k: v for k, v in ref.items() if k != "runtimeClassName"}
        if json.dumps(mine, sort_keys=True) != json.dumps(theirs, sort_keys=True):
            keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            problems.append("%s: the pod spec differs from %s's in %s" % (at, ref_at, ", ".join(keys)))
    return problems


def load(paths):
    """(name#n, document) of every document in paths, empty ones left out."""
    docs = []
    for path in paths:
        with open(path) as f:
            read = [d for d in yaml.load_all(f, Loader=StrictLoader) if d is not None]
        docs.extend(("%s#%d" % (path, i), d) for i, d in enumerate(read, 1))
    return docs


# --------------------------------------------------------------------------
# The copy podman plays
# --------------------------------------------------------------------------

def play_copy(manifest, secret_file, image, host_port, suffix, outdir, *drop_env):
    deployments = [d for _, d in load([manifest]) if d.get("kind") == "Deployment"]
    secrets = [d for _, d in load([secret_file]) if d.get("kind") == "Secret"]
    if len(deployments) != 1 or len(secrets) != 1:
        raise SystemExit("play-copy: needs one Deployment in %s and one Secret in %s" % (manifest, secret_file))
    d, s = deployments[0], secrets[0]
    d["metadata"]["name"] += suffix
    spec = d["spec"]["template"]["spec"]
    secret_name = s["metadata"]["name"] + suffix
    for c in spec["containers"]:
        c["image"] = image
        c["env"] = [e for e in c.get("env") or [] if e.get("name") not in drop_env]
        for p in c.get("ports") or []:
            p["hostPort"], p["hostIP"] = int(host_port), "127.0.0.1"
            break
        for e in c.get("env") or []:
            ref = get(e, "valueFrom.secretKeyRef")
            if ref and ref["name"] == s["metadata"]["name"]:
                ref["name"] = secret_name
    data = {k: base64.b64decode(v).decode() for k, v in (s.get("data") or {}).items()}
    data.update(s.get("stringData") or {})
    with open(outdir + "/play.json", "w") as f:
        json.dump(d, f, indent=1)
    with open(outdir + "/secret.json", "w") as f:
        json.dump({k: base64.b64encode(v.encode()).decode() for k, v in data.items()}, f)
    c = spec["containers"][0]
    uid = get(c, "securityContext.runAsUser", get(spec, "securityContext.runAsUser"))
    print(d["metadata"]["name"])
    print(secret_name)
    print(data.get("token", ""))
    print(spec.get("terminationGracePeriodSeconds", 30))
    print(uid)
    print(" ".join(get(c, probe + ".httpGet.path") for probe in ("readinessProbe", "livenessProbe")))
    print(data.get("metrics-token", ""))


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        try:
            problems = check_documents(load(argv[1:]))
        except (yaml.YAMLError, OSError, ValueError) as e:
            problems = [str(e)]
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            return 1
        print("kube-lint: %s: structure ok" % ", ".join(argv[1:]))
        return 0
    if len(argv) >= 7 and argv[0] == "play-copy":
        play_copy(*argv[1:])
        return 0
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
