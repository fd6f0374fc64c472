package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"weak"
)

// ---------------------------------------------------------------------------
// rpc.go: framing through a real session, and golden transcripts
// ---------------------------------------------------------------------------

// handleLine dispatches one line per the methods table and starts the
// request at once, as serve does with a line that arrived alone.
func (s *session) handleLine(line []byte) {
	s.dispatch(line)
	s.startPending()
}

// rpcClient drives one session the way a client drives the server: it writes
// request lines into serve's input and reads reply lines from the writer.
type rpcClient struct {
	t       *testing.T
	c       *session
	in      *io.PipeWriter
	lines   chan []byte   // reply lines, without the newline
	stop    chan struct{} // closed at cleanup: the reader goroutine quits
	served  chan error    // serve's return value
	sentSeq int           // sentinel ids used so far
	events  [][]byte      // lines that were not the reply a call waited for
}

// newRPCClient starts serve on a fresh session. At cleanup it closes the input
// (serve returns) and kills the process groups of jobs still registered.
func newRPCClient(t *testing.T, cfg *config) *rpcClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cl := &rpcClient{t: t, in: inW, lines: make(chan []byte, 256), stop: make(chan struct{}), served: make(chan error, 1)}
	cl.c = newSession(cfg, newWriter(outW), nil)
	go func() { cl.served <- cl.c.serve(inR) }()
	go func() {
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case cl.lines <- bytes.TrimSuffix(line, []byte("\n")):
				case <-cl.stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		for _, j := range cl.c.reg.list() {
			killGroup(j.pid)
		}
		close(cl.stop)
		outR.Close() // the writer goroutine ends at its next write
	})
	return cl
}

// sendRaw writes b followed by a newline.
func (cl *rpcClient) sendRaw(b []byte) {
	cl.t.Helper()
	if _, err := cl.in.Write(append(slices.Clip(b), '\n')); err != nil {
		cl.t.Fatalf("write request: %v", err)
	}
}

func (cl *rpcClient) send(line string) { cl.t.Helper(); cl.sendRaw([]byte(line)) }

// next returns the next reply line, failing the test after timeout.
func (cl *rpcClient) next(timeout time.Duration) []byte {
	cl.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line := <-cl.lines:
		return line
	case <-timer.C:
		cl.t.Fatalf("no reply line within %v", timeout)
		return nil
	}
}

// sentinel sends a ping with a fresh string id and returns that id's reply
// line. Replies to inline methods are queued in order, so any reply a
// previous request owed arrives before it.
func (cl *rpcClient) sentinel() (id string, reply string) {
	cl.sentSeq++
	id = fmt.Sprintf(`"sentinel-%d"`, cl.sentSeq)
	return id, `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`
}

// expectNoReply proves that the last request got no reply: a ping sent after
// it must be answered by the very next line.
func (cl *rpcClient) expectNoReply(after string) {
	cl.t.Helper()
	id, want := cl.sentinel()
	cl.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
	if got := cl.next(5 * time.Second); string(got) != want {
		cl.t.Fatalf("after %s: got %s, want no reply (the next line should have been %s)", after, got, want)
	}
}

// call sends a request and returns its decoded reply.
func (cl *rpcClient) call(line string) map[string]any {
	cl.t.Helper()
	cl.send(line)
	return decodeReply(cl.t, cl.next(jobDeadline))
}

// tool calls a tool and returns its result object (content decoded when it
// is JSON) and isError.
func (cl *rpcClient) tool(id int, name string, args string) (any, string, bool) {
	cl.t.Helper()
	reply := cl.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
	res, ok := reply["result"].(map[string]any)
	if !ok {
		cl.t.Fatalf("tools/call %s %s: no result: %v", name, args, reply)
	}
	content := res["content"].([]any)
	text := content[0].(map[string]any)["text"].(string)
	var v any
	_ = json.Unmarshal([]byte(text), &v) // a tool error is plain text
	isErr, _ := res["isError"].(bool)
	return v, text, isErr
}

// decodeReply decodes a reply line with numbers kept as written.
func decodeReply(t testing.TB, line []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("reply %q is not a JSON object: %v", line, err)
	}
	return m
}

// jsonValue decodes a line into a comparable value: numbers as written, and
// the text of every tools/call content item decoded when it holds JSON, so a
// tool result compares as a value, not as a string.
func jsonValue(line []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	normalizeText(v)
	return v, nil
}

