package main

import (
	"context"
	"errors"
	"fmt"
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

// kill signals j's process group per plan and waits for observed death: the
// direct child reaped and no process left in the group. A job whose tree
// died is delivered to the kill (see the delivery rule); the caller, which
// holds j, reports its result.
func (r *registry) kill(w *waiter, j *job, plan killPlan) (killOutcome, error) {
	r.watch([]*job{j}, 1)
	defer r.watch([]*job{j}, -1)
	var out killOutcome
	if j.terminal() && !groupAlive(j.pid) {
		out.terminated, out.alreadyTerminated = true, true
	} else {
		for i, sig := range plan.signals {
			out.sent, out.escalated = sig, i > 0
			if err := j.signal(sig); err != nil {
				return killOutcome{}, err
			}
			var err error
			if plan.wait <= 0 { // no waiting: look once, and escalate at once
				out.terminated = j.terminal() && !groupAlive(j.pid)
			} else if out.terminated, err = j.awaitDeath(w, time.Now().Add(plan.wait)); err != nil {
				return killOutcome{}, err
			}
			if out.terminated {
				break
			}
		}
	}
	if !out.terminated {
		out.survivors = describeSurvivors(j)
		return out, nil
	}
	r.deliver(j, w.handoff) // the kill held the job: its result is ours even if a wait took it too
	return out, nil
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

// awaitDeath waits until the job's direct child has been reaped and its
// process group has no members left, or deadline. It reports whether both
// happened.
func (j *job) awaitDeath(w *waiter, deadline time.Time) (bool, error) {
	describe := func() string { return fmt.Sprintf("waiting for job %s's process group to exit", j.id) }
	for !j.terminal() {
		if !time.Now().Before(deadline) {
			return false, nil
		}
		if err := w.sleep(j.done, deadline, describe); err != nil {
			return false, err
		}
	}
	gone := awaitGroupGone(j.pid, deadline, w.ctx.Done())
	if !gone && w.ctx.Err() != nil {
		return false, errCancelled
	}
	return gone, nil
}

// describeSurvivors names what is left of a job's tree and what to do next.
func describeSurvivors(j *job) string {
	members := groupMembers(j.pid)
	what := "the shell has not exited"
	if j.terminal() {
		what = "the shell exited but its process group still has members"
	}
	if len(members) > 0 {
		what = fmt.Sprintf("%d process(es) in group %d survived:", len(members), j.pid)
		const named = 10 // a fork bomb's thousand survivors would drown the rest
		for i, m := range members {
			if i == named {
				what += fmt.Sprintf(" and %d more", len(members)-named)
				break
			}
			what += fmt.Sprintf(" %d (%s, %s)", m.pid, m.comm, stateWords(m.state))
		}
	}
	return what + "; send signal KILL, use ASSURED, or call kill again with a longer timeout"
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

// teardown terminates the job's tree: TERM, then KILL after grace, and waits
// for the group to be gone (bounded). Used when nobody will collect the job.
func (j *job) teardown(grace time.Duration) {
	w := &waiter{ctx: context.Background()}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		_ = j.signal(sig) // best effort: errors mean the group is gone
		if dead, _ := j.awaitDeath(w, time.Now().Add(grace)); dead {
			return
		}
	}
}

// killAtOnce is the grace of a time limit that sends KILL without a TERM
// first, as the Shell toolkit's contract has it.
const killAtOnce time.Duration = -1

// limitTime ends j if it still runs after limit: TERM to its process group,
// then, grace later, KILL to whatever of the group is left (or KILL alone
// when grace is killAtOnce). Its result then says timed_out. The timer
// stops when the job ends first.
func (j *job) limitTime(limit, grace time.Duration) {
	t := time.AfterFunc(limit, func() {
		if j.terminal() {
			return
		}
		j.timedOut.Store(true)
		if grace == killAtOnce {
			_ = j.signal(syscall.SIGKILL) // best effort: errors mean the group is gone
			return
		}
		_ = j.signal(syscall.SIGTERM) // best effort: errors mean the group is gone
		time.AfterFunc(grace, func() {
			if groupAlive(j.pid) {
				_ = j.signal(syscall.SIGKILL) // best effort, as above
			}
		})
	})
	j.limit.Store(t)
	if j.terminal() {
		t.Stop() // it ended before the timer was stored, so publish missed it
	}
}
