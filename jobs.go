package main

import (
	"container/list"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// registry holds the jobs of one client session. Jobs of different sessions
// never see each other; only the reaper is shared.
type registry struct {
	cfg *config

	// mu guards every field below. It is never held together with a
	// job's mu (see job.mu), and never while blocking or writing.
	mu    sync.Mutex
	jobs  map[string]*job // waitable jobs: running, or finished and not delivered
	order *list.List      // the same jobs, oldest first
	// entries is what the registry keeps on each job it lists or a call
	// is under way on; an entry goes when neither holds.
	entries   map[*job]*jobEntry
	kept      map[string]*job // delivered jobs whose result was cut: readable a while longer
	lingering lingerSet       // delivered jobs whose trees still run (see lingerLocked)
	// running counts jobs started and not finished, for MCP_EXEC_MAX_JOBS.
	// It is taken under mu (checked and added together) but given back
	// without it, so publish frees a slot before the result shows.
	running atomic.Int64
	// everywhere counts the running jobs of every session that shares it
	// (nil: this session only); randomIDs makes job ids unguessable, for
	// transports where clients could try each other's. Both are set before
	// the first job starts.
	everywhere *jobSlots
	randomIDs  bool
	// observer, when set, hears each job's start and end, once each.
	observer jobObserver
	expired  expiredJobs // why recently forgotten jobs were, for their ids' errors
	// delivered holds the ids of the jobs delivered last, for their errors
	// to say so.
	delivered expiredJobs
	// log, when set, hears each job's start and end, and each refusal;
	// session names this session in it. Both are set before the first job
	// starts.
	log     *jobLog
	session string
	nextID  uint64
	changed broadcast // announced whenever a job finishes, or a handing ends
	// handing holds the jobs taken out by a call whose reply is still on
	// its way (see handoff): looking one up waits for the way's end.
	handing map[string]*handoff
	cwd     cwdKeeper // the working directory kept between calls (MCP_EXEC_KEEP_CWD)
}

// jobEntry is the registry's own record of one job, guarded by
// registry.mu.
type jobEntry struct {
	elem         *list.Element // its place in registry.order; nil while not listed
	watchers     int           // waits, kills and executes under way on the job
	finishedSeen bool          // the limits on finished jobs were applied to it
}

// newRegistry returns an empty registry for one session.
func newRegistry(cfg *config) *registry {
	return &registry{cfg: cfg, jobs: map[string]*job{}, order: list.New(), entries: map[*job]*jobEntry{}, kept: map[string]*job{},
		changed: newBroadcast(), handing: map[string]*handoff{}}
}

// entryLocked is j's entry, made when it has none. Caller holds r.mu.
func (r *registry) entryLocked(j *job) *jobEntry {
	e := r.entries[j]
	if e == nil {
		e = &jobEntry{}
		r.entries[j] = e
	}
	return e
}

// dropEntryLocked forgets j's entry once j is neither listed nor watched.
// Caller holds r.mu.
func (r *registry) dropEntryLocked(j *job) {
	if e := r.entries[j]; e != nil && e.elem == nil && e.watchers == 0 {
		delete(r.entries, j)
	}
}

// start launches req as a new job and reports whether it started. A job that
// could not start comes back already finished, with start_error set, and is
// never registered. An error is a refusal before any process was made (by
// policy, the job limit, or no room for a process): the job log hears it.
func (r *registry) start(req startRequest) (*job, bool, error) {
	j, started, err := r.admitAndLaunch(req)
	if err != nil {
		r.logRefused(req, err)
	}
	return j, started, err
}

// admitAndLaunch is start without the job log's refusals.
func (r *registry) admitAndLaunch(req startRequest) (*job, bool, error) {
	dir, err := admit(r.cfg, req.argv, req.env, req.dir)
	if err != nil {
		return nil, false, err
	}
	req.dir = dir
	r.mu.Lock()
	if r.cfg.maxJobs > 0 && r.running.Load() >= int64(r.cfg.maxJobs) {
		// r.running also counts jobs forgotten (a cancelled call's) but not
		// yet reaped: the count the limit holds, named as it was.
		active, ids := int(r.running.Load()), r.runningIDsLocked()
		r.mu.Unlock()
		return nil, false, tooManyJobs{fmt.Sprintf("%v: %d jobs are running and MCP_EXEC_MAX_JOBS is %d (running: %s); wait for one or kill one first",
			errRefused, active, r.cfg.maxJobs, strings.Join(ids, ", ")), active}
	}
	if ok, active := r.everywhere.take(r.cfg.maxJobs); !ok {
		r.mu.Unlock()
		return nil, false, tooManyJobs{fmt.Sprintf("%v: %d jobs are running across all sessions and MCP_EXEC_MAX_JOBS is %d; wait for one or kill one first",
			errRefused, active, r.cfg.maxJobs), int(active)}
	}
	r.running.Add(1) // the slot is taken before the fork, so no two starts can both take the last
	id := r.newID(req)
	r.mu.Unlock()
	jobsStarted.Add(1)

	windowBytes, headBytes := max(r.cfg.maxOutputBytes, req.keepTail), max(r.cfg.keepHeadBytes, req.keepHead)
	j := &job{id: id, owner: r, policy: req.policy, done: make(chan struct{}), started: time.Now(), command: commandWords(req, nil),
		program: programOf(r.cfg, req), contract: req.contract, silent: req.silent, traceID: req.trace.id, treeReports: req.reportPrompts,
		lingers: req.lingers,
		stdout:  newWindow(windowBytes, headBytes), stderr: newWindow(windowBytes, headBytes)}
	err = j.launch(r.cfg, req, func(st exitStatus) { r.exited(j, st) })
	if err != nil {
		r.running.Add(-1)
		r.everywhere.give()
		jobsFailedToStart.Add(1)
		if errors.Is(err, errExhausted) { // refused before any fork: a tool error, not a start failure
			return nil, false, err
		}
		failed := outcome{state: stateError, exitCode: -1, startError: err.Error()}
		errors.As(err, &failed.startErrno)
		j.settle(failed) // no time limit is armed before the start returns
		close(j.done)
		// A job that never ran still starts and ends, once each; the
		// shell set's contract tells only its end.
		r.announceStart(j, req, !req.keepFailed)
		r.announceEnd(j)
		if req.keepFailed {
			r.mu.Lock()
			r.listLocked(j)
			r.mu.Unlock()
		}
		return j, false, nil
	}
	r.announceStart(j, req, true)
	r.mu.Lock()
	r.listLocked(j)
	r.mu.Unlock()
	if req.stdin != "" || req.closeStdin {
		j.stdin.feed(req.stdin, req.closeStdin, j.done)
	}
	return j, true, nil
}

// listLocked makes j waitable. Caller holds r.mu.
func (r *registry) listLocked(j *job) {
	r.jobs[j.id] = j
	r.entryLocked(j).elem = r.order.PushBack(j)
	if j.terminal() { // it ended before it was listed: publish could not expire it
		r.finishedLocked(j)
	}
}

// announceStart tells the observer, if set and tell, that j started, and
// then that it finished if that was published first; the job log, if any,
// hears both in the same order. req is what j was started with, its cwd
// admitted. It returns once both are told.
func (r *registry) announceStart(j *job, req startRequest, tell bool) {
	j.mu.Lock()
	j.startTold = true
	j.toTell = append(j.toTell, jobTiding{start: true, req: &req, event: tell})
	if j.state >= jobEnded {
		j.toTell = append(j.toTell, jobTiding{event: true}) // its end came first and waited for this
	}
	r.tellQueued(j) // unlocks j.mu
}

// announceEnd moves j to ended and tells the observer, if set, and the job
// log that j finished, once its start has been told: by itself, or, when
// announceStart is telling at that moment, by announceStart right after
// the start.
func (r *registry) announceEnd(j *job) {
	j.mu.Lock()
	j.state = jobEnded
	if j.startTold {
		j.toTell = append(j.toTell, jobTiding{event: true})
	}
	r.tellQueued(j) // unlocks j.mu
}

// tellQueued tells what j.toTell holds, in order, unless another
// goroutine is already telling it (it tells what is queued meanwhile too).
// Called with j.mu held; it returns with j.mu released, and never holds it
// while telling: the observer and the job log may read the job through
// its lock.
func (r *registry) tellQueued(j *job) {
	if j.telling {
		j.mu.Unlock()
		return
	}
	j.telling = true
	for len(j.toTell) > 0 {
		next := j.toTell[0]
		j.toTell = j.toTell[1:]
		j.mu.Unlock()
		r.tell(j, next)
		j.mu.Lock()
	}
	j.telling = false
	j.mu.Unlock()
}

// tell tells the job log and, for an event, the observer one announcement.
func (r *registry) tell(j *job, t jobTiding) {
	switch {
	case t.start && r.log != nil:
		r.log.started(r.session, j.id, *t.req, j.pid, j.started, j.maskRules)
	case !t.start && r.log != nil:
		r.log.ended(r.session, j)
	}
	event := "finished"
	if t.start {
		event = "started"
	}
	if t.event {
		r.event(j, event)
	}
}

// jobObserver hears each job's start and end (a session, which sends
// them as notifications).
type jobObserver interface {
	// jobEvent is called once with "started" and then once with
	// "finished" for each job that is not silent, outside every lock, on
	// the goroutine that tells them (the reaper's, a pump's, or the
	// starting call's); it must not block.
	jobEvent(j *job, event string)
}

// event tells the observer, if set, that j started or finished.
func (r *registry) event(j *job, event string) {
	if r.observer != nil && !j.silent {
		r.observer.jobEvent(j, event)
	}
}

// logRefused queues the job log's line for req, refused before a job
// existed.
func (r *registry) logRefused(req startRequest, err error) {
	if r.log != nil {
		r.log.refused(r.session, req, err, r.cfg.mask.rulesFor(mergeEnv(r.cfg.baseEnv, req.env)))
	}
}

// programOf is the program req asks to run: argv[0], or the shell.
func programOf(cfg *config, req startRequest) string {
	if req.argv != nil {
		return req.argv[0]
	}
	return cfg.shellSpelled
}

// newID names a new job: as req's contract names them, else the next
// number, or 128 random bits in hex. Caller holds r.mu.
func (r *registry) newID(req startRequest) string {
	r.nextID++
	if req.contract != nil {
		if id, ok := req.contract.jobID(r.nextID, r.randomIDs); ok {
			return id
		}
	}
	if r.randomIDs {
		return randomID()
	}
	return strconv.FormatUint(r.nextID, 10)
}

// runningIDsLocked lists the ids of the running jobs, oldest first. Caller
// holds r.mu.
func (r *registry) runningIDsLocked() []string {
	var ids []string
	for _, j := range r.runningLocked() {
		ids = append(ids, j.id)
	}
	for _, j := range r.lingering.order {
		ids = append(ids, j.id+" (lingering)")
	}
	return ids
}

// runningLocked lists the running jobs, oldest first. Caller holds r.mu.
func (r *registry) runningLocked() []*job {
	var running []*job
	for e := r.order.Front(); e != nil; e = e.Next() {
		if j := e.Value.(*job); !j.terminal() {
			running = append(running, j)
		}
	}
	return running
}

// exited runs on the reaper's goroutine when the job's shell has exited. The
// result must hold everything the shell wrote, so it is published once the
// pumps have taken it: at once when both pipes already reached EOF; by the
// last pump to reach it when no process holds either pipe any more (the
// common case: the exit and the pipes' EOF arrive together, and the pumps
// have not run yet); otherwise from a goroutine that waits for them to
// settle, bounded, since an orphan may hold a pipe for ever.
func (r *registry) exited(j *job, st exitStatus) {
	wall := time.Since(j.started) // now, not when the output has settled
	// One kill(2), and with a cgroup one read of its events, say whether
	// anything survived the shell; only then is /proc read, and not on
	// the reaper's goroutine.
	leftBehind := groupAlive(st.pid) || j.boxed().populated()
	// On process groups a setsid daemon leaves no trace in the group: a
	// job that stays in reach looks for it in /proc, off this goroutine.
	_, boxed := j.boxed().members()
	leftBehind = leftBehind || j.lingers && !boxed
	step := exitSettling
	switch {
	case !leftBehind && j.stdoutPump.settle.settled() && j.errPump.settle.settled():
		step = outputSettled
	case !leftBehind && j.onPipes && j.outGate == nil && j.stdoutPump.hungUp() && j.errPump.hungUp():
		// A pump held back for a streaming reader may wait long for room,
		// and a terminal's end is not a pipe's: those settle the bounded way.
		step = exitAwaitsPipes
	}
	if end, ok := j.readyToPublish(step, &jobEnd{st: st, wall: wall}); ok {
		r.publish(j, *end)
	}
	if step != exitSettling {
		return
	}
	go func() {
		end := jobEnd{st: st, wall: wall}
		if leftBehind {
			end.survivors = j.settledSurvivors(st.pid)
		}
		awaitSettled(settleMaxDuration, j.stdoutPump, j.errPump)
		if ready, ok := j.readyToPublish(outputSettled, &end); ok {
			r.publish(j, *ready)
		}
	}()
}

// publish makes the job's outcome final and wakes every waiter. It does not
// block: it may run on the reaper's goroutine.
func (r *registry) publish(j *job, end jobEnd) {
	st := end.st
	final := outcome{state: stateSuccess, exitCode: st.code, signal: st.signal, survivors: end.survivors, wall: end.wall,
		lingers: j.lingers && len(end.survivors) > 0}
	box := j.boxed()
	if r.cfg.usage {
		final.usage = &jobUsage{resourceUsage: st.usage, wall: end.wall}
		if j.treeReports {
			final.usage.cgroup = box.usage()
		}
	}
	final.oomKilled = box.oomKilled()
	box.ended()
	if st.code != 0 || st.signal != 0 {
		final.state = stateError
	}
	limit := j.settle(final)
	// Its slot is free before its result can be seen: a caller handed the
	// result may start the next job at once, and must not be refused for it.
	r.everywhere.give()
	jobsFinished.Add(1)
	if j.final.timedOut {
		jobsTimedOut.Add(1)
	}
	r.running.Add(-1)
	close(j.done)
	// A tree that may linger keeps its time limit (see limitTime).
	if limit != nil && !final.lingers {
		limit.Stop()
	}
	if j.tmpDir != "" {
		go j.removeTempUnlessUsed(st.pid) // j.pid may not be set yet: launch can still be returning
	}
	j.stdin.shut()
	r.announceEnd(j)
	r.mu.Lock()
	r.changed.announce()
	if r.jobs[j.id] == j {
		r.finishedLocked(j)
	}
	r.mu.Unlock()
}

// lingers reports whether j, delivered now, stays in reach: its start
// asked for it and its shell left processes alive. Caller holds r.mu;
// j is terminal, so j.final is read without j.mu.
func (r *registry) lingersLocked(j *job) bool {
	return j.final.lingers && !r.lingering.has(j)
}

// lingerLocked keeps j, just taken out of the waitable jobs, in reach as
// lingering: its id is found by lookups, it counts toward
// MCP_EXEC_MAX_JOBS again, and a goroutine watches its tree until it
// empties. Caller holds r.mu.
func (r *registry) lingerLocked(j *job) {
	r.lingering.add(j)
	// Its slot was given back when its shell's end was published; the
	// tree it left still runs, so it takes one again, limit or not.
	r.running.Add(1)
	r.everywhere.takeAnyway()
	go r.watchLingering(j)
}

// watchLingering moves j to lingering and waits until its tree is empty,
// then lets it go (see unlinger). It runs on its own goroutine, one per
// lingering job; a cgroup's events wake it, else it looks every
// lingerLookDuration.
func (r *registry) watchLingering(j *job) {
	if _, _, ok := j.beginLingering(); !ok {
		r.unlinger(j) // not ended: cannot happen for a delivered job; never leave it listed
		return
	}
	// On process groups a setsid daemon is linked to the job by nothing
	// but this memory of its pid.
	j.tree.remember(j.final.survivors)
	j.awaitTreeGone()
	r.unlinger(j)
}

// unlinger takes j out of the lingering jobs once its tree is empty or
// was killed: its slot is given back, its "emptied" event sent once, and
// what it holds let go when no call can find it any more.
func (r *registry) unlinger(j *job) {
	r.mu.Lock()
	if !r.lingering.remove(j) {
		r.mu.Unlock()
		return
	}
	r.running.Add(-1)
	r.everywhere.give()
	r.changed.announce()
	gone := r.goneLocked(j)
	r.mu.Unlock()
	if j.endLingering() {
		r.event(j, "emptied")
	}
	if gone {
		j.letGo()
	}
}

// isLingering reports whether j is lingering now: delivered, its tree
// still running, its id still valid.
func (r *registry) isLingering(j *job) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lingering.has(j)
}

