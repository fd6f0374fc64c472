package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The seven tools: one table gives each its arguments, and the same table
// drives argument checking and the JSON Schemas tools/list publishes.

// argKind is the type an argument must have.
type argKind int

const (
	argString     argKind = iota
	argBool               // JSON true/false
	argSeconds            // a number of seconds, fractions allowed
	argStringMap          // an object whose values are strings
	argStringList         // an array of strings
	argStream             // a stream spec
	argCapture            // execute's capture policy
	argSignal             // a signal name, number or ASSURED
)

// argSpec describes one tool argument.
type argSpec struct {
	name     string
	kind     argKind
	required bool
	doc      string
}

// toolSpec is one tool: its published shape and its handler.
type toolSpec struct {
	name        string
	description string
	args        []argSpec
	readOnly    bool // annotations: does not change any job
	destructive bool // annotations: may end processes
	run         func(c *toolCall) (any, error)
}

// toolCall is one validated tools/call on its way through a handler.
type toolCall struct {
	reg    *registry
	cfg    *config
	waiter *waiter
	vals   map[string]any // validated arguments by name; absent when not given
}

func (c *toolCall) str(name string) string { s, _ := c.vals[name].(string); return s }
func (c *toolCall) flag(name string) bool  { b, _ := c.vals[name].(bool); return b }
func (c *toolCall) stream(name string) streamSpec {
	s, _ := c.vals[name].(streamSpec)
	return s
}

// seconds returns a duration argument, or def when it was not given.
func (c *toolCall) seconds(name string, def time.Duration) time.Duration {
	if v, ok := c.vals[name].(float64); ok {
		return secondsToDuration(v)
	}
	return def
}

// secondsToDuration converts seconds, saturating instead of overflowing.
func secondsToDuration(s float64) time.Duration {
	if s*float64(time.Second) >= math.MaxInt64 {
		return math.MaxInt64
	}
	if s*float64(time.Second) <= math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(s * float64(time.Second))
}

const streamDoc = `"none" (default), "all" (the retained window), {"tail": N} (last N lines), or {"from": P, "length": N, "unaligned": false} (bytes from absolute offset P; the next page is from = offset + bytes)`

