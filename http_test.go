package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpServer starts the HTTP transport on a free loopback port with the
// given settings and returns its base URL.
func httpServer(t *testing.T, settings ...string) string {
	t.Helper()
	_, url := httpTransportFor(t, settings...)
	return url
}

// httpTransportFor is httpServer that also returns the transport. Its idle
// sweep does not run: a test calls takeIdle itself. A test that sets no
// token or MCP_EXEC_HTTP_AUTH of its own serves without a token.
func httpTransportFor(t *testing.T, settings ...string) (*httpTransport, string) {
	t.Helper()
	open := "MCP_EXEC_HTTP_AUTH=none"
	for _, s := range settings {
		if strings.HasPrefix(s, "MCP_EXEC_TOKEN") || strings.HasPrefix(s, "MCP_EXEC_HTTP_AUTH=") {
			open = "MCP_EXEC_HTTP_AUTH=token"
		}
	}
	return guardedTransport(t, append([]string{open}, settings...)...)
}

// mcpRequest is a POST of one JSON-RPC body to /mcp with the headers a
// client sends, and headers.
func mcpRequest(t *testing.T, url, body string, headers map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

// post sends one JSON-RPC body to /mcp with the given headers.
func post(t *testing.T, url, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req := mcpRequest(t, url, body, headers)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// TestHTTPSessionsAreSeparate: each initialize opens a session of its own;
// a job of one is unknown to the other, and an unknown session is 404.
func TestHTTPSessionsAreSeparate(t *testing.T) {
	url := httpServer(t)
	resp, _ := post(t, url, initBody, nil)
	a := resp.Header.Get("Mcp-Session-Id")
	resp, _ = post(t, url, initBody, nil)
	b := resp.Header.Get("Mcp-Session-Id")
	if len(a) != 32 || len(b) != 32 || a == b {
		t.Fatalf("session ids %q and %q", a, b)
	}
	_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 30","nowait":true}}}`,
		map[string]string{"Mcp-Session-Id": a})
	id := between(body, `\"job_id\":\"`, `\"`)
	if len(id) != 32 {
		t.Fatalf("job id %q in %s", id, body)
	}
	_, body = post(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status","arguments":{"job_id":"`+id+`"}}}`,
		map[string]string{"Mcp-Session-Id": b})
	if !strings.Contains(body, "unknown job_id") {
		t.Errorf("another session's job: %s", body)
	}
	if resp, _ := post(t, url, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, map[string]string{"Mcp-Session-Id": strings.Repeat("0", 32)}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d", resp.StatusCode)
	}
}

// between is the text of s between the first start and the next end.
func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}

// TestHTTPMetricsTokenOpensMetricsOnly: the metrics token opens /metrics,
// as the token does, and nothing else; without either /metrics is 401.
func TestHTTPMetricsTokenOpensMetricsOnly(t *testing.T) {
	url := httpServer(t, "MCP_EXEC_TOKEN=s3cret", "MCP_EXEC_METRICS_TOKEN=scrape")
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{http.MethodGet, "/metrics", "scrape", http.StatusOK},
		{http.MethodGet, "/metrics", "s3cret", http.StatusOK},
		{http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{http.MethodGet, "/metrics", "scrap", http.StatusUnauthorized},
		{http.MethodPost, "/mcp", "scrape", http.StatusUnauthorized},
		{http.MethodPost, "/exec", "scrape", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(initBody))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s with %q: %d, want %d", tc.method, tc.path, tc.token, resp.StatusCode, tc.want)
		}
	}
}

// TestHTTPGuards: a missing or wrong token is 401, a token in the query
// string does not count, a foreign Origin is 403; /healthz needs no token.
func TestHTTPGuards(t *testing.T) {
	url := httpServer(t, "MCP_EXEC_TOKEN=s3cret")
	for _, tc := range []struct {
		name    string
		path    string
		headers map[string]string
		want    int
	}{
		{"no token", "/mcp", nil, http.StatusUnauthorized},
		{"wrong token", "/mcp", map[string]string{"Authorization": "Bearer s3cre"}, http.StatusUnauthorized},
		{"token in the query", "/mcp?token=s3cret&access_token=s3cret", nil, http.StatusUnauthorized},
		{"foreign origin", "/mcp", map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"the token", "/mcp", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+tc.path, strings.NewReader(initBody))
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("healthz without a token: %v %v", resp, err)
	}
}

