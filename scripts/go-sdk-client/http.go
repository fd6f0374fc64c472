package main

// The checks over mcp-exec's HTTP transport (go run . -http /path/to/mcp-exec):
// the SDK's StreamableClientTransport against a server of its own per check
// (mcp-exec --listen 127.0.0.1:0, its address read from stderr), every
// request carrying the bearer token through a header-adding RoundTripper.
// Revisions: the SDK's default (server/discover, must settle on 2026-07-28,
// sessionless), the unknown future one (-32022 over HTTP, retried), and
// 2025-11-25, 2025-06-18 and 2025-03-26 pinned (initialize, a session): each
// lists the tools and drives all seven as over stdio. Then, in the modern
// era, progress (execute `sleep 1` with a progress token under
// MCP_EXEC_PROGRESS_INTERVAL=0.2 gets progress notifications before its
// result) and cancellation (a blocking execute `sleep 30` whose context is
// cancelled after its first progress: the job is gone, its process ended).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const token = "secret"

// httpServer is a server started with --listen.
type httpServer struct {
	cmd      *exec.Cmd
	endpoint string
	mu       sync.Mutex
	stderr   bytes.Buffer // what it wrote after the address line
}

// startHTTP starts a server with MCP_EXEC_TOKEN and extra env set and waits
// for the line naming its address.
func startHTTP(bin string, extra ...string) (*httpServer, error) {
	s := &httpServer{cmd: exec.Command(bin, "--listen", "127.0.0.1:0")}
	s.cmd.Env = append(append(envWithoutOurs(), "MCP_EXEC_TOKEN="+token), extra...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		addr := regexp.MustCompile(`serving MCP on (http://\S+/mcp)`)
		for sc.Scan() {
			if m := addr.FindStringSubmatch(sc.Text()); m != nil && found != nil {
				found <- m[1]
				found = nil
				continue
			}
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
		if found != nil {
			close(found)
		}
	}()
	select {
	case url, ok := <-found:
		if !ok {
			s.stop()
			return nil, fmt.Errorf("the server exited before listening: %s", s.errText())
		}
		s.endpoint = url
		return s, nil
	case <-time.After(5 * time.Second):
		s.stop()
		return nil, fmt.Errorf("no \"serving MCP on\" line within 5 s: %s", s.errText())
	}
}

func (s *httpServer) errText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimSpace(s.stderr.String())
}

func (s *httpServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// bearer adds the token to every request and records each response's
// status and content type, by JSON-RPC method header when there is one.
type bearer struct {
	mu      sync.Mutex
	log     []string
	refused []string // 4xx/5xx answers (but GET's 405), in full
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	var reqBody []byte
	if r.Body != nil && r.Method == http.MethodPost {
		reqBody, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && res.StatusCode >= 400 && !(r.Method == http.MethodGet && res.StatusCode == http.StatusMethodNotAllowed) {
		// Keep what was refused, with the request's headers and body, for the failure message.
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		b.mu.Lock()
		b.refused = append(b.refused, fmt.Sprintf("%s [MCP-Protocol-Version %q Mcp-Method %q Mcp-Name %q Mcp-Session-Id %q] %s -> %d %s",
			r.Method, r.Header.Get("MCP-Protocol-Version"), r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name"),
			r.Header.Get("Mcp-Session-Id"), bytes.TrimSpace(reqBody), res.StatusCode, bytes.TrimSpace(body)))
		b.mu.Unlock()
	}
	if err == nil {
		b.mu.Lock()
		b.log = append(b.log, fmt.Sprintf("%s %s -> %d %s", r.Method, r.Header.Get("Mcp-Method"), res.StatusCode, res.Header.Get("Content-Type")))
		b.mu.Unlock()
	}
	return res, err
}

func (b *bearer) entries() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

func httpTransport(endpoint string, rt http.RoundTripper) mcp.Transport {
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}
}

func mainHTTP(bin string) int {
	failed := 0
	run := func(name string, f func() error) {
		if err := f(); err != nil {
			fmt.Printf("FAIL %s: %v\n", name, err)
			failed++
		}
	}
	for _, version := range []string{"", future, "2025-11-25", "2025-06-18", "2025-03-26"} {
		name := "http " + label(version)
		run(name, func() error {
			srv, err := startHTTP(bin)
			if err != nil {
				return err
			}
			defer srv.stop()
			if err := check(name, version, func() mcp.Transport { return httpTransport(srv.endpoint, &bearer{}) }); err != nil {
				return withStderr(err, srv)
			}
			return nil
		})
	}
	run("http modern progress", func() error { return checkProgress(bin) })
	run("http modern cancel", func() error { return checkCancel(bin) })
	if failed > 0 {
		return 1
	}
	return 0
}

func withStderr(err error, srv *httpServer) error {
	if t := srv.errText(); t != "" {
		return fmt.Errorf("%w (server stderr: %s)", err, strings.ReplaceAll(t, "\n", " | "))
	}
	return err
}

// progressClient connects to a fresh server (progress every 0.2 s) with the
// SDK's default (modern) and hands each progress notification to onProgress.
func progressClient(bin string, onProgress func(*mcp.ProgressNotificationParams)) (*httpServer, *mcp.ClientSession, *bearer, error) {
	srv, err := startHTTP(bin, "MCP_EXEC_PROGRESS_INTERVAL=0.2")
	if err != nil {
		return nil, nil, nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-check", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			onProgress(req.Params)
		},
	})
	rt := &bearer{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, httpTransport(srv.endpoint, rt), nil)
	if err != nil {
		srv.stop()
		return nil, nil, nil, withStderr(fmt.Errorf("connect: %w", err), srv)
	}
	if v := session.InitializeResult().ProtocolVersion; v != modern {
		session.Close()
		srv.stop()
		return nil, nil, nil, fmt.Errorf("negotiated %q, want %q", v, modern)
	}
	return srv, session, rt, nil
}