var tools = []toolSpec{
	{
		name: "execute",
		description: "Run a shell command ($SHELL -c) as a job in its own process group. " +
			"By default blocks until it exits and returns {job_id, state, exit_code, signal?, stdout?, stderr?}; that delivery forgets the job. " +
			"With nowait:true returns {job_id, state:\"running\"} at once: collect it later with wait, watch it with status/output, feed it with input, stop it with kill. " +
			"Each stream keeps its last MCP_EXEC_MAX_OUTPUT_BYTES bytes; slices report offset, bytes, total_bytes and truncated. " +
			"Default capture returns stdout on success and stderr on error. stdin is an open pipe unless close_stdin is true.",
		args: []argSpec{
			{"command", argString, true, "Shell command line, run as $SHELL -c <command>."},
			{"cwd", argString, false, "Working directory (default: the server's)."},
			{"env", argStringMap, false, "Variables layered over the server's environment."},
			{"stdin", argString, false, "Text written to the job's stdin right away."},
			{"close_stdin", argBool, false, "Close stdin (EOF) after writing stdin. Default false."},
			{"nowait", argBool, false, "Return the job_id immediately instead of waiting for the exit."},
			{"capture", argCapture, false, `What the final result includes: {"on_success": SPEC, "on_error": SPEC} where SPEC is "stdout", "stderr", "all", "none" or {"stdout": STREAM, "stderr": STREAM}; STREAM is ` + streamDoc + `. Default {"on_success":"stdout","on_error":"stderr"}.`},
		},
		destructive: true,
		run:         runExecute,
	},
	{
		name: "wait",
		description: "Block until any of the listed jobs finishes, or the timeout. Returns an array in job_ids order: finished jobs carry their full result (per their capture policy) and are forgotten; running ones are {job_id, state:\"running\"}. " +
			"timeout <= 0 polls without blocking.",
		args: []argSpec{
			{"job_ids", argStringList, true, "Jobs to watch (non-empty)."},
			{"timeout", argSeconds, false, "Seconds to block (default MCP_EXEC_DEFAULT_TIMEOUT); <= 0 polls."},
		},
		readOnly: true,
		run:      runWait,
	},
	{
		name:        "status",
		description: "A job's state: {job_id, state, exit_code?, signal?, start_error?}. Never forgets the job.",
		args:        []argSpec{{"job_id", argString, true, "The job."}},
		readOnly:    true,
		run:         runStatus,
	},
	{
		name: "output",
		description: "Read a job's captured output, live or after exit, without forgetting it. Returns the status fields plus the selected slices " +
			"{data, offset, bytes, total_bytes, truncated, dropped_bytes?}. Offsets are absolute bytes; page with from = offset + bytes.",
		args: []argSpec{
			{"job_id", argString, true, "The job."},
			{"stdout", argStream, false, "Slice of stdout: " + streamDoc + "."},
			{"stderr", argStream, false, "Slice of stderr: " + streamDoc + "."},
		},
		readOnly: true,
		run:      runOutput,
	},
	{
		name:        "input",
		description: "Write to a running job's stdin; close:true sends EOF after the data. Returns the job's status. Blocks while the pipe is full.",
		args: []argSpec{
			{"job_id", argString, true, "The job."},
			{"data", argString, false, "Text to write."},
			{"close", argBool, false, "Close stdin after writing."},
		},
		run: runInput,
	},
	{
		name: "kill",
		description: "Signal a job's whole process group and wait for observed death. " +
			"If the tree died: {terminated:true, signal_sent, result} and the job is forgotten. If it survived: {terminated:false, detail} and the job stays. " +
			"signal ASSURED sends TERM, then KILL if the tree outlives the timeout.",
		args: []argSpec{
			{"job_id", argString, true, "The job."},
			{"signal", argSignal, false, `TERM (default), KILL, INT, HUP, a number such as "9", or ASSURED.`},
			{"timeout", argSeconds, false, "Seconds to wait for death after each signal (default 5; 0 = do not wait)."},
		},
		destructive: true,
		run:         runKill,
	},
	{
		name:        "list_jobs",
		description: "Every job that wait can still deliver, oldest first: {jobs: [{job_id, state}]}.",
		readOnly:    true,
		run:         runListJobs,
	},
}

// toolsByName indexes tools.
var toolsByName = func() map[string]*toolSpec {
	m := map[string]*toolSpec{}
	for i := range tools {
		m[tools[i].name] = &tools[i]
	}
	return m
}()

// toolList is the tools/list result, built once.
var toolList = func() map[string]any {
	list := make([]map[string]any, 0, len(tools))
	for _, t := range tools {
		props := map[string]any{}
		required := []string{}
		for _, a := range t.args {
			s := schemaFor(a.kind)
			s["description"] = a.doc
			props[a.name] = s
			if a.required {
				required = append(required, a.name)
			}
		}
		schema := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			schema["required"] = required
		}
		list = append(list, map[string]any{
			"name":        t.name,
			"description": t.description,
			"inputSchema": schema,
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

// schemaFor returns the JSON Schema of one argument kind.
func schemaFor(k argKind) map[string]any {
	stream := func() map[string]any {
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "enum": []string{"none", "all"}},
			map[string]any{"type": "object", "properties": map[string]any{"tail": map[string]any{"type": "integer", "minimum": 0}}, "required": []string{"tail"}},
			map[string]any{"type": "object", "properties": map[string]any{
				"from": map[string]any{"type": "integer"}, "length": map[string]any{"type": "integer"}, "unaligned": map[string]any{"type": "boolean"},
			}, "required": []string{"from"}},
		}}
	}
	switch k {
	case argBool:
		return map[string]any{"type": "boolean"}
	case argSeconds:
		return map[string]any{"type": "number"}
	case argStringMap:
		return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	case argStringList:
		return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1}
	case argStream:
		return stream()
	case argCapture:
		spec := map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "enum": []string{"stdout", "stderr", "all", "none"}},
			map[string]any{"type": "object", "properties": map[string]any{"stdout": stream(), "stderr": stream()}},
		}}
		return map[string]any{"type": "object", "properties": map[string]any{"on_success": spec, "on_error": spec}}
	}
	return map[string]any{"type": "string"}
}