// normalizeText replaces the text of each tool result in reply (or in each
// reply of a batch) by the JSON value it holds, so key order does not matter.
func normalizeText(reply any) {
	if batch, ok := reply.([]any); ok {
		for _, r := range batch {
			normalizeText(r)
		}
		return
	}
	obj, _ := reply.(map[string]any)
	if res, ok := obj["result"].(map[string]any); ok {
		if content, ok := res["content"].([]any); ok {
			for _, item := range content {
				if m, ok := item.(map[string]any); ok {
					if text, ok := m["text"].(string); ok {
						if inner, err := jsonValue([]byte(text)); err == nil {
							m["text"] = inner
						}
					}
				}
			}
		}
	}
}

// noReply is the expectation line for a request that must not be answered.
const noReply = "<no reply>"

// exchange is one request of a transcript and the reply it must get.
type exchange struct {
	comments []string // "#" lines before the request
	request  []byte   // sent as is, newline added
	reply    []byte   // the expected reply line, or noReply
	line     int      // the request's line number in the file
}

// readTranscript parses a .jsonl transcript: pairs of lines, a request then
// its expected reply or "<no reply>". Lines starting with "#" in a request
// position are comments. A request line may be empty or end in "\r": it is
// sent byte for byte.
func readTranscript(path string) ([]exchange, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []exchange
	var comments []string
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "#") {
			comments = append(comments, lines[i])
			continue
		}
		if i+1 >= len(lines) {
			return nil, fmt.Errorf("%s:%d: request without an expected reply line", path, i+1)
		}
		out = append(out, exchange{comments: comments, request: []byte(lines[i]), reply: []byte(lines[i+1]), line: i + 1})
		comments = nil
		i++
	}
	return out, nil
}

