package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jobFDs runs `ls /proc/self/fd` as a job and returns the listed fds.
func jobFDs(t *testing.T, reg *registry) []string {
	t.Helper()
	r := resultOf(collect(t, reg, startJob(t, reg, "ls /proc/self/fd")))
	if r.Stdout == nil || r.State != stateSuccess {
		t.Fatalf("ls /proc/self/fd: %+v", r)
	}
	return strings.Fields(r.Stdout.Data)
}

// TestFDHygiene: a job's only descriptors are 0, 1 and 2 (ls sees one more:
// its own handle on /proc/self/fd); a descriptor leaked into the server
// without close-on-exec reaches jobs until closeInheritedOnExec runs; and 100
// start/collect cycles leave the server's descriptor count where it was.
// Not parallel: it
// counts this process's descriptors and plants one without close-on-exec.
func TestFDHygiene(t *testing.T) {
	onLinux(t)
	reg := newRegistry(testConfig())

	checkOnlyStd := func(fds []string, what string) {
		t.Helper()
		if len(fds) > 4 || !slices.Contains(fds, "0") || !slices.Contains(fds, "1") || !slices.Contains(fds, "2") {
			t.Errorf("%s: a job sees fds %v, want 0 1 2 and ls's own", what, fds)
		}
	}
	checkOnlyStd(jobFDs(t, reg), "after start-up")

	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	leaked, err := syscall.Dup(int(null.Fd())) // dup(2): no close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	if fds := jobFDs(t, reg); !slices.Contains(fds, strconv.Itoa(leaked)) {
		t.Errorf("control: fd %d without close-on-exec should reach a job, it sees %v", leaked, fds)
	}
	closeInheritedOnExec()
	fds := jobFDs(t, reg)
	if slices.Contains(fds, strconv.Itoa(leaked)) {
		t.Errorf("fd %d reached a job after closeInheritedOnExec: %v", leaked, fds)
	}
	checkOnlyStd(fds, "after closeInheritedOnExec")

	countFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := countFDs()
	for i := 0; i < 100; i++ {
		j := startJob(t, reg, "echo out; echo err >&2")
		collect(t, reg, j)
	}
	eventually(t, 10*time.Second, fmt.Sprintf("fd count back to %d after 100 jobs", before), func() bool {
		return countFDs() <= before
	})
}

// TestTerminalJob: a tty job runs on a terminal of the asked size, a
// prompt is answered through input, close sends end of input, and kill
// ends the terminal's session.
func TestTerminalJob(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startReq(t, reg, startRequest{command: `test -t 0 && stty size; read -p 'name? ' n; echo "hi $n"; cat`,
		tty: &ttySpec{rows: 30, cols: 100}, policy: capturePolicy{onSuccess: allOf, onError: allOf}})
	eventually(t, jobDeadline, "the prompt", func() bool { return strings.Contains(string(j.stdout.readAll(0).data), "name? ") })
	if err := j.input(plainWaiter(), "bob\n", false); err != nil {
		t.Fatal(err)
	}
	if err := j.input(plainWaiter(), "last\n", true); err != nil { // then Ctrl-D ends cat
		t.Fatal(err)
	}
	r := resultOf(collect(t, reg, j))
	if r.State != stateSuccess || !strings.Contains(r.Stdout.Data, "30 100\r\n") || !strings.Contains(r.Stdout.Data, "hi bob\r\n") ||
		r.Stderr.TotalBytes != 0 {
		t.Errorf("tty job: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
	if got := string(plainText([]byte("\x1b[31mred\x1b[0m\r\n\x1b]0;title\x07ok"))); got != "red\nok" {
		t.Errorf("plain text %q", got)
	}
}

// TestTerminalDupsNeverLeakIntoAConcurrentFork: a terminal job's descriptors
// are duplicated while other goroutines (another HTTP session's jobs) fork.
// A duplicate made without close-on-exec and marked in a second step is
// inherited by a fork that lands between the two steps.
func TestTerminalDupsNeverLeakIntoAConcurrentFork(t *testing.T) {
	onLinux(t)
	marker, err := os.CreateTemp(t.TempDir(), "dup-leak-marker-*")
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	stop := make(chan struct{}) // closed when the forking side is done
	duped := make(chan int, 1)  // carries how many duplicates were made
	go func() {
		n := 0
		defer func() { duped <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			fds, err := dupAll(int(marker.Fd()), int(marker.Fd()))
			if err != nil {
				t.Errorf("dupAll: %v", err)
				return
			}
			n++
			closeFds(fds)
		}
	}()
	reg := newRegistry(testConfig())
	deadline := time.Now().Add(60 * time.Second)
	for forks := 0; forks < 100 && time.Now().Before(deadline); forks++ {
		r := resultOf(collect(t, reg, startJob(t, reg, "ls -l /proc/self/fd")))
		if r.Stdout == nil || r.State != stateSuccess {
			close(stop)
			t.Fatalf("ls -l /proc/self/fd: %+v", r)
		}
		if strings.Contains(r.Stdout.Data, filepath.Base(marker.Name())) {
			close(stop)
			t.Fatalf("job %d inherited a duplicate meant to be close-on-exec:\n%s", forks, r.Stdout.Data)
		}
	}
	close(stop)
	if n := <-duped; n == 0 {
		t.Fatal("no duplicate was made while forking: the test proved nothing")
	}
}

// closeFds closes each descriptor.
func closeFds(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd) // best effort: a test's cleanup
	}
}