// bindArgs checks raw arguments against the tool's table and decodes them.
// Unknown arguments are ignored; null means absent.
func bindArgs(t *toolSpec, raw map[string]json.RawMessage) (map[string]any, error) {
	vals := make(map[string]any, len(t.args))
	for _, a := range t.args {
		r, ok := raw[a.name]
		if !ok || isNull(r) {
			if a.required {
				return nil, fmt.Errorf("%w: %s is required", errInvalid, a.name)
			}
			continue
		}
		v, err := decodeArg(a, r)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", errInvalid, a.name, err)
		}
		vals[a.name] = v
	}
	return vals, nil
}

// decodeArg decodes one argument value of kind a.kind.
func decodeArg(a argSpec, r json.RawMessage) (any, error) {
	switch a.kind {
	case argString:
		var s string
		if json.Unmarshal(r, &s) != nil {
			return nil, fmt.Errorf("must be a string, got %s", clip(r))
		}
		return s, nil
	case argBool:
		var b bool
		if json.Unmarshal(r, &b) != nil {
			return nil, fmt.Errorf("must be true or false, got %s", clip(r))
		}
		return b, nil
	case argSeconds:
		var f float64
		if json.Unmarshal(r, &f) != nil {
			return nil, fmt.Errorf("must be a number of seconds, got %s", clip(r))
		}
		return f, nil
	case argStringMap:
		return decodeEnv(r)
	case argStringList:
		var ids []string
		if json.Unmarshal(r, &ids) != nil || ids == nil {
			return nil, fmt.Errorf("must be an array of strings, got %s", clip(r))
		}
		if len(ids) == 0 {
			return nil, errors.New("must be non-empty")
		}
		return ids, nil
	case argStream:
		return parseStreamSpec(r)
	case argCapture:
		return parseCapturePolicy(r)
	case argSignal:
		return parseSignal(r)
	}
	return nil, fmt.Errorf("unsupported argument kind %d", a.kind)
}

// decodeEnv decodes an env overlay: an object of strings with usable names.
func decodeEnv(r json.RawMessage) (map[string]string, error) {
	obj, err := decodeObject(r)
	if err != nil {
		return nil, fmt.Errorf("must be an object of strings: %v", err)
	}
	env := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("value of %q must be a string, got %s", k, clip(v))
		}
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("%q cannot be an environment variable (no '=' or NUL in names, no NUL in values)", k)
		}
		env[k] = s
	}
	return env, nil
}

// clip shortens a raw JSON value for an error message.
func clip(r json.RawMessage) string {
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(r)
}

func isNull(r json.RawMessage) bool { return string(r) == "null" }

// streamKind selects how a stream spec reads a window.
type streamKind int

const (
	streamNone streamKind = iota
	streamAll
	streamTail
	streamRange
)

// streamSpec is a parsed stream spec.
type streamSpec struct {
	kind      streamKind
	tail      int64
	from      int64
	length    int64 // < 0: to the end
	unaligned bool
}

// captureSpec selects what a result carries of each stream.
type captureSpec struct{ stdout, stderr streamSpec }

// capturePolicy picks a captureSpec by how the job ended.
type capturePolicy struct{ onSuccess, onError captureSpec }

var (
	specAll          = streamSpec{kind: streamAll}
	captureStdout    = captureSpec{stdout: specAll}
	captureStderr    = captureSpec{stderr: specAll}
	defaultCapture   = capturePolicy{onSuccess: captureStdout, onError: captureStderr}
	captureShorthand = map[string]captureSpec{
		"stdout": captureStdout, "stderr": captureStderr,
		"all": {stdout: specAll, stderr: specAll}, "none": {},
	}
)

