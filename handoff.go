package main

import (
	"sync"
	"time"
)

// handoff is what one call delivered and whether its client received it.
// A call's deliveries take jobs out of their registry (the delivery rule,
// jobs.go); the reply that carries their results may still fail to reach
// the client: its HTTP connection closed, stdout broke. Then giveBack puts
// the jobs back, as a cancelled call does, so a result is never counted as
// delivered when nobody received it. A result may so reach two calls, but
// never none.
//
// States: handing (the reply is being built or written: a lookup of one of
// its jobs waits, at most handingLookupDuration) → settled (the transport
// took the reply; lookups answer "delivered") → given back (the jobs are in
// their registry again). giveBack also works from handing. Each step
// happens at most once; a nil *handoff records nothing.
type handoff struct {
	mu     sync.Mutex  // guards jobs, settled and back
	jobs   []handedJob // what the call took out of a registry
	settle bool        // the lookups' wait has ended
	back   bool        // the jobs were given back
}

// handedJob is one job a call took out of its registry, as the handoff
// ends it. Its methods are called at most once each, on the goroutine
// that settles or gives back the reply (a transport's, or the call's),
// with the handoff's lock released; they take the registry's lock and do
// not block beyond it.
type handedJob interface {
	// giveBack returns the job to its registry, unless another call took
	// it again meanwhile.
	giveBack()
	// handingEnded ends the wait of lookups for the reply that carries it.
	handingEnded()
}

// handingLookupDuration bounds how long a call looking up a job waits for
// an earlier call's reply to be written or given back. Written replies
// settle within a write; a reply that fails gives its jobs back as soon as
// its transport sees the client gone.
const handingLookupDuration = 5 * time.Second

// took records that the call took a job out of its registry (whose lock
// is held: the registry marks the job as handing in the same step). It
// reports false when the handoff had already ended, so the registry does
// not mark the job.
func (h *handoff) took(t handedJob) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settle || h.back {
		return false
	}
	h.jobs = append(h.jobs, t)
	return true
}

// settled says the transport took the reply: lookups of its jobs answer
// "delivered" at once from now on. Later failures may still giveBack.
func (h *handoff) settled() {
	for _, t := range h.end(false) {
		t.handingEnded()
	}
}

// giveBack returns the call's jobs to their registries: its reply will
// never reach the client. Jobs that another call took again meanwhile stay
// where they are.
func (h *handoff) giveBack() {
	for _, t := range h.end(true) {
		t.giveBack()
		t.handingEnded()
	}
}

// end marks the handoff settled or given back and returns the jobs still
// to act on: for settle, those not settled before; for giveBack, all of
// them, once.
func (h *handoff) end(back bool) []handedJob {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.back || (h.settle && !back) {
		return nil
	}
	h.settle = true
	h.back = back
	return h.jobs
}
