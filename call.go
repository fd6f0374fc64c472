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
	// asTask, when set (a 2026-07-28 client with the tasks extension),
	// makes the running job of a call that would yield a task the client
	// polls: it takes the job and how its finished result renders, and
	// returns the call's answer (a becameTask).
	asTask func(j *job, render func() (any, error)) any
	// toEnd says the call runs as a task (2025-11-25): it blocks until its
	// job ends, whatever yield_after says. onStart, when set, hears the
	// start of the call's job.
	toEnd   bool
	onStart func(j *job)
}

// becameTask is a handler's answer when its call became a task: reply
// passes it on untouched, for the tasks layer to answer the call.
type becameTask struct{ task any }

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

// cost measures what the result costs in this call's reply line. Under the
// agent profile a result is sized as if the reply also carried it as
// structuredContent, so a model reads as much, about half the budget, in
// every protocol era.
func (c *toolCall) cost() lineCost {
	return lineCost{structured: c.structured || c.cfg.profile == profileAgent}
}

// job is the held job that id names.
func (c *toolCall) job(id jobID) *job { return c.jobs[id] }

// refusedEarly returns err, a call's argument error, after logging it in
// the job log when a setting refused it (a time limit above
// MCP_EXEC_MAX_TIME_LIMIT, a program the shell set's allowlist lacks): such
// refusals come before the registry, which logs its own. req names what the
// call asked to run.
func (c *toolCall) refusedEarly(req startRequest, err error) error {
	if refusingSetting(err) != "" {
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
	if task, ok := res.(becameTask); ok {
		return task, nil
	}
	for _, r := range resultsIn(res) {
		if c.cfg.profile == profileAgent && r.delivered != nil {
			r.leaveOutEmptyStreams()
		}
		r.Kept = c.keepsUncaptured(r)
	}
	whole := slicesAsTheyAre(res)
	text, err := fitText(res, c.replyBudget(), c.cost())
	if err != nil {
		return nil, err
	}
	if entries, ok := res.([]*resultJSON); ok && c.cost().of(text) > c.replyBudget() {
		if text, err = c.deferResults(entries, whole); err != nil {
			return nil, err
		}
	}
	for _, r := range resultsIn(res) {
		if r.Kept {
			c.reg.keep(r.delivered, c.cfg.keptDuration)
		}
	}
	return toolText(text), nil
}

// keepsUncaptured says whether r is kept for what its capture left out:
// under the agent profile, a delivered result's uncaptured bytes stay
// readable, as a cut result's do.
func (c *toolCall) keepsUncaptured(r *resultJSON) bool {
	return c.cfg.profile == profileAgent && r.delivered != nil && len(r.Uncaptured) > 0
}

// deferResults is for a wait whose results do not fit its reply budget even
// with every slice cut away: from the last, results are taken back (their
// jobs return to the registry, for the next wait) and stand as status
// entries with "deferred": true, until the rest fits. whole puts back the
// slices a fit cut, so each fit starts from the whole results.
func (c *toolCall) deferResults(entries []*resultJSON, whole func()) ([]byte, error) {
	fit := func() ([]byte, error) {
		whole()
		for _, e := range entries {
			e.Kept = c.keepsUncaptured(e) // a result cut before may fit whole now
		}
		return fitText(entries, c.replyBudget(), c.cost())
	}
	// One entry per job id is the shape of wait's answer: when even status
	// entries alone would not fit, deferring helps nobody, and the results
	// go out as small as cuts make them.
	statuses := make([]*resultJSON, len(entries))
	for i, e := range entries {
		s := *e
		// Deferred, it was not delivered: nothing of it is kept.
		s.Stdout, s.Stderr, s.Uncaptured, s.Deferred = nil, nil, nil, e.delivered != nil
		s.Kept, s.delivered = false, nil
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
