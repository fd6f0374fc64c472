package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newWriter starts the writer goroutine for out, with the least bound.
func newWriter(out io.Writer) *writer { return newBoundedWriter(out, minIntakeBoundBytes) }

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

// watchedWriter is a bounded writer whose sends and waits for room a test
// watches: the most bytes ever sent and not yet read by the client, and
// how many calls wait for room now.
type watchedWriter struct {
	*writer
	read    *atomic.Int64 // bytes the client has taken from the pipe (handedCounter)
	waiting atomic.Int32  // calls in takeRoom now

	mu      sync.Mutex // guards sent, lines, most and biggest
	sent    int64      // bytes of messages sent
	lines   int        // messages sent
	most    int64      // the most bytes sent and not yet read, counting the message being sent
	biggest int        // the longest message sent
}

func (w *watchedWriter) send(msg []byte) {
	w.count(msg)
	w.writer.send(msg)
}

// sendHanded is how replies come: it must be watched as send is.
func (w *watchedWriter) sendHanded(msg []byte, h *handoff) {
	w.count(msg)
	w.writer.sendHanded(msg, h)
}

// count records one message sent.
func (w *watchedWriter) count(msg []byte) {
	w.mu.Lock()
	w.sent += int64(len(msg))
	w.lines++
	w.most = max(w.most, w.sent-w.read.Load())
	w.biggest = max(w.biggest, len(msg))
	w.mu.Unlock()
}

func (w *watchedWriter) takeRoom(done <-chan struct{}) (func(), bool) {
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	return w.writer.takeRoom(done)
}

// snapshot returns lines, most and biggest.
func (w *watchedWriter) snapshot() (lines int, most int64, biggest int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines, w.most, w.biggest
}

// handedCounter counts the bytes an io.PipeWriter's writes returned, which
// the pipe's reader has all taken by then: what the client holds, counted
// before the writer counts it written and gives room for the next reply.
// Counted by the reader instead, a read the reader holds but has not yet
// added can make a reply queued on that room look past the bound.
type handedCounter struct {
	w io.Writer
	n *atomic.Int64
}