// TestHTTPModernHeaders: a 2026-07-28 request needs headers that match its
// body; a mismatch is 400 with -32020.
func TestHTTPModernHeaders(t *testing.T) {
	url := httpServer(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo m"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	good := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute"}
	resp, text := post(t, url, body, good)
	if resp.StatusCode != http.StatusOK || !strings.Contains(text, `"resultType":"complete"`) || !strings.Contains(text, `m\\n`) {
		t.Errorf("modern call: %d %s", resp.StatusCode, text)
	}
	bad := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "kill"}
	resp, text = post(t, url, body, bad)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(text, "-32020") {
		t.Errorf("a mismatched Mcp-Name: %d %s", resp.StatusCode, text)
	}
}

// TestHTTPExecStreams: POST /exec streams output events, then exit with
// the totals and usage.
func TestHTTPExecStreams(t *testing.T) {
	url := httpServer(t)
	resp, err := http.Post(url+"/exec", "application/json", strings.NewReader(`{"command":"echo out; echo err >&2; exit 3"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			events[name] += v
		}
	}
	if !strings.Contains(events["stdout"], `"out\n"`) || !strings.Contains(events["stderr"], `"err\n"`) ||
		!strings.Contains(events["exit"], `"exit_code":3`) || !strings.Contains(events["exit"], `"usage"`) {
		t.Errorf("events %v", events)
	}
	resp, err = http.Post(url+"/exec", "application/json", strings.NewReader(`{"command":"true","timeout":5}`))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown field: %v %v", resp.StatusCode, err)
	}
}

// TestExecOfMissingProgramAnswersStartError: POST /exec of a program that
// cannot start closed the connection with no answer (the stream followed
// pipes the job never had); it answers an exit event with start_error.
func TestExecOfMissingProgramAnswersStartError(t *testing.T) {
	url := httpServer(t)
	resp, err := http.Post(url+"/exec", "application/json", strings.NewReader(`{"argv":["mcp-exec-no-such-program"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "event: exit") ||
		!strings.Contains(string(body), `"start_error":`) || !strings.Contains(string(body), "mcp-exec-no-such-program") {
		t.Errorf("%d %v %s", resp.StatusCode, err, body)
	}
}

// TestListenNeedsTokenOffLoopback: a server reachable from other machines
// without a token does not start.
func TestListenNeedsTokenOffLoopback(t *testing.T) {
	t.Parallel()
	if _, err := loadConfig([]string{"MCP_EXEC_LISTEN=0.0.0.0:8080"}); err == nil || !strings.Contains(err.Error(), "MCP_EXEC_TOKEN") {
		t.Errorf("0.0.0.0 without a token: %v", err)
	}
	for _, ok := range []string{"127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		if _, err := loadConfig([]string{"MCP_EXEC_LISTEN=" + ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if _, err := loadConfig([]string{"MCP_EXEC_LISTEN=0.0.0.0:8080", "MCP_EXEC_TOKEN=t"}); err != nil {
		t.Errorf("with a token: %v", err)
	}
}

// TestHTTPModernNotificationWithoutMeta: a 2026-07-28 client's
// notifications/cancelled carries the version header but no _meta and no
// session; it is accepted (it was refused 400, and the Go SDK closed).
func TestHTTPModernNotificationWithoutMeta(t *testing.T) {
	url := httpServer(t)
	resp, body := post(t, url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "notifications/cancelled"})
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("a modern notification: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPModernRunStreamsMessages: a 2026-07-28 sh_run that asks for info
// messages gets an SSE stream carrying its output as notifications/message,
// then its result.
func TestHTTPModernRunStreamsMessages(t *testing.T) {
	url := httpServer(t, "MCP_EXEC_TOOLS=shell")
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sh_run","arguments":{"command":"echo","args":["streamed"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}}}`
	resp, got := post(t, url, body, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sh_run"})
	message := strings.Index(got, `"method":"notifications/message"`)
	result := strings.Index(got, `"id":9`)
	if resp.Header.Get("Content-Type") != "text/event-stream" || message < 0 || result < message ||
		!strings.Contains(got, `"text":"streamed\n"`) {
		t.Errorf("%s: %s", resp.Header.Get("Content-Type"), got)
	}
}

// rawRequest sends head (the request line and headers, without the blank
// line that ends them) and then body, on a connection of its own, and
// returns the response with its body read; the whole exchange must end
// within timeout. A write the server cut short by answering first is no
// failure: the response is what counts.
func rawRequest(t *testing.T, url, head string, body []byte, timeout time.Duration) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = conn.Write(append([]byte(head+"\r\n\r\n"), body...)) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no response within %v: %v", strings.SplitN(head, "\r\n", 2)[0], timeout, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp, string(text)
}

// TestDeclaredOversizeBodyRefusedBeforeItIsRead: a request that declares
// a body over the limit in Content-Length is answered 413 at once, without
// a byte of the body sent (it waited for the body until the read time-out,
// 30 s, and got 400). A chunked body, of no declared length, is refused 413
// once the limit is read.
func TestDeclaredOversizeBodyRefusedBeforeItIsRead(t *testing.T) {
	url := httpServer(t)
	// Far below httpBodyTimeout: the answer must not wait for the body.
	const within = 10 * time.Second
	for _, path := range []string{"/mcp", "/exec"} {
		host := strings.TrimPrefix(url, "http://")
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d", path, host, 100_000_000)
		resp, text := rawRequest(t, url, head, nil, within)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(text, fmt.Sprint(maxLineBytes)) {
			t.Errorf("%s declaring 100 MB: %d %q, want 413 naming the limit", path, resp.StatusCode, text)
		}

		head = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked", path, host)
		chunk := fmt.Appendf(nil, "%x\r\n%s\r\n0\r\n\r\n", maxLineBytes+1, strings.Repeat(" ", maxLineBytes+1))
		if resp, text := rawRequest(t, url, head, chunk, within); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with a chunked body of %d bytes: %d %q, want 413", path, maxLineBytes+1, resp.StatusCode, text)
		}
	}
}

// TestIdleSweepSparesTheSessionARequestFound: the idle sweep cannot end a
// session between a request's lookup of it and the request's work in it
// (the request was answered -32800 "the server is shutting down", and a
// job it started could outlive its ended session). Once the request is
// done the idle session is swept, and its id is unknown.
func TestIdleSweepSparesTheSessionARequestFound(t *testing.T) {
	tr, url := httpTransportFor(t)
	resp, _ := post(t, url, initBody, nil)
	id := resp.Header.Get("Mcp-Session-Id")
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo found"}}}`
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Mcp-Session-Id", id)
	req, _, _ := decodeRequest([]byte(body))

	// The request finds its session; the sweep runs, every session past its
	// idle time; the request goes on in the session it found.
	hs, _, rerr := tr.sessionFor(httptest.NewRecorder(), r, req, false)
	if rerr != nil {
		t.Fatalf("the session of a fresh initialize: %v", rerr)
	}
	if taken := tr.takeIdle(time.Now().Add(time.Hour)); len(taken) != 0 {
		t.Fatalf("the sweep took %d sessions while a request was in the one it had found", len(taken))
	}
	reply := newResponseStream(req.m.id)
	hs.handle(req.m, req.era, reply)
	select {
	case <-reply.ready:
	case <-time.After(jobDeadline):
		t.Fatalf("no reply within %v", jobDeadline)
	}
	outs, _ := reply.take()
	var got string
	for _, out := range outs {
		got += string(out.msg)
	}
	if !strings.Contains(got, `found\\n`) {
		t.Fatalf("the request in the session it found: %s", got)
	}
	hs.release()

	if taken := tr.takeIdle(time.Now().Add(time.Hour)); len(taken) != 1 || taken[0] != hs {
		t.Fatalf("the sweep took %d sessions once the request was done; want the idle one", len(taken))
	}
	tr.srv.end(hs.ss)
	if resp, text := post(t, url, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, map[string]string{"Mcp-Session-Id": id}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a request on the swept session: %d %s, want 404", resp.StatusCode, text)
	}
}

// TestIdleSweepRacingRequests: requests of the modern era's shared session
// race a sweep that takes every session with nothing in flight, over and
// over: each request is served in full, none answered as if its session
// had ended under it. Four busy clients can keep the session in use for a
// whole round, so rounds repeat until the sweep took a session at least
// once: a round it never did proves nothing, but fails nothing either. On
// a loaded machine (a test run beside another) that can take many rounds:
// they go on for jobDeadline, and a run in which no sweep ever won skips.
func TestIdleSweepRacingRequests(t *testing.T) {
	tr, url := httpTransportFor(t)
	deadline := time.Now().Add(jobDeadline)
	for round := 1; ; round++ {
		if sweepRacingRound(t, tr, url) > 0 {
			return
		}
		if t.Failed() {
			return
		}
		if time.Now().After(deadline) {
			t.Skipf("the sweep took no session in %d rounds: it never raced a request, so this run proves nothing", round)
		}
	}
}

// sweepRacingRound runs one round of TestIdleSweepRacingRequests: 4
// clients make 40 requests each while a sweep takes idle sessions, and
// reports how many sessions the sweep took.
func sweepRacingRound(t *testing.T, tr *httpTransport, url string) int {
	headers := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute"}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo served"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	stop := make(chan struct{}) // closed when the requests are done: the sweep stops
	swept := make(chan int)     // carries how many sessions the sweep took
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swept <- n
				return
			default:
			}
			for _, hs := range tr.takeIdle(time.Now().Add(time.Hour)) {
				n++
				go tr.srv.end(hs.ss)
			}
			runtime.Gosched()
		}
	}()
	var clients sync.WaitGroup
	for c := 0; c < 4; c++ {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := 0; i < 40; i++ {
				// Not post: a client goroutine must not call t.Fatal.
				req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
				for k, v := range headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("a request racing the sweep: %v", err)
					return
				}
				text, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(text), `served\\n`) {
					t.Errorf("a request racing the sweep: %d %s", resp.StatusCode, text)
					return
				}
			}
		}()
	}
	clients.Wait()
	close(stop)
	return <-swept
}

