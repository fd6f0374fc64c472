package main

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Sentinels that tool handlers map to replies. Everything a tool reports as a
// tool error wraps errInvalid, errUnknownJob, errNotRunning or
// errAlreadyClosed; errCancelled becomes JSON-RPC error -32800.
var (
	errCancelled     = errors.New("request cancelled")
	errInvalid       = errors.New("invalid argument")
	errUnknownJob    = errors.New("unknown job_id")
	errNotRunning    = errors.New("no longer running")
	errAlreadyClosed = errors.New("already closed")
)

// Job states as they appear on the wire.
const (
	stateRunning = "running"
	stateSuccess = "success"
	stateError   = "error"
)

const (
	// settleMaxDuration bounds how long a finished job waits for its pipes to
	// hand over what the direct child wrote, when an orphan keeps them busy.
	settleMaxDuration = 500 * time.Millisecond
	// settleStuckDuration bounds the wait for a pump's first read after the
	// shell exited (a pump can be slow to run under load, never this slow).
	settleStuckDuration = 30 * time.Second
	// teardownGraceDuration is how long TERM gets before KILL when the server
	// tears a job down (cancelled execute, shutdown).
	teardownGraceDuration = 2 * time.Second
	// readBufferBytes is the size of one pipe read.
	readBufferBytes = 64 << 10
)

// outcome is how a job ended; it is fixed before job.done is closed.
type outcome struct {
	state      string
	exitCode   int
	signal     syscall.Signal
	startError string
}

// job is one command run as its own process group.
type job struct {
	id     string
	pid    int // also the process group id
	policy capturePolicy

	stdout, stderr      *window
	stdoutPump, errPump *pump
	stdin               *stdinPipe
	started             time.Time

	done  chan struct{} // closed once final is set; never reopened
	final outcome       // written once, before done is closed

	elem     *list.Element // place in registry.order; guarded by registry.mu
	watchers int           // waits, kills and executes under way on the job; guarded by registry.mu
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
	command    string
	dir        string
	env        map[string]string
	stdin      string
	closeStdin bool
	policy     capturePolicy
}

// registry holds the jobs of one client session. Jobs of different sessions
// never see each other; only the reaper is shared.
type registry struct {
	cfg *config

	mu      sync.Mutex      // guards every field below, and job.elem
	jobs    map[string]*job // waitable jobs: running, or finished and not delivered
	order   *list.List      // the same jobs, oldest first
	nextID  uint64
	changed broadcast // announced whenever a job finishes
}

// broadcast wakes every waiter at once. A waiter takes the current channel
// and selects on it; announce closes it and puts a fresh one in its place.
// Both calls must be made under the lock of the state the waiters watch, so
// a waiter that checked that state and then took the channel cannot miss
// the change that follows.
type broadcast struct {
	ch chan struct{} // closed at the next announce
}

func newBroadcast() broadcast { return broadcast{ch: make(chan struct{})} }

// next returns the channel the next announce closes. Caller holds the lock.
func (b *broadcast) next() <-chan struct{} { return b.ch }

// announce wakes everyone waiting on next. Caller holds the lock.
func (b *broadcast) announce() {
	close(b.ch)
	b.ch = make(chan struct{})
}

// newRegistry returns an empty registry for one session.
func newRegistry(cfg *config) *registry {
	return &registry{cfg: cfg, jobs: map[string]*job{}, order: list.New(), changed: newBroadcast()}
}

// start launches req as a new job and reports whether it started. A job that
// could not start comes back already finished, with start_error set, and is
// never registered.
func (r *registry) start(req startRequest) (*job, bool) {
	r.mu.Lock()
	r.nextID++
	id := strconv.FormatUint(r.nextID, 10)
	r.mu.Unlock()

	j := &job{id: id, policy: req.policy, done: make(chan struct{}), started: time.Now(),
		stdout: newWindow(r.cfg.maxOutputBytes), stderr: newWindow(r.cfg.maxOutputBytes)}
	err := j.launch(r.cfg, req, func(st exitStatus) { r.exited(j, st) })
	if err != nil {
		j.final = outcome{state: stateError, exitCode: -1, startError: err.Error()}
		close(j.done)
		return j, false
	}
	r.mu.Lock()
	r.jobs[id] = j
	j.elem = r.order.PushBack(j)
	r.mu.Unlock()
	if req.stdin != "" || req.closeStdin {
		j.stdin.feed(req.stdin, req.closeStdin, j.done)
	}
	return j, true
}