func (c handedCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// stalledSession serves a session whose client reads nothing until the
// test reads outR, through a writer bounded at bound.
func stalledSession(t *testing.T, bound int) (ss *session, out *watchedWriter, notices <-chan string, in *io.PipeWriter, outR *io.PipeReader) {
	inR, in := io.Pipe()
	outR, outW := io.Pipe()
	read := new(atomic.Int64)
	out = &watchedWriter{writer: newBoundedWriter(handedCounter{outW, read}, bound), read: read}
	notices = noticeChannel(out.writer)
	ss = newSession(testConfig(), out, nil)
	go func() { _ = ss.serve(inR) }()
	t.Cleanup(func() {
		in.Close()
		outR.Close()
		ss.cancelAll()
		for _, j := range ss.reg.list() {
			killGroup(j.pid)
		}
	})
	return ss, out, notices, in, outR
}

// TestBurstOfLargeResultsWaitsForRoom: requests that arrive at once are
// all read before any reply is queued. When their jobs finish with nobody
// reading, each call builds its reply only once fewer than the bound's
// bytes wait, so the queue never holds more than the bound and one reply
// (it held every reply before). Read again, every reply arrives whole.
func TestBurstOfLargeResultsWaitsForRoom(t *testing.T) {
	onLinux(t)
	t.Parallel()
	const (
		bound    = 256 << 10
		requests = 40
		output   = 64 << 10
	)
	ss, out, notices, in, outR := stalledSession(t, bound)
	var burst []byte
	for i := range requests {
		burst = fmt.Appendf(burst, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute","arguments":{"command":"head -c %d /dev/zero | tr '\\0' a"}}}`+"\n", i, output)
	}
	// One write, taken by one read of the session's: every request is read
	// before any of them runs.
	if _, err := in.Write(burst); err != nil {
		t.Fatal(err)
	}
	if n := awaitNotice(t, notices, jobDeadline); !strings.Contains(n, "no request is read") {
		t.Fatalf("notice %q: want the intake paused", n)
	}
	// Paused, nothing more is queued until the client reads: every call
	// ends replied or waiting for room, its job delivered.
	eventually(t, jobDeadline, "every call replied or waiting for room", func() bool {
		lines, _, _ := out.snapshot()
		return lines+int(out.waiting.Load()) == requests && len(ss.reg.list()) == 0
	})
	lines, most, biggest := out.snapshot()
	t.Logf("stalled: %d replies queued (%d bytes at most, the longest %d), %d calls wait for room", lines, most, biggest, out.waiting.Load())
	if most > bound+int64(biggest) {
		t.Fatalf("%d bytes waited for the client: more than the bound %d and one reply (%d)", most, bound, biggest)
	}
	if lines > bound/output+1 {
		t.Fatalf("%d replies were built with nobody reading; room for %d", lines, bound/output+1)
	}

	replies := newLineReader(t, outR)
	seen := map[int]bool{}
	for range requests {
		line := replies.next(jobDeadline)
		var reply struct {
			ID     int
			Result struct{ Content []struct{ Text string } }
		}
		var res resultJSON
		if err := json.Unmarshal(line, &reply); err != nil || len(reply.Result.Content) != 1 ||
			json.Unmarshal([]byte(reply.Result.Content[0].Text), &res) != nil {
			t.Fatalf("reply %.200s: not a tool result (%v)", line, err)
		}
		if seen[reply.ID] || res.State != stateSuccess || res.Stdout == nil || res.Stdout.TotalBytes != output ||
			res.Stdout.Data != strings.Repeat("a", output) {
			t.Fatalf("reply %d (seen before: %v): state %s, stdout %+.200v", reply.ID, seen[reply.ID], res.State, res.Stdout)
		}
		seen[reply.ID] = true
	}
	if _, most, biggest := out.snapshot(); most > bound+int64(biggest) {
		t.Fatalf("%d bytes waited for the client as it read: more than the bound %d and one reply (%d)", most, bound, biggest)
	}
}

// TestCancelledWaitForRoomLeavesTheJobCollectable: a wait whose job ended
// while the client was not reading has delivered it, and waits for room
// for its result; cancelled there, it gives the job back, to be collected
// by the next wait.
func TestCancelledWaitForRoomLeavesTheJobCollectable(t *testing.T) {
	onLinux(t)
	t.Parallel()
	const bound = 4096
	ss, out, notices, in, outR := stalledSession(t, bound)
	j := startJob(t, ss.reg, "read line; echo collectable")
	// Read while the queue is empty, the wait holds the job and blocks.
	if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":[%q],"timeout":60}}}`+"\n", j.id); err != nil {
		t.Fatal(err)
	}
	// Read is not yet run: a request read as a pause begins waits for it.
	awaitWatchers(t, ss.reg, j, 1)
	out.send([]byte(strings.Repeat(" ", bound) + "\n")) // the client reads none of it: no room
	if n := awaitNotice(t, notices, jobDeadline); !strings.Contains(n, "no request is read") {
		t.Fatalf("notice %q: want the intake paused", n)
	}
	if err := j.input(plainWaiter(), "", true); err != nil { // the job ends
		t.Fatal(err)
	}
	eventually(t, jobDeadline, "the wait delivering the job and waiting for room", func() bool {
		return out.waiting.Load() == 1 && len(ss.reg.list()) == 0
	})
	// What the reader does with notifications/cancelled; the reader itself
	// reads nothing while the client does not.
	ss.cancelRequest(message{params: json.RawMessage(`{"requestId":1}`)})
	eventually(t, jobDeadline, "the cancelled wait giving the job back", func() bool {
		jobs := ss.reg.list()
		return out.waiting.Load() == 0 && len(jobs) == 1 && jobs[0] == j
	})

	replies := newLineReader(t, outR)
	if filler := replies.next(jobDeadline); len(filler) != bound+1 {
		t.Fatalf("first line %.100q: want the filler", filler)
	}
	if got := decodeReply(t, replies.next(jobDeadline)); fmt.Sprint(got["error"]) != fmt.Sprint(map[string]any{"code": json.Number("-32800"), "message": "request cancelled"}) {
		t.Fatalf("cancelled wait answered %v, want -32800", got)
	}
	if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":[%q],"timeout":60}}}`+"\n", j.id); err != nil {
		t.Fatal(err)
	}
	if line := replies.next(jobDeadline); !bytes.Contains(line, []byte(`\"data\":\"collectable\\n\"`)) {
		t.Fatalf("the next wait answered %s, want the job's result", line)
	}
}

