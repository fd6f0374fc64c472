package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The arguments of each tool.
type (
	executeArgs struct {
		Command       string            `arg:"command,listed"` // or argv
		Argv          []string          `arg:"argv"`
		Cwd           string            `arg:"cwd"`
		Env           map[string]string `arg:"env"`
		Stdin         string            `arg:"stdin"`
		CloseStdin    bool              `arg:"close_stdin"`
		Nowait        bool              `arg:"nowait"`
		Capture       *capturePolicy    `arg:"capture"`
		TimeLimit     *seconds          `arg:"time_limit"`
		YieldAfter    *seconds          `arg:"yield_after"`
		Until         *untilSpec        `arg:"until"`
		TTY           *ttySpec          `arg:"tty"`
		MaxReplyBytes *replyBytes       `arg:"max_reply_bytes"`
	}
	waitArgs struct {
		JobIDs        []jobID     `arg:"job_ids,required"`
		Timeout       *seconds    `arg:"timeout"`
		Until         *untilSpec  `arg:"until"`
		MaxReplyBytes *replyBytes `arg:"max_reply_bytes"`
	}
	statusArgs struct {
		JobID jobID `arg:"job_id,required"`
	}
	outputArgs struct {
		JobID         jobID       `arg:"job_id,required"`
		Stdout        streamSpec  `arg:"stdout"`
		Stderr        streamSpec  `arg:"stderr"`
		Plain         *bool       `arg:"plain"`
		MaxReplyBytes *replyBytes `arg:"max_reply_bytes"`
	}
	inputArgs struct {
		JobID      jobID    `arg:"job_id,required"`
		Data       string   `arg:"data"`
		Close      bool     `arg:"close"`
		YieldAfter *seconds `arg:"yield_after,unlisted"`
	}
	killArgs struct {
		JobID         jobID           `arg:"job_id,required"`
		Signal        *syscall.Signal `arg:"signal"`
		Timeout       *seconds        `arg:"timeout"`
		MaxReplyBytes *replyBytes     `arg:"max_reply_bytes"`
	}
)

const streamDoc = `"none" (default), "all" (the retained window), {"tail": N} (last N lines), or {"from": P, "length": N, "unaligned": false} (bytes from absolute offset P; the next page is from = offset + bytes)`

const grepDoc = `; or {"grep": RE2, "from": P, "max": 20, "context": 0} to search the kept lines: {matches: [{offset, line, before?, after?}], match_count, searched: {from, to}, next?}`

const replyDoc = "Longest reply line in bytes (>= 1024; default {budget}); a bigger result is cut to head and tail, and output can read the gap."

