package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// stdinPipe is the server's end of a job's stdin.
type stdinPipe struct {
	f *os.File
	// token is 1-buffered and holds one value while nobody writes: taking it
	// is the right to write to or close f. Writers select on it, so a wait
	// for the pipe can be cancelled.
	token  chan struct{}
	closed bool // guarded by holding token
	// eofByte: closing sends Ctrl-D instead, as on a terminal, whose reader
	// sees end of input only so (closing the master would hang it up).
	eofByte bool
	// lastWrite is when data was last written: a reader that just got some
	// has not been waiting for more since.
	lastWrite stamp
}

// newStdinPipe wraps our end of a job's stdin pipe, its write token free.
func newStdinPipe(f *os.File) *stdinPipe {
	s := &stdinPipe{f: f, token: make(chan struct{}, 1)}
	s.token <- struct{}{}
	return s
}

// feed writes execute's stdin argument in the background. It takes the token
// before returning, so later input calls queue behind it.
func (s *stdinPipe) feed(data string, closeAfter bool, done <-chan struct{}) {
	<-s.token
	go func() {
		defer func() { s.token <- struct{}{} }()
		_ = s.writeHeld(context.Background(), data, closeAfter, done) // nobody to tell: errors surface as a closed or dead pipe later
	}()
}

// write waits for its turn, then writes data and closes the pipe if asked.
// A cancelled ctx aborts the wait or the write; done closing means the job
// finished and nothing more can be written.
func (s *stdinPipe) write(ctx context.Context, data string, closeAfter bool, done <-chan struct{}) error {
	select {
	case <-s.token:
	case <-ctx.Done():
		return errCancelled
	case <-done:
		if ctx.Err() != nil {
			return errCancelled // a cancel that raced with the job's end wins
		}
		return errNotRunning
	}
	defer func() { s.token <- struct{}{} }()
	return s.writeHeld(ctx, data, closeAfter, done)
}

// writeHeld is write for a caller that holds the token.
func (s *stdinPipe) writeHeld(ctx context.Context, data string, closeAfter bool, done <-chan struct{}) error {
	if ctx.Err() != nil {
		return errCancelled
	}
	if isClosed(done) {
		return errNotRunning
	}
	if s.closed {
		return errAlreadyClosed
	}
	payload := data
	if closeAfter && s.eofByte {
		// One write: a line editor switches its terminal to canonical mode
		// to run the line it just read, and a Ctrl-D arriving then becomes
		// an end-of-file mark that its next raw read sees as a NUL.
		payload += "\x04"
	}
	if payload != "" {
		if err := s.writeCancellable(ctx, payload); err != nil && data != "" { // a bare Ctrl-D is best effort, as a close is
			if ctx.Err() != nil {
				return errCancelled // checked first: shutdown both cancels and ends jobs
			}
			if isClosed(done) {
				return errNotRunning
			}
			if errors.Is(err, syscall.EPIPE) {
				return errStdinBroken
			}
			return fmt.Errorf("write stdin: %w", err)
		}
		if data != "" {
			s.lastWrite.mark()
		}
	}
	if closeAfter {
		s.closed = true
		if !s.eofByte { // a terminal's end of input was the Ctrl-D above
			_ = s.f.Close() // best effort: the reader may be gone already
		}
	}
	return nil
}

// writeCancellable writes data, aborting through a past write deadline when
// ctx ends; the deadline is reset afterwards so the pipe stays usable.
func (s *stdinPipe) writeCancellable(ctx context.Context, data string) error {
	aborted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = s.f.SetWriteDeadline(pastDeadline) // best effort: the file may be closed
		close(aborted)
	})
	_, err := io.WriteString(s.f, data)
	if !stop() {
		<-aborted
		_ = s.f.SetWriteDeadline(time.Time{}) // best effort, as above
	}
	return err
}

// shut closes stdin once the job has finished, without blocking: a pending
// write is aborted, and if a writer still holds the token, closing waits for
// it on another goroutine.
func (s *stdinPipe) shut() {
	_ = s.f.SetWriteDeadline(pastDeadline) // best effort: the file may be closed
	closeHeld := func() {
		if !s.closed {
			s.closed = true
			_ = s.f.Close() // best effort: nobody reads it any more
		}
		s.token <- struct{}{}
	}
	select {
	case <-s.token:
		closeHeld()
	default:
		go func() {
			<-s.token
			closeHeld()
		}()
	}
}