// lingeringJobs lists the lingering jobs, oldest first.
func (r *registry) lingeringJobs() []*job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lingering.list()
}

// lookup finds a waitable job.
func (r *registry) lookup(id string) (*job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupLocked(id)
}

// runningJobs lists the running jobs, oldest first.
func (r *registry) runningJobs() []*job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runningLocked()
}

// lookupLocked is lookup for a caller that holds r.mu. An id it does not
// find is an expiredJob error when the job was forgotten for a reason, a
// deliveredJob error when its result went to an earlier call.
func (r *registry) lookupLocked(id string) (*job, error) {
	if j, ok := r.jobs[id]; ok {
		return j, nil
	}
	if j := r.lingering.find(id); j != nil {
		return j, nil
	}
	if why, ok := r.expired.why[id]; ok {
		return nil, expiredJob{id: clipText(id), why: why}
	}
	if _, ok := r.delivered.why[id]; ok {
		return nil, deliveredJob{id: clipText(id)}
	}
	return nil, fmt.Errorf("%w: %s", errUnknownJob, clipText(id))
}

// The delivery rule, in one place. A call holds a job from the moment it
// finds it in the registry, as the call is read (or, for a blocking execute,
// from the start) until it answers. A finished job's result goes to every call that holds it when it
// finishes — each wait blocked on it, the kill that ended it, a concurrent
// kill, its own blocking execute — and the job leaves the registry at the
// first of those deliveries. So a result may reach several calls, but never
// is lost for a call that was already waiting; calls that look the job up
// after it left get unknown job_id. A cancelled call delivers nothing: the
// job stays for the next caller.

