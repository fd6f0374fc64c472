"""The container images themselves: what a job finds in them.

Runs on the container target only (MCP_EXEC_TARGET=container and
MCP_EXEC_IMAGE, the image `scripts/offline-image.sh` or `podman build .`
makes); elsewhere every test is skipped with the reason.  The toolbox tests
also need MCP_EXEC_TOOLBOX_IMAGE, the image of the Containerfile's `toolbox`
stage (`scripts/offline-image.sh toolbox`, `make image-toolbox`).

  - jobs run under bash: the image sets SHELL=/bin/bash, so `[[ ]]` and
    `set -o pipefail` work in the container as on a host whose $SHELL is bash
    (without it /bin/sh runs them: dash on Debian, busybox ash on alpine);
  - behind tini and as PID 1 alike, and `-e SHELL=...` still overrides it;
  - the hardened `podman run` lines docs/container.md gives start and work;
  - the toolbox image has each audit tool, and git accepts a repository that
    belongs to another user (a mounted checkout);
  - the image runs with the server's own path as the command, and with the
    server as the entrypoint (then it is PID 1);
  - it runs as deploy/kubernetes/mcp-exec.yaml runs it: a numeric non-root
    user with no passwd entry, a read-only root, the emptyDirs as tmpfs,
    sandboxed or not.
"""

import os
import re
import shutil
import subprocess
import tempfile
import uuid

import pytest

from tests.helpers import PODMAN, REPLY, SLACK, Server, assert_forgotten, needs_container_target

TOOLBOX = os.environ.get("MCP_EXEC_TOOLBOX_IMAGE")
SERVER_PATH = "/usr/local/bin/mcp-exec"  # the server's path inside the image

# A bash-only test, then pipefail makes `false | true` fail.
BASH_ONLY = "[[ 1 == 1 ]] && set -o pipefail && false | true; echo $?"

# What every audit tool must answer in the toolbox image.
AUDIT_TOOLS = ["git --version", "rg --version", "python3 --version", "make --version",
               "file --version", "jq --version", "find --version", "diff --version",
               "less --version"]

# docs/container.md's hardened `podman run` flags (without the image and the mounts).
HARDENED = ["--network=none", "--cap-drop=all", "--security-opt=no-new-privileges",
            "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=512m", "--pids-limit=1024"]


def needs_toolbox():
    needs_container_target()
    if not TOOLBOX:
        pytest.skip("needs MCP_EXEC_TOOLBOX_IMAGE (the toolbox image: scripts/offline-image.sh toolbox)")


def images():
    """The default image and, when given, the toolbox image."""
    return [pytest.param("default", id="default"),
            pytest.param("toolbox", id="toolbox")]


def image_of(which):
    if which == "toolbox":
        needs_toolbox()
        return TOOLBOX
    needs_container_target()
    return os.environ["MCP_EXEC_IMAGE"]


def run_argv(image, flags=(), args=()):
    """`podman run -i --rm` of image, named as server_argv names its containers
    (so Server.host_pid and send_signal work), with extra podman flags."""
    return ([PODMAN, "run", "-i", "--rm", "--name", "mcp-exec-test-" + uuid.uuid4().hex[:12]]
            + list(flags) + [image] + list(args))


def everything(r):
    return (r.get("stdout") or {}).get("data", "") + (r.get("stderr") or {}).get("data", "")


def ok(s, command, **kw):
    """stdout of a job that must succeed (both streams captured)."""
    r = s.tool("execute", dict({"command": command, "capture": "all"}, **kw))
    assert r["state"] == "success" and r["exit_code"] == 0, r
    return (r.get("stdout") or {}).get("data", "")  # the agent profile leaves out a stream that wrote nothing


def assert_bash(s):
    assert ok(s, BASH_ONLY) == "1\n"
    assert ok(s, "echo $SHELL") == "/bin/bash\n"
    out = ok(s, 'readlink /proc/$$/exe; echo "${BASH_VERSION:+bash}"').split("\n")
    assert out[0].endswith("/bash") and out[1] == "bash", out


# --------------------------------------------------------------------------
# Every image: bash is the shell
# --------------------------------------------------------------------------

