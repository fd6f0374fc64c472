package main

// Fuzz targets for the parsers a client reaches first. Plain `go test` replays
// the f.Add seeds and testdata/fuzz/<FuzzName>/*; scripts/fuzz.sh runs each
// target for a while:
//
//	FuzzHandleLine     one request line through the whole dispatcher
//	FuzzStreamSpec     stream spec parsing, and serving what it parsed
//	FuzzCapturePolicy  capture policy parsing, and serving what it parsed
//	FuzzWindow         the window against a model that keeps every byte,
//	                   through Write and through the pumps' reserve/commit
//	FuzzKeys           only the exact member names steer dispatch;
//	                   duplicates are refused
//
// The references here (fzObject, refWindow from main_test.go) are written
// from the wire rules, not from the server's code paths, so that a shared
// mistake does not cancel out.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// ---------------------------------------------------------------------------
// An independent reading of one JSON object
// ---------------------------------------------------------------------------

// fzMember is one member of a top-level JSON object as encoding/json's
// tokenizer sees it: the unescaped name and the value's exact bytes.
type fzMember struct {
	name string
	raw  json.RawMessage
}

// fzParse is how a line reads as a JSON-RPC message, judged without the
// server's decoder.
type fzParse struct {
	valid   bool       // one JSON value, nothing else
	object  bool       // ... and that value is an object
	members []fzMember // in order, duplicates kept
	dup     bool       // some name occurs twice
	// unsure: the repeated name held invalid UTF-8. The tokenizer reads
	// every invalid byte as U+FFFD, so "\x89" and "\xbf" look alike here;
	// the server compares such names byte for byte. Either reading is
	// fine: no such name can spell a dispatch key.
	unsure bool
}

func (p fzParse) get(name string) (json.RawMessage, bool) {
	for _, m := range p.members {
		if m.name == name {
			return m.raw, true
		}
	}
	return nil, false
}

// wellFormed: a JSON object with no repeated member name.
func (p fzParse) wellFormed() bool { return p.valid && p.object && !p.dup }

// fzObject reads data (the server trims the surrounding white space JSON
// allows, space, tab, CR and LF, before decoding; so does this) with
// encoding/json's streaming tokenizer.
func fzObject(data []byte) fzParse {
	data = bytes.Trim(data, " \t\r\n")
	var p fzParse
	if !json.Valid(data) {
		return p
	}
	p.valid = true
	if data[0] != '{' {
		return p
	}
	p.object = true
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		panic(err) // json.Valid said yes
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			panic(err)
		}
		if seen[name] {
			p.dup = true
			if !utf8.Valid(data) && strings.ContainsRune(name, utf8.RuneError) {
				p.unsure = true
			}
		}
		seen[name] = true
		p.members = append(p.members, fzMember{name, raw})
	}
	return p
}

// fzIDRule is the wire rule for ids: a JSON string or an integer of any size.
var fzIDRule = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// fzValidID: a string id must also be valid UTF-8 as written, since it is
// echoed byte for byte and a reply must be valid UTF-8 (found by this file:
// testdata/fuzz/FuzzHandleLine/invalid-utf8-id).
func fzValidID(raw json.RawMessage) bool {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		return utf8.Valid(raw) && json.Unmarshal(raw, &s) == nil
	}
	return fzIDRule.Match(raw)
}

func fzIsString(raw json.RawMessage) bool {
	var s string
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil
}

// ---------------------------------------------------------------------------
// FuzzHandleLine
// ---------------------------------------------------------------------------

// fzCollector is the client's end of stdout.
type fzCollector struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *fzCollector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *fzCollector) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

var (
	fzConfigOnce sync.Once
	fzConfig     *config
	fzConfigErr  error
)