// TestHTTPTerminalOfOneSessionNeverReachesAnothersJob: one session starts
// terminal jobs while another's jobs list their descriptors; no listing may
// show a terminal (a pty master or /dev/pts/N) or anything but 0, 1, 2 and
// ls's own. The descriptors were once made close-on-exec in a second step,
// which a concurrent fork could beat.
func TestHTTPTerminalOfOneSessionNeverReachesAnothersJob(t *testing.T) {
	t.Parallel()
	url := httpServer(t, "MCP_EXEC_MAX_JOBS=64")
	resp, _ := post(t, url, initBody, nil)
	terminals := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id")}
	resp, _ = post(t, url, initBody, nil)
	lister := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id")}
	stop := make(chan struct{}) // closed when the listings are done
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The blocking execute ends with its job, so terminals do not pile up.
			_, _ = post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"true","tty":true}}}`, terminals)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Second) // bounded by time: the machine's speed sets the count
	listings := 0
	for ; listings < 1000 && time.Now().Before(deadline); listings++ {
		_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"ls -l /proc/self/fd | grep -v -e ' [012] -> ' -e '/proc/' | grep -e '->' || true"}}}`, lister)
		if strings.Contains(body, "->") || !strings.Contains(body, `\"state\":\"success\"`) {
			t.Fatalf("listing %d shows a descriptor of another session's terminal: %s", listings, body)
		}
	}
	t.Logf("%d listings, none with a stray descriptor", listings)
}

