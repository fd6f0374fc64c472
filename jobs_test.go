package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deliveryRounds is how often each delivery interleaving is repeated: the
// races it guards against are narrow.
const deliveryRounds = 200

// watchersOf is how many calls are under way on j.
func watchersOf(reg *registry, j *job) int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if e := reg.entries[j]; e != nil {
		return e.watchers
	}
	return 0
}

// awaitWatchers waits until n calls are under way on j.
func awaitWatchers(t *testing.T, reg *registry, j *job, n int) {
	t.Helper()
	eventually(t, jobDeadline, "calls under way on the job", func() bool { return watchersOf(reg, j) == n })
}

// waitResult is what one wait call returned.
type waitResult struct {
	got map[string]*job
	err error
}

// startWait runs a blocking wait on ids in the background: it looks the
// jobs up at once, as a wait call is read, and waits on another goroutine.
func startWait(reg *registry, ids ...string) <-chan waitResult {
	done := make(chan waitResult, 1)
	jobs, err := reg.lookupAll(ids, false)
	if err != nil {
		done <- waitResult{err: err}
		return done
	}
	go func() {
		got, _, err := reg.await(plainWaiter(), jobs, awaitOptions{deadline: time.Now().Add(jobDeadline)})
		done <- waitResult{got, err}
	}()
	return done
}

// killResult is what one kill call returned.
type killResult struct {
	j   *job
	out killOutcome
	err error
}

// startKill runs a kill of id in the background: it looks the job up at
// once, as a kill call is read, and kills it on another goroutine.
func startKill(reg *registry, id string, sig syscall.Signal) <-chan killResult {
	return readKill(reg, id, sig)()
}

// readKill looks id up as a kill call is read and returns the start of its
// run: the server reads requests that arrive together, and holds their
// jobs, before it runs any of them.
func readKill(reg *registry, id string, sig syscall.Signal) (run func() <-chan killResult) {
	done := make(chan killResult, 1)
	j, err := reg.lookup(id)
	if err != nil {
		done <- killResult{err: err}
		return func() <-chan killResult { return done }
	}
	return func() <-chan killResult {
		go func() {
			out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{sig}, wait: jobDeadline})
			done <- killResult{j, out, err}
		}()
		return done
	}
}

// receive takes one value from ch or fails the test after jobDeadline.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(jobDeadline)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s did not answer within %v", what, jobDeadline)
		panic("unreachable")
	}
}

// checkKilledResult checks that a kill delivered j's result, ended by sig.
func checkKilledResult(t *testing.T, r killResult, j *job, sig syscall.Signal) {
	t.Helper()
	if r.err != nil || !r.out.terminated || r.j != j {
		t.Fatalf("kill: %+v, %v; want terminated with the job's result", r.out, r.err)
	}
	if res := resultOf(r.j); res.Signal != signalWords(sig) || res.ExitCode == nil || *res.ExitCode != -1 {
		t.Fatalf("kill's result %+v, want death by %v", res, sig)
	}
}

// checkWaitGot checks that a wait delivered j.
func checkWaitGot(t *testing.T, r waitResult, j *job) {
	t.Helper()
	if r.err != nil || r.got[j.id] != j {
		t.Fatalf("wait: %v, %v; want the result of job %s", r.got, r.err, j.id)
	}
}

// checkForgotten checks that later calls no longer find j.
func checkForgotten(t *testing.T, reg *registry, j *job) {
	t.Helper()
	if _, err := reg.lookup(j.id); !errors.Is(err, errUnknownJob) {
		t.Fatalf("after delivery: %v, want unknown job_id", err)
	}
}

// TestKillDuringBlockedWaitDeliversToBoth: a wait blocked on a job and the
// kill that ends it both get the result (a wait lost it to the kill, or the
// kill answered unknown job_id, when only the first claim counted).
func TestKillDuringBlockedWaitDeliversToBoth(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds; i++ {
		j := startJob(t, reg, "exec sleep 60")
		waited := startWait(reg, j.id)
		awaitWatchers(t, reg, j, 1)
		checkKilledResult(t, receive(t, "kill", startKill(reg, j.id, syscall.SIGKILL)), j, syscall.SIGKILL)
		checkWaitGot(t, receive(t, "wait", waited), j)
		checkForgotten(t, reg, j)
	}
}

