package main

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// Job states as they appear on the wire.
const (
	stateRunning = "running"
	stateSuccess = "success"
	stateError   = "error"
)

// outcome is how a job ended; it is fixed before job.done is closed.
type outcome struct {
	state      string
	exitCode   int
	signal     syscall.Signal
	startError string
	startErrno syscall.Errno // the system's error number of startError, 0 when none applies
	wall       time.Duration // from the start to the shell's exit
	timedOut   bool          // its time limit ended it
	usage      *jobUsage     // nil unless MCP_EXEC_USAGE is on
	survivors  []procInfo    // processes of its group or session alive when the shell exited
}

// jobUsage is what a job used: its shell's wait4 usage and its wall time.
type jobUsage struct {
	resourceUsage
	wall time.Duration // from start to the shell's exit
}

// job is one command run as its own process group.
type job struct {
	id     string
	pid    int // also the process group id
	policy capturePolicy

	stdout, stderr      *window
	stdoutPump, errPump *pump
	outGate, errGate    *readGate // hold the pumps back for a streaming reader; nil unless asked for
	stdin               *stdinPipe
	started             time.Time

	done     chan struct{}              // closed once final is set; never reopened
	final    outcome                    // written once, before done is closed
	timedOut atomic.Bool                // its time limit fired before it ended
	killSent atomic.Bool                // a kill was sent on a caller's behalf (the shell set's kill, or its time limit)
	limit    atomic.Pointer[time.Timer] // the time limit's timer, stopped when the job ends

	tmpDir   string        // the private TMPDIR of a sandboxed job; "" for none
	command  string        // what was asked to run, its first characters, for job events
	program  string        // the program asked for (argv[0], or the shell), for the shell set's events
	set      string        // the tool set that started it: how its events are told
	silent   bool          // it sends no events
	stdinIno uint64        // inode of the stdin pipe, to see a process blocked reading it
	inputMu  sync.Mutex    // guards sighting
	sighting inputSighting // the last time a process was seen blocked reading stdin

	// eventMu orders the job's two events: guards announced and endHeld.
	// The end can be published before start returns, so whichever comes
	// second tells both. Events are sent under it: sending never blocks.
	eventMu   sync.Mutex
	announced bool // its start was told
	endHeld   bool // its end came before its start was told

	elem         *list.Element // place in registry.order; guarded by registry.mu
	watchers     int           // waits, kills and executes under way on the job; guarded by registry.mu
	finishedSeen bool          // the limits on finished jobs were applied to it; guarded by registry.mu
}

// runtime is how long the job ran: until its shell exited, or until now.
func (j *job) runtime() time.Duration {
	if j.terminal() {
		return j.final.wall
	}
	return time.Since(j.started)
}

// terminal reports whether the job has finished.
func (j *job) terminal() bool { return isClosed(j.done) }

// outcome returns the job's state; for a running job only state is set.
func (j *job) outcome() outcome {
	if j.terminal() {
		return j.final
	}
	return outcome{state: stateRunning}
}

// startRequest is what execute asks for.
type startRequest struct {
	command    string   // run as $SHELL -c command, unless argv is set
	argv       []string // run argv[0] (looked up in the job's PATH) without a shell
	dir        string
	env        map[string]string
	stdin      string
	closeStdin bool
	policy     capturePolicy
	streamed   bool     // a reader takes the output as it comes: the pumps wait for it
	tty        *ttySpec // run on a pseudo-terminal of this size; nil: on pipes

	// For the other tool sets' contracts; zero values are the jobs set's.
	set        string                                    // the tool set asking: how events are told
	silent     bool                                      // send no events: the caller blocks on it anyway
	name       func(seq uint64, unguessable bool) string // mints the job id; nil: the next number
	unsetEnv   []string                                  // variables removed from the job's environment
	keepHead   int                                       // first bytes of each stream kept, at least
	keepTail   int                                       // last bytes of each stream kept, at least
	keepFailed bool                                      // a job that cannot start stays listed, finished
}

// registry holds the jobs of one client session. Jobs of different sessions
// never see each other; only the reaper is shared.
type registry struct {
	cfg *config

	mu    sync.Mutex      // guards every field below, and job.elem
	jobs  map[string]*job // waitable jobs: running, or finished and not delivered
	order *list.List      // the same jobs, oldest first
	kept  map[string]*job // delivered jobs whose result was cut: readable a while longer
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
	// onEvent, when set, hears each job's start and end, once each; it
	// must not block (publish calls it on the reaper's goroutine).
	onEvent func(j *job, event string)
	expired expiredJobs // why recently forgotten jobs were, for their ids' errors
	nextID  uint64
	changed broadcast // announced whenever a job finishes
}

