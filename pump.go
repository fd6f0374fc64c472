package main

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// settleMaxDuration bounds how long a finished job waits for its pipes to
	// hand over what the direct child wrote, when an orphan keeps them busy.
	settleMaxDuration = 500 * time.Millisecond
	// settleStuckDuration bounds the wait for a pump's first read after the
	// shell exited (a pump can be slow to run under load, never this slow).
	settleStuckDuration = 30 * time.Second
	// readBufferBytes is the size of one pipe read.
	readBufferBytes = 64 << 10
)

// readBuffers is process-wide state: the pipe read buffers every pump of
// every session takes and gives back. A pump holds one only while data is
// flowing, so idle jobs cost no buffer memory.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, readBufferBytes)
	return &b
}}

// pump copies one output pipe into a window until EOF.
type pump struct {
	f        *os.File
	sink     atomic.Pointer[window] // where bytes go; nil once the job is delivered
	settle   settle                 // how far the pump is toward holding all the shell wrote
	gate     *readGate              // holds reads back for a streaming reader; nil: never
	finished chan struct{}          // closed when the pump has stopped reading
	owner    pumpOwner              // told once it has, after finished is closed
	lastData stamp                  // when a read last brought bytes: how long the job has been silent
	mask     *masker                // masks the bytes before the window; nil: none. Set before run
}

// pumpOwner is what a pump tells that it stopped reading (a job, whose
// result may wait for it).
type pumpOwner interface {
	// pumpEnded is called once per pump, on the pump's goroutine, after
	// its finished channel is closed; it must not block.
	pumpEnded()
}

// startPump starts copying f into w; gate, when not nil, holds it back
// whenever w holds as much unread as it can keep. owner hears when the
// pump has stopped reading.
func startPump(f *os.File, w *window, gate *readGate, owner pumpOwner, mask *masker) *pump {
	p := &pump{f: f, settle: settle{changed: newBroadcast()}, gate: gate, finished: make(chan struct{}), owner: owner, mask: mask}
	p.sink.Store(w)
	go p.run()
	return p
}

// run reads until EOF or error, then closes the pipe.
func (p *pump) run() {
	defer p.owner.pumpEnded() // last: after finished is closed
	defer close(p.finished)
	defer p.settle.moveTo(settleSettled) // EOF, a read error or a close
	defer p.mask.flush()                 // before the settling: a result holds every byte
	defer p.f.Close()
	rc, err := p.f.SyscallConn()
	if err != nil {
		logf("pump: %v", err)
		return
	}
	for p.pass(rc) {
	}
}

// pass performs one read and reports whether to go on. The read callback
// runs inside the poller. A window that has grown big is read into
// directly; otherwise the bytes go through a pooled buffer. On EAGAIN the
// callback keeps no buffer and returns to the poller.
func (p *pump) pass(rc syscall.RawConn) bool {
	if w := p.sink.Load(); w != nil && p.gate != nil {
		_, total := w.stats()
		p.gate.waitRoom(total, int64(max(w.limit-readBufferBytes, 0)))
	}
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		afterExit := p.settle.readBegins()
		n, rerr = p.readInto(int(fd))
		empty := errors.Is(rerr, syscall.EAGAIN)
		p.settle.readEnded(afterExit, empty)
		return !empty
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The wake-up of awaitSettled: look at the pipe again, no deadline.
		_ = p.f.SetReadDeadline(time.Time{}) // cannot fail on an open pipe
		return true
	case err != nil, rerr != nil, n <= 0:
		return false // closed, read error, or EOF
	}
	outputBytes.Add(int64(n))
	p.lastData.mark()
	boundWindows()
	if p.gate != nil {
		nudge(p.gate.wrote)
	}
	return true
}

// hungUp reports whether no process holds the pump's pipe for writing any
// more, so it reaches EOF by itself once it has read what the pipe holds.
// A pump that has closed its pipe is at its end already.
func (p *pump) hungUp() bool {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return true
	}
	hung := true
	if rc.Control(func(fd uintptr) { hung = pipeHungUp(int(fd)) }) != nil {
		return true // closed: the pump has stopped reading
	}
	return hung
}

// unread is how many bytes wait in the pump's pipe for it to read; 0 once
// it has closed the pipe.
func (p *pump) unread() int {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	if rc.Control(func(fd uintptr) { n = pipeUnread(int(fd)) }) != nil {
		return 0
	}
	return n
}

// wake makes a pump parked on an empty pipe run a read at once.
func (p *pump) wake() {
	_ = p.f.SetReadDeadline(pastDeadline) // fails only when closed: then the pump has ended
}

// readInto reads once from fd into the sink window: straight into its
// storage when it offers some, else through a pooled buffer.
func (p *pump) readInto(fd int) (int, error) {
	w := p.sink.Load()
	if w != nil && p.mask == nil { // masked bytes go through the masker, not in place
		if span := w.reserve(readBufferBytes); span != nil {
			n, err := readRetrying(fd, span)
			w.commit(max(n, 0))
			return n, err
		}
	}
	buf := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(buf)
	n, err := readRetrying(fd, *buf)
	switch {
	case n <= 0 || w == nil:
	case p.mask != nil:
		_, _ = p.mask.Write((*buf)[:n]) // never fails
	default:
		_, _ = w.Write((*buf)[:n]) // never fails
	}
	return n, err
}

