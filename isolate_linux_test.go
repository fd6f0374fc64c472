package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// metadataOf is what a metadata change alters, ctime above all (every
// change of mode, owner, times, xattrs or flags sets it), of each path.
func metadataOf(t *testing.T, paths ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s mode %o owner %d:%d mtime %d.%d ctime %d.%d\n", p, st.Mode, st.Uid, st.Gid,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return b.String()
}

// metadataAttacks change a file's metadata outside the allowed places,
// each a shell command run with the root as cwd and $OUT, $VICTIM set.
var metadataAttacks = []struct{ name, command string }{
	{"chmod", `chmod 777 "$VICTIM"`},
	{"chmod the directory", `chmod 700 "$OUT"`},
	{"chmod from the cwd by dot-dot", `chmod 777 ../outside/victim`},
	{"chmod through the symlink", `chmod 777 out/victim`},
	{"chmod through the hard link", `chmod 777 hardlink`},
	{"touch -d", `touch -d 2001-01-01 "$VICTIM"`},
	{"touch -r", `touch -r / "$VICTIM"`},
	{"touch, now", `touch "$VICTIM"`},
	{"chown", `chown 1:1 "$VICTIM"`},
	{"chgrp", `chgrp 1 "$VICTIM"`},
	{"chattr", `chattr +i "$VICTIM"`},
	{"setfattr", `setfattr -n user.x -v 1 "$VICTIM"`},
}

// TestSandboxedJobChangesNoMetadataOutside: Landlock checks no metadata:
// a sandboxed job changed the mode, times, xattrs (and as root the owner
// and flags) of files outside the places it may write. Each attack works
// unconfined (where the tool exists) and changes nothing confined, in
// both modes; inside the root the same changes still work.
func TestSandboxedJobChangesNoMetadataOutside(t *testing.T) {
	onLinux(t)
	for _, mode := range []string{"roots", "read-only"} {
		tr := newSandboxTree(t)
		free := newRegistry(testConfig())
		reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX="+mode, "MCP_EXEC_ROOTS="+tr.root)
		for _, a := range metadataAttacks {
			if mode == "roots" && a.name == "chmod through the hard link" {
				continue // a link the operator put inside a root is inside: see docs/policy-and-sandbox.md
			}
			before := metadataOf(t, tr.victim, tr.outside)
			r := runIn(t, reg, tr.root, tr.attackEnv(a.command))
			if after := metadataOf(t, tr.victim, tr.outside); after != before {
				t.Errorf("%s, %s: the metadata changed:\n%s→\n%s(stderr %q)", mode, a.name, before, after, r.Stderr.Data)
			}
			tr.untouched(t, a.name)
			control := runIn(t, free, tr.root, tr.attackEnv(a.command))
			if metadataOf(t, tr.victim, tr.outside) == before && control.State == stateSuccess {
				t.Errorf("%s: changed nothing even without a sandbox; the attack is broken", a.name)
			}
			runIn(t, free, tr.root, tr.attackEnv(`chattr -i "$VICTIM" 2>/dev/null; chmod 755 "$OUT"; chmod 644 "$VICTIM"`))
		}
	}
	tr := newSandboxTree(t)
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=roots", "MCP_EXEC_ROOTS="+tr.root)
	if !mountNamespaces() {
		return // then metadata is refused inside the root too: TestMetadataRefusedWithoutMountNamespace
	}
	r := runIn(t, reg, tr.root, `touch new && chmod 700 new && touch -d 2001-01-01 new && stat -c %a new`)
	if r.State != stateSuccess || r.Stdout.Data != "700\n" {
		t.Errorf("metadata inside the root: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
}

// TestSandboxedJobHasNoCapabilities: a sandboxed root job kept
// CAP_SYS_ADMIN and CAP_PERFMON and read the server's environment
// through /proc/PPID/environ; now it has no capability in any set, and a
// setuid program gives it none back.
func TestSandboxedJobHasNoCapabilities(t *testing.T) {
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	r := runIn(t, reg, "/", `grep ^Cap /proc/self/status; cat /proc/$PPID/environ >/dev/null && echo READ`)
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout.Data), "\n") {
		if line == "READ" || !strings.HasSuffix(line, "\t0000000000000000") {
			t.Errorf("a sandboxed job: %q", line)
		}
	}
}

// TestSandboxedJobLeavesServerLimitsAlone: prlimit --pid $PPID lowered the
// server's limits (with --cpu=1:1 the kernel then killed it; with
// --nofile=5:5 every later job was refused) and renice changed its
// priority.
func TestSandboxedJobLeavesServerLimitsAlone(t *testing.T) {
	for _, tool := range []string{"prlimit", "renice"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	before := serverLimits(t)
	r := runIn(t, reg, "/", `prlimit --pid $PPID --nofile=5:5 --cpu=1:1; renice -n 7 -p $PPID; nice -n 3 true && echo own`)
	if after := serverLimits(t); after != before {
		t.Errorf("the server's limits changed: %s → %s (stderr %q)", before, after, r.Stderr.Data)
	}
	if r.Stdout.Data != "own\n" {
		t.Errorf("nice of the job's own command: %q %q", r.Stdout.Data, r.Stderr.Data)
	}
}

// serverLimits is this process's RLIMIT_NOFILE and RLIMIT_CPU and nice.
func serverLimits(t *testing.T) string {
	t.Helper()
	limits, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(line, "Max open files") || strings.HasPrefix(line, "Max cpu time") {
			kept = append(kept, strings.Join(strings.Fields(line), " "))
		}
	}
	return fmt.Sprintf("%v priority %d", kept, prio)
}

// TestSandboxRootsOfSlashStayWritable: with MCP_EXEC_ROOTS=/ every write
// failed with Read-only file system: the copy of / put back on / is
// beneath the thread's root, where no path walk looks.
func TestSandboxRootsOfSlashStayWritable(t *testing.T) {
	dir := t.TempDir()
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=roots", "MCP_EXEC_ROOTS=/")
	r := runIn(t, reg, dir, `echo x > new && chmod 600 new && stat -c %a new`)
	if r.State != stateSuccess || r.Stdout.Data != "600\n" {
		t.Errorf("writing under MCP_EXEC_ROOTS=/: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
}
