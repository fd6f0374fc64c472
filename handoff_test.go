package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// deliveredTo runs a wait on j with handoff h until j is delivered to it.
func deliveredTo(t *testing.T, reg *registry, j *job, h *handoff) {
	t.Helper()
	w := &waiter{ctx: context.Background(), handoff: h}
	got, _, err := reg.await(w, []*job{j}, awaitOptions{deadline: time.Now().Add(jobDeadline)})
	if err != nil || got[j.id] != j {
		t.Fatalf("wait on %s: delivered %v, %v", j.id, got, err)
	}
}

// TestGivenBackJobIsWaitableAgain: a job whose reply was never written is
// back in its registry for the next wait; one whose reply was written is
// "delivered to an earlier call".
func TestGivenBackJobIsWaitableAgain(t *testing.T) {
	onLinux(t)
	reg := newRegistry(testConfig())
	lost, sent := startJob(t, reg, "true"), startJob(t, reg, "true")
	hLost, hSent := &handoff{}, &handoff{}
	deliveredTo(t, reg, lost, hLost)
	deliveredTo(t, reg, sent, hSent)
	hLost.giveBack()
	hSent.settled()
	if j, err := reg.lookup(lost.id); err != nil || j != lost {
		t.Fatalf("a job whose reply was lost: %v, %v; want it waitable again", j, err)
	}
	var dj deliveredJob
	if _, err := reg.lookup(sent.id); !errors.As(err, &dj) {
		t.Fatalf("a job whose reply was written: %v; want delivered to an earlier call", err)
	}
	hLost.settled() // a late settle changes nothing
	if j, err := reg.lookup(lost.id); err != nil || j != lost {
		t.Fatalf("a lost reply settled late: %v, %v; want it waitable still", j, err)
	}
}

// TestLookupWaitsForAReplyOnItsWay: a call that names a job whose result an
// earlier reply is still carrying gets the job if that reply is lost, and
// "delivered" if it arrives; it never answers before either.
func TestLookupWaitsForAReplyOnItsWay(t *testing.T) {
	onLinux(t)
	for _, arrives := range []bool{false, true} {
		reg := newRegistry(testConfig())
		j := startJob(t, reg, "true")
		h := &handoff{}
		deliveredTo(t, reg, j, h)
		type found struct {
			jobs []*job
			err  error
		}
		answer := make(chan found, 1) // carries the later call's lookup
		go func() {
			jobs, err := reg.lookupAll([]string{j.id}, false)
			answer <- found{jobs, err}
		}()
		select {
		case f := <-answer:
			t.Fatalf("the lookup answered while the reply was on its way: %v, %v", f.jobs, f.err)
		case <-time.After(50 * time.Millisecond):
		}
		if arrives {
			h.settled()
		} else {
			h.giveBack()
		}
		f := <-answer
		var dj deliveredJob
		switch {
		case arrives && !errors.As(f.err, &dj):
			t.Errorf("after the reply arrived: %v, %v; want delivered to an earlier call", f.jobs, f.err)
		case !arrives && (f.err != nil || f.jobs[0] != j):
			t.Errorf("after the reply was lost: %v, %v; want the job", f.jobs, f.err)
		}
	}
}

// TestLookupPastTheHandingBoundAnswersDelivered: a reply that stays on its
// way longer than the lookup's bound (a client that stopped reading) makes
// a later lookup answer "delivered", never an empty lookup: the old loop
// returned no jobs and no error, and the call then used a nil job.
func TestLookupPastTheHandingBoundAnswersDelivered(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "true")
	h := &handoff{}
	deliveredTo(t, reg, j, h)
	defer h.settled()
	jobs, err := reg.lookupAll([]string{j.id}, false)
	var dj deliveredJob
	if !errors.As(err, &dj) || jobs != nil {
		t.Fatalf("past the bound: %v, %v; want delivered to an earlier call", jobs, err)
	}
}

// failingWriter is a stdout whose client is gone.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestUnwrittenReplyGivesItsJobsBack: a reply that stdout could not write
// gives back what its call delivered.
func TestUnwrittenReplyGivesItsJobsBack(t *testing.T) {
	onLinux(t)
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "true")
	h := &handoff{}
	deliveredTo(t, reg, j, h)
	w := newBoundedWriter(failingWriter{}, 1<<20)
	w.notice = func(string, ...any) {}
	w.sendHanded([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"), h)
	if !waitFor(w.gone, jobDeadline) {
		t.Fatal("the failing write was never seen")
	}
	if got, err := reg.lookup(j.id); err != nil || got != j {
		t.Fatalf("after the reply failed to be written: %v, %v; want the job back", got, err)
	}
}

// TestResponseStreamGivesBackWhatItNeverWrote: a reply made for an HTTP
// response that had already ended (its client left) gives its jobs back,
// and so does one queued when the response ends unwritten.
func TestResponseStreamGivesBackWhatItNeverWrote(t *testing.T) {
	onLinux(t)
	for _, endFirst := range []bool{true, false} {
		reg := newRegistry(testConfig())
		j := startJob(t, reg, "true")
		h := &handoff{}
		deliveredTo(t, reg, j, h)
		s := newResponseStream(json.RawMessage("1"))
		if endFirst {
			s.end()
		}
		s.sendParts(replyParts{result: toolText("{}")}, h)
		if !endFirst {
			s.end()
		}
		if got, err := reg.lookup(j.id); err != nil || got != j {
			t.Errorf("end first %v: %v, %v; want the job back", endFirst, got, err)
		}
	}
}

// tcpPair returns both ends of a loopback TCP connection, closed with t.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// awaitClientEOF returns once the server's end has seen its client's FIN.
func awaitClientEOF(t *testing.T, server net.Conn) {
	t.Helper()
	if err := server.SetReadDeadline(time.Now().Add(jobDeadline)); err != nil {
		t.Fatal(err)
	}
	if n, err := server.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the server's read: %d, %v; want the client's EOF", n, err)
	}
}

