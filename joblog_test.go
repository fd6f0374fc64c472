package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logBuffer is a job log's output the test reads: guarded, as the log's
// goroutine writes it.
type logBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (lb *logBuffer) Write(p []byte) (int, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.writes++
	return lb.b.Write(p)
}

// count is how many writes the log has made.
func (lb *logBuffer) count() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.writes
}

func (lb *logBuffer) String() string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.String()
}

// loggedRegistry is a registry of cfg whose jobs go to a job log in memory.
func loggedRegistry(cfg *config) (*registry, *jobLog, *logBuffer) {
	out := &logBuffer{}
	l := newJobLog(out)
	reg := newRegistry(cfg)
	reg.log, reg.session = l, "test-1"
	return reg, l, out
}

// logLines flushes l and returns its lines decoded; a line that is not one
// JSON object fails the test.
func logLines(t *testing.T, l *jobLog, out *logBuffer) []map[string]any {
	t.Helper()
	l.flush(jobDeadline)
	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("the log does not end with a newline: %q", text)
	}
	var lines []map[string]any
	for _, raw := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if raw == "" {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(raw), &line); err != nil {
			t.Fatalf("log line %q is not a JSON object: %v", raw, err)
		}
		lines = append(lines, line)
	}
	return lines
}

// lineOf is the line of event for job id ("": a line of no job).
func lineOf(t *testing.T, lines []map[string]any, event, id string) map[string]any {
	t.Helper()
	for _, l := range lines {
		if got, _ := l["job_id"].(string); l["event"] == event && got == id {
			return l
		}
	}
	t.Fatalf("no %s line for job %s in %v", event, id, lines)
	return nil
}

// TestJobLogTellsASessionsJobs runs a success, a failure, a kill, a refusal
// and a job that prints a forged log line: each start and end is one line,
// the kill's signal is named, the refusal names its setting, and nothing a
// job wrote appears in the log.
func TestJobLogTellsASessionsJobs(t *testing.T) {
	reg, l, out := loggedRegistry(configOf(t, "MCP_EXEC_ENV_DENY=SECRET_NAME"))
	// What a job writes is made as it runs ($((...))): the log must not
	// carry it, though it carries the command that wrote it.
	ok := collect(t, reg, startJob(t, reg, "echo output-$((6*7))-ok"))
	failed := collect(t, reg, startJob(t, reg, "echo output-$((6*7))-fail >&2; exit 3"))
	sleeper := startJob(t, reg, "sleep 300")
	if _, err := reg.kill(plainWaiter(), sleeper, killPlan{signals: []syscall.Signal{syscall.SIGKILL}, wait: jobDeadline}); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, sleeper) // the kill delivered it
	if _, _, err := reg.start(startRequest{command: "true", env: map[string]string{"SECRET_NAME": "x"}, policy: defaultCapture}); err == nil {
		t.Fatal("MCP_EXEC_ENV_DENY did not refuse the job")
	}
	forged := `{"time":"2026-01-01T00:00:00.000Z","event":"end","session":"test-1","job_id":"99","exit_code":0}`
	forger := collect(t, reg, startJob(t, reg, `printf '`+strings.Replace(forged, "99", "%s", 1)+`\n' 99`))

	lines := logLines(t, l, out)
	if len(lines) != 9 {
		t.Fatalf("want 9 lines (4 starts, 4 ends, 1 refusal), got %d: %v", len(lines), lines)
	}
	for _, line := range lines {
		if line["session"] != "test-1" {
			t.Errorf("line without its session: %v", line)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", line["time"].(string)); err != nil {
			t.Errorf("time %v is not RFC 3339 UTC with milliseconds: %v", line["time"], err)
		}
		if line["job_id"] == "99" {
			t.Errorf("the forged line became a line of the log: %v", line)
		}
	}
	if start := lineOf(t, lines, "start", ok.id); start["command"] != "echo output-$((6*7))-ok" || start["cwd"] == "" {
		t.Errorf("start line: %v", start)
	}
	if end := lineOf(t, lines, "end", ok.id); end["exit_code"] != 0.0 || end["stdout_bytes"] != 13.0 || end["stderr_bytes"] != 0.0 {
		t.Errorf("success's end line: %v", end)
	}
	if end := lineOf(t, lines, "end", failed.id); end["exit_code"] != 3.0 || end["stderr_bytes"] != 15.0 {
		t.Errorf("failure's end line: %v", end)
	}
	if end := lineOf(t, lines, "end", sleeper.id); end["signal"] != "SIGKILL" || end["exit_code"] != -1.0 {
		t.Errorf("kill's end line: %v", end)
	}
	if end := lineOf(t, lines, "end", forger.id); end["stdout_bytes"] != float64(len(forged)+1) {
		t.Errorf("the forger did not print the forged line: %v", end)
	}
	refused := lineOf(t, lines, "refused", "")
	if refused["setting"] != "MCP_EXEC_ENV_DENY" || refused["command"] != "true" || !strings.Contains(refused["reason"].(string), "SECRET_NAME") {
		t.Errorf("refusal line: %v", refused)
	}
	if text := out.String(); strings.Contains(text, "output-42") || strings.Contains(text, forged) {
		t.Errorf("the log carries a job's output:\n%s", text)
	}
}

