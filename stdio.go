package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// shutdownFlushDuration bounds the last write of replies at shutdown.
const shutdownFlushDuration = 500 * time.Millisecond

// stdio is the stdio transport: one session, reading stdin and writing
// stdout.
type stdio struct {
	out     *writer
	session *session
}

// openStdio opens the session of the process's own stdin and stdout.
func openStdio(srv *server) (*stdio, error) {
	out := newWriter(os.Stdout)
	ss, err := srv.open(out)
	if err != nil {
		return nil, err
	}
	return &stdio{out: out, session: ss}, nil
}

// serveUntilDone serves the client until stdin ends, a signal arrives on
// stop or stdout breaks, and says which.
func (t *stdio) serveUntilDone(stop <-chan os.Signal) string {
	eof := make(chan error, 1)
	go func() { eof <- t.session.serve(pollableStdin()) }()
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

// stdinFile keeps the pollable stdin alive: its finalizer would close fd 0.
var stdinFile *os.File

// pollableStdin returns stdin as a file in the runtime poller when it is a
// pipe or socket, so reading it parks a goroutine instead of holding a
// thread in read(2) and delaying the request goroutines it just started.
// A terminal is left alone: other programs share its blocking mode.
func pollableStdin() *os.File {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return os.Stdin
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return os.Stdin
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	stdinFile = os.NewFile(0, "stdin")
	return stdinFile
}

// writer owns stdout. One goroutine at a time writes, whole messages only,
// so lines never interleave; the reader goroutine and the capture pumps never
// wait on a slow client, because they only queue.
type writer struct {
	out io.Writer

	mu     sync.Mutex    // guards queue, busy and failed
	queue  []outItem     // messages not yet written
	busy   bool          // a goroutine is writing to out
	failed bool          // a write failed: the client is gone
	wake   chan struct{} // 1-buffered: the queue may have items for the loop
	gone   chan struct{} // closed when a write fails
}

// outItem is one queued message (ending in a newline), or a flush marker
// when msg is nil.
type outItem struct {
	msg     []byte
	flushed chan struct{}
}

// newWriter starts the writer goroutine for out.
func newWriter(out io.Writer) *writer {
	w := &writer{out: out, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	go w.loop()
	return w
}

// send queues one message for the writer goroutine; it never blocks.
func (w *writer) send(msg []byte) { w.enqueue(outItem{msg: msg}) }

// sendNow writes msg on the caller's goroutine when nobody else is writing
// and nothing is queued, saving a hand-off; otherwise it queues. Only request
// goroutines call it: a slow client then holds up only that request.
func (w *writer) sendNow(msg []byte) {
	w.mu.Lock()
	if w.busy || w.failed || len(w.queue) > 0 {
		w.mu.Unlock()
		w.send(msg)
		return
	}
	w.busy = true
	w.mu.Unlock()
	_, err := w.out.Write(msg)
	w.release(err)
}

func (w *writer) enqueue(it outItem) {
	w.mu.Lock()
	if w.failed {
		w.mu.Unlock()
		if it.flushed != nil {
			close(it.flushed)
		}
		return
	}
	w.queue = append(w.queue, it)
	w.mu.Unlock()
	w.poke()
}

// poke wakes the writer goroutine.
func (w *writer) poke() {
	nudge(w.wake)
}

// release ends a turn at writing: a failure marks the client gone, and
// anything queued meanwhile goes to the writer goroutine.
func (w *writer) release(err error) {
	w.mu.Lock()
	w.busy = false
	var dropped []outItem
	if err != nil && !w.failed {
		logf("stdout: %v; the client is gone", err)
		w.failed = true
		dropped, w.queue = w.queue, nil
		close(w.gone)
	}
	more := len(w.queue) > 0
	w.mu.Unlock()
	for _, it := range dropped {
		if it.flushed != nil {
			close(it.flushed)
		}
	}
	if more {
		w.poke()
	}
}

// flush waits, at most timeout, until everything queued so far is written.
func (w *writer) flush(timeout time.Duration) {
	done := make(chan struct{})
	w.enqueue(outItem{flushed: done})
	waitFor(done, timeout)
}

// loop writes queued messages in batches, flushing when a batch is done.
func (w *writer) loop() {
	buf := bufio.NewWriterSize(w.out, 64<<10)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.busy || w.failed || len(w.queue) == 0 {
				w.mu.Unlock()
				break // a sendNow caller is writing; it pokes us when done
			}
			batch := w.queue
			w.queue, w.busy = nil, true
			w.mu.Unlock()
			w.release(writeBatch(buf, batch))
		}
	}
}

// writeBatch writes and flushes a batch, then releases its flush markers.
func writeBatch(buf *bufio.Writer, batch []outItem) error {
	var err error
	for _, it := range batch {
		if it.msg != nil && err == nil {
			_, err = buf.Write(it.msg)
		}
	}
	if err == nil {
		err = buf.Flush()
	}
	for _, it := range batch {
		if it.flushed != nil {
			close(it.flushed)
		}
	}
	return err
}