// TestKillRacingWaitDeliversToBoth: a wait read just before a kill, with no
// pause for the wait to block: both hold the job from the moment they were
// read, so both answer with the result (a wait whose goroutine started late
// lost the result to the kill when jobs were looked up on the call's own
// goroutine).
func TestKillRacingWaitDeliversToBoth(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds; i++ {
		j := startJob(t, reg, "exec sleep 60")
		waited := startWait(reg, j.id)
		checkKilledResult(t, receive(t, "kill", startKill(reg, j.id, syscall.SIGKILL)), j, syscall.SIGKILL)
		checkWaitGot(t, receive(t, "wait", waited), j)
		checkForgotten(t, reg, j)
	}
}

// TestKillsBackToBackBothDeliver: two kills read one after the other, with
// no pause, both answer terminated with the result.
func TestKillsBackToBackBothDeliver(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds; i++ {
		j := startJob(t, reg, "exec sleep 60")
		// Both are read before either runs, as two kills arriving together
		// are: a first kill run before the second was read could deliver
		// and forget the job first.
		readFirst, readSecond := readKill(reg, j.id, syscall.SIGKILL), readKill(reg, j.id, syscall.SIGKILL)
		first, second := readFirst(), readSecond()
		checkKilledResult(t, receive(t, "first kill", first), j, syscall.SIGKILL)
		checkKilledResult(t, receive(t, "second kill", second), j, syscall.SIGKILL)
		checkForgotten(t, reg, j)
	}
}

// TestWaitDuringKillDrainGetsResult: the shell died from the kill's TERM
// but a TERM-ignoring process keeps the group alive; a wait that arrives
// meanwhile finds the finished job and gets its result, and the kill still
// answers terminated with it once the group is gone.
func TestWaitDuringKillDrainGetsResult(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds/10; i++ {
		j := startJob(t, reg, "(trap '' TERM; exec sleep 60) & exec sleep 60")
		waitForSleeps(t, j.pid, 2)
		killed := startKill(reg, j.id, syscall.SIGTERM)
		awaitDone(t, j)
		checkWaitGot(t, receive(t, "wait", startWait(reg, j.id)), j)
		killGroup(j.pid) // the drain ends
		r := receive(t, "kill", killed)
		if r.err != nil || !r.out.terminated || r.j != j {
			t.Fatalf("kill: %+v, %v; want terminated with the result", r.out, r.err)
		}
		if res := resultOf(r.j); res.Signal != "terminated" {
			t.Fatalf("kill's result %+v, want the shell's death by TERM", res)
		}
		checkForgotten(t, reg, j)
	}
}

// TestConcurrentKillsBothReportTerminated: two kills under way on one job
// both answer terminated:true with its result.
func TestConcurrentKillsBothReportTerminated(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds; i++ {
		j := startJob(t, reg, "trap '' TERM; exec sleep 60")
		waitForSleeps(t, j.pid, 1)
		first, second := startKill(reg, j.id, syscall.SIGTERM), startKill(reg, j.id, syscall.SIGTERM)
		awaitWatchers(t, reg, j, 2)
		killGroup(j.pid)
		checkKilledResult(t, receive(t, "first kill", first), j, syscall.SIGKILL)
		checkKilledResult(t, receive(t, "second kill", second), j, syscall.SIGKILL)
		checkForgotten(t, reg, j)
	}
}

// TestConcurrentWaitsAllGetResult: every wait blocked on a job when it ends
// gets its result, duplicated ids included.
func TestConcurrentWaitsAllGetResult(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	const waiters = 8
	for i := 0; i < deliveryRounds/10; i++ {
		j := startJob(t, reg, "exec sleep 60")
		var waits []<-chan waitResult
		for k := 0; k < waiters; k++ {
			waits = append(waits, startWait(reg, j.id, j.id))
		}
		awaitWatchers(t, reg, j, waiters)
		killGroup(j.pid)
		for _, w := range waits {
			checkWaitGot(t, receive(t, "wait", w), j)
		}
		checkForgotten(t, reg, j)
	}
}

