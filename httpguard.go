package main

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
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

	"golang.org/x/sys/unix"
)

// The HTTP listener's guards that act before a handler runs: the bound
// address decides whether a token may be missing, a missing token is made
// and kept in a private file, the Host header must name this server,
// connections that have not shown a token are few and short-lived, and a
// connection from a process of one of the server's own jobs is refused
// (httppeer.go).

// httpTokenBytes is the size of a generated token's randomness: 256 bits.
const httpTokenBytes = 32

// checkBound refuses a listener without a token whose bound address other
// machines can reach: the name given (localhost, say) may have resolved to
// anything. Only the address actually bound counts.
func checkBound(cfg *config, bound *net.TCPAddr) error {
	if cfg.token != nil || bound.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("MCP_EXEC_LISTEN=%s bound %s, which other machines can reach, and no MCP_EXEC_TOKEN or MCP_EXEC_TOKEN_FILE is set: anyone reaching it could run commands; set a token, or listen on 127.0.0.1", cfg.listen, bound)
}

// httpTokenDir is where a generated token's file goes: mcp-exec under
// $XDG_RUNTIME_DIR when that is set, else under the user's cache
// directory ($XDG_CACHE_HOME, or ~/.cache; ~/Library/Caches on macOS).
func httpTokenDir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if !filepath.IsAbs(base) {
		var err error
		if base, err = os.UserCacheDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(base, "mcp-exec"), nil
}

// tokenFileOf names the file of the token a server with cfg uses: given
// (MCP_EXEC_TOKEN_FILE) when set, else the one it generates and keeps for
// its port. An error says why there is none: no HTTP, a token given
// itself, no token at all, or no fixed port.
func tokenFileOf(cfg *config, given string) (string, error) {
	switch {
	case given != "":
		return given, nil
	case cfg.listen == "":
		return "", errors.New("no --listen HOST:PORT (or MCP_EXEC_LISTEN): only an HTTP server has a token")
	case cfg.token != nil:
		return "", errors.New("MCP_EXEC_TOKEN gives the token itself: there is no file")
	case cfg.httpAuthNone:
		return "", errors.New("MCP_EXEC_HTTP_AUTH=none: the server has no token")
	}
	_, portText, err := net.SplitHostPort(cfg.listen)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port <= 0 {
		return "", fmt.Errorf("%s names no fixed port, and a generated token is kept per port", cfg.listen)
	}
	dir, err := httpTokenDir()
	if err != nil {
		return "", err
	}
	return httpTokenPath(dir, port), nil
}

// httpTokenPath is the file of the token generated for a listener on port.
func httpTokenPath(dir string, port int) string {
	return filepath.Join(dir, "http-"+strconv.Itoa(port)+".token")
}

// makeHTTPToken returns the token kept in httpTokenPath(dir, port) by an
// earlier start, so a client set up once keeps working, or makes a random
// one and writes it there, with a newline, readable by this user only.
// A kept file is reused only when it is a regular file of this user that
// no one else can read or write, holding one token as this function
// writes it; anything else is replaced. Removing the file asks for a new
// token at the next start. dir is made 0700 when missing; one that is a
// symlink, belongs to another user or is open to others is refused, since
// whoever controls it could read or replace the token. The file is
// written under a temporary name and renamed, so a reader never sees half
// a token and a stale file is replaced whole.
func makeHTTPToken(dir string, port int) (token []byte, path string, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, "", err
	}
	dfd, err := openPrivateDir(dir)
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(dfd)
	path = httpTokenPath(dir, port)
	if kept, ok := keptHTTPToken(dfd, filepath.Base(path)); ok {
		return kept, path, nil
	}
	raw := make([]byte, httpTokenBytes)
	_, _ = rand.Read(raw) // crypto/rand never fails on a supported system
	token = []byte(hex.EncodeToString(raw))
	tmp := filepath.Base(path) + ".tmp-" + randomID()
	if err := writeFileAt(dfd, tmp, append(token, '\n')); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return nil, "", fmt.Errorf("writing %s: %w", filepath.Join(dir, tmp), err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, filepath.Base(path)); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return nil, "", fmt.Errorf("renaming to %s: %w", path, err)
	}
	return token, path, nil
}

// keptHTTPToken reads the token an earlier start left in name, in the
// private directory dfd: ok only for a regular file of this user, mode
// 0600 or stricter, holding exactly a generated token and its newline.
func keptHTTPToken(dfd int, name string) (token []byte, ok bool) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, false // none, or a symlink: made anew
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() ||
		st.Mode&0o077 != 0 || st.Size != 2*httpTokenBytes+1 {
		return nil, false
	}
	b := make([]byte, st.Size)
	if n, err := io.ReadFull(f, b); err != nil || n != len(b) || b[len(b)-1] != '\n' {
		return nil, false
	}
	b = b[:len(b)-1]
	if _, err := hex.DecodeString(string(b)); err != nil || strings.ToLower(string(b)) != string(b) {
		return nil, false
	}
	return b, true
}

