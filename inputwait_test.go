package main

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestInputLookReadsOnlyTheJobsProcesses: looking whether a job waits for
// input reads its own process tree, not all of /proc. It once scanned every
// process on each status and output call, and the garbage took the memory
// bench from 1.04 to 1.58 of its floor.
func TestInputLookReadsOnlyTheJobsProcesses(t *testing.T) {
	onLinux(t) // not parallel: AllocsPerRun counts the whole process's allocations
	reg := newRegistry(testConfig())
	var others []*job
	for i := 0; i < 60; i++ {
		others = append(others, startJob(t, reg, "exec sleep 60")) // processes a look must skip
	}
	j := startJob(t, reg, "exec sleep 60")
	for _, o := range append(others, j) {
		waitForSleeps(t, o.pid, 1)
	}
	if allocs := testing.AllocsPerRun(20, func() { j.waitingForInput() }); allocs > 400 {
		t.Errorf("a look at one job allocates %.0f times; it reads more than the job's processes", allocs)
	}
}

// agentRegistry is a registry under the agent profile, whose jobs have
// prompts.
func agentRegistry() *registry {
	cfg := testConfig()
	cfg.profile = profileAgent
	return newRegistry(cfg)
}

// awaitBlockedAndSilent waits, without a look that would start a clock,
// until a process of j is blocked reading its input and j has been silent
// for inputWaitDuration.
func awaitBlockedAndSilent(t *testing.T, j *job) {
	t.Helper()
	eventually(t, jobDeadline, "a reader blocked and the job silent for 1 s", func() bool {
		_, _, blocked := blockedReading(processTree(j.pid), j.inputEnd, j.pid)
		return blocked && j.silentFor(time.Now()) >= inputWaitDuration
	})
}

// TestWaitingForInputOnTheFirstLook: a job blocked reading its stdin and
// silent for a second waits for input by the first look at it. The first
// look only started a clock, so status or list_jobs on a job that had
// waited 2.5 s said nothing until a second call a second later.
func TestWaitingForInputOnTheFirstLook(t *testing.T) {
	onLinux(t)
	t.Parallel()
	j := startJob(t, agentRegistry(), "echo ready; read x")
	awaitBlockedAndSilent(t, j)
	if j.seenWaiting() {
		t.Fatal("a look was made before the first one")
	}
	if !j.waitingForInput() {
		t.Error("the first look at a job blocked reading and silent for 1 s says it does not wait for input")
	}
}

// TestWaitingForInputOnTheFirstLookOnlyWithPrompts: without prompts (a 1.0
// client's job, outside the agent profile) the first look still only
// starts the clock, so the replies such a client gets stay as they were.
func TestWaitingForInputOnTheFirstLookOnlyWithPrompts(t *testing.T) {
	onLinux(t)
	t.Parallel()
	j := startJob(t, newRegistry(testConfig()), "read x")
	awaitBlockedAndSilent(t, j)
	if j.waitingForInput() {
		t.Error("a compat job was reported waiting for input on the first look")
	}
	if j.waitingForInputAtOnce() != j.waitingForInputSeen() {
		t.Error("wait's entries for a compat job differ from 1.1's")
	}
}

// TestWaitingForInputOfATerminalPrompt: a tty job's shell blocked reading
// its terminal (read -p), and a program reading /dev/tty as password
// prompts do, wait for input.
func TestWaitingForInputOfATerminalPrompt(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig()) // a terminal has prompts outside the agent profile too: no 1.0 client asks for one
	for _, command := range []string{"read -p 'Name? ' x", "exec 0</dev/null; read -r x </dev/tty"} {
		j := startReq(t, reg, startRequest{command: command, tty: &ttySpec{rows: 24, cols: 80}, policy: defaultCapture})
		awaitBlockedAndSilent(t, j)
		if !j.waitingForInput() {
			t.Errorf("%s on a terminal: not waiting for input", command)
		}
		if err := j.input(plainWaiter(), "x\n", false); err != nil {
			t.Fatal(err)
		}
		collect(t, reg, j)
	}
}

// TestWaitingForInputNotJustAfterInput: a reader that was just written a
// line and reads again has not waited for the next one yet.
func TestWaitingForInputNotJustAfterInput(t *testing.T) {
	onLinux(t)
	t.Parallel()
	j := startJob(t, agentRegistry(), "cat >/dev/null")
	awaitBlockedAndSilent(t, j)
	if err := j.input(plainWaiter(), "line\n", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, jobDeadline, "cat reading again", func() bool {
		_, _, blocked := blockedReading(processTree(j.pid), j.inputEnd, j.pid)
		return blocked
	})
	if j.silentFor(time.Now()) < inputWaitDuration && j.waitingForInput() {
		t.Error("a job written input a moment ago waits for input by one look")
	}
}