// jobTools is the jobs set's tool table, in the order tools/list shows them.
var jobTools = withAgentTexts([]toolSpec{
	newTool(toolSpec{
		name:   "execute",
		title:  "Run a command",
		output: resultSchema,
		description: "Run a shell command ($SHELL -c), or argv without a shell, as a job in its own process group. " +
			"Blocks until it exits and returns {job_id, state, exit_code, signal?, stdout?, stderr?}; that delivery forgets the job. " +
			"Hosts often time calls out after 60 s: for anything longer use nowait:true (returns {job_id, state:\"running\"} at once; then wait, status, output, input, kill) " +
			"or yield_after (returns the running job with yielded:true; default {yield}). " +
			"Each stream keeps its last {window}; replies over {budget} are cut to head and tail.{highlights} For noisy commands capture {\"tail\": N} lines. " +
			"Default capture: {capture}. stdin stays open unless close_stdin is true; a job blocked reading it shows waiting_for_input.{keep_cwd}{env_defaults}{mask}{policy}",
		docs: map[string]string{
			"command":         "Shell command line, run as $SHELL -c <command>. Give command or argv.",
			"argv":            "Program and arguments, run without a shell; argv[0] is looked up in PATH. Give command or argv.",
			"cwd":             "Working directory (default: {cwd_default}).",
			"env":             "Variables layered over the server's environment.",
			"stdin":           "Text written to the job's stdin right away.",
			"close_stdin":     "Close stdin (EOF) after writing stdin. Default false.",
			"nowait":          "Return the job_id immediately instead of waiting for the exit.",
			"capture":         `What the final result includes: {"on_success": SPEC, "on_error": SPEC} where SPEC is "stdout", "stderr", "all", "none" or {"stdout": STREAM, "stderr": STREAM}; STREAM is ` + streamDoc + `. Default {capture}.`,
			"time_limit":      "Seconds the job may run; then TERM to its process group, KILL {grace} later, and timed_out:true. Default {time_limit}.",
			"tty":             `Run on a pseudo-terminal (true, or {"rows": R, "cols": C}; default 24x80), for programs that need one (prompts, REPLs, pagers, sudo): stdout holds what the terminal shows, stderr stays empty, input types into it (close sends Ctrl-D). Default false.`,
			"yield_after":     "Seconds to block before returning the still-running job with yielded:true (collect it with wait); it also returns once the job has waited 1 s for input on stdin. 0 = block until the exit. Default {yield}.",
			"until":           `Return early, the job left running, on its first complete line matching {"pattern": RE2, "stream": "stdout"|"stderr"|"any"} (result matched {stream, offset, line, next}) or once it is quiet {"idle": seconds} (idle:true); e.g. {"pattern": "listening on"} for a server. Not with nowait.`,
			"max_reply_bytes": replyDoc,
		},
		destructive: true,
		runsJobs:    true,
		taskSupport: true,
		yieldsTask:  true,
	}, runExecute),
	newTool(toolSpec{
		name:   "wait",
		title:  "Wait for jobs",
		output: waitSchema,
		description: "Block until any of the listed jobs finishes, or the timeout (default {wait}; <= 0 polls). Returns an array in job_ids order: " +
			"finished jobs carry their full result (per their capture policy) and are forgotten; running ones are {job_id, state:\"running\", waiting_for_input?}. " +
			"Keep timeout below your client's request time-out (often 60 s).",
		docs: map[string]string{
			"job_ids":         "Jobs to watch (non-empty); integers are taken as their decimal strings.",
			"timeout":         "Seconds to block (default {wait}); <= 0 polls.",
			"until":           `Also return early for a running job: {"pattern": RE2, "stream": "stdout"|"stderr"|"any", "from": offset} when a complete line it kept (from its oldest kept byte, or from offset "from") or writes matches, its entry then carrying matched {stream, offset, line, next} (next: the from that looks past it); or {"idle": seconds} when it has written nothing for that long (entry idle:true). Finished jobs are delivered as always.`,
			"max_reply_bytes": replyDoc,
		},
		// Not read-only: a finished job's result is delivered once, so a
		// second wait on it fails.
	}, runWait),
	newTool(toolSpec{
		name:        "status",
		title:       "Job status",
		output:      resultSchema,
		idempotent:  true,
		description: "A job's state: {job_id, state, exit_code?, signal?, start_error?, timed_out?, waiting_for_input?}. Never forgets the job.",
		docs:        map[string]string{"job_id": "The job."},
		readOnly:    true,
		readsKept:   true,
	}, runStatus),
	newTool(toolSpec{
		name:       "output",
		title:      "Read a job's output",
		output:     outputSchema,
		idempotent: true,
		description: "Read a job's captured output, live or after exit, without forgetting it. Returns the status fields plus the selected slices " +
			"{data, offset, bytes, total_bytes, truncated, dropped_bytes?, omitted?, tail?}. Offsets are absolute bytes; page with from = offset + bytes.",
		docs: map[string]string{
			"job_id":          "The job.",
			"stdout":          "Slice of stdout: " + streamDoc + grepDoc + ".",
			"stderr":          "Slice of stderr: " + streamDoc + grepDoc + ".",
			"plain":           "Strip terminal escape sequences and carriage returns from data (a tty job's output); offsets and byte counts stay those of the raw bytes.",
			"max_reply_bytes": replyDoc,
		},
		readOnly:  true,
		readsKept: true,
	}, runOutput),
	newTool(toolSpec{
		name:        "input",
		title:       "Write to a job's stdin",
		output:      resultSchema,
		description: "Write to a running job's stdin; close:true sends EOF after the data. Returns the job's status. Blocks while the pipe is full.",
		docs: map[string]string{
			"job_id":      "The job.",
			"data":        "Text to write.",
			"close":       "Close stdin after writing.",
			"yield_after": "Seconds to wait for the job's answer: input then returns once the job reads again, goes quiet 0.3 s after output, or ends (its result), with recent: what it wrote since. 0 = return at once.",
		},
	}, runInput),
	newTool(toolSpec{
		name:       "kill",
		title:      "Kill a job",
		output:     killSchema,
		idempotent: true,
		description: "Signal a job's whole process group and wait for observed death. " +
			"If the tree died: {terminated:true, signal_sent, result} and the job is forgotten. If it survived: {terminated:false, detail} and the job stays. " +
			"signal ASSURED sends TERM, then KILL if the tree outlives the timeout.",
		docs: map[string]string{
			"job_id":          "The job.",
			"signal":          `TERM (default), KILL, INT, HUP, a number such as "9", RTMIN+n, or ASSURED.`,
			"timeout":         "Seconds to wait for death after each signal (default 5; 0 = do not wait).",
			"max_reply_bytes": replyDoc,
		},
		destructive: true,
	}, runKill),
	newTool(toolSpec{
		name:        "list_jobs",
		title:       "List jobs",
		output:      listJobsSchema,
		idempotent:  true,
		description: "Every job that wait can still deliver, oldest first: {jobs: [{job_id, state, waiting_for_input?}]}.",
		readOnly:    true,
	}, runListJobs),
}, jobAgentTexts)