// replyOutcome delivers a job to a call, writes the call's reply on a
// fresh connection with client doing what the case says around it, then
// settles or gives back as the HTTP transport does. It reports whether
// the job was counted delivered.
func replyOutcome(t *testing.T, beforeReply, afterReply func(server, client *net.TCPConn)) bool {
	t.Helper()
	onLinux(t)
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "true")
	h := &handoff{}
	deliveredTo(t, reg, j, h)
	server, client := tcpPair(t)
	ctx := context.WithValue(context.Background(), connKey{}, &guardedConn{Conn: server})
	beforeReply(server, client)
	_, err := server.Write([]byte("reply"))
	afterReply(server, client)
	settleUnlessGone(ctx, err, h)
	var dj deliveredJob
	_, err = reg.lookup(j.id)
	return errors.As(err, &dj)
}

// readReply reads the five bytes of replyOutcome's reply.
func readReply(t *testing.T, client *net.TCPConn) {
	t.Helper()
	got := make([]byte, 5)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "reply" {
		t.Fatalf("the client read %q, %v", got, err)
	}
}

// TestReplyReadThenClosedIsDelivered: a client that read its whole reply
// and closed at once (as a one-request HTTP client does) got its result;
// the server once took the close it saw after its write for a client that
// had left, and a second wait got the result again.
func TestReplyReadThenClosedIsDelivered(t *testing.T) {
	delivered := replyOutcome(t, func(_, _ *net.TCPConn) {}, func(server, client *net.TCPConn) {
		readReply(t, client)
		client.Close()
		awaitClientEOF(t, server) // the close is known before the server looks
	})
	if !delivered {
		t.Fatal("a reply the client read, then closed, was given back")
	}
}

// TestReplyToAClientThatLeftIsGivenBack: a write into the socket of a
// client that closed succeeds; the client's reset tells the server.
func TestReplyToAClientThatLeftIsGivenBack(t *testing.T) {
	left := func(server, client *net.TCPConn) {
		client.Close()
		awaitClientEOF(t, server)
	}
	if replyOutcome(t, left, func(_, _ *net.TCPConn) {}) {
		t.Fatal("a reply written after its client closed was counted delivered")
	}
}

// TestReplyToAHalfClosedClientIsDelivered: a client that shut only its
// writing end still reads its reply.
func TestReplyToAHalfClosedClientIsDelivered(t *testing.T) {
	shut := func(server, client *net.TCPConn) {
		client.CloseWrite()
		awaitClientEOF(t, server)
	}
	if !replyOutcome(t, shut, func(_, client *net.TCPConn) { readReply(t, client) }) {
		t.Fatal("a reply read by a half-closed client was given back")
	}
}

// TestHTTPWaitDroppedAsItsJobEndsLosesNoResult: a blocking wait whose
// client shuts its end of the connection as the job's result is made
// either reaches the client (which can still read after shutting its
// writing end) or stays for the next wait; it never counts as delivered
// when no byte of it was sent.
func TestHTTPWaitDroppedAsItsJobEndsLosesNoResult(t *testing.T) {
	url := httpServer(t)
	resp, _ := post(t, url, initBody, nil)
	session := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id")}
	const rounds = 20
	lostByClient := 0
	for round := 0; round < rounds; round++ {
		_, text := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo round`+fmt.Sprint(round)+`","nowait":true}}}`, session)
		id := between(text, `job_id\":\"`, `\"`)
		if id == "" {
			t.Fatalf("round %d: no job id in %s", round, text)
		}
		wait := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":["` + id + `"]}}}`
		got := waitShuttingWrites(t, url, wait, session["Mcp-Session-Id"])
		if strings.Contains(got, "round"+fmt.Sprint(round)) {
			continue // the result reached the client
		}
		lostByClient++
		_, again := post(t, url, strings.Replace(wait, `"id":2`, `"id":3`, 1), session)
		if !strings.Contains(again, "round"+fmt.Sprint(round)) {
			t.Fatalf("round %d: the dropped wait read nothing (%q), and the next wait found no result: %s", round, got, again)
		}
	}
	t.Logf("%d of %d dropped waits left their result for the next wait", lostByClient, rounds)
}

// waitShuttingWrites posts body on a connection of its own, shuts the
// connection's writing end at once (the server sees its client leave) and
// returns whatever response bytes still arrive.
func waitShuttingWrites(t *testing.T, url, body, session string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(jobDeadline)); err != nil {
		t.Fatal(err)
	}
	head := "POST /mcp HTTP/1.1\r\nHost: " + strings.TrimPrefix(url, "http://") +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: " + session +
		"\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n"
	if _, err := conn.Write([]byte(head + body)); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(conn)
	return string(got)
}