// TestJobLogStartComesBeforeAnEndPublishedFirst publishes a job's end
// before its start is logged, as the reaper can: the start line still
// comes first, and the end follows it.
func TestJobLogStartComesBeforeAnEndPublishedFirst(t *testing.T) {
	reg, l, out := loggedRegistry(testConfig())
	j := &job{id: "7", started: time.Now(), done: make(chan struct{}),
		stdout: newWindow(64, 0), stderr: newWindow(64, 0)}
	j.final = outcome{state: stateSuccess, wall: time.Millisecond}
	close(j.done)
	reg.announceEnd(j)
	if l.pending.Load() != 0 {
		t.Fatal("the end was queued before the start")
	}
	reg.announceStart(j, startRequest{command: "true"}, true)
	lines := logLines(t, l, out)
	if len(lines) != 2 || lines[0]["event"] != "start" || lines[1]["event"] != "end" {
		t.Fatalf("want start then end, got %v", lines)
	}
}

// TestJobLogKeepsACommandsNewlinesInItsString logs a command made of
// forged log lines: it stays one line, and reads back as it was sent.
func TestJobLogKeepsACommandsNewlinesInItsString(t *testing.T) {
	reg, l, out := loggedRegistry(testConfig())
	command := "true\n{\"event\":\"start\",\"job_id\":\"x\"}\r\n\u2028{\"event\":\"end\"}"
	collect(t, reg, startJob(t, reg, command))
	lines := logLines(t, l, out)
	if len(lines) != 2 || lines[0]["command"] != command {
		t.Fatalf("want 2 lines, the command whole in the first; got %v", lines)
	}
}

// TestJobLogCutsArgvLikeACommand logs an argv of more than
// commandEventRunes characters: its words, cut to that many in all.
func TestJobLogCutsArgvLikeACommand(t *testing.T) {
	long := strings.Repeat("é", 100)
	_, argv := loggedCommand(startRequest{argv: []string{"echo", long, long, "last"}}, nil)
	if got := strings.Join(argv, ""); len([]rune(got)) != commandEventRunes || len(argv) != 3 || argv[1] != long {
		t.Fatalf("argv cut to %d characters in %d words: %q", len([]rune(got)), len(argv), argv)
	}
	command, _ := loggedCommand(startRequest{command: strings.Repeat("x", 500)}, nil)
	if len(command) != commandEventRunes {
		t.Fatalf("command cut to %d characters", len(command))
	}
}

// TestJobLogWritesEachLineOnce runs jobs side by side: every line is one
// write, and each job has its start before its end.
func TestJobLogWritesEachLineOnce(t *testing.T) {
	reg, l, out := loggedRegistry(testConfig())
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			collect(t, reg, startJob(t, reg, "echo x"))
		}()
	}
	wg.Wait()
	lines := logLines(t, l, out)
	if writes := out.count(); len(lines) != 32 || writes != 32 {
		t.Fatalf("want 32 lines in 32 writes, got %d lines in %d writes", len(lines), writes)
	}
	started := map[string]bool{}
	for _, line := range lines {
		id := line["job_id"].(string)
		if line["event"] == "end" && !started[id] {
			t.Errorf("job %s ended in the log before it started", id)
		}
		started[id] = true
	}
}

// blockedWriter is a log's output that takes no write until released.
type blockedWriter struct {
	release chan struct{}
	logBuffer
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.logBuffer.Write(p)
}

// TestJobLogDropsRatherThanBlocks fills the queue of a log whose output
// does not take writes: queueing never blocks, and once the output moves
// again a line counts what was dropped.
func TestJobLogDropsRatherThanBlocks(t *testing.T) {
	w := &blockedWriter{release: make(chan struct{})}
	l := newJobLog(w)
	for i := range jobLogQueueLines + 10 {
		l.add(jobLogDropped{Event: "filler", Lines: int64(i)})
	}
	close(w.release)
	l.flush(jobDeadline)
	if !strings.Contains(w.String(), `"event":"dropped","lines":`) {
		t.Fatal("no line counts the lines dropped")
	}
}

