"""The Kubernetes manifests in deploy/kubernetes/ and their structure check.

scripts/kube-check.sh plays the Deployment with podman (`make kube-check`,
on the container step of `make test`); this suite needs no container
engine and runs on the binary target:

  - scripts/kube-lint.py accepts the manifests as they are;
  - it refuses a key given twice (PyYAML alone keeps the last);
  - it refuses each thing a broken manifest could get wrong: a probe on the
    wrong path, no token, a root or named user, a writable root,
    a memory bound above the limit, an agent-sandbox pod that drifted from
    the Deployment's, egress allowed, a claim naming no template;
  - play-copy writes the copy podman plays: the image, a hostPort on
    127.0.0.1, suffixed names, and the Secret's data as secretKeyRef reads it;
  - every agent-sandbox document uses a version its vendored CRDs
    (scripts/kube-apiserver/crds/) serve and do not deprecate.

The API's own checks (unknown fields, quantities, the restricted Pod
Security level, the CRDs' schemas) are made by a real kube-apiserver in
scripts/kube-check.sh (scripts/kube-apiserver/check.py), which also
proves that they bite on broken copies.
"""

import base64
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import yaml

from tests.helpers import REPO

DEPLOY = os.path.join(REPO, "deploy", "kubernetes")
LINT = os.path.join(REPO, "scripts", "kube-lint.py")
MANIFESTS = sorted(glob.glob(os.path.join(DEPLOY, "*.yaml")))

_spec = importlib.util.spec_from_file_location("kube_lint", LINT)
kube_lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kube_lint)