// fuzzConfig is the configuration FuzzHandleLine serves with. It comes from
// loadConfig (the real parser) with a tiny window, debug/stats on, and no
// progress notifications within any call's lifetime. Jobs run in /bin/true
// instead of a shell, and the allowlist lets argv run only true: every tool
// stays reachable (execute's arguments are bound and a job really starts),
// but whatever the fuzzer writes, the job does nothing and exits at once,
// so no process outlives the call.
// A fresh session has no jobs, so wait, input and kill fail fast with an
// unknown job_id.
func fuzzConfig(t testing.TB) *config {
	fzConfigOnce.Do(func() {
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "MCP_EXEC_") {
				env = append(env, kv)
			}
		}
		env = append(env, "MCP_EXEC_MAX_OUTPUT_BYTES=64", "MCP_EXEC_DEFAULT_TIMEOUT=1",
			"MCP_EXEC_PROGRESS_INTERVAL=3600", "MCP_EXEC_DEBUG=1")
		fzConfig, fzConfigErr = loadConfig(env)
		if fzConfigErr == nil {
			fzConfig.shell, fzConfig.shellSpelled = "/bin/true", "/bin/true"
			// argv runs a program without the shell: only true may run, or
			// the fuzzer would start whatever it spells (a sleep held a
			// call past the fuzz time).
			fzConfig.allow = []string{"/bin/true", "true"}
		}
	})
	if fzConfigErr != nil {
		t.Fatalf("loadConfig: %v", fzConfigErr)
	}
	return fzConfig
}

// fzDeadline bounds the wait for a request's reply.
const fzDeadline = 10 * time.Second

// fzServeLine sends one line through a fresh session and returns everything the
// conn wrote once its handlers finished and the writer flushed.
func fzServeLine(t *testing.T, line []byte) []byte {
	t.Helper()
	sink := &fzCollector{}
	out := newWriter(sink)
	c := newSession(fuzzConfig(t), out, nil)
	c.handleLine(line)
	done := make(chan struct{})
	go func() { c.handlers.Wait(); close(done) }()
	timer := time.NewTimer(fzDeadline)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("request %q: no reply within %v", line, fzDeadline)
	}
	flushed := make(chan struct{})
	out.offer(outItem{flushed: flushed}, false)
	select {
	case <-flushed:
	case <-timer.C:
		t.Fatalf("request %q: the writer did not flush within %v", line, fzDeadline)
	}
	// Nothing can write any more: end the writer goroutine, which would
	// otherwise outlive every input.
	close(out.wake)
	for _, j := range c.reg.list() {
		awaitDone(t, j) // /bin/true: at once
	}
	return sink.bytes()
}

// checkReply applies the invariants of one request line and what the
// server wrote for it.
func checkReply(t *testing.T, line, out []byte) {
	t.Helper()
	req := fzObject(line)
	blank := len(bytes.Trim(line, " \t\r\n")) == 0
	reqID, hasID := req.get("id")
	_, hasMethod := req.get("method")
	method, _ := req.get("method")
	validID := req.wellFormed() && hasID && fzValidID(reqID)
	notification := req.wellFormed() && !hasID && hasMethod && fzIsString(method)

	if n := bytes.Count(out, []byte("\n")); n > 1 || n == 1 && out[len(out)-1] != '\n' || n == 0 && len(out) > 0 {
		t.Fatalf("request %q: want at most one reply line, got %q", line, out)
	}
	unsure := req.valid && req.object && req.dup && req.unsure
	switch {
	case unsure:
		// Either a well-formed object or one with a repeated name: 0 or
		// 1 line, and an id that is null or the request's.
	case blank || notification:
		if len(out) != 0 {
			t.Fatalf("request %q: a notification (or blank line) got a reply %q", line, out)
		}
		return
	case validID && hasMethod, !req.wellFormed():
		if len(out) == 0 {
			t.Fatalf("request %q: got no reply", line)
		}
	}
	if len(out) == 0 {
		return // e.g. a response from the client, or a malformed notification
	}
	reply := out[:len(out)-1]
	if !utf8.Valid(reply) {
		t.Fatalf("request %q: reply is not valid UTF-8: %q", line, reply)
	}
	if bytes.ContainsAny(reply, "\r\n") {
		t.Fatalf("request %q: reply has a raw line break: %q", line, reply)
	}
	rep := fzObject(reply)
	if !rep.wellFormed() {
		t.Fatalf("request %q: reply is not one JSON object without repeated names: %q", line, reply)
	}
	if v, _ := rep.get("jsonrpc"); string(v) != `"2.0"` {
		t.Fatalf("request %q: reply lacks \"jsonrpc\":\"2.0\": %q", line, reply)
	}
	res, hasRes := rep.get("result")
	rerr, hasErr := rep.get("error")
	if hasRes == hasErr {
		t.Fatalf("request %q: reply must have exactly one of result and error: %q", line, reply)
	}
	for _, m := range rep.members {
		switch m.name {
		case "jsonrpc", "id", "result", "error":
		default:
			t.Fatalf("request %q: reply has member %q: %q", line, m.name, reply)
		}
	}
	if hasRes && (len(res) == 0 || res[0] != '{') {
		t.Fatalf("request %q: result is not an object: %q", line, reply)
	}
	if hasErr {
		var e struct {
			Code    *json.Number `json:"code"`
			Message *string      `json:"message"`
		}
		if json.Unmarshal(rerr, &e) != nil || e.Code == nil || e.Message == nil || *e.Message == "" {
			t.Fatalf("request %q: error needs an integer code and a message: %q", line, reply)
		}
		if _, err := e.Code.Int64(); err != nil {
			t.Fatalf("request %q: error code is not an integer: %q", line, reply)
		}
	}
	gotID, ok := rep.get("id")
	if !ok {
		t.Fatalf("request %q: reply has no id: %q", line, reply)
	}
	wantID := json.RawMessage("null")
	if validID {
		wantID = reqID
	}
	if unsure && (string(gotID) == "null" || hasID && bytes.Equal(gotID, reqID) && fzValidID(reqID)) {
		return
	}
	if !bytes.Equal(gotID, wantID) {
		t.Fatalf("request %q: reply id %s, want %s (byte for byte): %q", line, gotID, wantID, reply)
	}
}

