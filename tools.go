package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// toolText is a successful tools/call result: one text item holding a JSON
// document. encodeReply writes it straight into the reply line, so a big
// result is escaped once into one buffer of the right size instead of
// passing through a string and a second encoder.
type toolText []byte

// toolResult is the tools/call result shape.
type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolFailure is a tool error result with a plain-English message.
func toolFailure(err error) toolResult {
	return toolResult{Content: []textContent{{Type: "text", Text: err.Error()}}, IsError: true}
}

// toolCall is one tools/call on its way through a handler: the session's
// jobs and settings, how the call waits, and the jobs its arguments name.
type toolCall struct {
	reg    *registry
	cfg    *config
	waiter *waiter
	jobs   map[jobID]*job // looked up as the call was read; see holdJobs
}

// job is the held job that id names.
func (c *toolCall) job(id jobID) *job { return c.jobs[id] }

// holdJobs looks up every job the bound args name (arguments of type jobID
// and []jobID), under one lock. It runs as the call is read, before the
// call goes to its own goroutine, so calls hold jobs in the order the
// client sent them: a kill sent right behind a wait cannot deliver the job
// before the wait has it.
func (c *toolCall) holdJobs(params []param, args reflect.Value) error {
	var ids []string
	for _, p := range params {
		switch v := args.Field(p.field).Interface().(type) {
		case jobID:
			ids = append(ids, string(v))
		case []jobID:
			for _, id := range v {
				ids = append(ids, string(id))
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	jobs, err := c.reg.lookupAll(ids)
	if err != nil {
		return err
	}
	c.jobs = make(map[jobID]*job, len(jobs))
	for i, j := range jobs {
		c.jobs[jobID(ids[i])] = j
	}
	return nil
}

// prepareTool readies tool name with raw arguments (a JSON object, or nil
// for none) and returns the run that answers the call. It runs as the call
// is read: arguments are bound and the jobs they name are held now (see
// holdJobs), the work happens when run is called. An unknown tool wraps
// errUnknownTool and a malformed arguments object errBadParams; a run
// returns errCancelled or a result, a tool error result for anything about
// argument values or job state.
func prepareTool(c *toolCall, name string, args json.RawMessage) (run func() (any, error), err error) {
	t, ok := toolsByName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s (the tools are %s)", errUnknownTool, name, strings.Join(toolNames(), ", "))
	}
	raw := map[string]json.RawMessage{}
	if args != nil && !isNull(args) {
		if raw, err = decodeObject(args); err != nil {
			return nil, fmt.Errorf("%w: arguments: %v", errBadParams, err)
		}
	}
	handle, failed := t.prepare(c, raw)
	if failed != nil {
		return func() (any, error) { return toolFailure(failed), nil }, nil
	}
	return func() (any, error) { return toolReply(handle()) }, nil
}

// toolReply turns what a handler returned into the tools/call result.
func toolReply(res any, err error) (any, error) {
	if errors.Is(err, errCancelled) {
		return nil, err
	}
	if err != nil {
		return toolFailure(err), nil
	}
	text, ok := res.(json.RawMessage) // already encoded by the handler
	if !ok {
		if text, err = marshal(res); err != nil {
			return nil, err
		}
	}
	return toolText(text), nil
}

// toolSpec is one tool: its published shape and its handler.
type toolSpec struct {
	name        string
	description string
	docs        map[string]string // each argument's description, by name
	readOnly    bool              // annotations: does not change any job
	destructive bool              // annotations: may end processes
	argsType    reflect.Type      // the struct a call's arguments bind into
	params      []param
	prepare     func(c *toolCall, raw map[string]json.RawMessage) (func() (any, error), error)
}

// newTool completes spec with the parameters of args struct A and a prepare
// that binds a call's arguments into an A and holds the jobs they name, for
// handle to run. Every parameter needs
// a doc and every doc a parameter; a mismatch panics when the table is built.
func newTool[A any](spec toolSpec, handle func(c *toolCall, a *A) (any, error)) toolSpec {
	spec.argsType = reflect.TypeFor[A]()
	spec.params = paramsOf(spec.argsType)
	if len(spec.docs) != len(spec.params) {
		panic(fmt.Sprintf("tool %s: %d argument docs for %d arguments", spec.name, len(spec.docs), len(spec.params)))
	}
	for _, p := range spec.params {
		if spec.docs[p.name] == "" {
			panic(fmt.Sprintf("tool %s: argument %s has no doc", spec.name, p.name))
		}
	}
	spec.prepare = func(c *toolCall, raw map[string]json.RawMessage) (func() (any, error), error) {
		a := new(A)
		args := reflect.ValueOf(a).Elem()
		if err := bindArgs(spec.name, spec.params, raw, args); err != nil {
			return nil, err
		}
		if err := c.holdJobs(spec.params, args); err != nil {
			return nil, err
		}
		return func() (any, error) { return handle(c, a) }, nil
	}
	return spec
}

// The arguments of each tool.
type (
	executeArgs struct {
		Command    string            `arg:"command,required"`
		Cwd        string            `arg:"cwd"`
		Env        map[string]string `arg:"env"`
		Stdin      string            `arg:"stdin"`
		CloseStdin bool              `arg:"close_stdin"`
		Nowait     bool              `arg:"nowait"`
		Capture    *capturePolicy    `arg:"capture"`
	}
	waitArgs struct {
		JobIDs  []jobID  `arg:"job_ids,required"`
		Timeout *seconds `arg:"timeout"`
	}
	statusArgs struct {
		JobID jobID `arg:"job_id,required"`
	}
	outputArgs struct {
		JobID  jobID      `arg:"job_id,required"`
		Stdout streamSpec `arg:"stdout"`
		Stderr streamSpec `arg:"stderr"`
	}
	inputArgs struct {
		JobID jobID  `arg:"job_id,required"`
		Data  string `arg:"data"`
		Close bool   `arg:"close"`
	}
	killArgs struct {
		JobID   jobID           `arg:"job_id,required"`
		Signal  *syscall.Signal `arg:"signal"`
		Timeout *seconds        `arg:"timeout"`
	}
	listJobsArgs struct{}
)

const streamDoc = `"none" (default), "all" (the retained window), {"tail": N} (last N lines), or {"from": P, "length": N, "unaligned": false} (bytes from absolute offset P; the next page is from = offset + bytes)`

// tools is the tool table, in the order tools/list shows them.
var tools = []toolSpec{
	newTool(toolSpec{
		name: "execute",
		description: "Run a shell command ($SHELL -c) as a job in its own process group. " +
			"By default blocks until it exits and returns {job_id, state, exit_code, signal?, stdout?, stderr?}; that delivery forgets the job. " +
			"With nowait:true returns {job_id, state:\"running\"} at once: collect it later with wait, watch it with status/output, feed it with input, stop it with kill. " +
			"Each stream keeps its last MCP_EXEC_MAX_OUTPUT_BYTES bytes; slices report offset, bytes, total_bytes and truncated. " +
			"Default capture returns stdout on success and stderr on error. stdin is an open pipe unless close_stdin is true.",
		docs: map[string]string{
			"command":     "Shell command line, run as $SHELL -c <command>.",
			"cwd":         "Working directory (default: the server's).",
			"env":         "Variables layered over the server's environment.",
			"stdin":       "Text written to the job's stdin right away.",
			"close_stdin": "Close stdin (EOF) after writing stdin. Default false.",
			"nowait":      "Return the job_id immediately instead of waiting for the exit.",
			"capture":     `What the final result includes: {"on_success": SPEC, "on_error": SPEC} where SPEC is "stdout", "stderr", "all", "none" or {"stdout": STREAM, "stderr": STREAM}; STREAM is ` + streamDoc + `. Default {"on_success":"stdout","on_error":"stderr"}.`,
		},
		destructive: true,
	}, runExecute),
	newTool(toolSpec{
		name: "wait",
		description: "Block until any of the listed jobs finishes, or the timeout. Returns an array in job_ids order: finished jobs carry their full result (per their capture policy) and are forgotten; running ones are {job_id, state:\"running\"}. " +
			"timeout <= 0 polls without blocking.",
		docs: map[string]string{
			"job_ids": "Jobs to watch (non-empty).",
			"timeout": "Seconds to block (default MCP_EXEC_DEFAULT_TIMEOUT); <= 0 polls.",
		},
		readOnly: true,
	}, runWait),
	newTool(toolSpec{
		name:        "status",
		description: "A job's state: {job_id, state, exit_code?, signal?, start_error?}. Never forgets the job.",
		docs:        map[string]string{"job_id": "The job."},
		readOnly:    true,
	}, runStatus),
	newTool(toolSpec{
		name: "output",
		description: "Read a job's captured output, live or after exit, without forgetting it. Returns the status fields plus the selected slices " +
			"{data, offset, bytes, total_bytes, truncated, dropped_bytes?}. Offsets are absolute bytes; page with from = offset + bytes.",
		docs: map[string]string{
			"job_id": "The job.",
			"stdout": "Slice of stdout: " + streamDoc + ".",
			"stderr": "Slice of stderr: " + streamDoc + ".",
		},
		readOnly: true,
	}, runOutput),
	newTool(toolSpec{
		name:        "input",
		description: "Write to a running job's stdin; close:true sends EOF after the data. Returns the job's status. Blocks while the pipe is full.",
		docs: map[string]string{
			"job_id": "The job.",
			"data":   "Text to write.",
			"close":  "Close stdin after writing.",
		},
	}, runInput),
	newTool(toolSpec{
		name: "kill",
		description: "Signal a job's whole process group and wait for observed death. " +
			"If the tree died: {terminated:true, signal_sent, result} and the job is forgotten. If it survived: {terminated:false, detail} and the job stays. " +
			"signal ASSURED sends TERM, then KILL if the tree outlives the timeout.",
		docs: map[string]string{
			"job_id":  "The job.",
			"signal":  `TERM (default), KILL, INT, HUP, a number such as "9", or ASSURED.`,
			"timeout": "Seconds to wait for death after each signal (default 5; 0 = do not wait).",
		},
		destructive: true,
	}, runKill),
	newTool(toolSpec{
		name:        "list_jobs",
		description: "Every job that wait can still deliver, oldest first: {jobs: [{job_id, state}]}.",
		readOnly:    true,
	}, runListJobs),
}

// toolsByName indexes tools.
var toolsByName = func() map[string]*toolSpec {
	m := map[string]*toolSpec{}
	for i := range tools {
		m[tools[i].name] = &tools[i]
	}
	return m
}()

// toolNames lists the tools in table order.
func toolNames() []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}

// toolList is the tools/list result, built once.
var toolList = func() map[string]any {
	list := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		list = append(list, map[string]any{
			"name":        t.name,
			"description": t.description,
			"inputSchema": schemaOf(t.params),
			"annotations": map[string]any{
				"readOnlyHint":    t.readOnly,
				"destructiveHint": t.destructive,
				"idempotentHint":  t.readOnly,
				"openWorldHint":   false,
			},
		})
	}
	return map[string]any{"tools": list}
}()