// deliverLocked hands a finished job to a call that holds it, taking it out
// of the registry if it is still there, and reports whether it had finished.
// Caller holds r.mu.
// h records what the call took out, until its reply is on its way (nil:
// nothing to record). Caller holds r.mu.
func (r *registry) deliverLocked(j *job, h *handoff) bool {
	if !j.terminal() {
		return false
	}
	if r.removeLocked(j) {
		if r.lingersLocked(j) {
			r.lingerLocked(j)
		}
		r.delivered.add(j.id, "")
		if h.took(handedOut{r: r, j: j, h: h}) {
			r.handing[j.id] = h
		}
	}
	return true
}

// deliver is deliverLocked for a caller that does not hold r.mu.
func (r *registry) deliver(j *job, h *handoff) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliverLocked(j, h)
}

// handedOut is a job a call took out of r, for the call's handoff.
type handedOut struct {
	r *registry
	j *job
	h *handoff
}

// giveBack returns the job to its registry (undeliver).
func (t handedOut) giveBack() { t.r.undeliver(t.j) }

// handingEnded ends lookups' wait for the reply (endHanding).
func (t handedOut) handingEnded() { t.r.endHanding(t.j, t.h) }

// endHanding says h's reply, which carries j, is no longer on its way:
// lookups of j stop waiting for it.
func (r *registry) endHanding(j *job, h *handoff) {
	r.mu.Lock()
	if r.handing[j.id] == h {
		delete(r.handing, j.id)
		r.changed.announce()
	}
	gone := r.goneLocked(j)
	r.mu.Unlock()
	if gone {
		j.letGo()
	}
}