// writeTranscript writes exchanges back in the format readTranscript reads.
func writeTranscript(path string, xs []exchange) error {
	var b bytes.Buffer
	for _, x := range xs {
		for _, c := range x.comments {
			b.WriteString(c + "\n")
		}
		b.Write(x.request)
		b.WriteByte('\n')
		b.Write(x.reply)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// replayTranscript sends each request and checks its reply. With -update it
// records the replies instead: it learns whether a request was answered from
// a sentinel ping, plus a grace period for replies that come from a
// goroutine (tools/call).
// transcriptDirectives reads the header comments of a transcript: "# env:
// NAME=value ..." configures its server, "# mask: REGEXP" hides what varies
// from run to run (durations, random ids) in replies before they are
// compared.
func transcriptDirectives(t *testing.T, xs []exchange) (settings []string, masks []*regexp.Regexp) {
	if len(xs) == 0 {
		return nil, nil
	}
	for _, c := range xs[0].comments {
		if env, ok := strings.CutPrefix(c, "# env: "); ok {
			settings = append(settings, strings.Fields(env)...)
		}
		if mask, ok := strings.CutPrefix(c, "# mask: "); ok {
			masks = append(masks, regexp.MustCompile(mask))
		}
	}
	return settings, masks
}

// versionMark stands for the release number in a transcript's replies, so a
// new VERSION does not mean recording the transcripts again.
const versionMark = `"version":"$VERSION"`

// versionFilled is an expected reply with versionMark made the release number.
func versionFilled(reply []byte) []byte {
	return bytes.ReplaceAll(reply, []byte(versionMark), []byte(`"version":"`+version+`"`))
}

// versionMarked is a recorded reply with the release number made versionMark.
func versionMarked(reply []byte) []byte {
	return bytes.ReplaceAll(reply, []byte(`"version":"`+version+`"`), []byte(versionMark))
}

// masked is reply with every match of masks replaced by a fixed mark.
func masked(reply []byte, masks []*regexp.Regexp) []byte {
	for _, m := range masks {
		reply = m.ReplaceAll(reply, []byte("MASKED"))
	}
	return reply
}

func replayTranscript(t *testing.T, cl *rpcClient, path string, xs []exchange, masks []*regexp.Regexp) {
	t.Helper()
	for i := range xs {
		x := &xs[i]
		where := fmt.Sprintf("%s:%d", filepath.Base(path), x.line)
		cl.sendRaw(x.request)
		if *update {
			x.reply = versionMarked(cl.recordReply(where))
			continue
		}
		if string(x.reply) == noReply {
			cl.expectNoReply(where + " " + string(x.request))
			continue
		}
		got := masked(cl.next(jobDeadline), masks)
		gotV, err := jsonValue(got)
		if err != nil {
			t.Errorf("%s: reply %s is not JSON: %v", where, got, err)
			continue
		}
		wantV, err := jsonValue(masked(versionFilled(x.reply), masks))
		if err != nil {
			t.Fatalf("%s: expected reply %s is not JSON: %v", where, x.reply, err)
		}
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("%s: request %s\n got  %s\n want %s", where, x.request, got, x.reply)
		}
	}
	cl.expectNoReply(filepath.Base(path) + " (end: no stray replies)")
	if *update {
		if err := writeTranscript(path, xs); err != nil {
			t.Fatal(err)
		}
	}
}

// recordReply is -update's way to learn the reply to the request just sent.
func (cl *rpcClient) recordReply(where string) []byte {
	cl.t.Helper()
	id, want := cl.sentinel()
	cl.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
	var got [][]byte
	for {
		line := cl.next(jobDeadline)
		if string(line) == want {
			break
		}
		got = append(got, line)
	}
	if len(got) == 0 {
		timer := time.NewTimer(time.Second)
		select {
		case line := <-cl.lines:
			got = append(got, line)
		case <-timer.C:
		}
		timer.Stop()
	}
	switch len(got) {
	case 0:
		return []byte(noReply)
	case 1:
		return got[0]
	}
	cl.t.Fatalf("%s: %d replies to one request: %q", where, len(got), got)
	return nil
}

// TestTextReplyMatchesEncodingJSON checks the hand-built tools/call reply
// line against encoding the same result with encoding/json, byte for byte,
// for every ASCII byte, invalid and multi-byte UTF-8 (U+2028/U+2029
// included) and random bytes.
func TestTextReplyMatchesEncodingJSON(t *testing.T) {
	inputs := [][]byte{nil, []byte(`{"a":"b\\c\"d"}`), []byte("\xff\xfe\xe2\x82"), []byte("\u2028\u2029é€😀\x00<>&")}
	for c := 0; c < 256; c++ {
		inputs = append(inputs, []byte{'x', byte(c), 'y'})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 500; i++ {
		b := make([]byte, rng.IntN(64))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		inputs = append(inputs, b)
	}
	id := json.RawMessage(`"x"`)
	for _, in := range inputs {
		want := encodeReply(id, replyShape{}, toolResult{Content: []textContent{{Type: "text", Text: string(in)}}}, nil)
		got := textReply(id, replyShape{}, in)
		if !bytes.Equal(got, want) {
			t.Fatalf("text %q:\n got %s\nwant %s", in, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("text %q: reply buffer cap %d for %d bytes; the size must be exact", in, cap(got), len(got))
		}
	}
}

// TestTextReplyShapes: a structured reply carries the result a second time
// as structuredContent (wait's array wrapped in an object), a modern one
// also resultType and serverInfo; the text block stays the same.
func TestTextReplyShapes(t *testing.T) {
	for _, tc := range []struct {
		shape replyShape
		text  string
		want  string // structuredContent, "" for none
	}{
		{replyShape{}, `{"job_id":"1"}`, ""},
		{replyShape{structured: true}, `{"job_id":"1"}`, `{"job_id":"1"}`},
		{replyShape{structured: true}, `[{"job_id":"1"}]`, `{"results":[{"job_id":"1"}]}`},
		{replyShape{structured: true, modern: true}, `{"job_id":"\u2028é"}`, `{"job_id":"\u2028é"}`},
	} {
		line := textReply(json.RawMessage(`7`), tc.shape, []byte(tc.text))
		if cap(line) != len(line) {
			t.Errorf("%+v: reply buffer cap %d for %d bytes; the size must be exact", tc.shape, cap(line), len(line))
		}
		var reply struct {
			Result struct {
				Content    []textContent   `json:"content"`
				Structured json.RawMessage `json:"structuredContent"`
				ResultType string          `json:"resultType"`
				Meta       map[string]any  `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &reply); err != nil {
			t.Fatalf("%+v: %v in %s", tc.shape, err, line)
		}
		res := reply.Result
		if len(res.Content) != 1 || res.Content[0].Text != tc.text || string(res.Structured) != tc.want {
			t.Errorf("%+v: %s", tc.shape, line)
		}
		if modern := res.ResultType == "complete" && res.Meta[metaServerInfo] != nil; modern != tc.shape.modern {
			t.Errorf("%+v: resultType %q, _meta %v", tc.shape, res.ResultType, res.Meta)
		}
	}
}

// TestTranscripts replays every testdata/transcripts/*.jsonl against a fresh
// conn (so job ids start at 1 in each file).
func TestTranscripts(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts found (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".jsonl"), func(t *testing.T) {
			t.Parallel()
			xs, err := readTranscript(path)
			if err != nil {
				t.Fatal(err)
			}
			settings, masks := transcriptDirectives(t, xs)
			replayTranscript(t, newRPCClient(t, configOf(t, settings...)), path, xs, masks)
		})
	}
}

// TestTranscriptContract checks the framing rules of wire-1.0 one by one,
// independently of the golden files (which -update rewrites wholesale):
// which requests get no reply, the error code, the id echoed byte for byte,
// and the phrase the message must contain.
func TestTranscriptContract(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	cases := []struct {
		name    string
		request string
		code    int    // 0: a result is expected; -1: no reply
		id      string // the id as it must appear in the reply
		phrase  string // the error message must contain it
	}{
		{"number id", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, 0, `7`, ""},
		{"string id", `{"jsonrpc":"2.0","id":"7","method":"ping"}`, 0, `"7"`, ""},
		{"2^53+1 id", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, 0, `9007199254740993`, ""},
		{"huge negative id", `{"jsonrpc":"2.0","id":-123456789012345678901234567890,"method":"ping"}`, 0, `-123456789012345678901234567890`, ""},
		{"escaped string id", `{"jsonrpc":"2.0","id":"\u0037\n","method":"ping"}`, 0, `"\u0037\n"`, ""},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, `1`, ""},
		{"null params", `{"jsonrpc":"2.0","id":2,"method":"ping","params":null}`, 0, `2`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"ping"}`, -1, "", ""},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}`, -1, "", ""},
		{"initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, -1, "", ""},
		{"cancel of an unknown request", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42}}`, -1, "", ""},
		{"cancel with a bad requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":1}}}`, -1, "", ""},
		{"cancel without params", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, -1, "", ""},
		{"a client's response", `{"jsonrpc":"2.0","id":3,"result":{}}`, -1, "", ""},
		{"empty line", ``, -1, "", ""},
		{"blank line", "  \t ", -1, "", ""},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, codeInvalidRequest, `null`, "id"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, codeInvalidRequest, `null`, "id"},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, codeInvalidRequest, `null`, "id"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, codeInvalidRequest, `null`, "id"},
		{"params an array", `{"jsonrpc":"2.0","id":4,"method":"ping","params":[]}`, codeInvalidParams, `4`, "params"},
		{"params a string", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":"x"}`, codeInvalidParams, `5`, "params"},
		{"tools/call params a number", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":5}`, codeInvalidParams, `6`, "params"},
		{"tools/call without params", `{"jsonrpc":"2.0","id":8,"method":"tools/call"}`, codeInvalidParams, `8`, "name"},
		{"tools/call without a name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`, codeInvalidParams, `9`, "name"},
		{"unknown tool", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"nope"}}`, codeInvalidParams, `10`, "unknown tool"},
		{"tool names are case-sensitive", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"Execute"}}`, codeInvalidParams, `11`, "unknown tool"},
		{"arguments an array", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"list_jobs","arguments":[]}}`, codeInvalidParams, `12`, "arguments"},
		{"unknown method", `{"jsonrpc":"2.0","id":13,"method":"resources/list"}`, codeNoMethod, `13`, "resources/list"},
		{"server/discover before initialize", `{"jsonrpc":"2.0","id":14,"method":"server/discover"}`, codeNoMethod, `14`, "server/discover"},
		{"method case matters", `{"jsonrpc":"2.0","id":15,"method":"PING"}`, codeNoMethod, `15`, "PING"},
		{"Method key", `{"jsonrpc":"2.0","id":16,"Method":"ping"}`, codeInvalidRequest, `16`, "method"},
		{"ID key is not the id", `{"jsonrpc":"2.0","id":17,"method":"ping","ID":18}`, 0, `17`, ""},
		{"duplicate method", `{"jsonrpc":"2.0","id":19,"method":"ping","method":"tools/list"}`, codeInvalidRequest, `null`, "duplicate"},
		{"duplicate id", `{"jsonrpc":"2.0","id":20,"id":21,"method":"ping"}`, codeInvalidRequest, `null`, "duplicate"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":22,"method":"ping"}`, codeInvalidRequest, `22`, "jsonrpc"},
		{"no jsonrpc", `{"id":23,"method":"ping"}`, codeInvalidRequest, `23`, "jsonrpc"},
		{"no method", `{"jsonrpc":"2.0","id":24}`, codeInvalidRequest, `24`, "method"},
		{"method not a string", `{"jsonrpc":"2.0","id":25,"method":5}`, codeInvalidRequest, `25`, "method"},
		{"notification method with an id", `{"jsonrpc":"2.0","id":26,"method":"notifications/initialized"}`, codeInvalidRequest, `26`, "notification"},
		{"invalid JSON", `{"jsonrpc":"2.0","id":27,"method":"ping"`, codeParse, `null`, "parse"},
		{"trailing garbage", `{"jsonrpc":"2.0","id":28,"method":"ping"} x`, codeParse, `null`, "parse"},
		{"not an object", `"ping"`, codeInvalidRequest, `null`, "object"},
		{"null line", `null`, codeInvalidRequest, `null`, "object"},
		{"empty batch", `[]`, codeInvalidRequest, `null`, "batch"},
		{"batch of one", `[{"jsonrpc":"2.0","id":29,"method":"ping"}]`, codeInvalidRequest, `null`, "batch"},
		{"broken batch", `[{"jsonrpc":"2.0"`, codeParse, `null`, "parse"},
		{"CRLF", "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"ping\"}\r", 0, `30`, ""},
	}
	for _, tc := range cases {
		cl.send(tc.request)
		if tc.code == -1 {
			cl.expectNoReply(tc.name)
			continue
		}
		raw := cl.next(jobDeadline)
		if !bytes.Contains(raw, []byte(`"id":`+tc.id+`,`)) {
			t.Errorf("%s: reply %s does not echo id %s byte for byte", tc.name, raw, tc.id)
		}
		reply := decodeReply(t, raw)
		if reply["jsonrpc"] != "2.0" {
			t.Errorf("%s: reply %s lacks jsonrpc 2.0", tc.name, raw)
		}
		_, hasResult := reply["result"]
		errObj, hasError := reply["error"].(map[string]any)
		if hasResult == hasError {
			t.Errorf("%s: reply %s must carry exactly one of result and error", tc.name, raw)
			continue
		}
		if tc.code == 0 {
			if !hasResult {
				t.Errorf("%s: got error %s, want a result", tc.name, raw)
			}
			continue
		}
		if !hasError || errObj["code"] != json.Number(strconv.Itoa(tc.code)) {
			t.Errorf("%s: reply %s, want error code %d", tc.name, raw, tc.code)
			continue
		}
		if msg, _ := errObj["message"].(string); !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.phrase)) {
			t.Errorf("%s: message %q does not mention %q", tc.name, msg, tc.phrase)
		}
	}
}

