package main

import (
	"context"
	"time"
)

// replyAckDuration bounds how long a flushed final reply waits for the
// client's acknowledgement before its jobs are given back: below the
// handing bound, so a second wait on the same job sees the outcome.
const replyAckDuration = 3 * time.Second

// settleUnlessGone settles h when the final reply was written (err nil)
// and reached the client, and gives it back otherwise. A write into the
// socket's buffer succeeds even after the client closed its end, and a
// client that read its reply and closed looks, at the socket, like one
// that left first; what tells them apart is whether the client's side
// acknowledged the bytes or answered them with a reset. A client that
// only shut its writing end still reads and acknowledges: it is served.
func settleUnlessGone(ctx context.Context, err error, h *handoff) {
	if err != nil || !replyReached(ctx, replyAckDuration) {
		h.giveBack()
		return
	}
	h.settled()
}

// replyReached waits, at most limit, until the request's connection says
// whether the bytes written so far reached the client: true once all are
// acknowledged, or when the kernel cannot tell; false on a reset or when
// limit passes first. It blocks the calling handler only.
func replyReached(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	pause := 50 * time.Microsecond // a loopback acknowledgement is this quick
	for {
		switch connDelivery(ctx) {
		case deliveryAcked, deliveryUnknown:
			return true
		case deliveryFailed:
			return false
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// connDelivery asks the kernel about the request's connection, found
// beneath any TLS where withConn put it.
func connDelivery(ctx context.Context) delivery {
	gc, _ := ctx.Value(connKey{}).(*guardedConn)
	if gc == nil {
		return deliveryUnknown
	}
	raw := rawConnOf(gc.Conn)
	if raw == nil {
		return deliveryUnknown
	}
	d := deliveryUnknown
	if raw.Control(func(fd uintptr) { d = socketDelivery(int(fd)) }) != nil {
		return deliveryUnknown
	}
	return d
}