// TestKillDuringBlockingExecuteDeliversToBoth: a blocking execute and the
// kill that ends its job both answer with the result.
func TestKillDuringBlockingExecuteDeliversToBoth(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds; i++ {
		executed := make(chan any, 1)
		go func() {
			res, err := runExecute(&toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter()},
				&executeArgs{Command: "exec sleep 60"})
			if err != nil {
				executed <- err
				return
			}
			executed <- res
		}()
		var j *job
		eventually(t, jobDeadline, "the execute's job is listed", func() bool {
			jobs := reg.list()
			if len(jobs) == 1 {
				j = jobs[0]
			}
			return j != nil && watchersOf(reg, j) == 1
		})
		t.Cleanup(func() { killGroup(j.pid) })
		checkKilledResult(t, receive(t, "kill", startKill(reg, j.id, syscall.SIGTERM)), j, syscall.SIGTERM)
		answered, _ := receive(t, "execute", executed).(answer)
		res, ok := answeredResult(answered)
		if !ok || res.JobID != j.id || res.Signal != "terminated" {
			t.Fatalf("execute answered %+v, want the killed job's result", res)
		}
		checkForgotten(t, reg, j)
	}
}

// TestWaitOnSeveralJobsOneKilled: a wait blocked on three jobs returns the
// killed one's result and leaves the other two running and listed.
func TestWaitOnSeveralJobsOneKilled(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for i := 0; i < deliveryRounds/10; i++ {
		a, b, c := startJob(t, reg, "exec sleep 60"), startJob(t, reg, "exec sleep 60"), startJob(t, reg, "exec sleep 60")
		waited := startWait(reg, a.id, b.id, c.id)
		awaitWatchers(t, reg, b, 1)
		checkKilledResult(t, receive(t, "kill", startKill(reg, b.id, syscall.SIGKILL)), b, syscall.SIGKILL)
		r := receive(t, "wait", waited)
		if r.err != nil || len(r.got) != 1 || r.got[b.id] != b {
			t.Fatalf("wait: %v, %v; want only job %s", r.got, r.err, b.id)
		}
		for _, j := range []*job{a, c} {
			if _, err := reg.lookup(j.id); err != nil || j.terminal() {
				t.Fatalf("job %s: %v, terminal %v; want it running and listed", j.id, err, j.terminal())
			}
			killGroup(j.pid)
			collect(t, reg, j)
		}
	}
}

// TestCancelledWaitLeavesFinishedJob: a blocked wait cancelled just as its
// job ends delivers nothing, so the result stays for the next caller.
func TestCancelledWaitLeavesFinishedJob(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "exec sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := reg.await(&waiter{ctx: ctx}, []*job{j}, awaitOptions{})
		errc <- err
	}()
	awaitWatchers(t, reg, j, 1)
	// Holding the registry lock keeps the end from being announced, so the
	// wait sees the cancel and the end together.
	reg.mu.Lock()
	killGroup(j.pid)
	awaitDone(t, j)
	cancel()
	reg.mu.Unlock()
	if err := receive(t, "the cancelled wait", errc); !errors.Is(err, errCancelled) {
		t.Fatalf("cancelled wait: %v, want errCancelled", err)
	}
	if _, err := reg.lookup(j.id); err != nil {
		t.Fatalf("the finished job must stay for the next caller: %v", err)
	}
	collect(t, reg, j)
}

// TestKillRealtimeSignal: a real-time signal number ends a job whose shell
// traps TERM (34 was refused as an unknown signal).
func TestKillRealtimeSignal(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "trap '' TERM; exec sleep 60")
	waitForSleeps(t, j.pid, 1)
	sig, err := parseSignal([]byte(`"34"`))
	if err != nil {
		t.Fatal(err)
	}
	r := receive(t, "kill", startKill(reg, j.id, sig))
	if r.err != nil || !r.out.terminated || r.out.sent != 34 {
		t.Fatalf("kill 34: %+v, %v", r.out, r.err)
	}
	if res := resultOf(r.j); res.Signal != "real-time signal 0" || *res.ExitCode != -1 {
		t.Errorf("result %+v, want death by real-time signal 0", res)
	}
}