// TestTranscriptWrongArgTypes sends, for every argument of every tool, a
// value of the wrong type; each must be a tool error saying "invalid" and
// naming the argument, never a crash or a JSON-RPC error.
func TestTranscriptWrongArgTypes(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	id := 100
	for _, tool := range jobTools {
		for _, a := range tool.params {
			args := requiredOnly(&tool)
			args[a.name] = json.RawMessage(wrongValue[a.typ])
			argJSON, _ := json.Marshal(args)
			id++
			_, text, isErr := cl.tool(id, tool.name, string(argJSON))
			if !isErr || !strings.Contains(text, "invalid") || !strings.Contains(text, a.name) {
				t.Errorf("%s %s: isError %v, %q; want a tool error with \"invalid\" and %q", tool.name, argJSON, isErr, text, a.name)
			}
		}
	}
}

func TestTranscriptInitializeVersions(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	newest := "2025-11-25"
	cases := []struct{ params, want string }{
		{`{"protocolVersion":"2024-11-05"}`, "2024-11-05"},
		{`{"protocolVersion":"2025-03-26"}`, "2025-03-26"},
		{`{"protocolVersion":"2025-06-18"}`, "2025-06-18"},
		{`{"protocolVersion":"2025-11-25"}`, "2025-11-25"},
		{`{"protocolVersion":"2099-01-01"}`, newest},
		{`{"protocolVersion":"1.0"}`, newest},
		{`{"protocolVersion":5}`, newest},
		{`{}`, newest},
		{`null`, newest},
	}
	for i, tc := range cases {
		reply := cl.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":%s}`, i, tc.params))
		res, ok := reply["result"].(map[string]any)
		if !ok {
			t.Fatalf("initialize %s: %v", tc.params, reply)
		}
		if res["protocolVersion"] != tc.want {
			t.Errorf("initialize %s: protocolVersion %v, want %s", tc.params, res["protocolVersion"], tc.want)
		}
		caps, _ := res["capabilities"].(map[string]any)
		if _, ok := caps["tools"].(map[string]any); !ok {
			t.Errorf("initialize %s: capabilities %v lack tools", tc.params, res["capabilities"])
		}
		info, _ := res["serverInfo"].(map[string]any)
		if info["name"] != "mcp-exec" || info["version"] != version {
			t.Errorf("initialize %s: serverInfo %v", tc.params, info)
		}
	}
}

