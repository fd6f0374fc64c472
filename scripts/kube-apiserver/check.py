#!/usr/bin/env python3
"""Applies deploy/kubernetes/*.yaml to a real Kubernetes API server, as
`kubectl apply --dry-run=server --validate=strict` would, with no cluster
and with kubectl too when it is on the PATH.

  check.py KUBE_APISERVER DIR

KUBE_APISERVER is the binary this module builds (scripts/kube-check.sh
builds it), DIR the manifests. The server runs on loopback in a temporary
directory with etcd (Debian: etcd-server) and no controllers; then:

  - a namespace labelled for the restricted Pod Security level (enforce,
    warn and audit, version latest) is made, with its default service
    account (no controller manager here makes it);
  - the agent-sandbox CRDs in crds/ are installed and awaited (Established,
    then served by discovery);
  - every document of DIR is sent as its YAML (the server decodes it: a
    key given twice is refused too) with dryRun=All and
    fieldValidation=Strict; and the pod every pod template would make (a
    Deployment's spec.template, a Sandbox's or SandboxTemplate's
    spec.podTemplate) is dry-run created as a Pod, which is what the
    restricted level's enforce mode admits or refuses;
  - any refusal fails, and so does any Warning header (a Pod Security
    warning on a workload, a deprecated API version, a field the server
    dropped);
  - BITES, a table of broken copies (a privilege escalation allowed, an
    unknown field, a bad quantity, ...), must each be refused or warned
    about with the text given: a server that accepts one fails the check.

Prints a line per document and per broken copy; exits 1 with the reason when
a check fails, 2 when the server could not be started.
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import yaml
except ImportError:
    sys.exit("kube-api-check: missing PyYAML for %s (Debian: apt-get install python3-yaml)" % sys.executable)

# libyaml's loader when there is one: the CRDs are 800 KB of YAML.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
HERE = os.path.dirname(os.path.abspath(__file__))
CRDS = os.path.join(HERE, "crds")
NAMESPACE = "mcp-exec-check"
START_SECONDS = 240   # etcd and the API server up and ready, on a loaded 2-core VM
CRD_SECONDS = 120     # the CRDs established and in discovery
STOP_SECONDS = 30     # each process gone after SIGTERM (then SIGKILL)
REQUEST_SECONDS = 60

# Broken copies the server must refuse (or warn about): the file, the text
# replaced in it (the first occurrence), its replacement, and what the
# server's answer must say.
BITES = [
    ("mcp-exec.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true",
     'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false'),
    ("mcp-exec.yaml", "capabilities: {drop: [ALL]}", "capabilities: {drop: [NET_RAW]}",
     'must set securityContext.capabilities.drop=["ALL"]'),
    ("mcp-exec.yaml", "seccompProfile: {type: RuntimeDefault}", "seccompProfile: {type: Unconfined}",
     'seccompProfile.type to "Unconfined"'),
    ("mcp-exec.yaml", "emptyDir: {sizeLimit: 1Gi}", "hostPath: {path: /srv}", 'restricted volume type "hostPath"'),
    ("mcp-exec.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: false\n          privileged: true",
     # refused before Pod Security sees it: the server runs without --allow-privileged
     "securityContext.privileged: Forbidden"),
    ("mcp-exec.yaml", "        runAsUser: 10001\n        runAsGroup", "        runAsUser: 0\n        runAsGroup",
     "must not set runAsUser=0"),
    ("mcp-exec.yaml", "readinessProbe:", "readinessProbes:",
     'unknown field "spec.template.spec.containers[0].readinessProbes"'),
    ("mcp-exec.yaml", "memory: 1Gi,", "memory: 1Gx,", "quantities must match the regular expression"),
    ("mcp-exec.yaml", "requests: {cpu: 100m, memory: 256Mi}", "requests: {cpu: 100m, memory: 2Gi}",
     "must be less than or equal to memory limit"),
    ("mcp-exec.yaml", '{name: MCP_EXEC_SANDBOX, value: "off"}', "{name: MCP_EXEC_SANDBOX, value: off}",
     "cannot unmarshal bool"),
    ("secret-example.yaml", "type: Opaque", "type: Opaque\ntype: Opaque", 'key "type" already set in map'),
    ("agent-sandbox.yaml", "mountPath: /tmp}", "mountPth: /tmp}",
     'unknown field "spec.podTemplate.spec.containers[0].volumeMounts[0].mountPth"'),
    ("agent-sandbox.yaml", "runAsNonRoot: true", "runAsNonRoot: false",
     'violates PodSecurity "restricted:latest": runAsNonRoot != true'),
    ("agent-sandbox.yaml", "apiVersion: agents.x-k8s.io/v1beta1", "apiVersion: agents.x-k8s.io/v1alpha1",
     "is deprecated"),
]


class Failed(Exception):
    """A check that failed: the message says which and why."""


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """etcd and kube-apiserver on loopback, in work (a temporary directory)."""

    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.token = secrets.token_hex(16)
        self.procs = []  # (name, Popen, log path), in start order
        self.url = None
        self.context = None

    def start(self):
        w = self.work
        for cmd in (["openssl", "genrsa", "-out", w + "/sa.key", "2048"],
                    ["openssl", "rsa", "-in", w + "/sa.key", "-pubout", "-out", w + "/sa.pub"]):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        with open(w + "/tokens.csv", "w") as f:
            f.write('%s,admin,admin,"system:masters"\n' % self.token)
        client, peer, secure = free_port(), free_port(), free_port()
        etcd_url = "http://127.0.0.1:%d" % client
        self.spawn("etcd", [shutil.which("etcd") or "etcd", "--name", "check", "--data-dir", w + "/etcd",
                            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                            "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                            "--initial-cluster", "check=http://127.0.0.1:%d" % peer,
                            "--logger", "zap", "--log-level", "warn"])
        self.spawn("kube-apiserver", [self.binary, "--etcd-servers", etcd_url,
                                      "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                                      "--secure-port", str(secure), "--cert-dir", w + "/certs",
                                      "--service-account-issuer", "https://kubernetes.default.svc",
                                      "--service-account-key-file", w + "/sa.pub",
                                      "--service-account-signing-key-file", w + "/sa.key",
                                      "--token-auth-file", w + "/tokens.csv", "--anonymous-auth=false",
                                      "--authorization-mode", "RBAC",
                                      "--service-cluster-ip-range", "10.96.0.0/24",
                                      "--endpoint-reconciler-type", "none",
                                      "--enable-priority-and-fairness=false", "--profiling=false"])
        self.url = "https://127.0.0.1:%d" % secure
        self.await_ready()

    def spawn(self, name, argv):
        log = os.path.join(self.work, name + ".log")
        with open(log, "w") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((name, p, log))

    def log_tail(self, lines=15):
        text = []
        for name, _, log in self.procs:
            with open(log, errors="replace") as f:
                text += ["%s: %s" % (name, l.rstrip()) for l in f.readlines()[-lines:]]
        return "\n".join(text)

    def await_ready(self):
        """Polls /readyz until it answers 200: the server says when it is
        ready only there. Fails at once when a process has exited."""
        deadline = time.monotonic() + START_SECONDS
        last = "no answer"
        while time.monotonic() < deadline:
            for name, p, _ in self.procs:
                if p.poll() is not None:
                    raise Failed("%s exited with status %d before the server was ready:\n%s" % (name, p.returncode, self.log_tail()))
            if self.context is None and os.path.exists(self.work + "/certs/apiserver.crt"):
                # The server's self-signed certificate, written at its start.
                self.context = ssl.create_default_context(cafile=self.work + "/certs/apiserver.crt")
                self.context.check_hostname = False  # the certificate names the host, not 127.0.0.1
            if self.context is not None:
                try:
                    status, _, body = self.call("GET", "/readyz", timeout=5)
                    if status == 200:
                        return
                    last = "%d %s" % (status, body[-300:])
                except (OSError, ssl.SSLError) as e:
                    last = str(e)
            time.sleep(0.5)
        raise Failed("the API server was not ready within %d s (%s):\n%s" % (START_SECONDS, last, self.log_tail()))

    def stop(self):
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=STOP_SECONDS)

    def call(self, method, path, body=None, content_type="application/json", timeout=REQUEST_SECONDS):
        """(status, warnings, body text) of one request; HTTP errors are answers too."""
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as r:
                return r.status, r.headers.get_all("Warning") or [], r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get_all("Warning") or [], e.read().decode()


# --------------------------------------------------------------------------
# What is applied
# --------------------------------------------------------------------------

class Resources:
    """The REST path of each apiVersion and kind, from the server's discovery."""

    def __init__(self, server):
        self.server = server
        self.known = {}  # (apiVersion, kind) -> (plural, namespaced)

    def lookup(self, api_version, kind, refresh=False):
        if (api_version, kind) not in self.known or refresh:
            base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
            status, _, body = self.server.call("GET", base)
            if status == 200:
                for r in json.loads(body).get("resources", []):
                    if "/" not in r["name"]:
                        self.known[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        if (api_version, kind) not in self.known:
            raise Failed("the server serves no %s %s" % (api_version, kind))
        return self.known[(api_version, kind)]

    def collection(self, api_version, kind):
        plural, namespaced = self.lookup(api_version, kind)
        base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
        return "%s%s/%s" % (base, "/namespaces/" + NAMESPACE if namespaced else "", plural)


def must(answer, what):
    status, warnings, body = answer
    if status >= 300:
        raise Failed("%s: %d %s" % (what, status, body[:500]))
    return json.loads(body)


def documents(text):
    """(YAML text, parsed) of each document of a file, empty ones left out.
    The text is what is sent: the server decodes it itself."""
    docs = []
    for part in re.split(r"(?m)^---[ \t]*\n", text):
        parsed = yaml.load(part, Loader=LOADER)  # the kind and name only; the server judges the rest
        if parsed is not None:
            docs.append((part, parsed))
    return docs


def pod_templates(doc):
    """The pod templates of a document: a Deployment's, a Sandbox's or SandboxTemplate's."""
    spec = doc.get("spec") or {}
    template = spec.get("template") if doc.get("kind") == "Deployment" else spec.get("podTemplate")
    return [template] if isinstance(template, dict) else []


def apply(server, resources, text, where):
    """Dry-run applies each document of text and the pod each pod template
    would make; returns the problems (refusals and warnings), each with
    where it was."""
    problems = []
    query = "?dryRun=All&fieldValidation=Strict"
    for part, doc in documents(text):
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        name = (doc.get("metadata") or {}).get("name")
        at = "%s: %s %s" % (where, kind, name)
        try:
            path = resources.collection(api_version, kind)
        except Failed as e:
            problems.append("%s: %s" % (at, e))
            continue
        status, warnings, body = server.call("POST", path + query, part.encode(), "application/yaml")
        problems += ["%s: warning: %s" % (at, w) for w in warnings]
        if status >= 300:
            problems.append("%s: refused (%d): %s" % (at, status, message(body)))
        for template in pod_templates(doc):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": dict(template.get("metadata") or {}, name="%s-pod" % name),
                   "spec": template.get("spec")}
            status, warnings, body = server.call("POST", resources.collection("v1", "Pod") + query, pod)
            problems += ["%s: its pod: warning: %s" % (at, w) for w in warnings]
            if status >= 300:
                problems.append("%s: its pod refused (%d): %s" % (at, status, message(body)))
    return problems