// TestCancelledExecuteWaitingForRoomLeavesNoTrace: a blocking execute whose
// job ended while the client was not reading, cancelled as it waits for
// room, forgets its job: nobody else knows the id, so giving it back (as a
// wait's is) would leave a stray job in list_jobs.
func TestCancelledExecuteWaitingForRoomLeavesNoTrace(t *testing.T) {
	onLinux(t)
	t.Parallel()
	const bound = 4096
	ss, out, notices, in, _ := stalledSession(t, bound)
	if _, err := fmt.Fprint(in, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"read line; echo untraced"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	var j *job
	eventually(t, jobDeadline, "the execute's job running", func() bool {
		jobs := ss.reg.list()
		if len(jobs) == 1 {
			j = jobs[0]
		}
		return j != nil
	})
	out.send([]byte(strings.Repeat(" ", bound) + "\n")) // the client reads none of it: no room
	if n := awaitNotice(t, notices, jobDeadline); !strings.Contains(n, "no request is read") {
		t.Fatalf("notice %q: want the intake paused", n)
	}
	if err := j.input(plainWaiter(), "", true); err != nil { // the job ends
		t.Fatal(err)
	}
	eventually(t, jobDeadline, "the execute delivering its job and waiting for room", func() bool {
		return out.waiting.Load() == 1 && len(ss.reg.list()) == 0
	})
	ss.cancelRequest(message{params: json.RawMessage(`{"requestId":1}`)})
	eventually(t, jobDeadline, "the cancelled execute ending", func() bool { return out.waiting.Load() == 0 })
	ss.handlers.Wait() // its reply is queued: whatever it gives back is back
	if jobs := ss.reg.list(); len(jobs) != 0 {
		t.Fatalf("a cancelled execute left %d job(s) in list_jobs", len(jobs))
	}
}

// TestRoomWaitEndsWithItsCallOrTheClient: a call waiting for room stops
// waiting when it is cancelled, and every waiter stops when the client is
// gone; none of them holds room then.
func TestRoomWaitEndsWithItsCallOrTheClient(t *testing.T) {
	t.Parallel()
	outR, outW := io.Pipe()
	w := newBoundedWriter(outW, 100)
	_ = noticeChannel(w)
	w.send([]byte(strings.Repeat(" ", 100) + "\n")) // the bound: no room until the client reads

	cancelled := make(chan struct{})
	close(cancelled)
	if _, ok := w.takeRoom(cancelled); ok {
		t.Fatal("a cancelled call got room with the queue full")
	}
	got := make(chan bool, 2) // carries each waiter's ok
	for range 2 {             // one holds the ticket and waits for the client, the other for the ticket
		go func() { _, ok := w.takeRoom(nil); got <- ok }()
	}
	outR.CloseWithError(errors.New("the client is gone"))
	for range 2 {
		if ok := receive(t, "a waiter for room", got); ok {
			t.Fatal("a waiter got room from a client that is gone")
		}
	}
	if _, ok := w.takeRoom(nil); ok {
		t.Fatal("room was given after the client left")
	}
}

// gateSink is a replySink and intakeGate whose pause the test sets: each
// message sent is passed on sent, and awaitRoom blocks while paused.
type gateSink struct {
	mu     sync.Mutex
	paused bool
	opened chan struct{} // closed when the pause ends
	sent   chan []byte   // carries each message sent
}

func (g *gateSink) send(msg []byte) { g.sent <- append([]byte(nil), msg...) }

func (g *gateSink) awaitRoom() {
	g.mu.Lock()
	paused, opened := g.paused, g.opened
	g.mu.Unlock()
	if paused {
		<-opened
	}
}

func (g *gateSink) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paused, g.opened = true, make(chan struct{})
}

func (g *gateSink) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paused = false
	close(g.opened)
}

