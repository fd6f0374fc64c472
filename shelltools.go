package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// The shell set: the Shell toolkit's six tools, PREFIX_run, _start, _poll,
// _output, _kill and _allowed (MCP_EXEC_TOOL_PREFIX, default sh). Programs
// run from an argv, never through a shell; MCP_EXEC_ALLOW is its exact-string
// allow list (unset: any program). Results are JSON objects with the
// toolkit's keys, sorted; exit is the status, 128+signal, or -1 when the
// program could not be spawned. Output is read through the toolkit's budget
// (shellview.go); background jobs are polled, never collected, and
// forgotten after MCP_EXEC_JOB_TTL or beyond MCP_EXEC_MAX_FINISHED.

// shellRunTimeout is sh_run's timeout when neither the call nor
// MCP_EXEC_TIME_LIMIT gives one.
const shellRunTimeout = 30 * time.Second

type shellRunArgs struct {
	Command string   `arg:"command,required"`
	Args    argList  `arg:"args"`
	Cwd     string   `arg:"cwd"`
	Stdin   *string  `arg:"stdin"`
	Timeout *seconds `arg:"timeout"`
}

type shellJobArgs struct {
	Job string `arg:"job,required"`
}

type shellOutputArgs struct {
	Job    string `arg:"job,required"`
	Cursor string `arg:"cursor"`
}

const shellCommandDocs = "Program to run, spelled exactly as the allow list has it (a bare name is looked up in PATH). No shell: no quoting, globbing, pipes or variables."

// shellRunDocs are the argument docs of run and start.
var shellRunDocs = map[string]string{
	"command": shellCommandDocs,
	"args":    "Arguments, one item each (strings, or numbers); no NUL bytes.",
	"cwd":     "Working directory.",
	"stdin":   "Text written to the program's stdin, which is then closed; omitted, it reads end of file at once.",
	"timeout": "Seconds before the program is killed (SIGKILL, exit 137, timed-out true)",
}

// readHints are the toolkit's annotations of the tools that only read.
var readHints = map[string]any{"readOnlyHint": true, "idempotentHint": true}

// shellTools is the shell set's tool table under cfg's prefix.
func shellTools(cfg *config) []toolSpec {
	p := cfg.toolPrefix + "_"
	runDocs, startDocs := maps.Clone(shellRunDocs), maps.Clone(shellRunDocs)
	runDocs["timeout"] += "; default {shell_timeout}."
	startDocs["timeout"] += "; default none."
	return []toolSpec{
		newTool(toolSpec{name: p + "run", title: "Run a program",
			description: "Run a program (argv, no shell) and wait for it. Returns JSON {exit, stdout, stderr, timed-out}: exit is its status, 128+signal, or -1 if it could not be spawned (reason on stderr). " +
				"Each stream keeps {shell_bytes} and {shell_lines} lines: past that, the first quarter, a [... N bytes / M lines dropped ...] line and the last three quarters, with truncated {stream: {bytes, lines}}. " +
				"For longer work use " + p + "start.{shell_allow}",
			docs: runDocs, hints: map[string]any{}, taskSupport: true}, runShellRun),
		newTool(toolSpec{name: p + "start", title: "Start a background job",
			description: "Start a program (same arguments as " + p + "run) as a background job and return {job, state} at once; follow it with " + p + "poll and " + p + "output, stop it with " + p + "kill. " +
				"Finished jobs stay readable for {ttl} (the {finished} most recent).{max_jobs}",
			docs: startDocs, hints: map[string]any{}}, runShellStart),
		newTool(toolSpec{name: p + "poll", title: "Poll a job",
			description: "A job's progress without its output: {exit, job, killed, runtime, started-at, state (running, exited or killed), stdout-bytes, stderr-bytes, timed-out}.",
			docs:        map[string]string{"job": "The job id " + p + "start returned."}, hints: readHints}, runShellPoll),
		newTool(toolSpec{name: p + "output", title: "Read a job's output",
			description: "A job's output {job, state, stdout, stderr, cursor, eof}. Without cursor: the whole run so far, as " + p + "run shows it. " +
				"With the cursor of the previous call: only what came since (a dropped marker where the budget rolled past it). eof: finished and read to the end.",
			docs: map[string]string{"job": "The job id " + p + "start returned.",
				"cursor": "The cursor a previous call returned, exactly as given."}, hints: readHints}, runShellOutput),
		newTool(toolSpec{name: p + "kill", title: "Kill a job",
			description: "Kill a job's process group with SIGKILL and return {job, state, killed} at once; poll for its final state. A finished job is left as it is.",
			docs:        map[string]string{"job": "The job id " + p + "start returned."}, hints: map[string]any{}}, runShellKill),
		newTool(toolSpec{name: p + "allowed", title: "List allowed programs",
			description: "The programs " + p + "run and " + p + "start may run, one per line, sorted.",
			docs:        map[string]string{}, hints: readHints}, runShellAllowed),
	}
}

