package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shutdownFlushDuration bounds the last write of replies at shutdown.
const shutdownFlushDuration = 500 * time.Millisecond

// stdio is the stdio transport: one session on stdin and stdout.
type stdio struct {
	out     *writer
	session *session
}

// openStdio opens the session of the process's own stdin and stdout.
func openStdio(srv *server) (*stdio, error) {
	out := newBoundedWriter(pollable(1, "stdout", os.Stdout), intakeBoundBytes(srv.cfg))
	ss, err := srv.open(srv.cfg, "stdio", out)
	if err != nil {
		return nil, err
	}
	return &stdio{out: out, session: ss}, nil
}

// serveUntilDone serves the client until stdin ends, a signal arrives on
// stop or stdout breaks, and says which.
func (t *stdio) serveUntilDone(stop <-chan os.Signal) string {
	eof := make(chan error, 1)
	go func() { eof <- t.session.serve(pollable(0, "stdin", os.Stdin)) }()
	select {
	case err := <-eof:
		if err != nil {
			return fmt.Sprintf("stdin: %v", err)
		}
		return "stdin closed"
	case sig := <-stop:
		return "signal " + sig.String()
	case <-t.out.gone:
		return "stdout closed"
	}
}

// flush writes what is still queued, for at most shutdownFlushDuration.
func (t *stdio) flush() { t.out.flush(shutdownFlushDuration) }

// pollableFiles is process-wide state: it keeps the files pollable made
// alive, as a finalizer would close their descriptors. Only pollable
// appends to it, before the session starts.
var pollableFiles []*os.File

// pollable returns the descriptor fd (stdin or stdout) in the runtime
// poller when it is a pipe or socket, or else std, the os package's file
// for it. On stdin, reading parks a goroutine, not a thread in read(2)
// that delays the process's exit; on stdout, the writer may try a reply
// from its sender's goroutine without ever blocking it (tryDirect). A
// terminal stays blocking, as its mode is shared with the processes of
// the session it belongs to; a regular file cannot be polled.
func pollable(fd int, name string, std *os.File) *os.File {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return std
	}
	kind := st.Mode & syscall.S_IFMT
	if kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK || syscall.SetNonblock(fd, true) != nil {
		return std
	}
	f := os.NewFile(uintptr(fd), name)
	pollableFiles = append(pollableFiles, f)
	return f
}

// minIntakeBoundBytes is the least intakeBoundBytes, so a small reply
// budget does not pause a client that reads a little late.
const minIntakeBoundBytes = 4 << 20

// intakeBoundBytes is how many bytes may wait to be written to stdout
// before the session stops reading requests: twice the reply budget, so a
// client that reads goes on undisturbed by the largest reply.
func intakeBoundBytes(cfg *config) int {
	return max(minIntakeBoundBytes, 2*cfg.maxReplyBytes)
}

// writer owns stdout. One goroutine, the loop, writes queued messages in
// batches; lines never interleave, and no session goroutine waits on a
// slow client. A sender writes its message itself only when nothing is
// queued or being written and out takes writes that never block
// (tryDirect): one non-blocking write, the rest queued first for the loop.
// That saves waking the loop for the common reply that fits the pipe.
//
// A client that stops reading must not grow the queue without bound. Once
// boundBytes wait to be written the writer pauses the session's intake
// (awaitRoom) until the client has read the queue down to half the bound,
// and drops droppable messages meanwhile. Replies and job events are
// always queued; a reply made from job output is built only when there is
// room for it (takeRoom), so finished calls hold jobs, not output copies.
type writer struct {
	out        io.Writer
	direct     syscall.RawConn                  // out's descriptor when it is non-blocking, for tryDirect; nil: the loop writes everything
	boundBytes int                              // queued bytes that pause the intake
	notice     func(format string, args ...any) // says when the intake pauses and resumes (logf)

	mu       sync.Mutex    // guards queue, queued, writing, paused, pausedAt, dropped and failed
	queue    []outItem     // messages not yet taken by the loop
	writing  bool          // the loop or a sender (tryDirect) is writing to out
	queued   int           // bytes of messages not yet handed to out
	paused   bool          // queued reached boundBytes and has not fallen below half of it since
	pausedAt time.Time     // when the pause began
	dropped  int           // droppable messages dropped during this pause
	failed   bool          // a write failed: the client is gone
	wake     chan struct{} // 1-buffered: the queue may have items for the loop
	room     chan struct{} // 1-buffered: the pause may have ended
	gone     chan struct{} // closed when a write fails
	ticket   chan struct{} // 1-buffered: holds a value while a call holds room for its reply (takeRoom)
	spaced   chan struct{} // 1-buffered: the queue may have fallen below the bound, for the ticket's holder
}

