package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP transport: MCP over Streamable HTTP at /mcp, and the exec
// gateway's /healthz, /metrics and POST /exec. Each legacy client gets a
// session at initialize, named by an unguessable Mcp-Session-Id; modern
// requests carry none, their jobs belong to the credential. A reply goes
// back on its request's own response, which cancels it by going away.

// HTTP limits against slow or greedy clients.
const (
	httpHeaderTimeout = 10 * time.Second
	httpBodyTimeout   = 30 * time.Second
	httpIdleTimeout   = 2 * time.Minute
	httpShutdownGrace = 2 * time.Second
	httpWriteTimeout  = 30 * time.Second // a client that stops reading a stream is dropped after this
)

// httpTransport serves MCP and the gateway endpoints over HTTP.
type httpTransport struct {
	srv     *server
	cfg     *config      // its allowed browser origins guard every endpoint
	nextID  atomic.Int64 // numbers the server's own ids of modern requests
	execCfg *config      // the settings of POST /exec jobs: cfg, with usage reported

	mu       sync.Mutex              // guards sessions and modern
	sessions map[string]*httpSession // legacy sessions by Mcp-Session-Id
	modern   *httpSession            // the modern era's session of the one credential; nil until used

	server   *http.Server
	listener net.Listener
	done     chan struct{} // closed when the idle sweep must stop

	token     []byte     // the bearer token every endpoint needs; nil: none (MCP_EXEC_HTTP_AUTH=none)
	tokenPath string     // the file of a generated token, kept for the next start on a fixed port; "": none generated
	conns     *connGuard // caps the connections that have not shown the token
	hosts     *hostGuard // the Host headers answered
}

// httpSession is a session served over HTTP.
type httpSession struct {
	ss       *session
	dispatch sync.Mutex   // one handleDecoded at a time, as the session requires
	lastUsed atomic.Int64 // unix nanoseconds of the last request's end
	// active counts requests in flight. It goes up only in the lookup that
	// finds the session, under the sweep's lock: no sweep ends a found one.
	active atomic.Int32
}

// acquire counts one more request in flight on hs (nil: none); the caller
// holds httpTransport.mu.
func (hs *httpSession) acquire() *httpSession {
	if hs != nil {
		hs.active.Add(1)
	}
	return hs
}

// release ends a request acquire counted; its end is the session's last use.
func (hs *httpSession) release() {
	hs.lastUsed.Store(time.Now().UnixNano()) // before the count drops: a sweep that sees none in flight sees this use
	hs.active.Add(-1)
}

