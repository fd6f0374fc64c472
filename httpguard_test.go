package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// guardedTransport starts the HTTP transport like httpTransportFor, with
// the settings exactly as given (no token is added or waived).
func guardedTransport(t *testing.T, settings ...string) (*httpTransport, string) {
	t.Helper()
	onLinux(t)
	cfg, err := loadConfig(append(testConfig().baseEnv, append([]string{"MCP_EXEC_LISTEN=127.0.0.1:0"}, settings...)...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.shell = "/bin/sh"
	srv := newServer(cfg)
	tr, err := openHTTP(srv)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = tr.server.Serve(tr.listener) }()
	t.Cleanup(func() {
		srv.shutdown()
		tr.close()
	})
	return tr, "http://" + tr.addr()
}

// getWith sends GET path with the Host and bearer token given ("": none).
func getWith(t *testing.T, url, path, host, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestListenNameResolvingOffLoopbackRefusedWithoutToken: a listen name
// that passes as loopback (localhost) but binds an address other machines
// reach is refused without a token: the bound address decides, not the
// name. (The server served such a listener with no token at all.)
func TestListenNameResolvingOffLoopbackRefusedWithoutToken(t *testing.T) {
	onLinux(t)
	for _, auth := range []string{"MCP_EXEC_HTTP_AUTH=none", "MCP_EXEC_HTTP_AUTH=token"} {
		cfg, err := loadConfig(append(testConfig().baseEnv, "MCP_EXEC_LISTEN=localhost:0", auth))
		if err != nil {
			t.Fatal(err)
		}
		cfg.listen = "0.0.0.0:0" // what localhost resolved to, as a hosts file may say
		tr, err := openHTTP(newServer(cfg))
		if err == nil {
			tr.close()
			t.Fatalf("%s: a listener on %s without a token opened", auth, tr.addr())
		}
		if !strings.Contains(err.Error(), "MCP_EXEC_TOKEN") || !strings.Contains(err.Error(), "0.0.0.0") {
			t.Errorf("%s: the refusal names neither the setting nor the address: %v", auth, err)
		}
	}
	// A token opens the same listener.
	cfg, err := loadConfig(append(testConfig().baseEnv, "MCP_EXEC_LISTEN=localhost:0", "MCP_EXEC_TOKEN=s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.listen = "0.0.0.0:0"
	tr, err := openHTTP(newServer(cfg))
	if err != nil {
		t.Fatalf("with a token: %v", err)
	}
	tr.close()
}

// TestHTTPWithoutTokenMakesAPrivateOne: a loopback server with no token
// configured makes one (it served every local user's commands): requests
// without it are 401, with it they pass; it sits in a 0600 file in a 0700
// directory, and the file goes when the server does.
func TestHTTPWithoutTokenMakesAPrivateOne(t *testing.T) {
	runtimeDir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
	var path string
	t.Cleanup(func() { // after the transport's own cleanup has closed it
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the token file outlived the server: %v", err)
		}
	})
	tr, url := guardedTransport(t)
	path = tr.tokenPath
	if tr.tokenPath != httpTokenPath(filepath.Join(runtimeDir, "mcp-exec"), tr.listener.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("token file %q, want it under %s named after the port", tr.tokenPath, runtimeDir)
	}
	b, err := os.ReadFile(tr.tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		t.Errorf("token %q is shorter than 128 bits in hex", token)
	}
	for path, want := range map[string]os.FileMode{tr.tokenPath: 0o600, filepath.Dir(tr.tokenPath): 0o700} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %#o", path, fi.Mode(), err, want)
		}
	}
	if resp, _ := getWith(t, url, "/metrics", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", resp.StatusCode)
	}
	resp, body := post(t, url, initBody, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, tr.tokenPath) {
		t.Errorf("initialize without the token: %d %q, want 401 naming the file", resp.StatusCode, body)
	}
	if resp, _ := post(t, url, initBody, map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize with the generated token: %d", resp.StatusCode)
	}
}

// TestHTTPTokenDirOfOthersRefused: a token is never written into a
// directory that is a symlink or open to other users.
func TestHTTPTokenDirOfOthersRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{open, link} {
		if _, path, err := makeHTTPToken(dir, 8080); err == nil {
			t.Errorf("%s: token written to %s", dir, path)
		}
	}
	if entries, _ := os.ReadDir(private); len(entries) != 0 {
		t.Errorf("the symlink's target got %v", entries)
	}
	if _, path, err := makeHTTPToken(private, 8080); err != nil || filepath.Dir(path) != private {
		t.Errorf("a private directory: %q %v", path, err)
	}
}

