package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// teardownGraceDuration is how long TERM gets before KILL when the server
// tears a job down (cancelled execute, ended session, shutdown).
const teardownGraceDuration = 2 * time.Second

// killPlan is the signal sequence kill sends.
type killPlan struct {
	signals []syscall.Signal // sent in order while the tree survives
	wait    time.Duration    // how long each signal gets; 0 = do not wait
}

// killOutcome is what kill observed.
type killOutcome struct {
	terminated        bool
	alreadyTerminated bool
	sent              syscall.Signal
	escalated         bool
	survivors         string // what was left alive, when terminated is false
}

// kill signals j's tree (see treeIn) per plan and waits for observed death:
// the shell reaped and no process of the tree left. What a step did not
// see go is looked for once more when the reply is made, so terminated is
// true exactly when that look finds nothing, and survivors names only what
// it found alive. A job whose tree died is delivered to the kill (see the
// delivery rule); the caller, which holds j, reports its result.
func (r *registry) kill(w *waiter, j *job, plan killPlan) (killOutcome, error) {
	r.watch([]*job{j}, 1)
	defer r.watch([]*job{j}, -1)
	var out killOutcome
	rc := newReach([]*job{j}, false)
	if j.terminal() && rc.allGone(rc.look()) {
		out.terminated, out.alreadyTerminated = true, true
	} else {
		for i, sig := range plan.signals {
			out.sent, out.escalated = sig, i > 0
			var err error
			if out.terminated, err = j.killStep(w, rc, sig, plan.wait); err != nil {
				return killOutcome{}, err
			}
			if out.terminated {
				break
			}
		}
	}
	if !out.terminated {
		left := alive(rc.look()) // just before the reply: a process gone since the wait is not named
		if len(left) > 0 || !j.terminal() || !rc.allGone(nil) {
			out.survivors = describeSurvivors(j, left)
			return out, nil
		}
		out.terminated = true
	}
	r.deliver(j) // the kill held the job: its result is ours even if a wait took it too
	return out, nil
}

// killStep sends sig to j's tree and waits until wait passes for the shell
// to be reaped and every process found to go; then one more look must find
// nothing. It reports whether it did. Whole /proc scans are two at most:
// one to signal, one to confirm; the waiting in between reads only the
// processes found.
func (j *job) killStep(w *waiter, rc *reach, sig syscall.Signal, wait time.Duration) (bool, error) {
	deadline := time.Now().Add(wait)
	rc.beginStep()
	if err := rc.send(sig, rc.look()); err != nil {
		return false, err
	}
	if wait <= 0 { // no waiting: look once, and escalate at once
		return j.terminal() && rc.knownGone() && rc.allGone(rc.look()), nil
	}
	describe := func() string { return fmt.Sprintf("waiting for job %s's processes to exit", j.id) }
	for !j.terminal() {
		if !time.Now().Before(deadline) {
			return false, nil
		}
		if err := w.sleep(j.done, deadline, describe); err != nil {
			return false, err
		}
	}
	gone := awaitProcesses(rc.knownGone, deadline, w.ctx.Done())
	if w.ctx.Err() != nil {
		return false, errCancelled
	}
	if !gone {
		return false, nil
	}
	left := rc.look()
	if rc.allGone(left) {
		return true, nil
	}
	// Forked since the first look: signalled too, and waited for, but
	// only the look the reply makes can say the tree is gone now.
	_ = rc.send(sig, left) // best effort: the group was signalled above
	awaitProcesses(rc.knownGone, deadline, w.ctx.Done())
	if w.ctx.Err() != nil {
		return false, errCancelled
	}
	return false, nil
}

// signal sends sig to the job's process group. A stopped process keeps a TERM
// pending until it runs again, so TERM is followed by CONT.
func (j *job) signal(sig syscall.Signal) error {
	err := signalGroup(j.pid, sig)
	if errors.Is(err, errGroupGone) {
		return nil // already gone: death is observed below
	}
	if err == nil && sig == syscall.SIGTERM {
		_ = signalGroup(j.pid, syscall.SIGCONT) // best effort: the group may have just died
	}
	return err
}

// survivorsNamed bounds how many processes a report names: a fork bomb's
// thousand survivors would drown the rest.
const survivorsNamed = 10

// describeSurvivors names what is left of a job's tree (left, alive when
// the reply is made) and what to do next.
func describeSurvivors(j *job, left []procInfo) string {
	what := "the shell has not exited"
	switch {
	case len(left) > 0:
		what = fmt.Sprintf("%d process(es) of the job's tree (process group and session %d, and what they started) survived: %s",
			len(left), j.pid, namedProcesses(left))
	case j.terminal():
		what = "the shell exited but its process group still has members"
	}
	return what + "; send signal KILL, use ASSURED, or call kill again with a longer timeout"
}

// namedProcesses names procs, the first survivorsNamed of them, as
// "PID (COMM, STATE)".
func namedProcesses(procs []procInfo) string {
	var named []string
	for i, p := range procs {
		if i == survivorsNamed {
			named = append(named, fmt.Sprintf("and %d more", len(procs)-survivorsNamed))
			break
		}
		named = append(named, fmt.Sprintf("%d (%s, %s)", p.pid, p.comm, stateWords(p.state)))
	}
	return strings.Join(named, ", ")
}

// stateWords explains a /proc process state letter for a survivor report.
func stateWords(state string) string {
	switch state {
	case "D":
		return "uninterruptible sleep: even KILL waits until it unblocks"
	case "Z":
		return "exited, not yet reaped by its parent"
	case "T", "t":
		return "stopped"
	case "R":
		return "running"
	}
	return "sleeping"
}

// teardown terminates the job's tree: TERM, then KILL after grace to
// whatever is found, and waits for it to be gone (bounded). Used when
// nobody will collect the job.
func (j *job) teardown(grace time.Duration) {
	_, _ = endTrees([]*job{j}, false, grace, 2*grace) // best effort: nobody is told what survived
}

// killAtOnce is the grace of a time limit that sends KILL without a TERM
// first, as the Shell toolkit's contract has it.
const killAtOnce time.Duration = -1

// limitTime ends j if it still runs after limit: TERM to its tree, then,
// grace later, KILL to whatever of it is left (or KILL alone
// when grace is killAtOnce). Its result then says timed_out. The timer
// stops when the job ends first.
func (j *job) limitTime(limit, grace time.Duration) {
	t := time.AfterFunc(limit, func() {
		if j.terminal() {
			return
		}
		j.timedOut.Store(true)
		rc := newReach([]*job{j}, false)
		if grace == killAtOnce {
			rc.beginStep()
			_ = rc.send(syscall.SIGKILL, rc.look()) // best effort: errors mean the group is gone
			return
		}
		rc.beginStep()
		_ = rc.send(syscall.SIGTERM, rc.look()) // best effort, as above
		time.AfterFunc(grace, func() {
			if !rc.knownGone() {
				rc.beginStep()
				_ = rc.send(syscall.SIGKILL, rc.look()) // best effort, as above
			}
		})
	})
	j.limit.Store(t)
	if j.terminal() {
		t.Stop() // it ended before the timer was stored, so publish missed it
	}
}