// openHTTP listens on cfg.listen; it fails when the address cannot be had,
// the address bound is reachable from other machines and no token is set,
// a token must be generated and cannot be kept, or the TLS pair cannot be
// loaded.
func openHTTP(srv *server) (*httpTransport, error) {
	cfg := srv.cfg
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	token, tokenPath, err := httpToken(cfg, bound)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if cfg.token == nil && token != nil {
		// A generated token names its holder as a configured one does: the
		// sessions see it (tasks/list is offered where a token says who asks).
		withToken := *cfg
		withToken.token = token
		cfg = &withToken
	}
	guard := newConnGuard(ln)
	ln = guard
	if cfg.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("MCP_EXEC_TLS_CERT/MCP_EXEC_TLS_KEY: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	}
	t := &httpTransport{srv: srv, cfg: cfg, listener: ln, sessions: map[string]*httpSession{}, done: make(chan struct{}),
		execCfg: cfg.withUsage(), // the exit event always says what the job used
		token:   token, tokenPath: tokenPath, conns: guard, hosts: newHostGuard(bound, cfg.tlsCert != "", cfg.httpHosts)}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", t.guard(t.serveMCP))
	mux.HandleFunc("/exec", t.guard(t.serveExec))
	mux.HandleFunc("/metrics", t.guardWith(t.serveMetrics, t.cfg.metricsToken))
	mux.HandleFunc("/healthz", t.serveHealth)
	t.server = &http.Server{Handler: countingHandler{peerChecked{hostChecked{t.hosts, mux}}}, ReadHeaderTimeout: httpHeaderTimeout,
		ReadTimeout: httpBodyTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: 64 << 10, ConnContext: withConn}
	return t, nil
}

// httpToken is the token of a listener bound to bound, and the file a
// generated one was written to: the configured token; none with
// MCP_EXEC_HTTP_AUTH=none (loopback only); else a new one in a private
// file, which clients read.
func httpToken(cfg *config, bound *net.TCPAddr) (token []byte, path string, err error) {
	if err := checkBound(cfg, bound); err != nil {
		return nil, "", err
	}
	if cfg.token != nil || cfg.httpAuthNone {
		return cfg.token, "", nil
	}
	dir, err := httpTokenDir()
	if err == nil {
		token, path, err = makeHTTPToken(dir, bound.Port)
	}
	if err != nil {
		return nil, "", fmt.Errorf("no MCP_EXEC_TOKEN or MCP_EXEC_TOKEN_FILE is set and a token could not be generated: %w; set MCP_EXEC_TOKEN_FILE, point XDG_RUNTIME_DIR at a directory of this user, or set MCP_EXEC_HTTP_AUTH=none to let any local user in", err)
	}
	return token, path, nil
}

// hostChecked refuses a request whose Host the guard does not answer,
// before any handler runs.
type hostChecked struct {
	hosts *hostGuard
	next  http.Handler
}

// ServeHTTP answers 421, closing the connection, when the Host is not
// one the guard allows, and passes the request on otherwise.
func (h hostChecked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hosts.allows(r.Host) {
		w.Header().Set("Connection", "close")
		httpFail(w, http.StatusMisdirectedRequest, "%s", h.hosts.refusal(r.Host))
		return
	}
	h.next.ServeHTTP(w, r)
}

// peerChecked refuses every request of a connection whose client is a
// process of one of this server's jobs (jobPeerRefusal), whatever its
// token and path, before any other guard or handler sees it.
type peerChecked struct{ next http.Handler }

// ServeHTTP answers 403 with a JSON-RPC error, closing the connection,
// when the connection's client is one of the server's jobs (or cannot be
// told apart from one), and passes the request on otherwise.
func (p peerChecked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if why := jobPeerRefusal(r); why != "" {
		w.Header().Set("Connection", "close")
		rpcFail(w, http.StatusForbidden, nil, newError(codeInvalidRequest, "%s", why))
		return
	}
	p.next.ServeHTTP(w, r)
}

// addr is the address the transport listens on.
func (t *httpTransport) addr() string { return t.listener.Addr().String() }

// serveUntilDone serves until a signal arrives on stop or the listener
// fails, and says which.
func (t *httpTransport) serveUntilDone(stop <-chan os.Signal) string {
	failed := make(chan error, 1) // carries why Serve returned
	go func() { failed <- t.server.Serve(t.listener) }()
	go t.sweepIdle()
	select {
	case sig := <-stop:
		return "signal " + sig.String()
	case err := <-failed:
		return fmt.Sprintf("listener: %v", err)
	}
}

// close stops accepting and ends the connections; the server's shutdown
// has already answered every request in flight.
func (t *httpTransport) close() {
	close(t.done)
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
	defer cancel()
	if t.server.Shutdown(ctx) != nil {
		_ = t.server.Close() // past the grace: drop what is left
	}
	// A generated token's file stays: the next start on the port reuses
	// it, so clients set up with it keep working. A port the kernel
	// picked is not asked for again: its file would only pile up.
	if t.tokenPath != "" && listensOnAnyPort(t.cfg.listen) {
		_ = os.Remove(t.tokenPath)
	}
}

// listensOnAnyPort reports whether listen asks for port 0, a port the
// kernel picks at each start.
func listensOnAnyPort(listen string) bool {
	_, port, err := net.SplitHostPort(listen)
	return err == nil && (port == "0" || port == "")
}

// guard checks a request's Origin and bearer token before h sees it. A
// refused request's connection closes after the answer, so refusals hold
// no descriptor; an authorized one's is spared by the connection caps.
func (t *httpTransport) guard(h http.HandlerFunc) http.HandlerFunc { return t.guardWith(h, nil) }

// guardWith is guard where also, when set, the token alsoToken opens h
// (the metrics token opens /metrics and nothing else).
func (t *httpTransport) guardWith(h http.HandlerFunc, alsoToken []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(t.cfg.allowedOrigins, o) {
			w.Header().Set("Connection", "close")
			httpFail(w, http.StatusForbidden, "origin %q is not allowed (MCP_EXEC_ALLOWED_ORIGINS)", clipText(o))
			return
		}
		if !t.authorized(r, t.token) && (alsoToken == nil || !t.authorized(r, alsoToken)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-exec"`)
			w.Header().Set("Connection", "close")
			httpFail(w, http.StatusUnauthorized, "%s", t.tokenHint())
			return
		}
		authorizeConn(r)
		h(w, r)
	}
}