// jobAgentTexts is what a model reads of the jobs set under the agent
// profile, every turn: the fewest words that stay exact, with the values
// in force. The other arguments keep their docs.
var jobAgentTexts = map[string]toolWords{
	"execute": {
		description: "Run a shell command ($SHELL -c) or argv (no shell) as a job in its own process group. {block} With until it returns as soon as a line matches, the job still running. " +
			"Result: {job_id, state (success, error or running), exit_code, signal?, timed_out?, stdout?, stderr?}; a yielded or waiting job also shows recent {stdout, stderr}, its newest lines; a stream is {data, offset, bytes, total_bytes, truncated}. " +
			"Each stream keeps {retained}. A reply over {budget} shows a head and a tail of a stream and the gap between (omitted {offset, bytes}); " +
			"such a result, or one whose capture left bytes out (uncaptured), stays kept:true for {kept}, for output to read. Otherwise a delivered job is gone.{highlights} " +
			"waiting_for_input:true: it waits for stdin (use input).{env_defaults}{mask} {carry}{policy}",
		docs: map[string]string{
			"command":     "Shell command line. Give command or argv.",
			"argv":        "Program and arguments, run without a shell (argv[0] looked up in PATH).",
			"cwd":         "Directory to start in (default: {cwd_default}).",
			"env":         "Variables added to the server's environment, for this job only.",
			"stdin":       "Text written to stdin at the start.",
			"close_stdin": "Close stdin (EOF) after writing stdin.",
			"nowait":      "Return {job_id} at once; collect the result with wait.",
			"capture": `What the result holds: {"on_success": S, "on_error": S}; S is "stdout", "stderr", "all", "none" or {"stdout": STREAM, "stderr": STREAM}, STREAM as output takes it (e.g. {"tail": 50}, {"grep": "error:"}). ` +
				"Default {capture}.",
			"time_limit":      "Seconds until TERM (KILL {grace} later; the result says timed_out:true). Default {time_limit}.",
			"tty":             `true or {"rows", "cols"}: run on a terminal (prompts, sudo, REPLs); stdout is the screen, input types into it.`,
			"yield_after":     "Seconds to block before returning the running job (yielded:true); 0 = until it exits. Default {yield}{max_yield}. Also returns once the job waits for input.",
			"max_reply_bytes": "Reply limit in bytes (at least 1024, default {budget}); larger output is cut to a head and a tail.",
			"until":           `Return as soon as a complete line matches, the job still running (state "running", matched {stream, offset, line, next}): {"pattern": RE2, "stream"?: "stdout"|"stderr"|"any", "from"?: OFFSET}; or {"idle": S}: when it has written nothing for S seconds (idle:true); or {"listening": PORT|true}, alone or beside pattern: once its processes listen on PORT (any port: true), even after its shell exited (matched {"listening": "ADDR:PORT"}). A job that ends first returns its result.`,
		},
	},
	"wait": {
		description: "Block until one of job_ids finishes or waits for input, or the timeout (default {wait}; keep it below your host's call time-out, often 60 s). " +
			"One entry per id, in order: a finished job's result (delivered: the job is gone unless kept), or {job_id, state:\"running\", waiting_for_input?, recent?}; after a timeout also elapsed_s.",
		docs: map[string]string{
			"job_ids": "Jobs to wait for.",
			"timeout": "Seconds to block (default {wait}{max_yield}); 0 = look once.",
			"until": `Return early for a running job: {"pattern": RE2, "stream"?: "stdout"|"stderr"|"any", "from"?: OFFSET} on a complete matching line, including lines already written (from the oldest kept byte, or from OFFSET); the entry carries matched {stream, offset, line, next} (pass next as from to look past it). ` +
				`{"idle": S}: when it wrote nothing for S seconds (entry idle:true). {"listening": PORT|true}: when its processes listen on PORT, after its shell exited too (matched {"listening": ADDR}).`,
			"max_reply_bytes": "Reply limit in bytes (at least 1024, default {budget}).",
		},
	},
	"status": {
		description: "A job's state, without output, never forgetting it: {job_id, state, exit_code?, signal?, timed_out?, waiting_for_input?, procs?, listening?: [\"ADDR:PORT\"]}. " +
			"A lingering job (delivered while processes it started run on) adds lingering:true and survivors now.",
	},
	"output": {
		description: "Read a running or kept job's output without forgetting it: its status plus a slice of each stream asked for, or its lines matching grep. " +
			"Offsets count bytes from the stream's start; the next page is from = offset + bytes.",
		docs: map[string]string{
			"stdout":          `"all" (what is kept), {"tail": N} (last N lines), {"from": OFFSET, "length"?: N} (bytes), or {"grep": RE2, "max"?: 20, "context"?: L, "from"?: OFFSET} (matching lines with their offsets, match_count, and dropped_bytes: the bytes before the search that are gone). Default "none". With spill on, bytes older than the in-memory window are read back from disk at their offsets.`,
			"stderr":          "As stdout.",
			"plain":           "Default true: terminal escapes stripped, a \\r-redrawn line as last drawn; false: the raw bytes. Offsets stay the raw bytes'.",
			"max_reply_bytes": "Reply limit in bytes (at least 1024, default {budget}); a larger slice is cut to a head and a tail.",
		},
	},
	"input": {
		description: "Write data to a running job's stdin (end a line with \\n); close:true then sends EOF. " +
			"Then returns its answer: once it reads again (waiting_for_input:true), is quiet 0.3 s after output, or yield_after passes, with recent: what it wrote since the write; or its result if it ended.",
		docs: map[string]string{"data": "Text to write.", "close": "Send EOF after data.",
			"yield_after": "Seconds to wait for the answer (default 2{max_yield}); 0 = return at once."},
	},
	"kill": {
		description: "Signal the job's process group and wait for it to die: {terminated:true, result} (the job is then gone) " +
			"or {terminated:false, detail} (something survived; the job stays). A lingering job's kill ends what it left running and has no result.",
		docs: map[string]string{
			"signal":  `TERM (default), KILL, INT, HUP, a number, or ASSURED (TERM, then KILL after timeout).`,
			"timeout": "Seconds to wait for death after each signal (default 5).",
		},
	},
	"list_jobs": {
		description: "Jobs not yet collected, oldest first: {jobs: [{job_id, state, waiting_for_input?}], lingering?: [{job_id, procs, survivors, listening?}]} (delivered jobs whose processes still run; kill ends them).",
	},
}

