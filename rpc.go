package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"
)

// This file is the protocol: framing (one JSON value per line), message
// decoding, the method table, dispatch, and the single stdout writer.

// maxLineBytes caps one request line. A longer line is answered with a parse
// error and skipped without being held in memory.
const maxLineBytes = 16 << 20

// supportedVersions lists the MCP revisions served, newest first.
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeCancelled      = -32800
)

// rpcError is a JSON-RPC error reply.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

func newError(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// errLineTooLong reports a request line over maxLineBytes.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its terminator. A line longer than
// limit is consumed and dropped, and errLineTooLong returned. At EOF a last
// unterminated line is returned with io.EOF.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		content := len(line) + len(chunk)
		if err == nil {
			content-- // the newline is not part of the line
		}
		if content > limit {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		if cap(line)-len(line) < len(chunk) {
			// Double explicitly: append's gentler growth would allocate
			// about five times a long line's size on the way to the cap.
			grown := make([]byte, len(line), min(max(2*cap(line), len(line)+len(chunk)), limit+1))
			copy(grown, line)
			line = grown
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			line = line[:len(line)-1]
		}
		return line, err
	}
}

// message is one decoded JSON-RPC message.
type message struct {
	id     json.RawMessage // exact bytes as received; nil for a notification
	method string
	params json.RawMessage // nil when absent

	response bool // a reply from the client, or a malformed notification: ignored
}