// parseStreamSpec parses "none", "all", {"tail": N} or {"from": P, "length": L?, "unaligned": B?}.
func parseStreamSpec(r json.RawMessage) (streamSpec, error) {
	if isNull(r) {
		return streamSpec{}, nil
	}
	var word string
	if json.Unmarshal(r, &word) == nil {
		switch word {
		case "none":
			return streamSpec{}, nil
		case "all":
			return specAll, nil
		}
		return streamSpec{}, fmt.Errorf("stream spec %q is not \"none\" or \"all\"", word)
	}
	obj, err := decodeObject(r)
	if err != nil {
		return streamSpec{}, fmt.Errorf(`stream spec must be "none", "all", {"tail": N} or {"from": P, ...}, got %s`, clip(r))
	}
	if k := unknownKey(obj, "tail", "from", "length", "unaligned"); k != "" {
		return streamSpec{}, fmt.Errorf("stream spec has unknown key %q", k)
	}
	if t, ok := obj["tail"]; ok {
		if len(obj) != 1 {
			return streamSpec{}, errors.New(`stream spec mixes "tail" with a byte range`)
		}
		n, err := parseInteger(t)
		if err != nil {
			return streamSpec{}, fmt.Errorf("tail %v", err)
		}
		return streamSpec{kind: streamTail, tail: n}, nil
	}
	return parseRangeSpec(obj)
}

// parseRangeSpec parses {"from": P, "length": L?, "unaligned": B?}.
func parseRangeSpec(obj map[string]json.RawMessage) (streamSpec, error) {
	s := streamSpec{kind: streamRange, length: -1}
	f, ok := obj["from"]
	if !ok {
		return s, errors.New(`stream spec needs "tail" or "from"`)
	}
	var err error
	if s.from, err = parseInteger(f); err != nil {
		return s, fmt.Errorf("from %v", err)
	}
	if l, ok := obj["length"]; ok && !isNull(l) {
		if s.length, err = parseInteger(l); err != nil {
			return s, fmt.Errorf("length %v", err)
		}
		if s.length < 0 {
			s.length = 0 // a negative length selects nothing
		}
	}
	if u, ok := obj["unaligned"]; ok && !isNull(u) {
		if json.Unmarshal(u, &s.unaligned) != nil {
			return s, fmt.Errorf("unaligned must be true or false, got %s", clip(u))
		}
	}
	return s, nil
}

// parseInteger accepts a JSON number with no fractional part; values beyond
// int64 saturate.
func parseInteger(r json.RawMessage) (int64, error) {
	var n json.Number
	if len(r) == 0 || r[0] == '"' || json.Unmarshal(r, &n) != nil { // json.Number would take "3" too
		return 0, fmt.Errorf("must be an integer, got %s", clip(r))
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil && !errors.Is(err, strconv.ErrRange) || f != math.Trunc(f) {
		return 0, fmt.Errorf("must be an integer, got %s", clip(r))
	}
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64, nil
	case f <= math.MinInt64:
		return math.MinInt64, nil
	}
	return int64(f), nil
}

// parseCaptureSpec parses "stdout", "stderr", "all", "none" or {stdout, stderr}.
func parseCaptureSpec(r json.RawMessage) (captureSpec, error) {
	var word string
	if json.Unmarshal(r, &word) == nil {
		if c, ok := captureShorthand[word]; ok {
			return c, nil
		}
		return captureSpec{}, fmt.Errorf(`capture spec %q is not "stdout", "stderr", "all" or "none"`, word)
	}
	obj, err := decodeObject(r)
	if err != nil {
		return captureSpec{}, fmt.Errorf(`capture spec must be a word or {"stdout": ..., "stderr": ...}, got %s`, clip(r))
	}
	var c captureSpec
	if k := unknownKey(obj, "stdout", "stderr"); k != "" {
		return c, fmt.Errorf("capture spec has unknown key %q", k)
	}
	for _, f := range []struct {
		key  string
		spec *streamSpec
	}{{"stdout", &c.stdout}, {"stderr", &c.stderr}} {
		if v, ok := obj[f.key]; ok {
			if *f.spec, err = parseStreamSpec(v); err != nil {
				return c, fmt.Errorf("%s: %v", f.key, err)
			}
		}
	}
	return c, nil
}