// shellInstructions is the shell set's advice to the model.
func shellInstructions(cfg *config, _ dialect) string {
	p := cfg.toolPrefix + "_"
	return "Run programs (argv, no shell) with " + p + "run; for work longer than a call, " + p + "start then " + p + "poll and " + p + "output with its cursor. " + p + "allowed lists what may run."
}

// shellRunDefault is sh_run's timeout when the call gives none.
func shellRunDefault(cfg *config) time.Duration {
	if cfg.timeLimit > 0 {
		return cfg.timeLimit
	}
	return shellRunTimeout
}

// shellBudgetOf is the shell set's output budget per stream under cfg.
func shellBudgetOf(cfg *config) shellBudget {
	return shellBudget{int64(cfg.shellOutputBytes), int64(cfg.shellOutputLines)}
}

// shellRun checks a run or start call and says how its job runs.
func shellRun(cfg *config, a *shellRunArgs, background bool) (jobRun, error) {
	if a.Command == "" || strings.ContainsRune(a.Command, 0) {
		return jobRun{}, errors.New("command must be a non-empty string without NUL bytes")
	}
	if cfg.allow != nil && !slices.Contains(cfg.allow, a.Command) {
		// The shell set's own words, pinned by its contract; not errRefused,
		// which would change how the reply maps it.
		//lint:ignore ST1005 the shell set's texts are pinned by its wire contract, capital first
		return jobRun{}, refusedBy("MCP_EXEC_ALLOW", fmt.Errorf("Command '%s' is not allowlisted. Allowed: %s", a.Command, strings.Join(sortedAllow(cfg), ", ")))
	}
	def := time.Duration(0) // a background job has no timeout unless asked
	if !background {
		def = shellRunDefault(cfg)
	}
	timeout, err := callTimeLimit(cfg, "timeout", a.Timeout, def)
	if err != nil {
		return jobRun{}, err
	}
	if err := checkCwd(a.Cwd); err != nil {
		return jobRun{}, err
	}
	b := shellBudgetOf(cfg)
	req := startRequest{argv: append([]string{a.Command}, a.Args...), dir: a.Cwd, closeStdin: true, policy: cfg.capture,
		contract: shellContract, silent: !background, keepFailed: background,
		keepHead: int(b.bytes / 4), keepTail: int(b.bytes - b.bytes/4)}
	if a.Stdin != nil {
		req.stdin = *a.Stdin
	}
	return jobRun{startRequest: req, timeLimit: timeout, killGrace: killAtOnce, nowait: background}, nil
}