// goneLocked reports whether no call can find j any more: it is not
// listed, kept or on its way in a reply. Its spilled bytes can go then.
// Caller holds r.mu.
func (r *registry) goneLocked(j *job) bool {
	return r.jobs[j.id] != j && r.kept[j.id] != j && r.handing[j.id] == nil && !r.lingering.has(j)
}

// removeLocked takes j out of the registry and stops keeping its output; it
// reports false when j was no longer there. Caller holds r.mu.
func (r *registry) removeLocked(j *job) bool {
	if r.jobs[j.id] != j {
		return false
	}
	delete(r.jobs, j.id)
	e := r.entryLocked(j)
	r.order.Remove(e.elem)
	e.elem = nil
	r.dropEntryLocked(j)
	j.release()
	return true
}

// release stops keeping the output of a delivered job. Pumps still held open
// by orphans keep draining their pipes, so those processes never get SIGPIPE
// just because the result was collected. What the windows hold stays
// readable by the calls that hold the job.
func (j *job) release() {
	if j.stdoutPump != nil {
		j.stdoutPump.sink.Store(nil)
		j.errPump.sink.Store(nil)
	}
}

// undeliver takes back a delivery: the job returns to the registry, in its
// place among the others, and keeps its output again. For a result that
// could not be sent.
func (r *registry) undeliver(j *job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs[j.id] == j {
		return
	}
	// Given back before its tree was looked at: waitable again, not
	// lingering (its watch lets it go at once, the slot with it).
	if r.lingering.remove(j) {
		r.running.Add(-1)
		r.everywhere.give()
	}
	r.jobs[j.id] = j
	e := r.order.Back()
	for e != nil && e.Value.(*job).started.After(j.started) {
		e = e.Prev()
	}
	entry := r.entryLocked(j)
	if e == nil {
		entry.elem = r.order.PushFront(j)
	} else {
		entry.elem = r.order.InsertAfter(j, e)
	}
	if j.stdoutPump != nil {
		j.stdoutPump.sink.Store(j.stdout)
		j.errPump.sink.Store(j.stderr)
	}
}