func TestTranscriptToolsList(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	reply := cl.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	res, _ := reply["result"].(map[string]any)
	list, _ := res["tools"].([]any)
	required := map[string][]string{
		"execute": {"command"}, "wait": {"job_ids"}, "status": {"job_id"}, "output": {"job_id"},
		"input": {"job_id"}, "kill": {"job_id"}, "list_jobs": nil,
	}
	properties := map[string][]string{
		"execute":   {"argv", "capture", "close_stdin", "command", "cwd", "env", "max_reply_bytes", "nowait", "stdin", "time_limit", "tty", "until", "yield_after"},
		"wait":      {"job_ids", "max_reply_bytes", "timeout", "until"},
		"status":    {"job_id"},
		"output":    {"job_id", "max_reply_bytes", "plain", "stderr", "stdout"},
		"input":     {"close", "data", "job_id"},
		"kill":      {"job_id", "max_reply_bytes", "signal", "timeout"},
		"list_jobs": {},
	}
	if len(list) != 7 {
		t.Fatalf("tools/list has %d tools, want 7: %v", len(list), reply)
	}
	seen := map[string]bool{}
	for _, item := range list {
		tool := item.(map[string]any)
		name, _ := tool["name"].(string)
		seen[name] = true
		if d, _ := tool["description"].(string); d == "" {
			t.Errorf("%s: no description", name)
		}
		schema, _ := tool["inputSchema"].(map[string]any)
		if schema["type"] != "object" {
			t.Errorf("%s: inputSchema type %v, want object", name, schema["type"])
		}
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			t.Errorf("%s: inputSchema has no properties object", name)
		}
		var names []string
		for p, s := range props {
			names = append(names, p)
			if _, ok := s.(map[string]any); !ok {
				t.Errorf("%s.%s: schema %v is not an object", name, p, s)
			}
		}
		slices.Sort(names)
		if want := properties[name]; !slices.Equal(names, want) && !(len(names) == 0 && len(want) == 0) {
			t.Errorf("%s: properties %v, want %v", name, names, want)
		}
		var req []string
		if r, ok := schema["required"].([]any); ok {
			for _, x := range r {
				req = append(req, x.(string))
			}
		}
		if !slices.Equal(req, required[name]) {
			t.Errorf("%s: required %v, want %v", name, req, required[name])
		}
	}
	for name := range required {
		if !seen[name] {
			t.Errorf("tools/list lacks %s", name)
		}
	}
}

