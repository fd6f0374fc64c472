package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// The exec set: the exec-mcp gateway's one tool. exec runs a command
// through the shell, blocks until it ends (or its timeout ends it: TERM,
// then KILL after MCP_EXEC_KILL_GRACE), and answers plain text: the ends of
// stdout and stderr, then an [exec summary] line of JSON that is
// authoritative for how it ended and how much it wrote.

// Defaults of the exec tool's arguments.
const (
	execTimeoutDefault   = 50 * time.Second // below the 60 s request time-out of most hosts
	execMaxOutputDefault = 1 << 20          // bytes of both streams together
)

// execShell runs the exec tool's commands.
const execShell = "/bin/sh"

// execEnvRemoved are the variables no exec job gets: a shell reads and
// runs the file they name before the command.
var execEnvRemoved = []string{"ENV", "BASH_ENV"}

// execSummaryMarker heads the summary line.
const execSummaryMarker = "[exec summary]"

type execArgs struct {
	Command        string     `arg:"command,required"`
	Cwd            string     `arg:"cwd"`
	TimeoutSeconds *seconds   `arg:"timeout_seconds"`
	MaxOutputBytes *byteCount `arg:"max_output_bytes"`
	Env            looseEnv   `arg:"env"`
}

// execTools is the exec set's tool table.
var execTools = []toolSpec{
	newTool(toolSpec{
		name:  "exec",
		title: "Run one bounded command",
		description: "Run one command through /bin/sh -c and return the end of its stdout and stderr, then [exec summary]: JSON with exit, signal, duration_ms, stdout_bytes, stderr_bytes, truncated and timed_out. " +
			"The summary is authoritative: stderr alone is not failure; a non-zero exit, a signal or timed_out:true is. Output may be truncated. " +
			"Avoid interactive or unbounded commands; default timeout {exec_timeout}{exec_max_timeout}.{policy}",
		docs: map[string]string{
			"command":          "Command line, run as /bin/sh -c <command>: quote pipelines, redirections, && and variables explicitly.",
			"cwd":              "Working directory (default {exec_cwd}).",
			"timeout_seconds":  "Seconds before TERM, then KILL {grace} later (default {exec_timeout}{exec_max_timeout}).",
			"max_output_bytes": "Bytes of stdout and stderr together returned at most (default 1048576); the command is still drained until it exits.",
			"env":              "Variables to add; names that are not [A-Za-z_][A-Za-z0-9_]* are ignored, and ENV and BASH_ENV are always removed.",
		},
		destructive: true,
		runsJobs:    true,
		taskSupport: true,
	}, runExec),
}

// execInstructions is the exec set's advice to the model.
func execInstructions(*config, dialect) string {
	return "Run one bounded command with exec; read its [exec summary], not stderr, to tell success from failure."
}

// execSummary is the [exec summary] line.
type execSummary struct {
	Exit           *int    `json:"exit"`   // nil when a signal ended it
	Signal         *string `json:"signal"` // "SIGTERM" and so on
	DurationMs     int64   `json:"duration_ms"`
	StdoutBytes    int64   `json:"stdout_bytes"`
	StderrBytes    int64   `json:"stderr_bytes"`
	ForwardedBytes int64   `json:"forwarded_bytes"`
	MaxOutputBytes int64   `json:"max_output_bytes"`
	Truncated      bool    `json:"truncated"`
	TimedOut       bool    `json:"timed_out"`
}

// runExec is the exec set's exec tool: the command runs to its end (or its
// time limit) in DEFAULT_CWD unless the call names a cwd, and the answer
// is the gateway's result shape.
func runExec(c *toolCall, a *execArgs) (answer, error) {
	if strings.TrimSpace(a.Command) == "" {
		return nil, fmt.Errorf("%w: command is required and must not be empty", errInvalid)
	}
	if a.Cwd == "" {
		a.Cwd = c.cfg.execCwd // DEFAULT_CWD, checked against the roots like any cwd
	}
	timeout, err := callTimeLimit(c.cfg, "timeout_seconds", a.TimeoutSeconds, execTimeout(c.cfg))
	if err != nil {
		return nil, c.refusedEarly(startRequest{command: a.Command, dir: a.Cwd}, err)
	}
	maxOutput := int64(execMaxOutputDefault)
	if a.MaxOutputBytes != nil {
		maxOutput = int64(*a.MaxOutputBytes)
	}
	if err := checkCwd(a.Cwd); err != nil {
		return nil, err
	}
	for _, name := range execEnvRemoved {
		delete(a.Env, name) // removed, as the gateway has it, not refused
	}
	// /bin/sh, whatever $SHELL says: the gateway's contract names it.
	req := startRequest{argv: []string{execShell, "-c", a.Command}, dir: a.Cwd, env: a.Env, closeStdin: true, policy: c.cfg.capture,
		silent: true, unsetEnv: execEnvRemoved, keepTail: int(min(maxOutput, math.MaxInt32))}
	ran, err := c.runJob(jobRun{startRequest: req, timeLimit: timeout, killGrace: c.cfg.killGrace})
	if refusal := (tooManyJobs{}); errors.As(err, &refusal) {
		return execRefusal(c, refusal.active), nil
	}
	if err != nil {
		return nil, err
	}
	if !ran.started {
		return nil, fmt.Errorf("cannot start the command: %s", ran.job.final.startError)
	}
	return textResult(execReport(ran.job, maxOutput, c.replyBudget(), lineCost{})), nil // plain text: no structured copy
}

