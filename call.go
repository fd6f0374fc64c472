package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
)

// answer is what a tool handler or a protocol method answers: one of a
// closed set of kinds, each knowing its own way to the reply. toolText is
// a JSON document sent as one text item; toolResult is plain text or a
// tool error; jsonAnswer is a value encoded as it is (a method's result
// object, or a tool's, whose job results the reply fits into its budget);
// yieldedAnswer is an execute whose job runs on; the session adds its
// task answer. The methods are unexported, so no other kind can join.
type answer interface {
	// finish is the tools/call result the answer makes for call c: job
	// results are fitted into the reply budget and kept, a final kind is
	// itself.
	finish(c *toolCall) (answer, error)
	// wire is the answer as a reply carries it; an error when it cannot
	// be encoded.
	wire() (wireAnswer, error)
	// callResult is the answer as a CallToolResult object (structured:
	// with structuredContent), as its tools/call reply would carry it.
	callResult(structured bool) callResultJSON
	// toolError is the text of a tool error result; "" for any other.
	toolError() string
}

// wireAnswer is an answer's encoded form: JSON text, sent as one text item
// of a tools/call result (textItem) or as the result object itself, with
// the modern era's resultType.
type wireAnswer struct {
	text       []byte
	textItem   bool
	resultType string
}