@pytest.mark.parametrize("which", images())
def test_commands_run_under_bash(make_server, which):
    s = make_server(argv=run_argv(image_of(which)))
    assert_bash(s)


@pytest.mark.parametrize("which", images())
def test_commands_run_under_bash_without_tini(make_server, which):
    s = make_server(argv=run_argv(image_of(which), ["--entrypoint", "/usr/local/bin/mcp-exec"]))
    assert ok(s, "cat /proc/1/comm") == "mcp-exec\n"
    assert_bash(s)


def test_default_launch_runs_bash(make_server):
    """The server every suite starts on the container target uses bash too."""
    needs_container_target()
    assert_bash(make_server())


def test_shell_can_still_be_chosen(make_server):
    """SHELL=/bin/bash is the image's default, not a fixed choice."""
    needs_container_target()
    s = make_server(env={"SHELL": "/bin/sh"})
    out = ok(s, "readlink /proc/$$/exe; readlink -f /bin/sh").split("\n")
    assert out[0] == out[1], out
    assert ok(s, "echo $SHELL") == "/bin/sh\n"


@pytest.mark.parametrize("which", images())
def test_runtime_tools_present(make_server, which):
    s = make_server(argv=run_argv(image_of(which)))
    ok(s, "test -x /sbin/tini && test -x /bin/bash && command -v ps pkill timeout")
    assert ok(s, "cat /proc/1/comm") == "tini\n"


# --------------------------------------------------------------------------
# The hardened run lines of docs/container.md
# --------------------------------------------------------------------------

@pytest.fixture
def project():
    """A host directory to mount: a file and a git repository, owned by a
    user that is not the container's (as a checkout on a workstation is)."""
    root = tempfile.mkdtemp(prefix="mcpx-image-")
    try:
        os.chmod(root, 0o755)
        with open(os.path.join(root, "notes.txt"), "w") as f:
            f.write("alpha\nneedle in a haystack\nomega\n")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_hardened_default_image(make_server, project):
    """docs/container.md's line for the default image: no network, no capabilities,
    read-only root, the project mounted writable, jobs confined to it."""
    needs_container_target()
    os.chown(project, 1000, 1000)
    os.chown(os.path.join(project, "notes.txt"), 1000, 1000)
    flags = HARDENED + ["--memory=2g", "--user", "1000:1000", "-v", "%s:/work" % project, "-w", "/work",
                        "-e", "MCP_EXEC_PROFILE=agent", "-e", "MCP_EXEC_ROOTS=/work",
                        "-e", "MCP_EXEC_SANDBOX=roots", "-e", "MCP_EXEC_NETWORK=off"]
    s = make_server(argv=run_argv(os.environ["MCP_EXEC_IMAGE"], flags))
    assert_bash(s)
    assert ok(s, "grep needle notes.txt") == "needle in a haystack\n"
    ok(s, "echo made > new.txt && echo x > \"$TMPDIR/x\"")
    assert os.stat(os.path.join(project, "new.txt")).st_uid == 1000
    r = s.tool("execute", {"command": "echo x > /etc/evil", "capture": "all"})
    assert r["exit_code"] != 0, r
    r = s.tool("execute", {"command": "exec 3<>/dev/tcp/10.0.2.2/80", "capture": "all"})
    assert r["exit_code"] != 0, r


