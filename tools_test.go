package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// runTool runs a tool handler the way a session does, minus the protocol.
func runTool[A any](t *testing.T, reg *registry, handle func(*toolCall, *A) (answer, error), args *A) *resultJSON {
	t.Helper()
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter(), dialect: dialect{agent: reg.cfg.profile == profileAgent}}
	res, err := handle(c, args)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := answeredResult(res)
	if !ok {
		t.Fatalf("handler answered %T", res)
	}
	t.Cleanup(func() {
		for _, j := range reg.list() {
			killGroup(j.pid)
		}
	})
	return r
}

// answeredResult is the one job result a handler answered, as a plain call
// gets it (a yielded execute's running entry); false for another answer.
func answeredResult(a answer) (*resultJSON, bool) {
	if y, ok := a.(yieldedAnswer); ok {
		a = y.now()
	}
	j, ok := a.(jsonAnswer)
	if !ok {
		return nil, false
	}
	r, ok := j.body.(*resultJSON)
	return r, ok
}

// TestYieldAfterReturnsRunningJob: a blocking execute with yield_after hands
// back the running job, which wait then collects whole.
func TestYieldAfterReturnsRunningJob(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	yield := seconds(0.3)
	r := runTool(t, reg, runExecute, &executeArgs{Command: "sleep 1; echo done", YieldAfter: &yield})
	if r.State != stateRunning || !r.Yielded {
		t.Fatalf("execute with yield_after: %+v, want running and yielded", r)
	}
	j, err := reg.lookup(r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultOf(collect(t, reg, j)); got.Stdout == nil || got.Stdout.Data != "done\n" {
		t.Errorf("collected %+v", got)
	}
}

// TestYieldOnInput: a blocking execute whose job waits for input returns
// soon after, long before yield_after, saying so.
func TestYieldOnInput(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	yield := seconds(60)
	began := time.Now()
	r := runTool(t, reg, runExecute, &executeArgs{Command: "read x; echo got $x", YieldAfter: &yield})
	if !r.Yielded || !r.WaitingForInput {
		t.Fatalf("execute of read: %+v, want yielded and waiting_for_input", r)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("yielded after %v; the read blocks at once", took)
	}
}

// TestWaitingForInputOnlyForItsOwnStdin: a job reading another pipe is not
// waiting for input; one reading its stdin is, after a second.
func TestWaitingForInputOnlyForItsOwnStdin(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	reader := startJob(t, reg, "wc -l")
	eventually(t, jobDeadline, "wc -l waits for input", reader.waitingForInput)
	piped := startJob(t, reg, "sleep 30 | cat")
	waitForSleeps(t, piped.pid, 1)
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if piped.waitingForInput() { // nothing to await: it must stay false
			t.Fatal("cat reading sleep's pipe was taken for waiting on stdin")
		}
	}
	if err := reader.input(plainWaiter(), "a\nb\n", true); err != nil {
		t.Fatal(err)
	}
	if r := resultOf(collect(t, reg, reader)); r.Stdout == nil || strings.TrimSpace(r.Stdout.Data) != "2" {
		t.Errorf("wc -l after input: %+v", r.Stdout)
	}
}

// TestArgvRunsWithoutShell: argv runs the program itself, found in PATH,
// with its arguments as given; a missing program is a start error.
func TestArgvRunsWithoutShell(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	r := runTool(t, reg, runExecute, &executeArgs{Argv: []string{"printf", "%s|", "a b", "$HOME"}})
	if r.Stdout == nil || r.Stdout.Data != "a b|$HOME|" {
		t.Errorf("argv printf: %+v", r.Stdout)
	}
	r = runTool(t, reg, runExecute, &executeArgs{Argv: []string{"no-such-program-here"}})
	if r.State != stateError || !strings.Contains(r.StartError, "no-such-program-here") {
		t.Errorf("missing program: %+v", r)
	}
}

// TestListJobsWithinBudget: a list longer than the reply budget stops
// early, oldest jobs first, and counts what it left out.
func TestListJobsWithinBudget(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < 60; i++ {
		awaitDone(t, startJob(t, reg, "true"))
	}
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter(), maxReply: minReplyBytes}
	res, err := runListJobs(c, &noArgs{})
	if err != nil {
		t.Fatal(err)
	}
	text := res.(toolText)
	if quotedLen(text) > minReplyBytes {
		t.Errorf("%d escaped bytes for a budget of %d", quotedLen(text), minReplyBytes)
	}
	var list struct {
		Jobs    []jobEntryJSON `json:"jobs"`
		Omitted int            `json:"omitted"`
	}
	if err := json.Unmarshal(text, &list); err != nil || len(list.Jobs)+list.Omitted != 60 || list.Omitted == 0 || list.Jobs[0].JobID != "1" {
		t.Errorf("list %s: %v", text, err)
	}
}

// jobEntryJSON is one list_jobs entry as a client reads it.
type jobEntryJSON struct {
	JobID string `json:"job_id"`
	State string `json:"state"`
}

// TestAnnotationsFollowPolicy: execute reaches the network unless it is
// off, and is read-only under the read-only sandbox; the policy is stated.
func TestAnnotationsFollowPolicy(t *testing.T) {
	t.Parallel()
	execute := *jobToolsByName["execute"]
	plain := annotationsFor(execute, testConfig())
	if plain["readOnlyHint"] != false || plain["openWorldHint"] != true || plain["destructiveHint"] != true {
		t.Errorf("execute with no policy: %v", plain)
	}
	cfg := testConfig()
	cfg.sandbox, cfg.networkOff, cfg.rlimitsText = sandboxReadOnly, true, "nofile=64"
	boxed := annotationsFor(execute, cfg)
	if boxed["readOnlyHint"] != true || boxed["openWorldHint"] != false || boxed["destructiveHint"] != false {
		t.Errorf("execute under read-only and network off: %v", boxed)
	}
	if a := annotationsFor(*jobToolsByName["wait"], cfg); a["openWorldHint"] != false {
		t.Errorf("wait: %v", a)
	}
	words := policyWords(cfg)
	for _, want := range []string{"read-only sandbox", "network off", "nofile=64"} {
		if !strings.Contains(words, want) {
			t.Errorf("policy words %q lack %q", words, want)
		}
	}
}

// jobToolsByName indexes the jobs set's tools, for tests.
var jobToolsByName = func() map[string]*toolSpec {
	m := map[string]*toolSpec{}
	for i := range jobTools {
		m[jobTools[i].name] = &jobTools[i]
	}
	return m
}()
