package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// noticeChannel makes w's notices arrive on the returned channel instead
// of stderr. Call it before w is used.
func noticeChannel(w *writer) <-chan string {
	notices := make(chan string, 256) // carries each notice; far more than a test provokes, so a notice never waits
	w.notice = func(format string, args ...any) { notices <- fmt.Sprintf(format, args...) }
	return notices
}

// awaitNotice returns the next notice, failing the test after timeout.
func awaitNotice(t *testing.T, notices <-chan string, timeout time.Duration) string {
	t.Helper()
	select {
	case n := <-notices:
		return n
	case <-time.After(timeout):
		t.Fatalf("no notice within %v", timeout)
		return ""
	}
}

// lineReader reads lines from r on its own goroutine; next returns each,
// failing the test after timeout.
type lineReader struct {
	t     *testing.T
	lines chan []byte // carries each line read, with its newline
}

func newLineReader(t *testing.T, r io.Reader) *lineReader {
	lr := &lineReader{t: t, lines: make(chan []byte)}
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				close(lr.lines)
				return
			}
			lr.lines <- line
		}
	}()
	return lr
}

func (lr *lineReader) next(timeout time.Duration) []byte {
	lr.t.Helper()
	select {
	case line, ok := <-lr.lines:
		if !ok {
			lr.t.Fatalf("the output ended")
		}
		return line
	case <-time.After(timeout):
		lr.t.Fatalf("no line within %v", timeout)
		return nil
	}
}

// TestStalledClientStopsRequestIntake: a client that sends requests but
// reads nothing gets no more of them read once the replies waiting for it
// reach the writer's bound; when it reads again, every request is read and
// every reply arrives, in order.
func TestStalledClientStopsRequestIntake(t *testing.T) {
	t.Parallel()
	const (
		bound    = 4096
		requests = 300
		firstID  = 1000 // ids of four digits: every reply is the same size
	)
	replySize := len(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", firstID))
	readBeforePause := (bound + replySize - 1) / replySize // the request whose reply reaches the bound is the last read

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	out := newBoundedWriter(outW, bound)
	notices := noticeChannel(out)
	ss := newSession(testConfig(), out, nil)
	go func() { _ = ss.serve(inR) }()
	t.Cleanup(func() { inW.Close(); outR.Close() })

	// One ping per write: a write returns once the session has read its
	// line. Each finished write is reported, with whether the client was
	// reading replies by then.
	var reading atomic.Bool
	type written struct {
		n             int
		clientHadRead bool
		err           error
	}
	writes := make(chan written, requests) // carries each finished write
	go func() {
		for i := 0; i < requests; i++ {
			_, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", firstID+i)
			writes <- written{i + 1, reading.Load(), err}
			if err != nil {
				return
			}
		}
	}()

	if n := awaitNotice(t, notices, 10*time.Second); !strings.Contains(n, "no request is read") {
		t.Fatalf("notice %q: want the intake paused", n)
	}
	for i := 1; i <= readBeforePause; i++ {
		select {
		case w := <-writes:
			if w.err != nil {
				t.Fatalf("request %d: %v", w.n, w.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d requests were read before the pause; want %d (%d-byte replies, bound %d)", i-1, readBeforePause, replySize, bound)
		}
	}

	if len(writes) > 0 {
		t.Fatalf("request %d was read while the intake was paused", readBeforePause+1)
	}
	reading.Store(true)
	replies := newLineReader(t, outR)
	for i := 0; i < requests; i++ {
		line := replies.next(10 * time.Second)
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", firstID+i); !bytes.Equal(line, []byte(want)) {
			t.Fatalf("reply %d: %s, want %s", i, line, want)
		}
	}
	for i := readBeforePause + 1; i <= requests; i++ {
		// Every request has been read: its reply came.
		if w := <-writes; w.err != nil || !w.clientHadRead {
			t.Fatalf("request %d was read (error %v) before the client read any reply; the intake should have paused after %d", w.n, w.err, readBeforePause)
		}
	}
	// Reading on, the session may have paused and resumed again: the
	// intake is open once a resume is said.
	for n := ""; !strings.Contains(n, "requests are read again"); {
		n = awaitNotice(t, notices, 10*time.Second)
	}
}

// TestStalledClientLosesProgressNotReplies: while the writer's bound is
// reached, progress and log notifications are dropped and replies are
// not; the resume notice counts what was dropped.
func TestStalledClientLosesProgressNotReplies(t *testing.T) {
	t.Parallel()
	outR, outW := io.Pipe()
	t.Cleanup(func() { outR.Close() })
	w := newBoundedWriter(outW, 100)
	notices := noticeChannel(w)
	line := func(s string, size int) []byte { return []byte(s + strings.Repeat(" ", size-len(s)-1) + "\n") }

	w.send(line("reply 1", 60))
	w.sendDroppable(line("progress 1", 30)) // 90 bytes wait: under the bound, kept
	w.send(line("reply 2", 60))             // 150: the bound is reached
	if n := awaitNotice(t, notices, 10*time.Second); !strings.Contains(n, "no request is read") {
		t.Fatalf("notice %q: want the intake paused", n)
	}
	w.sendDroppable(line("progress 2", 30)) // dropped
	w.send(line("reply 3", 60))             // kept: replies are never dropped

	got := newLineReader(t, outR)
	var firsts []string
	for len(firsts) < 4 {
		firsts = append(firsts, strings.TrimSpace(string(got.next(10*time.Second))))
	}
	if want := []string{"reply 1", "progress 1", "reply 2", "reply 3"}; strings.Join(firsts, "|") != strings.Join(want, "|") {
		t.Errorf("written %q, want %q", firsts, want)
	}
	if n := awaitNotice(t, notices, 10*time.Second); !strings.Contains(n, "(1 progress or log notifications were dropped)") {
		t.Errorf("notice %q: want one dropped notification counted", n)
	}
}
