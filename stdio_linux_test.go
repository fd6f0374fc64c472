package main

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFlushAfterADirectWriteWaitsForTheRest(t *testing.T) {
	t.Parallel()
	w, r := directPipe(t)
	big := numberedLine(0, 1<<20) // the pipe takes a part; the writer goroutine the rest
	w.send(big)
	var taken atomic.Int64 // bytes the client has read
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			taken.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	w.flush(30 * time.Second)
	// Once flush returned every byte is read or waits in the pipe: what
	// the pipe holds, then what was read since, add up to the whole line.
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var inPipe int
	if cerr := rc.Control(func(fd uintptr) { inPipe, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	if got := taken.Load() + int64(inPipe); got < int64(len(big)) {
		t.Fatalf("flush returned with %d of %d bytes written", got, len(big))
	}
}