// TestHTTPTokenIsKeptAcrossStarts: a token made once is found again by
// the next start on the port, so a client set up once keeps working; a
// file that others may read, a symlink, or one holding anything but a
// token is replaced, never trusted.
func TestHTTPTokenIsKeptAcrossStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcp-exec")
	first, path, err := makeHTTPToken(dir, 8080)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := makeHTTPToken(dir, 8080)
	if err != nil || string(again) != string(first) {
		t.Fatalf("the next start made %q (%v), not the kept %q", again, err, first)
	}
	if other, _, _ := makeHTTPToken(dir, 8081); string(other) == string(first) {
		t.Error("another port shares the token")
	}
	spoil := map[string]func(){
		"open to others": func() { _ = os.Chmod(path, 0o644) },
		"not a token":    func() { _ = os.WriteFile(path, []byte("short\n"), 0o600) },
		"a symlink": func() {
			target := filepath.Join(t.TempDir(), "elsewhere")
			_ = os.WriteFile(target, append(first, '\n'), 0o600)
			_ = os.Remove(path)
			_ = os.Symlink(target, path)
		},
	}
	for what, do := range spoil {
		do()
		got, _, err := makeHTTPToken(dir, 8080)
		if err != nil || string(got) == string(first) || len(got) != 2*httpTokenBytes {
			t.Errorf("%s: reused or broken: %q %v", what, got, err)
		}
		if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: the file left is %v %v", what, st, err)
		}
		first, _, _ = makeHTTPToken(dir, 8080)
	}
}