func checkProgress(bin string) error {
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	srv, session, rt, err := progressClient(bin, func(p *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer srv.stop()
	defer session.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"command": "sleep 1; echo slept"}}
	params.SetProgressToken("go-progress")
	res, err := session.CallTool(ctx, params)
	if err != nil {
		return withStderr(fmt.Errorf("execute: %w", err), srv)
	}
	if res.IsError {
		return fmt.Errorf("execute: %s", res.Content[0].(*mcp.TextContent).Text)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"slept\n"`) {
		return fmt.Errorf("execute: %s", text)
	}
	var sse bool
	for _, e := range rt.entries() {
		sse = sse || (strings.HasPrefix(e, "POST tools/call ->") && strings.Contains(e, "text/event-stream"))
	}
	if !sse {
		return fmt.Errorf("the call with a progress token was not answered as SSE: %v", rt.entries())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		return errors.New("no progress notification arrived")
	}
	for _, p := range got {
		if p.ProgressToken != "go-progress" {
			return fmt.Errorf("progress token %v, want go-progress", p.ProgressToken)
		}
	}
	fmt.Printf("ok http modern progress: execute {command:\"sleep 1; echo slept\"} with a progress token -> SSE response, "+
		"%d progress notification(s) (last: %q), then success\n", len(got), got[len(got)-1].Message)
	return nil
}

func checkCancel(bin string) error {
	dir, err := os.MkdirTemp("", "go-sdk-http-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var jobID string
	srv, session, rt, err := progressClient(bin, func(p *mcp.ProgressNotificationParams) {
		mu.Lock()
		if m := regexp.MustCompile(`job (\S+)`).FindStringSubmatch(p.Message); m != nil && jobID == "" {
			jobID = m[1]
		}
		mu.Unlock()
		cancel()
	})
	if err != nil {
		return err
	}
	defer srv.stop()
	defer session.Close()
	params := &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"command": "echo $$ > " + pidFile + "; exec sleep 30"}}
	params.SetProgressToken("go-cancel")
	t0 := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := session.CallTool(ctx, params)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		return errors.New("the call did not return within 10 s of starting (no progress, or the cancel was not honoured)")
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the cancelled call returned %v, want context.Canceled%s", err, rt.refusals())
	}
	mu.Lock()
	id := jobID
	mu.Unlock()
	if id == "" {
		return errors.New("the first progress message did not name the job")
	}
	fmt.Printf("ok http modern cancel: execute {command:\"sleep 30\"} whose context was cancelled after its first progress "+
		"(job %s, %d ms) -> context.Canceled\n", id, time.Since(t0).Milliseconds())

	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	gone := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			gone = true
			break
		}
	}
	if !gone {
		return fmt.Errorf("process %d of the cancelled job is still alive after 5 s", pid)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel2()
	res, err := session.CallTool(ctx2, &mcp.CallToolParams{Name: "status", Arguments: map[string]any{"job_id": id}})
	if err != nil {
		return fmt.Errorf("status: %w%s", err, rt.refusals())
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "unknown job_id") {
		return fmt.Errorf("status of the cancelled job: isError %v, %s", res.IsError, text)
	}
	res, err = session.CallTool(ctx2, &mcp.CallToolParams{Name: "list_jobs", Arguments: map[string]any{}})
	if err != nil {
		return fmt.Errorf("list_jobs: %w", err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"jobs":[]`) {
		return fmt.Errorf("list_jobs after the cancel: %s", text)
	}
	var cancelled []string
	for _, e := range rt.entries() {
		if strings.Contains(e, "notifications/cancelled") {
			cancelled = append(cancelled, e)
		}
	}
	how := "the request's stream closed, no notifications/cancelled"
	if len(cancelled) > 0 {
		how = "notifications/cancelled POSTed (" + strings.Join(cancelled, "; ") + ")"
	}
	fmt.Printf("ok http modern cancel: %s; then the job is gone: process %d ended, status {job_id:%s} -> isError \"unknown job_id\", list_jobs -> []\n", how, pid, id)
	return nil
}

// refusals describes the requests the server refused, for failure messages.
func (b *bearer) refusals() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.refused) == 0 {
		return ""
	}
	return " (server refused: " + strings.Join(b.refused, "; ") + ")"
}