def lint(*paths):
    return subprocess.run([sys.executable, LINT, "check"] + list(paths), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


@pytest.fixture
def broken():
    """A copy of deploy/kubernetes to break, and a function that replaces
    text in one of its files (the text must be there)."""
    root = tempfile.mkdtemp(prefix="mcpx-kube-")
    for path in MANIFESTS:
        shutil.copy(path, root)

    def edit(name, old, new, count=1):
        path = os.path.join(root, name)
        with open(path) as f:
            text = f.read()
        assert old in text, "%r is not in %s" % (old, name)
        with open(path, "w") as f:
            f.write(text.replace(old, new, count))
        return root

    yield edit
    shutil.rmtree(root, ignore_errors=True)


def problems_of(root):
    r = lint(*sorted(glob.glob(os.path.join(root, "*.yaml"))))
    assert r.returncode == 1, "kube-lint accepted a broken manifest: %s" % r.stdout
    return r.stderr


def test_the_manifests_pass():
    r = lint(*MANIFESTS)
    assert r.returncode == 0, r.stderr
    assert "structure ok" in r.stdout


def test_a_key_given_twice_is_refused(broken):
    root = broken("mcp-exec.yaml", "          runAsUser: 10001\n", "          runAsUser: 10001\n          runAsUser: 0\n")
    assert "duplicate key 'runAsUser'" in problems_of(root)


def test_every_pod_of_the_manifests_is_the_deployments():
    docs = [d for _, d in kube_lint.load(MANIFESTS)]
    deployment = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    pods = [d["spec"]["podTemplate"]["spec"] for d in docs if d["kind"] in ("Sandbox", "SandboxTemplate")]
    assert len(pods) == 2
    assert all(p == deployment for p in pods)


@pytest.mark.parametrize("old,new,said", [
    ("httpGet: {path: /healthz, port: 8080}", "httpGet: {path: /health, port: 8080}", "must probe /healthz"),
    ("httpGet: {path: /healthz, port: 8080}", "httpGet: {path: /healthz, port: 9090}", "which the container does not declare"),
    ("        - name: MCP_EXEC_TOKEN\n          valueFrom: {secretKeyRef: {name: mcp-exec-agent1-token, key: token}}\n", "", "no token"),
    ("key: token}", "key: tokn}", "reads key tokn, which secret mcp-exec-agent1-token lacks"),
    ("          runAsUser: 10001\n", "          runAsUser: 0\n", "runAsUser must be a numeric id above 0"),
    ("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem must be true"),
    ("{name: TMPDIR, value: /tmp}", "{name: TMPDIR, value: /var/tmp}", "TMPDIR must be set to the mount path of an emptyDir"),
    ("{name: MCP_EXEC_MEMORY_LIMIT, value: 256MiB}", "{name: MCP_EXEC_MEMORY_LIMIT, value: 2GiB}", "is not below the memory limit"),
    ("  replicas: 1\n", "  replicas: 2\n", "replicas must be 1"),
    ("strategy: {type: Recreate}", "strategy: {type: RollingUpdate}", "must be Recreate"),
    ('prometheus.io/scrape: "true"', 'prometheus.io/scrape: "false"', "prometheus.io/scrape"),
    ('args: ["--listen", "0.0.0.0:8080"]', "args: []", "not listening"),
])
def test_a_broken_deployment_is_refused(broken, old, new, said):
    root = broken("mcp-exec.yaml", old, new)
    assert said in problems_of(root)


def test_a_sandbox_pod_that_drifted_is_refused(broken):
    root = broken("agent-sandbox.yaml", "{name: MCP_EXEC_MAX_JOBS, value: \"32\"}", "{name: MCP_EXEC_MAX_JOBS, value: \"64\"}")
    assert "Sandbox mcp-exec-agent1: the pod spec differs from" in problems_of(root)


def test_a_runtime_class_is_the_one_difference_allowed(broken):
    root = broken("agent-sandbox.yaml", "      # runtimeClassName: gvisor", "      runtimeClassName: gvisor")
    r = lint(*sorted(glob.glob(os.path.join(root, "*.yaml"))))
    assert r.returncode == 0, r.stderr


def test_egress_allowed_is_refused(broken):
    root = broken("networkpolicy.yaml", "  egress: []", "  egress:\n  - {}")
    assert "must deny all egress" in problems_of(root)


def test_a_service_selecting_no_pod_is_refused(broken):
    root = broken("mcp-exec.yaml", "  selector: {app.kubernetes.io/name: mcp-exec, app.kubernetes.io/instance: agent1}\n  ports",
                  "  selector: {app.kubernetes.io/name: mcp-exec, app.kubernetes.io/instance: agent9}\n  ports")
    assert "selects no pod the files define" in problems_of(root)


def test_a_claim_naming_no_warm_pool_is_refused(broken):
    root = broken("agent-sandbox.yaml", "  warmPoolRef: {name: mcp-exec}", "  warmPoolRef: {name: mcp-exec-gone}")
    assert "spec.warmPoolRef.name 'mcp-exec-gone' names no SandboxWarmPool the files define" in problems_of(root)


def test_a_warm_pool_naming_no_template_is_refused(broken):
    root = broken("agent-sandbox.yaml", "  sandboxTemplateRef: {name: mcp-exec}", "  sandboxTemplateRef: {name: mcp-exec-gone}")
    assert "names no SandboxTemplate the files define" in problems_of(root)


def test_a_service_target_port_no_container_declares_is_refused(broken):
    root = broken("mcp-exec.yaml", "targetPort: http,", "targetPort: http2,")
    assert "targetPort 'http2' is not a port name of" in problems_of(root)


def test_agent_sandbox_uses_a_served_version_that_is_not_deprecated():
    crds = {}
    for path in glob.glob(os.path.join(REPO, "scripts", "kube-apiserver", "crds", "*.yaml")):
        with open(path) as f:
            crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # 800 KB of CRDs
        for v in crd["spec"]["versions"]:
            crds[(crd["spec"]["group"] + "/" + v["name"], crd["spec"]["names"]["kind"])] = v
    docs = [d for _, d in kube_lint.load([os.path.join(DEPLOY, "agent-sandbox.yaml")])]
    assert len(docs) == 4
    for d in docs:
        version = crds.get((d["apiVersion"], d["kind"]))
        assert version is not None, "no vendored CRD serves %s %s" % (d["apiVersion"], d["kind"])
        assert version["served"] and not version.get("deprecated"), "%s %s is deprecated" % (d["apiVersion"], d["kind"])


def test_an_unknown_kind_or_api_version_is_refused(broken):
    root = broken("networkpolicy.yaml", "apiVersion: networking.k8s.io/v1", "apiVersion: networking.k8s.io/v1beta1")
    assert "apiVersion must be networking.k8s.io/v1" in problems_of(root)
    root = broken("secret-example.yaml", "kind: Secret", "kind: Secrets")
    assert "kind 'Secrets' is not one of" in problems_of(root)


def test_play_copy_writes_what_podman_plays(tmp_path):
    r = subprocess.run([sys.executable, LINT, "play-copy", os.path.join(DEPLOY, "mcp-exec.yaml"),
                        os.path.join(DEPLOY, "secret-example.yaml"), "localhost/x:1", "45678", "-kc1", str(tmp_path), "MCP_EXEC_PROFILE"],
                       stdout=subprocess.PIPE, universal_newlines=True, timeout=60, check=True)
    deployment, secret, token, grace, uid, probes = r.stdout.split("\n")[:6]
    assert (grace, uid, probes) == ("30", "10001", "/healthz /healthz")
    assert (deployment, secret) == ("mcp-exec-agent1-kc1", "mcp-exec-agent1-token-kc1")
    d = json.loads((tmp_path / "play.json").read_text())
    assert d["kind"] == "Deployment" and d["metadata"]["name"] == deployment
    c = d["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "localhost/x:1"
    assert c["ports"][0]["hostPort"] == 45678 and c["ports"][0]["hostIP"] == "127.0.0.1"
    ref = next(e for e in c["env"] if e["name"] == "MCP_EXEC_TOKEN")["valueFrom"]["secretKeyRef"]
    assert not [e for e in c["env"] if e["name"] == "MCP_EXEC_PROFILE"], "the variable to drop is still there"
    assert ref == {"name": secret, "key": "token"}
    data = json.loads((tmp_path / "secret.json").read_text())
    assert base64.b64decode(data["token"]).decode() == token and token
