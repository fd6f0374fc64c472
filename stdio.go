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

// writer owns stdout. Messages are queued, never written by their sender,
// and one goroutine writes them in batches, whole messages only: lines
// never interleave, and no session goroutine waits on a slow client.
// (Writing on the sender's goroutine when the queue was empty measured no
// faster: 1.27 vs 1.28 of the round-trip floor here.)
type writer struct {
	out io.Writer

	mu     sync.Mutex    // guards queue and failed
	queue  []outItem     // messages not yet written
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
	nudge(w.wake)
}

// flush waits, at most timeout, until everything queued so far is written.
func (w *writer) flush(timeout time.Duration) {
	done := make(chan struct{})
	w.enqueue(outItem{flushed: done})
	waitFor(done, timeout)
}

// loop writes queued messages in batches, flushing when a batch is done. A
// failed write marks the client gone and drops what is queued.
func (w *writer) loop() {
	buf := bufio.NewWriterSize(w.out, 64<<10)
	for range w.wake {
		for {
			w.mu.Lock()
			batch := w.queue
			w.queue = nil
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			if err := writeBatch(buf, batch); err != nil {
				w.fail(err)
				break
			}
		}
	}
}

// fail marks the client gone: nothing more is queued, and what was queued
// is dropped with its flush markers released.
func (w *writer) fail(err error) {
	logf("stdout: %v; the client is gone", err)
	w.mu.Lock()
	w.failed = true
	dropped := w.queue
	w.queue = nil
	w.mu.Unlock()
	close(w.gone)
	for _, it := range dropped {
		if it.flushed != nil {
			close(it.flushed)
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
