// The job log (MCP_EXEC_JOB_LOG): one JSON line when a job starts, when
// it ends and when a policy refuses one, for a log pipeline to answer who
// ran what, where, and how it ended. It never carries a byte of a job's
// output.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// jobLogQueueLines is how many lines may wait for the writer. Past it a
// line is dropped and counted, never waited for: lines are queued on the
// reaper's goroutine, which must not block on a slow disk or a full pipe.
const jobLogQueueLines = 4096

// Most characters of a cwd and of a refusal's reason a line carries: a
// line stays short whatever a caller sends.
const (
	jobLogCwdRunes    = 1024
	jobLogReasonRunes = 300
)

// jobLog writes the job log's lines, each with one write, in the order
// they were queued, from one goroutine of its own: so lines of concurrent
// jobs never interleave, and queueing one is never a write or a system
// call (it may happen where a lock is held, or on the reaper's goroutine).
// A nil *jobLog is the log switched off: every method does nothing.
type jobLog struct {
	out       io.Writer
	serverCwd string        // where a job without a cwd runs
	queue     chan []byte   // carries whole lines to the writing goroutine; bounded, never waited on
	pending   atomic.Int64  // lines queued and not yet written
	open      atomic.Int64  // jobs whose start was queued and whose end was not
	dropped   atomic.Int64  // lines dropped since the last written, the queue being full
	wrote     chan struct{} // 1-buffered: a line was written
}

// openJobLog opens the job log setting names (see parseJobLog): nil when
// it is off, stderr, or a file opened once for appending (created with
// mode 0600, closed on exec so no job inherits it). An error names the
// setting: it stops the server at startup.
func openJobLog(setting string) (*jobLog, error) {
	var out io.Writer
	switch setting {
	case "":
		return nil, nil
	case jobLogStderr:
		out = os.Stderr
	default:
		f, err := os.OpenFile(setting, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("MCP_EXEC_JOB_LOG=%s: %w", setting, unwrapPathError(err))
		}
		out = f
	}
	return newJobLog(out), nil
}

// newJobLog starts a job log that writes to out.
func newJobLog(out io.Writer) *jobLog {
	cwd, _ := os.Getwd() // "" if it cannot be named: a line then leaves cwd out
	l := &jobLog{out: out, serverCwd: cwd, queue: make(chan []byte, jobLogQueueLines), wrote: make(chan struct{}, 1)}
	go l.write()
	return l
}

// unwrapPathError is err without the *os.PathError's repeat of the path the
// message names already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot open it for appending: %w", pe.Err)
	}
	return err
}

// write writes each queued line with one write, for the life of the
// process. A failed write loses that line only: the log never stops a job.
func (l *jobLog) write() {
	for line := range l.queue {
		if n := l.dropped.Swap(0); n > 0 {
			_, _ = l.out.Write(l.line(jobLogDropped{Time: logTime(time.Now()), Event: "dropped", Lines: n}))
		}
		_, _ = l.out.Write(line)
		l.pending.Add(-1)
		nudge(l.wrote)
	}
}

// add queues v as one line.
func (l *jobLog) add(v any) { l.queueLine(l.line(v)) }

// queueLine queues a line, or counts it dropped when the queue is full.
func (l *jobLog) queueLine(line []byte) {
	l.pending.Add(1)
	if !offer(l.queue, line) {
		l.pending.Add(-1)
		l.dropped.Add(1)
	}
}

// line is v as one JSON line. The encoding escapes every control
// character, so a newline in a command, or a whole forged log line in it,
// stays inside its JSON string.
func (l *jobLog) line(v any) []byte {
	b, err := marshal(v)
	if err != nil { // cannot happen: strings and numbers only
		b = []byte(`{"event":"unencodable"}`)
	}
	return append(b, '\n')
}

// flush waits, at most d, for every job whose start was logged to have its
// end logged and for every line queued to be written: at shutdown, before
// the process exits.
func (l *jobLog) flush(d time.Duration) {
	if l == nil {
		return
	}
	deadline := time.Now().Add(d)
	for l.open.Load() > 0 || l.pending.Load() > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		waitFor(l.wrote, left) // each line written wakes it: an end queued is written next
	}
}