// fzTranscriptRequests returns the request lines of testdata/transcripts.
func fzTranscriptRequests(f *testing.F) [][]byte {
	paths, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	var lines [][]byte
	for _, p := range paths {
		xs, err := readTranscript(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, x := range xs {
			lines = append(lines, x.request)
		}
	}
	return lines
}

// fzRequestSeeds are hand-written requests for what the transcripts do not
// reach: the shapes that broke other JSON-RPC servers (odd ids, escaped
// keys, huge numbers, wrong types).
var fzRequestSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":"\u00e9\ud83d\ude00","method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","id":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"\u006dethod":"ping"}`,
	`{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/li\u0073t"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":["1"],"timeout":0}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"output","arguments":{"job_id":"1","stdout":{"from":-9223372036854775808,"length":1e300}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo hi","capture":{"on_success":{"stdout":{"tail":2}}}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"x","nowait":true,"stdin":"abc","close_stdin":true,"env":{"A":"b"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"x","cwd":"/nonexistent"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"kill","arguments":{"job_id":"1","signal":"ASSURED"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"input","arguments":{"job_id":"1","data":"x","close":true}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_jobs","_meta":{"progressToken":7}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"debug/stats"}`,
	`{"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}`,
	`{"jsonrpc":"2.0","method":7}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1}`,
	`[]`, `[null]`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `null`, `1`, `"x"`, `{`, ``, " \t\r",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	"\u00a0{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
}

// FuzzHandleLine sends one request line through the whole dispatcher. It
// never panics; it writes at most one line; a blank line or a well-formed
// notification gets nothing; a request with a readable id and a method, or
// a line that is not a well-formed object, gets exactly one reply. A reply is
// valid UTF-8 JSON on one line with "jsonrpc":"2.0" and exactly one of result
// and error, and carries the request's id byte for byte when it was readable
// (a string or an integer in a well-formed object), else null.
func FuzzHandleLine(f *testing.F) {
	for _, l := range fzTranscriptRequests(f) {
		f.Add(l)
	}
	for _, s := range fzRequestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		// serve hands handleLine one line without its terminator.
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		out := fzServeLine(t, line)
		checkReply(t, line, out)
	})
}

// ---------------------------------------------------------------------------
// FuzzStreamSpec and FuzzCapturePolicy
// ---------------------------------------------------------------------------

// fzWindows fills a few windows, of several sizes and fill levels, from
// content derived from seed, and keeps the naive model of each.
func fzWindows(seed []byte) []struct {
	w   *window
	ref *refWindow
} {
	piece := append(bytes.Clone(seed), "a\né€😀\xff\xe2\x82\n"...)
	var out []struct {
		w   *window
		ref *refWindow
	}
	for _, limit := range []int{1, 5, 16, 64} {
		for _, n := range []int{0, limit - 1, limit, 2*limit + int(crc32.ChecksumIEEE(seed)%7)} {
			stream := bytes.Repeat(piece, n/len(piece)+1)[:n]
			w, ref := newWindow(limit, 0), &refWindow{limit: limit}
			w.Write(stream)
			ref.write(stream)
			out = append(out, struct {
				w   *window
				ref *refWindow
			}{w, ref})
		}
	}
	return out
}

