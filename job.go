// What one job is: the process group a request started, its output
// windows and pumps, its outcome, and what the request asked of it.

package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
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
	oomKilled  bool          // the kernel killed a process of its cgroup for memory
	lingers    bool          // its tree outlived its shell and it asked to stay in reach (job.lingers)
}

// jobUsage is what a job used: its shell's wait4 usage and its wall time.
type jobUsage struct {
	resourceUsage
	wall   time.Duration // from start to the shell's exit
	cgroup *cgroupUsage  // what its cgroup counted; nil on process groups
}

// job is one command run as its own process group. The fields above mu
// are set before the job is shared (pid before launch returns) and never
// change after, except through their own types' locks.
type job struct {
	id     string
	pid    int // also the process group id
	policy capturePolicy
	owner  jobPublisher // the registry that started it: it publishes the end

	stdout, stderr      *window
	stdoutPump, errPump *pump
	outGate, errGate    *readGate // hold the pumps back for a streaming reader; nil unless asked for
	stdin               *stdinPipe
	started             time.Time
	onPipes             bool // its output comes through pipes, not a terminal

	tmpDir   string      // the private TMPDIR of a sandboxed job; "" for none
	command  string      // what was asked to run, its first characters, for job events
	program  string      // the program asked for (argv[0], or the shell), for the shell set's events
	contract jobContract // what the caller that started it asked of it; nil: the defaults
	silent   bool        // it sends no events
	traceID  string      // the trace id its call carried, for the job log's end line; "" for none
	inputEnd inputEnd    // its stdin pipe or terminal, to see a process blocked reading it
	tree     jobTree     // what links processes outside its group to it
	// maskRules: what its output, command and log lines are masked with;
	// nil: nothing. Set in launch, before its pumps run.
	maskRules *maskRules
	box       jobBox // its cgroup, or nothing beyond its group (see boxed); set before its spawn
	// treeReports: its status and running wait entries carry procs, and
	// its usage what its cgroup counted (1.3, under the agent profile).
	treeReports bool
	// prompts: 1.2's reports of input wanted apply (waitingForInput):
	// its request asked for them (reportPrompts), or it runs on a
	// terminal, which no 1.0 client asks for.
	prompts bool
	// lingers: once its result is delivered, its id stays in reach for as
	// long as processes of its tree run (see registry.linger).
	lingers bool

	// done is the broadcast of the end: closed once final is set, never
	// reopened. final is written once, under mu, before done closes, and
	// read without a lock once it has.
	done  chan struct{}
	final outcome

	// mu guards every field below. It is never held together with
	// registry.mu, and never while blocking, making a system call or
	// calling out: the start and end events and job log lines are queued
	// under it (toTell) and told outside it, one teller at a time, which
	// keeps a job's start told before its end.
	mu        sync.Mutex
	state     jobState
	startTold bool          // its start was queued to be told (events, job log)
	toTell    []jobTiding   // announcements decided and not told yet, in order
	telling   bool          // a goroutine is telling toTell; others only queue
	pipesOpen int           // its pumps that have not stopped reading (2 at launch)
	pending   *jobEnd       // the exit, held for both pumps' ends; see readyToPublish
	timedOut  bool          // its time limit fired before it ended
	killSent  bool          // a kill was sent on a caller's behalf (the shell set's kill, or its time limit)
	limit     *time.Timer   // the time limit's timer, stopped when the job ends
	limitAt   time.Time     // when its time limit fires; zero: none
	graceOf   time.Duration // the time limit's grace before KILL
	sighting  inputSighting // the last time a process was seen blocked reading input
}

// jobPublisher publishes a job's end: makes its outcome final and wakes
// its waiters (the registry that started it).
type jobPublisher interface {
	// publish is called once per job, when readyToPublish says so, on
	// the reaper's goroutine, a pump's, or the one that waited for the
	// output to settle; it must not block.
	publish(j *job, end jobEnd)
}