// tokenHint is a 401's text: which token is wanted, and where it is.
func (t *httpTransport) tokenHint() string {
	if t.tokenPath != "" {
		return "a bearer token is required: Authorization: Bearer <the token in " + t.tokenPath + ", readable by the server's user only>"
	}
	return "a bearer token is required: Authorization: Bearer <MCP_EXEC_TOKEN>"
}

// authorized reports whether r carries token as its bearer token, compared
// in constant time; any request is, when token is nil. A token anywhere
// else (the query string) does not count.
func (t *httpTransport) authorized(r *http.Request, token []byte) bool {
	if token == nil {
		return true
	}
	h := r.Header.Get("Authorization")
	const scheme = "Bearer " // the scheme's name is case-insensitive
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(scheme):]), token) == 1
}

// httpFail answers a plain-text error.
func httpFail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, format+"\n", args...)
}

// rpcFail answers a JSON-RPC error with an HTTP status.
func rpcFail(w http.ResponseWriter, status int, id json.RawMessage, err *rpcError) {
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(encodeReply(id, replyShape{}, nil, err))
}

// serveMCP is the Streamable HTTP endpoint.
func (t *httpTransport) serveMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		t.post(w, r)
	case http.MethodDelete:
		t.deleteSession(w, r)
	default:
		// No server-initiated stream: the server sends nothing outside a
		// request's own response.
		w.Header().Set("Allow", "POST, DELETE")
		httpFail(w, http.StatusMethodNotAllowed, "use POST (and DELETE to end a session); this server opens no GET stream")
	}
}

// readBody reads r's body, of at most maxLineBytes; tooLarge says it is
// longer. A declared Content-Length over it is refused before a byte is
// read (the body may come slowly or never); a chunked one is cut there.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, tooLarge bool, err error) {
	if r.ContentLength > maxLineBytes {
		return nil, true, nil
	}
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxLineBytes))
	var tooBig *http.MaxBytesError
	return body, errors.As(err, &tooBig), err
}