// openPrivateDir opens dir, not following a symlink, and checks that it
// is this user's and closed to everyone else.
func openPrivateDir(dir string) (int, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, fmt.Errorf("%s is a symlink or not a directory: refusing to keep a token there", dir)
	case err != nil:
		return -1, fmt.Errorf("opening %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat %s: %w", dir, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid || st.Mode&0o077 != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("%s belongs to uid %d with mode %#o; a token needs a directory of uid %d that no one else can open (mode 0700): refusing to keep it there", dir, st.Uid, st.Mode&0o777, uid)
	}
	return fd, nil
}

// writeFileAt creates name in the directory dfd, mode 0600, failing if it
// exists or is a symlink, and writes b to it.
func writeFileAt(dfd int, name string, b []byte) error {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Chmod(0o600); err != nil { // what the umask left is at most this; say it exactly
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// retryEINTR runs op again while it fails with EINTR.
func retryEINTR(op func() error) error {
	for {
		if err := op(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// hostGuard decides which Host headers a listener answers. A browser page
// of another site that makes its name resolve to this machine (DNS
// rebinding) sends that name as Host, so a loopback listener answers only
// loopback names and the names configured in MCP_EXEC_HTTP_HOSTS.
type hostGuard struct {
	on    bool                // check at all: the listener is loopback, or names are configured
	exact map[string]struct{} // lower-case host:port (or bare host for a default port) answered as is
	names map[string]struct{} // lower-case names, without brackets, answered at any port
	anyIP bool                // an IP literal is answered too (a non-loopback listener: probes, Services)
}

// newHostGuard is the guard of a listener bound to bound; tlsOn says the
// scheme (for the port a Host may leave out).
func newHostGuard(bound *net.TCPAddr, tlsOn bool, configured []string) *hostGuard {
	loopback := bound.IP.IsLoopback()
	g := &hostGuard{on: loopback || len(configured) > 0, exact: map[string]struct{}{}, names: map[string]struct{}{}, anyIP: !loopback}
	port := strconv.Itoa(bound.Port)
	defaultPort := map[bool]int{false: 80, true: 443}[tlsOn] == bound.Port
	for _, name := range []string{"localhost", "127.0.0.1", "::1", bound.IP.String()} {
		g.exact[net.JoinHostPort(name, port)] = struct{}{}
		if defaultPort {
			g.exact[bracketed(name)] = struct{}{}
		}
	}
	for _, entry := range configured {
		entry = strings.ToLower(entry)
		if _, _, err := net.SplitHostPort(entry); err == nil {
			g.exact[entry] = struct{}{}
		} else {
			g.names[strings.Trim(entry, "[]")] = struct{}{}
		}
	}
	return g
}

// bracketed is an IPv6 literal in brackets, anything else as it is.
func bracketed(name string) string {
	if strings.Contains(name, ":") {
		return "[" + name + "]"
	}
	return name
}

// allows reports whether a request with this Host header is answered. The
// common case, a client naming the address it connected to, is one map
// look-up.
func (g *hostGuard) allows(host string) bool {
	if !g.on {
		return true
	}
	if _, ok := g.exact[host]; ok {
		return true
	}
	host = strings.ToLower(host)
	if _, ok := g.exact[host]; ok {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if _, ok := g.names[name]; ok {
		return true
	}
	return g.anyIP && net.ParseIP(name) != nil
}

// refusal is the text of the 421 that answers a Host not served: what was
// refused, why, and what is served.
func (g *hostGuard) refusal(host string) string {
	return fmt.Sprintf("Host %q is not served here (a browser page may be reaching this server through a name of its own): this server answers localhost, 127.0.0.1 and [::1] at its port, its own address, and the names in MCP_EXEC_HTTP_HOSTS", clipText(host))
}

// connGuard is a listener that keeps connections which have not yet shown
// a valid token (pending ones) few: at most pendingMax in all and
// perAddrMax from one client address other than loopback. A new connection beyond either cap
// closes the oldest pending one (of that address, or of all), so a flood
// of idle or unauthenticated connections cannot hold every descriptor and
// a client with the token always gets in. Once a request on a connection
// is authorized it is no longer pending and no cap closes it.
type connGuard struct {
	net.Listener
	pendingMax, perAddrMax int

	mu      sync.Mutex     // guards pending, perAddr and every guardedConn's elem
	pending list.List      // of *guardedConn not yet authorized, oldest first
	perAddr map[string]int // pending connections by client address
}

// guardedConn is a connection accepted by a connGuard.
type guardedConn struct {
	net.Conn
	g         *connGuard
	addr      string        // the client's address, without the port
	elem      *list.Element // in g.pending while pending; nil after; guarded by g.mu
	authed    atomic.Bool   // a request on it was authorized
	closeOnce sync.Once     // closes Conn once, whether the server or a cap does it
	peer      peerVerdict   // whether its client is a process of one of the server's jobs, looked at once
}

// pendingCaps are a connGuard's caps under a descriptor limit of nofile:
// a quarter of the descriptors for pending connections (16 to 1024), an
// eighth of those (at least 4) from one address, leaving the rest to jobs
// and to connections that showed the token.
func pendingCaps(nofile uint64) (total, perAddr int) {
	total = int(min(max(nofile/4, 16), 1024))
	return total, max(total/8, 4)
}

// newConnGuard guards ln with caps from the process's descriptor limit.
func newConnGuard(ln net.Listener) *connGuard {
	var lim syscall.Rlimit
	nofile := uint64(1024)
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		nofile = uint64(lim.Cur)
	}
	total, perAddr := pendingCaps(nofile)
	return &connGuard{Listener: ln, pendingMax: total, perAddrMax: perAddr, perAddr: map[string]int{}}
}

// Accept accepts the next connection as pending. Out of descriptors, it
// closes the oldest pending connection, one per failed accept, and returns
// the error: http.Server retries after a growing pause (5 ms to 1 s), so
// the loop neither spins nor stops, and a connection with the token gets a
// descriptor once a flood ends or is shed.
func (g *connGuard) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			if victim := g.oldest(""); victim != nil {
				_ = victim.Close()
			}
		}
		return nil, err
	}
	addr, local := remoteHost(c.RemoteAddr())
	gc := &guardedConn{Conn: c, g: g, addr: addr}
	g.mu.Lock()
	var victim *guardedConn
	switch {
	case !local && g.perAddr[gc.addr] >= g.perAddrMax:
		victim = g.oldestLocked(gc.addr)
	case g.pending.Len() >= g.pendingMax:
		victim = g.oldestLocked("")
	}
	gc.elem = g.pending.PushBack(gc)
	g.perAddr[gc.addr]++
	g.mu.Unlock()
	if victim != nil {
		_ = victim.Close() // outside the lock: a close is a syscall
	}
	return gc, nil
}

// remoteHost is a client address without its port, and whether it is a
// loopback one: every local client has that address, so only the total
// cap tells them apart from a flood (a burst of local clients is not one).
func remoteHost(a net.Addr) (addr string, loopback bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		return string(ta.IP.To16()), ta.IP.IsLoopback()
	}
	return a.String(), false
}

// oldest takes the oldest pending connection (of addr; "": of any) off
// the pending list and returns it, or nil when there is none.
func (g *connGuard) oldest(addr string) *guardedConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.oldestLocked(addr)
}

