package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
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
	survivors         string     // what was left alive, when terminated is false
	left              []procInfo // the processes named in survivors
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
			out.survivors, out.left = describeSurvivors(j, left), left
			return out, nil
		}
		out.terminated = true
	}
	r.deliver(j, w.handoff) // the kill held the job: its result is ours even if a wait took it too
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

// treeNow lists the processes of j's tree alive now (see reach.look and
// alive), oldest pid first.
func (j *job) treeNow() []procInfo {
	return alive(newReach([]*job{j}, false).look())
}

// treePids is the pids of j's tree now: its cgroup's members, or on
// process groups what a look finds alive.
func (j *job) treePids() []int {
	if pids, ok := j.boxed().members(); ok {
		return pids
	}
	var pids []int
	for _, p := range j.treeNow() {
		pids = append(pids, p.pid)
	}
	return pids
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
	at := time.Now().Add(limit)
	t := time.AfterFunc(limit, func() {
		if !j.markTimedOut() {
			// Ended: a tree kept in reach past its result still has
			// its time limit (publish left this timer running for it).
			if !j.treeGone() {
				j.teardown(max(grace, 0))
			}
			return
		}
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
	if !j.setLimit(t, at, grace) {
		t.Stop() // it ended before the timer was stored, so publish missed it
	}
}

// treeIn lists the processes of j's tree in table t, oldest pid first,
// and remembers them for the next look.
func (j *job) treeIn(t procTable) []procInfo {
	members := map[int]bool{}
	var queue []int
	add := func(pid int) {
		if pid != t.selfPid && !members[pid] {
			members[pid] = true
			queue = append(queue, pid)
		}
	}
	if j.ownsID(t) {
		add(j.pid)
		for _, pid := range t.inGroup[j.pid] {
			add(pid)
		}
		for _, pid := range t.inSession[j.pid] {
			add(pid)
		}
	}
	for pid, start := range j.tree.remembered() {
		if p, ok := t.byPid[pid]; ok && p.start == start {
			add(pid)
		}
	}
	below := func() {
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, kid := range t.kids[pid] {
				add(kid)
			}
		}
	}
	below()
	// Orphans of the server not linked yet: the pipe test reads their
	// descriptors, so it runs last and only for them.
	// A child forked for another job holds every pipe of the server
	// until its exec closes them: it is recorded as that job's shell
	// before a fork still under way lets the gate go (see childTable).
	for _, pid := range t.kids[t.selfPid] {
		if !members[pid] && pid != j.pid && !t.isLeader(pid) && holdsAny(pid, j.tree.pipes) && !children.tracksAfterForks(pid) {
			add(pid)
		}
	}
	below()
	found := make([]procInfo, 0, len(members))
	for pid := range members {
		if p, ok := t.byPid[pid]; ok {
			found = append(found, p)
		}
	}
	slices.SortFunc(found, func(a, b procInfo) int { return a.pid - b.pid })
	j.tree.remember(found)
	return found
}

// ownsID reports whether the processes in group or session j.pid are the
// job's. The kernel keeps a pid number from reuse while any process has it
// as its group or session id, so they are, unless the number already
// belongs to a new process: one alive under it once the job's shell is
// reaped, or another job's shell.
func (j *job) ownsID(t procTable) bool {
	if j.pid <= 0 {
		return false // never started: 0 is no group
	}
	_, there := t.byPid[j.pid]
	return !there || !j.terminal()
}

// idReused reports whether the job's pid already names a new process: its
// shell was reaped, and a process lives under that pid.
func (j *job) idReused() bool {
	if !j.terminal() {
		return false
	}
	_, there := procNow(j.pid)
	return there
}

// groupLive reports whether the job's process group has a member, zombies
// included.
func (j *job) groupLive() bool { return !j.idReused() && groupAlive(j.pid) }

// reach is what one kill or teardown goes after: the trees of jobs and,
// for a shutdown, every descendant of this process. It remembers every
// process a look found, to wait for each by pid and start time.
type reach struct {
	jobs       []*job
	everything bool           // also every descendant of this process
	known      map[int]uint64 // pid to start time of each process found and not yet seen gone
	sent       map[int]uint64 // those the current step has signalled
	grouped    bool           // the current step signalled the jobs' groups
}

// newReach returns a reach over jobs (and with everything over every
// descendant) that has found nothing yet. One goroutine uses it at a time.
func newReach(jobs []*job, everything bool) *reach {
	return &reach{jobs: jobs, everything: everything, known: map[int]uint64{}}
}

// look lists the processes reach goes after now, zombies included.
func (r *reach) look() []procInfo {
	found := map[int]procInfo{}
	if len(r.jobs) > 0 && (!r.everything || !orphansReturn.Load()) {
		t := newProcTable(procSnapshot())
		for _, j := range r.jobs {
			for _, p := range j.treeIn(t) {
				found[p.pid] = p
			}
		}
	}
	for _, j := range r.jobs {
		for _, p := range j.boxMembers() {
			found[p.pid] = p
		}
		// What moved itself out of the job's cgroup is still the job's.
		for _, p := range j.boxed().escaped() {
			found[p.pid] = p
		}
	}
	if r.everything {
		for _, p := range descendants(os.Getpid()) {
			found[p.pid] = p
		}
	}
	procs := make([]procInfo, 0, len(found))
	for _, p := range found {
		procs = append(procs, p)
		r.known[p.pid] = p.start
	}
	slices.SortFunc(procs, func(a, b procInfo) int { return a.pid - b.pid })
	return procs
}

// beginStep starts a new signal: every process may be sent it once.
func (r *reach) beginStep() { r.sent, r.grouped = map[int]uint64{}, false }

// send sends sig to the jobs' process groups (once a step) and to each of
// procs the step has not signalled yet that no group signal reached. A
// stopped process keeps a TERM pending until it runs again, so TERM is
// followed by CONT. It returns the first group signal's error other than
// the group being gone; single processes are best effort, as they may exit
// at any time.
func (r *reach) send(sig syscall.Signal, procs []procInfo) error {
	var first error
	groups := map[int]bool{}
	for _, j := range r.jobs {
		groups[j.pid] = true
		if !r.grouped && sig == syscall.SIGKILL {
			j.boxed().killAll() // every process of its cgroup at once, a fork-hopper's next pid too
		}
		if !r.grouped && !j.idReused() {
			if err := j.signal(sig); err != nil && first == nil {
				first = err
			}
		}
	}
	for _, p := range procs {
		if start, ok := r.sent[p.pid]; ok && start == p.start {
			continue
		}
		r.sent[p.pid] = p.start
		if !r.grouped && groups[p.pgid] || p.state == "Z" {
			continue // the group signal reached it, or there is nothing left to signal
		}
		signalProcess(p, sig)
	}
	r.grouped = true
	return first
}

// signalProcess sends sig to p unless its pid now names another process.
func signalProcess(p procInfo, sig syscall.Signal) {
	if now, ok := procNow(p.pid); !ok || now.start != p.start {
		return // gone, or the pid was reused
	}
	for _, s := range []syscall.Signal{sig, syscall.SIGCONT} {
		if s == syscall.SIGCONT && sig != syscall.SIGTERM {
			break
		}
		for errors.Is(syscall.Kill(p.pid, s), syscall.EINTR) {
		}
		// ESRCH (it just exited) and EPERM (not ours to signal: it is
		// then reported as a survivor) leave nothing to do.
	}
}

// knownGone reports, without a whole look, whether every process found so
// far is gone and the jobs' groups are empty; with everything, whether
// this process has no child left. Cheap enough for every reap batch.
func (r *reach) knownGone() bool {
	if r.everything && orphansReturn.Load() {
		return !hasChildren()
	}
	for _, j := range r.jobs {
		if j.groupLive() || j.boxed().populated() {
			return false
		}
	}
	for pid, start := range r.known {
		if p, ok := procNow(pid); ok && p.start == start {
			return false
		}
		delete(r.known, pid) // gone, and its pid cannot bring it back
	}
	return !r.everything || !hasChildren()
}

// allGone reports whether a look that found left finds nothing at all.
func (r *reach) allGone(left []procInfo) bool {
	if len(left) > 0 {
		return false
	}
	for _, j := range r.jobs {
		// A cgroup is empty only when its events say so: a process
		// forked since the look is in it too.
		if j.groupLive() || j.boxed().populated() {
			return false
		}
	}
	return !r.everything || !hasChildren()
}

// Sweeps look again on a backoff between these bounds, for processes
// forked since the last look (a process that keeps re-forking itself).
const (
	sweepLookFirstDuration = 10 * time.Millisecond
	sweepLookMaxDuration   = 200 * time.Millisecond
)

// sweepStep sends sig to everything reach finds and, until deadline, looks
// again and signals what is new, until a look finds nothing. It reports
// whether one did.
func (r *reach) sweepStep(sig syscall.Signal, deadline time.Time) bool {
	r.beginStep()
	_ = r.send(sig, r.look()) // best effort: what a signal misses is looked for again
	gap := sweepLookFirstDuration
	for {
		// Wait for what was found to go; a process forked since the
		// last look is not among it, so look again after gap anyway.
		lookAt := earlier(deadline, time.Now().Add(gap))
		looked := time.Now()
		awaitProcesses(r.knownGone, lookAt, nil)
		left := r.look()
		if r.allGone(left) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		_ = r.send(sig, left) // best effort, as above
		gap = min(2*gap, sweepLookMaxDuration)
		// A tree that re-forks as fast as it dies would have it look
		// without pause: not more often than the first gap.
		pauseUntil(earlier(deadline, looked.Add(sweepLookFirstDuration)))
	}
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pauseUntil returns at t.
func pauseUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d) // a rate limit, not a wait for an event
	}
}

// endTrees sends TERM to the trees of jobs (and with everything to every
// descendant of this process), gives them grace, then KILLs whatever is
// found, looking again on a backoff, until nothing is left or bound
// (from the start) passes. It returns what was left and how long it took.
func endTrees(jobs []*job, everything bool, grace, bound time.Duration) ([]procInfo, time.Duration) {
	began := time.Now()
	r := newReach(jobs, everything)
	if r.sweepStep(syscall.SIGTERM, began.Add(grace)) || r.sweepStep(syscall.SIGKILL, began.Add(bound)) {
		return nil, time.Since(began)
	}
	return alive(r.look()), time.Since(began)
}

// alive keeps those of procs that are alive now: the same process is
// still under its pid and is not dying (a zombie, whoever reaps it, or
// exiting): a dying process is no survivor.
func alive(procs []procInfo) []procInfo {
	var left []procInfo
	for _, p := range procs {
		now, ok := procNow(p.pid)
		if !ok || now.start != p.start || now.dying() {
			continue
		}
		left = append(left, now)
	}
	return left
}