// post handles one JSON-RPC message. Its body is decoded here, once, and
// its era chosen once; the session is handed the decoded message.
func (t *httpTransport) post(w http.ResponseWriter, r *http.Request) {
	body, tooLarge, err := readBody(w, r)
	switch {
	case tooLarge:
		rpcFail(w, http.StatusRequestEntityTooLarge, nil, newError(codeInvalidRequest, "invalid request: the body exceeds %d bytes", maxLineBytes))
		return
	case err != nil:
		httpFail(w, http.StatusBadRequest, "reading the body: %v", err)
		return
	}
	req, replyID, rerr := decodeRequest(body)
	if rerr != nil {
		rpcFail(w, http.StatusBadRequest, replyID, rerr)
		return
	}
	m := req.m
	if req.era.rerr != nil {
		rpcFail(w, http.StatusBadRequest, m.id, req.era.rerr)
		return
	}
	modern := req.era.modern
	if !modern && m.id == nil && r.Header.Get("Mcp-Session-Id") == "" &&
		slices.Contains(modernVersions, r.Header.Get("MCP-Protocol-Version")) {
		modern = true // a modern notification (notifications/cancelled) carries no _meta, only the header
	}
	hs, status, rerr := t.sessionFor(w, r, req, modern)
	if rerr != nil {
		rpcFail(w, status, m.id, rerr)
		return
	}
	defer hs.release()
	if m.id == nil { // a notification or a response: nothing comes back
		if !(modern && m.method == "notifications/cancelled") {
			// A modern cancellation names the client's id, which other clients
			// may use too: such a request is cancelled by closing its response.
			hs.handle(m, req.era, discard{})
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := newResponseStream(m.id) // the reply names the id the client gave, byte for byte
	if modern {
		// Every client's modern requests share one session: each gets an id
		// of the server's own there, so clients' ids never collide.
		m.id = t.ownID()
	}
	hs.handle(m, req.era, reply)
	t.answer(w, r, hs, m.id, reply, modern, req.streams(modern))
}

// httpRequest is a POSTed message, decoded once: what the transport reads
// of it, and what it hands the session.
type httpRequest struct {
	m      message
	era    eraChoice
	params map[string]json.RawMessage // m's params, split; nil when absent or not an object
	meta   map[string]json.RawMessage // params' _meta, split; nil when absent or not an object
}

// decodeRequest decodes a POSTed body; on failure, the error and the id to
// send it with, as decodeMessage says.
func decodeRequest(body []byte) (httpRequest, json.RawMessage, *rpcError) {
	m, replyID, rerr := decodeMessage(body)
	if rerr != nil {
		return httpRequest{}, replyID, rerr
	}
	req := httpRequest{m: m, era: chooseEra(m.params)}
	req.params, _ = decodeObject(m.params) // not an object: the session's checks answer it
	req.meta, _ = decodeObject(req.params["_meta"])
	return req, nil, nil
}

// streams says whether the request asked for what comes before its reply
// (progress, or a modern request's log messages), which an event stream
// carries to a client that accepts one.
func (req httpRequest) streams(modern bool) bool {
	_, progress := req.meta["progressToken"]
	_, logs := req.meta[metaLogLevel]
	return progress || modern && logs
}

// ownID is an id unique in this server, for a modern request in the
// shared session.
func (t *httpTransport) ownID() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`"mcp-exec-%d"`, t.nextID.Add(1)))
}

// sessionFor finds the session of request req, or makes one for initialize,
// acquired for it; or else the error to answer, with its HTTP status.
func (t *httpTransport) sessionFor(w http.ResponseWriter, r *http.Request, req httpRequest, modern bool) (*httpSession, int, *rpcError) {
	m := req.m
	if modern {
		if rerr := checkModernHeaders(r, req); m.id != nil && rerr != nil {
			return nil, http.StatusBadRequest, rerr
		}
		hs, rerr := t.modernSession()
		return hs, http.StatusServiceUnavailable, rerr
	}
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" && m.method != "initialize" && !slices.Contains(supportedVersions, v) {
		return nil, http.StatusBadRequest, newError(codeInvalidRequest, "invalid request: MCP-Protocol-Version %q is not one of %s", clipText(v), strings.Join(supportedVersions, ", "))
	}
	if m.method == "initialize" {
		hs, id, rerr := t.newSession()
		if rerr == nil {
			w.Header().Set("Mcp-Session-Id", id)
		}
		return hs, http.StatusServiceUnavailable, rerr
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil, http.StatusBadRequest, newError(codeInvalidRequest, "invalid request: Mcp-Session-Id is required (initialize first)")
	}
	t.mu.Lock()
	hs := t.sessions[id].acquire()
	t.mu.Unlock()
	if hs == nil {
		// Another client's id answers exactly as one never issued.
		return nil, http.StatusNotFound, newError(codeInvalidRequest, "invalid request: unknown or expired session; initialize again")
	}
	return hs, 0, nil
}

// checkModernHeaders checks the headers a 2026-07-28 request must carry
// against its body.
func checkModernHeaders(r *http.Request, req httpRequest) *rpcError {
	m := req.m
	var version string
	_ = json.Unmarshal(req.meta[metaProtocolVersion], &version) // the era's choice checked it
	if got := r.Header.Get("MCP-Protocol-Version"); got != version {
		return newError(codeHeaderMismatch, "header mismatch: MCP-Protocol-Version %q, _meta says %q", clipText(got), version)
	}
	if got := r.Header.Get("Mcp-Method"); got != m.method {
		return newError(codeHeaderMismatch, "header mismatch: Mcp-Method %q, the body's method is %q", clipText(got), clipText(m.method))
	}
	if m.method == "tools/call" {
		var name string
		_ = json.Unmarshal(req.params["name"], &name)
		if got := r.Header.Get("Mcp-Name"); got != name {
			return newError(codeHeaderMismatch, "header mismatch: Mcp-Name %q, the tool is %q", clipText(got), clipText(name))
		}
	}
	return nil
}