// forget drops a job that nobody will ever collect (its execute was
// cancelled before the caller learned its id).
func (r *registry) forget(j *job) {
	r.mu.Lock()
	r.removeLocked(j)
	gone := r.goneLocked(j)
	r.mu.Unlock()
	if gone {
		j.letGo()
	}
}

// list returns the waitable jobs, oldest first.
func (r *registry) list() []*job {
	r.mu.Lock()
	defer r.mu.Unlock()
	jobs := make([]*job, 0, r.order.Len())
	for e := r.order.Front(); e != nil; e = e.Next() {
		jobs = append(jobs, e.Value.(*job))
	}
	return jobs
}

// lookupAll finds every job of ids under one lock: the jobs a call names,
// looked up in the order calls are read, so a call read before a job's
// result went out holds the job (see the delivery rule). One unknown id
// fails the whole lookup. With readKept, a delivered job that is kept
// (see keep) is found too.
// A job whose result an earlier call's reply is still carrying (see
// handoff) is waited for, at most handingLookupDuration: the reply either
// arrives, and the job was delivered, or it does not, and the job is back.
func (r *registry) lookupAll(ids []string, readKept bool) ([]*job, error) {
	deadline := time.Now().Add(handingLookupDuration)
	for {
		jobs, handing, err := r.tryLookupAll(ids, readKept, time.Now().Before(deadline))
		if handing == nil {
			return jobs, err
		}
		waitFor(handing, time.Until(deadline))
	}
}