// integerID reports whether id is a number id we accept: an integer of any
// size with no sign but '-', no leading zero, no fraction or exponent.
// (Hand-written: it was the only use of regexp; dropping that and
// runtime/metrics took the static binary from 2.83 to 2.55 MB.)
func integerID(id []byte) bool {
	if len(id) > 0 && id[0] == '-' {
		id = id[1:]
	}
	if len(id) == 0 || (id[0] == '0' && len(id) > 1) {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// decodeMessage parses one line. On failure it returns the error reply and
// the id to send it with (null unless the id itself was readable). Messages
// that get no reply at all come back with response set.
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
	if err != nil {
		if errors.Is(err, errNotObject) {
			return m, null, newError(codeInvalidRequest, "invalid request: a message must be a JSON object")
		}
		if errors.Is(err, errDuplicateKey) {
			return m, null, newError(codeInvalidRequest, "invalid request: %v", err)
		}
		return m, null, newError(codeParse, "parse error: %v", err)
	}
	if id, ok := obj["id"]; ok {
		if !validID(id) {
			return m, null, newError(codeInvalidRequest, "invalid request: id must be a string or an integer, got %s", clip(id))
		}
		m.id, replyID = id, id
	} else {
		replyID = null
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

// validID accepts string ids and integer ids of any size (echoed verbatim,
// so 2^53+1 survives). null, fractions and exponents are rejected.
func validID(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		// Echoed byte for byte, so it must be valid UTF-8 itself: stdout
		// carries nothing else.
		var s string
		return utf8.Valid(id) && json.Unmarshal(id, &s) == nil
	}
	return integerID(id)
}

// idKey maps an id to a comparable key: "7" and 7 stay different ids, and
// two spellings of the same string are the same id.
func idKey(id json.RawMessage) (string, bool) {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	if integerID(id) {
		return "n" + string(id), true
	}
	return "", false
}

var (
	errNotObject    = errors.New("not a JSON object")
	errDuplicateKey = errors.New("duplicate key")
)

// decodeObject splits a JSON object into its members, keyed by their exact
// (unescaped) names, without copying the values. Duplicate keys are an
// error, so no spelling can smuggle a second value past a check; case
// variants are simply different keys.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	data = trimJSONSpace(data)
	if !json.Valid(data) {
		var v any
		return nil, json.Unmarshal(data, &v) // the decoder says what is wrong
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, errNotObject
	}
	obj := map[string]json.RawMessage{}
	i := skipSpace(data, 1)
	for data[i] != '}' {
		end := skipValue(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			_ = json.Unmarshal(data[i:end], &k) // valid JSON: cannot fail
			key = []byte(k)
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the ':'
		end = skipValue(data, i)
		if _, dup := obj[string(key)]; dup {
			return nil, fmt.Errorf("%w %q", errDuplicateKey, key)
		}
		obj[string(key)] = data[i:end:end]
		i = skipSpace(data, end)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return obj, nil
}

// trimJSONSpace trims the four whitespace bytes JSON allows, and no others.
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i; data
// must be valid JSON.
func skipValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// methodSpec is one row of the protocol-shape table.
type methodSpec struct {
	notification bool // has no id and gets no reply
	inline       bool // cheap and non-blocking: answered on the reader goroutine
	call         func(c *conn, ctx context.Context, m message) (any, error)
	notify       func(c *conn, m message)
}

// methods is the protocol-shape table: every method the server knows. Any
// other request gets -32601; any other notification is ignored.
var methods = map[string]methodSpec{
	"initialize":                {inline: true, call: (*conn).initialize},
	"ping":                      {inline: true, call: func(*conn, context.Context, message) (any, error) { return struct{}{}, nil }},
	"tools/list":                {inline: true, call: func(*conn, context.Context, message) (any, error) { return toolList, nil }},
	"tools/call":                {call: (*conn).callTool},
	"notifications/initialized": {notification: true, notify: func(*conn, message) {}},
	"notifications/cancelled":   {notification: true, notify: (*conn).cancelRequest},
	"debug/stats":               {inline: true, call: (*conn).stats},
}

// conn serves one client session over a line-oriented byte stream.
type conn struct {
	cfg *config
	reg *registry
	out *writer

	mu       sync.Mutex                    // guards inflight and closing
	inflight map[string]context.CancelFunc // running tools/call requests by idKey
	closing  bool                          // shutdown began: no new requests

	handlers sync.WaitGroup // running request goroutines
	activity chan struct{}  // 1-buffered: a request finished (see trimWhenIdle)
}

// newConn returns a session that writes replies to out.
func newConn(cfg *config, out *writer) *conn {
	return &conn{cfg: cfg, reg: newRegistry(cfg), out: out, inflight: map[string]context.CancelFunc{},
		activity: make(chan struct{}, 1)}
}

// serve reads requests from in until EOF or a read error.
func (c *conn) serve(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r, maxLineBytes)
		switch {
		case errors.Is(err, errLineTooLong):
			c.reply(json.RawMessage("null"), nil, newError(codeParse, "parse error: request line exceeds %d bytes and was discarded", maxLineBytes))
			continue
		case len(line) > 0:
			c.handleLine(line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// handleLine dispatches one line per the methods table.
func (c *conn) handleLine(line []byte) {
	line = bytes.TrimRight(line, "\r \t")
	if len(trimJSONSpace(line)) == 0 {
		return
	}
	m, replyID, rerr := decodeMessage(line)
	if rerr != nil {
		c.reply(replyID, nil, rerr)
		return
	}
	if m.response {
		return // nothing to answer
	}
	spec, known := methods[m.method]
	if m.id == nil {
		if known && spec.notification {
			spec.notify(c, m)
		}
		return // notifications are never answered
	}
	switch {
	case !known:
		c.reply(m.id, nil, newError(codeNoMethod, "method not found: %s", m.method))
	case spec.notification:
		c.reply(m.id, nil, newError(codeInvalidRequest, "invalid request: %s is a notification and must not carry an id", m.method))
	case m.params != nil && (len(m.params) == 0 || m.params[0] != '{'):
		c.reply(m.id, nil, newError(codeInvalidParams, "invalid params: params must be an object"))
	case spec.inline:
		res, err := spec.call(c, context.Background(), m)
		c.reply(m.id, res, err)
	default:
		c.start(m, spec)
	}
}

// start runs a request on its own goroutine, registered so that
// notifications/cancelled and shutdown can cancel it.
func (c *conn) start(m message, spec methodSpec) {
	key, _ := idKey(m.id)
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		cancel()
		c.reply(m.id, nil, newError(codeCancelled, "request cancelled: the server is shutting down"))
		return
	}
	if _, dup := c.inflight[key]; dup {
		c.mu.Unlock()
		cancel()
		c.reply(m.id, nil, newError(codeInvalidRequest, "invalid request: id %s is already in use by a running request", m.id))
		return
	}
	c.inflight[key] = cancel
	c.handlers.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.handlers.Done()
		res, err := spec.call(c, ctx, m)
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		cancel()
		c.out.sendNow(encodeReply(m.id, res, err))
		select {
		case c.activity <- struct{}{}:
		default:
		}
	}()
}

// cancelRequest handles notifications/cancelled. Unknown, finished, repeated
// and malformed request ids are ignored.
func (c *conn) cancelRequest(m message) {
	params, err := decodeObject(m.params)
	if err != nil {
		return
	}
	key, ok := idKey(params["requestId"])
	if !ok {
		return
	}
	c.mu.Lock()
	cancel := c.inflight[key]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// cancelAll cancels every running request and refuses new ones; shutdown
// calls it so blocked calls answer -32800.
func (c *conn) cancelAll() {
	c.mu.Lock()
	c.closing = true
	cancels := make([]context.CancelFunc, 0, len(c.inflight))
	for _, cancel := range c.inflight {
		cancels = append(cancels, cancel)
	}
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// reply queues the answer to a request; the reader goroutine uses it.
func (c *conn) reply(id json.RawMessage, result any, err error) {
	c.out.send(encodeReply(id, result, err))
}

// replyHead starts every reply line; the id follows.
const replyHead = `{"jsonrpc":"2.0","id":`

// encodeReply builds the answer to a request: a result, or an error —
// *rpcError as is, errCancelled as -32800, anything else as internal.
func encodeReply(id json.RawMessage, result any, err error) []byte {
	var rerr *rpcError
	switch {
	case errors.As(err, &rerr):
	case errors.Is(err, errCancelled):
		rerr = newError(codeCancelled, "request cancelled")
	case err != nil:
		rerr = newError(codeInternal, "internal error: %v", err)
	default:
		if text, ok := result.(toolText); ok {
			return textReply(id, text)
		}
		res, merr := marshal(result)
		if merr == nil {
			return concat(replyHead, id, `,"result":`, res, "}\n")
		}
		rerr = newError(codeInternal, "internal error: %v", merr)
	}
	e, _ := marshal(rerr) // cannot fail: two plain fields
	return concat(replyHead, id, `,"error":`, e, "}\n")
}

// notify sends a notification from a request goroutine.
func (c *conn) notify(method string, params any) {
	p, err := marshal(params)
	if err != nil {
		logf("notify %s: %v", method, err)
		return
	}
	c.out.sendNow(concat(`{"jsonrpc":"2.0","method":"`, []byte(method), `","params":`, p, "}\n"))
}

// concat joins literal and raw JSON pieces.
func concat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		case json.RawMessage:
			b = append(b, p...)
		}
	}
	return b
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// initialize answers the handshake, echoing the client's protocol version
// when supported and offering the newest one otherwise.
func (c *conn) initialize(_ context.Context, m message) (any, error) {
	negotiated := supportedVersions[0]
	if m.params != nil {
		if p, err := decodeObject(m.params); err == nil {
			var asked string
			if json.Unmarshal(p["protocolVersion"], &asked) == nil {
				for _, v := range supportedVersions {
					if v == asked {
						negotiated = asked
					}
				}
			}
		}
	}
	return map[string]any{
		"protocolVersion": negotiated,
		"capabilities":    map[string]any{"tools": map[string]any{}}, // exactly the wire shape
		"serverInfo":      map[string]any{"name": "mcp-exec", "version": version},
		"instructions": "Run shell commands as jobs. execute blocks until exit by default; use nowait:true for long commands, " +
			"then wait/status/output/input/kill with the job_id. A finished job's result is delivered once, then the job is gone.",
	}, nil
}

// stats answers debug/stats when MCP_EXEC_DEBUG=1: what the soak script
// and the leak tests compare before and after a load.
func (c *conn) stats(_ context.Context, req message) (any, error) {
	if !c.cfg.debug {
		return nil, newError(codeNoMethod, "method not found: debug/stats (set MCP_EXEC_DEBUG=1 to enable it)")
	}
	if p, err := decodeObject(req.params); err == nil && string(p["collect"]) == "true" {
		// {"collect": true}: measure what the server holds, not the garbage
		// since its last collection (the heap may grow by its 4 MiB minimum
		// goal before one starts, and RSS with it).
		returnMemory()
	}
	children.mu.Lock()
	tracked, orphans := len(children.byPid), children.orphans
	children.mu.Unlock()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return map[string]any{
		"goroutines":     runtime.NumGoroutine(),
		"open_fds":       countOpenFds(),
		"rss_kib":        residentKiB(),
		"jobs":           len(c.reg.list()),
		"children":       tracked,
		"orphans_reaped": orphans,
		"heap_kib":       m.HeapAlloc >> 10,
		"heap_free_kib":  heapFreeBytes(&m) >> 10,
		"runtime_kib":    (m.Sys - m.HeapReleased) >> 10,
	}, nil
}

// toolText is a successful tools/call result: one text item holding a JSON
// document. encodeReply writes it straight into the reply line, so a big
// result is escaped once into one buffer of the right size instead of
// passing through a string and a second encoder.
type toolText []byte

// textReply is the reply line of a toolText result: exactly what encoding
// the toolResult {content: [{type: "text", text}]} would give.
func textReply(id json.RawMessage, text []byte) []byte {
	const (
		open = `,"result":{"content":[{"type":"text","text":"`
		tail = "\"}]}}\n"
	)
	b := make([]byte, 0, len(replyHead)+len(id)+len(open)+quotedLen(text)+len(tail))
	b = append(append(append(b, replyHead...), id...), open...)
	b = appendQuoted(b, text)
	return append(b, tail...)
}

// quotedLen is how many bytes appendQuoted adds for s.
func quotedLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		esc, size := jsonEscape(s[i:])
		if esc == "" {
			n += size
		} else {
			n += len(esc)
		}
		i += size
	}
	return n
}

// appendQuoted appends s as the inside of a JSON string, escaped exactly as
// encoding/json escapes a string without HTML escaping.
func appendQuoted(b, s []byte) []byte {
	for i := 0; i < len(s); {
		esc, size := jsonEscape(s[i:])
		if esc == "" {
			b = append(b, s[i:i+size]...)
		} else {
			b = append(b, esc...)
		}
		i += size
	}
	return b
}

// jsonEscape says how the character that starts s is written inside a JSON
// string: esc is its escape, or "" when its size bytes are copied as they
// are. Quote, backslash and control characters are escaped, invalid UTF-8
// becomes U+FFFD, and U+2028 and U+2029 are escaped, as encoding/json does.
func jsonEscape(s []byte) (esc string, size int) {
	if c := s[0]; c < utf8.RuneSelf {
		return asciiEscapes[c], 1
	}
	r, size := utf8.DecodeRune(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`, 1
	case r == '\u2028':
		return `\u2028`, size
	case r == '\u2029':
		return `\u2029`, size
	}
	return "", size
}

// asciiEscapes holds the JSON string escape of every ASCII byte that needs one.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	const hex = "0123456789abcdef"
	for c := 0; c < 0x20; c++ {
		t[c] = `\u00` + hex[c>>4:c>>4+1] + hex[c&0xF:c&0xF+1]
	}
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = `\b`, `\f`, `\n`, `\r`, `\t`
	t['"'], t['\\'] = `\"`, `\\`
	return t
}()

// toolResult is the tools/call result shape.
type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// callTool handles tools/call: protocol problems (no name, unknown tool,
// arguments not an object) are JSON-RPC errors; everything about argument
// values or job state is a tool error the model can read.
func (c *conn) callTool(ctx context.Context, m message) (any, error) {
	if m.params == nil {
		return nil, newError(codeInvalidParams, "invalid params: tools/call needs params with a tool name")
	}
	params, err := decodeObject(m.params)
	if err != nil {
		return nil, newError(codeInvalidParams, "invalid params: %v", err)
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || name == "" {
		return nil, newError(codeInvalidParams, "invalid params: tools/call needs a tool name string in params.name")
	}
	t, ok := toolsByName[name]
	if !ok {
		return nil, newError(codeInvalidParams, "unknown tool: %s (the tools are execute, wait, status, output, input, kill, list_jobs)", name)
	}
	raw := map[string]json.RawMessage{}
	if a, ok := params["arguments"]; ok && !isNull(a) {
		if raw, err = decodeObject(a); err != nil {
			return nil, newError(codeInvalidParams, "invalid params: arguments: %v", err)
		}
	}
	vals, err := bindArgs(t, raw)
	if err != nil {
		return toolFailure(err), nil
	}
	call := &toolCall{reg: c.reg, cfg: c.cfg, vals: vals, waiter: c.waiterFor(ctx, params["_meta"])}
	res, err := t.run(call)
	if errors.Is(err, errCancelled) {
		return nil, err
	}
	if err != nil {
		return toolFailure(err), nil
	}
	text, err := marshal(res)
	if err != nil {
		return nil, err
	}
	return toolText(text), nil
}

// toolFailure is a tool error result with a plain-English message.
func toolFailure(err error) toolResult {
	return toolResult{Content: []textContent{{Type: "text", Text: err.Error()}}, IsError: true}
}

// waiterFor builds the waiter of one call: progress notifications go out
// only when the request carried _meta.progressToken.
func (c *conn) waiterFor(ctx context.Context, meta json.RawMessage) *waiter {
	w := &waiter{ctx: ctx}
	if meta == nil {
		return w
	}
	obj, err := decodeObject(meta)
	if err != nil {
		return w
	}
	token, ok := obj["progressToken"]
	if !ok || !validID(token) {
		return w
	}
	w.interval = c.cfg.progressInterval
	w.report = func(n int, message string) {
		c.notify("notifications/progress", map[string]any{
			"progressToken": token, "progress": n, "message": message,
		})
	}
	return w
}

// writer owns stdout. One goroutine at a time writes, whole messages only,
// so lines never interleave; the reader goroutine and the capture pumps never
// wait on a slow client, because they only queue.
type writer struct {
	out io.Writer

	mu     sync.Mutex    // guards queue, busy and failed
	queue  []outItem     // messages not yet written
	busy   bool          // a goroutine is writing to out
	failed bool          // a write failed: the client is gone
	wake   chan struct{} // 1-buffered: the queue may have items for the loop
	gone   chan struct{} // closed when a write fails
}

// outItem is one queued message (ending in a newline), or a flush marker
// when msg is nil.
type outItem struct {
	msg     []byte
	flushed chan struct{}
}

// newWriter starts the writer goroutine for out.
func newWriter(out io.Writer) *writer {
	w := &writer{out: out, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	go w.loop()
	return w
}

// send queues one message for the writer goroutine; it never blocks.
func (w *writer) send(msg []byte) { w.enqueue(outItem{msg: msg}) }

// sendNow writes msg on the caller's goroutine when nobody else is writing
// and nothing is queued, saving a hand-off; otherwise it queues. Only request
// goroutines call it: a slow client then holds up only that request.
func (w *writer) sendNow(msg []byte) {
	w.mu.Lock()
	if w.busy || w.failed || len(w.queue) > 0 {
		w.mu.Unlock()
		w.send(msg)
		return
	}
	w.busy = true
	w.mu.Unlock()
	_, err := w.out.Write(msg)
	w.release(err)
}

func (w *writer) enqueue(it outItem) {
	w.mu.Lock()
	if w.failed {
		w.mu.Unlock()
		if it.flushed != nil {
			close(it.flushed)
		}
		return
	}
	w.queue = append(w.queue, it)
	w.mu.Unlock()
	w.poke()
}

// poke wakes the writer goroutine.
func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// release ends a turn at writing: a failure marks the client gone, and
// anything queued meanwhile goes to the writer goroutine.
func (w *writer) release(err error) {
	w.mu.Lock()
	w.busy = false
	var dropped []outItem
	if err != nil && !w.failed {
		logf("stdout: %v; the client is gone", err)
		w.failed = true
		dropped, w.queue = w.queue, nil
		close(w.gone)
	}
	more := len(w.queue) > 0
	w.mu.Unlock()
	for _, it := range dropped {
		if it.flushed != nil {
			close(it.flushed)
		}
	}
	if more {
		w.poke()
	}
}

// flush waits, at most timeout, until everything queued so far is written.
func (w *writer) flush(timeout time.Duration) {
	done := make(chan struct{})
	w.enqueue(outItem{flushed: done})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// loop writes queued messages in batches, flushing when a batch is done.
func (w *writer) loop() {
	buf := bufio.NewWriterSize(w.out, 64<<10)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.busy || w.failed || len(w.queue) == 0 {
				w.mu.Unlock()
				break // a sendNow caller is writing; it pokes us when done
			}
			batch := w.queue
			w.queue, w.busy = nil, true
			w.mu.Unlock()
			w.release(writeBatch(buf, batch))
		}
	}
}

// writeBatch writes and flushes a batch, then releases its flush markers.
func writeBatch(buf *bufio.Writer, batch []outItem) error {
	var err error
	for _, it := range batch {
		if it.msg != nil && err == nil {
			_, err = buf.Write(it.msg)
		}
	}
	if err == nil {
		err = buf.Flush()
	}
	for _, it := range batch {
		if it.flushed != nil {
			close(it.flushed)
		}
	}
	return err
}