// refServe is window.serve on the naive model. Out-of-range numbers are
// first brought into the range where they select the same bytes, so the
// model's plain arithmetic cannot overflow.
func refServe(ref *refWindow, spec streamSpec) slice {
	_, total := ref.span()
	switch spec.kind {
	case streamAll:
		return ref.readAll()
	case streamTail:
		return ref.readTail(spec.tail)
	case streamRange:
		from, length := spec.from, spec.length
		if from > total {
			from = total + 1
		}
		if length > total {
			length = -1 // both reach the end; dropped is capped by neither
		}
		return ref.readRange(from, length, spec.unaligned)
	}
	return slice{offset: total, total: total}
}

// checkServe serves spec from every window and checks the slice's
// accounting, then compares it with the model.
func checkServe(t *testing.T, what string, spec streamSpec, windows []struct {
	w   *window
	ref *refWindow
}) {
	t.Helper()
	for _, x := range windows {
		s := x.w.serve(spec)
		start, total := x.ref.span()
		where := fmt.Sprintf("%s %+v, limit %d, %d bytes written", what, spec, x.ref.limit, total)
		end := s.offset + int64(len(s.data))
		switch {
		case s.total != total:
			t.Fatalf("%s: total %d", where, s.total)
		case s.offset < start || end > total:
			t.Fatalf("%s: [%d, %d) is outside the retained [%d, %d)", where, s.offset, end, start, total)
		case !bytes.Equal(s.data, x.ref.all[s.offset:end]):
			t.Fatalf("%s: data %q is not the stream's bytes at %d", where, s.data, s.offset)
		case s.dropped < 0 || s.dropped > start || s.truncated != (s.dropped > 0):
			t.Fatalf("%s: truncated %v, dropped %d with %d bytes gone", where, s.truncated, s.dropped, start)
		}
		switch spec.kind {
		case streamNone:
			if len(s.data) != 0 || s.offset != total {
				t.Fatalf("%s: none served %d bytes at %d", where, len(s.data), s.offset)
			}
		case streamTail:
			if spec.tail > 0 && end != total {
				t.Fatalf("%s: a tail ends at %d", where, end)
			}
		case streamRange:
			if spec.length >= 0 && spec.unaligned && int64(len(s.data)) > spec.length {
				t.Fatalf("%s: %d bytes for length %d", where, len(s.data), spec.length)
			}
			if spec.unaligned && spec.from >= start && spec.from <= total && s.offset != spec.from {
				t.Fatalf("%s: offset %d", where, s.offset)
			}
		}
		if d := sameSlice(s, refServe(x.ref, spec)); d != "" {
			t.Fatalf("%s: %s", where, d)
		}
	}
}

// checkParseError: a refusal says what was wrong.
func checkParseError(t *testing.T, raw []byte, err error, words ...string) {
	t.Helper()
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("%q: empty error message", raw)
	}
	for _, w := range words {
		if strings.Contains(msg, w) {
			return
		}
	}
	t.Fatalf("%q: error %q names none of %q", raw, msg, words)
}

var fzStreamSeeds = []string{
	`"none"`, `"all"`, `null`, `"ALL"`, `""`, `{}`, `[]`, `1`, `true`,
	`{"tail":0}`, `{"tail":-1}`, `{"tail":3}`, `{"tail":1e3}`, `{"tail":1.5}`, `{"tail":"3"}`, `{"tail":1e400}`,
	`{"tail":2,"from":0}`, `{"from":0}`, `{"from":-5,"length":3}`, `{"from":10,"length":-1}`,
	`{"from":3,"length":null,"unaligned":true}`, `{"from":3,"unaligned":"yes"}`, `{"length":3}`,
	`{"from":9223372036854775807,"length":9223372036854775807}`, `{"from":-9223372036854775808,"length":1e19}`,
	`{"from":1,"from":2}`, `{"From":1}`, `{"\u0066rom":2,"length":1}`, `{"from":0,"x":1}`, `{"from":1}x`,
}

