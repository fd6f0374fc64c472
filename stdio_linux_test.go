package main

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFlushAfterADirectWriteWaitsForTheRest: flush returns only once every
// byte queued before it was written, the part a sender's direct write left
// to the loop too.
//
// The count is taken with the reader stopped: a read the pipe has given up
// but the reader has not yet counted is in neither the pipe nor the count,
// so counting a running reader failed a flush that had written it all.
func TestFlushAfterADirectWriteWaitsForTheRest(t *testing.T) {
	t.Parallel()
	w, r := directPipe(t)
	big := numberedLine(0, 1<<20) // the pipe takes a part; the writer goroutine the rest
	w.send(big)
	var taken int64                // bytes the client has read; the reader's until stopped is closed
	stopped := make(chan struct{}) // closed once the reader counted all it holds and reads no more
	go func() {
		defer close(stopped)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			taken += int64(n)
			if err != nil {
				return
			}
		}
	}()
	w.flush(30 * time.Second)
	// Once flush returned every byte is read or waits in the pipe. The
	// reader's read ends at the deadline, with what it took counted: then
	// what was read and what the pipe holds add up to the whole line.
	if err := r.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not stop at its deadline")
	}
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var inPipe int
	if cerr := rc.Control(func(fd uintptr) { inPipe, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	if got := taken + int64(inPipe); got < int64(len(big)) {
		t.Fatalf("flush returned with %d of %d bytes written", got, len(big))
	}
}