// jobsInstructions is the jobs set's advice to the model.
func jobsInstructions(_ *config, d dialect) string {
	if d.agent {
		return "Run commands with execute. {carry} {yield_advice} " +
			"For a server, execute with until {\"listening\": PORT} returns once it is up, still running; for a long build, nowait:true then wait. " +
			"Replies are cut to a head and a tail within {budget}; output reads the gap of a kept result. A finished job's result is delivered once."
	}
	return "Run shell commands as jobs with " + strings.Join(toolNamesOf(jobTools), ", ") +
		"; a finished job's result is delivered once, then the job is gone. " +
		"Calls over about 60 s time out in many hosts: use nowait:true or yield_after (default {yield}), " +
		"wait with a timeout below that, and capture {\"tail\": N} on noisy output; replies are cut at {budget}.{keep_cwd}"
}

// runExecute is the execute tool: it starts the command as a job and, unless
// nowait, waits as the arguments say (to its end, a yield, an until match or
// a prompt); a job that ended is delivered to this call.
func runExecute(c *toolCall, a *executeArgs) (answer, error) {
	clamped := clamps{}
	ans, err := executeAnswer(c, a, clamped)
	if err != nil {
		return nil, err
	}
	return clamped.on(ans), nil
}

// executeAnswer is runExecute's answer before the clamps are said in it.
func executeAnswer(c *toolCall, a *executeArgs, clamped clamps) (answer, error) {
	if a.Capture != nil && a.Capture.grepAt() != "" && !c.dialect.agent { // only the agent profile's results carry a search
		return nil, fmt.Errorf("%w capture: %s: %s", errInvalid, a.Capture.grepAt(), captureGrepRefusal)
	}
	run, err := executeRun(c.cfg, a, clamped)
	if err != nil {
		return nil, c.refusedEarly(startRequest{command: a.Command, argv: a.Argv, dir: a.Cwd}, err)
	}
	run.dir = c.reg.cwd.startDir(c.cfg, run.dir, !a.Nowait)
	if !a.Nowait {
		run.cwdReport = newCwdReport(c.cfg)
	}
	ran, err := c.runJob(run)
	keepCwd(c, run.cwdReport, ran)
	switch {
	case err != nil:
		return nil, err
	case !ran.started || ran.ended:
		return resultAnswer(resultWithin(ran.job, c.replyBudget())), nil
	case a.Nowait:
		return resultAnswer(&resultJSON{JobID: ran.job.id, State: stateRunning}), nil
	case ran.hit != nil && ran.job.terminal():
		if r := portHitResult(c, ran.job, ran.hit, nil); r != nil {
			return resultAnswer(r), nil
		}
		return resultAnswer(resultWithin(ran.job, c.replyBudget())), nil
	case ran.hit != nil: // the job runs on, to be collected by wait
		return resultAnswer(runningEntry(ran.job, ran.hit, ran.job.waitingForInputSeen())), nil
	}
	// Yielded: the job runs on, to be collected by wait; its newest lines
	// say why it has not ended (a prompt, progress) without another call.
	j := ran.job
	now := func() answer {
		r := &resultJSON{JobID: j.id, State: stateRunning, Yielded: true,
			WaitingForInput: ran.inputWanted || j.waitingForInput(), Recent: recentOf(j)}
		if c.dialect.agent && !r.WaitingForInput {
			r.Note = untilQuietNote(a.Until, j) // an until that found nothing says why, when it can tell
		}
		return recentWithin(c, resultAnswer(r))
	}
	later := func() (answer, error) { // as wait delivers it
		c.reg.cwd.delivered(c.cfg, j.id)
		return resultAnswer(resultWithin(j, c.replyBudget())), nil
	}
	return yieldedAnswer{job: j, now: now, later: later}, nil
}

// keepCwd moves the session's kept directory (MCP_EXEC_KEEP_CWD) to where
// a blocking execute's shell ended; a yielded one moves it when wait
// delivers it, unless another call set the directory first.
func keepCwd(c *toolCall, report *cwdReport, ran ranJob) {
	switch {
	case report == nil:
	case ran.ended:
		c.reg.cwd.ended(c.cfg, report)
	case ran.started:
		c.reg.cwd.yielded(ran.job.id, report, ran.job.done)
	default: // not started, or the call ended first and the job was torn down
		report.release()
	}
}

// executeRun checks execute's arguments and says how its job runs. The
// execute holds its job from the start, so it gets the result even if a
// kill or a wait that guessed the id took it first.
func executeRun(cfg *config, a *executeArgs, clamped clamps) (jobRun, error) {
	req, err := startRequestOf(cfg, a)
	if err != nil {
		return jobRun{}, err
	}
	limit, err := callTimeLimit(cfg, "time_limit", a.TimeLimit, cfg.timeLimit)
	if err != nil {
		return jobRun{}, err
	}
	yieldAfter, err := optionalSeconds("yield_after", a.YieldAfter, cfg.yieldAfter, true)
	if err != nil {
		return jobRun{}, err
	}
	yieldAfter = clamped.bound(cfg, "yield_after", yieldAfter, a.YieldAfter != nil)
	if a.Until != nil && a.Nowait {
		return jobRun{}, fmt.Errorf("%w: until waits for a line or for quiet and nowait returns at once; give one of them (or nowait, then wait with until)", errInvalid)
	}
	run := jobRun{startRequest: req, timeLimit: limit, killGrace: cfg.killGrace, nowait: a.Nowait,
		await: awaitOptions{yieldOnInput: yieldAfter > 0}, until: a.Until}
	if yieldAfter > 0 {
		run.await.deadline = time.Now().Add(yieldAfter)
	}
	return run, nil
}