// longLine is a ping request padded with spaces to exactly n bytes.
func longLine(id, n int) []byte {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"`, id)
	b := make([]byte, n)
	copy(b, head)
	for i := len(head); i < n-1; i++ {
		b[i] = ' '
	}
	b[n-1] = '}'
	return b
}

// TestTranscriptLongLines: a line of maxLineBytes is served; a longer one
// gets a parse error with id null and is skipped, and the next line is
// served normally.
func TestTranscriptLongLines(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	cl.sendRaw(longLine(1, maxLineBytes))
	if got := string(cl.next(jobDeadline)); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("a line of exactly %d bytes: got %s", maxLineBytes, got)
	}
	for _, n := range []int{maxLineBytes + 1, maxLineBytes + 3<<20} {
		cl.sendRaw(longLine(2, n))
		reply := decodeReply(t, cl.next(jobDeadline))
		errObj, _ := reply["error"].(map[string]any)
		if reply["id"] != nil || errObj == nil || errObj["code"] != json.Number(strconv.Itoa(codeParse)) {
			t.Errorf("a line of %d bytes: reply %v, want error %d with id null", n, reply, codeParse)
		}
		cl.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		if got := string(cl.next(jobDeadline)); got != `{"jsonrpc":"2.0","id":3,"result":{}}` {
			t.Errorf("the line after a %d-byte line: got %s", n, got)
		}
	}
}

// TestOverlongLastLineAtEOFIsServed: readLine compares the line length with
// limit+1 to allow for the newline, but a last line that ends at EOF has no
// newline, so a final line of maxLineBytes+1 bytes is served instead of being
// refused like the same line with a newline.
func TestOverlongLastLineAtEOFIsServed(t *testing.T) {
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	if _, err := cl.in.Write(longLine(1, maxLineBytes+1)); err != nil {
		t.Fatal(err)
	}
	cl.in.Close()
	reply := decodeReply(t, cl.next(jobDeadline))
	if errObj, _ := reply["error"].(map[string]any); reply["id"] != nil || errObj == nil {
		t.Errorf("a final unterminated line of %d bytes (cap %d): reply %v, want a parse error with id null", maxLineBytes+1, maxLineBytes, reply)
	}
}

// TestTranscriptProgress: a blocking call that carries a progressToken gets
// notifications/progress with increasing progress until it replies, and none
// after.
func TestTranscriptProgress(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.progressInterval = 50 * time.Millisecond
	cl := newRPCClient(t, cfg)
	cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 0.3"},"_meta":{"progressToken":"tok"}}}`)
	var progress []float64
	for {
		msg := decodeReply(t, cl.next(jobDeadline))
		if msg["method"] == "notifications/progress" {
			p, _ := msg["params"].(map[string]any)
			n, _ := p["progress"].(json.Number).Float64()
			if p["progressToken"] != "tok" || p["message"] == "" {
				t.Errorf("progress notification %v", msg)
			}
			progress = append(progress, n)
			continue
		}
		if msg["id"] != json.Number("1") {
			t.Fatalf("unexpected message %v", msg)
		}
		break
	}
	if len(progress) < 2 || progress[0] != 1 {
		t.Errorf("progress %v: want at least 2 notifications starting at 1", progress)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] <= progress[i-1] {
			t.Errorf("progress %v does not increase", progress)
		}
	}
	cl.expectNoReply("the reply to a call with progress")

	// No token, no notifications.
	cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 0.2"}}}`)
	if msg := decodeReply(t, cl.next(jobDeadline)); msg["id"] != json.Number("2") {
		t.Errorf("a call without progressToken sent %v before its reply", msg)
	}
}