// shellRunJob runs a run or start call's job. One that could not be
// spawned comes back finished, with why on its stderr, for run and output
// alike.
func shellRunJob(c *toolCall, run jobRun) (ranJob, error) {
	ran, err := c.runJob(run)
	if errors.Is(err, errTooManyJobs) {
		var ids []string
		for _, r := range c.reg.runningJobs() {
			ids = append(ids, r.id)
		}
		//lint:ignore ST1005 the shell set's texts are pinned by its wire contract, capital first
		return ran, fmt.Errorf("Too many jobs are running (at most %d, MCP_EXEC_MAX_JOBS): %s. Wait for one to finish or kill one first",
			c.cfg.maxJobs, strings.Join(ids, ", "))
	}
	if err == nil && !ran.started {
		_, _ = ran.job.stderr.Write([]byte(spawnFailure(run.argv[0], ran.job.final))) // never fails
	}
	return ran, err
}

// shellContract is what the shell set asks of its jobs: the toolkit's ids
// and events. Only jobs started under it are the set's to see.
var shellContract jobContract = shellSetContract{}

// shellSetContract is the shell set's jobContract.
type shellSetContract struct{}

// jobID is shellJobName.
func (shellSetContract) jobID(seq uint64, unguessable bool) (string, bool) {
	return shellJobName(seq, unguessable), true
}

// jobEvent is shellEvent.
func (shellSetContract) jobEvent(cfg *config, j *job, event string) map[string]any {
	return shellEvent(cfg, j, event)
}

// shellJobName names a shell job as the toolkit does, j<N>-<random>; the
// random part is long enough to be unguessable where clients could try
// each other's ids.
func shellJobName(seq uint64, unguessable bool) string {
	n := 6
	if unguessable {
		n = 26 // 26 base-36 digits: over 128 bits
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	id := []byte("j" + strconv.FormatUint(seq, 10) + "-")
	var r [1]byte
	for range n {
		for r[0] = 255; r[0] >= 252; { // 252 = 7*36: the bytes above would favour the first digits
			_, _ = rand.Read(r[:]) // never fails: crypto/rand panics rather than return an error
		}
		id = append(id, digits[int(r[0])%len(digits)])
	}
	return string(id)
}

// sortedAllow is the allow list in byte order.
func sortedAllow(cfg *config) []string {
	return slices.Sorted(slices.Values(cfg.allow))
}

// shellObject is a shell set result: a JSON object whose keys sort as the
// toolkit's do, which is the order encoding/json writes a map's keys in.
type shellObject = map[string]any

// shellDropJSON is what a stream's budget dropped.
type shellDropJSON struct {
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
}

// shellStreams is the part of a run's or output's result that shows j's
// streams from the cursor from, read with budget b: stdout, stderr, what the
// budget dropped, and whether the job ran confined. The reads end at the
// streams' ends; finished says no more will come. It returns the result
// and where the next read starts.
func shellStreams(cfg *config, j *job, from shellCursor, b shellBudget, finished bool) (shellObject, shellCursor) {
	out, errs := readShellStream(j.stdout, from.out, b, finished), readShellStream(j.stderr, from.err, b, finished)
	res := shellObject{"stdout": string(out.text), "stderr": string(errs.text)}
	if cfg.sandbox != sandboxOff || cfg.networkOff {
		res["sandbox"] = map[string]bool{"active": true}
	}
	drops := map[string]shellDropJSON{}
	for name, piece := range map[string]shellPiece{"stdout": out, "stderr": errs} {
		if piece.dropBytes > 0 {
			drops[name] = shellDropJSON{piece.dropBytes, piece.dropLines}
		}
	}
	if len(drops) > 0 {
		res["truncated"] = drops
	}
	return res, shellCursor{out.end, errs.end}
}

// runShellRun is the shell set's run tool: an allowlisted program runs to
// its end (or its time limit) and the answer is its streams as the shell
// set's budget shows them.
func runShellRun(c *toolCall, a *shellRunArgs) (answer, error) {
	run, err := shellRun(c.cfg, a, false)
	if err != nil {
		return nil, c.refusedEarly(startRequest{argv: append([]string{a.Command}, a.Args...), dir: a.Cwd}, err)
	}
	if c.log != nil {
		logger := c.cfg.toolPrefix + "_run"
		run.follow = shellRunStream{log: c.log, logger: logger} // the last batch goes before the result
	}
	ran, err := shellRunJob(c, run)
	if err != nil {
		return nil, err
	}
	j, o := ran.job, ran.job.outcome()
	return wireValue(fitShell(c, func(b shellBudget) shellObject {
		res, _ := shellStreams(c.cfg, j, shellCursor{}, b, true)
		res["exit"], res["timed-out"] = shellExit(o), o.timedOut
		return res
	})), nil
}

// The batches of a run's output streamed to a request that asked for
// messages: at least every interval, at most batch bytes each.
const (
	shellStreamInterval = 250 * time.Millisecond
	shellStreamBatch    = 32 << 10
)

// shellRunStream follows a shell set's run by streaming its output as
// messages from logger.
type shellRunStream struct {
	log    messageLogger
	logger string
}

// followJob is streamShellRun.
func (s shellRunStream) followJob(j *job) func() { return streamShellRun(s.log, s.logger, j) }

// streamShellRun sends j's output as it comes, as info messages
// {"stream", "text"} from logger, and returns finish, which sends what is
// left once the job has ended and returns when all is sent. So the batches
// of a run that ended on its own add up to its output.
func streamShellRun(log messageLogger, logger string, j *job) (finish func()) {
	done, sent := make(chan struct{}), make(chan struct{})
	var at [2]int64 // where each stream's next batch starts; only the goroutine uses it
	flush := func(final bool) {
		for i, s := range []struct {
			name string
			w    *window
		}{{"stdout", j.stdout}, {"stderr", j.stderr}} {
			for {
				read := s.w.readRange(at[i], shellStreamBatch, true, 0)
				b, from := read.data, read.offset
				if !final || len(b) == shellStreamBatch {
					b = trimPartialRune(b) // the rest of the character comes with the next batch
				}
				if len(b) == 0 {
					break
				}
				at[i] = from + int64(len(b))
				log.message("info", logger, map[string]string{"stream": s.name, "text": string(b)})
			}
		}
	}
	go func() {
		defer close(sent)
		tick := time.NewTicker(shellStreamInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				flush(true)
				return
			case <-tick.C:
				flush(false)
			}
		}
	}()
	return func() { close(done); <-sent }
}

