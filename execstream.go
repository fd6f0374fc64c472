package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// The gateway's streamed exec (POST /exec over HTTP) runs one command and
// sends its output as events while it runs: "stdout" and "stderr" chunks
// as they come, "dropped" when the job wrote faster than the stream was
// read, then one "exit". It is a tool contract like the others: the same
// arguments machinery, policy and lifecycle; only its answer is a stream.

const (
	execPollInterval = 20 * time.Millisecond // how often a stream looks for new output, besides being woken
	execDrainQuiet   = 2 * time.Second       // how long a finished job's pipes may stay quiet before the stream ends
	execEventChunk   = 64 << 10              // the most output bytes one event carries
)

// execStreamArgs is the body of a streamed exec.
type execStreamArgs struct {
	Command        string            `arg:"command"`
	Argv           []string          `arg:"argv"`
	Cwd            string            `arg:"cwd"`
	Env            map[string]string `arg:"env"`
	Stdin          string            `arg:"stdin"`
	TimeoutSeconds *seconds          `arg:"timeout_seconds"`  // 0 or absent: the configured time limit
	MaxOutputBytes *byteCount        `arg:"max_output_bytes"` // 0 or absent: all
}

// execStreamParams are execStreamArgs' arguments, read once.
var execStreamParams = paramsOf(reflect.TypeFor[execStreamArgs]())

// execSink is where a streamed exec's events go: the transport's response.
type execSink interface {
	begin()                           // the command was accepted: the stream starts
	event(name string, data any) bool // sends one event; false once the client is gone
	flush()                           // pushes what was sent to the client
}

// runExecStream runs the command body asks for and streams it to sink. An
// error wrapping errInvalid means the body is malformed; any other error
// returned before sink.begin is a refusal (policy, or too many jobs).
// After begin, errors are the client's going away (errCancelled), when the
// job is torn down. c is the request's own: its waiter is replaced by one
// that also ends when a send fails; the old one must end when the client
// leaves.
func runExecStream(c *toolCall, body []byte, sink execSink) error {
	a, err := execStreamArgsOf(body)
	if err != nil {
		return err
	}
	req, err := startRequestOf(c.cfg, &executeArgs{Command: a.Command, Argv: a.Argv, Cwd: a.Cwd, Env: a.Env, Stdin: a.Stdin})
	if err != nil {
		return err
	}
	req.closeStdin, req.policy, req.streamed = true, capturePolicy{}, true // the stream is the output: nothing is kept for a result
	if a.TimeoutSeconds != nil && *a.TimeoutSeconds == 0 {
		a.TimeoutSeconds = nil
	}
	limit, err := callTimeLimit(c.cfg, "timeout_seconds", a.TimeoutSeconds, c.cfg.timeLimit)
	if err != nil {
		return c.refusedEarly(req, err)
	}
	es := &eventStream{sink: sink}
	if a.MaxOutputBytes != nil {
		es.cap = int64(*a.MaxOutputBytes)
	}
	// The call's wait ends when the request does or when a send finds the
	// client gone, whichever comes first.
	ctx, leave := context.WithCancel(c.waiter.ctx)
	defer leave()
	c.waiter = &waiter{ctx: ctx}
	ran, err := c.runJob(jobRun{startRequest: req, timeLimit: limit, killGrace: c.cfg.killGrace,
		follow: streamFollow{es: es, ctx: ctx, leave: leave}})
	if err != nil {
		return err
	}
	if !ran.started {
		sink.begin() // it has no pipes to follow: its start_error is the whole answer
	}
	es.exit(ran.job)
	return nil
}

// execStreamArgsOf decodes a streamed exec's body, refusing what execute
// would refuse and any field it does not take.
func execStreamArgsOf(body []byte) (*execStreamArgs, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%w: the body must be a JSON object (fields: command or argv, cwd, env, stdin, timeout_seconds, max_output_bytes)", errInvalid)
	}
	var a execStreamArgs
	if err := bindArgs("POST /exec", execStreamParams, raw, reflect.ValueOf(&a).Elem()); err != nil {
		return nil, err
	}
	return &a, nil
}

// eventStream is one streamed exec's answer as it is sent.
type eventStream struct {
	sink      execSink
	cap       int64    // bytes of output to forward, 0: all
	forwarded int64    // bytes forwarded so far
	next      [2]int64 // the next offset to forward of stdout and stderr
	truncated bool     // the cap stopped forwarding
	gone      bool     // a send failed: the client stopped reading or left
}