// TestHTTPForeignHostRefused: a loopback server answers only loopback
// names, its own address and MCP_EXEC_HTTP_HOSTS; another Host (a DNS
// rebinding page's) is 421 naming the setting. It answered any Host.
func TestHTTPForeignHostRefused(t *testing.T) {
	tr, url := guardedTransport(t, "MCP_EXEC_HTTP_AUTH=none")
	port := tr.listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"evil.example:" + strconv.Itoa(port), "evil.example", "localhost.evil.example:" + strconv.Itoa(port), "192.0.2.1:" + strconv.Itoa(port)} {
		for _, path := range []string{"/metrics", "/healthz", "/mcp"} {
			resp, body := getWith(t, url, path, host, "")
			if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "MCP_EXEC_HTTP_HOSTS") {
				t.Errorf("Host %s %s: %d %q, want 421 naming MCP_EXEC_HTTP_HOSTS", host, path, resp.StatusCode, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + strconv.Itoa(port), "localhost:" + strconv.Itoa(port), "LocalHost:" + strconv.Itoa(port), "[::1]:" + strconv.Itoa(port)} {
		if resp, _ := getWith(t, url, "/metrics", host, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, resp.StatusCode)
		}
	}
	_, named := guardedTransport(t, "MCP_EXEC_HTTP_AUTH=none", "MCP_EXEC_HTTP_HOSTS=tools.example,Proxy.Example:8443")
	for host, want := range map[string]int{"tools.example": 200, "tools.example:9": 200, "proxy.example:8443": 200,
		"proxy.example:8444": 421, "evil.example": 421} {
		if resp, _ := getWith(t, named, "/metrics", host, ""); resp.StatusCode != want {
			t.Errorf("MCP_EXEC_HTTP_HOSTS, Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestHostGuardOffLoopback: a listener other machines reach needs a token,
// which is what stops a rebinding page there, so any Host is answered
// (Kubernetes probes name the pod's IP) until MCP_EXEC_HTTP_HOSTS is set;
// then names must be listed, while IP literals still pass.
func TestHostGuardOffLoopback(t *testing.T) {
	t.Parallel()
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, tc := range []struct {
		configured []string
		host       string
		want       bool
	}{
		{nil, "anything.example", true},
		{nil, "10.1.2.3:8080", true},
		{[]string{"mcp-exec.agents.svc"}, "mcp-exec.agents.svc:8080", true},
		{[]string{"mcp-exec.agents.svc"}, "10.1.2.3:8080", true},
		{[]string{"mcp-exec.agents.svc"}, "[fd00::1]:8080", true},
		{[]string{"mcp-exec.agents.svc"}, "evil.example:8080", false},
	} {
		if got := newHostGuard(wild, false, tc.configured).allows(tc.host); got != tc.want {
			t.Errorf("%v, Host %s: %v, want %v", tc.configured, tc.host, got, tc.want)
		}
	}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	if g := newHostGuard(lo, false, nil); !g.allows("localhost") || !g.allows("127.0.0.1:80") || g.allows("10.1.2.3:80") {
		t.Errorf("a loopback listener on port 80: localhost %v, 127.0.0.1:80 %v, 10.1.2.3:80 %v",
			g.allows("localhost"), g.allows("127.0.0.1:80"), g.allows("10.1.2.3:80"))
	}
}

// TestHTTPUnauthenticatedFloodLeavesRoomForTheToken: 300 connections
// that keep alive after a 401, and 300 that send nothing, leave no more
// than the pending cap open on the server, and a fresh connection with the
// token is served while they are all still open. (A 401 kept its
// connection for the 2-minute idle time-out, and silent ones were held
// until the header time-out: enough of them took every descriptor.)
func TestHTTPUnauthenticatedFloodLeavesRoomForTheToken(t *testing.T) {
	tr, url := guardedTransport(t, "MCP_EXEC_TOKEN=s3cret")
	tr.conns.mu.Lock()
	tr.conns.pendingMax, tr.conns.perAddrMax = 16, 8 // as under a descriptor limit of 64
	tr.conns.mu.Unlock()
	addr := tr.addr()
	const flood = 300
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for i := range 2 * flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if err := c.SetDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			continue // silent
		}
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("connection %d: %d, close %v; want 401 closing the connection", i, resp.StatusCode, resp.Close)
		}
	}
	if n := tr.conns.pendingCount(); n > 16 {
		t.Errorf("%d connections without a token are open, cap 16", n)
	}
	resp, body := getWith(t, url, "/metrics", "", "s3cret")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the token during the flood: %d %q", resp.StatusCode, body)
	}
	// Every connection but the newest few was closed by the server: a read
	// sees the end of the stream, not the deadline. The reads run at once,
	// so the open ones wait out one deadline together.
	var closed atomic.Int32
	var wg sync.WaitGroup
	readBy := time.Now().Add(2 * time.Second)
	for _, c := range conns {
		if err := c.SetReadDeadline(readBy); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if _, err := io.Copy(io.Discard, c); err == nil || errors.Is(err, syscall.ECONNRESET) {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := int(closed.Load()); n < 2*flood-16 {
		t.Errorf("the server closed %d of %d connections without a token, want all but the cap (16)", n, 2*flood)
	}
}

// emfileListener fails every Accept with EMFILE.
type emfileListener struct{ net.Listener }

func (emfileListener) Accept() (net.Conn, error) {
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}

// TestConnGuardShedsPendingOnEMFILE: out of descriptors, each failed
// accept closes the oldest connection without a token and returns an error
// http.Server retries after a pause (a temporary one), never the end of
// serving.
func TestConnGuardShedsPendingOnEMFILE(t *testing.T) {
	t.Parallel()
	g := &connGuard{Listener: emfileListener{}, pendingMax: 4, perAddrMax: 4, perAddr: map[string]int{}}
	a, b := net.Pipe()
	defer b.Close()
	gc := &guardedConn{Conn: a, g: g, addr: "x"}
	gc.elem = g.pending.PushBack(gc)
	g.perAddr["x"] = 1
	if err := b.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := g.Accept()
	var ne net.Error
	//lint:ignore SA1019 http.Server still decides on Temporary whether to retry an accept
	if !errors.As(err, &ne) || !ne.Temporary() {
		t.Fatalf("accept: %v, want a temporary error", err)
	}
	if g.pendingCount() != 0 {
		t.Errorf("the pending connection was not shed")
	}
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the shed connection is still open: %v", err)
	}
}

// addrConn is a connection from a given client address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// queueListener accepts the connections queued in it, in order.
type queueListener struct {
	net.Listener
	queue []net.Conn
}

func (l *queueListener) Accept() (net.Conn, error) {
	c := l.queue[0]
	l.queue = l.queue[1:]
	return c, nil
}

// TestConnGuardCapsPendingPerAddress: one remote address past its cap
// closes its own oldest pending connection, not another address's; local
// clients, who share one address, meet the total cap only; a connection
// that showed the token is never closed by a cap.
func TestConnGuardCapsPendingPerAddress(t *testing.T) {
	t.Parallel()
	ql := &queueListener{}
	g := &connGuard{Listener: ql, pendingMax: 6, perAddrMax: 2, perAddr: map[string]int{}}
	var peers []net.Conn
	from := func(ip string) *guardedConn {
		a, b := net.Pipe()
		peers = append(peers, b)
		t.Cleanup(func() { a.Close(); b.Close() })
		ql.queue = append(ql.queue, addrConn{a, &net.TCPAddr{IP: net.ParseIP(ip), Port: 1000 + len(peers)}})
		c, err := g.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*guardedConn)
	}
	isOpen := func(i int) bool {
		_ = peers[i].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := peers[i].Read(make([]byte, 1))
		return !errors.Is(err, io.EOF)
	}
	from("192.0.2.1").authorize() // 0: showed the token
	from("192.0.2.1")             // 1
	from("192.0.2.2")             // 2
	from("192.0.2.1")             // 3
	from("192.0.2.1")             // 4: 192.0.2.1's third pending: 1 goes
	for i, want := range []bool{true, false, true, true, true} {
		if isOpen(i) != want {
			t.Errorf("connection %d open: %v, want %v", i, !want, want)
		}
	}
	for range 4 {
		from("127.0.0.1") // 5-8: past the per-address cap, within the total
	}
	if n := g.pendingCount(); n != 6 {
		t.Fatalf("%d pending, want 6 (the total cap)", n)
	}
	from("127.0.0.1") // 9: past the total: the oldest pending (2) goes
	if isOpen(2) || !isOpen(0) || !isOpen(5) {
		t.Errorf("past the total cap: 2 open %v (want false), 0 open %v, 5 open %v (want true)", isOpen(2), isOpen(0), isOpen(5))
	}
}