// launch creates the job's pipes and starts `$SHELL -c command` with them.
// onExit runs on the reaper's goroutine once the shell has exited, possibly
// before launch returns; everything it touches exists before the fork.
func (j *job) launch(cfg *config, req startRequest, onExit func(exitStatus)) error {
	if req.dir != "" {
		if err := checkDir(req.dir); err != nil {
			return err
		}
	}
	in, out, errp, err := makeJobPipes()
	if err != nil {
		return err
	}
	j.stdin = newStdinPipe(in.ours)
	j.stdoutPump = startPump(out.ours, j.stdout)
	j.errPump = startPump(errp.ours, j.stderr)
	pid, err := spawnNotify(spawnSpec{
		path:  cfg.shell,
		argv:  []string{cfg.shell, "-c", req.command},
		dir:   req.dir,
		env:   mergeEnv(cfg.baseEnv, req.env),
		files: []uintptr{uintptr(in.child), uintptr(out.child), uintptr(errp.child)},
	}, onExit)
	for _, p := range []jobPipe{in, out, errp} {
		_ = syscall.Close(p.child) // best effort: the child has its copy; ours would hide EOF
	}
	if err != nil {
		closeAll([]*os.File{in.ours, out.ours, errp.ours}) // the pumps end at the close
		return fmt.Errorf("start %s: %w", cfg.shell, err)
	}
	j.pid = pid
	return nil
}

// jobPipe is one of a job's stdio pipes: the child's end is a plain blocking
// descriptor handed to the child and then closed; ours is non-blocking and
// lives in the runtime poller, so waiting on it parks a goroutine, not a thread.
type jobPipe struct {
	child int
	ours  *os.File
}

// makeJobPipes creates the stdin, stdout and stderr pipes of one job.
func makeJobPipes() (in, out, errp jobPipe, err error) {
	var made []jobPipe
	for i := 0; i < 3; i++ {
		p, err := makeJobPipe(i == 0)
		if err != nil {
			for _, m := range made {
				_ = syscall.Close(m.child) // best effort: cleaning up a failed start
				_ = m.ours.Close()
			}
			return in, out, errp, fmt.Errorf("create pipe: %w", err)
		}
		made = append(made, p)
	}
	return made[0], made[1], made[2], nil
}

// makeJobPipe creates one pipe; childReads says which end the child gets.
func makeJobPipe(childReads bool) (jobPipe, error) {
	fds, err := pipeCloseOnExec()
	if err != nil {
		return jobPipe{}, err
	}
	child, ours := fds[1], fds[0]
	// The pipes keep the system's default size. Enlarging them measured no
	// faster, and for a user without CAP_SYS_RESOURCE every enlarged pipe
	// counts against pipe-user-pages-soft: past it, every new pipe of that
	// user, the jobs' own pipelines included, is cut to two pages.
	if childReads {
		child, ours = fds[0], fds[1]
	}
	if err := syscall.SetNonblock(ours, true); err != nil {
		_ = syscall.Close(fds[0]) // best effort: cleaning up
		_ = syscall.Close(fds[1])
		return jobPipe{}, err
	}
	return jobPipe{child: child, ours: os.NewFile(uintptr(ours), "job pipe")}, nil
}

// checkDir explains a working directory that cannot be used.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cwd %q: %w", dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("cwd %q: not a directory", dir)
	}
	return nil
}

// closeAll closes every non-nil file.
func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close() // best effort: nothing useful to do on failure
		}
	}
}

// mergeEnv layers overlay on base; later keys replace earlier ones.
func mergeEnv(base []string, overlay map[string]string) []string {
	if len(overlay) == 0 {
		return base
	}
	env := make([]string, 0, len(base)+len(overlay))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := overlay[k]; !replaced {
			env = append(env, kv)
		}
	}
	for k, v := range overlay {
		env = append(env, k+"="+v)
	}
	return env
}

// exited runs on the reaper's goroutine when the job's shell has exited. The
// result must hold everything the shell wrote, so it is published once the
// pumps have taken it: at once when both pipes already reached EOF (the
// common case), otherwise from a goroutine that waits for them to settle.
func (r *registry) exited(j *job, st exitStatus) {
	if j.stdoutPump.drained() && j.errPump.drained() {
		r.publish(j, st)
		return
	}
	go func() {
		settlePumps(settleMaxDuration, j.stdoutPump, j.errPump)
		r.publish(j, st)
	}()
}