// readGate lets a reader that streams a job's output as it comes (POST
// /exec) miss nothing: the pump reads the pipe only while the window has
// room for what the reader has not taken yet, so a fast writer waits for a
// slow reader instead of the window dropping bytes.
type readGate struct {
	mu    sync.Mutex    // guards taken and open
	taken int64         // stream offset up to which the reader has taken the bytes
	open  bool          // the reader is gone or done: hold nothing back
	moved chan struct{} // 1-buffered: taken or open changed
	wrote chan struct{} // 1-buffered: the pump put bytes in the window
}

// newReadGate returns a gate whose reader has taken nothing yet.
func newReadGate() *readGate {
	return &readGate{moved: make(chan struct{}, 1), wrote: make(chan struct{}, 1)}
}

// waitRoom blocks until at most room of the total bytes written are
// untaken, or the gate is open.
func (g *readGate) waitRoom(total, room int64) {
	for {
		g.mu.Lock()
		ok := g.open || total-g.taken <= room
		g.mu.Unlock()
		if ok {
			return
		}
		<-g.moved
	}
}

// take records that the reader has taken the stream up to offset to.
func (g *readGate) take(to int64) {
	g.mu.Lock()
	g.taken = max(g.taken, to)
	g.mu.Unlock()
	nudge(g.moved)
}

// release stops holding the pump back, for good.
func (g *readGate) release() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	nudge(g.moved)
}

// readRetrying is read(2) retried on EINTR.
func readRetrying(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// settleState is a pump's progress toward holding everything the job's
// shell wrote; see settle.
type settleState int

// settle tracks a pump's settling. Its states only move forward:
//
//	writing  the shell runs; the pump copies whatever comes.
//	exited   the shell has exited; no read has begun since.
//	looked   a read that began after the exit has run and found data: an
//	         orphan may still be writing, so the wait for it is bounded.
//	settled  a read that began after the exit found the pipe empty, or the
//	         pipe reached EOF or failed. Everything the shell wrote is in
//	         the window.
//
// Transitions: writing → exited (awaitSettled); exited → looked (a read
// with data); exited or looked → settled (a read finding the pipe empty);
// any → settled (the pump stops). Each one is announced on changed.
type settle struct {
	mu      sync.Mutex  // guards state and changed
	state   settleState // where the pump is
	changed broadcast   // announced at every transition
}

const (
	settleWriting settleState = iota
	settleExited
	settleLooked
	settleSettled
)

// moveTo advances the state to to, if that is forward.
func (s *settle) moveTo(to settleState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if to > s.state {
		s.state = to
		s.changed.announce()
	}
}

// readBegins is called as a read begins; it reports whether the shell had
// exited by then. Only such a read can prove the shell's bytes were taken.
func (s *settle) readBegins() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state >= settleExited
}

// readEnded records a read that began after the exit (afterExit) and found
// the pipe empty or not.
func (s *settle) readEnded(afterExit, empty bool) {
	switch {
	case afterExit && empty:
		s.moveTo(settleSettled)
	case afterExit:
		s.moveTo(settleLooked)
	}
}

// settled reports whether everything the shell wrote is in the window.
func (s *settle) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == settleSettled
}

// waitUntil blocks until the state is at least want, or timeout fires, and
// reports whether it got there.
func (s *settle) waitUntil(want settleState, timeout <-chan time.Time) bool {
	for {
		s.mu.Lock()
		state, changed := s.state, s.changed.next()
		s.mu.Unlock()
		if state >= want {
			return true
		}
		select {
		case <-changed:
		case <-timeout:
			return false
		}
	}
}

// awaitSettled waits until each pump has taken everything the job's shell
// wrote before exiting. The limit bounds only how long an orphan that keeps
// a pipe busy can hold the result back, so it starts at a pump's first read
// after the exit: a pump the scheduler has not run yet (a thousand jobs
// ending at once on a slow machine) is waited for, or the result would lose
// bytes. A pump that has not run at all for settleStuckDuration is broken,
// not busy, and the result is not held back for ever.
func awaitSettled(limit time.Duration, pumps ...*pump) {
	defer func() {
		for _, p := range pumps {
			p.mask.flush() // held bytes never outlast the job's end
		}
	}()
	for _, p := range pumps {
		p.settle.moveTo(settleExited)
		p.wake()
	}
	stuck := time.NewTimer(settleStuckDuration)
	defer stuck.Stop()
	var deadline *time.Timer
	late := false // the limit passed: later pumps are not waited for
	for _, p := range pumps {
		if !p.settle.waitUntil(settleLooked, stuck.C) {
			logf("a job's output pump did not run for %v after its shell exited; its result may miss output", settleStuckDuration)
			return
		}
		if deadline == nil {
			deadline = time.NewTimer(limit)
			defer deadline.Stop()
		}
		if !late && !p.settle.waitUntil(settleSettled, deadline.C) {
			late = true
		}
	}
}