// startRequestOf checks execute's arguments and makes its start request.
func startRequestOf(cfg *config, a *executeArgs) (startRequest, error) {
	switch {
	case a.Command != "" && a.Argv != nil:
		return startRequest{}, fmt.Errorf("%w: give command or argv, not both", errInvalid)
	case a.Command == "" && a.Argv == nil:
		return startRequest{}, fmt.Errorf("%w: command is required and must not be empty (or give argv)", errInvalid)
	}
	policy := cfg.capture
	if a.Capture != nil {
		policy = *a.Capture
	}
	req := startRequest{command: a.Command, argv: a.Argv, dir: a.Cwd, env: a.Env,
		stdin: a.Stdin, closeStdin: a.CloseStdin, policy: policy, contract: jobsContract}
	if a.TTY != nil && a.TTY.rows > 0 {
		req.tty = a.TTY
	}
	return req, nil
}

// runWait is the wait tool: it blocks on the jobs the call holds until one
// ends, the timeout passes, until matches or the call is cancelled, and
// answers one entry per job id; finished jobs are delivered to it.
func runWait(c *toolCall, a *waitArgs) (answer, error) {
	clamped := clamps{}
	timeout := c.cfg.defaultTimeout
	if a.Timeout != nil {
		timeout = secondsToDuration(float64(*a.Timeout))
	}
	timeout = clamped.bound(c.cfg, "timeout", timeout, a.Timeout != nil)
	// Under the agent profile a job that waits for input ends the wait: its
	// entry shows the prompt. A 1.0 wait blocks on until its timeout.
	opts := awaitOptions{poll: timeout <= 0, yieldOnInput: c.dialect.agent && len(a.JobIDs) <= lookAtMostJobs}
	if timeout > 0 {
		opts.deadline = time.Now().Add(timeout)
	}
	jobs := make([]*job, len(a.JobIDs))
	lingering := map[*job]bool{} // delivered before: answered with their entries, not their results again
	for i, id := range a.JobIDs {
		jobs[i] = c.job(id)
		if c.reg.isLingering(jobs[i]) {
			lingering[jobs[i]] = true
		}
	}
	hit := func() *untilHit { return nil }
	if a.Until != nil {
		hit = stopOnUntil(*a.Until, jobs, &opts)
	}
	delivered, inputWanted, err := c.reg.await(c.waiter, jobs, opts)
	if err != nil {
		return nil, err
	}
	if err := c.roomForReply(); err != nil { // even without results, one entry per job id can fill the budget
		for _, j := range delivered {
			// Cancelled: the results go back for the next wait. (Another
			// call that held a job may have answered it meanwhile: a
			// result may reach several calls, never none.)
			c.reg.undeliver(j)
		}
		return nil, err
	}
	for _, j := range delivered {
		c.reg.cwd.delivered(c.cfg, j.id)
	}
	// Timed out: under the agent profile each running entry says how long
	// its job has run and what it wrote last, so a stuck job can be told
	// from a working one without another call.
	timedOut := c.dialect.agent && len(delivered) == 0 && !inputWanted && hit() == nil
	entries := make([]*resultJSON, len(jobs))
	for i, j := range jobs {
		if lingering[j] {
			entries[i] = liveStatusOf(j)
			continue
		}
		if delivered[j.id] != nil {
			entries[i] = resultWithin(j, c.replyBudget())
			continue
		}
		if r := endedResult(c, j, hit(), c.waiter.handoff); r != nil {
			entries[i] = r
			continue
		}
		entries[i] = runningEntry(j, hit(), j.waitingForInputAtOnce())
		if timedOut {
			progressOf(entries[i], j)
			if note := untilQuietNote(a.Until, j); note != "" {
				entries[i].Note = note
			}
		}
	}
	return clamped.on(recentWithin(c, waitAnswer(entries))), nil
}

// progressOf adds to r, a running job's entry, the job's age in seconds
// (to a tenth) and, unless r has them, its newest lines.
func progressOf(r *resultJSON, j *job) {
	elapsed := math.Round(time.Since(j.started).Seconds()*10) / 10
	r.ElapsedS = &elapsed
	if r.Recent == nil {
		r.Recent = recentOf(j)
	}
}

// runningEntry is a running job's entry: with what ended the wait early if
// hit is its (matched, or idle).
func runningEntry(j *job, hit *untilHit, waiting bool) *resultJSON {
	r := &resultJSON{JobID: j.id, State: stateRunning}
	markWaiting(r, j, waiting)
	if j.terminal() { // its shell ended; a wait for a port watched its tree on
		r = liveStatusOf(j)
	}
	markHit(r, j, hit)
	return r
}

// markHit says in r, j's entry, what ended the wait early, if hit is j's.
func markHit(r *resultJSON, j *job, hit *untilHit) {
	if hit == nil || hit.job != j {
		return
	}
	r.Idle = hit.matched == nil && hit.listening == ""
	if m := hit.matched; m != nil {
		r.Matched = &matchJSON{Stream: m.stream, Offset: m.offset, Line: m.line, Next: m.next}
	}
	if hit.listening != "" {
		r.Matched = &matchJSON{listening: hit.listening}
	}
}

// portHitResult delivers j, whose shell had ended when a port of its tree
// opened and ended the wait, and is its result with that match; nil when
// hit is not such a hit of j's or another call took the result first.
func portHitResult(c *toolCall, j *job, hit *untilHit, h *handoff) *resultJSON {
	if hit == nil || hit.job != j || hit.listening == "" {
		return nil
	}
	return endedResult(c, j, hit, h)
}