// newRegistry returns an empty registry for one session.
func newRegistry(cfg *config) *registry {
	return &registry{cfg: cfg, jobs: map[string]*job{}, order: list.New(), kept: map[string]*job{}, changed: newBroadcast()}
}

// start launches req as a new job and reports whether it started. A job that
// could not start comes back already finished, with start_error set, and is
// never registered.
func (r *registry) start(req startRequest) (*job, bool, error) {
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
	j := &job{id: id, policy: req.policy, done: make(chan struct{}), started: time.Now(), command: commandWords(req),
		program: programOf(r.cfg, req), set: req.set, silent: req.silent,
		stdout: newWindow(windowBytes, headBytes), stderr: newWindow(windowBytes, headBytes)}
	err = j.launch(r.cfg, req, func(st exitStatus) { r.exited(j, st) })
	if err != nil {
		r.running.Add(-1)
		r.everywhere.give()
		jobsFailedToStart.Add(1)
		if errors.Is(err, errExhausted) { // refused before any fork: a tool error, not a start failure
			return nil, false, err
		}
		j.final = outcome{state: stateError, exitCode: -1, startError: err.Error()}
		errors.As(err, &j.final.startErrno)
		close(j.done)
		// A job that never ran still starts and ends, once each; the
		// shell set's contract tells only its end.
		r.announceStart(j, !req.keepFailed)
		r.announceEnd(j)
		if req.keepFailed {
			r.mu.Lock()
			r.listLocked(j)
			r.mu.Unlock()
		}
		return j, false, nil
	}
	r.announceStart(j, true)
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
	j.elem = r.order.PushBack(j)
	if j.terminal() { // it ended before it was listed: publish could not expire it
		r.finishedLocked(j)
	}
}

// announceStart tells onEvent, if set and tell, that j started, and then
// that it finished if that was published first.
func (r *registry) announceStart(j *job, tell bool) {
	j.eventMu.Lock()
	defer j.eventMu.Unlock()
	j.announced = true
	if tell {
		r.event(j, "started")
	}
	if j.endHeld {
		r.event(j, "finished")
	}
}

// announceEnd tells onEvent, if set, that j finished, once its start has
// been told.
func (r *registry) announceEnd(j *job) {
	j.eventMu.Lock()
	defer j.eventMu.Unlock()
	if !j.announced {
		j.endHeld = true // announceStart tells it
		return
	}
	r.event(j, "finished")
}

// event tells onEvent, if set, that j started or finished.
func (r *registry) event(j *job, event string) {
	if r.onEvent != nil && !j.silent {
		r.onEvent(j, event)
	}
}

// programOf is the program req asks to run: argv[0], or the shell.
func programOf(cfg *config, req startRequest) string {
	if req.argv != nil {
		return req.argv[0]
	}
	return cfg.shellSpelled
}

// commandWords is the first characters of what req asks to run, for job
// events: never a byte of what the job writes.
func commandWords(req startRequest) string {
	s := req.command
	if req.argv != nil {
		s = strings.Join(req.argv, " ")
	}
	return firstRunes(s, commandEventRunes)
}

// commandEventRunes is how much of a command a job event tells.
const commandEventRunes = 120

// firstRunes is s cut to its first most characters.
func firstRunes(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	return string([]rune(s)[:most])
}

// newID names a new job: as req's tool set names them, else the next
// number, or 128 random bits in hex. Caller holds r.mu.
func (r *registry) newID(req startRequest) string {
	r.nextID++
	if req.name != nil {
		return req.name(r.nextID, r.randomIDs)
	}
	if r.randomIDs {
		return randomID()
	}
	return strconv.FormatUint(r.nextID, 10)
}

// randomID is 128 random bits in hex: unguessable job and session ids.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	return hex.EncodeToString(b[:])
}