// TestPauseBegunDuringABlockedReadHoldsTheLine: a reader that was already
// blocked reading when the intake paused (a reply queued meanwhile reached
// the bound) read the next request and ran it, so a stalled client's
// server started one job more than the pause allowed.
func TestPauseBegunDuringABlockedReadHoldsTheLine(t *testing.T) {
	t.Parallel()
	g := &gateSink{sent: make(chan []byte, 4)}
	inR, inW := io.Pipe()
	ss := newSession(testConfig(), g, nil)
	go func() { _ = ss.serve(inR) }()
	t.Cleanup(func() { inW.Close() })

	if _, err := fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("no reply to the first ping")
	}
	// The reader now blocks reading the next line (or, on a loaded
	// machine, is about to): pause under it. The write returns once the
	// line was read, which a reader that saw the pause first does only
	// after it; it must not hold the test, so it runs on its own.
	g.pause()
	wrote := make(chan error, 1)
	go func() {
		_, err := fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		wrote <- err
	}()
	select {
	case msg := <-g.sent:
		t.Fatalf("a request read across the start of a pause was answered during it: %s", msg)
	case <-time.After(200 * time.Millisecond): // nothing may happen: there is no event to await
	}
	g.resume()
	select {
	case msg := <-g.sent:
		if !strings.Contains(string(msg), `"id":2`) {
			t.Fatalf("after the pause: %s", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not answered once the pause ended")
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// directPipe returns a writer on a non-blocking os.Pipe, so senders try
// their own writes, and the pipe's read end.
func directPipe(t *testing.T) (*writer, *os.File) {
	t.Helper()
	r, wf, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); wf.Close() })
	w := newWriter(wf)
	if w.direct == nil {
		t.Fatal("os.Pipe's write end is not taken as non-blocking")
	}
	return w, r
}

// numberedLine is line i of a test: its number, padded to size bytes.
func numberedLine(i, size int) []byte {
	line := fmt.Appendf(nil, "%d ", i)
	return append(append(line, bytes.Repeat([]byte{'x'}, max(0, size-len(line)-1))...), '\n')
}

func TestDirectWritesKeepOrderPastAFullPipe(t *testing.T) {
	t.Parallel()
	w, r := directPipe(t)
	sizes := []int{40, 200 << 10, 60, 70 << 10, 10, 1 << 20, 33, 64 << 10, 5}
	var want [][]byte
	for i := range 60 {
		want = append(want, numberedLine(i, sizes[i%len(sizes)]))
	}
	got := make(chan error, 1) // carries the reader's verdict
	go func() {
		br := bufio.NewReaderSize(r, 1<<16)
		for i, line := range want {
			l, err := br.ReadBytes('\n')
			if err != nil || !bytes.Equal(l, line) {
				got <- fmt.Errorf("line %d: %d bytes (err %v), want %d", i, len(l), err, len(line))
				return
			}
		}
		got <- nil
	}()
	for _, line := range want {
		w.send(line)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lines did not all arrive")
	}
}

func TestDirectSenderNeverWaitsOnAStalledClient(t *testing.T) {
	t.Parallel()
	w, r := directPipe(t)
	big := numberedLine(0, 4<<20) // far past a pipe's buffer
	sent := make(chan struct{})   // closed once both sends returned
	go func() {
		w.send(big)
		w.send(numberedLine(1, 100))
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("send waited for a client that does not read")
	}
	br := bufio.NewReader(r)
	for i, want := range [][]byte{big, numberedLine(1, 100)} {
		line, err := br.ReadBytes('\n')
		if err != nil || !bytes.Equal(line, want) {
			t.Fatalf("line %d: %d bytes (err %v), want %d", i, len(line), err, len(want))
		}
	}
}

func TestDirectWritesFromManySendersNeverInterleave(t *testing.T) {
	t.Parallel()
	w, r := directPipe(t)
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				w.send(numberedLine(s*each+i, 100+(i%7)*20000))
			}
		}()
	}
	seen := make(map[int]bool)
	br := bufio.NewReader(r)
	for range senders * each {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if _, err := fmt.Sscanf(string(line), "%d ", &n); err != nil || seen[n] || !bytes.Equal(line, numberedLine(n, len(line))) {
			t.Fatalf("a line of %d bytes is torn or repeated (number %d)", len(line), n)
		}
		seen[n] = true
	}
	wg.Wait()
}