// oldestLocked is oldest with g.mu held.
func (g *connGuard) oldestLocked(addr string) *guardedConn {
	for e := g.pending.Front(); e != nil; e = e.Next() {
		if gc := e.Value.(*guardedConn); addr == "" || gc.addr == addr {
			g.forgetLocked(gc)
			return gc
		}
	}
	return nil
}

// forgetLocked takes gc off the pending list, if it is there; g.mu held.
func (g *connGuard) forgetLocked(gc *guardedConn) {
	if gc.elem == nil {
		return
	}
	g.pending.Remove(gc.elem)
	gc.elem = nil
	if g.perAddr[gc.addr]--; g.perAddr[gc.addr] <= 0 {
		delete(g.perAddr, gc.addr)
	}
}

// pendingCount is the number of pending connections.
func (g *connGuard) pendingCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending.Len()
}

// authorize says a request on gc showed a valid token: no cap closes it
// from now on. Only the first call takes the lock.
func (gc *guardedConn) authorize() {
	if gc.authed.Load() {
		return
	}
	gc.authed.Store(true)
	gc.g.mu.Lock()
	gc.g.forgetLocked(gc)
	gc.g.mu.Unlock()
}

// Close closes the connection once and takes it off the pending list.
func (gc *guardedConn) Close() error {
	err := net.ErrClosed
	gc.closeOnce.Do(func() {
		gc.g.mu.Lock()
		gc.g.forgetLocked(gc)
		gc.g.mu.Unlock()
		err = gc.Conn.Close()
	})
	return err
}

// connKey is the context key of a request's *guardedConn.
type connKey struct{}

// withConn is http.Server's ConnContext: it gives each connection's
// requests their *guardedConn (under TLS, the one beneath).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// authorizeConn marks r's connection as one that showed a valid token.
func authorizeConn(r *http.Request) {
	if gc, ok := r.Context().Value(connKey{}).(*guardedConn); ok {
		gc.authorize()
	}
}

// jobPeerRefusal is why r's connection is not served because its client
// is, or cannot be told apart from, a process of one of this server's own
// jobs; "" when it is served (or no guard watches it). The look is made
// at the connection's first request and kept for its later ones.
func jobPeerRefusal(r *http.Request) string {
	gc, ok := r.Context().Value(connKey{}).(*guardedConn)
	if !ok {
		return ""
	}
	return gc.peer.refused(gc.Conn.LocalAddr(), gc.Conn.RemoteAddr())
}

// connAuthorized reports whether a request on r's connection showed a
// valid token (true for a connection no guard watches).
func connAuthorized(r *http.Request) bool {
	gc, ok := r.Context().Value(connKey{}).(*guardedConn)
	return !ok || gc.authed.Load()
}
