package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// This file is a session: one client's conversation. It frames requests
// (one JSON value per line), decodes them, dispatches them through the
// method table and writes replies to the transport's replySink. A session
// owns its jobs; the server owns what all sessions share.

// methodSpec is one row of the protocol-shape table.
type methodSpec struct {
	notification bool // has no id and gets no reply
	legacyOnly   bool // gone from the modern era: -32601 for a modern request
	modernOnly   bool // not in the legacy era: -32601 for a legacy request
	inline       bool // cheap and non-blocking: answered on the reader goroutine
	call         func(s *session, ctx context.Context, m message) (answer, error)
	// prepare replaces call: on the reader goroutine, in read order, it does
	// what must happen then, and returns the rest to run on its own.
	prepare func(s *session, ctx context.Context, m message) func() (answer, error)
	notify  func(s *session, m message)
}

// methods is the protocol-shape table: every method the server knows. Any
// other request gets -32601; any other notification is ignored.
var methods = map[string]methodSpec{
	"initialize":      {inline: true, legacyOnly: true, call: (*session).initialize},
	"ping":            {inline: true, legacyOnly: true, call: func(*session, context.Context, message) (answer, error) { return wireValue(struct{}{}), nil }},
	"server/discover": {inline: true, modernOnly: true, call: (*session).discover},
	"tools/list": {inline: true, call: func(s *session, _ context.Context, m message) (answer, error) {
		return wireValue(s.tools.toolList(m.dialect)), nil
	}},
	"tools/call": {prepare: (*session).prepareToolCall},
	"tasks/get": {call: taskMethod(func(s *session, _ context.Context, m message, form taskForm) (answer, error) {
		return s.tasks.get(m.params, form == tasksModern)
	})},
	"tasks/cancel": {call: taskMethod(func(s *session, ctx context.Context, m message, form taskForm) (answer, error) {
		return s.tasks.cancel(ctx, m.params, form == tasksModern)
	})},
	"tasks/result": {legacyOnly: true, call: taskMethod(func(s *session, ctx context.Context, m message, _ taskForm) (answer, error) {
		return s.tasks.result(ctx, m.params, m.dialect.structured)
	})},
	"tasks/list": {legacyOnly: true, call: func(s *session, _ context.Context, m message) (answer, error) {
		if _, rerr := s.taskFormOf(m); rerr != nil || !s.tasksListable() {
			return nil, newError(codeNoMethod, "method not found: tasks/list (offered in a 2025-11-25 session on stdio or with a token)")
		}
		return s.tasks.list(m.params)
	}},
	"tasks/update": {modernOnly: true, call: taskMethod(func(s *session, _ context.Context, m message, _ taskForm) (answer, error) {
		return s.tasks.update(m.params)
	})},
	"notifications/initialized": {notification: true, notify: func(*session, message) {}},
	"notifications/cancelled":   {notification: true, notify: (*session).cancelRequest},
	"debug/stats":               {inline: true, call: (*session).stats},
}

// abandoner is a replySink that is told when a request it waits on will get
// no reply at all (it was cancelled in an era that answers nothing).
type abandoner interface {
	abandon()
}

// replySink is where a session's messages go: its transport's writer.
// send takes one whole message ending in a newline and must never block:
// the session's reading goroutine calls it.
type replySink interface {
	send(msg []byte)
}

// handingSink is a replySink that learns whether a reply reached its
// client: it settles h once the reply is written (or safely queued), and
// gives h back once it never will be. A sink that is not one settles every
// reply as it takes it.
type handingSink interface {
	sendHanded(msg []byte, h *handoff)
}

// sendReply sends a request's final reply, carrying h to a sink that can
// tell whether the reply arrived.
func sendReply(sink replySink, r replyParts, h *handoff) {
	if ps, ok := sink.(partsSink); ok {
		ps.sendParts(r, h)
		return
	}
	msg := encodeReply(r.id, r.shape, r.result, r.err)
	if hs, ok := sink.(handingSink); ok {
		hs.sendHanded(msg, h)
		return
	}
	sink.send(msg)
	h.settled()
}

// replyParts is a request's final reply before it is encoded.
type replyParts struct {
	id     json.RawMessage // the request's id in the session
	shape  replyShape
	result answer
	err    error // when set, the reply is this error and result is unused
}

// partsSink is a replySink that encodes a request's final reply itself,
// once, from its parts: a sink that serves one request's response (HTTP)
// names the id its client gave and reads the error code as a value. It
// settles or gives back h as a handingSink does.
type partsSink interface {
	sendParts(r replyParts, h *handoff)
}