// fitShell renders a result with the shell set's budget, halved until the
// reply fits the call's reply budget (escaped control bytes take up to six
// times their size); the result then reports the bytes it dropped.
func fitShell(c *toolCall, render func(b shellBudget) shellObject) shellObject {
	b := shellBudgetOf(c.cfg)
	lines := b.lines
	renderAt := func(bytes int) (shellObject, int) {
		res := render(shellBudget{int64(bytes), lines})
		text, err := marshal(res)
		if err != nil {
			return res, 0
		}
		return res, c.cost().of(text)
	}
	smaller := func(bytes, _ int) int {
		lines = max(lines/2, 10)
		return bytes / 2
	}
	return shrinkToFit(int(b.bytes), shellLeastBytes, c.replyBudget(), renderAt, smaller)
}

// shellLeastBytes is the least budget fitShell cuts a stream to.
const shellLeastBytes = 64

// spawnFailure is the line a run that could not be spawned adds to stderr.
func spawnFailure(command string, o outcome) string {
	if o.startErrno != 0 {
		return fmt.Sprintf("Failed to spawn process %s: %s (error code -%d)", command, o.startErrno.Error(), int(o.startErrno))
	}
	return fmt.Sprintf("Failed to spawn process %s: %s", command, o.startError)
}

// shellExit is the toolkit's exit: the status, 128+signal, or -1 when the
// program never ran.
func shellExit(o outcome) int {
	switch {
	case o.startError != "":
		return -1
	case o.signal > 0:
		return 128 + int(o.signal)
	}
	return o.exitCode
}

