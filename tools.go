package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
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

// textResult is a successful tools/call result of plain text, not JSON.
func textResult(text string) toolResult {
	return toolResult{Content: []textContent{{Type: "text", Text: text}}}
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
	// replyOverhead is what the reply line holds besides the result's
	// escaped text (the session knows the request id); maxReply is the
	// call's max_reply_bytes, 0 when it gave none; structured says the
	// reply also carries the result as structuredContent.
	replyOverhead int
	maxReply      replyBytes
	structured    bool
	// log sends notifications/message at a level on the request's own
	// channel; nil unless a 2026-07-28 request asked for messages.
	log func(level, logger string, data any)
	// room is where the call waits, before it copies job output into its
	// reply, for its client to have room for the reply; nil when the
	// transport bounds nothing (see roomForReply).
	room replyRoom
}

// replyRoom is room for one reply among those waiting for the client to
// read them. take waits until there is room and holds it until the reply
// is sent; it returns errCancelled when the call is cancelled, or its
// session ends, first. Taking it again while held returns at once.
type replyRoom interface {
	take() error
}

// roomForReply waits until the client has room for the call's reply. A
// handler calls it after any blocking and right before it copies job
// output (windows) into its result, or builds a result that can fill the
// reply budget, so a call that finished while the client was not reading
// holds its jobs, whose windows are bounded, rather than a reply built
// from them. It holds no lock while it waits. On errCancelled the handler
// leaves what it delivered collectable, as a call cancelled while it
// blocked does.
func (c *toolCall) roomForReply() error {
	if c.room == nil {
		return nil
	}
	return c.room.take()
}

// replyBudget is how many bytes the result's escaped text may take.
func (c *toolCall) replyBudget() int {
	budget := c.cfg.maxReplyBytes
	if c.maxReply > 0 {
		budget = int(c.maxReply)
	}
	return budget - c.replyOverhead
}

// cost measures what the result costs in this call's reply line.
func (c *toolCall) cost() lineCost { return lineCost{structured: c.structured} }

// job is the held job that id names.
func (c *toolCall) job(id jobID) *job { return c.jobs[id] }