def message(body):
    try:
        return json.loads(body).get("message", body)
    except ValueError:
        return body[:500]


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------

def prepare(server, resources):
    """The namespace, its service account and the CRDs, made for real."""
    labels = {"pod-security.kubernetes.io/%s%s" % (mode, suffix): value
              for mode in ("enforce", "warn", "audit")
              for suffix, value in (("", "restricted"), ("-version", "latest"))}
    must(server.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": NAMESPACE, "labels": labels}}),
         "creating namespace " + NAMESPACE)
    must(server.call("POST", "/api/v1/namespaces/%s/serviceaccounts" % NAMESPACE,
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
         "creating the default service account")
    crds = []
    for name in sorted(os.listdir(CRDS)):
        if name.endswith(".yaml"):
            with open(os.path.join(CRDS, name)) as f:
                for part, doc in documents(f.read()):
                    must(server.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                     part.encode(), "application/yaml"), "installing CRD " + name)
                    crds.append(doc)
    deadline = time.monotonic() + CRD_SECONDS
    for crd in crds:
        await_crd(server, resources, crd, deadline)
    print("kube-api-check: %d CRDs established (%s)" % (len(crds), ", ".join(c["metadata"]["name"] for c in crds)))


def await_crd(server, resources, crd, deadline):
    """Polls until crd is Established and its served versions are in
    discovery (the server announces neither)."""
    name = crd["metadata"]["name"]
    while True:
        got = must(server.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name), "reading CRD " + name)
        established = any(c.get("type") == "Established" and c.get("status") == "True"
                          for c in (got.get("status") or {}).get("conditions") or [])
        if established:
            try:
                for v in crd["spec"]["versions"]:
                    if v.get("served"):
                        resources.lookup("%s/%s" % (crd["spec"]["group"], v["name"]), crd["spec"]["names"]["kind"], refresh=True)
                return
            except Failed:
                pass
        if time.monotonic() > deadline:
            raise Failed("CRD %s was not established and served within %d s" % (name, CRD_SECONDS))
        time.sleep(0.2)