// unknownKey returns the first key of obj, in sorted order, that is not
// allowed, or "" when all are; errors then do not depend on map order.
func unknownKey(obj map[string]json.RawMessage, allowed ...string) string {
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return slices.Min(unknown)
}

// parseCapturePolicy parses {on_success, on_error}; a bare capture spec
// applies to both outcomes.
func parseCapturePolicy(r json.RawMessage) (capturePolicy, error) {
	p := defaultCapture
	obj, err := decodeObject(r)
	if err != nil {
		c, err := parseCaptureSpec(r)
		if err != nil {
			return p, err
		}
		return capturePolicy{onSuccess: c, onError: c}, nil
	}
	if k := unknownKey(obj, "on_success", "on_error"); k != "" {
		return p, fmt.Errorf("capture has unknown key %q (use on_success and on_error)", k)
	}
	for _, f := range []struct {
		key  string
		spec *captureSpec
	}{{"on_success", &p.onSuccess}, {"on_error", &p.onError}} {
		if v, ok := obj[f.key]; ok && !isNull(v) {
			if *f.spec, err = parseCaptureSpec(v); err != nil {
				return p, fmt.Errorf("%s: %v", f.key, err)
			}
		}
	}
	return p, nil
}

// assured is the pseudo-signal for TERM-then-KILL.
const assured = syscall.Signal(-1)

// parseSignal accepts "TERM", "SIGTERM", "term", "15", a real-time signal
// ("34", "RTMIN+2", "SIGRTMAX-1") or "ASSURED": a string, as the schema says.
func parseSignal(r json.RawMessage) (syscall.Signal, error) {
	var name string
	if json.Unmarshal(r, &name) != nil {
		return 0, fmt.Errorf(`a signal must be a string such as "TERM", "KILL", "9" or "ASSURED", got %s`, clip(r))
	}
	up := strings.ToUpper(strings.TrimSpace(name))
	if up == "ASSURED" {
		return assured, nil
	}
	if sig, ok := signalByName(up); ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q: use a name such as TERM, KILL, INT or HUP, a number such as \"9\", a real-time signal such as RTMIN+1, or ASSURED", name)
}

// signalByName resolves an upper-case signal number or name, with or
// without the SIG prefix.
func signalByName(up string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(up); err == nil {
		sig := syscall.Signal(n)
		return sig, n > 0 && (unix.SignalName(sig) != "" || isRealtime(sig))
	}
	up = strings.TrimPrefix(up, "SIG")
	if sig, ok := realtimeByName(up); ok {
		return sig, true
	}
	sig := unix.SignalNum("SIG" + up)
	return sig, sig != 0
}

// realtimeByName resolves RTMIN, RTMIN+n, RTMAX and RTMAX-n, numbered as
// kill(1) numbers them for programs built on the C library.
func realtimeByName(up string) (syscall.Signal, bool) {
	for _, base := range []struct {
		name string
		sig  syscall.Signal
		step int
	}{{"RTMIN", realtimeMin, 1}, {"RTMAX", realtimeMax, -1}} {
		rest, ok := strings.CutPrefix(up, base.name)
		if !ok || realtimeMin == 0 {
			continue
		}
		n := 0
		if rest != "" {
			sign := "+"
			if base.step < 0 {
				sign = "-"
			}
			digits, ok := strings.CutPrefix(rest, sign)
			var err error
			if n, err = strconv.Atoi(digits); !ok || err != nil || n < 0 {
				return 0, false
			}
		}
		sig := base.sig + syscall.Signal(n*base.step)
		return sig, sig >= realtimeMin && sig <= realtimeMax
	}
	return 0, false
}

// isRealtime reports whether sig is one of the system's real-time signals,
// the two the C library keeps for itself included.
func isRealtime(sig syscall.Signal) bool {
	return realtimeFirst != 0 && sig >= realtimeFirst && sig <= realtimeMax
}

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