// endedResult delivers j if its shell has ended, and is its result (with
// hit's match when hit is j's); nil when j runs or another call took the
// result first. A wait's entries are made after its look for finished
// jobs: one that ended since (or was held for its tree's port until the
// time ran out) is answered with its result, never with its final state
// and no output, which would read as a result while it stays undelivered.
func endedResult(c *toolCall, j *job, hit *untilHit, h *handoff) *resultJSON {
	if !j.terminal() || !c.reg.deliver(j, h) {
		return nil
	}
	c.reg.cwd.delivered(c.cfg, j.id)
	r := resultWithin(j, c.replyBudget())
	markHit(r, j, hit)
	return r
}

// runStatus is the status tool: a held job's state, without output and
// without delivering it.
func runStatus(c *toolCall, a *statusArgs) (answer, error) {
	return recentWithin(c, resultAnswer(liveStatusOf(c.job(a.JobID)))), nil
}

// liveStatusOf is statusOf with, for a running job, whether it waits for
// input.
func liveStatusOf(j *job) *resultJSON {
	r := statusOf(j)
	if r.State == stateRunning {
		markWaiting(r, j, j.waitingForInput())
	}
	if r.Lingering {
		lingeringNow(r, j)
	}
	return r
}

// lingeringNow makes r, a lingering job's status, say what its tree is
// now: its processes and their count, in place of what its shell left.
func lingeringNow(r *resultJSON, j *job) {
	left := j.treeNow()
	n := len(left)
	r.Procs = &n
	r.Survivors, r.SurvivorsCount = survivorsOf(left)
	if n == 0 {
		// Emptied between the two looks: no longer lingering.
		r.Lingering, r.Listening, r.Note, r.Survivors, r.SurvivorsCount = false, nil, "", nil, 0
	}
}

// markWaiting says in r, a running job's entry, whether the job waits for
// input; one that waits carries its newest output (the prompt) when the
// job has prompts, so the entries a 1.0 client gets stay 1.0's.
// A job started for an agent-profile call also says how many processes it
// has now (procs).
func markWaiting(r *resultJSON, j *job, waiting bool) {
	r.WaitingForInput = waiting
	if j.treeReports {
		n := j.procCount()
		r.Procs = &n
		r.Listening = j.listeningJSON()
	}
	if waiting && j.prompts {
		r.Recent = recentOf(j)
	}
}

// recentWithin is a with recent left out of its results when the reply
// would not fit the call's budget with it: output still reads those lines,
// and no output of a result is cut to make room for them.
func recentWithin(c *toolCall, a jsonAnswer) jsonAnswer {
	if !slices.ContainsFunc(a.results, func(r *resultJSON) bool { return r.Recent != nil }) {
		return a
	}
	if text, err := marshal(a.body); err == nil && c.cost().of(text) <= c.replyBudget() {
		return a
	}
	for _, r := range a.results {
		r.Recent = nil
	}
	return a
}

// runOutput is the output tool: slices (or a grep) of a held job's windows
// from the offsets asked; it delivers nothing.
func runOutput(c *toolCall, a *outputArgs) (answer, error) {
	if err := c.roomForReply(); err != nil {
		return nil, err
	}
	j := c.job(a.JobID)
	r := liveStatusOf(j)
	streams := []struct {
		w     *window
		spec  streamSpec
		slice **sliceJSON
		found *grepJSON
	}{{w: j.stdout, spec: a.Stdout, slice: &r.Stdout}, {w: j.stderr, spec: a.Stderr, slice: &r.Stderr}}
	searched := false
	for i := range streams {
		s := &streams[i]
		if s.spec.kind == streamGrep {
			// A share of the budget: the lines are escaped twice in the
			// reply (and once more as structured content), and grepWindow
			// counts them raw.
			s.found, searched = grepWindow(s.w, s.spec.grep, j.terminal(), c.replyBudget()/grepBudgetShare), true
			if c.dialect.agent { // a model is told what it cannot see
				s.found.showDropped()
			}
			continue
		}
		*s.slice, _ = sliceWithin(s.w, s.spec, c.replyBudget())
	}
	// The view: the call's plain, else the dialect's (plain under the
	// agent profile). A slice's text is made plain where the reply is
	// fitted, after any cut, so its offsets stay the raw bytes'.
	plain := c.viewWith(a.Plain).plain
	if plain {
		for _, s := range streams {
			plainGrep(s.found)
		}
	}
	if !searched {
		answer := recentWithin(c, resultAnswer(r))
		answer.plain = &plain
		return answer, nil
	}
	out := &outputJSON{resultJSON: r}
	for i, into := range []*any{&out.Stdout, &out.Stderr} {
		switch s := streams[i]; {
		case s.found != nil:
			*into = s.found
		case *s.slice != nil:
			*into = *s.slice
		}
	}
	return recentWithin(c, jsonAnswer{body: out, results: []*resultJSON{r}, plain: &plain}), nil
}