// newSession opens a legacy session under a fresh unguessable id, acquired
// for the initialize that opens it. One lock covers the count and the
// adding, so concurrent initializes cannot all take the last free place.
func (t *httpTransport) newSession() (*httpSession, string, *rpcError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg.maxSessions > 0 && len(t.sessions) >= t.cfg.maxSessions {
		return nil, "", newError(codeInternal, "too many sessions: MCP_EXEC_MAX_SESSIONS is %d; end one (DELETE /mcp) or wait for an idle one to expire", t.cfg.maxSessions)
	}
	hs, err := t.open("http")
	if err != nil {
		return nil, "", newError(codeInternal, "%v", err)
	}
	id := randomID()
	t.sessions[id] = hs
	return hs.acquire(), id, nil
}

// modernSession is the session of the modern era's requests, acquired for
// one: one per credential, and this server knows one credential.
func (t *httpTransport) modernSession() (*httpSession, *rpcError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.modern == nil {
		hs, err := t.open("http-modern")
		if err != nil {
			return nil, newError(codeInternal, "%v", err)
		}
		t.modern = hs
	}
	return t.modern.acquire(), nil
}

// open opens a server session, of the kind named, whose jobs have
// unguessable ids and count toward MCP_EXEC_MAX_JOBS with every other
// session's.
func (t *httpTransport) open(kind string) (*httpSession, error) {
	ss, err := t.srv.openShared(t.cfg, kind, discard{})
	if err != nil {
		return nil, err
	}
	ss.quietCancel = true // no 1.0 client to stay compatible with over HTTP
	hs := &httpSession{ss: ss}
	hs.lastUsed.Store(time.Now().UnixNano())
	return hs, nil
}

// handle passes one decoded message, of era era, to the session.
func (hs *httpSession) handle(m message, era eraChoice, sink replySink) {
	hs.dispatch.Lock()
	defer hs.dispatch.Unlock()
	hs.ss.handleDecoded(m, era, sink)
}

// answer writes the reply to the request the session knows by id, of the
// modern era or not, as JSON; or, when stream (it asked for progress or
// messages) and the client accepts one, as an event stream after them. A
// client that goes away cancels it.
func (t *httpTransport) answer(w http.ResponseWriter, r *http.Request, hs *httpSession, id json.RawMessage, reply *responseStream, modern, stream bool) {
	stream = stream && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	rc := http.NewResponseController(w)
	if stream {
		beginEventStream(w)
		_ = rc.Flush() // the client knows at once that its request is under way
	}
	for {
		select {
		case <-r.Context().Done():
			hs.ss.cancelID(id, true) // nobody is there to read a reply
			reply.end()
			return
		case <-reply.abandoned:
			if !stream {
				w.WriteHeader(http.StatusNoContent) // cancelled: MCP sends no reply, and the response ends
			}
			return
		case <-reply.ready:
		}
		outs, handed := reply.take()
		for _, out := range outs {
			httpReplyBytes.Add(int64(len(out.msg)))
			var err error
			switch {
			case stream:
				_ = rc.SetWriteDeadline(time.Now().Add(httpWriteTimeout))
				if _, err = fmt.Fprintf(w, "event: message\ndata: %s\n\n", bytes.TrimSuffix(out.msg, []byte("\n"))); err == nil {
					err = rc.Flush()
				}
			case out.final:
				w.Header().Set("Content-Type", "application/json")
				// Said before the flush below, which would otherwise make the
				// response chunked.
				w.Header().Set("Content-Length", strconv.Itoa(len(out.msg)))
				w.WriteHeader(replyStatus(out.code, modern))
				if _, err = w.Write(out.msg); err == nil {
					err = rc.Flush() // now, not after the handler: its error decides the handoff
				}
			}
			if out.final {
				settleUnlessGone(r.Context(), err, handed)
				return
			}
		}
	}
}