// tryLookupAll is one try of lookupAll: when waitHanding is set and an id
// names a job still handing, it returns the channel that announces the
// next change instead; past the wait a handing job counts as delivered.
func (r *registry) tryLookupAll(ids []string, readKept, waitHanding bool) ([]*job, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, waitable := r.jobs[id]; waitHanding && !waitable && r.handing[id] != nil {
			return nil, r.changed.next(), nil
		}
	}
	jobs, err := r.lookupAllLocked(ids, readKept)
	return jobs, nil, err
}

// lookupAllLocked is one lookup of ids under r.mu.
func (r *registry) lookupAllLocked(ids []string, readKept bool) ([]*job, error) {
	jobs := make([]*job, len(ids))
	for i, id := range ids {
		j, err := r.lookupLocked(id)
		if kept := r.kept[id]; err != nil && kept != nil {
			if !readKept {
				return nil, fmt.Errorf("%w: %s (its result was already delivered, and is kept a while: status and output can still read it)", errUnknownJob, clipText(id))
			}
			j, err = kept, nil
		}
		if err != nil {
			return nil, err
		}
		jobs[i] = j
	}
	return jobs, nil
}

// awaitOptions say how long await blocks and what else ends it.
type awaitOptions struct {
	deadline     time.Time // zero: no deadline
	poll         bool      // look once, do not block
	yieldOnInput bool      // also return once a job waits for input
	// stopEarly, when set, is asked every stopEvery whether to return now
	// with nothing delivered (a wait's until).
	stopEarly earlyStopper
	stopEvery time.Duration
	// holdEnded, when set, keeps a finished job from delivery while it
	// reports true: the wait watches more than the shell (its tree).
	holdEnded func(*job) bool
	// ownJob: the call started the job and nobody else knows its id, so
	// a reply that never arrives forgets it (as a cancelled execute does)
	// rather than giving it back; its delivery is not recorded.
	ownJob bool
}