// modernHeaders are the headers of a 2026-07-28 request for method.
func modernHeaders(method string) map[string]string {
	return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
}

// modernMeta is the _meta of a 2026-07-28 request, with more members.
func modernMeta(more string) string {
	return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + more + `}`
}

// TestHTTPRepliesNameTheClientsIDExactly: every reply names the request
// by the id its client sent, byte for byte (an integer past 2^64, a string
// with escapes that decode to other bytes), in a legacy session and in the
// modern era's shared one (where the session knows the request by an id of
// the server's own), as a JSON body and as the last event of a stream, for
// a result and for an error; an id that is no id (a fraction, an exponent,
// null) is refused 400 naming id null.
func TestHTTPRepliesNameTheClientsIDExactly(t *testing.T) {
	url := httpServer(t)
	resp, _ := post(t, url, initBody, nil)
	legacy := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id")}
	ids := []string{`7`, `-12`, `123456789012345678901234567890`, `"a\u0041\"\\\/\u00e9é<&>"`, `""`}
	for _, id := range ids {
		cases := []struct {
			name, body string
			headers    map[string]string
			status     int
			stream     bool
		}{
			{"legacy result", `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`, legacy, http.StatusOK, false},
			{"legacy stream", `{"jsonrpc":"2.0","id":` + id + `,"method":"ping","params":{"_meta":{"progressToken":1}}}`, legacy, http.StatusOK, true},
			{"legacy error", `{"jsonrpc":"2.0","id":` + id + `,"method":"no/such"}`, legacy, http.StatusOK, false},
			{"modern result", `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":` + modernMeta("") + `}}`,
				modernHeaders("tools/list"), http.StatusOK, false},
			{"modern stream", `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":` + modernMeta(`,"progressToken":"p"`) + `}}`,
				modernHeaders("tools/list"), http.StatusOK, true},
			{"modern unknown method", `{"jsonrpc":"2.0","id":` + id + `,"method":"no/such","params":{"_meta":` + modernMeta("") + `}}`,
				modernHeaders("no/such"), http.StatusNotFound, false},
		}
		for _, c := range cases {
			resp, got := post(t, url, c.body, c.headers)
			want := `{"jsonrpc":"2.0","id":` + id + `,`
			if c.stream {
				last := strings.LastIndex(got, "data: ")
				if resp.Header.Get("Content-Type") != "text/event-stream" || last < 0 {
					t.Errorf("id %s, %s: %s %q; want an event stream", id, c.name, resp.Header.Get("Content-Type"), got)
					continue
				}
				got = got[last+len("data: "):]
			}
			if resp.StatusCode != c.status || !strings.HasPrefix(got, want) {
				t.Errorf("id %s, %s: %d %q; want %d starting %q", id, c.name, resp.StatusCode, got, c.status, want)
			}
		}
	}
	for _, id := range []string{`1.0`, `1e3`, `null`} {
		resp, got := post(t, url, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`, legacy)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) {
			t.Errorf("id %s: %d %q; want 400, -32600 naming id null", id, resp.StatusCode, got)
		}
	}
}

// firstProgress posts body and returns the data of the first progress
// notification its event stream carries, then leaves (which cancels the
// request); it fails the test when none comes within jobDeadline.
func firstProgress(t *testing.T, url, body string, headers map[string]string) string {
	t.Helper()
	req := mcpRequest(t, url, body, headers)
	client := &http.Client{Timeout: jobDeadline}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && strings.Contains(data, `"notifications/progress"`) {
			return data
		}
	}
	t.Fatalf("no progress notification within %v (%s): %v", jobDeadline, resp.Header.Get("Content-Type"), lines.Err())
	return ""
}

// TestHTTPModernProgressTokenKeptExactly: a modern request's progress
// notifications carry its progressToken as the client wrote it. The
// transport used to re-encode a modern body to give it its own id, which
// escaped <, > and & in the token ("\u003c"): a client comparing bytes
// never matched its progress to its request.
func TestHTTPModernProgressTokenKeptExactly(t *testing.T) {
	url := httpServer(t, "MCP_EXEC_PROGRESS_INTERVAL=0.05")
	body := `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 30"},` +
		`"_meta":` + modernMeta(`,"progressToken":"<p&q>"`) + `}}`
	headers := modernHeaders("tools/call")
	headers["Mcp-Name"] = "execute"
	if got := firstProgress(t, url, body, headers); !strings.Contains(got, `"progressToken":"<p&q>"`) {
		t.Errorf("progress of a modern request: %s; want the token as sent", got)
	}
}

// TestHTTPProgressTokenOutsideMetaAsksNoStream: only _meta.progressToken
// asks for progress; a member of that name elsewhere in params did make
// the reply an event stream, searched for by bytes, with nothing before
// the reply. It is a JSON body, as for any request that asked for nothing.
func TestHTTPProgressTokenOutsideMetaAsksNoStream(t *testing.T) {
	url := httpServer(t)
	resp, _ := post(t, url, initBody, nil)
	legacy := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id")}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo plain"},"progressToken":1}}`
	resp, got := post(t, url, body, legacy)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(got, `plain\\n`) {
		t.Errorf("a call with progressToken outside _meta: %d %s %s; want a JSON body", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
}

// BenchmarkHTTPPost measures one POSTed request through the transport and
// the session (no process is spawned): a legacy ping and a modern
// server/discover, each with a small and a large params member.
func BenchmarkHTTPPost(b *testing.B) {
	cfg, err := loadConfig(append(testConfig().baseEnv, "MCP_EXEC_LISTEN=127.0.0.1:0", "MCP_EXEC_HTTP_AUTH=none"))
	if err != nil {
		b.Fatal(err)
	}
	srv := newServer(cfg)
	tr, err := openHTTP(srv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.shutdown(); tr.close() })
	w := httptest.NewRecorder()
	tr.post(w, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(initBody)))
	legacy := map[string]string{"Mcp-Session-Id": w.Header().Get("Mcp-Session-Id")}
	for _, size := range []int{100, 256 << 10} {
		pad := strings.Repeat("x", size)
		b.Run(fmt.Sprintf("legacy-%dB", size), func(b *testing.B) {
			benchPost(b, tr, `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":"`+pad+`"}}`, legacy)
		})
		b.Run(fmt.Sprintf("modern-%dB", size), func(b *testing.B) {
			benchPost(b, tr, `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{"pad":"`+pad+`","_meta":`+modernMeta("")+`}}`,
				modernHeaders("server/discover"))
		})
	}
}