// replyStatus is the HTTP status of a JSON reply whose error has code
// (0: a result): 200, except that the modern era answers an unknown
// method 404.
func replyStatus(code int, modern bool) int {
	if modern && code == codeNoMethod {
		return http.StatusNotFound
	}
	return http.StatusOK
}

// outgoing is one message of a request's response, encoded once.
type outgoing struct {
	msg   []byte // the whole message, ending in a newline
	final bool   // the request's reply: nothing follows it
	code  int    // a final reply's JSON-RPC error code; 0 for a result
}

// responseStream carries what a session sends for one request: progress
// notifications, then the reply. send never blocks.
type responseStream struct {
	clientID json.RawMessage // the id the reply names: the client's own, byte for byte

	mu        sync.Mutex    // guards queue, handoff and ended
	queue     []outgoing    // messages not yet written
	handoff   *handoff      // what the queued reply delivered
	ended     bool          // the response is over: a reply now can reach nobody
	ready     chan struct{} // 1-buffered: the queue may have messages
	abandoned chan struct{} // closed when no reply will come: the request was cancelled
	once      sync.Once     // closes abandoned once
}

// newResponseStream returns an empty stream for the request its client
// calls clientID.
func newResponseStream(clientID json.RawMessage) *responseStream {
	return &responseStream{clientID: clientID, ready: make(chan struct{}, 1), abandoned: make(chan struct{})}
}

// abandon says the request was cancelled and gets no reply.
func (s *responseStream) abandon() { s.once.Do(func() { close(s.abandoned) }) }

// send queues a message that delivers nothing (a notification).
func (s *responseStream) send(msg []byte) { s.queueOut(outgoing{msg: msg}, nil) }

// sendParts encodes the reply, naming the client's id, and queues it; what
// it delivered (h) is settled once the response carried it to a client
// still there, and given back otherwise.
func (s *responseStream) sendParts(r replyParts, h *handoff) {
	code := 0
	if r.err != nil {
		code = rpcErrorOf(r.err).Code
	}
	msg := encodeReply(s.clientID, r.shape, r.result, r.err)
	s.queueOut(outgoing{msg: msg, final: true, code: code}, h)
}

// queueOut queues out, with h, what a final reply delivered (nil: nothing).
func (s *responseStream) queueOut(out outgoing, h *handoff) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		h.giveBack() // the client left before its reply was made
		return
	}
	s.queue = append(s.queue, out)
	if h != nil {
		s.handoff = h
	}
	s.mu.Unlock()
	nudge(s.ready)
}

// take returns and clears the queued messages, and the handoff of the
// reply among them.
func (s *responseStream) take() ([]outgoing, *handoff) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, h := s.queue, s.handoff
	s.queue, s.handoff = nil, nil
	return q, h
}

// end says the response is over without a reply written: a reply queued,
// or queued later, gives back what it delivered.
func (s *responseStream) end() {
	s.mu.Lock()
	s.ended = true
	h := s.handoff
	s.handoff = nil
	s.mu.Unlock()
	h.giveBack()
}

// discard is a replySink for messages nobody reads.
type discard struct{}

// send drops msg.
func (discard) send([]byte) {}

// deleteSession ends a legacy session and tears its jobs down.
func (t *httpTransport) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	t.mu.Lock()
	hs := t.sessions[id]
	delete(t.sessions, id)
	t.mu.Unlock()
	if hs == nil {
		httpFail(w, http.StatusNotFound, "unknown or expired session")
		return
	}
	t.srv.end(hs.ss)
	w.WriteHeader(http.StatusNoContent)
}

