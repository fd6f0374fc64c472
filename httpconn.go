package main

import (
	"context"
	"syscall"
)

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
	gc, _ := ctx.Value(connKey{}).(*guardedConn) // withConn put it there, beneath any TLS
	if gc == nil {
		return false
	}
	sc, ok := gc.Conn.(syscall.Conn)
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