// ---------------------------------------------------------------------------
// reaper.go and jobs.go: statuses, kill, delivery, pipes, fds, stdin
// ---------------------------------------------------------------------------

// TestTranscriptCancel: notifications/cancelled answers a blocking call with
// -32800. A cancelled blocking execute tears its job down and leaves nothing
// in list_jobs; a cancelled wait leaves its job alone. A string requestId
// "7" does not cancel the request with number id 7.
func TestTranscriptCancel(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	cl.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 60"}}}`)
	var j *job
	eventually(t, 10*time.Second, "the execute's job is registered", func() bool {
		jobs := cl.c.reg.list()
		if len(jobs) == 1 {
			j = jobs[0]
		}
		return j != nil
	})
	waitForSleeps(t, j.pid, 1)
	cl.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}`)
	cl.expectNoReply(`a cancel naming the string "7"`)
	// Proving that request 7 was not cancelled means seeing no -32800 for
	// it; there is no event for "nothing happened", so give it a moment.
	select {
	case line := <-cl.lines:
		t.Fatalf(`after a cancel naming the string "7": %s; number id 7 must not be cancelled`, line)
	case <-time.After(200 * time.Millisecond):
	}
	cl.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	reply := decodeReply(t, cl.next(jobDeadline))
	if errObj, _ := reply["error"].(map[string]any); reply["id"] != json.Number("7") || errObj == nil || errObj["code"] != json.Number(strconv.Itoa(codeCancelled)) {
		t.Fatalf("cancelled execute: %v, want error %d for id 7", reply, codeCancelled)
	}
	if v, _, _ := cl.tool(8, "list_jobs", `{}`); !reflect.DeepEqual(v, map[string]any{"jobs": []any{}}) {
		t.Errorf("list_jobs after a cancelled execute: %v", v)
	}
	eventually(t, 10*time.Second, "the cancelled execute's group is gone", func() bool { return !groupAlive(j.pid) })

	// A cancelled wait leaves the job as it was.
	v, _, _ := cl.tool(9, "execute", `{"command":"sleep 60","nowait":true}`)
	id := v.(map[string]any)["job_id"].(string)
	cl.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":[` + strconv.Quote(id) + `],"timeout":60}}}`)
	eventually(t, 10*time.Second, "the wait is in flight", func() bool {
		cl.c.mu.Lock()
		defer cl.c.mu.Unlock()
		key, _ := idKey(json.RawMessage("10"))
		_, ok := cl.c.inflight[key]
		return ok
	})
	cl.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10}}`)
	reply = decodeReply(t, cl.next(jobDeadline))
	if errObj, _ := reply["error"].(map[string]any); reply["id"] != json.Number("10") || errObj == nil || errObj["code"] != json.Number(strconv.Itoa(codeCancelled)) {
		t.Fatalf("cancelled wait: %v, want error %d for id 10", reply, codeCancelled)
	}
	if v, _, _ := cl.tool(11, "status", `{"job_id":`+strconv.Quote(id)+`}`); v.(map[string]any)["state"] != "running" {
		t.Errorf("status after a cancelled wait: %v", v)
	}
}

// TestJobEvents: with MCP_EXEC_JOB_EVENTS a legacy session hears one
// started and one finished notification per job, the command clipped and
// never the job's output; before initialize, nothing.
func TestJobEvents(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.jobEvents = true
	cl := newRPCClient(t, cfg)
	cl.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	long := strings.Repeat("x", 200)
	cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo {\"jsonrpc\":\"2.0\",\"method\":\"notifications/job\"} # ` + long + `"}}}`)
	var events []map[string]any
	for len(events) < 2 {
		line := cl.next(jobDeadline)
		var msg struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal(line, &msg) == nil && msg.Method == "notifications/job" {
			events = append(events, msg.Params)
		}
	}
	if events[0]["event"] != "started" || events[1]["event"] != "finished" || events[0]["job_id"] != events[1]["job_id"] ||
		events[1]["state"] != "success" || events[1]["exit_code"] != float64(0) {
		t.Errorf("events %v", events)
	}
	if cmd, _ := events[0]["command"].(string); len([]rune(cmd)) != 120 || !strings.HasPrefix(cmd, "echo") {
		t.Errorf("command %q: want its first 120 characters", cmd)
	}
}