// TestTerminalCloseSendsDataAndEOFTogether: input with close on a terminal
// hands the data and the Ctrl-D to the terminal in one write. Sent apart,
// a reader that switches the terminal to canonical mode between them (a
// REPL's line editor does, to run the line it read) gets the Ctrl-D as an
// end-of-file mark that its next raw read turns into a NUL: the REPL then
// waits at its prompt for an end of input that never comes.
func TestTerminalCloseSendsDataAndEOFTogether(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for round := 0; round < 20; round++ {
		// One read in raw mode: what the terminal held when the reader woke.
		j := startReq(t, reg, startRequest{command: `stty raw -echo; echo ready; dd bs=64 count=1 2>/dev/null | od -An -c`,
			tty: &ttySpec{rows: 24, cols: 80}, policy: capturePolicy{onSuccess: allOf, onError: allOf}})
		eventually(t, jobDeadline, "dd asleep in its read", func() bool {
			for _, p := range processTree(j.pid) {
				if p.comm == "dd" && p.state == "S" {
					wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", p.pid))
					return strings.Contains(string(wchan), "tty") || strings.Contains(string(wchan), "wait_woken")
				}
			}
			return false
		})
		if err := j.input(plainWaiter(), "x\n", true); err != nil {
			t.Fatal(err)
		}
		r := resultOf(collect(t, reg, j))
		if !strings.Contains(r.Stdout.Data, `004`) {
			t.Fatalf("round %d: the reader's one read held no Ctrl-D: %q", round, r.Stdout.Data)
		}
	}
}

// TestEnvDefaults: with MCP_EXEC_JOB_ENV_DEFAULTS a job gets each default
// that nothing sets; the server's environment and the call's env win, an
// empty value in env removes the variable (a default's, or the server's),
// FORCE_COLOR keeps NO_COLOR out, and a terminal job keeps its TERM.
func TestEnvDefaults(t *testing.T) {
	t.Parallel()
	all := map[string]string{"NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb"}
	with := func(changes map[string]string) map[string]string {
		m := maps.Clone(all)
		for k, v := range changes {
			if v == "-" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		base    []string
		env     map[string]string
		onPipes bool
		want    map[string]string // of the four names and FORCE_COLOR; "-" in with: absent
	}{
		{"pipes get all", []string{"HOME=/root"}, nil, true, all},
		{"a terminal keeps its TERM", nil, nil, false, with(map[string]string{"TERM": "-"})},
		{"the server's environment wins", []string{"TERM=xterm", "PAGER=less"}, nil, true, with(map[string]string{"TERM": "xterm", "PAGER": "less"})},
		{"the call's env wins", nil, map[string]string{"GIT_PAGER": "more"}, true, with(map[string]string{"GIT_PAGER": "more"})},
		{"an empty value removes a default", nil, map[string]string{"NO_COLOR": ""}, true, with(map[string]string{"NO_COLOR": "-"})},
		{"an empty value removes the server's", []string{"PAGER=less"}, map[string]string{"PAGER": ""}, true, with(map[string]string{"PAGER": "-"})},
		{"FORCE_COLOR in the server's environment", []string{"FORCE_COLOR=1"}, nil, true, with(map[string]string{"NO_COLOR": "-", "FORCE_COLOR": "1"})},
		{"FORCE_COLOR in env", nil, map[string]string{"FORCE_COLOR": "3"}, true, with(map[string]string{"NO_COLOR": "-", "FORCE_COLOR": "3"})},
		{"FORCE_COLOR removed by env", []string{"FORCE_COLOR=1"}, map[string]string{"FORCE_COLOR": ""}, true, all},
	} {
		before := maps.Clone(tc.env)
		overlay, unset := withEnvDefaults(tc.base, tc.env, nil, tc.onPipes)
		got := map[string]string{}
		for _, kv := range withoutNames(mergeEnv(tc.base, overlay), unset) {
			if k, v, _ := strings.Cut(kv, "="); k == "FORCE_COLOR" || all[k] != "" {
				got[k] = v
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: the job gets %v, want %v", tc.name, got, tc.want)
		}
		if !maps.Equal(tc.env, before) {
			t.Errorf("%s: the call's env changed to %v", tc.name, tc.env)
		}
	}
}

// TestEnvDefaultsReachJobs: the setting is off unless asked for (a 1.0
// job's environment is the server's), on under the agent profile, and
// off there when MCP_EXEC_JOB_ENV_DEFAULTS=off; a job started with it on
// sees the defaults.
func TestEnvDefaultsReachJobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		settings []string
		on       bool
	}{
		{nil, false},
		{[]string{"MCP_EXEC_PROFILE=agent"}, true},
		{[]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_JOB_ENV_DEFAULTS=off"}, false},
		{[]string{"MCP_EXEC_JOB_ENV_DEFAULTS=on"}, true},
	} {
		if cfg := configOf(t, tc.settings...); cfg.jobEnvDefaults != tc.on {
			t.Errorf("%v: jobEnvDefaults %v, want %v", tc.settings, cfg.jobEnvDefaults, tc.on)
		}
	}
	cfg := testConfig()
	cfg.jobEnvDefaults = true
	cfg.baseEnv = []string{"PATH=" + os.Getenv("PATH")}
	reg := newRegistry(cfg)
	j := startReq(t, reg, startRequest{command: `echo "$NO_COLOR $PAGER $GIT_PAGER $TERM ${X-unset}"`, env: map[string]string{"X": ""}, policy: defaultCapture})
	if r := resultOf(collect(t, reg, j)); r.Stdout == nil || r.Stdout.Data != "1 cat cat dumb unset\n" {
		t.Errorf("the job saw %+v, want the defaults and X removed", r.Stdout)
	}
}