// runInput is the input tool: it writes data to a held job's stdin (or
// terminal), closing it when asked. Without yield_after (1.0) it answers
// the job's status at once; with it, it waits for the job's answer (see
// answerWatch), its end (delivered to this call, as wait delivers it) or
// yield_after, and answers the running job with what it wrote since the
// write.
func runInput(c *toolCall, a *inputArgs) (answer, error) {
	j := c.job(a.JobID)
	clamped := clamps{}
	yieldAfter, err := inputYield(c, a, clamped)
	if err != nil {
		return nil, err
	}
	if yieldAfter == 0 {
		if err := j.input(c.waiter, a.Data, a.Close); err != nil {
			return nil, err
		}
		return resultAnswer(statusOf(j)), nil
	}
	mark := outputMarkOf(j) // before the write: the answer may come before the write returns
	watch := newAnswerWatch(j, len(a.Data))
	if err := j.input(c.waiter, a.Data, a.Close); err != nil {
		return nil, err
	}
	opts := awaitOptions{deadline: time.Now().Add(yieldAfter), stopEarly: watch, stopEvery: untilLookInterval}
	delivered, _, err := c.reg.await(c.waiter, []*job{j}, opts)
	if err != nil {
		return nil, err
	}
	if delivered[j.id] != nil {
		if err := c.roomForReply(); err != nil {
			c.reg.undeliver(j) // cancelled: the result goes back for a wait, as in runWait
			return nil, err
		}
		c.reg.cwd.delivered(c.cfg, j.id)
		return clamped.on(resultAnswer(resultWithin(j, c.replyBudget()))), nil
	}
	r := &resultJSON{JobID: j.id, State: stateRunning, WaitingForInput: watch.readingAgain(), Recent: recentSince(j, mark)}
	return clamped.on(recentWithin(c, resultAnswer(r))), nil
}

// inputAnswerDefault is input's yield_after under the agent profile when
// the call gives none: long enough for a REPL's or a prompt's answer,
// short enough that a busy job costs the model little.
const inputAnswerDefault = 2 * time.Second

// inputYield is how long an input waits for the job's answer: the call's
// yield_after (bounded, see clamps.bound), else inputAnswerDefault under
// the agent profile, else 0: the write alone, as 1.0 answers it.
func inputYield(c *toolCall, a *inputArgs, clamped clamps) (time.Duration, error) {
	def := time.Duration(0)
	if c.dialect.agent {
		def = inputAnswerDefault
	}
	d, err := optionalSeconds("yield_after", a.YieldAfter, def, true)
	if err != nil {
		return 0, err
	}
	return clamped.bound(c.cfg, "yield_after", d, a.YieldAfter != nil), nil
}

// clamps is what a call's waits were lowered to by MCP_EXEC_MAX_YIELD, in
// seconds by argument name; a result says so as "clamped".
type clamps map[string]float64

// bound is d, a wait the call asks for (given: by argument name; else a
// default), no longer than MCP_EXEC_MAX_YIELD, so that a call never
// outlives its host's request time-out. A given argument that was lowered
// is recorded; a default is lowered silently, as nobody asked for it.
func (cs clamps) bound(cfg *config, name string, d time.Duration, given bool) time.Duration {
	if cfg.maxYield <= 0 || d <= cfg.maxYield {
		return d
	}
	if given {
		cs[name] = cfg.maxYield.Seconds()
	}
	return cfg.maxYield
}

// on is a with the clamps said in each of its results (wait: every
// entry; a yielded execute: whichever way it is answered).
func (cs clamps) on(a answer) answer {
	if len(cs) == 0 {
		return a
	}
	switch a := a.(type) {
	case jsonAnswer:
		for _, r := range a.results {
			r.Clamped = cs
		}
		return a
	case yieldedAnswer:
		now, later := a.now, a.later
		a.now = func() answer { return cs.on(now()) }
		a.later = func() (answer, error) {
			b, err := later()
			if err != nil {
				return nil, err
			}
			return cs.on(b), nil
		}
		return a
	}
	return a
}

// runKill is the kill tool: it signals a held job's tree per the call's
// plan and answers whether it died; a job that died is delivered to it.
func runKill(c *toolCall, a *killArgs) (answer, error) {
	plan := killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: 5 * time.Second}
	if a.Timeout != nil {
		plan.wait = secondsToDuration(float64(*a.Timeout))
	}
	if a.Signal != nil {
		plan.signals = []syscall.Signal{*a.Signal}
		if *a.Signal == assured {
			plan.signals = []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
		}
	}
	j := c.job(a.JobID)
	lingering := c.reg.isLingering(j) // its result went out before: no result again
	out, err := c.reg.kill(c.waiter, j, plan)
	if err != nil {
		return nil, err
	}
	k := &killJSON{JobID: j.id, Terminated: out.terminated, AlreadyTerminated: out.alreadyTerminated,
		SignalSent: int(out.sent), Escalated: out.escalated}
	if lingering {
		// Only zombies about to be reaped can keep a cgroup populated
		// when no live process is left: nothing of the tree runs.
		k.Terminated = out.terminated || len(out.left) == 0
		if k.Terminated {
			c.reg.unlinger(j)
		} else {
			k.State = j.outcome().state
			k.Detail = out.survivors
			k.Survivors, _ = survivorsOf(out.left)
		}
		return wireValue(k), nil
	}
	if out.terminated {
		if err := c.roomForReply(); err != nil {
			c.reg.undeliver(j) // cancelled: the result goes back for a wait, as in runWait
			return nil, err
		}
		r := resultWithin(j, c.replyBudget())
		k.Result = r.onWire()
		return jsonAnswer{body: k, results: []*resultJSON{r}}, nil
	}
	k.State, k.Detail = j.outcome().state, out.survivors
	return wireValue(k), nil
}