// TestIgnoredHangupDoesNotStop: a SIGHUP or SIGINT ignored when the server
// started does not end it (under nohup it exited on SIGHUP); TERM still does.
func TestIgnoredHangupDoesNotStop(t *testing.T) {
	t.Parallel()
	arrived := make(chan os.Signal, 3)
	stop := stoppingSignals(arrived, map[os.Signal]bool{syscall.SIGHUP: true, syscall.SIGINT: true})
	arrived <- syscall.SIGHUP
	arrived <- syscall.SIGINT
	arrived <- syscall.SIGTERM
	if got := receive(t, "the stop channel", stop); got != syscall.SIGTERM {
		t.Errorf("stopped on %v, want SIGTERM: ignored signals must pass", got)
	}
	close(arrived)
}

// TestNotIgnoredHangupStops: without nohup, SIGHUP ends the server.
func TestNotIgnoredHangupStops(t *testing.T) {
	t.Parallel()
	arrived := make(chan os.Signal, 1)
	stop := stoppingSignals(arrived, map[os.Signal]bool{syscall.SIGHUP: false})
	arrived <- syscall.SIGHUP
	if got := receive(t, "the stop channel", stop); got != syscall.SIGHUP {
		t.Errorf("stopped on %v, want SIGHUP", got)
	}
	close(arrived)
}

// TestStartError: a job that cannot start is returned finished, with
// start_error, and is never registered.
func TestStartError(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())
	j, started, _ := reg.start(startRequest{command: "true", dir: "/no/such/dir", policy: defaultCapture})
	if started || !j.terminal() {
		t.Fatalf("start in a missing cwd: started %v terminal %v", started, j.terminal())
	}
	r := statusOf(j)
	if r.State != stateError || !strings.Contains(r.StartError, "/no/such/dir") || r.ExitCode == nil || *r.ExitCode != -1 {
		t.Errorf("status %+v", r)
	}
	if len(reg.list()) != 0 {
		t.Errorf("a job that never started is listed")
	}
	cfg := testConfig()
	cfg.shell = "/no/such/shell"
	reg = newRegistry(cfg)
	j, started, _ = reg.start(startRequest{command: "true", policy: defaultCapture})
	if started || !strings.Contains(statusOf(j).StartError, "/no/such/shell") {
		t.Errorf("missing shell: started %v start_error %q", started, statusOf(j).StartError)
	}
}

// TestExactlyOnce: a terminal result is delivered once and the job is gone
// (seed invariant 1).
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())

	t.Run("wait delivers once", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "echo hi")
		got := collect(t, reg, j)
		if r := resultOf(got); r.Stdout == nil || r.Stdout.Data != "hi\n" {
			t.Errorf("result %+v", r)
		}
		if _, err := waitIDs(reg, plainWaiter(), []string{j.id}, time.Now(), true); !errors.Is(err, errUnknownJob) {
			t.Errorf("a second wait: %v, want unknown job_id", err)
		}
		if _, err := reg.lookup(j.id); !errors.Is(err, errUnknownJob) {
			t.Errorf("status after delivery: %v, want unknown job_id", err)
		}
		for _, listed := range reg.list() {
			if listed == j {
				t.Errorf("a delivered job is listed")
			}
		}
	})

	t.Run("poll of a running job delivers nothing", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "sleep 60")
		got, err := waitIDs(reg, plainWaiter(), []string{j.id}, time.Now(), true)
		if err != nil || len(got) != 0 {
			t.Errorf("poll: %v, %v", got, err)
		}
		if _, err := reg.lookup(j.id); err != nil {
			t.Errorf("a running job must stay after a poll: %v", err)
		}
	})

	t.Run("list_jobs shows finished, uncollected jobs", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "true")
		awaitDone(t, j)
		if _, err := reg.lookup(j.id); err != nil {
			t.Errorf("a finished, uncollected job must stay visible: %v", err)
		}
		collect(t, reg, j)
	})
}

// sink keeps allocations in the trim test from being optimised away.
var sink []byte

