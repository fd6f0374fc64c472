package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitForSleeps waits until group pgid has want processes named sleep, so a
// signal cannot arrive before the shell set up its traps and children.
func waitForSleeps(t *testing.T, pgid, want int) []procEntry {
	t.Helper()
	var members []procEntry
	eventually(t, 10*time.Second, fmt.Sprintf("%d sleeps in group %d", want, pgid), func() bool {
		members = inGroup(pgid)
		return countComm(members, "sleep") >= want
	})
	return members
}

func TestKill(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())

	t.Run("TERM-ignoring tree survives TERM", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "trap '' TERM; sleep 60 & sleep 60")
		waitForSleeps(t, j.pid, 2)
		out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if out.terminated || out.sent != syscall.SIGTERM || out.escalated {
			t.Errorf("kill TERM: %+v, want terminated:false signal_sent 15", out)
		}
		if !strings.Contains(out.survivors, "sleep") || !strings.Contains(out.survivors, strconv.Itoa(j.pid)) {
			t.Errorf("detail %q does not name the surviving sleeps of group %d", out.survivors, j.pid)
		}
		if _, err := reg.lookup(j.id); err != nil {
			t.Errorf("a job that survived kill must stay: %v", err)
		}

		// ASSURED escalates to KILL and delivers the result.
		out, err = reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !out.terminated || !out.escalated || out.sent != syscall.SIGKILL {
			t.Fatalf("kill ASSURED: %+v, want terminated, escalated, signal_sent 9", out)
		}
		if r := resultOf(j); r.Signal != "killed" || r.ExitCode == nil || *r.ExitCode != -1 {
			t.Errorf("result after ASSURED: %+v", r)
		}
		if len(inGroup(j.pid)) != 0 {
			t.Errorf("group %d still has members after kill reported terminated: %v", j.pid, inGroup(j.pid))
		}
		if _, err := reg.lookup(j.id); !errors.Is(err, errUnknownJob) {
			t.Errorf("after delivery by kill: %v, want unknown job_id", err)
		}
	})

	t.Run("orphaned grandchild", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "(sleep 60 &) ; sleep 60")
		members := waitForSleeps(t, j.pid, 2)
		out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: 10 * time.Second})
		if err != nil || !out.terminated {
			t.Fatalf("kill: %+v, %v", out, err)
		}
		for _, m := range members {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.pid)); err == nil && strings.Contains(string(b), ") ") {
				// The pid may have been reused since; only a member of the
				// job's group counts as a survivor.
				for _, p := range inGroup(j.pid) {
					if p.pid == m.pid {
						t.Errorf("%d (%s) of group %d survived a kill that reported terminated", m.pid, m.comm, j.pid)
					}
				}
			}
		}
	})

	t.Run("already exited", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "exit 3")
		awaitDone(t, j)
		eventually(t, 10*time.Second, "the group is gone", func() bool { return !groupAlive(j.pid) })
		out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: time.Second})
		if err != nil || !out.terminated || !out.alreadyTerminated {
			t.Fatalf("kill of a finished job: %+v, %v; want already_terminated", out, err)
		}
		if r := resultOf(j); r.ExitCode == nil || *r.ExitCode != 3 {
			t.Errorf("result %+v, want exit_code 3", r)
		}
		if _, err := reg.lookup(j.id); !errors.Is(err, errUnknownJob) {
			t.Errorf("after delivery: %v", err)
		}
	})

	t.Run("zero timeout does not wait", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "trap '' TERM; sleep 60")
		waitForSleeps(t, j.pid, 1)
		out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: 0})
		if err != nil || out.terminated {
			t.Errorf("kill with timeout 0 of a TERM-ignoring job: %+v, %v; want terminated:false", out, err)
		}
	})

	t.Run("cancelled kill leaves the job", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "trap '' TERM; sleep 60")
		waitForSleeps(t, j.pid, 1)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := reg.kill(&waiter{ctx: ctx}, j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: time.Minute})
			errc <- err
		}()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, errCancelled) {
				t.Errorf("cancelled kill: %v, want errCancelled", err)
			}
		case <-time.After(jobDeadline):
			t.Fatal("a cancelled kill did not return")
		}
		if _, err := reg.lookup(j.id); err != nil || j.terminal() {
			t.Errorf("after a cancelled kill the job must stay running: %v, terminal %v", err, j.terminal())
		}
	})
}

// TestTimeLimitEndsTermIgnoringTree: a job past its time limit gets TERM,
// and KILL after the grace when it ignores TERM; its result says timed_out.
// A job that ends in time does not.
func TestTimeLimitEndsTermIgnoringTree(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "trap '' TERM; sleep 30 & exec sleep 30")
	j.limitTime(200*time.Millisecond, 200*time.Millisecond)
	r := resultOf(collect(t, reg, j))
	if r.Signal != "killed" || !r.TimedOut {
		t.Errorf("result %+v, want killed and timed_out", r)
	}
	eventually(t, jobDeadline, "the whole group is gone", func() bool { return !groupAlive(j.pid) })

	quick := startJob(t, reg, "exit 0")
	quick.limitTime(time.Minute, time.Second)
	if r := resultOf(collect(t, reg, quick)); r.TimedOut || r.State != stateSuccess {
		t.Errorf("a job that ended in time: %+v", r)
	}
}
