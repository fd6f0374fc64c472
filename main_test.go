package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the expected replies in testdata/transcripts with the server's actual replies")

// jobDeadline bounds every wait for a job in these tests. It is far above
// what any job here needs; it exists so that a bug fails a test instead of
// hanging the run.
const jobDeadline = 20 * time.Second

// TestMain prepares the test process the way main prepares the server
// (prepareProcess): descriptors inherited from our parent are marked
// close-on-exec, orphans re-parent to this process (child subreaper on Linux)
// and the one reaper starts. Being the subreaper is what makes the orphan and
// zombie checks below meaningful: the orphans of jobs become our children, so
// the server's reaper, not some init that may not reap promptly, must collect
// them.
func TestMain(m *testing.M) {
	if isLauncher(os.Args) {
		runLauncher(os.Args) // this test binary is /proc/self/exe: the jobs' launcher
	}
	if mode, ok := childModes[os.Getenv(childModeEnv)]; ok {
		os.Exit(mode()) // a test re-executed this binary to play a part
	}
	flag.Parse()
	prepareProcess(false)
	code := m.Run()
	removeJobTemps()
	os.Exit(code)
}

// childModeEnv names, in a re-executed test binary, the part it plays from
// childModes instead of running tests; the function returns the exit status.
const childModeEnv = "TEST_CHILD_MODE"

// childModes are the parts a re-executed test binary can play, registered
// by the test files that need them.
var childModes = map[string]func() int{}

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

// eventually polls cond every few milliseconds until it holds, and fails the
// test if it still does not hold after timeout. It is for conditions that
// have no event to wait on (the /proc table, descriptor counts).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v", what, timeout)
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// testConfig is a configuration for tests: jobs run in /bin/sh, with the
// environment minus MCP_EXEC_* variables.
func testConfig() *config {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_EXEC_") {
			env = append(env, kv)
		}
	}
	cfg, err := loadConfig(env)
	if err != nil {
		panic(err) // the defaults themselves are broken: every test would fail
	}
	cfg.shell = "/bin/sh"
	return cfg
}

// configOf is testConfig with settings (NAME=value) applied.
func configOf(t testing.TB, settings ...string) *config {
	t.Helper()
	cfg, err := loadConfig(append(testConfig().baseEnv, settings...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.shell = "/bin/sh"
	return cfg
}

// plainWaiter is a waiter that is never cancelled and reports no progress.
func plainWaiter() *waiter { return &waiter{ctx: context.Background()} }

// startJob starts command as a job of reg with the default capture policy and
// kills its process group when the test ends, whether or not it was
// delivered.
func startJob(t *testing.T, reg *registry, command string) *job {
	t.Helper()
	return startReq(t, reg, startRequest{command: command, policy: defaultCapture})
}

// startReq is startJob for a full request.
func startReq(t *testing.T, reg *registry, req startRequest) *job {
	t.Helper()
	req.reportPrompts = req.reportPrompts || reg.cfg.profile == profileAgent // as runJob asks
	j, started, err := reg.start(req)
	if err != nil {
		t.Fatalf("start %q: %v", req.command, err)
	}
	if !started {
		t.Fatalf("start %q: %s", req.command, j.final.startError)
	}
	t.Cleanup(func() { killGroup(j.pid) })
	return j
}

// killGroup sends KILL to process group pgid if it still has members.
func killGroup(pgid int) {
	if pgid > 0 && groupAlive(pgid) {
		_ = signalGroup(pgid, syscall.SIGKILL) // best effort: it may have just gone
	}
}

// awaitDone waits until j has finished (it is not claimed).
func awaitDone(t *testing.T, j *job) {
	t.Helper()
	timer := time.NewTimer(jobDeadline)
	defer timer.Stop()
	select {
	case <-j.done:
	case <-timer.C:
		t.Fatalf("job %s (pid %d) did not finish within %v", j.id, j.pid, jobDeadline)
	}
}

// waitIDs is a wait call on ids: it looks them up as the call is read, then
// waits for them.
func waitIDs(reg *registry, w *waiter, ids []string, deadline time.Time, poll bool) (map[string]*job, error) {
	jobs, err := reg.lookupAll(ids, false)
	if err != nil {
		return nil, err
	}
	got, _, err := reg.await(w, jobs, awaitOptions{deadline: deadline, poll: poll})
	return got, err
}

// collect waits for j like a blocking wait and returns the delivered job.
func collect(t *testing.T, reg *registry, j *job) *job {
	t.Helper()
	claimed, err := waitIDs(reg, plainWaiter(), []string{j.id}, time.Now().Add(jobDeadline), false)
	if err != nil {
		t.Fatalf("wait for job %s: %v", j.id, err)
	}
	got := claimed[j.id]
	if got == nil {
		t.Fatalf("job %s (pid %d) was not delivered within %v", j.id, j.pid, jobDeadline)
	}
	return got
}

// onLinux skips a test that reads /proc.
func onLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc: Linux only")
	}
}

// procEntry is one line of /proc/PID/stat that these tests need.
type procEntry struct {
	pid, ppid, pgid int
	state, comm     string
}

// scanProcs reads every /proc/PID/stat; processes that vanish meanwhile are
// skipped. It is the test's own reader, independent of the server's.
func scanProcs() []procEntry {
	names, _ := filepath.Glob("/proc/[0-9]*/stat")
	var procs []procEntry
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		procs = append(procs, procEntry{pid: pid, ppid: ppid, pgid: pgid, state: f[0], comm: s[open+1 : end]})
	}
	return procs
}

// inGroup lists the processes of group pgid.
func inGroup(pgid int) []procEntry {
	var out []procEntry
	for _, p := range scanProcs() {
		if p.pgid == pgid {
			out = append(out, p)
		}
	}
	return out
}

// countComm counts the processes named comm in procs.
func countComm(procs []procEntry, comm string) int {
	n := 0
	for _, p := range procs {
		if p.comm == comm {
			n++
		}
	}
	return n
}

// zombieChildren lists this process's children that are zombies.
func zombieChildren() []procEntry {
	var out []procEntry
	me := os.Getpid()
	for _, p := range scanProcs() {
		if p.ppid == me && p.state == "Z" {
			out = append(out, p)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// tools.go: stream, capture and signal specs, integers, argument binding
// ---------------------------------------------------------------------------

// invalidCase is an input that must be refused with a message containing
// every one of the words in mention.
type invalidCase struct {
	in      string
	mention []string
}

// checkMentions fails when err is nil or its message lacks a mention.
func checkMentions(t *testing.T, what string, err error, mention []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want an error mentioning %q", what, mention)
		return
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: error %q does not mention %q", what, err, m)
		}
	}
}

// runChild re-executes this test binary with env and returns its exit
// status and what it wrote to stdout and stderr. It spawns through the
// process's reaper: os/exec's own wait would race it for the status.
func runChild(t *testing.T, env []string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	exited := make(chan exitStatus, 1) // carries the child's status from the reaper
	_, err = spawnNotify(spawnSpec{path: os.Args[0], argv: []string{os.Args[0]}, env: env,
		files: []uintptr{w.Fd(), w.Fd(), w.Fd()}}, func(st exitStatus) { exited <- st })
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	st := receive(t, "the child's exit", exited)
	return st.code, string(out)
}