// holdJobs looks up every job the bound args name (arguments of type jobID
// and []jobID), under one lock. It runs as the call is read, before the
// call goes to its own goroutine, so calls hold jobs in the order the
// client sent them: a kill sent right behind a wait cannot deliver the job
// before the wait has it.
func (c *toolCall) holdJobs(params []param, args reflect.Value, readKept bool) error {
	var ids []string
	for _, p := range params {
		switch v := args.Field(p.field).Interface().(type) {
		case jobID:
			ids = append(ids, string(v))
		case []jobID:
			for _, id := range v {
				ids = append(ids, string(id))
			}
		case *replyBytes:
			if v != nil {
				c.maxReply = *v
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	jobs, err := c.reg.lookupAll(ids, readKept)
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
	table := toolsFor(c.cfg)
	t, ok := table.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s (the tools are %s)", errUnknownTool, clipText(name), strings.Join(table.names(), ", "))
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
	return func() (any, error) {
		res, err := handle()
		return c.reply(res, err)
	}, nil
}

// reply turns what a handler returned into the tools/call result, cut to
// the call's reply budget. The jobs of delivered results that had to be cut
// stay readable by status and output for a while.
func (c *toolCall) reply(res any, err error) (any, error) {
	if errors.Is(err, errCancelled) {
		return nil, err
	}
	if err != nil {
		return toolFailure(err), nil
	}
	if text, ok := res.(json.RawMessage); ok { // already encoded by the handler
		return toolText(text), nil
	}
	if plain, ok := res.(toolResult); ok { // plain text, sized by its handler
		return plain, nil
	}
	text, err := fitText(res, c.replyBudget(), c.cost())
	if err != nil {
		return nil, err
	}
	if entries, ok := res.([]*resultJSON); ok && c.cost().of(text) > c.replyBudget() {
		if text, err = c.deferResults(entries); err != nil {
			return nil, err
		}
	}
	for _, s := range slotsIn(res) {
		if s.result.Kept {
			c.reg.keep(s.result.delivered, c.cfg.keptDuration)
		}
	}
	return toolText(text), nil
}

// deferResults is for a wait whose results do not fit its reply budget even
// with every slice cut away: from the last, results are taken back (their
// jobs return to the registry, for the next wait) and stand as status
// entries with "deferred": true, until the rest fits.
func (c *toolCall) deferResults(entries []*resultJSON) ([]byte, error) {
	// One entry per job id is the shape of wait's answer: when even status
	// entries alone would not fit, deferring helps nobody, and the results
	// go out as small as cuts make them.
	statuses := make([]*resultJSON, len(entries))
	for i, e := range entries {
		s := *e
		s.Stdout, s.Stderr, s.Uncaptured, s.Deferred = nil, nil, nil, e.delivered != nil
		statuses[i] = &s
	}
	if least, err := marshal(statuses); err != nil || c.cost().of(least) > c.replyBudget() {
		return fitText(entries, c.replyBudget(), c.cost())
	}
	for i := len(entries) - 1; i >= 0; i-- {
		j := entries[i].delivered
		if j == nil {
			continue
		}
		c.reg.undeliver(j)
		for k, e := range entries {
			if e.delivered == j {
				entries[k] = statuses[k]
			}
		}
		text, err := fitText(entries, c.replyBudget(), c.cost())
		if err != nil || c.cost().of(text) <= c.replyBudget() {
			return text, err
		}
	}
	return fitText(entries, c.replyBudget(), c.cost())
}

// toolSpec is one tool: its published shape and its handler.
type toolSpec struct {
	name        string
	description string                // {placeholders} are filled from the configuration
	docs        map[string]string     // each argument's description, by name, with placeholders
	title       string                // for people: shown by clients from 2025-06-18 on
	output      func() map[string]any // the outputSchema of its result, an object
	readOnly    bool                  // annotations: changes nothing, not even which jobs can be collected
	destructive bool                  // annotations: may end processes
	idempotent  bool                  // annotations: calling it again with the same arguments changes nothing more
	runsJobs    bool                  // annotations follow what jobs may do: the sandbox and the network
	readsKept   bool                  // finds jobs kept after a cut result
	// hints, when set, are the tool's annotations as they are (none when
	// empty): a contract of another system states its own.
	hints    map[string]any
	argsType reflect.Type // the struct a call's arguments bind into
	params   []param
	prepare  func(c *toolCall, raw map[string]json.RawMessage) (func() (any, error), error)
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
		if err := c.holdJobs(spec.params, args, spec.readsKept); err != nil {
			return nil, err
		}
		return func() (any, error) { return handle(c, a) }, nil
	}
	return spec
}

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
		Plain         bool        `arg:"plain"`
		MaxReplyBytes *replyBytes `arg:"max_reply_bytes"`
	}
	inputArgs struct {
		JobID jobID  `arg:"job_id,required"`
		Data  string `arg:"data"`
		Close bool   `arg:"close"`
	}
	killArgs struct {
		JobID         jobID           `arg:"job_id,required"`
		Signal        *syscall.Signal `arg:"signal"`
		Timeout       *seconds        `arg:"timeout"`
		MaxReplyBytes *replyBytes     `arg:"max_reply_bytes"`
	}
	noArgs struct{} // list_jobs, and any tool that takes none
)

const streamDoc = `"none" (default), "all" (the retained window), {"tail": N} (last N lines), or {"from": P, "length": N, "unaligned": false} (bytes from absolute offset P; the next page is from = offset + bytes)`

const replyDoc = "Longest reply line in bytes (>= 1024; default {budget}); a bigger result is cut to head and tail, and output can read the gap."