// TestHTTPHostsSetting: MCP_EXEC_HTTP_HOSTS takes Host values, not URLs;
// MCP_EXEC_HTTP_AUTH is token or none, none never with a token.
func TestHTTPHostsSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     []string
		mention string // "": accepted
	}{
		{[]string{"MCP_EXEC_HTTP_HOSTS=tools.example,proxy.example:8443,[fd00::1]"}, ""},
		{[]string{"MCP_EXEC_HTTP_HOSTS=https://tools.example"}, "MCP_EXEC_HTTP_HOSTS"},
		{[]string{"MCP_EXEC_HTTP_HOSTS=tools.example,"}, "MCP_EXEC_HTTP_HOSTS"},
		{[]string{"MCP_EXEC_HTTP_AUTH=open"}, "MCP_EXEC_HTTP_AUTH"},
		{[]string{"MCP_EXEC_LISTEN=127.0.0.1:0", "MCP_EXEC_HTTP_AUTH=none", "MCP_EXEC_TOKEN=t"}, "MCP_EXEC_HTTP_AUTH=none"},
		{[]string{"MCP_EXEC_LISTEN=0.0.0.0:8080", "MCP_EXEC_HTTP_AUTH=none"}, "MCP_EXEC_TOKEN"},
	} {
		_, err := loadConfig(tc.env)
		switch {
		case tc.mention == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.mention != "" && (err == nil || !strings.Contains(err.Error(), tc.mention)):
			t.Errorf("%v: %v, want a refusal naming %s", tc.env, err, tc.mention)
		}
	}
}

// TestGeneratedTokenOffersTasksList: a generated token says who the client
// is as a configured one does, so tasks/list is offered over HTTP with it
// (it was offered only with a configured token).
func TestGeneratedTokenOffersTasksList(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tr, _ := httpTransportFor(t, "MCP_EXEC_HTTP_AUTH=token")
	if tr.token == nil {
		t.Fatal("no token was generated")
	}
	hs, err := tr.open("test")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.srv.end(hs.ss)
	if !hs.ss.tasksListable() {
		t.Fatal("a session under a generated token is not offered tasks/list")
	}
}