// execTimeout is the exec tool's timeout when a call gives none.
func execTimeout(cfg *config) time.Duration {
	if cfg.timeLimit > 0 {
		return cfg.timeLimit
	}
	if cfg.maxTimeLimit > 0 {
		return min(execTimeoutDefault, cfg.maxTimeLimit)
	}
	return execTimeoutDefault
}

// execReport is the finished job's answer: the ends of its streams, at most
// maxOutput bytes of both together and within the reply budget, then the
// summary.
func execReport(j *job, maxOutput int64, budget int, cost lineCost) string {
	o := j.outcome()
	sum := execSummary{DurationMs: j.runtime().Milliseconds(), MaxOutputBytes: maxOutput, TimedOut: o.timedOut}
	if o.signal > 0 {
		name := signalName(o.signal)
		sum.Signal = &name
	} else {
		sum.Exit = &o.exitCode
	}
	render := func(limit int) (string, int) {
		text := execText(j, int64(limit), &sum)
		return text, cost.of([]byte(text))
	}
	return shrinkToFit(int(min(maxOutput, math.MaxInt)), 0, budget, render, func(limit, _ int) int { return limit / 2 })
}

// execText renders the report with at most limit bytes of output, filling
// sum's counts.
func execText(j *job, limit int64, sum *execSummary) string {
	out, errs := j.stdout.ends(0, limit), j.stderr.ends(0, limit)
	outShare, errShare := shareBudget(limit, out.total, errs.total)
	var b strings.Builder
	sum.ForwardedBytes = 0
	for _, s := range []struct {
		name  string
		ends  streamEnds
		share int64
	}{{"stdout", out, outShare}, {"stderr", errs, errShare}} {
		if s.ends.total == 0 {
			continue
		}
		tail := s.ends.last[max(0, int64(len(s.ends.last))-s.share):]
		tail = skipContinuation(tail)
		sum.ForwardedBytes += int64(len(tail))
		fmt.Fprintf(&b, "[%s tail]\n%s", s.name, tail)
		if len(tail) > 0 && tail[len(tail)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	sum.StdoutBytes, sum.StderrBytes = out.total, errs.total
	sum.Truncated = sum.ForwardedBytes < out.total+errs.total
	line, _ := json.Marshal(sum) // cannot fail: plain fields
	b.WriteString(execSummaryMarker + "\n")
	b.Write(line)
	return b.String()
}

// shareBudget splits limit bytes between two streams that wrote a and b:
// each gets up to half, and what one does not need goes to the other.
func shareBudget(limit, a, b int64) (int64, int64) {
	half := limit / 2
	switch {
	case a+b <= limit:
		return a, b
	case a <= half:
		return a, limit - a
	case b <= limit-half:
		return limit - b, b
	}
	return half, limit - half
}

// execRefusal is the refusal of an exec while MCP_EXEC_MAX_JOBS run: a tool
// error holding the gateway's too_many_active_execs object.
// active is the count the refusal saw; the jobs are listed a moment later,
// so a count they do not reach is told as other.
func execRefusal(c *toolCall, active int) toolResult {
	running := c.reg.runningJobs()
	if len(running) > active {
		running = running[:active]
	}
	states := map[string]int{}
	if other := active - len(running); other > 0 {
		states["other"] = other // ending (killed, not yet reaped), or another session's
	}
	oldest := 0.0
	for _, j := range running {
		state := "running"
		if j.hitTimeLimit() {
			state = "timing_out"
		}
		states[state]++
		oldest = max(oldest, time.Since(j.started).Seconds())
	}
	body, _ := json.Marshal(map[string]any{ // cannot fail: plain values
		"error": "too_many_active_execs",
		"message": fmt.Sprintf("%d execs are active and at most %d may run at once (MCP_EXEC_MAX_JOBS); retry when one has finished",
			active, c.cfg.maxJobs),
		"active": active, "max": c.cfg.maxJobs,
		"oldest_age_seconds": math.Round(oldest*1000) / 1000, "states": states,
	})
	return toolFailure(errors.New(string(body)))
}