// FuzzStreamSpec: parseStreamSpec never panics and is deterministic; a
// refusal names the offending part; an accepted spec, served from windows of
// several sizes and fill levels, gives a slice inside the retained range
// whose data, offset, bytes, total, truncated and dropped agree with each
// other and with the keep-everything model.
func FuzzStreamSpec(f *testing.F) {
	for _, s := range fzStreamSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec, err := parseStreamSpec(raw)
		spec2, err2 := parseStreamSpec(raw)
		if (err == nil) != (err2 == nil) || spec != spec2 {
			t.Fatalf("%q: two parses differ: %+v %v / %+v %v", raw, spec, err, spec2, err2)
		}
		if err != nil {
			checkParseError(t, raw, err, "stream spec", "tail", "from", "length", "unaligned")
			return
		}
		if spec.kind == streamRange && spec.length < -1 || spec.kind == streamTail && !fzObject(raw).object {
			t.Fatalf("%q: parsed to %+v", raw, spec)
		}
		checkServe(t, "stream", spec, fzWindows(raw))
	})
}

var fzCaptureSeeds = []string{
	`"stdout"`, `"stderr"`, `"all"`, `"none"`, `"both"`, `null`, `{}`, `[]`, `3`,
	`{"on_success":"all","on_error":"none"}`, `{"on_success":null}`, `{"on_error":{"stdout":{"tail":2},"stderr":"all"}}`,
	`{"stdout":"all"}`, `{"stdout":{"from":0,"length":3},"stderr":{"tail":1}}`, `{"stdout":"bad"}`,
	`{"on_success":"all","bogus":1}`, `{"on_success":{"stdout":"all","x":"none"}}`, `{"on_success":"all","on_success":"none"}`,
	`{"on_Success":"all"}`, `{"on_success":{"stdout":{"from":-1,"length":-1}}}`,
}

// FuzzCapturePolicy: parseCapturePolicy never panics and is deterministic in
// whether it accepts; a refusal names what was wrong; each of the four
// stream specs of an accepted policy serves as FuzzStreamSpec requires.
func FuzzCapturePolicy(f *testing.F) {
	for _, s := range fzCaptureSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parseCapturePolicy(raw)
		p2, err2 := parseCapturePolicy(raw)
		if (err == nil) != (err2 == nil) || err == nil && p != p2 {
			t.Fatalf("%q: two parses differ: %+v %v / %+v %v", raw, p, err, p2, err2)
		}
		if err != nil {
			checkParseError(t, raw, err, "capture", "stream spec", "tail", "from", "length", "unaligned",
				"on_success", "on_error", "stdout", "stderr")
			return
		}
		windows := fzWindows(raw)
		for _, s := range []streamSpec{p.onSuccess.stdout, p.onSuccess.stderr, p.onError.stdout, p.onError.stderr} {
			checkServe(t, "capture", s, windows)
		}
	})
}

// ---------------------------------------------------------------------------
// FuzzWindow
// ---------------------------------------------------------------------------

// fzLimit maps size to a window limit for the pump run: 1..1024 (a
// single chunk, first grown gradually), or, for the top of the range, just
// around windowChunkBytes so the ring spans two chunks.
func fzLimit(size uint16) int {
	if size >= 0xF000 {
		return windowChunkBytes - 256 + int(size-0xF000)%1024
	}
	return 1 + int(size)%1024
}

// fzCompareReads compares every read derived from c against the model.
func fzCompareReads(t *testing.T, what string, w *window, ref *refWindow, c byte, big bool) {
	t.Helper()
	check := func(op string, got, want slice) {
		t.Helper()
		if d := sameSlice(got, want); d != "" {
			_, total := ref.span()
			t.Fatalf("%s: limit %d, %d bytes written, %s: %s", what, ref.limit, total, op, d)
		}
	}
	start, total := ref.span()
	check("readAll", w.readAll(0), ref.readAll())
	for _, n := range []int64{-1, 0, 1, 2, int64(c % 7), 1 << 40} {
		check(fmt.Sprintf("readTail(%d)", n), w.readTail(n, 0), ref.readTail(n))
	}
	froms := []int64{-1, start - 1, start, start + 1, total - 1, total, total + 1, int64(c) * total / 255}
	lengths := []int64{-1, 0, 1, 3, int64(c % 5), int64(ref.limit)}
	if big {
		froms, lengths = froms[1:5], []int64{-1, 0, int64(c % 5)}
	}
	for _, from := range froms {
		for _, length := range lengths {
			for _, unaligned := range []bool{false, true} {
				check(fmt.Sprintf("readRange(%d, %d, %v)", from, length, unaligned),
					w.readRange(from, length, unaligned, 0), ref.readRange(from, length, unaligned))
			}
		}
	}
}