// outItem is one queued message (ending in a newline), or a flush marker
// when msg is nil.
type outItem struct {
	msg     []byte
	flushed chan struct{} // a flush marker's: closed once everything before it is written or dropped
	handoff *handoff      // what the reply delivered; given back if it is never written
}

// lost gives back what a reply that was never written delivered.
func (it outItem) lost() { it.handoff.giveBack() }

// release tells a flush marker's waiter that the marker is done with:
// written, or dropped with the client gone.
func (it outItem) release() {
	if it.flushed != nil {
		close(it.flushed)
	}
}

// newBoundedWriter starts the writer goroutine for out; its intake pauses
// once boundBytes wait to be written.
func newBoundedWriter(out io.Writer, boundBytes int) *writer {
	w := &writer{out: out, direct: nonblockingConn(out), boundBytes: boundBytes, notice: logf,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), gone: make(chan struct{}),
		ticket: make(chan struct{}, 1), spaced: make(chan struct{}, 1)}
	go w.loop()
	return w
}

// send queues one message for the writer goroutine; it never blocks and
// never drops the message.
func (w *writer) send(msg []byte) { w.offer(outItem{msg: msg}, false) }

// sendHanded queues a reply and settles h at once: the session's reader
// must not wait on a client that reads slowly, and a stdout that fails
// ends the session. If the write fails, h is given back.
func (w *writer) sendHanded(msg []byte, h *handoff) {
	w.offer(outItem{msg: msg, handoff: h}, false)
	h.settled()
}

// sendDroppable queues a progress or log notification, or drops it while
// the intake is paused: a later one, or the reply, tells as much.
func (w *writer) sendDroppable(msg []byte) { w.offer(outItem{msg: msg}, true) }

// offer queues an item, unless it is droppable and the intake is paused.
func (w *writer) offer(it outItem, droppable bool) {
	w.mu.Lock()
	if w.failed {
		w.mu.Unlock()
		it.lost()
		it.release()
		return
	}
	if droppable && w.paused {
		w.dropped++
		w.mu.Unlock()
		return
	}
	// Everything offered before reached out whole when nothing is queued
	// or being written, so a sender may write its own message in order.
	direct := w.direct != nil && it.msg != nil && !w.writing && len(w.queue) == 0
	if direct {
		w.writing = true
	} else {
		w.queue = append(w.queue, it)
	}
	w.queued += len(it.msg)
	pausing := !w.paused && w.queued >= w.boundBytes
	if pausing {
		w.paused, w.pausedAt = true, time.Now()
	}
	queued := w.queued
	w.mu.Unlock()
	if pausing {
		w.notice("stdout: %d bytes wait for the client to read them; no request is read until it does", queued)
	}
	if direct {
		w.tryDirect(it)
		return
	}
	nudge(w.wake)
}

// tryDirect writes it to out from the sender's goroutine, with one write
// that never blocks; what the pipe did not take goes first in the queue,
// for the loop. The caller set writing and counted it in queued.
func (w *writer) tryDirect(it outItem) {
	n, err := writeNonblocking(w.direct, it.msg)
	if n > 0 {
		w.written(n)
	}
	w.mu.Lock()
	w.writing = false
	if err == nil && n < len(it.msg) {
		it.msg = it.msg[n:]
		w.queue = append([]outItem{it}, w.queue...)
	}
	pending := len(w.queue) > 0
	w.mu.Unlock()
	if err != nil {
		it.lost()
		w.fail(err)
		return
	}
	if pending {
		nudge(w.wake)
	}
}

// awaitRoom returns once the intake is not paused, or the client is gone.
// Only the session's reader calls it: room's buffer wakes one waiter.
func (w *writer) awaitRoom() {
	for {
		w.mu.Lock()
		open := w.failed || !w.paused
		w.mu.Unlock()
		if open {
			return
		}
		select {
		case <-w.room:
		case <-w.gone:
		}
	}
}

// takeRoom returns once the caller may build a reply and queue it: it
// holds the writer's one ticket, and fewer than boundBytes wait to be
// written. The caller queues its reply, then calls release, once. With
// ok false nothing is held: done closed or the client went first.
// One ticket, held from the check to the queueing, so calls that finished
// together cannot all pass the check before any of them queues.
func (w *writer) takeRoom(done <-chan struct{}) (release func(), ok bool) {
	select {
	case w.ticket <- struct{}{}:
	case <-done:
		return nil, false
	case <-w.gone:
		return nil, false
	}
	release = func() { <-w.ticket }
	for {
		w.mu.Lock()
		room, failed := w.queued < w.boundBytes, w.failed
		w.mu.Unlock()
		if failed || isClosed(done) { // done may have closed as the ticket came
			release()
			return nil, false
		}
		if room {
			return release, true
		}
		select {
		case <-w.spaced:
		case <-done:
		case <-w.gone:
		}
	}
}