func runExecute(c *toolCall) (any, error) {
	command := c.str("command")
	if command == "" {
		return nil, fmt.Errorf("%w: command is required and must not be empty", errInvalid)
	}
	policy := defaultCapture
	if p, ok := c.vals["capture"].(capturePolicy); ok {
		policy = p
	}
	env, _ := c.vals["env"].(map[string]string)
	j, started := c.reg.start(startRequest{command: command, dir: c.str("cwd"), env: env,
		stdin: c.str("stdin"), closeStdin: c.flag("close_stdin"), policy: policy})
	if !started {
		return resultOf(j), nil
	}
	if c.flag("nowait") {
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

func runWait(c *toolCall) (any, error) {
	ids, _ := c.vals["job_ids"].([]string)
	timeout := c.seconds("timeout", c.cfg.defaultTimeout)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	delivered, err := c.reg.waitAny(c.waiter, ids, deadline, timeout <= 0)
	if err != nil {
		return nil, err
	}
	entries := make([]*resultJSON, len(ids))
	for i, id := range ids {
		if j, ok := delivered[id]; ok {
			entries[i] = resultOf(j)
		} else {
			entries[i] = &resultJSON{JobID: id, State: stateRunning}
		}
	}
	return entries, nil
}

func runStatus(c *toolCall) (any, error) {
	j, err := c.reg.lookup(c.str("job_id"))
	if err != nil {
		return nil, err
	}
	return statusOf(j), nil
}

func runOutput(c *toolCall) (any, error) {
	j, err := c.reg.lookup(c.str("job_id"))
	if err != nil {
		return nil, err
	}
	r := statusOf(j)
	r.Stdout, r.Stderr = sliceOf(j.stdout, c.stream("stdout")), sliceOf(j.stderr, c.stream("stderr"))
	return r, nil
}

func runInput(c *toolCall) (any, error) {
	j, err := c.reg.input(c.waiter, c.str("job_id"), c.str("data"), c.flag("close"))
	if err != nil {
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

func runKill(c *toolCall) (any, error) {
	plan := killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: c.seconds("timeout", 5*time.Second)}
	if sig, ok := c.vals["signal"].(syscall.Signal); ok {
		plan.signals = []syscall.Signal{sig}
		if sig == assured {
			plan.signals = []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
		}
	}
	j, out, err := c.reg.kill(c.waiter, c.str("job_id"), plan)
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

// jobEntry is one line of list_jobs.
type jobEntry struct {
	JobID string `json:"job_id"`
	State string `json:"state"`
}

func runListJobs(c *toolCall) (any, error) {
	jobs := c.reg.list()
	entries := make([]jobEntry, len(jobs))
	for i, j := range jobs {
		entries[i] = jobEntry{JobID: j.id, State: j.outcome().state}
	}
	return map[string]any{"jobs": entries}, nil
}

// waiter is how a blocking tool call waits: cancellable through ctx, and
// reporting progress every interval while it blocks.
type waiter struct {
	ctx      context.Context
	interval time.Duration               // 0: the caller asked for no progress
	report   func(n int, message string) // sends one progress notification
	sent     int                         // notifications sent so far
	next     time.Time                   // when the next one is due
}

// sleep blocks until wake is closed, deadline passes (zero: never) or the
// call is cancelled (errCancelled). Progress notifications go out on
// schedule meanwhile; describe says what the call is waiting for.
func (w *waiter) sleep(wake <-chan struct{}, deadline time.Time, describe func() string) error {
	for {
		due := deadline
		if w.interval > 0 {
			if w.next.IsZero() {
				w.next = time.Now().Add(w.interval)
			}
			if due.IsZero() || w.next.Before(due) {
				due = w.next
			}
		}
		var timer *time.Timer
		var fired <-chan time.Time
		if !due.IsZero() {
			timer = time.NewTimer(time.Until(due))
			fired = timer.C
		}
		select {
		case <-wake:
		case <-w.ctx.Done():
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		switch {
		case w.ctx.Err() != nil:
			return errCancelled
		case isClosed(wake):
			return nil
		case w.interval > 0 && !time.Now().Before(w.next):
			w.sent++
			w.report(w.sent, describe())
			w.next = w.next.Add(w.interval)
			continue
		}
		return nil // deadline
	}
}

// isClosed reports whether ch is closed (or has a value ready).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