// dropSink is a replySink that may drop a message the client can do
// without (a progress or log notification) when its client is not reading.
type dropSink interface {
	sendDroppable(msg []byte)
}

// intakeGate is a replySink that holds the session's reader, in awaitRoom,
// while its client leaves too much unread: no request is read meanwhile.
type intakeGate interface {
	awaitRoom()
}

// roomGate is a replySink that bounds the replies waiting for its client
// (stdio's writer): takeRoom returns once a reply may be built and queued,
// holding that room until release, or with ok false when done closes or
// the client is gone first. A request takes room before it copies job
// output into its reply (toolCall.roomForReply), so replies materialize
// only as fast as the client reads them; small replies take none. HTTP's
// sinks are none: each reply there is its own request's response, queued
// behind no other, so a client that stops reading holds up one reply per
// request it keeps open, each within the reply budget.
type roomGate interface {
	takeRoom(done <-chan struct{}) (release func(), ok bool)
}

// replyHold is a started request's claim on room for its reply in a
// roomGate (the toolCall's replyRoom), used by its goroutine only; nil holds none.
type replyHold struct {
	gate    roomGate
	done    <-chan struct{} // closed when the request is cancelled or its session ends
	release func()          // gives the room back; set while room is held
}

// take waits until the reply has room, and holds it (held: at once);
// errCancelled when the request is cancelled, or its session ends, first.
func (h *replyHold) take() error {
	if h == nil || h.release != nil {
		return nil
	}
	release, ok := h.gate.takeRoom(h.done)
	if !ok {
		return errCancelled
	}
	h.release = release
	return nil
}

// settle gives the room back: the reply is queued, or none will be.
func (h *replyHold) settle() {
	if h != nil && h.release != nil {
		h.release()
		h.release = nil
	}
}

// session serves one client: its requests, its jobs, its replies.
type session struct {
	cfg   *config
	tools *toolBook // what cfg offers, shared by the server's sessions
	reg   *registry
	out   replySink

	mu       sync.Mutex           // guards inflight and closing
	inflight map[string]*inflight // running tools/call requests by idKey
	closing  bool                 // the session is ending: no new requests

	negotiated string      // the legacy revision initialize agreed; only the reading goroutine uses it
	eventsOn   atomic.Bool // job events may go out: a legacy client initialized
	tasksOn    atomic.Bool // the session negotiated 2025-11-25 at initialize, whose tasks it offers
	tasks      *taskBoard  // the session's MCP tasks
	// quietCancel: a cancelled request gets no reply in any era, as MCP
	// says; stdio keeps 1.0's -32800 for legacy requests. Set before use.
	quietCancel bool

	handlers sync.WaitGroup // running request goroutines
	pending  []func()       // requests read but not started yet; only the reading goroutine uses it
	activity *activityClock // shared by the server's sessions: stamped when a request finishes
}

// newSession returns a session under cfg with no jobs that writes to out
// and stamps activity (which may be nil) whenever a request finishes.
func newSession(cfg *config, out replySink, activity *activityClock) *session {
	return newSessionOf(newToolBook(cfg), out, activity)
}

// newSessionOf is newSession with the book of its configuration, which a
// server computes once for all its sessions.
func newSessionOf(tools *toolBook, out replySink, activity *activityClock) *session {
	cfg := tools.cfg
	s := &session{cfg: cfg, tools: tools, reg: newRegistry(cfg), out: out, inflight: map[string]*inflight{},
		activity: activity}
	s.tasks = newTaskBoard(s.reg, &s.handlers)
	if cfg.jobEvents || cfg.offers(toolSetShell) {
		s.reg.observer = s
	}
	return s
}

// streamExec runs POST /exec's streamed exec in the session, its events to
// sink; ctx ends when the client leaves, tearing the job down (errors: runExecStream).
func (s *session) streamExec(ctx context.Context, body []byte, sink execSink) error {
	call := &toolCall{reg: s.reg, cfg: s.cfg, waiter: &waiter{ctx: ctx}, dialect: s.tools.dialectOf(replyShape{}, tasksOff)}
	return runExecStream(call, body, sink)
}

// jobEvent sends notifications/job for a job's start or end once a legacy
// client initialized: the modern era allows none outside a request's own.
func (s *session) jobEvent(j *job, event string) {
	if !s.eventsOn.Load() || j.contract == nil {
		return
	}
	if params := j.contract.jobEvent(s.cfg, j, event); params != nil {
		if msg := notification("notifications/job", params); msg != nil {
			s.out.send(msg)
		}
	}
}

// inflight is a request running on its own goroutine.
type inflight struct {
	cancel   context.CancelFunc
	modern   bool // the request is of the modern era
	silenced bool // cancelled with nothing more to send, not even its reply; guarded by session.mu
}

