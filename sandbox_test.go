package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sandboxTree is a fixture: a root the sandbox may write in roots mode, and
// an outside directory holding a victim file and a directory that must
// stay exactly as they were.
type sandboxTree struct {
	root, outside, victim string
}

const victimText = "original\n"

// newSandboxTree makes the fixture, with the traps an attacker would use
// already in place: inside the root a symlink to the outside directory, a
// hard link to the victim (made by the operator, not the job) and a file
// to move out.
func newSandboxTree(t *testing.T) sandboxTree {
	t.Helper()
	base := t.TempDir()
	tr := sandboxTree{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	tr.victim = filepath.Join(tr.outside, "victim")
	for _, dir := range []string{tr.root, tr.outside, filepath.Join(tr.outside, "keep")} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, tr.victim, victimText)
	mustWrite(t, filepath.Join(tr.root, "mine"), "mine\n")
	if err := os.Symlink(tr.outside, filepath.Join(tr.root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tr.victim, filepath.Join(tr.root, "hardlink")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// untouched fails the test unless the outside directory holds exactly what
// the fixture put there.
func (tr sandboxTree) untouched(t *testing.T, attack string) {
	t.Helper()
	if change := tr.change(); change != "" {
		t.Errorf("%s: %s", attack, change)
	}
}

// change says how the outside directory differs from the fixture, or "".
func (tr sandboxTree) change() string {
	if b, err := os.ReadFile(tr.victim); err != nil || string(b) != victimText {
		return fmt.Sprintf("the victim is %q (%v), want it unchanged", b, err)
	}
	entries, _ := os.ReadDir(tr.outside)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "keep,victim" {
		return fmt.Sprintf("outside holds %v, want only keep and victim", names)
	}
	return ""
}

// sandboxRegistry is a registry whose jobs run under the given settings.
func sandboxRegistry(t *testing.T, settings ...string) *registry {
	t.Helper()
	onLinux(t)
	if _, err := landlockABI(); err != nil {
		t.Skipf("no Landlock here (%v): the server refuses to start, as TestSandboxRefusedWithoutKernelSupport checks", err)
	}
	cfg, err := loadConfig(append(testConfig().baseEnv, settings...))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkConfinement(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.shell = "/bin/sh"
	return newRegistry(cfg)
}

// runIn runs command as a job of reg in dir and returns its result.
func runIn(t *testing.T, reg *registry, dir, command string) *resultJSON {
	t.Helper()
	j := startReq(t, reg, startRequest{command: command, dir: dir, policy: capturePolicy{onSuccess: allOf, onError: allOf}})
	return resultOf(collect(t, reg, j))
}

var allOf = captureSpec{stdout: specAll, stderr: specAll}

// sandboxAttacks are ways out of a sandbox, each a shell command run with
// the root as cwd and $OUT, $VICTIM set; every one must leave the outside
// untouched.
var sandboxAttacks = []struct{ name, command string }{
	{"write the victim", `echo x > "$VICTIM"`},
	{"append to the victim", `echo x >> "$VICTIM"`},
	{"create a file outside", `echo x > "$OUT/new"`},
	{"through a symlink", `echo x > out/victim; echo x > out/new`},
	{"through dot-dot", `echo x > ../outside/victim; echo x > "$OUT/../outside/new"`},
	{"through /proc/self/root", `echo x > "/proc/self/root$VICTIM"`},
	{"through /proc/self/cwd", `cd "$OUT" && echo x > /proc/self/cwd/new`},
	{"truncate", `: > "$VICTIM"; truncate -s 0 "$VICTIM"`},
	{"remove", `rm -f "$VICTIM"; rmdir "$OUT/keep"`},
	{"make things", `mkdir "$OUT/d"; mkfifo "$OUT/f"; ln -s x "$OUT/s"; ln "$VICTIM" "$OUT/l"`},
	{"rename out of the tree", `mv mine "$OUT/moved"`},
	{"rename the victim in", `mv "$VICTIM" stolen`},
	{"hard link the victim in, then write", `ln "$VICTIM" newlink && echo x > newlink`},
	{"a child that forks and execs", `sh -c 'sh -c "echo x > \"$VICTIM\""'`},
	{"exec a new shell", `exec /bin/sh -c 'echo x > "$VICTIM"'`},
	{"a clean environment", `env -i /bin/sh -c "echo x > $VICTIM"`},
	{"a new session", `setsid /bin/sh -c 'echo x > "$VICTIM"'`},
	{"a background process after the shell", `(sleep 0.2; echo x > "$OUT/late") & wait`},
	{"a user namespace", `unshare -Ur /bin/sh -c 'echo x > "$VICTIM"'`},
	{"a mount namespace", `unshare -m /bin/sh -c 'mount -t tmpfs t "$OUT" && echo x > "$OUT/new"'`},
	{"dd", `dd if=/dev/zero of="$VICTIM" bs=1 count=1 conv=notrunc`},
}

// attackEnv sets $OUT and $VICTIM for the attacks.
func (tr sandboxTree) attackEnv(command string) string {
	return fmt.Sprintf("OUT=%q VICTIM=%q; export OUT VICTIM; %s", tr.outside, tr.victim, command)
}

// TestSandboxAttacksWorkUnconfined is the control: without the sandbox
// each attack does change the outside, so the tests below prove something.
func TestSandboxAttacksWorkUnconfined(t *testing.T) {
	onLinux(t)
	reg := newRegistry(testConfig())
	for _, a := range sandboxAttacks {
		tr := newSandboxTree(t)
		runIn(t, reg, tr.root, tr.attackEnv(a.command))
		if tr.change() == "" && !strings.Contains(a.name, "namespace") { // namespaces may be unavailable here
			t.Errorf("%s: changed nothing even without a sandbox; the attack is broken", a.name)
		}
	}
}

// TestSandboxRootsNoEscape: under the roots sandbox every attack fails and
// leaves the outside untouched, while writing inside the root works.
func TestSandboxRootsNoEscape(t *testing.T) {
	tr := newSandboxTree(t)
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=roots", "MCP_EXEC_ROOTS="+tr.root)
	for _, a := range sandboxAttacks {
		r := runIn(t, reg, tr.root, tr.attackEnv(a.command))
		tr.untouched(t, a.name)
		if t.Failed() {
			t.Logf("%s: %s", a.name, r.Stderr.Data)
			return
		}
	}
	r := runIn(t, reg, tr.root, `echo ok > inside && mkdir sub && mv inside sub/ && cat sub/inside`)
	if r.State != stateSuccess || r.Stdout.Data != "ok\n" {
		t.Errorf("writing inside the root: %s %q", r.State, r.Stderr.Data)
	}
}

// TestSandboxReadOnlyNoEscape: under read-only nothing in the tree may be
// written either, not even through a hard link already in place, while
// TMPDIR and /dev/null work and the tree stays readable.
func TestSandboxReadOnlyNoEscape(t *testing.T) {
	tr := newSandboxTree(t)
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	for _, a := range append(sandboxAttacks, struct{ name, command string }{"through the hard link", `echo x > hardlink`}) {
		runIn(t, reg, tr.root, tr.attackEnv(a.command))
		tr.untouched(t, a.name)
	}
	r := runIn(t, reg, tr.root, `echo x > mine || echo refused`)
	if got, _ := os.ReadFile(filepath.Join(tr.root, "mine")); string(got) != "mine\n" || !writeRefused(r.Stderr.Data) {
		t.Errorf("read-only wrote the root: %q, stderr %q", got, r.Stderr.Data)
	}
	r = runIn(t, reg, tr.root, `cat mine && echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && f=$(mktemp) && echo m > "$f" && echo gone > /dev/null && echo "$TMPDIR"`)
	lines := strings.Split(strings.TrimSpace(r.Stdout.Data), "\n")
	if r.State != stateSuccess || len(lines) != 3 || lines[0] != "mine" || lines[1] != "t" {
		t.Fatalf("reading, TMPDIR and /dev/null: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
	eventually(t, jobDeadline, "the job's TMPDIR removed after it ended", func() bool {
		_, err := os.Stat(lines[2])
		return os.IsNotExist(err)
	})
}

// TestSandboxTmpdirIsPrivate: each job gets a TMPDIR of its own, which no
// other sandboxed job can write.
func TestSandboxTmpdirIsPrivate(t *testing.T) {
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	first := startJob(t, reg, `echo "$TMPDIR"; read wait_for_stdin`)
	var tmp string
	eventually(t, jobDeadline, "the first job's TMPDIR printed", func() bool {
		tmp = string(first.stdout.readAll(0).data)
		return strings.HasSuffix(tmp, "\n")
	})
	tmp = strings.TrimSpace(tmp)
	r := runIn(t, reg, "/", fmt.Sprintf(`test "$TMPDIR" != %q && echo x > %q/intruder`, tmp, tmp))
	if r.State != stateError || !writeRefused(r.Stderr.Data) {
		t.Errorf("a second job wrote the first one's TMPDIR %s: %s %q", tmp, r.State, r.Stderr.Data)
	}
}

// TestNetworkOff: with the network off neither TCP nor UDP reaches a
// listener on loopback, while the same commands do with it on.
func TestNetworkOff(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash for /dev/tcp and /dev/udp")
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	command := fmt.Sprintf(`%s -c 'echo tcp > /dev/tcp/%s; echo udp > /dev/udp/%s'`,
		bash, strings.Replace(tcp.Addr().String(), ":", "/", 1), strings.Replace(udp.LocalAddr().String(), ":", "/", 1))
	off := runIn(t, sandboxRegistry(t, "MCP_EXEC_NETWORK=off"), "/", command)
	if off.State != stateError || !strings.Contains(off.Stderr.Data, "/dev/tcp/127.0.0.1") || !strings.Contains(off.Stderr.Data, "/dev/udp/127.0.0.1") ||
		strings.Count(off.Stderr.Data, "Permission denied") != 4 { // socket(2), then the redirection, each
		t.Errorf("network off: %s %q; want both sockets refused", off.State, off.Stderr.Data)
	}
	if got := received(udp); got != "" {
		t.Errorf("network off: UDP got %q through", got)
	}
	on := runIn(t, newRegistry(testConfig()), "/", command)
	if on.State != stateSuccess || received(udp) != "udp\n" {
		t.Errorf("network on (the control): %s %q", on.State, on.Stderr.Data)
	}
}

// received returns what conn got within a moment, or "".
func received(conn net.PacketConn) string {
	buf := make([]byte, 64)
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	n, _, _ := conn.ReadFrom(buf)
	return string(buf[:n])
}

// TestConfinementStaysOffTheServer: after confined jobs started, no thread
// of this process has no_new_privs, a seccomp filter or a Landlock domain
// (it could still write a file anywhere and open IP sockets).
func TestConfinementStaysOffTheServer(t *testing.T) {
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only", "MCP_EXEC_NETWORK=off")
	for i := 0; i < 5; i++ {
		runIn(t, reg, "/", "true")
	}
	// The threads the jobs were forked from end with their goroutines; the
	// kernel may list one for a moment after.
	eventually(t, jobDeadline, "no restricted thread left", func() bool { return len(restrictedThreads(t)) == 0 })
	if err := os.WriteFile(filepath.Join(t.TempDir(), "server"), nil, 0o644); err != nil {
		t.Errorf("the server itself cannot write: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Errorf("the server itself cannot open a socket: %v", err)
	} else {
		l.Close()
	}
}

// restrictedThreads lists this process's threads that have no_new_privs
// or a seccomp filter.
func restrictedThreads(t *testing.T) []string {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads listed: %v", err)
	}
	var found []string
	for _, status := range tasks {
		b, err := os.ReadFile(status)
		if err != nil {
			continue // the thread ended since the listing
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "NoNewPrivs:\t1" || strings.HasPrefix(line, "Seccomp:\t") && line != "Seccomp:\t0" {
				found = append(found, status+": "+line)
			}
		}
	}
	return found
}

// TestRlimitsReachTheJob: the limits are set, soft and hard, before the
// job's command runs, and the job cannot raise them.
func TestRlimitsReachTheJob(t *testing.T) {
	reg := sandboxRegistry(t, "MCP_EXEC_RLIMITS=nofile=64,fsize=1M,cpu=30")
	big := filepath.Join(t.TempDir(), "big")
	r := runIn(t, reg, "/", fmt.Sprintf(`ulimit -n; ulimit -Hn; ulimit -t; ulimit -n 128 2>/dev/null && echo raised; grep "Max file size" /proc/self/limits; head -c 2000000 /dev/zero > %q`, big))
	if strings.Join(strings.Fields(r.Stdout.Data), " ") != "64 64 30 Max file size 1048576 1048576 bytes" {
		t.Errorf("limits in the job: %q %q", r.Stdout.Data, r.Stderr.Data)
	}
	if fi, err := os.Stat(big); err != nil || fi.Size() != 1<<20 || r.State != stateError {
		t.Errorf("a 2 MB write under fsize=1M: %v %v, job %s", fi.Size(), err, r.State)
	}
}

// TestLauncherRunsArgv: a program given as argv runs through the launcher
// with its own argv[0] and arguments.
func TestLauncherRunsArgv(t *testing.T) {
	reg := sandboxRegistry(t, "MCP_EXEC_RLIMITS=nofile=64")
	j := startReq(t, reg, startRequest{argv: []string{"sh", "-c", `echo "$0 $1"; ulimit -n`, "zero", "one"}, dir: "/",
		policy: capturePolicy{onSuccess: allOf, onError: allOf}})
	r := resultOf(collect(t, reg, j))
	if r.State != stateSuccess || r.Stdout.Data != "zero one\n64\n" {
		t.Errorf("argv through the launcher: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
}

// TestUsageReported: terminal results carry usage when it is on; wall time
// covers the job, CPU time shows a busy one.
func TestUsageReported(t *testing.T) {
	onLinux(t)
	cfg := testConfig()
	cfg.usage = true
	reg := newRegistry(cfg)
	r := runIn(t, reg, "/", `sleep 0.2; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	u := r.Usage
	if u == nil || u.WallMs < 200 || u.UserMs+u.SysMs <= 0 || u.MaxRSSKiB <= 0 {
		t.Errorf("usage %+v", u)
	}
	if s := statusOf(startJob(t, reg, "read x")); s.Usage != nil {
		t.Errorf("a running job has usage %+v", s.Usage)
	}
	if r := runIn(t, newRegistry(testConfig()), "/", "true"); r.Usage != nil {
		t.Errorf("usage with MCP_EXEC_USAGE off: %+v", r.Usage)
	}
}

// writeRefused reports whether stderr says a write was refused: by
// Landlock (Permission denied) or, where the job has a mount namespace of
// its own, by a read-only mount, which the kernel checks first.
func writeRefused(stderr string) bool {
	return strings.Contains(stderr, "Permission denied") || strings.Contains(stderr, "Read-only file system")
}