// resultJSON is the wire form of a job result or status.
type resultJSON struct {
	JobID      string     `json:"job_id"`
	State      string     `json:"state"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	StartError string     `json:"start_error,omitempty"`
	Stdout     *sliceJSON `json:"stdout,omitempty"`
	Stderr     *sliceJSON `json:"stderr,omitempty"`
}

// sliceJSON is the wire form of a stream slice. Data holds raw bytes; the
// JSON encoder replaces invalid UTF-8 with U+FFFD, so the reply stays valid
// while offset/bytes/total_bytes count raw bytes.
type sliceJSON struct {
	Data         string `json:"data"`
	Offset       int64  `json:"offset"`
	Bytes        int    `json:"bytes"`
	TotalBytes   int64  `json:"total_bytes"`
	Truncated    bool   `json:"truncated"`
	DroppedBytes *int64 `json:"dropped_bytes,omitempty"`
}

// statusOf is the job's status object.
func statusOf(j *job) *resultJSON {
	o := j.outcome()
	r := &resultJSON{JobID: j.id, State: o.state, StartError: o.startError}
	if o.state != stateRunning {
		code := o.exitCode
		r.ExitCode = &code
		if o.signal > 0 {
			r.Signal = signalWords(o.signal)
		}
	}
	return r
}

// resultOf is a finished job's result with the slices its capture policy
// selects for how it ended.
func resultOf(j *job) *resultJSON {
	r := statusOf(j)
	c := j.policy.onSuccess
	if r.State != stateSuccess {
		c = j.policy.onError
	}
	r.Stdout, r.Stderr = sliceOf(j.stdout, c.stdout), sliceOf(j.stderr, c.stderr)
	return r
}

// sliceOf reads spec from w; nil for "none".
func sliceOf(w *window, spec streamSpec) *sliceJSON {
	if spec.kind == streamNone {
		return nil
	}
	s := w.serve(spec)
	out := &sliceJSON{Data: string(s.data), Offset: s.offset, Bytes: len(s.data), TotalBytes: s.total, Truncated: s.truncated}
	if s.truncated {
		out.DroppedBytes = &s.dropped
	}
	return out
}

func runExecute(c *toolCall, a *executeArgs) (any, error) {
	if a.Command == "" {
		return nil, fmt.Errorf("%w: command is required and must not be empty", errInvalid)
	}
	policy := defaultCapture
	if a.Capture != nil {
		policy = *a.Capture
	}
	j, started := c.reg.start(startRequest{command: a.Command, dir: a.Cwd, env: a.Env,
		stdin: a.Stdin, closeStdin: a.CloseStdin, policy: policy})
	if !started {
		return resultOf(j), nil
	}
	if a.Nowait {
		return &resultJSON{JobID: j.id, State: stateRunning}, nil
	}
	// The execute holds its job from the start, so it gets the result even
	// if a kill or a wait that guessed the id took it first.
	delivered, err := c.reg.await(c.waiter, []*job{j}, time.Time{}, false)
	if errors.Is(err, errCancelled) {
		// The caller never learned the job_id: nobody can collect it.
		c.reg.forget(j)
		j.teardown(teardownGraceDuration)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return resultOf(delivered[j.id]), nil
}

func runWait(c *toolCall, a *waitArgs) (any, error) {
	timeout := c.cfg.defaultTimeout
	if a.Timeout != nil {
		timeout = secondsToDuration(float64(*a.Timeout))
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	jobs := make([]*job, len(a.JobIDs))
	for i, id := range a.JobIDs {
		jobs[i] = c.job(id)
	}
	delivered, err := c.reg.await(c.waiter, jobs, deadline, timeout <= 0)
	if err != nil {
		return nil, err
	}
	entries := make([]*resultJSON, len(jobs))
	for i, j := range jobs {
		if delivered[j.id] != nil {
			entries[i] = resultOf(j)
		} else {
			entries[i] = &resultJSON{JobID: j.id, State: stateRunning}
		}
	}
	return entries, nil
}

func runStatus(c *toolCall, a *statusArgs) (any, error) {
	return statusOf(c.job(a.JobID)), nil
}

func runOutput(c *toolCall, a *outputArgs) (any, error) {
	j := c.job(a.JobID)
	r := statusOf(j)
	r.Stdout, r.Stderr = sliceOf(j.stdout, a.Stdout), sliceOf(j.stderr, a.Stderr)
	return r, nil
}

func runInput(c *toolCall, a *inputArgs) (any, error) {
	j := c.job(a.JobID)
	if err := j.input(c.waiter, a.Data, a.Close); err != nil {
		return nil, err
	}
	return statusOf(j), nil
}

// killJSON is the wire form of kill's answer.
type killJSON struct {
	JobID             string      `json:"job_id"`
	Terminated        bool        `json:"terminated"`
	AlreadyTerminated bool        `json:"already_terminated,omitempty"`
	SignalSent        int         `json:"signal_sent,omitempty"`
	Escalated         bool        `json:"escalated,omitempty"`
	State             string      `json:"state,omitempty"`
	Detail            string      `json:"detail,omitempty"`
	Result            *resultJSON `json:"result,omitempty"`
}

func runKill(c *toolCall, a *killArgs) (any, error) {
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
	out, err := c.reg.kill(c.waiter, j, plan)
	if err != nil {
		return nil, err
	}
	k := &killJSON{JobID: j.id, Terminated: out.terminated, AlreadyTerminated: out.alreadyTerminated,
		SignalSent: int(out.sent), Escalated: out.escalated}
	if out.terminated {
		k.Result = resultOf(j)
	} else {
		k.State, k.Detail = j.outcome().state, out.survivors
	}
	return k, nil
}

// runListJobs answers {"jobs": [{"job_id", "state"}, ...]}. It writes the
// JSON itself: ids are digits and states plain words, and a reflective
// encoder took most of the time of a list of 10,000 jobs.
func runListJobs(c *toolCall, _ *listJobsArgs) (any, error) {
	jobs := c.reg.list()
	b := make([]byte, 0, 16+len(jobs)*40)
	b = append(b, `{"jobs":[`...)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"job_id":`...)
		b = strconv.AppendQuote(b, j.id)
		b = append(b, `,"state":"`...)
		b = append(b, j.outcome().state...)
		b = append(b, `"}`...)
	}
	return json.RawMessage(append(b, "]}"...)), nil
}