def test_hardened_toolbox_audit(make_server, project):
    """docs/policy-and-sandbox.md's audit line for the toolbox: the tree mounted read-only,
    writes only to /scratch and $TMPDIR, git works on the mounted repository."""
    needs_toolbox()
    subprocess.run(["git", "init", "-q", project], check=True)
    subprocess.run(["git", "-C", project, "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], check=True)
    subprocess.run(["git", "-C", project, "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "-m", "first"], check=True)
    subprocess.run(["chown", "-R", "1234:1234", project], check=True)
    flags = HARDENED + ["--memory=4g", "-v", "%s:/src:ro" % project, "--tmpfs", "/scratch", "-w", "/src",
                        "-e", "MCP_EXEC_PROFILE=agent", "-e", "MCP_EXEC_ROOTS=/src:/scratch",
                        "-e", "MCP_EXEC_SANDBOX=roots", "-e", "MCP_EXEC_NETWORK=off",
                        "-e", "MCP_EXEC_RLIMITS=cpu=600,as=4G,nproc=512,fsize=1G,nofile=4096",
                        "-e", "MCP_EXEC_MAX_JOBS=4", "-e", "MCP_EXEC_TIME_LIMIT=900"]
    s = make_server(argv=run_argv(TOOLBOX, flags))
    assert_bash(s)
    # rg reads stdin when given no path and stdin is not a tty: give it one
    assert ok(s, "rg -n needle .") == "./notes.txt:2:needle in a haystack\n"
    assert ok(s, "git log --format=%s") == "first\n"
    assert ok(s, "git status --porcelain") == ""
    r = s.tool("execute", {"command": "touch /src/new", "capture": "all"})
    assert r["exit_code"] != 0, r
    # docs/policy-and-sandbox.md's recipe: in this container (no CAP_SYS_ADMIN, so no mount
    # namespace of the job's own) a sandboxed job may change no file's mode,
    # owner or times, so cp -a would fail on each; cp -r keeps the content
    ok(s, "cp -r /src /scratch/src && cd /scratch/src && echo more >> notes.txt"
          " && git diff --stat | grep -q notes.txt")


# --------------------------------------------------------------------------
# The toolbox image
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toolbox():
    needs_toolbox()
    s = Server(argv=run_argv(TOOLBOX))
    yield s
    s.close(15)


@pytest.mark.parametrize("command", AUDIT_TOOLS)
def test_toolbox_audit_tool_runs(toolbox, command):
    r = toolbox.tool("execute", {"command": command, "capture": "all"})
    assert r["state"] == "success" and r["exit_code"] == 0, r
    assert everything(r).strip(), r


def test_toolbox_tools_do_their_job(toolbox):
    d = "/tmp/mcpx-" + uuid.uuid4().hex
    ok(toolbox, "mkdir %s && cd %s && printf 'a\\nneedle\\n' > f && printf 'a\\n' > g" % (d, d))
    assert ok(toolbox, "rg -l needle %s" % d) == "%s/f\n" % d
    assert ok(toolbox, "echo '{\"a\": [1, 2]}' | jq -c '.a | length'") == "2\n"
    assert ok(toolbox, "python3 -c 'import json, sqlite3; print(json.dumps(1 + 1))'") == "2\n"
    assert ok(toolbox, "printf 'all:\\n\\t@echo built\\n' | make -s -f -") == "built\n"
    assert "ASCII text" in ok(toolbox, "file %s/f" % d)
    assert ok(toolbox, "find %s -name g | xargs cat" % d) == "a\n"
    assert "+needle" in toolbox.tool("execute", {"command": "diff -u %s/g %s/f" % (d, d),
                                                 "capture": "all"})["stdout"]["data"]
    assert ok(toolbox, "less -FX %s/g" % d) == "a\n"


def test_toolbox_git_accepts_a_repository_of_another_user(toolbox):
    d = "/tmp/mcpx-" + uuid.uuid4().hex
    ok(toolbox, "git init -q %s && chown -R 1234:1234 %s" % (d, d))
    assert ok(toolbox, "git -C %s status --porcelain && echo fine" % d) == "fine\n"


# --------------------------------------------------------------------------
# The image as a drop-in: the server's path as the command, or the entrypoint
# --------------------------------------------------------------------------

def test_image_with_server_path_as_command_serves(make_server):
    needs_container_target()
    image = os.environ["MCP_EXEC_IMAGE"]
    s = make_server(argv=run_argv(image, args=[SERVER_PATH]))
    assert s.init_result["serverInfo"]["name"] == "mcp-exec"
    jid = s.job("echo drop-in; echo to-stderr >&2")
    r = s.collect(jid, timeout=REPLY)
    assert r.get("state") == "success" and r.get("exit_code") == 0, r
    assert r["stdout"]["data"] == "drop-in\n", r
    assert_forgotten(s, jid)
    assert s.close(timeout=10 + SLACK) == 0, "graceful shutdown must exit with status 0"


def test_image_with_server_as_entrypoint_runs_it_as_pid1(make_server):
    needs_container_target()
    image = os.environ["MCP_EXEC_IMAGE"]
    s = make_server(argv=run_argv(image, flags=["--entrypoint", SERVER_PATH]))
    jid = s.job("cat /proc/1/comm")
    r = s.collect(jid, timeout=REPLY)
    assert r.get("state") == "success", r
    assert r["stdout"]["data"] == "mcp-exec\n", "PID 1 is not the server: %r" % r
    assert s.close(timeout=10 + SLACK) == 0, "graceful shutdown must exit with status 0"


# --------------------------------------------------------------------------
# As the Kubernetes manifest runs it
# --------------------------------------------------------------------------

KUBE_MANIFEST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "deploy", "kubernetes", "mcp-exec.yaml")


def manifest_user():
    """The runAsUser and runAsGroup of deploy/kubernetes/mcp-exec.yaml."""
    with open(KUBE_MANIFEST) as f:
        text = f.read()
    ids = [re.search(r"^ *%s: ([0-9]+)$" % key, text, re.M) for key in ("runAsUser", "runAsGroup")]
    assert all(ids), "no numeric runAsUser/runAsGroup in %s" % KUBE_MANIFEST
    return tuple(int(m.group(1)) for m in ids)


def kube_flags(sandbox):
    """podman flags for the manifest's pod: its user, a read-only root, every
    capability dropped, no privilege escalation, and tmpfs mounts where the
    manifest mounts emptyDirs (mode 0777 and exec, as an emptyDir is)."""
    uid, gid = manifest_user()
    return ["--user", "%d:%d" % (uid, gid), "--read-only", "--cap-drop=all",
            "--security-opt=no-new-privileges", "--memory=1g",
            "--tmpfs", "/tmp:rw,exec,nosuid,nodev,mode=0777,size=512m",
            "--tmpfs", "/work:rw,exec,nosuid,nodev,mode=0777,size=512m", "-w", "/work",
            "-e", "TMPDIR=/tmp", "-e", "HOME=/work", "-e", "MCP_EXEC_PROFILE=agent",
            "-e", "MCP_EXEC_ROOTS=/work", "-e", "MCP_EXEC_SANDBOX=" + sandbox,
            "-e", "MCP_EXEC_MEMORY_LIMIT=256MiB"]


@pytest.mark.parametrize("sandbox", ["off", "roots"])
@pytest.mark.parametrize("which", images())
def test_runs_as_the_manifests_non_root_user(make_server, which, sandbox):
    """The image keeps root as its default user and must also work as the
    manifest's numeric user, which has no passwd entry and no writable
    place but the emptyDirs: jobs run, write to the work directory, $TMPDIR
    and $HOME, keep their directory between calls, and the server's own
    files (kept-directory reports, private TMPDIRs) go to /tmp."""
    uid, gid = manifest_user()
    s = make_server(argv=run_argv(image_of(which), kube_flags(sandbox)))
    assert_bash(s)
    assert ok(s, "id -u; id -g") == "%d\n%d\n" % (uid, gid)
    ok(s, 'echo a > made.txt && echo b > "$TMPDIR/t" && cat "$TMPDIR/t" && mkdir -p "$HOME/.cache/x"')
    ok(s, "mkdir sub && cd sub")
    assert ok(s, "pwd; cat ../made.txt") == "/work/sub\na\n"  # the agent profile keeps the cwd
    jid = s.job("sleep 0.2; echo late")
    r = s.collect(jid, timeout=REPLY)
    assert r.get("state") == "success" and r["stdout"]["data"] == "late\n", r
    r = s.tool("execute", {"command": "echo x > /etc/evil", "capture": "all"})
    assert r["exit_code"] != 0, r
    if sandbox != "off":
        r = s.tool("execute", {"command": "echo x > /tmp/outside-the-jobs-tmpdir", "capture": "all"})
        assert r["exit_code"] != 0, "a sandboxed job wrote outside its roots and TMPDIR: %r" % r
    if which == "toolbox" and sandbox == "off":
        # Under the sandbox in a pod without mount namespaces every chmod is
        # refused, and git init and clone chmod their config
        # (docs/running-many-agents.md): the manifest leaves the sandbox off.
        ok(s, "git init -q repo && cd repo && git config --global user.email a@b && git config --global user.name a"
              " && echo x > f && git add f && git commit -qm one && git log --format=%s")
    assert s.close(timeout=10 + SLACK) == 0, "graceful shutdown must exit with status 0"