// streamFollow follows a streamed exec's job for its event stream.
type streamFollow struct {
	es    *eventStream
	ctx   context.Context
	leave context.CancelFunc // ends the call's wait when the client goes away
}

// followJob is followInBackground.
func (f streamFollow) followJob(j *job) func() { return f.es.followInBackground(f.ctx, f.leave, j) }

// followInBackground begins the stream and forwards j's output on a
// goroutine until follow ends; a client that goes away calls leave, which
// cancels the call's wait. The returned finish waits for the goroutine and
// then lets the pumps run free, so teardown (which waits for the job's
// end, which waits for the pumps to drain the pipes) cannot be held by a
// pump stopped at a full window for a reader that is gone.
func (es *eventStream) followInBackground(ctx context.Context, leave func(), j *job) (finish func()) {
	es.sink.begin()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		if !es.follow(ctx, j) {
			leave()
		}
	}()
	return func() {
		<-followed
		if j.outGate != nil {
			j.outGate.release()
			j.errGate.release()
		}
	}
}

// follow forwards the job's output until the job has finished and its
// pipes are read to the end (or, when processes it left behind hold them,
// have been quiet for execDrainQuiet); it reports false when the client
// went away first.
func (es *eventStream) follow(ctx context.Context, j *job) bool {
	tick := time.NewTicker(execPollInterval)
	defer tick.Stop()
	var quiet time.Time // since when a finished job's pipes brought nothing
	for {
		drained := j.terminal() && isClosed(j.stdoutPump.finished) && isClosed(j.errPump.finished)
		moved := es.forward(j)
		if es.gone {
			return false
		}
		switch {
		case drained:
			return true
		case !j.terminal():
		case moved || quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > execDrainQuiet:
			return true
		}
		var outWrote, errWrote <-chan struct{}
		if j.outGate != nil {
			outWrote, errWrote = j.outGate.wrote, j.errGate.wrote
		}
		select {
		case <-ctx.Done():
			return false
		case <-j.done:
		case <-outWrote:
		case <-errWrote:
		case <-tick.C:
		}
	}
}

// forward sends what each stream wrote since the last call, lets the
// pumps read on, and reports whether it sent anything.
func (es *eventStream) forward(j *job) bool {
	moved := false
	for i, s := range []struct {
		name string
		w    *window
		gate *readGate
	}{{"stdout", j.stdout, j.outGate}, {"stderr", j.stderr, j.errGate}} {
		start, total := s.w.stats()
		if start > es.next[i] {
			es.send("dropped", map[string]any{"stream": s.name, "offset": es.next[i], "bytes": start - es.next[i]})
			es.next[i] = start
		}
		for es.next[i] < total {
			want := total - es.next[i]
			if es.cap > 0 {
				want = min(want, es.cap-es.forwarded)
			}
			if want <= 0 {
				es.truncated, es.next[i] = true, total // drained, not forwarded
				break
			}
			sl := s.w.readRange(es.next[i], min(want, execEventChunk), true, 0)
			if len(sl.data) == 0 {
				break
			}
			es.send(s.name, map[string]any{"data": string(sl.data), "offset": sl.offset})
			es.next[i] = sl.offset + int64(len(sl.data))
			es.forwarded += int64(len(sl.data))
			moved = true
		}
		if s.gate != nil {
			s.gate.take(es.next[i])
		}
	}
	es.sink.flush()
	return moved
}

// exit sends the final event.
func (es *eventStream) exit(j *job) {
	o := j.outcome()
	_, stdoutTotal := j.stdout.stats()
	_, stderrTotal := j.stderr.stats()
	ev := map[string]any{"exit_code": o.exitCode, "timed_out": o.timedOut, "stdout_bytes": stdoutTotal,
		"stderr_bytes": stderrTotal, "truncated": es.truncated, "duration_ms": time.Since(j.started).Milliseconds()}
	if o.startError != "" {
		ev["start_error"] = o.startError
	}
	if o.signal != 0 {
		ev["signal"] = signalWords(o.signal)
	}
	if u := o.usage; u != nil {
		ev["duration_ms"] = u.wall.Milliseconds()
		ev["usage"] = usageJSON{WallMs: u.wall.Milliseconds(), UserMs: u.userMs, SysMs: u.sysMs, MaxRSSKiB: u.maxRSSKiB}
	}
	es.send("exit", ev)
	es.sink.flush()
}

// send sends one event, remembering a client that is gone.
func (es *eventStream) send(name string, data any) {
	if !es.sink.event(name, data) {
		es.gone = true
	}
}