// fzPumpWindow runs the stream through two windows, one fed by Write and one
// fed as a pump feeds it (reserve, fill, commit; Write while reserve offers
// no storage), and compares both with the model after every operation. While
// a reservation is open, readers must see the window minus the bytes about
// to be overwritten, and nothing of what was already copied in.
func fzPumpWindow(t *testing.T, data, cuts []byte, size uint16) {
	limit := fzLimit(size)
	big := limit > windowChunkBytes
	stream := data
	if len(data) > 0 && len(data) < 2*limit+1 {
		stream = bytes.Repeat(data, (2*limit+len(data))/len(data)+1)
		stream = stream[:2*limit+int(size)%len(data)+1]
	}
	ww, wp, ref := newWindow(limit, 0), newWindow(limit, 0), &refWindow{limit: limit}
	for i := 0; len(stream) > 0; i++ {
		c := byte(0)
		n := len(stream)
		if i < len(cuts) {
			c = cuts[i]
			if c < 250 {
				n = min(n, int(c)*(limit/64+1)/4)
			}
		}
		if c == 0 && i < len(cuts) {
			n = min(len(stream), 1)
		}
		p := stream[:n]
		stream = stream[n:]
		// A two-chunk window is compared every 16th operation and at the
		// end: each comparison reads the whole window dozens of times.
		compare := !big || i%16 == 0 || len(stream) == 0

		ww.Write(p)
		for k := 0; len(p) > 0; k++ {
			want := []int{readBufferBytes, 1, 3, len(p)}[(int(c)+k)%4]
			if c%16 == 15 && k == 0 {
				// A read that returns nothing (EOF, EAGAIN) commits 0.
				if span := wp.reserve(want); span != nil {
					wp.commit(0)
				}
			}
			span := wp.reserve(want)
			if span == nil {
				m := min(len(p), readBufferBytes)
				wp.Write(p[:m])
				ref.write(p[:m])
				p = p[m:]
				continue
			}
			if len(span) == 0 || len(span) > want {
				t.Fatalf("limit %d: reserve(%d) gave %d bytes", limit, want, len(span))
			}
			_, total := ref.span()
			hidden := 0
			if total >= int64(limit) {
				hidden = len(span)
			}
			m := min(len(span), len(p))
			copy(span[:m/2+1], p[:m/2+1]) // a read in progress
			if compare && (!big || k == 0) {
				seen := &refWindow{limit: limit - hidden, all: ref.all}
				fzCompareReads(t, fmt.Sprintf("during reserve (%d hidden)", hidden), wp, seen, c, big)
			}
			copy(span, p[:m])
			wp.commit(m)
			ref.write(p[:m])
			p = p[m:]
		}
		if !compare {
			continue
		}
		fzCompareReads(t, "write", ww, ref, c, big)
		fzCompareReads(t, "pump", wp, ref, c, big)
		for _, w := range []*window{ww, wp} {
			_, total := ref.span()
			if a := w.allocated(); a > limit || int64(a) < min(total, int64(limit)) {
				t.Fatalf("limit %d, %d bytes written: %d bytes allocated", limit, total, a)
			}
		}
	}
}

