package main

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
)

// connKey is the request context's key for the connection it came on.
type connKey struct{}

// rememberConn is http.Server's ConnContext: each request's context knows
// its connection, for peerGone.
func rememberConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// settleUnlessGone settles h when the final reply was written (err nil) to
// a client that is still there, and gives it back otherwise: a write into
// the socket's buffer succeeds even after the client closed its end.
func settleUnlessGone(ctx context.Context, err error, h *handoff) {
	if err != nil || peerGone(ctx) {
		h.giveBack()
		return
	}
	h.settled()
}

// peerGone reports whether the request's client has closed its end of the
// connection, as far as the kernel knows now; false when it cannot tell.
func peerGone(ctx context.Context) bool {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	if raw.Control(func(fd uintptr) { gone = socketHungUp(int(fd)) }) != nil {
		return false
	}
	return gone
}