def check(server, directory):
    resources = Resources(server)
    prepare(server, resources)
    files = sorted(f for f in os.listdir(directory) if f.endswith(".yaml"))
    texts = {}
    problems = []
    for f in files:
        with open(os.path.join(directory, f)) as fh:
            texts[f] = fh.read()
        found = apply(server, resources, texts[f], f)
        problems += found
        if not found:
            print("kube-api-check: %s: every document and pod accepted, no warning" % f)
    kubectl = shutil.which("kubectl")
    if kubectl:
        problems += kubectl_apply(server, kubectl, directory)
    else:
        # The requests above are the ones it would send; kubectl only adds
        # its own client (the version a cluster's users run).
        print("kube-api-check: no kubectl on the PATH: the requests above stand in for its apply")
    if problems:
        raise Failed("the API server refused or warned about the manifests:\n" + "\n".join(problems))
    for f, old, new, said in BITES:
        if f not in texts:
            continue
        if old not in texts[f]:
            raise Failed("broken copy: %r is not in %s" % (old, f))
        found = apply(server, resources, texts[f].replace(old, new, 1), f)
        if not any(said in p for p in found):
            raise Failed("the API server did not refuse %s with %r replaced by %r (expected %r), it said:\n%s"
                         % (f, old, new, said, "\n".join(found) or "nothing"))
        print("kube-api-check: refused as it must be: %s with %s -> %s" % (f, " ".join(old.split()), " ".join(new.split())))


