package main

import (
	"context"
	"sync/atomic"
	"time"
)

// broadcast wakes every waiter at once. A waiter takes the current channel
// and selects on it; announce closes it and puts a fresh one in its place.
// Both calls must be made under the lock of the state the waiters watch, so
// a waiter that checked that state and then took the channel cannot miss
// the change that follows.
type broadcast struct {
	ch chan struct{} // closed at the next announce
}

// newBroadcast returns a broadcast nobody waits on yet.
func newBroadcast() broadcast { return broadcast{ch: make(chan struct{})} }

// next returns the channel the next announce closes. Caller holds the lock.
func (b *broadcast) next() <-chan struct{} { return b.ch }

// announce wakes everyone waiting on next. Caller holds the lock.
func (b *broadcast) announce() {
	close(b.ch)
	b.ch = make(chan struct{})
}

// offer sends v on ch if ch can take it now, and reports whether it did. It
// never blocks: for channels that carry a hint ("something changed"), where
// one pending value is as good as many.
func offer[T any](ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	default:
		return false
	}
}

// nudge offers an empty value: the wake-up of a 1-buffered hint channel.
func nudge(ch chan<- struct{}) { offer(ch, struct{}{}) }

// waitFor waits at most d for a value on ch, or for ch to close, and
// reports whether one came.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// pastDeadline aborts a pending pipe write at once.
var pastDeadline = time.Unix(1, 0)

// progressReporter sends a blocking call's progress notifications.
type progressReporter interface {
	// progress sends the n'th notification, saying message. It is called
	// on the waiting call's goroutine with no lock held and must not
	// block: a client that is not reading may have it dropped.
	progress(n int, message string)
}

// waiter is how a blocking tool call waits: cancellable through ctx, and
// reporting progress every interval while it blocks.
type waiter struct {
	ctx      context.Context
	interval time.Duration    // 0: the caller asked for no progress
	reporter progressReporter // sends the progress notifications; nil when interval is 0
	// showOutput: progress messages also carry the newest output lines
	// (the request asked for them in _meta).
	showOutput bool
	// handoff records the jobs the call delivers until its reply reaches
	// its client (nil: a call whose deliveries need no record).
	handoff *handoff
	sent    int       // notifications sent so far
	next    time.Time // when the next one is due
}

// sleep blocks until wake is closed, deadline passes (zero: never) or the
// call is cancelled (errCancelled). Progress notifications go out on
// schedule meanwhile; describe says what the call is waiting for.
func (w *waiter) sleep(wake <-chan struct{}, deadline time.Time, describe func() string) error {
	for {
		due := deadline
		if w.interval > 0 {
			if w.next.IsZero() {
				w.next = time.Now().Add(w.interval)
			}
			if due.IsZero() || w.next.Before(due) {
				due = w.next
			}
		}
		var timer *time.Timer
		var fired <-chan time.Time
		if !due.IsZero() {
			timer = time.NewTimer(time.Until(due))
			fired = timer.C
		}
		select {
		case <-wake:
		case <-w.ctx.Done():
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		switch {
		case w.ctx.Err() != nil:
			return errCancelled
		case isClosed(wake):
			return nil
		case w.interval > 0 && !time.Now().Before(w.next):
			w.sent++
			w.reporter.progress(w.sent, describe())
			w.next = w.next.Add(w.interval)
			continue
		}
		return nil // deadline
	}
}

// isClosed reports whether ch is closed (or has a value ready).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// clockOrigin is where stamps count from. They count on the monotonic
// clock, so setting the wall clock moves none of them.
var clockOrigin = time.Now()

// stamp is when something last happened; any goroutine may mark or read it.
type stamp struct {
	at atomic.Int64 // nanoseconds after clockOrigin, plus one; 0: never marked
}

// mark records that it happened now.
func (s *stamp) mark() { s.at.Store(int64(time.Since(clockOrigin)) + 1) }

// since is how long before now it last happened, and false if it never did.
func (s *stamp) since(now time.Time) (time.Duration, bool) {
	at := s.at.Load()
	if at == 0 {
		return 0, false
	}
	return now.Sub(clockOrigin) - time.Duration(at-1), true
}