// serve reads requests from in until EOF or a read error. While its
// replySink is an intakeGate whose client leaves too much unread, it reads
// nothing: the replies would pile up without bound.
func (s *session) serve(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	defer s.startPending()
	gate, _ := s.out.(intakeGate)
	for {
		if gate != nil {
			gate.awaitRoom()
		}
		line, err := readLine(r, maxLineBytes)
		if gate != nil && len(line) > 0 {
			// The read may have blocked across the start of a pause (a
			// reply queued meanwhile reached the bound): this line waits
			// too, so no request runs while the client reads nothing.
			gate.awaitRoom()
		}
		switch {
		case errors.Is(err, errLineTooLong):
			s.refuse(newError(codeParse, "parse error: request line exceeds %d bytes and was discarded", maxLineBytes))
			continue
		case len(line) > 0:
			s.dispatch(line)
		}
		// Requests that arrived together all hold their jobs before any runs:
		// a kill cannot deliver a job before another kill sent with it read it.
		if !hasBufferedLine(r) {
			s.startPending()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// hasBufferedLine reports whether r holds a whole line not read yet.
func hasBufferedLine(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered()) // cannot fail: it asks for what is buffered
	return bytes.IndexByte(b, '\n') >= 0
}

// startPending starts the requests dispatch prepared. Only the reading
// goroutine calls it.
func (s *session) startPending() {
	for _, run := range s.pending {
		go run()
	}
	// Cleared, not only cut: a slot keeps its closure, with the request
	// and the jobs its reply delivers, until a later burst reaches it.
	clear(s.pending)
	s.pending = s.pending[:0]
}

// dispatch handles one line per the methods table; a request that runs on
// its own goroutine is prepared now and started by startPending.
func (s *session) dispatch(line []byte) {
	line = bytes.TrimRight(line, "\r \t")
	trimmed := trimJSONSpace(line)
	switch {
	case len(trimmed) == 0:
	case trimmed[0] == '[' && s.negotiated == batchVersion:
		s.dispatchBatch(trimmed)
	default:
		s.dispatchTo(line, s.out)
	}
}

// dispatchTo handles one message, whose replies go to sink.
func (s *session) dispatchTo(line []byte, sink replySink) {
	m, replyID, rerr := decodeMessage(line)
	if rerr != nil {
		sink.send(encodeReply(replyID, replyShape{}, nil, rerr))
		return
	}
	s.dispatchDecoded(m, chooseEra(m.params), sink)
}

// handleDecoded handles one message its transport decoded, of the era it
// chose from the same params (the session decodes neither again); its
// replies and progress go to sink (a response stream per request). One
// goroutine at a time may call it.
func (s *session) handleDecoded(m message, era eraChoice, sink replySink) {
	s.dispatchDecoded(m, era, sink)
	s.startPending()
}

// eraChoice is a message's era as modernRequest decides it from its params.
type eraChoice struct {
	modern bool
	caps   json.RawMessage // a modern request's clientCapabilities, as sent
	rerr   *rpcError       // the params' _meta is refused: the request's answer
}

// chooseEra decides the era of a message with these params.
func chooseEra(params json.RawMessage) eraChoice {
	modern, caps, rerr := modernRequest(params)
	return eraChoice{modern: modern, caps: caps, rerr: rerr}
}

// dispatchDecoded handles a decoded message of era era, whose replies go
// to sink.
func (s *session) dispatchDecoded(m message, era eraChoice, sink replySink) {
	if m.response {
		return // nothing to answer
	}
	spec, known := methods[m.method]
	if m.id == nil {
		if known && spec.notification {
			spec.notify(s, m)
		}
		return // notifications are never answered
	}
	m.replyTo = sink
	if era.rerr != nil {
		m.fail(era.rerr)
		return
	}
	modern := era.modern
	m.dialect = s.tools.dialectOf(shapeOf(modern, s.negotiated), s.taskFormFor(modern, era.caps))
	switch {
	case !known || spec.modernOnly && !modern: // a legacy probe of server/discover must fail fast, as 1.0 did
		m.fail(newError(codeNoMethod, "method not found: %s", clipText(m.method)))
	case spec.notification:
		m.fail(newError(codeInvalidRequest, "invalid request: %s is a notification and must not carry an id", m.method))
	case modern && spec.legacyOnly:
		m.fail(newError(codeNoMethod, "method not found: %s is not part of %s (use server/discover)", m.method, modernVersions[0]))
	case m.params != nil && (len(m.params) == 0 || m.params[0] != '{'):
		m.fail(newError(codeInvalidParams, "invalid params: params must be an object"))
	case spec.inline:
		res, err := spec.call(s, context.Background(), m)
		m.reply(m.dialect.replyShape, res, err)
	default:
		s.start(m, spec)
	}
}

// fail answers the request m with an error.
func (m message) fail(err *rpcError) { m.reply(replyShape{}, nil, err) }

// reply answers the request m, on the spot, with res dressed in shape or
// with err; the reply delivers nothing to be handed over.
func (m message) reply(shape replyShape, res answer, err error) {
	if ps, ok := m.replyTo.(partsSink); ok {
		ps.sendParts(replyParts{id: m.id, shape: shape, result: res, err: err}, nil)
		return
	}
	m.replyTo.send(encodeReply(m.id, shape, res, err))
}

// dispatchBatch handles a batch (2025-03-26 allows them): each message as
// if on a line of its own, the replies as one array; notifications get none.
func (s *session) dispatchBatch(line []byte) {
	var items []json.RawMessage
	if err := json.Unmarshal(line, &items); err != nil {
		s.refuse(newError(codeParse, "parse error: the batch is not a valid JSON array"))
		return
	}
	if len(items) == 0 {
		s.refuse(newError(codeInvalidRequest, "invalid request: an empty batch"))
		return
	}
	replies := &batchReplies{out: s.out}
	for _, item := range items {
		if m, _, rerr := decodeMessage(item); rerr != nil || !m.response && m.id != nil {
			replies.want++
		}
	}
	for _, item := range items {
		if m, _, rerr := decodeMessage(item); rerr == nil && m.method == "initialize" && m.id != nil {
			replies.send(encodeReply(m.id, replyShape{}, nil, newError(codeInvalidRequest, "invalid request: initialize must not be part of a batch")))
			continue
		}
		s.dispatchTo(item, replies)
	}
}

// batchReplies gathers the replies to one batch and sends them as one
// array line when the last arrives; a member cancelled in an era that
// answers nothing gives none (abandon). It is no roomGate: room a member
// took would free only once every member had its reply.
type batchReplies struct {
	out replySink

	mu   sync.Mutex // guards want and got
	want int        // replies the batch's requests will give
	got  [][]byte   // replies so far, without their newlines
}

// send gathers one reply.
func (b *batchReplies) send(msg []byte) { b.gather(bytes.TrimSuffix(msg, []byte("\n")), 0) }

// abandon stops waiting for a member's reply that will never come.
func (b *batchReplies) abandon() { b.gather(nil, 1) }

// gather adds reply, if any, and gives up on abandoned more; the one call
// that completes the batch sends its array line.
func (b *batchReplies) gather(reply []byte, abandoned int) {
	b.mu.Lock()
	if reply != nil {
		b.got = append(b.got, reply)
	}
	b.want -= abandoned
	var line []byte
	if b.want > 0 && len(b.got) == b.want {
		line = append(append([]byte("["), bytes.Join(b.got, []byte(","))...), "]\n"...)
	}
	b.mu.Unlock()
	if line != nil {
		b.out.send(line)
	}
}

// sendDroppable passes a member's progress or log notification on: it
// goes out when sent, outside the array.
func (b *batchReplies) sendDroppable(msg []byte) { notifyOn(b.out, msg) }

// start runs a request on its own goroutine, registered so that
// notifications/cancelled and shutdown can cancel it.
func (s *session) start(m message, spec methodSpec) {
	key, _ := idKey(m.id)
	s.mu.Lock()
	var refusal *rpcError
	if _, dup := s.inflight[key]; s.closing {
		refusal = newError(codeCancelled, "request cancelled: the server is shutting down")
	} else if dup {
		refusal = newError(codeInvalidRequest, "invalid request: id %s is already in use by a running request", m.id)
	}
	if refusal != nil {
		s.mu.Unlock()
		m.fail(refusal)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := &inflight{cancel: cancel, modern: m.dialect.modern}
	s.inflight[key] = req
	s.handlers.Add(1)
	s.mu.Unlock()
	if gate, ok := m.replyTo.(roomGate); ok {
		m.room = &replyHold{gate: gate, done: ctx.Done()}
	}
	m.handoff = &handoff{}
	run := func() (answer, error) { return spec.call(s, ctx, m) }
	if spec.prepare != nil {
		run = spec.prepare(s, ctx, m)
	}
	s.pending = append(s.pending, func() {
		defer s.handlers.Done()
		defer m.room.settle() // after the reply is queued: the next call's check counts it
		res, err := run()
		s.mu.Lock()
		delete(s.inflight, key)
		silenced := req.silenced
		s.mu.Unlock()
		cancel()
		if silenced || errors.Is(err, errCancelled) {
			m.handoff.giveBack() // nobody will read what the call delivered
		}
		if !silenced {
			sendReply(m.replyTo, replyParts{id: m.id, shape: m.dialect.replyShape, result: res, err: err}, m.handoff)
		} else if a, ok := m.replyTo.(abandoner); ok {
			a.abandon() // no reply will come: a transport waiting for one may stop
		}
		s.activity.touch()
	})
}

// cancelRequest handles notifications/cancelled. Unknown, finished, repeated
// and malformed request ids are ignored.
func (s *session) cancelRequest(m message) {
	params, _ := decodeObject(m.params) // malformed: nil, and so no id
	s.cancelID(params["requestId"], false)
}

// cancelID cancels the running request with this id, if any, as
// notifications/cancelled does; a transport calls it when the request's
// response stream is gone. The request gets no reply when silence is set
// or its era answers a cancelled request with nothing.
func (s *session) cancelID(id json.RawMessage, silence bool) {
	key, ok := idKey(id)
	if !ok {
		return
	}
	s.mu.Lock()
	req := s.inflight[key]
	if req != nil && (silence || req.modern || s.quietCancel) {
		req.silenced = true
	}
	s.mu.Unlock()
	if req != nil {
		req.cancel()
	}
}

// cancelAll cancels every running request and refuses new ones; shutdown
// calls it so blocked calls answer -32800.
func (s *session) cancelAll() {
	s.mu.Lock()
	s.closing = true
	cancels := make([]context.CancelFunc, 0, len(s.inflight))
	for _, req := range s.inflight {
		cancels = append(cancels, req.cancel)
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	s.tasks.end() // the calls of tasks end as cancelled calls do
}

// taskMethod is the call of a tasks/ method: f runs with the form of tasks
// m's client declared; a client that declared none gets taskFormOf's error.
func taskMethod(f func(s *session, ctx context.Context, m message, form taskForm) (answer, error)) func(*session, context.Context, message) (answer, error) {
	return func(s *session, ctx context.Context, m message) (answer, error) {
		form, rerr := s.taskFormOf(m)
		if rerr != nil {
			return nil, rerr
		}
		return f(s, ctx, m, form)
	}
}

// taskFormOf is the form of tasks request m may use, or the error for a
// request that may use none: -32601 in the legacy era (a revision before
// 2025-11-25), -32021 naming the
// extension in the modern one.
func (s *session) taskFormOf(m message) (taskForm, *rpcError) {
	if form := m.dialect.tasks; form != tasksOff {
		return form, nil
	}
	if m.dialect.modern {
		e := newError(codeMissingCapability, "missing client capability: %s needs the %s extension in _meta[%q].extensions", clipText(m.method), extTasks, metaClientCaps)
		e.Data = map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}
		return tasksOff, e
	}
	return tasksOff, newError(codeNoMethod, "method not found: %s (tasks are offered in sessions that negotiate %s at initialize)", clipText(m.method), tasksVersion)
}

// taskFormFor is the form of tasks a request may use, of the modern era or
// not, whose _meta declared clientCaps (modern only); tasksOff when a
// modern client declared no extension or a legacy session negotiated a
// revision before 2025-11-25.
func (s *session) taskFormFor(modern bool, clientCaps json.RawMessage) taskForm {
	switch {
	case modern && declaresTaskExtension(clientCaps):
		return tasksModern
	case !modern && s.tasksOn.Load():
		return tasksLegacy
	}
	return tasksOff
}

// tasksListable says whether tasks/list is offered: on stdio, or where a
// token says who the client is (task ids are unguessable either way).
func (s *session) tasksListable() bool {
	return !s.reg.randomIDs || s.cfg.token != nil
}

// refuse answers err to a request whose id could not be read.
func (s *session) refuse(err *rpcError) {
	s.out.send(encodeReply(json.RawMessage("null"), replyShape{}, nil, err))
}

// encodeReply builds a reply: a result dressed in shape, or an error
// (*rpcError as is, a sentinel of errorCodes with its code, else internal).
func encodeReply(id json.RawMessage, shape replyShape, result answer, err error) []byte {
	var rerr *rpcError
	switch {
	case err != nil:
		rerr = rpcErrorOf(err)
	default:
		w, merr := result.wire()
		if merr == nil && w.textItem {
			return textReply(id, shape, w.text)
		}
		if merr == nil {
			res := w.text
			if shape.modern {
				res = dressResultAs(res, w.resultType)
			}
			return concat(replyHead, id, `,"result":`, res, "}\n")
		}
		rerr = newError(codeInternal, "internal error: %v", merr)
	}
	e, _ := marshal(rerr) // cannot fail: two plain fields
	return concat(replyHead, id, `,"error":`, e, "}\n")
}

// prepareToolCall handles tools/call as it is read: a malformed params
// fails with a JSON-RPC error; the tool's arguments are the tools layer's,
// which holds the jobs they name now and works in the run it returns.
func (s *session) prepareToolCall(ctx context.Context, m message) func() (answer, error) {
	fail := func(err error) func() (answer, error) { return func() (answer, error) { return nil, err } }
	if m.params == nil {
		return fail(newError(codeInvalidParams, "invalid params: tools/call needs params with a tool name"))
	}
	params, err := decodeObject(m.params)
	if err != nil {
		return fail(newError(codeInvalidParams, "invalid params: %v", err))
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || name == "" {
		return fail(newError(codeInvalidParams, "invalid params: tools/call needs a tool name string in params.name"))
	}
	meta, _ := decodeObject(params["_meta"]) // absent or not an object: no progress, no messages
	form := m.dialect.tasks
	if task, augmented := params["task"]; augmented && form == tasksLegacy && !isNull(task) {
		return s.prepareTaskCall(m, name, params)
	}
	call := &toolCall{reg: s.reg, cfg: s.cfg, waiter: s.waiterFor(ctx, meta, m),
		dialect: m.dialect, replyOverhead: len(textReply(m.id, m.dialect.replyShape, nil)) + len(waitWrapOpen) + 1,
		log: loggerFor(ctx, meta, m), trace: traceFromMeta(meta)}
	if m.room != nil { // a nil *replyHold would make a non-nil replyRoom
		call.room = m.room
	}
	run, err := s.tools.prepareTool(call, name, params["arguments"])
	if err != nil {
		return fail(err)
	}
	if form == tasksModern {
		return s.tasks.answerModern(call, run)
	}
	return func() (answer, error) { return call.reply(run()) }
}

// prepareTaskCall handles a task-augmented tools/call (2025-11-25): the
// tool must support tasks (-32601 otherwise, as the revision says); its
// call runs under the task and answers the task at once.
func (s *session) prepareTaskCall(m message, name string, params map[string]json.RawMessage) func() (answer, error) {
	fail := func(err error) func() (answer, error) { return func() (answer, error) { return nil, err } }
	if t, ok := s.tools.table.byName[name]; ok && !t.taskSupport {
		return fail(newError(codeNoMethod, "method not found: tool %s does not run as a task (those that do: %s)", clipText(name), s.tools.taskTools()))
	}
	ttl, rerr := taskTTLOf(params["task"])
	if rerr != nil {
		return fail(rerr)
	}
	t := s.tasks.open(ttl)
	// No progress, messages or room for a reply: the call answers later,
	// through tasks/result.
	meta, _ := decodeObject(params["_meta"]) // absent or not an object: no trace context
	call := &toolCall{reg: s.reg, cfg: s.cfg, waiter: &waiter{ctx: t.ctx}, dialect: m.dialect, trace: traceFromMeta(meta),
		replyOverhead: len(textReply(m.id, m.dialect.replyShape, nil)) + len(waitWrapOpen) + len(metaRelatedTask) + len(t.id) + 32}
	run, err := s.tools.prepareTool(call, name, params["arguments"])
	if err != nil {
		s.tasks.drop(t)
		return fail(err)
	}
	return s.tasks.runLegacy(t, call, func() (answer, error) { return call.reply(run()) })
}

// waiterFor builds the waiter of one call: progress notifications go out
// only when the request's _meta (nil when it has none) has progressToken.
func (s *session) waiterFor(ctx context.Context, meta map[string]json.RawMessage, m message) *waiter {
	w := &waiter{ctx: ctx, handoff: m.handoff}
	token, ok := meta["progressToken"]
	if !ok || !validID(token) {
		return w
	}
	w.interval = s.cfg.progressInterval
	w.showOutput = string(meta[metaProgressOutput]) == "true"
	w.reporter = progressNotifier{ctx: ctx, sink: m.replyTo, token: token}
	return w
}

// progressNotifier sends a request's notifications/progress where its
// reply will go, until the request is cancelled.
type progressNotifier struct {
	ctx   context.Context
	sink  replySink
	token json.RawMessage // the request's progressToken, as sent
}

// progress sends one notifications/progress, droppably.
func (p progressNotifier) progress(n int, message string) {
	if p.ctx.Err() != nil {
		return // cancelled: nothing more goes out for the request
	}
	notifyDroppable(p.sink, "notifications/progress", map[string]any{
		"progressToken": p.token, "progress": n, "message": message,
	})
}

// loggerFor sends a tool's notifications/message, at or above the level a
// 2026-07-28 request set, on its own channel until it is cancelled. Any
// other request gets nil: a legacy session's would surface in others.
func loggerFor(ctx context.Context, meta map[string]json.RawMessage, m message) messageLogger {
	if !m.dialect.modern {
		return nil
	}
	var least string
	if json.Unmarshal(meta[metaLogLevel], &least) != nil || !slices.Contains(logLevels, least) {
		return nil
	}
	return requestLog{ctx: ctx, sink: m.replyTo, floor: slices.Index(logLevels, least)}
}

// requestLog sends a request's notifications/message at or above floor
// (an index in logLevels) where its reply will go, until it is cancelled.
type requestLog struct {
	ctx   context.Context
	sink  replySink
	floor int
}

// message sends one notifications/message, droppably.
func (l requestLog) message(level, logger string, data any) {
	if slices.Index(logLevels, level) < l.floor || l.ctx.Err() != nil {
		return
	}
	notifyDroppable(l.sink, "notifications/message", map[string]any{"level": level, "logger": logger, "data": data})
}

// notifyDroppable sends a progress or log notification where the reply will
// go; a sink whose client is not reading may drop it (dropSink).
func notifyDroppable(sink replySink, method string, params any) {
	if msg := notification(method, params); msg != nil {
		notifyOn(sink, msg)
	}
}

// notifyOn sends a droppable notification's line to sink.
func notifyOn(sink replySink, msg []byte) {
	if d, ok := sink.(dropSink); ok {
		d.sendDroppable(msg)
		return
	}
	sink.send(msg)
}

// notification is the line of a notification, nil if params cannot be
// encoded.
func notification(method string, params any) []byte {
	p, err := marshal(params)
	if err != nil {
		logf("notify %s: %v", method, err)
		return nil
	}
	return concat(`{"jsonrpc":"2.0","method":"`, []byte(method), `","params":`, p, "}\n")
}

// initialize answers the handshake, echoing the client's protocol version
// when supported and offering the newest one otherwise.
func (s *session) initialize(_ context.Context, m message) (answer, error) {
	negotiated := supportedVersions[0]
	p, _ := decodeObject(m.params) // absent or malformed: nil, and the newest is offered
	var asked string
	if json.Unmarshal(p["protocolVersion"], &asked) == nil && slices.Contains(supportedVersions, asked) {
		negotiated = asked
	}
	s.negotiated = negotiated
	s.eventsOn.Store(true)
	// The server's capabilities are its own to declare: a 2025-11-25 client
	// learns of tasks here whether or not it declared capabilities.tasks
	// itself (that declaration is about tasks the server would send it).
	tasks := negotiated == tasksVersion
	s.tasksOn.Store(tasks)
	capabilities := map[string]any{"tools": map[string]any{}} // exactly the wire shape
	// The dialect the session's requests speak from now on, as far as the
	// instructions tell it: this request was read before the revision was.
	d := m.dialect
	d.tasks = tasksOff
	if tasks {
		capabilities["tasks"] = legacyTaskCapability(s.tasksListable())
		d.tasks = tasksLegacy
	}
	instructions := s.tools.instructions(d)
	return wireValue(map[string]any{
		"protocolVersion": negotiated,
		"capabilities":    capabilities,
		"serverInfo":      serverInfo(),
		"instructions":    instructions,
	}), nil
}

// stats answers debug/stats when MCP_EXEC_DEBUG=1: what the soak script
// and the leak tests compare before and after a load.
func (s *session) stats(_ context.Context, req message) (answer, error) {
	if !s.cfg.debug {
		return nil, newError(codeNoMethod, "method not found: debug/stats (set MCP_EXEC_DEBUG=1 to enable it)")
	}
	if p, err := decodeObject(req.params); err == nil && string(p["collect"]) == "true" {
		returnMemory() // measure what the server holds, not its garbage
	}
	tracked, orphans := children.counts()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return wireValue(map[string]any{
		"goroutines":     runtime.NumGoroutine(),
		"open_fds":       countOpenFds(),
		"rss_kib":        residentKiB(),
		"jobs":           len(s.reg.list()),
		"children":       tracked,
		"orphans_reaped": orphans,
		"heap_kib":       m.HeapAlloc >> 10,
		"heap_free_kib":  heapFreeBytes(&m) >> 10,
		"runtime_kib":    (m.Sys - m.HeapReleased) >> 10,
		"windows_kib":    windowBytesHeld() >> 10,
	}), nil
}

// textReply is the reply line of a toolText result, as encoding the toolResult
// {content: [{type: "text", text}]} in shape would give. A structured reply also
// carries it as structuredContent, an object: wait's array as {"results": [...]}.
func textReply(id json.RawMessage, shape replyShape, text []byte) []byte {
	const (
		content = `"content":[{"type":"text","text":"`
		closing = `"}]`
		tail    = "}}\n"
	)
	open := []byte(`,"result":{`)
	if shape.modern {
		open = append(append([]byte(`,"result":`), modernResultHead()...), ',')
	}
	size := len(replyHead) + len(id) + len(open) + len(content) + quotedLen(text) + len(closing) + len(tail)
	wrap := shape.structured && wrapsStructured(text)
	if shape.structured {
		size += len(structuredKey) + len(text)
		if wrap {
			size += len(waitWrapOpen) + 1
		}
	}
	b := make([]byte, 0, size)
	b = append(append(append(append(b, replyHead...), id...), open...), content...)
	b = appendQuoted(b, text)
	b = append(b, closing...)
	if shape.structured {
		b = append(b, structuredKey...)
		if wrap {
			b = append(append(append(b, waitWrapOpen...), text...), '}')
		} else {
			b = append(b, text...)
		}
	}
	return append(b, tail...)
}

// Fixed pieces of reply lines.
const (
	replyHead     = `{"jsonrpc":"2.0","id":` // replyHead starts every reply line; the id follows
	structuredKey = `,"structuredContent":`  // structuredKey introduces a structured copy of a tool result
)

// discover answers server/discover, the modern era's way to learn what the
// server is (a legacy probe gets -32601 and falls back to initialize).
func (s *session) discover(_ context.Context, m message) (answer, error) {
	capabilities := map[string]any{"tools": map[string]any{}}
	if m.dialect.tasks == tasksModern { // listed to a client that declared it: the others see what they always did
		capabilities["extensions"] = map[string]any{extTasks: map[string]any{}}
	}
	instructions := s.tools.instructions(m.dialect)
	return wireValue(map[string]any{
		"supportedVersions": modernVersions,
		"capabilities":      capabilities,
		"instructions":      instructions,
		"ttlMs":             toolListTTLMs,
		"cacheScope":        "public",
	}), nil
}

// message is one decoded JSON-RPC message.
type message struct {
	id     json.RawMessage // exact bytes as received; nil for a notification
	method string
	params json.RawMessage // nil when absent

	response bool       // a reply from the client, or a malformed notification: ignored
	dialect  dialect    // how it is answered, decided as it was read
	replyTo  replySink  // where its reply goes: the transport, or a batch's gathering
	room     *replyHold // a started request's room for its reply in replyTo; nil when replyTo bounds nothing
	handoff  *handoff   // what a started request delivers, until its reply arrives; nil before start
}

// decodeMessage parses one line; on failure, the error and the id to send it
// with (null unless readable). A message left unanswered has response set.
func decodeMessage(line []byte) (m message, replyID json.RawMessage, rerr *rpcError) {
	null := json.RawMessage("null")
	trimmed := trimJSONSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return m, null, newError(codeParse, "parse error: the line is not valid JSON")
		}
		return m, null, newError(codeInvalidRequest, "invalid request: batches are not supported; send one message per line")
	}
	obj, err := decodeObject(trimmed)
	switch {
	case errors.Is(err, errNotObject):
		return m, null, newError(codeInvalidRequest, "invalid request: a message must be a JSON object")
	case errors.Is(err, errDuplicateKey):
		return m, null, newError(codeInvalidRequest, "invalid request: %v", err)
	case err != nil:
		return m, null, newError(codeParse, "parse error: %v", err)
	}
	replyID = null
	if id, ok := obj["id"]; ok {
		if !validID(id) {
			return m, null, newError(codeInvalidRequest, "invalid request: id must be a string or an integer, got %s", clip(id))
		}
		m.id, replyID = id, id
	}
	method, hasMethod := obj["method"]
	if v, ok := obj["jsonrpc"]; !ok || string(v) != `"2.0"` {
		if m.id == nil && hasMethod {
			return message{response: true}, nil, nil // a malformed notification: never answered
		}
		return m, replyID, newError(codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if !hasMethod {
		_, isResult := obj["result"]
		_, isError := obj["error"]
		if isResult || isError {
			return message{response: true}, nil, nil
		}
		return m, replyID, newError(codeInvalidRequest, `invalid request: "method" is missing`)
	}
	if json.Unmarshal(method, &m.method) != nil {
		return m, replyID, newError(codeInvalidRequest, `invalid request: "method" must be a string`)
	}
	if p, ok := obj["params"]; ok && !isNull(p) {
		m.params = p
	}
	return m, nil, nil
}