// FuzzWindow is the differential test of the window against the model that
// keeps every byte (refWindow): for any window size, any split of data into
// writes, and reads of every kind after each write (readAll, readTail,
// readRange aligned and unaligned, from/length derived from the input), the
// data, offset, total, truncated and dropped agree. diffWindow (main_test.go)
// covers limits 1..65536 fed by Write; fzPumpWindow also feeds a window the
// way a pump does, through reserve/commit, which must be indistinguishable
// from Write, and reaches windows of two chunks.
func FuzzWindow(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{1, 2, 3}, uint16(4))
	f.Add([]byte("a\né€😀\xff\x80\xe2\x82\n\r\nz"), []byte{0, 9, 250, 7}, uint16(6))
	f.Add([]byte("😀😀😀😀😀😀😀"), []byte{5, 5, 5, 15}, uint16(2))
	f.Add([]byte("one line without end"), []byte{}, uint16(0))
	f.Add([]byte("x\n"), []byte{31, 47, 63}, uint16(63))
	f.Add([]byte("\n\n\n\n"), []byte{1, 1, 1, 1}, uint16(1))
	f.Add([]byte("é"), []byte{200, 15, 100}, uint16(0xF000))
	f.Add([]byte("ab€\n"), []byte{255, 3}, uint16(0xF17F))
	f.Add([]byte("0123456789abcdef"), []byte{250, 251, 16, 32}, uint16(300))
	f.Fuzz(func(t *testing.T, data, cuts []byte, size uint16) {
		if len(data) > 1<<16 || len(cuts) > 256 {
			return // bounds the work per input; sizes beyond add nothing
		}
		diffWindow(t, data, cuts, size)
		fzPumpWindow(t, data, cuts, size)
	})
}

// ---------------------------------------------------------------------------
// FuzzKeys
// ---------------------------------------------------------------------------

// fzBases are messages a fuzzed member is added to; dispatch depends only on
// their exact "jsonrpc", "id", "method" and "params" members.
var fzBases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"status","arguments":{"job_id":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","id":2,"result":{}}`,
	`{"jsonrpc":"2.0","id":3}`,
	`{"id":4,"method":"ping"}`,
	`{"method":"ping"}`,
	`{"jsonrpc":"2.0","id":5,"method":5}`,
	`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`,
}

// fzDispatchKeys are the only member names that may steer dispatch.
var fzDispatchKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true}