// TestWaitingForInputWhileAnotherProcessWrites: a job whose background
// process keeps writing is never silent, but its reader, seen blocked by
// looks a second apart without running in between, waits for input.
func TestWaitingForInputWhileAnotherProcessWrites(t *testing.T) {
	onLinux(t)
	t.Parallel()
	j := startJob(t, agentRegistry(), "(while :; do echo tick; sleep 0.1; done) & read x; kill $!")
	eventually(t, jobDeadline, "waiting for input by looks a second apart", j.waitingForInput)
	if j.silentFor(time.Now()) >= inputWaitDuration {
		t.Error("the ticking job was silent: the test shows nothing")
	}
}

// TestNextInputLookAtTheEdgeOfSilence: a blocked call looks again when a
// job with prompts will have been silent inputWaitDuration, not up to an
// interval after it, so a prompt written between looks yields a second
// after it appeared.
func TestNextInputLookAtTheEdgeOfSilence(t *testing.T) {
	onLinux(t)
	t.Parallel()
	j := startJob(t, agentRegistry(), "read x")
	now := time.Now()
	next := nextInputLook([]*job{j}, now)
	want := now.Add(inputWaitDuration - j.silentFor(now) + inputLookSlack)
	if left := inputWaitDuration - j.silentFor(now); left > inputProbeInterval {
		want = now.Add(inputProbeInterval)
	}
	if !next.Equal(want) {
		t.Errorf("next look in %v, want %v", next.Sub(now), want.Sub(now))
	}
	later := now.Add(inputWaitDuration - j.silentFor(now) - inputLookSlack)
	if got := nextInputLook([]*job{j}, later); got.Sub(later) > 2*inputLookSlack+time.Millisecond {
		t.Errorf("a look %v before the silence reaches %v comes %v later", inputLookSlack, inputWaitDuration, got.Sub(later))
	}
}

// TestInputAnswerNeedsAReadAfterTheWrite: after input, a job reads again
// only in a wait begun after it took input since the write. A python REPL
// on a terminal written exit() was answered waiting_for_input while it
// exited: a look found it in the wait it had slept in as the bytes came,
// not yet woken for them, and took that for a new read, since no look
// before the write had seen it there (the answer compared the two looks'
// pid and scheduling count, and a REPL that wakes in its wait changes the
// count too).
func TestInputAnswerNeedsAReadAfterTheWrite(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	for _, tty := range []*ttySpec{nil, {rows: 24, cols: 80}} {
		j := startReq(t, reg, startRequest{command: "sleep 60; read a; read b", tty: tty, policy: defaultCapture})
		var sleeper int
		for _, p := range waitForSleeps(t, j.pid, 1) {
			if p.comm == "sleep" {
				sleeper = p.pid
			}
		}
		// The mark is taken while the shell waits for sleep: no look before
		// the write sees it reading. It then goes to read a line and sleeps
		// there, where any look after the write would find it until the
		// kernel wakes it for the bytes.
		mark := inputReadsMarkOf(j, len("x\n"))
		if err := syscall.Kill(sleeper, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
		eventually(t, jobDeadline, "the shell blocked reading its line", func() bool {
			_, _, blocked := blockedReading(processTree(j.pid), j.inputEnd, j.pid)
			return blocked
		})
		if j.readsAgainSince(mark) {
			t.Errorf("tty %v: a reader in the wait it slept in before the write reads again", tty != nil)
		}
		// Woken in that wait and back in it, as a REPL polling with a
		// time-out is, it has run since; it has read nothing.
		_, runs, _ := blockedReading(processTree(j.pid), j.inputEnd, j.pid)
		stopAndContinue(t, j.pid)
		eventually(t, jobDeadline, "the shell back in its read", func() bool {
			_, now, blocked := blockedReading(processTree(j.pid), j.inputEnd, j.pid)
			return blocked && now > runs
		})
		if j.readsAgainSince(mark) {
			t.Errorf("tty %v: a reader woken in the wait it slept in before the write reads again", tty != nil)
		}
		if err := j.input(plainWaiter(), "x\n", false); err != nil {
			t.Fatal(err)
		}
		eventually(t, jobDeadline, "the shell reading again once it took the line", func() bool { return j.readsAgainSince(mark) })

		// The last line: the shell takes it and exits, and no look until its
		// end sees it read again.
		mark = inputReadsMarkOf(j, len("y\n"))
		if err := j.input(plainWaiter(), "y\n", false); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(jobDeadline); !j.terminal(); {
			if j.readsAgainSince(mark) {
				t.Fatalf("tty %v: the shell that took its last line and exits reads again", tty != nil)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job did not end within %v", jobDeadline)
			}
		}
		collect(t, reg, j)
	}
}

// stopAndContinue stops process pid and, once it is stopped, continues it:
// it wakes in the system call it sleeps in, and goes back to it.
func stopAndContinue(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, jobDeadline, "the process stopped", func() bool {
		p, ok := procNow(pid)
		return ok && p.state == "T"
	})
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