// publish makes the job's outcome final and wakes every waiter. It does not
// block: it may run on the reaper's goroutine.
func (r *registry) publish(j *job, st exitStatus) {
	j.final = outcome{state: stateSuccess, exitCode: st.code, signal: st.signal}
	if st.code != 0 || st.signal != 0 {
		j.final.state = stateError
	}
	close(j.done)
	j.stdin.shut()
	r.mu.Lock()
	r.changed.announce()
	r.mu.Unlock()
}

// lookup finds a waitable job.
func (r *registry) lookup(id string) (*job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupLocked(id)
}

// lookupLocked is lookup for a caller that holds r.mu.
func (r *registry) lookupLocked(id string) (*job, error) {
	if j, ok := r.jobs[id]; ok {
		return j, nil
	}
	return nil, fmt.Errorf("%w: %s", errUnknownJob, id)
}

// The delivery rule, in one place. A call holds a job from the moment it
// finds it in the registry (or, for a blocking execute, starts it) until it
// answers. A finished job's result goes to every call that holds it when it
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

// waitAny blocks until at least one of ids has finished, the deadline passes
// (zero deadline: never) or the call is cancelled, and returns the finished
// jobs it delivered, by id. Every id is looked up before anything is
// delivered: a call that fails on an unknown id must not swallow a result.
func (r *registry) waitAny(w *waiter, ids []string, deadline time.Time, poll bool) (map[string]*job, error) {
	r.mu.Lock()
	jobs := make([]*job, len(ids))
	for i, id := range ids {
		j, err := r.lookupLocked(id)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		jobs[i] = j
	}
	r.mu.Unlock()
	return r.await(w, jobs, deadline, poll)
}

