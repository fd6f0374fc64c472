package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// finishedJobs is a registry holding n finished, uncollected jobs, made
// without running anything, as list_jobs sees them after n nowait executes
// of true.
func finishedJobs(n int) *registry {
	reg := newRegistry(testConfig())
	done := make(chan struct{})
	close(done)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for i := 1; i <= n; i++ {
		j := &job{id: strconv.Itoa(i), done: done, final: outcome{state: stateSuccess}}
		reg.listLocked(j)
	}
	return reg
}

// BenchmarkListJobs is list_jobs on 10,000 finished jobs, its reply line
// built as the session sends it.
func BenchmarkListJobs(b *testing.B) {
	reg := finishedJobs(10000)
	id := []byte("7")
	shape := replyShape{}
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter(), replyOverhead: len(textReply(id, shape, nil)) + len(waitWrapOpen) + 1}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.reply(runListJobs(c, &noArgs{}))
		if err != nil {
			b.Fatal(err)
		}
		sink = encodeReply(id, shape, res, nil)
	}
}

// BenchmarkAppendQuotedList escapes list_jobs' text for 10,000 jobs into
// its reply line: mostly quotes, a few bytes apart.
func BenchmarkAppendQuotedList(b *testing.B) {
	reg := finishedJobs(10000)
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter()}
	res, _ := runListJobs(c, &noArgs{})
	text := []byte(res.(toolText))
	buf := make([]byte, 0, quotedLen(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		sink = appendQuoted(buf[:0], text)
	}
}

// BenchmarkAppendQuotedPlain escapes as much plain text, for comparison.
func BenchmarkAppendQuotedPlain(b *testing.B) {
	text := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789 "), 10000)
	text = append(text, '\n')
	buf := make([]byte, 0, quotedLen(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		sink = appendQuoted(buf[:0], text)
	}
}

// BenchmarkQuotedLenList measures what list_jobs' text for 10,000 jobs
// takes escaped, as its reply budget is counted.
func BenchmarkQuotedLenList(b *testing.B) {
	reg := finishedJobs(10000)
	c := &toolCall{reg: reg, cfg: reg.cfg, waiter: plainWaiter()}
	res, _ := runListJobs(c, &noArgs{})
	text := []byte(res.(toolText))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		benchN = quotedLen(text)
	}
}

// benchN keeps the measuring benchmarks' results from being optimised away.
var benchN int

// chanSink hands each reply line to a channel.
type chanSink chan []byte

func (s chanSink) send(msg []byte) { s <- msg }

// BenchmarkExecuteTrue is a blocking execute of true through a session,
// from its line read to its reply line made: the server's part of the
// execute round trip.
func BenchmarkExecuteTrue(b *testing.B) {
	onLinux(b)
	replies := make(chanSink, 1)
	s := newSession(testConfig(), replies, nil)
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"true"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		s.handleLine(line)
		if reply := <-replies; !bytes.Contains(reply, []byte(`\"state\":\"success\"`)) {
			b.Fatalf("reply %s", reply)
		}
	}
}

// TestWaitNeverAnswersAnEndedJobWithoutItsResult: a wait's entries are
// made after its look for finished jobs, and an ended job left out of that
// look (here held for its tree's port until the time ran out) once got its
// final state with no output while it stayed undelivered: a client read
// it as the result and lost the output. The entry is now the result.
func TestWaitNeverAnswersAnEndedJobWithoutItsResult(t *testing.T) {
	t.Parallel()
	onLinux(t)
	cl := agentSession(t, "2025-03-26")
	res, _, _ := cl.shellTool(1, "execute", map[string]any{"command": "echo out; sleep 60 >/dev/null 2>&1 &", "nowait": true})
	id, _ := res["job_id"].(string)
	_, text, _ := cl.shellTool(2, "wait", map[string]any{"job_ids": []string{id}, "timeout": 1, "until": map[string]any{"listening": 1}})
	var entries []map[string]any
	if json.Unmarshal([]byte(text), &entries) != nil || len(entries) != 1 {
		t.Fatalf("wait: %s", text)
	}
	e := entries[0]
	out, _ := e["stdout"].(map[string]any)
	if e["state"] != "success" || out == nil || out["data"] != "out\n" {
		t.Errorf("the ended job's entry is not its result: %s", text)
	}
	if _, _, isErr := cl.shellTool(3, "kill", map[string]any{"job_id": id, "signal": "KILL"}); isErr {
		t.Error("the lingering sleep could not be killed")
	}
}
