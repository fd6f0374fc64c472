package main

import (
	"errors"
	"testing"
	"time"
)

// TestDeliveryWhileOrphanHoldsPipes: the job is terminal when its direct
// child exits even though a background subshell keeps stdout open; the
// result is delivered promptly, and the job is gone afterwards.
func TestDeliveryWhileOrphanHoldsPipes(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())
	began := time.Now()
	j := startJob(t, reg, "echo x; (sleep 5; echo late) &")
	got := collect(t, reg, j)
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("delivery took %v while an orphan held the pipes; the orphan runs 5 s", took)
	}
	if r := resultOf(got); r.State != stateSuccess || r.Stdout == nil || r.Stdout.Data != "x\n" {
		t.Errorf("result %+v, want success with stdout \"x\\n\"", r)
	}
	if _, err := reg.lookup(j.id); !errors.Is(err, errUnknownJob) {
		t.Errorf("output after delivery: %v, want unknown job_id", err)
	}
}

// TestOrphanOutputCapturedAfterExit: output that descendants write after the
// job turned terminal is still captured until the job is delivered.
func TestOrphanOutputCapturedAfterExit(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "echo x; (sleep 0.2; echo late) &")
	awaitDone(t, j)
	eventually(t, 10*time.Second, "the orphan's line is captured", func() bool {
		return string(j.stdout.readAll(0).data) == "x\nlate\n"
	})
	collect(t, reg, j)
}

// TestResultCompleteWhenPumpStarvedPastSettleLimit: a pump the scheduler
// does not run for longer than the settle limit after the shell exits (1,000
// concurrent jobs on a slow machine) must still hand over everything the
// shell wrote. The full soak once got a 64 KiB job's result with part of its
// output: the settle limit was counted from the exit, not from the pump's
// first look at its pipe. Holding the window's lock stalls the pump here.
// Both ways a result waits for its pumps are covered: the pipes hung up (the
// last pump to reach EOF publishes) and an orphan holding stdout (the
// bounded settle).
func TestResultCompleteWhenPumpStarvedPastSettleLimit(t *testing.T) {
	t.Parallel()
	for _, command := range []string{
		"sleep 0.2; head -c 60000 /dev/zero",
		"sleep 0.2; head -c 60000 /dev/zero; sleep 5 &",
	} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			reg := newRegistry(testConfig())
			j := startJob(t, reg, command)
			j.stdout.mu.Lock() // the pump stalls at its first read
			eventually(t, jobDeadline, "the shell is reaped", func() bool {
				children.mu.Lock()
				defer children.mu.Unlock()
				_, running := children.byPid[j.pid]
				return !running
			})
			if j.stdout.total != 0 { // read under the held lock
				j.stdout.mu.Unlock()
				t.Fatalf("the pump read %d bytes before it was stalled; the test proves nothing", j.stdout.total)
			}
			select {
			case <-j.done:
				t.Error("the result was published while the pump could not read its pipe")
			case <-time.After(3 * settleMaxDuration): // nothing may happen: no event to await
			}
			j.stdout.mu.Unlock()
			r := resultOf(collect(t, reg, j))
			if r.Stdout == nil || r.Stdout.TotalBytes != 60000 || len(r.Stdout.Data) != 60000 {
				t.Errorf("the delivered result holds %+v, want all 60000 bytes the shell wrote", r.Stdout)
			}
		})
	}
}