// await blocks until at least one of jobs, which the caller holds, has
// finished, the deadline passes (zero: never) or the call is cancelled. It
// delivers every finished one and returns them by id.
func (r *registry) await(w *waiter, jobs []*job, deadline time.Time, poll bool) (map[string]*job, error) {
	jobs = distinct(jobs) // a wait that names a job twice is one call under way on it
	r.watch(jobs, 1)
	defer r.watch(jobs, -1)
	for {
		delivered, changed := r.deliverAmong(jobs)
		if len(delivered) > 0 || poll {
			return delivered, nil
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil, nil
		}
		if err := w.sleep(changed, deadline, func() string { return describeWait(jobs) }); err != nil {
			return nil, err
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
func describeWait(jobs []*job) string {
	if len(jobs) == 1 {
		j := jobs[0]
		return fmt.Sprintf("job %s running for %.0fs, %d bytes of output", j.id,
			time.Since(j.started).Seconds(), j.outputBytes())
	}
	return fmt.Sprintf("waiting for any of %d jobs to finish", len(jobs))
}

// outputBytes is how much the job has written to stdout and stderr.
func (j *job) outputBytes() int64 {
	_, out := j.stdout.stats()
	_, errb := j.stderr.stats()
	return out + errb
}

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

// kill signals job id's process group per plan and waits for observed death:
// the direct child reaped and no process left in the group. A job whose
// tree died is delivered to the kill (see the delivery rule); the caller
// reports its result.
func (r *registry) kill(w *waiter, id string, plan killPlan) (*job, killOutcome, error) {
	j, err := r.lookup(id)
	if err != nil {
		return nil, killOutcome{}, err
	}
	r.watch([]*job{j}, 1)
	defer r.watch([]*job{j}, -1)
	var out killOutcome
	if j.terminal() && !groupAlive(j.pid) {
		out.terminated, out.alreadyTerminated = true, true
	} else {
		for i, sig := range plan.signals {
			out.sent, out.escalated = sig, i > 0
			if err := j.signal(sig); err != nil {
				return nil, killOutcome{}, err
			}
			if plan.wait <= 0 { // no waiting: look once, and escalate at once
				if out.terminated = j.terminal() && !groupAlive(j.pid); out.terminated {
					break
				}
				continue
			}
			dead, err := j.awaitDeath(w, time.Now().Add(plan.wait))
			if err != nil {
				return nil, killOutcome{}, err
			}
			if out.terminated = dead; dead {
				break
			}
		}
	}
	if !out.terminated {
		out.survivors = describeSurvivors(j)
		return j, out, nil
	}
	r.deliver(j) // the kill held the job: its result is ours even if a wait took it too
	return j, out, nil
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

// input writes data to the job's stdin and closes it when asked.
func (r *registry) input(w *waiter, id, data string, closeAfter bool) (*job, error) {
	j, err := r.lookup(id)
	if err != nil {
		return nil, err
	}
	err = j.stdin.write(w.ctx, data, closeAfter, j.done)
	switch {
	case errors.Is(err, errNotRunning):
		return nil, fmt.Errorf("job %s is %w; collect its result with wait", id, errNotRunning)
	case errors.Is(err, errAlreadyClosed):
		return nil, fmt.Errorf("job %s: stdin is %w; it was closed by an earlier close:true", id, errAlreadyClosed)
	case err != nil:
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return j, nil
}

// stdinPipe is the server's end of a job's stdin.
type stdinPipe struct {
	f *os.File
	// token is 1-buffered and holds one value while nobody writes: taking it
	// is the right to write to or close f. Writers select on it, so a wait
	// for the pipe can be cancelled.
	token  chan struct{}
	closed bool // guarded by holding token
}

func newStdinPipe(f *os.File) *stdinPipe {
	s := &stdinPipe{f: f, token: make(chan struct{}, 1)}
	s.token <- struct{}{}
	return s
}

// pastDeadline aborts a pending pipe write at once.
var pastDeadline = time.Unix(1, 0)

// feed writes execute's stdin argument in the background. It takes the token
// before returning, so later input calls queue behind it.
func (s *stdinPipe) feed(data string, closeAfter bool, done <-chan struct{}) {
	<-s.token
	go func() {
		defer func() { s.token <- struct{}{} }()
		_ = s.writeHeld(context.Background(), data, closeAfter, done) // nobody to tell: errors surface as a closed or dead pipe later
	}()
}

// write waits for its turn, then writes data and closes the pipe if asked.
// A cancelled ctx aborts the wait or the write; done closing means the job
// finished and nothing more can be written.
func (s *stdinPipe) write(ctx context.Context, data string, closeAfter bool, done <-chan struct{}) error {
	select {
	case <-s.token:
	case <-ctx.Done():
		return errCancelled
	case <-done:
		if ctx.Err() != nil {
			return errCancelled // a cancel that raced with the job's end wins
		}
		return errNotRunning
	}
	defer func() { s.token <- struct{}{} }()
	return s.writeHeld(ctx, data, closeAfter, done)
}

// writeHeld is write for a caller that holds the token.
func (s *stdinPipe) writeHeld(ctx context.Context, data string, closeAfter bool, done <-chan struct{}) error {
	if ctx.Err() != nil {
		return errCancelled
	}
	if isClosed(done) {
		return errNotRunning
	}
	if s.closed {
		return errAlreadyClosed
	}
	if data != "" {
		if err := s.writeCancellable(ctx, data); err != nil {
			if ctx.Err() != nil {
				return errCancelled // checked first: shutdown both cancels and ends jobs
			}
			if isClosed(done) {
				return errNotRunning
			}
			if errors.Is(err, syscall.EPIPE) {
				return errors.New("nothing reads its stdin any more (broken pipe)")
			}
			return fmt.Errorf("write stdin: %w", err)
		}
	}
	if closeAfter {
		s.closed = true
		_ = s.f.Close() // best effort: the reader may be gone already
	}
	return nil
}

// writeCancellable writes data, aborting through a past write deadline when
// ctx ends; the deadline is reset afterwards so the pipe stays usable.
func (s *stdinPipe) writeCancellable(ctx context.Context, data string) error {
	aborted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = s.f.SetWriteDeadline(pastDeadline) // best effort: the file may be closed
		close(aborted)
	})
	_, err := io.WriteString(s.f, data)
	if !stop() {
		<-aborted
		_ = s.f.SetWriteDeadline(time.Time{}) // best effort, as above
	}
	return err
}

// shut closes stdin once the job has finished, without blocking: a pending
// write is aborted, and if a writer still holds the token, closing waits for
// it on another goroutine.
func (s *stdinPipe) shut() {
	_ = s.f.SetWriteDeadline(pastDeadline) // best effort: the file may be closed
	closeHeld := func() {
		if !s.closed {
			s.closed = true
			_ = s.f.Close() // best effort: nobody reads it any more
		}
		s.token <- struct{}{}
	}
	select {
	case <-s.token:
		closeHeld()
	default:
		go func() {
			<-s.token
			closeHeld()
		}()
	}
}

// readBuffers recycles pipe read buffers; a pump holds one only while data is
// flowing, so idle jobs cost no buffer memory.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, readBufferBytes)
	return &b
}}

// pump copies one output pipe into a window until EOF.
type pump struct {
	f    *os.File
	sink atomic.Pointer[window] // where bytes go; nil once the job is delivered

	exited     atomic.Bool   // the job's direct child has exited
	looked     chan struct{} // closed once a read has run that began after exited was set
	lookOnce   sync.Once
	settled    chan struct{} // closed once the pipe was seen empty after exit, or at EOF
	settleOnce sync.Once
}

// startPump starts copying f into w.
func startPump(f *os.File, w *window) *pump {
	p := &pump{f: f, looked: make(chan struct{}), settled: make(chan struct{})}
	p.sink.Store(w)
	go p.run()
	return p
}

func (p *pump) markLooked()  { p.lookOnce.Do(func() { close(p.looked) }) }
func (p *pump) markSettled() { p.settleOnce.Do(func() { close(p.settled) }) }

// drained reports whether the pump has reached EOF, or has seen its pipe
// empty after the job's shell exited.
func (p *pump) drained() bool { return isClosed(p.settled) }

// run reads until EOF or error, then closes the pipe.
func (p *pump) run() {
	defer p.markSettled()
	defer p.f.Close()
	rc, err := p.f.SyscallConn()
	if err != nil {
		logf("pump: %v", err)
		return
	}
	for p.pass(rc) {
	}
}

// pass performs one read and reports whether to go on. The read callback
// runs inside the poller. A window that has grown big is read into
// directly; otherwise the bytes go through a pooled buffer. On EAGAIN the
// callback keeps no buffer and, if the child has exited, notes that
// everything the child wrote has been taken.
func (p *pump) pass(rc syscall.RawConn) bool {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		// exited is read before the read: an empty pipe proves everything
		// the shell wrote was taken only if the shell had already exited.
		exited := p.exited.Load()
		n, rerr = p.readInto(int(fd))
		if exited {
			p.markLooked()
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			if exited {
				p.markSettled()
			}
			return false
		}
		return true
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// settle's wake-up: look at the pipe again with no deadline.
		_ = p.f.SetReadDeadline(time.Time{}) // cannot fail on an open pipe
		return true
	case err != nil, rerr != nil, n <= 0:
		return false // closed, read error, or EOF
	}
	return true
}