// The lines, their fields in the order they are written.
type (
	jobLogStart struct {
		Time    string   `json:"time"`
		Event   string   `json:"event"`
		Session string   `json:"session"`
		JobID   string   `json:"job_id"`
		Command string   `json:"command,omitempty"`
		Argv    []string `json:"argv,omitempty"`
		Cwd     string   `json:"cwd,omitempty"`
		Pid     int      `json:"pid,omitempty"`
		TraceID string   `json:"trace_id,omitempty"`
	}
	jobLogEnd struct {
		Time        string  `json:"time"`
		Event       string  `json:"event"`
		Session     string  `json:"session"`
		JobID       string  `json:"job_id"`
		ExitCode    int     `json:"exit_code"`
		Signal      string  `json:"signal,omitempty"`
		TimedOut    bool    `json:"timed_out,omitempty"`
		StartError  string  `json:"start_error,omitempty"`
		DurationMs  float64 `json:"duration_ms"`
		StdoutBytes int64   `json:"stdout_bytes"`
		StderrBytes int64   `json:"stderr_bytes"`
		TraceID     string  `json:"trace_id,omitempty"`
	}
	jobLogRefused struct {
		Time    string   `json:"time"`
		Event   string   `json:"event"`
		Session string   `json:"session"`
		Command string   `json:"command,omitempty"`
		Argv    []string `json:"argv,omitempty"`
		Cwd     string   `json:"cwd,omitempty"`
		Setting string   `json:"setting,omitempty"`
		Reason  string   `json:"reason"`
		TraceID string   `json:"trace_id,omitempty"`
	}
	jobLogDropped struct {
		Time  string `json:"time"`
		Event string `json:"event"`
		Lines int64  `json:"lines"`
	}
)

// started queues the start line of job id in session, run as req asks in
// the cwd it was admitted to, as pid; its command masked with rules.
func (l *jobLog) started(session, id string, req startRequest, pid int, at time.Time, rules *maskRules) {
	command, argv := loggedCommand(req, rules)
	l.open.Add(1)
	l.add(jobLogStart{Time: logTime(at), Event: "start", Session: session, JobID: id,
		Command: command, Argv: argv, Cwd: l.loggedCwd(req.dir), Pid: pid, TraceID: req.trace.id})
}

// ended queues the end line of job j in session, which has finished. Its
// time is when the job's shell exited (for a job that never ran, when it
// was to start), whenever the line is queued.
func (l *jobLog) ended(session string, j *job) {
	o := j.final
	_, out := j.stdout.stats()
	_, errBytes := j.stderr.stats()
	line := jobLogEnd{Time: logTime(j.started.Add(o.wall)), Event: "end", Session: session, JobID: j.id,
		ExitCode: o.exitCode, TimedOut: o.timedOut, StartError: o.startError,
		DurationMs: float64(o.wall.Microseconds()) / 1e3, StdoutBytes: out, StderrBytes: errBytes, TraceID: j.traceID}
	if o.signal > 0 {
		line.Signal = signalName(o.signal)
	}
	// Queued before the job stops counting as open: flush sees an open job
	// or a pending line throughout, never neither while the end is unwritten.
	l.add(line)
	l.open.Add(-1)
}

// refused queues the line of a job req asked for that was refused before
// it existed: by the setting that refused it, when one did; its command
// masked with rules.
func (l *jobLog) refused(session string, req startRequest, err error, rules *maskRules) {
	command, argv := loggedCommand(req, rules)
	l.add(jobLogRefused{Time: logTime(time.Now()), Event: "refused", Session: session, Command: command, Argv: argv,
		Cwd: l.loggedCwd(req.dir), Setting: refusingSetting(err), Reason: firstRunes(err.Error(), jobLogReasonRunes), TraceID: req.trace.id})
}

// loggedCwd is the directory a job runs in, as the log shows it.
func (l *jobLog) loggedCwd(dir string) string {
	if dir == "" {
		dir = l.serverCwd
	}
	return firstRunes(dir, jobLogCwdRunes)
}

// loggedCommand is what req asks to run as the log shows it: the command,
// or the argv, masked with rules, cut to their first commandEventRunes
// characters in all.
func loggedCommand(req startRequest, rules *maskRules) (string, []string) {
	if req.argv == nil {
		return firstRunes(maskString(rules, req.command), commandEventRunes), nil
	}
	argv := make([]string, 0, len(req.argv))
	left := commandEventRunes
	for _, arg := range req.argv {
		if left <= 0 {
			break
		}
		cut := firstRunes(maskString(rules, arg), left)
		argv = append(argv, cut)
		left -= len([]rune(cut))
	}
	return "", argv
}

// logTime is t in RFC 3339, UTC, with milliseconds.
func logTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