// jobTools is the jobs set's tool table, in the order tools/list shows them.
var jobTools = []toolSpec{
	newTool(toolSpec{
		name:   "execute",
		title:  "Run a command",
		output: resultSchema,
		description: "Run a shell command ($SHELL -c), or argv without a shell, as a job in its own process group. " +
			"Blocks until it exits and returns {job_id, state, exit_code, signal?, stdout?, stderr?}; that delivery forgets the job. " +
			"Hosts often time calls out after 60 s: for anything longer use nowait:true (returns {job_id, state:\"running\"} at once; then wait, status, output, input, kill) " +
			"or yield_after (returns the running job with yielded:true; default {yield}). " +
			"Each stream keeps its last {window}; replies over {budget} are cut to head and tail. For noisy commands capture {\"tail\": N} lines. " +
			"Default capture: {capture}. stdin stays open unless close_stdin is true; a job blocked reading it shows waiting_for_input.{policy}",
		docs: map[string]string{
			"command":         "Shell command line, run as $SHELL -c <command>. Give command or argv.",
			"argv":            "Program and arguments, run without a shell; argv[0] is looked up in PATH. Give command or argv.",
			"cwd":             "Working directory (default: the server's).",
			"env":             "Variables layered over the server's environment.",
			"stdin":           "Text written to the job's stdin right away.",
			"close_stdin":     "Close stdin (EOF) after writing stdin. Default false.",
			"nowait":          "Return the job_id immediately instead of waiting for the exit.",
			"capture":         `What the final result includes: {"on_success": SPEC, "on_error": SPEC} where SPEC is "stdout", "stderr", "all", "none" or {"stdout": STREAM, "stderr": STREAM}; STREAM is ` + streamDoc + `. Default {capture}.`,
			"time_limit":      "Seconds the job may run; then TERM to its process group, KILL {grace} later, and timed_out:true. Default {time_limit}.",
			"tty":             `Run on a pseudo-terminal (true, or {"rows": R, "cols": C}; default 24x80), for programs that need one (prompts, REPLs, pagers, sudo): stdout holds what the terminal shows, stderr stays empty, input types into it (close sends Ctrl-D). Default false.`,
			"yield_after":     "Seconds to block before returning the still-running job with yielded:true (collect it with wait); it also returns once the job has waited 1 s for input on stdin. 0 = block until the exit. Default {yield}.",
			"max_reply_bytes": replyDoc,
		},
		destructive: true,
		runsJobs:    true,
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
			"until":           `Also return early for a running job: {"pattern": RE2, "stream": "stdout"|"stderr"|"any"} when it writes a complete matching line (after this call started, or from offset "from"), its entry then carrying matched {stream, offset, line}; or {"idle": seconds} when it has written nothing for that long (entry idle:true). Finished jobs are delivered as always.`,
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
		output:     resultSchema,
		idempotent: true,
		description: "Read a job's captured output, live or after exit, without forgetting it. Returns the status fields plus the selected slices " +
			"{data, offset, bytes, total_bytes, truncated, dropped_bytes?, omitted?, tail?}. Offsets are absolute bytes; page with from = offset + bytes.",
		docs: map[string]string{
			"job_id":          "The job.",
			"stdout":          "Slice of stdout: " + streamDoc + ".",
			"stderr":          "Slice of stderr: " + streamDoc + ".",
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
			"job_id": "The job.",
			"data":   "Text to write.",
			"close":  "Close stdin after writing.",
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
}

// toolLists caches the tools/list result of each configuration and shape.
var toolLists sync.Map // toolListKey → map[string]any

// toolListKey names one cached tools/list result.
type toolListKey struct {
	cfg                *config
	structured, modern bool
}

// toolListTTLMs is how long a modern client may cache tools/list: the list
// changes only when the server restarts with other settings.
const toolListTTLMs = 3600000

// toolListFor is the tools/list result under cfg: the table, with the
// values in force written into the descriptions; structured (2025-06-18
// on) with titles and output schemas, modern (2026-07-28) with caching
// advice.
func toolListFor(cfg *config, structured, modern bool) map[string]any {
	key := toolListKey{cfg, structured, modern}
	if l, ok := toolLists.Load(key); ok {
		return l.(map[string]any)
	}
	fill := placeholders(cfg)
	tools := toolsFor(cfg).list
	list := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		docs := make(map[string]string, len(t.docs))
		for k, v := range t.docs {
			docs[k] = fill.Replace(v)
		}
		tool := map[string]any{
			"name":        t.name,
			"description": fill.Replace(t.description),
			"inputSchema": schemaOf(t.params, docs),
		}
		if hints := annotationsFor(t, cfg); len(hints) > 0 {
			tool["annotations"] = hints
		}
		if structured {
			tool["title"] = t.title
			if t.output != nil {
				tool["outputSchema"] = t.output()
			}
		}
		list = append(list, tool)
	}
	result := map[string]any{"tools": list}
	if modern {
		result["ttlMs"] = toolListTTLMs
		result["cacheScope"] = "public"
	}
	l, _ := toolLists.LoadOrStore(key, result)
	return l.(map[string]any)
}

// annotationsFor is a tool's annotations under cfg. A tool that runs jobs
// reaches the network unless it is off, and changes nothing under the
// read-only sandbox.
func annotationsFor(t toolSpec, cfg *config) map[string]any {
	if t.hints != nil {
		return t.hints
	}
	readOnly := t.readOnly || t.runsJobs && cfg.sandbox == sandboxReadOnly
	return map[string]any{
		"readOnlyHint":    readOnly,
		"destructiveHint": t.destructive && !readOnly,
		"idempotentHint":  t.idempotent,
		"openWorldHint":   t.runsJobs && !cfg.networkOff,
	}
}

// jobsInstructions is the jobs set's advice to the model.
func jobsInstructions(cfg *config) string {
	return "Run shell commands as jobs with " + strings.Join(toolNamesOf(jobTools), ", ") +
		"; a finished job's result is delivered once, then the job is gone. " +
		"Calls over about 60 s time out in many hosts: use nowait:true or yield_after (default {yield}), " +
		"wait with a timeout below that, and capture {\"tail\": N} on noisy output; replies are cut at {budget}."
}

// placeholders fills the {names} of descriptions with the values in force.
func placeholders(cfg *config) *strings.Replacer {
	return strings.NewReplacer(
		"{window}", sizeWords(cfg.maxOutputBytes),
		"{budget}", sizeWords(cfg.maxReplyBytes),
		"{wait}", secondsWords(cfg.defaultTimeout, "none: polls"),
		"{yield}", secondsWords(cfg.yieldAfter, "off"),
		"{time_limit}", secondsWords(cfg.timeLimit, "none"),
		"{grace}", secondsWords(cfg.killGrace, "at once"),
		"{capture}", captureWords(cfg.capture),
		"{policy}", policyWords(cfg),
		"{exec_timeout}", secondsWords(execTimeout(cfg), ""),
		"{exec_max_timeout}", ifSet(cfg.maxTimeLimit > 0, ", at most "+secondsWords(cfg.maxTimeLimit, "")),
		"{exec_cwd}", execCwdWords(cfg),
		"{shell_timeout}", secondsWords(shellRunDefault(cfg), ""),
		"{shell_bytes}", sizeWords(cfg.shellOutputBytes),
		"{shell_lines}", strconv.Itoa(cfg.shellOutputLines),
		"{shell_allow}", shellAllowWords(cfg),
		"{ttl}", secondsWords(cfg.jobTTL, "ever"),
		"{finished}", strconv.Itoa(cfg.maxFinished),
		"{max_jobs}", ifSet(cfg.maxJobs > 0, fmt.Sprintf(" At most %d jobs run at once.", cfg.maxJobs)),
	)
}

// ifSet is text when cond holds, else "".
func ifSet(cond bool, text string) string {
	if cond {
		return text
	}
	return ""
}

// execCwdWords names the exec tool's default working directory.
func execCwdWords(cfg *config) string {
	if cfg.execCwd != "" {
		return cfg.execCwd
	}
	if cfg.roots != nil {
		return cfg.roots[0] + "; must be inside " + strings.Join(cfg.roots, ", ")
	}
	return "the server's"
}

// shellAllowWords states the shell set's allow list.
func shellAllowWords(cfg *config) string {
	if cfg.allow == nil {
		return " Any program may run."
	}
	return " Allowed (exactly as spelled): " + strings.Join(sortedAllow(cfg), ", ") + "."
}

// policyWords states the policy in force for tool descriptions, or "" when
// none is set.
func policyWords(cfg *config) string {
	var parts []string
	if cfg.allow != nil {
		how := "spelled exactly"
		if cfg.offers(toolSetJobs) || cfg.offers(toolSetExec) {
			how = "argv[0] spelled exactly; command needs the shell"
		}
		parts = append(parts, "programs allowed ("+how+"): "+strings.Join(cfg.allow, ", "))
	}
	if cfg.roots != nil {
		parts = append(parts, "cwd must be inside "+strings.Join(cfg.roots, ", ")+" (default "+cfg.roots[0]+")")
	}
	switch cfg.sandbox {
	case sandboxReadOnly:
		parts = append(parts, "read-only sandbox: jobs write only to their own $TMPDIR and /dev/null (kernel-enforced; other writes fail with Permission denied or Read-only file system)"+metadataWords())
	case sandboxRoots:
		parts = append(parts, "sandbox: jobs write only inside "+strings.Join(cfg.roots, ", ")+", their own $TMPDIR and /dev/null (kernel-enforced)"+metadataWords())
	}
	if cfg.networkOff {
		parts = append(parts, "network off: jobs cannot open IP sockets (no downloads, no package installs)")
	}
	if cfg.rlimitsText != "" {
		parts = append(parts, "each job's resource limits: "+cfg.rlimitsText)
	}
	if len(cfg.envDeny) > 0 {
		parts = append(parts, "env may not set "+strings.Join(sortedKeys(cfg.envDeny), ", "))
	}
	if cfg.maxJobs > 0 {
		parts = append(parts, fmt.Sprintf("at most %d jobs run at once", cfg.maxJobs))
	}
	if cfg.jobTTL > 0 && cfg.offers(toolSetJobs) { // the shell set states its own
		parts = append(parts, "finished jobs not collected within "+secondsWords(cfg.jobTTL, "")+" are forgotten")
	}
	if cfg.maxFinished > 0 && cfg.offers(toolSetJobs) {
		parts = append(parts, fmt.Sprintf("at most %d finished jobs wait to be collected", cfg.maxFinished))
	}
	if len(parts) == 0 {
		return ""
	}
	return " Policy: " + strings.Join(parts, "; ") + "."
}

// metadataWords tells a model, where jobs have no mount namespace of their
// own, that changing files' metadata fails even where they may write.
func metadataWords() string {
	if mountNamespaces() {
		return ""
	}
	return "; chmod, chown, setting times (touch -d, cp -p) and xattrs fail everywhere"
}

// sizeWords writes a byte count for people: 1 MiB, 64 KiB, 1500 bytes.
func sizeWords(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// secondsWords writes a duration in seconds, or zero's meaning.
func secondsWords(d time.Duration, zero string) string {
	if d <= 0 {
		return zero
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// captureWords writes a capture policy as its JSON shorthand when it has one.
func captureWords(p capturePolicy) string {
	word := func(c captureSpec) string {
		for name, spec := range captureShorthand {
			if spec == c {
				return `"` + name + `"`
			}
		}
		return "a custom spec"
	}
	return `{"on_success": ` + word(p.onSuccess) + `, "on_error": ` + word(p.onError) + `}`
}

func runExecute(c *toolCall, a *executeArgs) (any, error) {
	run, err := executeRun(c.cfg, a)
	if err != nil {
		return nil, err
	}
	ran, err := c.runJob(run)
	switch {
	case err != nil:
		return nil, err
	case !ran.started || ran.ended:
		return resultWithin(ran.job, c.replyBudget()), nil
	case a.Nowait:
		return &resultJSON{JobID: ran.job.id, State: stateRunning}, nil
	}
	// Yielded: the job runs on, to be collected by wait.
	return &resultJSON{JobID: ran.job.id, State: stateRunning, Yielded: true,
		WaitingForInput: ran.inputWanted || ran.job.waitingForInput()}, nil
}

// executeRun checks execute's arguments and says how its job runs. The
// execute holds its job from the start, so it gets the result even if a
// kill or a wait that guessed the id took it first.
func executeRun(cfg *config, a *executeArgs) (jobRun, error) {
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
	run := jobRun{startRequest: req, timeLimit: limit, killGrace: cfg.killGrace, nowait: a.Nowait,
		await: awaitOptions{yieldOnInput: yieldAfter > 0}}
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

// callTimeLimit is a call's time limit argument: def when it gives none,
// else a number of seconds above 0 and, when MCP_EXEC_MAX_TIME_LIMIT is
// set, not above it.
func callTimeLimit(cfg *config, name string, given *seconds, def time.Duration) (time.Duration, error) {
	limit, err := optionalSeconds(name, given, def, false)
	if err == nil && given != nil && cfg.maxTimeLimit > 0 && limit > cfg.maxTimeLimit {
		return 0, fmt.Errorf("%w: %s %v s is longer than MCP_EXEC_MAX_TIME_LIMIT allows (%v s)", errRefused, name,
			float64(*given), cfg.maxTimeLimit.Seconds())
	}
	return limit, err
}

// optionalSeconds is a seconds argument, or def when it was not given. It
// must not be negative, and may be zero only if zeroOK.
func optionalSeconds(name string, given *seconds, def time.Duration, zeroOK bool) (time.Duration, error) {
	if given == nil {
		return def, nil
	}
	v := float64(*given)
	if math.IsNaN(v) || v < 0 || (v == 0 && !zeroOK) {
		least := "greater than 0"
		if zeroOK {
			least = "0 or more"
		}
		return 0, fmt.Errorf("%w %s: must be a number of seconds, %s, got %v", errInvalid, name, least, v)
	}
	return secondsToDuration(v), nil
}

func runWait(c *toolCall, a *waitArgs) (any, error) {
	timeout := c.cfg.defaultTimeout
	if a.Timeout != nil {
		timeout = secondsToDuration(float64(*a.Timeout))
	}
	opts := awaitOptions{poll: timeout <= 0}
	if timeout > 0 {
		opts.deadline = time.Now().Add(timeout)
	}
	jobs := make([]*job, len(a.JobIDs))
	for i, id := range a.JobIDs {
		jobs[i] = c.job(id)
	}
	var hit *untilHit
	if a.Until != nil {
		watch := newUntilWatch(*a.Until, jobs)
		opts.stopEarly = func() bool { hit = watch.look(); return hit != nil }
		opts.stopEvery = untilLookInterval
	}
	delivered, _, err := c.reg.await(c.waiter, jobs, opts)
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
	entries := make([]*resultJSON, len(jobs))
	for i, j := range jobs {
		if delivered[j.id] != nil {
			entries[i] = resultWithin(j, c.replyBudget())
			continue
		}
		entries[i] = &resultJSON{JobID: j.id, State: stateRunning, WaitingForInput: j.waitingForInputSeen()}
		if hit != nil && hit.job == j {
			entries[i].Idle = hit.matched == nil
			if m := hit.matched; m != nil {
				entries[i].Matched = &matchJSON{Stream: m.stream, Offset: m.offset, Line: m.line}
			}
		}
	}
	return entries, nil
}

func runStatus(c *toolCall, a *statusArgs) (any, error) {
	return liveStatusOf(c.job(a.JobID)), nil
}

// liveStatusOf is statusOf with, for a running job, whether it waits for
// input.
func liveStatusOf(j *job) *resultJSON {
	r := statusOf(j)
	if r.State == stateRunning {
		r.WaitingForInput = j.waitingForInput()
	}
	return r
}

func runOutput(c *toolCall, a *outputArgs) (any, error) {
	if err := c.roomForReply(); err != nil {
		return nil, err
	}
	j := c.job(a.JobID)
	r := liveStatusOf(j)
	r.Stdout, _ = sliceWithin(j.stdout, a.Stdout, c.replyBudget())
	r.Stderr, _ = sliceWithin(j.stderr, a.Stderr, c.replyBudget())
	if a.Plain { // the text without terminal escapes; offsets and counts stay the raw bytes
		for _, s := range []*sliceJSON{r.Stdout, r.Stderr} {
			if s != nil {
				s.Data = string(plainText([]byte(s.Data)))
				if s.Tail != nil {
					s.Tail.Data = string(plainText([]byte(s.Tail.Data)))
				}
			}
		}
	}
	return r, nil
}

func runInput(c *toolCall, a *inputArgs) (any, error) {
	j := c.job(a.JobID)
	if err := j.input(c.waiter, a.Data, a.Close); err != nil {
		return nil, err
	}
	return statusOf(j), nil
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
		if err := c.roomForReply(); err != nil {
			c.reg.undeliver(j) // cancelled: the result goes back for a wait, as in runWait
			return nil, err
		}
		k.Result = resultWithin(j, c.replyBudget())
	} else {
		k.State, k.Detail = j.outcome().state, out.survivors
	}
	return k, nil
}

// runListJobs answers {"jobs": [{"job_id", "state"}, ...]}. It writes the
// JSON itself: ids are digits and states plain words, and a reflective
// encoder took most of the time of a list of 10,000 jobs.
func runListJobs(c *toolCall, _ *noArgs) (any, error) {
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
	for i, j := range jobs {
		mark := len(b)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"job_id":`...)
		b = strconv.AppendQuote(b, j.id)
		b = append(b, `,"state":"`...)
		b = append(b, j.outcome().state...)
		b = append(b, '"')
		if j.waitingForInputAmong(groups[j.pid]) {
			b = append(b, `,"waiting_for_input":true`...)
		}
		if o := j.outcome(); len(o.survivors) > 0 {
			b = append(append(b, `,"survivors":`...), strconv.Itoa(len(o.survivors))...)
		}
		b = append(b, '}')
		if room -= c.cost().of(b[mark:]); room < 0 {
			b, omitted = b[:mark], len(jobs)-i
			break
		}
	}
	b = append(b, ']')
	if omitted > 0 {
		b = append(b, `,"omitted":`...)
		b = strconv.AppendInt(b, int64(omitted), 10)
	}
	return json.RawMessage(append(b, '}')), nil
}