// await blocks until at least one of jobs, which the caller holds, has
// finished, the deadline passes, the call is cancelled or, if asked, a job
// is waiting for input (inputWanted). It delivers every finished one and
// returns them by id.
func (r *registry) await(w *waiter, jobs []*job, opts awaitOptions) (delivered map[string]*job, inputWanted bool, err error) {
	jobs = distinct(jobs) // a wait that names a job twice is one call under way on it
	r.watch(jobs, 1)
	defer r.watch(jobs, -1)
	nextLook := time.Now().Add(inputProbeInterval) // when to look for input next
	for {
		delivered, changed := r.deliverAmong(jobs, handoffOf(w, opts), heldEnded(jobs, opts.holdEnded))
		if len(delivered) > 0 || opts.poll {
			return delivered, false, nil
		}
		if !opts.deadline.IsZero() && !time.Now().Before(opts.deadline) {
			return nil, false, nil
		}
		if opts.stopEarly != nil && opts.stopEarly.stopNow() {
			return nil, false, nil
		}
		wake := opts.deadline
		if opts.stopEarly != nil {
			if next := time.Now().Add(opts.stopEvery); wake.IsZero() || next.Before(wake) {
				wake = next
			}
		}
		if opts.yieldOnInput || len(jobs) <= lookAtMostJobs {
			// The first look only starts the clock, so it waits an interval:
			// a job that ends at once costs no look at /proc.
			if now := time.Now(); !now.Before(nextLook) {
				if anyWaitingForInput(jobs) && opts.yieldOnInput {
					return nil, true, nil
				}
				nextLook = nextInputLook(jobs, now)
			}
			if wake.IsZero() || nextLook.Before(wake) {
				wake = nextLook
			}
		}
		if err := w.sleep(changed, wake, func() string { return describeWait(jobs, w.showOutput) }); err != nil {
			return nil, false, err
		}
	}
}

// earlyStopper ends a wait before any of its jobs finished.
type earlyStopper interface {
	// stopNow reports whether the wait returns now, with nothing
	// delivered. It is asked on the waiting call's goroutine, with no
	// lock held.
	stopNow() bool
}

// handoffOf is where await records what it delivers.
func handoffOf(w *waiter, opts awaitOptions) *handoff {
	if opts.ownJob {
		return nil
	}
	return w.handoff
}