// jobState is how far a job has come from its launch to its result. Its
// states only move forward:
//
//	running  launched (or being launched); its shell has not been reaped.
//	exited   its shell was reaped; its pumps are still taking what the
//	         shell wrote, so the result waits.
//	settled  final is set and done closed: waiters see the result; its
//	         end is not told yet.
//	ended    its end may be told: at once if its start was (startTold),
//	         else right after the start, by its announcement.
//	lingering its result was delivered while processes of its tree
//	         still ran, and it lingers (see job.lingers): its id stays
//	         valid until the tree is empty.
//	emptied  it lingered, and its tree is empty now (or was killed).
//
// Transitions: running → exited (the reaper; see registry.exited);
// exited → settled (publish, once readyToPublish says the output is
// all in); settled → ended (publish, after waking the waiters); ended →
// lingering (beginLingering, once the registry kept it in reach at its
// delivery); lingering → emptied (endLingering). A job that could not
// start goes running → settled → ended at once. Whether a call took the
// result (delivery) is the registry's to know, in its entry for the job,
// not a state of the job.
type jobState int

const (
	jobRunning jobState = iota
	jobExited
	jobSettled
	jobEnded
	jobLingering
	jobEmptied
)

// jobTiding is one of a job's two announcements waiting to be told: its
// start (with the request, for the job log) or its end; event says
// the registry's observer hears it too.
type jobTiding struct {
	start bool
	req   *startRequest
	event bool
}

// jobEnd is what a job's outcome is made from once its shell exited.
type jobEnd struct {
	st        exitStatus
	wall      time.Duration // from the start to the shell's exit
	survivors []procInfo    // processes of its group or session alive then
}

// endStep is one of the things a job's publication waits for.
type endStep int

const (
	// pipeEnded: one of its pumps stopped reading (EOF, error or close).
	pipeEnded endStep = iota
	// exitAwaitsPipes: its shell exited and no process holds its pipes:
	// the output is all in once both pumps have ended.
	exitAwaitsPipes
	// exitSettling: its shell exited; a bounded wait for the pumps runs
	// and ends in outputSettled.
	exitSettling
	// outputSettled: its shell exited and its output is all in.
	outputSettled
)

// readyToPublish is the one place that decides when a job's result is
// published: it records step (end is the exit, for the exit's steps) and
// returns the end to publish, exactly once over the job's life, when the
// step completes what publication waits for.
func (j *job) readyToPublish(step endStep, end *jobEnd) (*jobEnd, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch step {
	case pipeEnded:
		j.pipesOpen--
		if j.pipesOpen > 0 || j.pending == nil {
			return nil, false
		}
		end, j.pending = j.pending, nil
		return end, true
	case exitAwaitsPipes:
		j.state = jobExited
		if j.pipesOpen > 0 {
			j.pending = end // the last pump's end publishes it
			return nil, false
		}
		return end, true
	case exitSettling:
		j.state = jobExited
		return nil, false
	}
	j.state = jobExited
	return end, true
}

// pumpEnded hears that one of the job's pumps stopped reading; the last
// one may complete its result. It runs on the pump's goroutine.
func (j *job) pumpEnded() {
	if end, ok := j.readyToPublish(pipeEnded, nil); ok {
		j.owner.publish(j, *end)
	}
}

// settle sets the job's final outcome (its timedOut from the time limit)
// and moves it to settled; the caller closes done next. It returns the
// time limit's timer, for the caller to stop outside the lock.
func (j *job) settle(final outcome) *time.Timer {
	j.mu.Lock()
	defer j.mu.Unlock()
	final.timedOut = j.timedOut
	j.final, j.state = final, jobSettled
	return j.limit
}

// markTimedOut records that the time limit fired, unless the job already
// ended; it reports whether it did.
func (j *job) markTimedOut() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state >= jobSettled {
		return false
	}
	j.timedOut = true
	return true
}

// beginLingering moves the ended job to lingering and returns when its
// time limit fires (zero: none) and that limit's grace; it reports false
// when it was neither ended nor lingering already.
func (j *job) beginLingering() (limitAt time.Time, grace time.Duration, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch j.state {
	case jobLingering: // given back and delivered again: it still lingers
	case jobEnded:
		j.state = jobLingering
	default:
		return time.Time{}, 0, false
	}
	return j.limitAt, j.graceOf, true
}