// TestSurvivorsReported: a shell that exits leaving a process behind says
// so in its result (at most maxSurvivorsNamed named, the count in full), and
// list_jobs counts them; a job that leaves nothing reports nothing.
func TestSurvivorsReported(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "sleep 100 >/dev/null 2>&1 & sleep 101 >/dev/null 2>&1 & echo started")
	awaitDone(t, j)
	if n := len(j.outcome().survivors); n != 2 {
		t.Fatalf("%d survivors, want 2: %+v", n, j.outcome().survivors)
	}
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter()}
	list, err := runListJobs(c, &noArgs{})
	if err != nil || !strings.Contains(string(list.(toolText)), `"survivors":2`) {
		t.Errorf("list_jobs: %s %v", list, err)
	}
	r := resultOf(collect(t, reg, j))
	if r.SurvivorsCount != 2 || len(r.Survivors) != 2 || r.Survivors[0].PID <= 0 { // sleep, or its shell not yet exec'd
		t.Errorf("result survivors %+v (%d)", r.Survivors, r.SurvivorsCount)
	}
	clean := resultOf(collect(t, reg, startJob(t, reg, "true")))
	if clean.Survivors != nil || clean.SurvivorsCount != 0 {
		t.Errorf("a job that left nothing: %+v", clean.Survivors)
	}
}

// TestSlotFreeOnceResultSeen: under MCP_EXEC_MAX_JOBS=1 a job started the
// moment the previous one's result was delivered is never refused (the
// slot was given back after the result could be seen, and a CI run's next
// execute was refused with "1 jobs are running (running: )").
func TestSlotFreeOnceResultSeen(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(configOf(t, "MCP_EXEC_MAX_JOBS=1"))
	for i := 0; i < 200; i++ {
		j, started, err := reg.start(startRequest{command: "exit 0", policy: defaultCapture})
		if err != nil || !started {
			t.Fatalf("start %d: %v", i, err)
		}
		if _, _, err := reg.await(plainWaiter(), []*job{j}, awaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// resultOf is a finished job's result, delivered by the caller, with the
// slices its capture policy selects for how it ended and what that left out.
func resultOf(j *job) *resultJSON { return resultWithin(j, 0) }

// TestDeliveredIDSaysDelivered: a delivered id's error says it was
// delivered, with or without the agent profile (1.0 promises only the
// phrase unknown job_id); an id never issued is plainly unknown.
func TestDeliveredIDSaysDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  *config
		want string
	}{
		{configOf(t, "MCP_EXEC_PROFILE=agent"), "unknown job_id: 1 (delivered to an earlier call)"},
		{testConfig(), "unknown job_id: 1 (delivered to an earlier call)"},
	} {
		reg := newRegistry(tc.cfg)
		collect(t, reg, startJob(t, reg, "true"))
		if _, err := reg.lookup("1"); err == nil || err.Error() != tc.want || !errors.Is(err, errUnknownJob) {
			t.Errorf("profile %s: %v, want %q", tc.cfg.profile, err, tc.want)
		}
		if _, err := reg.lookup("2"); err == nil || err.Error() != "unknown job_id: 2" {
			t.Errorf("profile %s: an id never issued: %v", tc.cfg.profile, err)
		}
	}
}

// readingObserver is a jobObserver that reads each job it hears of through
// the job's own lock, as the shell set's events do (killed, timed out).
type readingObserver struct {
	heard chan string // each event, with whether the job says it was killed
}

// jobEvent reads j's kill and time-limit marks and passes the event on.
func (o readingObserver) jobEvent(j *job, event string) {
	o.heard <- fmt.Sprintf("%s killed=%v", event, j.killWasSent() || j.hitTimeLimit())
}

// TestEventsMayReadTheJob: a job's events are told outside its lock, so
// an observer may read the job through it. Told under the lock, the end
// event's read deadlocked the goroutine telling it (the reaper's, which
// then reaped nothing more).
func TestEventsMayReadTheJob(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	obs := readingObserver{heard: make(chan string, 2)}
	reg.observer = obs
	j := startJob(t, reg, "exec sleep 60")
	if got := receive(t, "the start event", obs.heard); got != "started killed=false" {
		t.Errorf("start event: %q", got)
	}
	j.markKillSent()
	killGroup(j.pid)
	if got := receive(t, "the end event", obs.heard); got != "finished killed=true" {
		t.Errorf("end event: %q", got)
	}
	awaitDone(t, j)
	collect(t, reg, j)
}