// fzQuote writes s as a JSON string, \u-escaping the runes mask selects (so
// "\u006dethod" and "method" are the same name) and every rune that must be
// escaped.
func fzQuote(s string, mask uint64) string {
	var b strings.Builder
	b.WriteByte('"')
	i := 0
	for _, r := range s {
		escape := mask>>(i%64)&1 == 1
		i++
		switch {
		case r == '"' || r == '\\' || r < 0x20 || escape:
			if r > 0xFFFF {
				r1, r2 := fzSurrogates(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func fzSurrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// fzInsert adds the member name:value to the object base after its pos-th
// member (modulo their number).
func fzInsert(base string, pos uint8, name, value string) string {
	p := fzObject([]byte(base))
	var parts []string
	for _, m := range p.members {
		parts = append(parts, fzQuote(m.name, 0)+":"+string(m.raw))
	}
	k := int(pos) % (len(parts) + 1)
	parts = append(parts[:k], append([]string{name + ":" + value}, parts[k:]...)...)
	return "{" + strings.Join(parts, ",") + "}"
}

// fzDecoded is decodeMessage's whole answer, comparable.
type fzDecoded struct {
	id, method, params string
	response           bool
	replyID            string
	code               int
}

func fzDecode(line []byte) fzDecoded {
	m, replyID, rerr := decodeMessage(line)
	d := fzDecoded{id: string(m.id), method: m.method, params: string(m.params), response: m.response, replyID: string(replyID)}
	if rerr != nil {
		d.code = rerr.Code
	}
	return d
}

// FuzzKeys guards against key smuggling, a second value for one name hidden
// behind an escaped or repeated key:
//   - decodeObject on any line agrees with encoding/json's tokenizer: invalid
//     JSON and non-objects are refused, a repeated name (after unescaping,
//     compared exactly) is refused as a duplicate, and otherwise it returns
//     exactly the members, values byte for byte;
//   - a member added to a message under any name other than the exact
//     "jsonrpc", "id", "method" and "params" (case variants, \u escapes of
//     other names, U+017F/U+212A look-alikes) changes nothing decodeMessage
//     returns, except that "result" or "error" marks a message without a
//     method as a response; under one of those exact names, however it is
//     spelled, it is a duplicate and the line is refused (-32600, id null).
func FuzzKeys(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,{"c":2}],"d":"\u0064"}`), "Method", uint64(0), []byte(`"tools/call"`), uint8(0), uint8(0))
	f.Add([]byte(`{"a":1,"a":2}`), "method", uint64(1), []byte(`"tools/call"`), uint8(3), uint8(1))
	f.Add([]byte(`{"\u0061":1,"a":2}`), "id", uint64(2), []byte(`7`), uint8(1), uint8(0))
	f.Add([]byte(`{"x":{"x":1,"x":2}}`), "ID", uint64(0), []byte(`7`), uint8(2), uint8(3))
	f.Add([]byte(`[{"a":1}]`), "ſ", uint64(0), []byte(`null`), uint8(2), uint8(2))
	f.Add([]byte(`{"\ud83d\ude00":1,"😀":2}`), "\u212aey", uint64(0), []byte(`{}`), uint8(0), uint8(4))
	f.Add([]byte(`{"":1,"":2}`), "params", uint64(0xFF), []byte(`{"name":"kill"}`), uint8(5), uint8(1))
	f.Add([]byte(` {"a" : 1 , "b" : "c"} `), "jsonrpc", uint64(0), []byte(`"1.0"`), uint8(0), uint8(6))
	f.Add([]byte(`{"a":"\"}"}`), "result", uint64(0), []byte(`{}`), uint8(0), uint8(4))
	f.Add([]byte(`{"a":1}{"b":2}`), "meth\u017Fod", uint64(0), []byte(`"x"`), uint8(9), uint8(7))
	f.Fuzz(func(t *testing.T, line []byte, key string, mask uint64, value []byte, pos, base uint8) {
		// decodeObject against the tokenizer.
		obj, err := decodeObject(line)
		ref := fzObject(line)
		switch {
		case !ref.valid:
			if err == nil || errors.Is(err, errNotObject) || errors.Is(err, errDuplicateKey) {
				t.Fatalf("%q is not JSON, but decodeObject says %v", line, err)
			}
		case !ref.object:
			if !errors.Is(err, errNotObject) {
				t.Fatalf("%q is not an object, but decodeObject says %v", line, err)
			}
		case !utf8.Valid(line):
			// Names with invalid UTF-8 read as U+FFFD through the tokenizer;
			// no such name can spell a dispatch key, so only require that
			// the call returned.
		case ref.dup:
			if !errors.Is(err, errDuplicateKey) {
				t.Fatalf("%q repeats a name, but decodeObject says %v", line, err)
			}
		default:
			if err != nil {
				t.Fatalf("%q: decodeObject: %v", line, err)
			}
			want := map[string]json.RawMessage{}
			for _, m := range ref.members {
				want[m.name] = m.raw
			}
			if !reflect.DeepEqual(obj, want) {
				t.Fatalf("%q: decodeObject gives %q, want %q", line, obj, want)
			}
		}

		// A member added to a message.
		if !json.Valid(value) || !utf8.Valid(value) {
			value = []byte(`"x"`)
		}
		value = bytes.TrimSpace(value)
		key = strings.ToValidUTF8(key, "\uFFFD")
		b := fzBases[int(base)%len(fzBases)]
		msg := fzInsert(b, pos, fzQuote(key, mask), string(value))
		if !json.Valid([]byte(msg)) {
			t.Fatalf("built an invalid message %s", msg)
		}
		baseObj := fzObject([]byte(b))
		_, inBase := baseObj.get(key)
		got := fzDecode([]byte(msg))
		switch {
		case inBase:
			if _, err := decodeObject([]byte(msg)); !errors.Is(err, errDuplicateKey) {
				t.Fatalf("%s repeats %q, but decodeObject says %v", msg, key, err)
			}
			if got.code != codeInvalidRequest || got.replyID != "null" {
				t.Fatalf("%s repeats %q, but decodes to %+v", msg, key, got)
			}
		case fzDispatchKeys[key]:
			// A dispatch member the base lacks: it may change anything.
		default:
			want := fzDecode([]byte(b))
			_, hasMethod := baseObj.get("method")
			if (key == "result" || key == "error") && !hasMethod {
				break // a response marker, by design
			}
			if got != want {
				t.Fatalf("member %q changed dispatch:\n%s -> %+v\n%s -> %+v", key, b, want, msg, got)
			}
		}
	})
}
