package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// benchToken is the bearer token of the benchmarked server: every request
// carries it, so its check is part of what is measured.
const benchToken = "bench-token-0123456789abcdef"

// httpServer is mcp-exec serving HTTP on a free loopback port.
type httpServer struct {
	cmd    *exec.Cmd
	base   string
	client *http.Client
}

// launchHTTP starts the server with --listen and learns its address from
// the line it prints on stderr.
func launchHTTP(bin string) *httpServer {
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh", "MCP_EXEC_TOKEN="+benchToken)
	stderr, err := cmd.StderrPipe()
	check(err)
	check(cmd.Start())
	sc := bufio.NewScanner(stderr)
	var base string
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "serving MCP on "); ok {
			base = strings.TrimSuffix(strings.Fields(after)[0], "/mcp")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if base == "" {
		check(fmt.Errorf("the HTTP server did not say where it listens"))
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	return &httpServer{cmd: cmd, base: base, client: &http.Client{Transport: tr}}
}

func (h *httpServer) stop() {
	_ = h.cmd.Process.Signal(os.Interrupt)
	_ = h.cmd.Wait()
}

// initialize opens a session and returns its id.
func (h *httpServer) initialize() string {
	resp, _ := h.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`)
	return resp.Header.Get("Mcp-Session-Id")
}

// post sends one body to /mcp in session sid and reads the whole answer.
func (h *httpServer) post(sid, body string) (*http.Response, []byte) {
	req, err := http.NewRequest(http.MethodPost, h.base+"/mcp", strings.NewReader(body))
	check(err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+benchToken)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := h.client.Do(req)
	check(err)
	b, err := io.ReadAll(resp.Body)
	check(err)
	resp.Body.Close()
	return resp, b
}

// executeTrue times one blocking execute {"command":"true"} over HTTP.
func (h *httpServer) executeTrue(sid string, id int) (time.Duration, bool) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute","arguments":{"command":"true"}}}`, id)
	t := time.Now()
	resp, b := h.post(sid, body)
	return time.Since(t), resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`\"state\":\"success\"`))
}

func benchHTTPRoundTrip(bin string) row {
	// The same execute over stdio and over HTTP (a kept-alive connection,
	// 2025-03-26 so both carry the same reply), interleaved.
	h := launchHTTP(bin)
	defer h.stop()
	sid := h.initialize()
	s := launch(bin)
	defer s.stop()
	var overHTTP, overStdio []time.Duration
	for i := 0; i < *rounds; i++ {
		d, ok := h.executeTrue(sid, i+1)
		if !ok {
			check(fmt.Errorf("an HTTP execute failed"))
		}
		overHTTP = append(overHTTP, d)
		overStdio = append(overStdio, s.executeTrue(i))
	}
	v, f := median(overHTTP), median(overStdio)
	extra := v - f
	return row{Value: ms(v), Floor: ms(f), Unit: "ms", Ratio: float64(v) / float64(f), Target: "+<= 0.3 ms",
		Pass: extra <= 300*time.Microsecond, Note: fmt.Sprintf("%.3f ms more", ms(extra))}
}

func benchHTTPSessions(bin string) []row {
	// 100 sessions, each running 50 blocking executes one after another,
	// all at once: no call may fail; the latencies are reported.
	const sessions, calls = 100, 50
	h := launchHTTP(bin)
	defer h.stop()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = h.initialize()
	}
	var mu sync.Mutex // guards lat and failed
	var lat []time.Duration
	failed := 0
	var wg sync.WaitGroup
	for _, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				d, ok := h.executeTrue(sid, i+1)
				mu.Lock()
				lat = append(lat, d)
				if !ok {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	return []row{
		{Name: "http 100x50 errors", Value: float64(failed), Unit: "", Target: "0", Pass: failed == 0},
		{Name: "http 100x50 p50", Value: ms(p50), Unit: "ms", Target: "report", Pass: true},
		{Name: "http 100x50 p99", Value: ms(p99), Unit: "ms", Target: "report", Pass: true},
	}
}

func benchHTTPIdle(bin string) row {
	// 1,000 idle sessions: what each costs in resident memory.
	const sessions = 1000
	h := launchHTTP(bin)
	defer h.stop()
	h.initialize() // the first session's one-time costs are not a session's
	before := rssKiB(h.cmd.Process.Pid)
	for i := 0; i < sessions; i++ {
		h.initialize()
	}
	after := rssKiB(h.cmd.Process.Pid)
	each := (after - before) / sessions
	return row{Value: each, Unit: "KiB", Target: "<= 64 KiB", Pass: each <= 64}
}
