"""Checks of what a release carries, without building one.

VERSION is the one place the release number is written: server.json (the MCP
Registry's entry) and its packages must say the same.  server.json must pass
the registry's published schema (vendored in testdata/registry/), and its
name must be the GitHub namespace of the module path.  The man page must lint
clean with mandoc and fit 80 columns.  The licence, the security policy and
the contributing guide must exist and say what they must.  Building the
release files (make dist, the .deb, the npm packages) is checked by
scripts/package-check.sh.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


VERSION = read("VERSION").strip()
SERVER = json.loads(read("server.json"))


def module_path():
    return re.search(r"^module (\S+)$", read("go.mod"), re.M).group(1)


def test_server_json_passes_the_registry_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="Debian: apt-get install python3-jsonschema")
    schema = json.loads(read("testdata/registry/server.schema.json"))
    assert SERVER["$schema"] == schema["$id"], "server.json names another schema than the vendored one"
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = ["%s: %s" % ("/".join(map(str, e.absolute_path)), e.message) for e in validator.iter_errors(SERVER)]
    assert not errors, "server.json fails the registry's schema:\n" + "\n".join(errors)


def test_the_schema_check_refuses_a_bad_entry():
    """The validation above can fail: a version range and a long description are refused."""
    jsonschema = pytest.importorskip("jsonschema", reason="Debian: apt-get install python3-jsonschema")
    schema = json.loads(read("testdata/registry/server.schema.json"))
    bad = dict(SERVER, description="x" * 101)
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))
    bad = dict(SERVER, packages=[dict(SERVER["packages"][0], version="latest")])
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))


def test_server_json_versions_are_VERSION():
    assert SERVER["version"] == VERSION
    for p in SERVER["packages"]:
        if p["registryType"] == "oci":
            assert p["identifier"].endswith(":" + VERSION), p["identifier"]
        else:
            assert p["version"] == VERSION, p


def test_every_image_line_an_adopter_copies_carries_VERSION():
    """README, docs and manifests name the image mcp-exec with this
    release's tag (a manifest on an old tag pulls what the docs no longer
    describe); server.json's registry identifier carries it too."""
    files = ["README.md", "deploy/kubernetes/mcp-exec.yaml", "deploy/kubernetes/agent-sandbox.yaml"]
    files += ["docs/" + f for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")]
    for rel in files:
        for tag in re.findall(r"\bmcp-exec:(\d+\.\d+\.\d+)\b", read(rel)):
            assert tag == VERSION, "%s names mcp-exec:%s; VERSION is %s" % (rel, tag, VERSION)


def test_manifest_secret_line_makes_every_key_the_deployment_reads():
    text = read("deploy/kubernetes/mcp-exec.yaml")
    header = "\n".join(l for l in text.splitlines() if l.startswith("#"))
    for key in re.findall(r"secretKeyRef: \{name: [^,]+, key: ([a-z-]+)\}", text):
        assert "--from-literal=%s=" % key in header, "the install line makes no %r key" % key


def test_server_name_is_the_module_paths_github_namespace():
    m = re.fullmatch(r"github\.com/([^/]+)/([^/]+)", module_path())
    assert m, "the module path %s is not github.com/OWNER/NAME" % module_path()
    assert SERVER["name"] == "io.github.%s/%s" % m.groups()
    assert SERVER["repository"]["url"] == "https://" + module_path()


def test_image_and_npm_package_name_the_server():
    """The registry accepts a package only when it names the server back."""
    label = re.search(r'io\.modelcontextprotocol\.server\.name="([^"]+)"', read("Containerfile"))
    assert label and label.group(1) == SERVER["name"]
    assert '"mcpName": "$mcp_name"' in read("scripts/npm-pack.sh")
    assert [p["identifier"] for p in SERVER["packages"] if p["registryType"] == "npm"] == ["mcp-exec"]


def test_man_page_lints_clean():
    if not shutil.which("mandoc"):
        pytest.fail("mandoc is missing (Debian: apt-get install mandoc)")
    r = subprocess.run(["mandoc", "-T", "lint", "-W", "warning", os.path.join(ROOT, "mcp-exec.1")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_man_page_fits_80_columns():
    if not shutil.which("mandoc"):
        pytest.fail("mandoc is missing (Debian: apt-get install mandoc)")
    r = subprocess.run(["mandoc", "-T", "utf8", "-O", "width=78", os.path.join(ROOT, "mcp-exec.1")],
                       capture_output=True, text=True, check=True)
    text = re.sub(r".\x08", "", r.stdout)  # the overstrike of bold and underline
    long = [line for line in text.split("\n") if len(line) > 80]
    assert not long, "rendered wider than 80 columns:\n" + "\n".join(long)
    assert "ENVIRONMENT" in text and "MCP_EXEC_PROFILE" in text


def test_man_page_is_this_release():
    assert re.search(r'^\.TH MCP\\-EXEC 1 \S+ "mcp\\-exec %s"' % re.escape(VERSION), read("mcp-exec.1"), re.M)


def test_licence_security_and_contributing():
    assert read("LICENSE").startswith("MIT License\n\nCopyright (c) 2026 the mcp-exec authors\n")
    security = read("SECURITY.md")
    assert "https://%s/security/advisories/new" % module_path() in security
    for scope in ("Landlock", "seccomp", "Origin", "MCP_EXEC_ALLOW", "kill"):
        assert scope in security, scope
    contributing = read("CONTRIBUTING.md")
    for must in ("docs/code-layout.md", "72", "regression test", "make test"):
        assert must in contributing, must


def test_no_placeholder_addresses_left():
    for rel in ("scripts/deb.sh", "scripts/npm-pack.sh", "server.json", "Containerfile"):
        assert "example.invalid" not in read(rel), rel