// TestJobLogFileIsAppendedPrivateAndKeptFromJobs opens the log on a file
// that has lines already: they stay, new lines follow them, the file a log
// creates is its owner's only, and no job inherits the descriptor.
func TestJobLogFileIsAppendedPrivateAndKeptFromJobs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.log")
	l, err := openJobLog(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the log file is %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	flags, err := unix.FcntlInt(l.out.(*os.File).Fd(), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("the log's descriptor is not closed on exec (flags %#x, %v)", flags, err)
	}
	existing := filepath.Join(dir, "existing.log")
	if err := os.WriteFile(existing, []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err = openJobLog(existing)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(testConfig())
	reg.log, reg.session = l, "test-1"
	collect(t, reg, startJob(t, reg, "true"))
	l.flush(jobDeadline)
	b, _ := os.ReadFile(existing)
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) != 3 || lines[0] != "kept" {
		t.Fatalf("want the old line and two new ones, got %q", b)
	}
}

// TestJobLogThatCannotBeOpenedNamesTheSetting opens a path in no
// directory: the error names MCP_EXEC_JOB_LOG and the path.
func TestJobLogThatCannotBeOpenedNamesTheSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "jobs.log")
	_, err := openJobLog(path)
	if err == nil || !strings.Contains(err.Error(), "MCP_EXEC_JOB_LOG="+path) {
		t.Fatalf("want an error naming MCP_EXEC_JOB_LOG=%s, got %v", path, err)
	}
}

// TestJobLogOffCostsNothing runs a job with no log (a nil log is never
// touched) and flushes a nil log.
func TestJobLogOffCostsNothing(t *testing.T) {
	reg := newRegistry(testConfig())
	j := collect(t, reg, startJob(t, reg, "true"))
	if j.final.state != stateSuccess {
		t.Fatalf("a job without a log ended %v", j.final.state)
	}
	var off *jobLog
	off.flush(time.Second) // a nil log is off: no panic
}

// TestJobLogFlushWaitsForAnEndBeingQueued is a regression test: an end
// line stopped counting its job as open before it counted as pending, so
// a flush looking in between returned with the end line unwritten (a run
// of sixteen jobs lost one line at shutdown). A watcher that sees neither
// an open job nor a pending line must find the end line written.
func TestJobLogFlushWaitsForAnEndBeingQueued(t *testing.T) {
	reg, l, out := loggedRegistry(testConfig())
	j := collect(t, reg, startJob(t, reg, "true"))
	l.flush(jobDeadline)
	for round := range 3000 {
		l.started(reg.session, j.id, startRequest{command: "true"}, j.pid, j.started, nil)
		deadline := time.Now().Add(jobDeadline)
		for l.pending.Load() > 0 { // the start is written; the job stays open
			if !waitFor(l.wrote, time.Until(deadline)) {
				t.Fatalf("round %d: the start line is not written", round)
			}
		}
		seen := make(chan int)
		go func() {
			for spins := 0; l.open.Load() > 0 || l.pending.Load() > 0; spins++ {
				if spins%1024 == 1023 && time.Now().After(deadline) {
					seen <- -1 // the end was never written
					return
				}
			}
			seen <- out.count()
		}()
		want := out.count() + 1
		l.ended(reg.session, j)
		switch got := <-seen; {
		case got < 0:
			t.Fatalf("round %d: the end line was still open or pending after %v", round, jobDeadline)
		case got != want:
			t.Fatalf("round %d: nothing open or pending with %d lines written, want %d", round, got, want)
		}
	}
}

// TestJobLogMasksTheCommand: with masking on, a secret in a command (a
// token format, or a secret variable's value the call's env gives) is a
// marker in the job log's start line and in the job's events.
func TestJobLogMasksTheCommand(t *testing.T) {
	reg, l, out := loggedRegistry(configOf(t, "MCP_EXEC_MASK=values,patterns"))
	token := "ghp_" + strings.Repeat("a1B2", 9)
	j := collect(t, reg, startReq(t, reg, startRequest{command: "echo " + token + " " + testSecret,
		env: map[string]string{"DEPLOY_TOKEN": testSecret}, policy: defaultCapture}))
	start := lineOf(t, logLines(t, l, out), "start", j.id)
	if start["command"] != "echo [masked:github_token] [masked:DEPLOY_TOKEN]" {
		t.Errorf("start line: %v", start)
	}
	if j.command != start["command"] {
		t.Errorf("the events' command: %q", j.command)
	}
}