// runningIDsLocked lists the ids of the running jobs, oldest first. Caller
// holds r.mu.
func (r *registry) runningIDsLocked() []string {
	var ids []string
	for _, j := range r.runningLocked() {
		ids = append(ids, j.id)
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
// pumps have taken it: at once when both pipes already reached EOF (the
// common case), otherwise from a goroutine that waits for them to settle.
func (r *registry) exited(j *job, st exitStatus) {
	wall := time.Since(j.started) // now, not when the output has settled
	// One kill(2) says whether anything survived the shell; only then is
	// /proc read, and not on the reaper's goroutine.
	leftBehind := groupAlive(st.pid)
	if !leftBehind && j.stdoutPump.settle.settled() && j.errPump.settle.settled() {
		r.publish(j, st, wall, nil)
		return
	}
	go func() {
		var survivors []procInfo
		if leftBehind {
			survivors = sessionMembers(st.pid)
		}
		awaitSettled(settleMaxDuration, j.stdoutPump, j.errPump)
		r.publish(j, st, wall, survivors)
	}()
}

// publish makes the job's outcome final and wakes every waiter. It does not
// block: it may run on the reaper's goroutine.
func (r *registry) publish(j *job, st exitStatus, wall time.Duration, survivors []procInfo) {
	j.final = outcome{state: stateSuccess, exitCode: st.code, signal: st.signal, timedOut: j.timedOut.Load(), survivors: survivors, wall: wall}
	if r.cfg.usage {
		j.final.usage = &jobUsage{st.usage, wall}
	}
	if st.code != 0 || st.signal != 0 {
		j.final.state = stateError
	}
	// Its slot is free before its result can be seen: a caller handed the
	// result may start the next job at once, and must not be refused for it.
	r.everywhere.give()
	jobsFinished.Add(1)
	if j.final.timedOut {
		jobsTimedOut.Add(1)
	}
	r.running.Add(-1)
	close(j.done)
	if t := j.limit.Load(); t != nil {
		t.Stop()
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
// find is an expiredJob error when the job was forgotten for a reason.
func (r *registry) lookupLocked(id string) (*job, error) {
	if j, ok := r.jobs[id]; ok {
		return j, nil
	}
	if why, ok := r.expired.why[id]; ok {
		return nil, expiredJob{id: clipText(id), why: why}
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
func (r *registry) deliverLocked(j *job) bool {
	if !j.terminal() {
		return false
	}
	r.removeLocked(j)
	return true
}

// deliver is deliverLocked for a caller that does not hold r.mu.
func (r *registry) deliver(j *job) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliverLocked(j)
}

// removeLocked takes j out of the registry and stops keeping its output; it
// reports false when j was no longer there. Caller holds r.mu.
func (r *registry) removeLocked(j *job) bool {
	if r.jobs[j.id] != j {
		return false
	}
	delete(r.jobs, j.id)
	r.order.Remove(j.elem)
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
	r.jobs[j.id] = j
	e := r.order.Back()
	for e != nil && e.Value.(*job).started.After(j.started) {
		e = e.Prev()
	}
	if e == nil {
		j.elem = r.order.PushFront(j)
	} else {
		j.elem = r.order.InsertAfter(j, e)
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
	defer r.mu.Unlock()
	r.removeLocked(j)
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
// because its result was cut is found too.
func (r *registry) lookupAll(ids []string, readKept bool) ([]*job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	jobs := make([]*job, len(ids))
	for i, id := range ids {
		j, err := r.lookupLocked(id)
		if kept := r.kept[id]; err != nil && kept != nil {
			if !readKept {
				return nil, fmt.Errorf("%w: %s (its result was already delivered, cut to fit the reply; status and output can still read it)", errUnknownJob, clipText(id))
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
	stopEarly func() bool
	stopEvery time.Duration
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
		delivered, changed := r.deliverAmong(jobs)
		if len(delivered) > 0 || opts.poll {
			return delivered, false, nil
		}
		if !opts.deadline.IsZero() && !time.Now().Before(opts.deadline) {
			return nil, false, nil
		}
		if opts.stopEarly != nil && opts.stopEarly() {
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
				nextLook = now.Add(inputProbeInterval)
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
		j.watchers += delta
	}
}

// deliverAmong delivers the finished jobs among jobs under one lock and
// returns the channel that announces the next change; a job that finishes
// after the check closes it, so no end is missed.
func (r *registry) deliverAmong(jobs []*job) (map[string]*job, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var delivered map[string]*job
	for _, j := range jobs {
		if r.deliverLocked(j) {
			if delivered == nil {
				delivered = map[string]*job{}
			}
			delivered[j.id] = j
		}
	}
	return delivered, r.changed.next()
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