// endLingering moves a lingering job to emptied; it reports whether it
// was lingering, so that only one caller tells its tree emptied.
func (j *job) endLingering() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state != jobLingering {
		return false
	}
	j.state = jobEmptied
	return true
}

// hitTimeLimit reports whether the job's time limit fired before it ended.
func (j *job) hitTimeLimit() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.timedOut
}

// markKillSent records that a kill was sent on a caller's behalf.
func (j *job) markKillSent() {
	j.mu.Lock()
	j.killSent = true
	j.mu.Unlock()
}

// killWasSent reports whether a kill was sent on a caller's behalf.
func (j *job) killWasSent() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.killSent
}

// setLimit keeps t, the time limit's timer, for the end to stop, with
// when it fires and its grace, for a lingering tree to keep; it
// reports false when the job has already settled, and t must be stopped
// by the caller.
func (j *job) setLimit(t *time.Timer, at time.Time, grace time.Duration) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state >= jobSettled {
		return false
	}
	j.limit, j.limitAt, j.graceOf = t, at, grace
	return true
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

// commandEventRunes is how much of a command a job event, or the job log,
// tells.
const commandEventRunes = 120

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

	// What a tool contract asks beyond the defaults; the zero values are
	// 1.0's.
	contract   jobContract // how the job is named and told; nil: numbered, never told
	silent     bool        // send no events: the caller blocks on it anyway
	unsetEnv   []string    // variables removed from the job's environment
	keepHead   int         // first bytes of each stream kept, at least
	keepTail   int         // last bytes of each stream kept, at least
	keepFailed bool        // a job that cannot start stays listed, finished
	cwdReport  *cwdReport  // a command's shell writes here where it ended; nil: not asked
	trace      jobTrace    // the call's W3C trace context: variables, and the job log's trace_id
	// lingers: the job stays in reach after its delivery while its tree
	// runs (job.lingers).
	lingers bool
	// reportPrompts: a process silent at a prompt for a second counts as
	// waiting for input from one look (see waitingForInputAtOnce), and
	// the job's replies say so. A job on a terminal has it regardless.
	reportPrompts bool
}

// jobContract is what one tool contract asks of every job it starts: how
// the job's id is minted and how its start and end are told. The registry
// and the session call it and know nothing else of the contract; a
// contract compares jobs' contracts with its own value to tell its jobs
// from others'. Neither method may block: events are made on the
// goroutine that tells them (the reaper's, a pump's, or the starting
// call's), outside every lock.
type jobContract interface {
	// jobID mints the id of the seq'th job of a session (unguessable:
	// the transport lets clients try each other's ids); ok false leaves
	// the registry's own (the number, or random bits).
	jobID(seq uint64, unguessable bool) (id string, ok bool)
	// jobEvent is the notifications/job params telling that j "started"
	// or "finished"; nil: none is sent.
	jobEvent(cfg *config, j *job, event string) map[string]any
}

// inputSighting is a process seen blocked reading its job's input: which,
// since when, and how often it had run then.
type inputSighting struct {
	pid   int
	runs  uint64
	since time.Time
}

// Job states as they appear on the wire.
const (
	stateRunning = "running"
	stateSuccess = "success"
	stateError   = "error"
)

// dropSpill gives up what the job's windows spilled to disk, and their
// files: for a job no call can find any more.
func (j *job) dropSpill() {
	j.stdout.dropSpill()
	j.stderr.dropSpill()
}

// boxed is what keeps the job's processes together beyond its group:
// its cgroup, or an empty box for a job that never got one.
func (j *job) boxed() jobBox {
	if j.box == nil {
		return groupBox{}
	}
	return j.box
}

// letGo gives back what a forgotten job holds outside the process: its
// spill files and its cgroup (removed once empty). Not under a lock: it
// makes system calls.
func (j *job) letGo() {
	j.dropSpill()
	j.boxed().release()
}