// benchPost posts body with headers b.N times, each answered 200.
func benchPost(b *testing.B, tr *httpTransport, body string, headers map[string]string) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for i := 0; i < b.N; i++ {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		tr.post(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// TestHTTPJobIsNoClientOfItsServer: a job that reads the generated token
// and calls its own server over loopback (list_jobs in its client's
// session, a POST /exec) is refused with 403, naming its pid, whatever
// token it shows; the test's own client, outside the jobs, is still
// served with the same token. (A job could list, read and kill other
// clients' jobs through its server.)
func TestHTTPJobIsNoClientOfItsServer(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl")
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tr, url := guardedTransport(t)
	if tr.tokenPath == "" {
		t.Fatal("no token was generated")
	}
	auth := map[string]string{"Authorization": "Bearer " + string(tr.token)}
	resp, _ := post(t, url, initBody, auth)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	auth["Mcp-Session-Id"] = sid
	script := filepath.Join(t.TempDir(), "call-home.sh")
	err = os.WriteFile(script, []byte(fmt.Sprintf(`T=$(cat '%s')
'%s' -s -w ' status=%%{http_code}\n' -H "Authorization: Bearer $T" -H 'Mcp-Session-Id: %s' \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_jobs","arguments":{}}}' '%s/mcp'
'%s' -s -w ' status=%%{http_code}\n' -H "Authorization: Bearer $T" -d '{"command":"echo escaped-the-job"}' '%s/exec'
`, tr.tokenPath, curl, sid, url, curl, url)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sh `+script+`"}}}`, auth)
	var reply struct {
		Result struct {
			StructuredContent struct {
				Stdout struct{ Data string }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil {
		t.Fatalf("execute: %v: %s", err, body)
	}
	out := reply.Result.StructuredContent.Stdout.Data
	const refusal = "refused: this connection comes from a process of one of this server's own jobs (pid "
	if n := strings.Count(out, refusal); n != 2 || strings.Count(out, "status=403") != 2 ||
		strings.Contains(out, "job_id") || strings.Contains(out, "escaped-the-job") {
		t.Errorf("the job's calls home: %d refusals, want 2, each 403, nothing listed or run: %q", n, out)
	}
	resp, body = post(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_jobs","arguments":{}}}`, auth)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `\"jobs\"`) {
		t.Errorf("the test's own list_jobs after the job's: %d %s", resp.StatusCode, body)
	}
}