// runListJobs answers {"jobs": [{"job_id", "state"}, ...]}. It writes the
// JSON itself: ids are digits and states plain words, and a reflective
// encoder took most of the time of a list of 10,000 jobs.
func runListJobs(c *toolCall, _ *noArgs) (answer, error) {
	if err := c.roomForReply(); err != nil { // no output in it, but up to the reply budget of ids
		return nil, err
	}
	jobs := c.reg.list()
	var groups map[int][]procInfo // read once, and only if a job runs
	for _, j := range jobs {
		if !j.terminal() {
			groups = processGroups()
			break
		}
	}
	// The reply budget holds: past it the list stops, oldest jobs first,
	// and says how many it left out. Every byte here is ASCII, and a quote
	// takes two once escaped into the reply.
	room := c.replyBudget() - c.cost().of([]byte(`{"jobs":[],"omitted":9999999999}`))
	b := make([]byte, 0, 16+len(jobs)*40)
	b = append(b, `{"jobs":[`...)
	omitted := 0
	cost := c.cost()
	for i, j := range jobs {
		mark := len(b)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"job_id":`...)
		b = appendJSONString(b, j.id)
		b = append(b, `,"state":"`...)
		// One look at done per job: a finished job reads its outcome as it
		// is, with no copy and no look at input.
		ended := j.terminal()
		state, survivors, waiting := stateRunning, 0, false
		if ended {
			state, survivors = j.final.state, len(j.final.survivors)
		} else {
			waiting = j.waitingForInputAmong(groups[j.pid])
		}
		b = append(b, state...)
		b = append(b, '"')
		if waiting {
			b = append(b, `,"waiting_for_input":true`...)
		}
		if survivors > 0 {
			b = append(append(b, `,"survivors":`...), strconv.Itoa(survivors)...)
		}
		if !ended && j.treeReports { // the agent profile's running entries name their ports
			if l := j.listeningJSON(); l != nil {
				b = append(append(b, `,"listening":`...), l...)
			}
		}
		recentAt := len(b)        // where the entry's recent starts, if it has one
		if waiting && j.prompts { // as markWaiting says
			recent := recentOf(j)
			if c.dialect.view().plain {
				recent = recent.plain()
			}
			if recent != nil {
				text, _ := marshal(recent) // two strings: cannot fail
				b = append(append(b, `,"recent":`...), text...)
			}
		}
		b = append(b, '}')
		spent := cost.of(b[mark:])
		if spent > room && recentAt < len(b)-1 {
			b = append(b[:recentAt], '}') // the newest lines go before a job does
			spent = cost.of(b[mark:])
		}
		if room -= spent; room < 0 {
			b, omitted = b[:mark], len(jobs)-i
			break
		}
	}
	b = append(b, ']')
	if omitted > 0 {
		b = append(b, `,"omitted":`...)
		b = strconv.AppendInt(b, int64(omitted), 10)
	}
	if omitted == 0 {
		b = appendLingering(b, c.reg.lingeringJobs(), room)
	}
	return toolText(append(b, '}')), nil
}

// appendLingering appends list_jobs' "lingering" member for jobs, the
// lingering jobs oldest first, as far as room (bytes) goes; nothing when
// none is still lingering.
func appendLingering(b []byte, jobs []*job, room int) []byte {
	mark := len(b)
	b = append(b, `,"lingering":[`...)
	n := 0
	for _, j := range jobs {
		left := j.treeNow()
		if len(left) == 0 {
			continue // emptied since: its watch lets it go
		}
		entry := len(b)
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"job_id":`...)
		b = appendJSONString(b, j.id)
		// Its processes are its tree as read now, as status says: on
		// process groups the group alone misses a setsid daemon.
		b = append(b, `,"procs":`...)
		b = strconv.AppendInt(b, int64(len(left)), 10)
		b = append(b, `,"survivors":`...)
		b = strconv.AppendInt(b, int64(len(left)), 10)
		if l := j.listeningJSON(); l != nil {
			b = append(append(b, `,"listening":`...), l...)
		}
		b = append(b, '}')
		if room -= 2 * (len(b) - entry); room < 0 {
			b = b[:entry]
			break
		}
		n++
	}
	if n == 0 {
		return b[:mark]
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string. A job id is a number or
// plain letters, copied as it is between quotes; any other string is
// quoted as it was before (strconv's quoting, which JSON reads alike for
// printable ASCII).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if quotedASCII[s[i]] != 1 {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// jobsContract is what the jobs set asks of its jobs: numbered ids, and
// events as 1.0 tells them.
var jobsContract jobContract = jobsSetContract{}

// jobsSetContract is the jobs set's jobContract.
type jobsSetContract struct{}

// jobID leaves the registry's numbering.
func (jobsSetContract) jobID(uint64, bool) (string, bool) { return "", false }

// jobEvent is jobEventParams.
func (jobsSetContract) jobEvent(cfg *config, j *job, event string) map[string]any {
	return jobEventParams(cfg, j, event)
}

// jobEventParams is the notifications/job params of a jobs-set job's start
// or end, or nil when none is sent: only with MCP_EXEC_JOB_EVENTS.
func jobEventParams(cfg *config, j *job, event string) map[string]any {
	if !cfg.jobEvents {
		return nil
	}
	params := map[string]any{"job_id": j.id, "event": event, "command": j.command,
		"runtime_ms": time.Since(j.started).Milliseconds()}
	o := j.outcome()
	params["state"] = o.state
	if event == "started" {
		params["state"] = stateRunning // it may have ended already: its end is told next
	}
	if event == "finished" {
		params["exit_code"] = o.exitCode
		if o.signal > 0 {
			params["signal"] = signalWords(o.signal)
		}
	}
	return params
}