// runShellStart is the shell set's start tool: an allowlisted program
// starts in the background and the answer names its job for poll, output
// and kill.
func runShellStart(c *toolCall, a *shellRunArgs) (answer, error) {
	run, err := shellRun(c.cfg, a, true)
	if err != nil {
		return nil, c.refusedEarly(startRequest{argv: append([]string{a.Command}, a.Args...), dir: a.Cwd}, err)
	}
	ran, err := shellRunJob(c, run)
	if err != nil {
		return nil, err
	}
	state := stateRunning
	if !ran.started {
		state = shellState(ran.job)
	}
	return wireValue(map[string]string{"job": ran.job.id, "state": state}), nil
}

// shellJob finds a job of the shell set by id, with the toolkit's errors.
func shellJob(c *toolCall, id string) (*job, error) {
	j, err := c.reg.lookup(id)
	if err == nil && j.contract == shellContract {
		return j, nil
	}
	if gone := (expiredJob{}); errors.As(err, &gone) {
		//lint:ignore ST1005 the shell set's texts are pinned by its wire contract, capital first
		return nil, fmt.Errorf("Job '%s' has expired (%s); start a new job rather than hoping", gone.id, gone.why)
	}
	//lint:ignore ST1005 the shell set's texts are pinned by its wire contract, capital first
	return nil, fmt.Errorf("Unknown job '%s'", clipText(id))
}

// shellState is running, exited or killed: killed when a kill or its
// timeout was sent, even before its status arrives.
func shellState(j *job) string {
	switch {
	case shellKilled(j):
		return "killed"
	case j.terminal():
		return "exited"
	}
	return stateRunning
}

// shellKilled reports whether the server killed j for its caller: by the
// kill tool, or its timeout.
func shellKilled(j *job) bool { return j.killWasSent() || j.hitTimeLimit() }

// shellPollJSON is sh_poll's result; its keys sort as the toolkit's do.
type shellPollJSON struct {
	Exit        *int    `json:"exit"`
	Job         string  `json:"job"`
	Killed      bool    `json:"killed"`
	Runtime     float64 `json:"runtime"`
	StartedAt   string  `json:"started-at"`
	State       string  `json:"state"`
	StderrBytes int64   `json:"stderr-bytes"`
	StdoutBytes int64   `json:"stdout-bytes"`
	TimedOut    bool    `json:"timed-out"`
}

// runShellPoll is the shell set's poll tool: a job's state, runtime and
// start time, without its output.
func runShellPoll(c *toolCall, a *shellJobArgs) (answer, error) {
	j, err := shellJob(c, a.Job)
	if err != nil {
		return nil, err
	}
	res := &shellPollJSON{Job: j.id, State: shellState(j), Killed: shellKilled(j),
		Runtime: seconds3(j.runtime()), StartedAt: j.started.UTC().Format(time.RFC3339)}
	if j.terminal() {
		exit := shellExit(j.final)
		res.Exit, res.TimedOut = &exit, j.final.timedOut
	}
	_, res.StdoutBytes = j.stdout.stats()
	_, res.StderrBytes = j.stderr.stats()
	return wireValue(res), nil
}