// readInto reads once from fd into the sink window: straight into its
// storage when it offers some, else through a pooled buffer.
func (p *pump) readInto(fd int) (int, error) {
	w := p.sink.Load()
	if w != nil {
		if span := w.reserve(readBufferBytes); span != nil {
			n, err := readRetrying(fd, span)
			w.commit(max(n, 0))
			return n, err
		}
	}
	buf := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(buf)
	n, err := readRetrying(fd, *buf)
	if n > 0 && w != nil {
		_, _ = w.Write((*buf)[:n]) // never fails
	}
	return n, err
}

// readRetrying is read(2) retried on EINTR.
func readRetrying(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// settlePumps waits until each pump has taken everything the job's direct
// child wrote before exiting: its pipe was seen empty once after the exit,
// or reached EOF. The limit bounds only how long an orphan that keeps a pipe
// busy can hold the result back, so it starts at a pump's first read after
// the exit: a pump the scheduler has not run yet (a thousand jobs ending
// at once on a slow machine) is waited for, or the result would lose bytes.
// The read deadline wakes a pump parked on an empty pipe so it looks again.
func settlePumps(limit time.Duration, pumps ...*pump) {
	for _, p := range pumps {
		p.exited.Store(true)
		_ = p.f.SetReadDeadline(pastDeadline) // fails only when already closed: then settled is closed too
	}
	// A pump that has not run at all for this long is broken, not busy;
	// the result is not held back for ever.
	stuck := time.NewTimer(settleStuckDuration)
	defer stuck.Stop()
	var deadline time.Time
	for _, p := range pumps {
		select {
		case <-p.settled:
			continue
		case <-p.looked:
		case <-stuck.C:
			logf("a job's output pump did not run for %v after its shell exited; its result may miss output", settleStuckDuration)
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(limit)
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-p.settled:
		case <-timer.C:
		}
		timer.Stop()
	}
}