// written counts n bytes as handed to out. The pause ends below half the
// bound, so a client reading at its edge does not wake the reader for
// every reply; a call waiting in takeRoom wakes below the bound.
func (w *writer) written(n int) {
	w.mu.Lock()
	w.queued -= n
	spaced := w.queued < w.boundBytes
	resuming := w.paused && w.queued < w.boundBytes/2
	var pause time.Duration
	var dropped int
	if resuming {
		w.paused = false
		pause, dropped, w.dropped = time.Since(w.pausedAt), w.dropped, 0
	}
	w.mu.Unlock()
	if spaced {
		nudge(w.spaced)
	}
	if resuming {
		// Said before the reader wakes, so it comes before the next pause's.
		w.notice("stdout: the client reads again after %v; requests are read again (%d progress or log notifications were dropped)",
			pause.Round(time.Millisecond), dropped)
		nudge(w.room)
	}
}

// flush waits, at most timeout, until everything queued so far is written.
func (w *writer) flush(timeout time.Duration) {
	done := make(chan struct{})
	w.offer(outItem{flushed: done}, false)
	waitFor(done, timeout)
}

// loop writes queued messages in batches, flushing when a batch is done. A
// failed write marks the client gone and drops what is queued.
func (w *writer) loop() {
	buf := bufio.NewWriterSize(w.out, 64<<10)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.writing { // a sender's tryDirect: it wakes the loop if more came
				w.mu.Unlock()
				break
			}
			batch := w.queue
			w.queue = nil
			w.writing = len(batch) > 0
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			err := w.writeBatch(buf, batch)
			w.mu.Lock()
			w.writing = false
			w.mu.Unlock()
			if err != nil {
				w.fail(err)
				break
			}
		}
	}
}

// fail marks the client gone: nothing more is queued, and what was queued
// is dropped with its flush markers released.
func (w *writer) fail(err error) {
	w.mu.Lock()
	if w.failed { // the loop and a sender's tryDirect may both fail
		w.mu.Unlock()
		return
	}
	w.failed = true
	dropped := w.queue
	w.queue = nil
	w.mu.Unlock()
	logf("stdout: %v; the client is gone", err)
	close(w.gone)
	for _, it := range dropped {
		it.lost()
		it.release()
	}
}

// writeBatch writes and flushes a batch, then releases its flush markers.
// A message counts as written once it reaches out, and is let go once the
// buffer took it: the client may take long over the rest of a batch.
func (w *writer) writeBatch(buf *bufio.Writer, batch []outItem) error {
	var err error
	handed := 0  // bytes given to buf and not yet counted as written
	reached := 0 // the items before this one reached out whole
	for i := range batch {
		msg := batch[i].msg
		if msg == nil || err != nil {
			continue
		}
		_, err = buf.Write(msg)
		batch[i].msg = nil
		handed += len(msg)
		if buf.Buffered() == 0 && err == nil {
			w.written(handed)
			handed, reached = 0, i+1
		}
	}
	if err == nil {
		if err = buf.Flush(); err == nil {
			w.written(handed)
			reached = len(batch)
		}
	}
	for i, it := range batch {
		if i >= reached {
			it.lost() // not all of it reached the client: it counts as unsent
		}
		it.release()
	}
	return err
}

// nonblockingConn returns out's descriptor when out is a file in
// non-blocking mode (pollable's stdout, a pipe from os.Pipe), else nil: a
// write on a blocking descriptor could hold its sender on a slow client.
func nonblockingConn(out io.Writer) syscall.RawConn {
	rc := rawConnOf(out)
	if rc == nil {
		return nil
	}
	nonblocking := false
	if rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking = err == nil && flags&unix.O_NONBLOCK != 0
	}) != nil || !nonblocking {
		return nil
	}
	return rc
}

// writeNonblocking makes one write of msg to rc's descriptor that never
// waits: n is what it took, 0 with a nil error when the pipe is full.
func writeNonblocking(rc syscall.RawConn, msg []byte) (n int, err error) {
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), msg)
			if werr != syscall.EINTR {
				return true // done, whatever it took: never wait for room
			}
		}
	}); err != nil {
		return 0, err
	}
	if werr == syscall.EAGAIN {
		return 0, nil
	}
	return max(n, 0), werr
}