// TestProgressCarriesOutputWhenAsked: a request whose _meta asks for it
// gets progress messages that end with the job's newest lines, bounded.
func TestProgressCarriesOutputWhenAsked(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.progressInterval = 50 * time.Millisecond
	cl := newRPCClient(t, cfg)
	cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"seq 1 1000; echo building step 2; sleep 1"},"_meta":{"progressToken":"p","com.mcp-exec/progressOutput":true}}}`)
	for {
		line := cl.next(jobDeadline)
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.Method != "notifications/progress" {
			t.Fatalf("the reply came before any progress with output: %s", line)
		}
		if strings.HasSuffix(msg.Params.Message, "999\n1000\nbuilding step 2\n") {
			if len(msg.Params.Message) > 200+progressBytes {
				t.Errorf("a message of %d bytes", len(msg.Params.Message))
			}
			break
		}
	}
	cl.next(jobDeadline) // the reply
}

// TestBatchProgressIsNoReplyOfTheBatch: a batch member's progress
// notifications go out on their own lines as they come; the batch's array
// holds exactly its replies, one per request.
func TestBatchProgressIsNoReplyOfTheBatch(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.progressInterval = 50 * time.Millisecond
	cl := newRPCClient(t, cfg)
	cl.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	cl.send(`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 0.3"},"_meta":{"progressToken":"p"}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	progress := 0
	for {
		line := cl.next(jobDeadline)
		if line[0] != '[' {
			if msg := decodeReply(t, line); msg["method"] != "notifications/progress" {
				t.Fatalf("a line outside the batch's array that is no progress: %s", line)
			}
			progress++
			continue
		}
		var replies []map[string]any
		if err := json.Unmarshal(line, &replies); err != nil {
			t.Fatalf("the batch's array %s: %v", line, err)
		}
		ids := map[any]bool{}
		for _, r := range replies {
			ids[r["id"]] = r["result"] != nil
		}
		if len(replies) != 2 || !ids[float64(2)] || !ids[float64(3)] {
			t.Fatalf("the batch's array %s: want the results of ids 2 and 3, nothing else", line)
		}
		break
	}
	if progress == 0 {
		t.Errorf("no progress notification before the batch's array")
	}
	cl.expectNoReply("the batch's array")
}

// TestCancelledBatchMemberHoldsNoReplies: a batch member that a cancel
// leaves without a reply (a 2026-07-28 request) does not hold the batch
// back: its array goes out with the other replies.
func TestCancelledBatchMemberHoldsNoReplies(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	cl.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	cl.send(`[{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 60"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	eventually(t, 10*time.Second, "the slow member is in flight", func() bool {
		cl.c.mu.Lock()
		defer cl.c.mu.Unlock()
		key, _ := idKey(json.RawMessage(`"slow"`))
		_, ok := cl.c.inflight[key]
		return ok
	})
	cl.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`)
	if got, want := string(cl.next(jobDeadline)), `[{"jsonrpc":"2.0","id":3,"result":{}}]`; got != want {
		t.Fatalf("after the cancel: %s, want the batch's array %s", got, want)
	}
	cl.expectNoReply("the batch's array")
}

// TestDeliveredJobIsNotHeldByItsRequest: the slice of requests read but
// not started kept each started one's closure until a later burst
// overwrote its slot, and with it the jobs its reply delivered, output
// windows and all (a hundred 64 KiB jobs collected by one wait stayed
// resident). Once delivered and forgotten, a job is garbage.
func TestDeliveredJobIsNotHeldByItsRequest(t *testing.T) {
	onLinux(t)
	cl := newRPCClient(t, testConfig())
	cl.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	cl.shellTool(1, "execute", map[string]any{"command": "echo hi", "nowait": true})
	registered := func() *job {
		cl.c.reg.mu.Lock()
		defer cl.c.reg.mu.Unlock()
		return cl.c.reg.jobs["1"]
	}
	j := registered()
	if j == nil {
		t.Fatal("the job is not registered")
	}
	gone := weak.Make(j)
	j = nil
	// One write of two requests: the wait takes the second pending slot,
	// which the single requests after it never reach.
	cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_jobs","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":["1"],"timeout":30}}}`)
	for seen := 0; seen < 2; {
		if line := cl.next(jobDeadline); bytes.Contains(line, []byte(`"id":2`)) || bytes.Contains(line, []byte(`"id":3`)) {
			seen++
		}
	}
	if registered() != nil {
		t.Fatal("the wait did not deliver the job")
	}
	cl.shellTool(4, "list_jobs", map[string]any{})
	deadline := time.Now().Add(jobDeadline)
	for gone.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the delivered job is still reachable")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