// sweepIdle ends sessions idle for longer than MCP_EXEC_SESSION_IDLE, with
// their jobs, until the transport closes.
func (t *httpTransport) sweepIdle() {
	idle := t.cfg.sessionIdle
	if idle <= 0 {
		return
	}
	tick := time.NewTicker(min(idle/4+time.Millisecond, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		for _, hs := range t.takeIdle(time.Now().Add(-idle)) {
			go t.srv.end(hs.ss)
		}
	}
}

// takeIdle removes, and returns, the sessions with no request in flight
// (see httpSession.active) whose last request ended before cutoff.
func (t *httpTransport) takeIdle(cutoff time.Time) []*httpSession {
	idle := func(hs *httpSession) bool { return hs.active.Load() == 0 && hs.lastUsed.Load() < cutoff.UnixNano() }
	var taken []*httpSession
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, hs := range t.sessions {
		if idle(hs) {
			delete(t.sessions, id)
			taken = append(taken, hs)
		}
	}
	if hs := t.modern; hs != nil && idle(hs) {
		t.modern = nil
		taken = append(taken, hs)
	}
	return taken
}

// serveHealth says whether the server accepts work; it needs no token. A
// connection that has shown none is closed after the answer (probes open
// one each time), so health checks cannot pile up idle descriptors.
func (t *httpTransport) serveHealth(w http.ResponseWriter, r *http.Request) {
	if t.authorized(r, t.token) {
		authorizeConn(r)
	} else if !connAuthorized(r) {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "application/json")
	if t.srv.isClosing() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"shutting down"}`+"\n")
		return
	}
	fmt.Fprintf(w, `{"status":"ok","sessions":%d,"running_jobs":%d,"tree":%q}`+"\n", t.sessionCount(), t.srv.figures().sharedJobs, treeInForce())
}

// sessionCount is the number of open legacy sessions.
func (t *httpTransport) sessionCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// serveMetrics writes the Prometheus text format.
func (t *httpTransport) serveMetrics(w http.ResponseWriter, r *http.Request) {
	f := t.srv.figures()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	writeMetrics(w, []metric{
		{"mcp_exec_sessions", "Open legacy MCP sessions over HTTP.", "gauge", float64(t.sessionCount())},
		{"mcp_exec_running_jobs", "Jobs running in HTTP sessions and /exec.", "gauge", float64(f.sharedJobs)},
		{"mcp_exec_resident_bytes", "Resident memory of the server process.", "gauge", float64(f.residentBytes)},
		{"mcp_exec_open_fds", "Open file descriptors of the server process.", "gauge", float64(f.openFds)},
	})
}

// serveExec runs one command in a session of its own and streams its
// output as server-sent events (runExecStream); a client leaving kills it.
func (t *httpTransport) serveExec(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		httpFail(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	body, tooLarge, err := readBody(w, r)
	switch {
	case tooLarge:
		httpFail(w, http.StatusRequestEntityTooLarge, "the body exceeds %d bytes", maxLineBytes)
		return
	case err != nil:
		httpFail(w, http.StatusBadRequest, "invalid body: %v", err)
		return
	}
	ss, err := t.srv.openShared(t.execCfg, "http-exec", discard{})
	if err != nil {
		httpFail(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	defer t.srv.end(ss)
	sink := &sseSink{w: w}
	err = ss.streamExec(r.Context(), body, sink)
	switch {
	case err == nil || sink.begun:
	case errors.Is(err, errInvalid):
		httpFail(w, http.StatusBadRequest, "invalid body: %v", err)
	default:
		httpFail(w, http.StatusForbidden, "%v", err)
	}
}

// sseSink writes a streamed exec's events as one server-sent event stream.
type sseSink struct {
	w     http.ResponseWriter
	begun bool // the status line and headers went out
}

// begin starts the event stream; its caller sends the first event next.
func (s *sseSink) begin() {
	beginEventStream(s.w)
	s.begun = true
}

// beginEventStream sends the status and headers of a server-sent event
// stream.
func beginEventStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// event writes one server-sent event. A client that stops reading is
// dropped once a write has waited httpWriteTimeout, ending the stream.
func (s *sseSink) event(name string, data any) bool {
	b, _ := json.Marshal(data) // cannot fail: strings and numbers
	_ = http.NewResponseController(s.w).SetWriteDeadline(time.Now().Add(httpWriteTimeout))
	_, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	return err == nil
}

// flush pushes the events written so far to the client.
func (s *sseSink) flush() { _ = http.NewResponseController(s.w).Flush() }

// countingHandler counts every response by status, for /metrics.
type countingHandler struct{ next http.Handler }

// ServeHTTP serves the request and counts its response's status.
func (c countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	c.next.ServeHTTP(rec, r)
	countResponse(rec.code)
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

// WriteHeader records code and writes it.
func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath, to flush
// event streams and set write deadlines.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