def kubectl_apply(server, kubectl, directory):
    """Runs the command a user would, `kubectl apply --dry-run=server
    --validate=strict`, on every file of directory, a warning failing it
    too. Returns the problems: kubectl's output when it fails."""
    config = os.path.join(server.work, "kubeconfig")
    with open(config, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "check",
                   "clusters": [{"name": "check", "cluster": {
                       "server": server.url,
                       "certificate-authority": server.work + "/certs/apiserver.crt",
                       # the self-signed certificate names the service, not 127.0.0.1
                       "tls-server-name": "kubernetes.default.svc"}}],
                   "users": [{"name": "admin", "user": {"token": server.token}}],
                   "contexts": [{"name": "check", "context": {
                       "cluster": "check", "user": "admin", "namespace": NAMESPACE}}]}, f)
    # Its discovery cache too stays in the temporary directory, not in ~/.kube.
    argv = [kubectl, "--kubeconfig", config, "--cache-dir", server.work + "/kube-cache", "apply", "--dry-run=server", "--validate=strict",
            "--warnings-as-errors", "-f", directory]
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=REQUEST_SECONDS * 4)
    except subprocess.TimeoutExpired:
        return ["kubectl apply did not finish within %d s" % (REQUEST_SECONDS * 4)]
    if run.returncode != 0:
        return ["kubectl apply --dry-run=server --validate=strict failed (%d):\n%s%s"
                % (run.returncode, run.stdout, run.stderr)]
    for line in run.stdout.splitlines():
        print("kube-api-check: kubectl: %s" % line)
    return []


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    binary, directory = argv
    work = tempfile.mkdtemp(prefix="mcpx-kube-api-")
    server = Server(os.path.abspath(binary), work)
    try:
        try:
            server.start()
        except (Failed, OSError, subprocess.SubprocessError) as e:
            print("kube-api-check: could not start the API server: %s" % e, file=sys.stderr)
            return 2
        status, _, version = server.call("GET", "/version")
        print("kube-api-check: kube-apiserver %s ready at %s" % (json.loads(version).get("gitVersion"), server.url))
        check(server, directory)
        print("kube-api-check: ok")
        return 0
    except Failed as e:
        print("kube-api-check: %s" % e, file=sys.stderr)
        return 1
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