// seconds3 is d in seconds, to the millisecond.
func seconds3(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// runShellOutput is the shell set's output tool: what a job wrote from the
// call's cursor (from the start without one) within the budget, the cursor
// to go on from, and eof once the job has finished.
func runShellOutput(c *toolCall, a *shellOutputArgs) (answer, error) {
	j, err := shellJob(c, a.Job)
	if err != nil {
		return nil, err
	}
	var from shellCursor
	if a.Cursor != "" {
		if from, err = parseShellCursor(a.Cursor, j); err != nil {
			return nil, err
		}
	}
	if err := c.roomForReply(); err != nil {
		return nil, err
	}
	finished := j.terminal() // before the read: a finished job's windows hold all it wrote
	return wireValue(fitShell(c, func(b shellBudget) shellObject {
		res, next := shellStreams(c.cfg, j, from, b, finished)
		res["cursor"], res["eof"], res["job"], res["state"] = next.encode(j.id), finished, j.id, shellState(j)
		return res
	})), nil
}

// runShellKill is the shell set's kill tool: KILL to a running job's tree,
// at once and without waiting, as the toolkit's contract has it; the
// answer says whether it was killed and its state now.
func runShellKill(c *toolCall, a *shellJobArgs) (answer, error) {
	j, err := shellJob(c, a.Job)
	if err != nil {
		return nil, err
	}
	if !j.terminal() {
		j.markKillSent()
		if err := j.signal(syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("cannot kill job '%s': %v", j.id, err)
		}
	}
	return wireValue(shellObject{"job": j.id, "killed": shellKilled(j), "state": shellState(j)}), nil
}

// shellEvent is the toolkit's notifications/job params for a shell job's
// start or end: never a byte of its output, nor its arguments.
func shellEvent(cfg *config, j *job, event string) map[string]any {
	if event != "started" && event != "finished" {
		return nil // the toolkit's contract tells a start and an end, nothing else
	}
	params := map[string]any{"job": j.id, "state": "started", "runtime": 0, "logger": cfg.toolPrefix + "_start",
		"command": firstRunes(j.program, commandEventRunes)}
	if event == "finished" {
		params["state"], params["runtime"], params["exit"] = shellState(j), seconds3(j.runtime()), shellExit(j.final)
		if params["state"] == stateRunning {
			params["state"] = "exited" // terminal by now: it is published
		}
	}
	return params
}

// runShellAllowed is the shell set's allowed tool: the programs the
// allowlist lets run, one a line, or a sentence saying any may.
func runShellAllowed(c *toolCall, _ *noArgs) (answer, error) {
	if c.cfg.allow == nil {
		return textResult("Any program may run: no allow list is set (MCP_EXEC_ALLOW)."), nil
	}
	return textResult(strings.Join(sortedAllow(c.cfg), "\n")), nil
}

// shellCursor is a reader's position in both streams of a job.
type shellCursor struct {
	out, err shellPos
}

// cursorKey signs cursors, so only a cursor this process handed out for a
// job is taken back for it: process-wide, drawn once, when the first cursor
// is signed or checked (not at start: a life without the Shell toolkit
// never asks the kernel for randomness), and never written again.
var cursorKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails: crypto/rand panics rather than return an error
	return k
})

// encode is the opaque form of the cursor, bound to job id.
func (c shellCursor) encode(id string) string {
	payload := fmt.Sprintf("%d.%d.%d.%d", c.out.bytes, c.out.lines, c.err.bytes, c.err.lines)
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + cursorMAC(id, payload)
}

// cursorMAC signs payload for job id.
func cursorMAC(id, payload string) string {
	m := hmac.New(sha256.New, cursorKey())
	m.Write([]byte(id + "\x00" + payload))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// parseShellCursor takes back a cursor handed out for j.
func parseShellCursor(s string, j *job) (shellCursor, error) {
	//lint:ignore ST1005 the shell set's texts are pinned by its wire contract, capital first
	bad := fmt.Errorf("Invalid cursor for job '%s': pass back a cursor exactly as the output tool returned it for this job, or none for the whole output", j.id)
	enc, mac, ok := strings.Cut(s, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || !utf8.Valid(raw) || !hmac.Equal([]byte(mac), []byte(cursorMAC(j.id, string(raw)))) {
		return shellCursor{}, bad
	}
	var c shellCursor
	if _, err := fmt.Sscanf(string(raw), "%d.%d.%d.%d", &c.out.bytes, &c.out.lines, &c.err.bytes, &c.err.lines); err != nil {
		return shellCursor{}, bad
	}
	return c, nil
}
