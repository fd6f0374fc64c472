// What one job is: the process group a request started, its output
// windows and pumps, its outcome, and what the request asked of it.

package main

import (
	"container/list"
	"sync"
	"sync/atomic"
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

	// endsLeft counts down the exit and the two pumps' ends; the one that
	// brings it to zero calls atEnd, which exited sets (before its count)
	// only when both pipes have hung up. See registry.exited.
	endsLeft atomic.Int32
	atEnd    func()
	onPipes  bool // its output comes through pipes, not a terminal

	tmpDir   string        // the private TMPDIR of a sandboxed job; "" for none
	command  string        // what was asked to run, its first characters, for job events
	program  string        // the program asked for (argv[0], or the shell), for the shell set's events
	contract *jobContract  // what the caller that started it asked of it; nil: the defaults
	silent   bool          // it sends no events
	inputEnd inputEnd      // its stdin pipe or terminal, to see a process blocked reading it
	tree     jobTree       // what links processes outside its group to it
	inputMu  sync.Mutex    // guards sighting
	sighting inputSighting // the last time a process was seen blocked reading input
	// prompts: 1.2's reports of input wanted apply (waitingForInput):
	// its request asked for them (reportPrompts), or it runs on a
	// terminal, which no 1.0 client asks for.
	prompts bool

	// eventMu orders the job's two events, and its two job log lines:
	// guards announced and endHeld. The end can be published before start
	// returns, so whichever comes second tells both. Events are sent and
	// lines queued under it: neither ever blocks or writes.
	eventMu   sync.Mutex
	announced bool // its start was told
	endHeld   bool // its end came before its start was told

	elem         *list.Element // place in registry.order; guarded by registry.mu
	watchers     int           // waits, kills and executes under way on the job; guarded by registry.mu
	finishedSeen bool          // the limits on finished jobs were applied to it; guarded by registry.mu
}

// endSeen counts one of the job's ends (see endsLeft); the last one runs
// atEnd.
func (j *job) endSeen() {
	if j.endsLeft.Add(-1) == 0 {
		j.atEnd()
	}
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
	contract   *jobContract // how the job is named and told; nil: numbered, never told
	silent     bool         // send no events: the caller blocks on it anyway
	unsetEnv   []string     // variables removed from the job's environment
	keepHead   int          // first bytes of each stream kept, at least
	keepTail   int          // last bytes of each stream kept, at least
	keepFailed bool         // a job that cannot start stays listed, finished
	cwdReport  *cwdReport   // a command's shell writes here where it ended; nil: not asked
	// reportPrompts: a process silent at a prompt for a second counts as
	// waiting for input from one look (see waitingForInputAtOnce), and
	// the job's replies say so. A job on a terminal has it regardless.
	reportPrompts bool
}

// jobContract is what one tool contract asks of every job it starts: how
// the job's id is minted and how its start and end are told. The registry
// calls both and knows nothing else of the contract; a contract compares
// jobs' contracts by identity to tell its own jobs from others'. Its
// functions must not block: events are made on the reaper's goroutine.
type jobContract struct {
	name   func(seq uint64, unguessable bool) string              // mints an id; nil: the next number
	events func(cfg *config, j *job, event string) map[string]any // notifications/job params; nil, or a nil result: none sent
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