// distinct returns jobs without repeats, in their first order.
func distinct(jobs []*job) []*job {
	seen := make(map[*job]bool, len(jobs))
	out := jobs[:0:0]
	for _, j := range jobs {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out
}

// watch counts the calls under way on each of jobs (delta +1 or -1).
func (r *registry) watch(jobs []*job, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobs {
		r.entryLocked(j).watchers += delta
		r.dropEntryLocked(j)
	}
}

// deliverAmong delivers the finished jobs among jobs under one lock and
// returns the channel that announces the next change; a job that finishes
// after the check closes it, so no end is missed.
func (r *registry) deliverAmong(jobs []*job, h *handoff, held map[*job]bool) (map[string]*job, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var delivered map[string]*job
	for _, j := range jobs {
		if !held[j] && r.deliverLocked(j, h) {
			if delivered == nil {
				delivered = map[string]*job{}
			}
			delivered[j.id] = j
		}
	}
	return delivered, r.changed.next()
}

// heldEnded is the finished jobs among jobs that hold asks to keep from
// delivery now; asked outside every lock, as hold may read /proc.
func heldEnded(jobs []*job, hold func(*job) bool) map[*job]bool {
	if hold == nil {
		return nil
	}
	held := map[*job]bool{}
	for _, j := range jobs {
		if j.terminal() && hold(j) {
			held[j] = true
		}
	}
	return held
}

// describeWait says what a blocked wait is waiting for, for progress.
func describeWait(jobs []*job, withOutput bool) string {
	for _, j := range jobs {
		if j.waitingForInputSeen() {
			return fmt.Sprintf("job %s is waiting for input on stdin", j.id)
		}
	}
	if len(jobs) == 1 {
		j := jobs[0]
		s := fmt.Sprintf("job %s running for %.0fs, %d bytes of output", j.id,
			time.Since(j.started).Seconds(), j.outputBytes())
		if withOutput {
			s += newestLines(j)
		}
		return s
	}
	return fmt.Sprintf("waiting for any of %d jobs to finish", len(jobs))
}

// Progress with output carries at most this many of a job's newest lines,
// and this many bytes of them.
const (
	progressLines = 3
	progressBytes = 400
)

// newestLines is ": " and the job's last lines of output (stdout, then
// stderr), bounded, or "" when it wrote nothing.
func newestLines(j *job) string {
	var b []byte
	for _, w := range []*window{j.stdout, j.stderr} {
		b = append(b, w.readTail(progressLines, progressBytes).data...)
	}
	if len(b) == 0 {
		return ""
	}
	if len(b) > progressBytes {
		b = b[len(b)-progressBytes:]
	}
	return ":\n" + strings.ToValidUTF8(string(b), "\uFFFD")
}

// outputBytes is how much the job has written to stdout and stderr.
func (j *job) outputBytes() int64 {
	_, out := j.stdout.stats()
	_, errb := j.stderr.stats()
	return out + errb
}

// input writes data to j's stdin and closes it when asked.
func (j *job) input(w *waiter, data string, closeAfter bool) error {
	err := j.stdin.write(w.ctx, data, closeAfter, j.done)
	switch {
	case errors.Is(err, errNotRunning):
		return fmt.Errorf("job %s is %w; collect its result with wait", j.id, errNotRunning)
	case errors.Is(err, errAlreadyClosed):
		return fmt.Errorf("job %s: stdin is %w; it was closed by an earlier close:true", j.id, errAlreadyClosed)
	case err != nil:
		return fmt.Errorf("job %s: %w", j.id, err)
	}
	return nil
}

// finishedLocked applies the limits on finished jobs to j, which has just
// finished and is listed: MCP_EXEC_MAX_FINISHED now, MCP_EXEC_JOB_TTL later.
// Caller holds r.mu.
func (r *registry) finishedLocked(j *job) {
	e := r.entryLocked(j)
	if e.finishedSeen {
		return // both publish and start may see it finish
	}
	e.finishedSeen = true
	r.expireBeyondLocked(r.cfg.maxFinished)
	if ttl := r.cfg.jobTTL; ttl > 0 {
		time.AfterFunc(ttl, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.expireLocked(j, fmt.Sprintf("finished and not collected within MCP_EXEC_JOB_TTL (%v)", ttl))
		})
	}
}

// expireBeyondLocked forgets the oldest finished, uncollected jobs beyond
// most (0: no limit). Caller holds r.mu.
func (r *registry) expireBeyondLocked(most int) {
	if most <= 0 {
		return
	}
	var finished []*job
	for e := r.order.Front(); e != nil; e = e.Next() {
		if j := e.Value.(*job); j.terminal() {
			finished = append(finished, j)
		}
	}
	for _, j := range finished[:max(len(finished)-most, 0)] {
		r.expireLocked(j, fmt.Sprintf("more than MCP_EXEC_MAX_FINISHED (%d) finished jobs waited to be collected; the oldest go first", most))
	}
}

// expireLocked forgets a finished job nobody collected, and remembers why
// for a while. Caller holds r.mu.
func (r *registry) expireLocked(j *job, why string) {
	if j.terminal() && r.removeLocked(j) {
		r.expired.add(j.id, why)
		// Closing files is a system call: not under r.mu.
		go j.letGo()
	}
}

// keep lets status and output read a delivered job whose result was cut,
// or left bytes out, for d; then it is forgotten.
func (r *registry) keep(j *job, d time.Duration) {
	if d <= 0 {
		return
	}
	r.mu.Lock()
	r.kept[j.id] = j
	r.mu.Unlock()
	time.AfterFunc(d, func() {
		r.mu.Lock()
		if r.kept[j.id] == j {
			delete(r.kept, j.id)
		}
		gone := r.goneLocked(j)
		r.mu.Unlock()
		if gone {
			j.letGo()
		}
	})
}