// boxMembers lists the processes in j's cgroup now, zombies included;
// nil on process groups.
func (j *job) boxMembers() []procInfo {
	pids, ok := j.boxed().members()
	if !ok {
		return nil
	}
	var procs []procInfo
	for _, pid := range pids {
		if p, there := procNow(pid); there {
			procs = append(procs, p)
		}
	}
	return procs
}

// snapshotMembers is the job's tree read at one instant: its cgroup's
// members with the cgroup frozen, and what left it for another cgroup;
// ok false on process groups. A cgroup that would not freeze is read
// until two readings agree (a few at most).
func (j *job) snapshotMembers() ([]procInfo, bool) {
	box := j.boxed()
	if _, ok := box.members(); !ok {
		return nil, false
	}
	procs, exact := box.snapshot()
	for i := 0; !exact && i < 4; i++ {
		again, frozen := box.snapshot()
		exact = frozen || treeShape(again) == treeShape(procs)
		procs = again
	}
	return append(procs, box.escaped()...), true
}

// The tree a shell left is read once it has settled: nothing started,
// exec'd or exited for treeQuietDuration, looked at every
// treeLookDuration, for at most treeSettleMaxDuration after the exit.
const (
	treeQuietDuration     = 100 * time.Millisecond
	treeLookDuration      = 20 * time.Millisecond
	treeSettleMaxDuration = time.Second
)

// settledSurvivors is what the job's shell (pid) left alive, read once
// the tree has settled (see treeQuietDuration), so that a process caught
// in its exec or its exit is not named by its passing name or at all.
// With a cgroup the last reading is taken at one instant (snapshot). It
// blocks up to treeSettleMaxDuration: never on the reaper's goroutine.
func (j *job) settledSurvivors(pid int) []procInfo {
	deadline := time.Now().Add(treeSettleMaxDuration)
	last := treeShape(j.treeMembers(pid))
	quietSince := time.Now()
	for last != "" && time.Now().Before(deadline) && time.Since(quietSince) < treeQuietDuration {
		// No event says a tree has gone quiet: it is looked at.
		time.Sleep(treeLookDuration)
		if now := treeShape(j.treeMembers(pid)); now != last {
			last, quietSince = now, time.Now()
		}
	}
	if last == "" {
		return nil
	}
	var left []procInfo
	members, ok := j.snapshotMembers()
	if !ok {
		members = j.treeMembers(pid)
	}
	for _, p := range members {
		if !p.dying() {
			left = append(left, p)
		}
	}
	return left
}

// treeMembers is the job's processes now, dying ones included: its
// cgroup's, or its group's and session's.
func (j *job) treeMembers(pid int) []procInfo {
	if _, ok := j.boxed().members(); ok {
		return j.boxMembers()
	}
	members := groupSurvivors(pid)
	if j.lingers {
		// A job that stays in reach claims its orphans (a setsid daemon
		// has left its group and session).
		for _, p := range orphansOf(j.tree.mark, ticksAt(j.started)) {
			if !slices.ContainsFunc(members, func(m procInfo) bool { return m.pid == p.pid }) {
				members = append(members, p)
			}
		}
		slices.SortFunc(members, func(a, b procInfo) int { return a.pid - b.pid })
	}
	return members
}

// treeShape is members as one string that changes when one of them
// starts, execs, exits or ends: "" for none.
func treeShape(members []procInfo) string {
	var b strings.Builder
	for _, p := range members {
		fmt.Fprintf(&b, "%d/%d/%s/%t;", p.pid, p.start, p.comm, p.dying())
	}
	return b.String()
}

// procCount is how many processes the job has now: those in its cgroup,
// or, on process groups, its group's and session's live members.
func (j *job) procCount() int {
	if pids, ok := j.boxed().members(); ok {
		return len(pids)
	}
	n := 0
	for _, p := range groupSurvivors(j.pid) {
		if p.state != "Z" {
			n++
		}
	}
	return n
}