// callResultJSON is a CallToolResult object; tasks/result adds _meta. Its
// members are in the order encoding/json writes a map's keys.
type callResultJSON struct {
	Meta              map[string]any  `json:"_meta,omitempty"`
	Content           []textContent   `json:"content"`
	IsError           bool            `json:"isError,omitempty"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
}

// toolText is a successful tools/call result: one text item holding a JSON
// document. encodeReply writes it straight into the reply line, so a big
// result is escaped once into one buffer of the right size instead of
// passing through a string and a second encoder.
type toolText []byte

// finish is t: already the result.
func (t toolText) finish(*toolCall) (answer, error) { return t, nil }

// wire is t, to go as one text item.
func (t toolText) wire() (wireAnswer, error) {
	return wireAnswer{text: t, textItem: true, resultType: resultComplete}, nil
}

// toolError is "": t is a success.
func (t toolText) toolError() string { return "" }

// callResult is t's object as textReply writes it: the text, and, when
// structured, the document again (wait's array wrapped in an object).
func (t toolText) callResult(structured bool) callResultJSON {
	obj := callResultJSON{Content: []textContent{{Type: "text", Text: string(t)}}}
	if structured {
		obj.StructuredContent = json.RawMessage(t)
		if wrapsStructured(t) {
			obj.StructuredContent = concat(waitWrapOpen, []byte(t), "}")
		}
	}
	return obj
}

// wrapsStructured says whether a tool result's text, as structuredContent,
// must be wrapped in an object: wait's array of results (structured
// content is an object).
func wrapsStructured(text []byte) bool { return len(text) > 0 && text[0] == '[' }

// waitWrapOpen opens the object that wraps wait's array of results.
const waitWrapOpen = `{"results":`

// resultComplete is the modern era's resultType of a result that is the
// request's whole answer.
const resultComplete = "complete"

// toolResult is the tools/call result shape.
type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError,omitempty"`
}

// finish is r: already the result.
func (r toolResult) finish(*toolCall) (answer, error) { return r, nil }

// wire is r encoded as the result object.
func (r toolResult) wire() (wireAnswer, error) { return wireOf(r, resultComplete) }

// callResult is r as it is.
func (r toolResult) callResult(bool) callResultJSON {
	return callResultJSON{Content: r.Content, IsError: r.IsError}
}

// toolError is r's first text when r is a tool error.
func (r toolResult) toolError() string {
	if !r.IsError {
		return ""
	}
	return r.Content[0].Text
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

// jsonAnswer is a value encoded as it is: a protocol method's result
// object, or a tool's answer, whose job results (results, pointing into
// body) the reply cuts to its budget. wait marks wait's array of entries,
// whose results may be deferred to fit.
type jsonAnswer struct {
	body    any // a wire value: what json.Marshal encodes
	results []*resultJSON
	wait    bool
	plain   *bool // whether slices and recent show plain text; nil: as the dialect shows them
}

// wireValue is v, a wire value with no job results in it, as an answer.
func wireValue(v any) jsonAnswer { return jsonAnswer{body: v} }

// resultAnswer is one job result or status as an answer.
func resultAnswer(r *resultJSON) jsonAnswer {
	return jsonAnswer{body: r.onWire(), results: []*resultJSON{r}}
}

// waitAnswer is wait's entries, one per job id, as an answer.
func waitAnswer(entries []*resultJSON) jsonAnswer {
	return jsonAnswer{body: onWireAll(entries), results: entries, wait: true}
}

// finish is a cut to c's budget as one text item (toolCall.fit).
func (a jsonAnswer) finish(c *toolCall) (answer, error) { return c.fit(a) }

// wire is a's body encoded as the result object.
func (a jsonAnswer) wire() (wireAnswer, error) { return wireOf(a.body, resultComplete) }

// toolError is "": a is a success.
func (a jsonAnswer) toolError() string { return "" }

// callResult is a's encoding as one text item: only a finished answer is
// a tool's result, so this is for completeness.
func (a jsonAnswer) callResult(structured bool) callResultJSON {
	text, _ := marshal(a.body) // a wire value: the reply encoded it first
	return toolText(text).callResult(structured)
}

// wireOf is body encoded as a result object of resultType.
func wireOf(body any, resultType string) (wireAnswer, error) {
	text, err := marshal(body)
	return wireAnswer{text: text, resultType: resultType}, err
}

// yieldedAnswer is execute's answer when its job runs on past its yield:
// now makes what the call answers (the running entry: made only when it
// is, since it looks at the job), later renders the job's result once it
// has ended and been delivered, for one who waits on (a task of the
// 2026-07-28 extension).
type yieldedAnswer struct {
	job   *job
	now   func() answer
	later func() (answer, error)
}

// finish is the running entry's result for c.
func (y yieldedAnswer) finish(c *toolCall) (answer, error) { return y.now().finish(c) }

// wire is the running entry's.
func (y yieldedAnswer) wire() (wireAnswer, error) { return y.now().wire() }

// callResult is the running entry's.
func (y yieldedAnswer) callResult(structured bool) callResultJSON {
	return y.now().callResult(structured)
}

// toolError is the running entry's: "".
func (y yieldedAnswer) toolError() string { return y.now().toolError() }

// toolCall is one tools/call on its way through a handler: the session's
// jobs and settings, how the call waits, and the jobs its arguments name.
type toolCall struct {
	reg    *registry
	cfg    *config
	waiter *waiter
	jobs   map[jobID]*job // looked up as the call was read; see holdJobs
	// replyOverhead is what the reply line holds besides the result's
	// escaped text (the session knows the request id); maxReply is the
	// call's max_reply_bytes, 0 when it gave none; dialect is how the
	// request is answered, as the session decided it.
	replyOverhead int
	maxReply      replyBytes
	dialect       dialect
	// log sends notifications/message at a level on the request's own
	// channel; nil unless a 2026-07-28 request asked for messages.
	log messageLogger
	// room is where the call waits, before it copies job output into its
	// reply, for its client to have room for the reply; nil when the
	// transport bounds nothing (see roomForReply).
	room replyRoom
	// waitToEnd says the call's job is waited for to the end, whatever the
	// call asked (runJob): set where a task form asks for it. onStart, when
	// set, hears the start of the call's job.
	waitToEnd bool
	onStart   jobStartListener
	// trace is the W3C trace context the request's _meta carried, read
	// by the session: every job the call starts runs in it.
	trace jobTrace
}

// reportsPrompts says whether the call's jobs report a wait for input as
// it happens (waiting_for_input): the agent profile asks for it.
func (c *toolCall) reportsPrompts() bool { return c.dialect.agent }

// keepsTreesInReach says whether the call's jobs stay in reach after their
// delivery while their trees run (lingering).
func (c *toolCall) keepsTreesInReach() bool { return c.dialect.agent }

// messageLogger sends a tool's notifications/message on its request's
// own channel.
type messageLogger interface {
	// message sends data at level from logger, or nothing when the level
	// is below what the request asked for or the request was cancelled.
	// Any goroutine may call it; it must not block (a client that is not
	// reading may have it dropped).
	message(level, logger string, data any)
}

// jobStartListener hears that a call's job started.
type jobStartListener interface {
	// jobStarted is called once, on the call's goroutine, right after the
	// job started and before the call waits for it; it must not block.
	jobStarted(j *job)
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
func (c *toolCall) cost() lineCost { return c.dialect.cost() }

// job is the held job that id names.
func (c *toolCall) job(id jobID) *job { return c.jobs[id] }

// refusedEarly returns err, a call's argument error, after logging it in
// the job log when a setting refused it (a time limit above
// MCP_EXEC_MAX_TIME_LIMIT, a program the shell set's allowlist lacks): such
// refusals come before the registry, which logs its own. req names what the
// call asked to run.
func (c *toolCall) refusedEarly(req startRequest, err error) error {
	if refusingSetting(err) != "" {
		req.trace = c.trace
		c.reg.logRefused(req, err)
	}
	return err
}

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

// reply turns what a handler returned into the tools/call result, cut to
// the call's reply budget: errCancelled as it is, another error as a tool
// error result.
func (c *toolCall) reply(res answer, err error) (answer, error) {
	if errors.Is(err, errCancelled) {
		return nil, err
	}
	if err != nil {
		return toolFailure(err), nil
	}
	return res.finish(c)
}

// fit is a's JSON text cut to the call's reply budget. The jobs of
// delivered results that had to be cut stay readable by status and output
// for a while.
func (c *toolCall) fit(a jsonAnswer) (answer, error) {
	for _, r := range a.results {
		if c.dialect.agent && r.delivered != nil {
			r.leaveOutEmptyStreams()
		}
		r.Kept = c.keepsUncaptured(r)
	}
	view := c.viewWith(a.plain)
	if view.plain {
		for _, r := range a.results {
			r.Recent = r.Recent.plain()
			for _, g := range r.searched {
				plainGrep(g)
			}
		}
	}
	whole := slicesAsTheyAre(a.results)
	if h := c.cfg.highlight; h != nil && len(a.results) > 0 {
		view.notes = cutNotesOf(h, view.plain, c.replyBudget()/highlightBudgetShare/len(a.results))
	}
	text, err := fitText(a.body, a.results, c.replyBudget(), c.cost(), view)
	if err != nil {
		return nil, err
	}
	if a.wait && c.cost().of(text) > c.replyBudget() {
		if text, err = c.deferResults(a.results, whole, view); err != nil {
			return nil, err
		}
	}
	for _, r := range a.results {
		if r.Kept {
			c.reg.keep(r.delivered, c.cfg.keptDuration)
		}
	}
	return toolText(text), nil
}

// viewWith is how the call's slices show: the dialect's view, with the
// plain text the call asked for (plain), when it did.
func (c *toolCall) viewWith(plain *bool) sliceView {
	v := c.dialect.view()
	if plain != nil {
		v.plain = *plain
	}
	return v
}

// keepsUncaptured says whether r is kept for what its capture left out:
// under the agent profile, a delivered result's uncaptured bytes stay
// readable, as a cut result's do.
func (c *toolCall) keepsUncaptured(r *resultJSON) bool {
	return c.dialect.agent && r.delivered != nil && len(r.Uncaptured) > 0
}

// deferResults is for a wait whose results do not fit its reply budget even
// with every slice cut away: from the last, results are taken back (their
// jobs return to the registry, for the next wait) and stand as status
// entries with "deferred": true, until the rest fits. whole puts back the
// slices a fit cut, so each fit starts from the whole results.
func (c *toolCall) deferResults(entries []*resultJSON, whole func(), view sliceView) ([]byte, error) {
	fit := func() ([]byte, error) {
		whole()
		for _, e := range entries {
			e.Kept = c.keepsUncaptured(e) // a result cut before may fit whole now
		}
		return fitText(onWireAll(entries), entries, c.replyBudget(), c.cost(), view)
	}
	// One entry per job id is the shape of wait's answer: when even status
	// entries alone would not fit, deferring helps nobody, and the results
	// go out as small as cuts make them.
	statuses := make([]*resultJSON, len(entries))
	for i, e := range entries {
		s := *e
		// Deferred, it was not delivered: nothing of it is kept.
		s.Stdout, s.Stderr, s.Uncaptured, s.Deferred = nil, nil, nil, e.delivered != nil
		s.Kept, s.delivered, s.searched = false, nil, [2]*grepJSON{}
		s.Highlights, s.HighlightsTotal = nil, 0
		s.sayCut("")
		statuses[i] = &s
	}
	if least, err := marshal(statuses); err != nil || c.cost().of(least) > c.replyBudget() {
		return fit()
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
		text, err := fit()
		if err != nil || c.cost().of(text) <= c.replyBudget() {
			return text, err
		}
	}
	return fit()
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
	taskSupport bool                  // may run as a 2025-11-25 task (execution.taskSupport "optional")
	yieldsTask  bool                  // a call that would yield becomes a 2026-07-28 task, for a client with the extension
	// hints, when set, are the tool's annotations as they are (none when
	// empty): a contract of another system states its own.
	hints    map[string]any
	agent    *toolWords   // its text under the agent profile (withAgentTexts); nil: the same as above
	argsType reflect.Type // the struct a call's arguments bind into
	params   []param
	prepare  func(c *toolCall, raw map[string]json.RawMessage) (func() (answer, error), error)
}

// newTool completes spec with the parameters of args struct A and a prepare
// that binds a call's arguments into an A and holds the jobs they name, for
// handle to run. Every parameter needs
// a doc and every doc a parameter; a mismatch panics when the table is built.
func newTool[A any](spec toolSpec, handle func(c *toolCall, a *A) (answer, error)) toolSpec {
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
	spec.prepare = func(c *toolCall, raw map[string]json.RawMessage) (func() (answer, error), error) {
		a := new(A)
		args := reflect.ValueOf(a).Elem()
		if err := bindArgs(spec.name, spec.params, raw, args); err != nil {
			if c.dialect.agent {
				err = agentArgHint(err)
			}
			return nil, err
		}
		if err := c.holdJobs(spec.params, args, spec.readsKept); err != nil {
			return nil, err
		}
		return func() (answer, error) { return handle(c, a) }, nil
	}
	return spec
}

// toolWords is a tool's description and its arguments' docs, with
// {placeholders}.
type toolWords struct {
	description string
	docs        map[string]string
}

// withAgentTexts gives each of tools its text under the agent profile from
// texts, by tool name; an argument without an agent doc keeps its doc. A
// text for no tool or a doc for no argument is a programming error: it
// panics when the table is built.
func withAgentTexts(tools []toolSpec, texts map[string]toolWords) []toolSpec {
	for name, text := range texts {
		i := slices.IndexFunc(tools, func(t toolSpec) bool { return t.name == name })
		if i < 0 {
			panic("agent text for no tool: " + name)
		}
		for arg := range text.docs {
			if tools[i].docs[arg] == "" {
				panic(fmt.Sprintf("tool %s: agent doc for no argument %s", name, arg))
			}
		}
		text := text
		tools[i].agent = &text
	}
	return tools
}

// callTimeLimit is a call's time limit argument: def when it gives none,
// else a number of seconds above 0 and, when MCP_EXEC_MAX_TIME_LIMIT is
// set, not above it.
func callTimeLimit(cfg *config, name string, given *seconds, def time.Duration) (time.Duration, error) {
	limit, err := optionalSeconds(name, given, def, false)
	if err == nil && given != nil && cfg.maxTimeLimit > 0 && limit > cfg.maxTimeLimit {
		return 0, refusedBy("MCP_EXEC_MAX_TIME_LIMIT", fmt.Errorf("%w: %s %v s is longer than MCP_EXEC_MAX_TIME_LIMIT allows (%v s)", errRefused, name,
			float64(*given), cfg.maxTimeLimit.Seconds()))
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

// toolNamesOf lists the names of tools in order.
func toolNamesOf(tools []toolSpec) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}

// noArgs is the arguments of a tool that takes none.
type noArgs struct{}
