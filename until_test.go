package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// untilEntry runs wait with until on one job and returns its entry and
// how long the wait took.
func untilEntry(t *testing.T, cl *rpcClient, id int, jobID, until string, timeout float64) (map[string]any, time.Duration) {
	t.Helper()
	start := time.Now()
	v, text, isErr := cl.tool(id, "wait", fmt.Sprintf(`{"job_ids":[%q],"timeout":%v,"until":%s}`, jobID, timeout, until))
	if isErr {
		t.Fatalf("wait until %s: %s", until, text)
	}
	return v.([]any)[0].(map[string]any), time.Since(start)
}

// wantMatched fails the test unless entry is a running job's whose
// matched, encoded, is want.
func wantMatched(t *testing.T, entry map[string]any, want string) {
	t.Helper()
	if got, _ := json.Marshal(entry["matched"]); entry["state"] != "running" || string(got) != want {
		t.Fatalf("entry %v, want running with matched %s", entry, want)
	}
}

// expectNoMatch fails when a short wait with until matches a line; why
// says why none should.
func expectNoMatch(t *testing.T, cl *rpcClient, id int, jobID, until, why string) {
	t.Helper()
	if e, _ := untilEntry(t, cl, id, jobID, until, 0.3); e["matched"] != nil {
		t.Errorf("%s, yet %s matched: %v", why, until, e)
	}
}

// startNowait starts command as a nowait job and returns its id.
func startNowait(t *testing.T, cl *rpcClient, id int, command string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"command": command, "nowait": true})
	v, text, isErr := cl.tool(id, "execute", string(args))
	if isErr {
		t.Fatalf("execute %s: %s", command, text)
	}
	return v.(map[string]any)["job_id"].(string)
}

// TestWaitUntilPattern: a running job's matching line ends the wait, soon
// after it is written, and the job runs on; a line written in two pieces
// still matches; next, given as from, looks past the line.
func TestWaitUntilPattern(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	jid := startNowait(t, cl, 1, "echo booting; sleep 0.3; printf 're'; sleep 0.3; printf 'ady on 8080\\n'; exec sleep 30")
	e, took := untilEntry(t, cl, 2, jid, `{"pattern":"^ready on [0-9]+$","stream":"stdout"}`, 20)
	wantMatched(t, e, `{"line":"ready on 8080","next":22,"offset":8,"stream":"stdout"}`)
	if took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("the wait took %v; the line came after about 0.6 s", took)
	}
	expectNoMatch(t, cl, 3, jid, `{"pattern":"ready","from":22}`, "from next on, the line is behind")
	cl.tool(5, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestUntilMatchesALineWrittenBeforeTheWait: a server's ready line printed
// before the wait began ends the wait at once (it waited out its whole
// timeout when until only looked at new output).
func TestUntilMatchesALineWrittenBeforeTheWait(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	jid := startNowait(t, cl, 1, "echo booting; echo 'Serving HTTP on 0.0.0.0 port 8000'; exec sleep 30")
	if e, _ := untilEntry(t, cl, 2, jid, `{"idle":0.3}`, 20); e["idle"] != true { // the line is written before the wait
		t.Fatalf("entry %v", e)
	}
	e, took := untilEntry(t, cl, 3, jid, `{"pattern":"^Serving HTTP"}`, 20)
	wantMatched(t, e, `{"line":"Serving HTTP on 0.0.0.0 port 8000","next":42,"offset":8,"stream":"stdout"}`)
	if took > 2*time.Second {
		t.Errorf("matching a line already written took %v", took)
	}
	expectNoMatch(t, cl, 4, jid, `{"pattern":"HTTP","from":9}`, "the rest of a line begun before from is no complete line")
	cl.tool(5, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestUntilSeesTheKeptHead: with head retention, a line in the kept head
// matches after the window has moved past it; a fragment the window cut
// at its start does not.
func TestUntilSeesTheKeptHead(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_MAX_OUTPUT_BYTES=4096", "MCP_EXEC_KEEP_HEAD_BYTES=64"))
	jid := startNowait(t, cl, 1, "echo 'listening on :9000'; seq 100000 200000; echo settled; exec sleep 30")
	e, _ := untilEntry(t, cl, 2, jid, `{"pattern":"^settled$"}`, 20)
	if e["matched"] == nil {
		t.Fatalf("entry %v", e)
	}
	e, _ = untilEntry(t, cl, 3, jid, `{"pattern":"^listening on"}`, 5)
	wantMatched(t, e, `{"line":"listening on :9000","next":19,"offset":0,"stream":"stdout"}`)
	// The window's first bytes continue a line it no longer holds: "...0\n"
	// may end any number; only whole lines such as "199999" count.
	expectNoMatch(t, cl, 4, jid, `{"pattern":"^[0-9]{1,5}$"}`, "the fragment the window cut is no line")
	cl.tool(5, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestWaitUntilIdle: idle returns once the job has been quiet that long,
// and not before.
func TestWaitUntilIdle(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	// Timed from before the start, not from the wait: the job runs while
	// its start is answered and the wait is sent, which on a loaded
	// machine took long enough (14 ms) to fail a correct answer.
	began := time.Now()
	jid := startNowait(t, cl, 1, "for i in 1 2 3; do echo $i; sleep 0.2; done; exec sleep 30")
	e, _ := untilEntry(t, cl, 2, jid, `{"idle":0.5}`, 20)
	if e["idle"] != true || e["state"] != "running" {
		t.Fatalf("entry %v", e)
	}
	if took := time.Since(began); took < 900*time.Millisecond { // 0.4 s of output, then 0.5 s quiet
		t.Errorf("idle after %v from the start, before the job went quiet", took)
	}
	cl.tool(3, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestWaitUntilStillDeliversFinished: a job that ends is delivered as
// always; until only adds reasons to return.
func TestWaitUntilStillDeliversFinished(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	jid := startNowait(t, cl, 1, "echo done")
	e, _ := untilEntry(t, cl, 2, jid, `{"pattern":"never"}`, 10)
	if e["state"] != "success" || e["matched"] != nil {
		t.Errorf("entry %v", e)
	}
	_, text, isErr := cl.tool(3, "wait", `{"job_ids":["1"],"until":{"pattern":"("}}`)
	if !isErr || !strings.Contains(text, "until.pattern") {
		t.Errorf("a bad pattern: %s", text)
	}
}

// executeUntil runs execute with until and returns its result and how long
// it took.
func executeUntil(t *testing.T, cl *rpcClient, id int, command, until string, extra string) (map[string]any, string, time.Duration) {
	t.Helper()
	start := time.Now()
	v, text, isErr := cl.tool(id, "execute", fmt.Sprintf(`{"command":%q,"until":%s%s}`, command, until, extra))
	if isErr {
		t.Fatalf("execute until %s: %s", until, text)
	}
	return v.(map[string]any), text, time.Since(start)
}

// TestExecuteUntilReturnsOnTheLineWithTheJobRunning: execute starts a
// server and returns on its ready line; the job runs on for wait and kill.
func TestExecuteUntilReturnsOnTheLineWithTheJobRunning(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	r, _, took := executeUntil(t, cl, 1, "echo starting; sleep 0.3; echo 'ready on 8080' >&2; exec sleep 30", `{"pattern":"^ready on"}`, "")
	wantMatched(t, r, `{"line":"ready on 8080","next":14,"offset":0,"stream":"stderr"}`)
	if r["yielded"] != nil {
		t.Errorf("yielded with a match: %v", r)
	}
	if took > 5*time.Second {
		t.Errorf("execute took %v; the line came after about 0.3 s", took)
	}
	jid := r["job_id"].(string)
	if v, _, _ := cl.tool(2, "status", fmt.Sprintf(`{"job_id":%q}`, jid)); v.(map[string]any)["state"] != "running" {
		t.Errorf("the job after until: %v", v)
	}
	cl.tool(3, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestExecuteUntilEndsAsTheJobDoes: a job that ends before the line comes
// answers with its whole result; idle returns on quiet; yield_after still
// yields; nowait with until is refused.
func TestExecuteUntilEndsAsTheJobDoes(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	r, _, _ := executeUntil(t, cl, 1, "echo one; exit 3", `{"pattern":"never"}`, "")
	if r["state"] != "error" || r["exit_code"] != float64(3) || r["matched"] != nil {
		t.Errorf("a job that ended first: %v", r)
	}
	r, _, took := executeUntil(t, cl, 2, "echo warming; exec sleep 30", `{"idle":0.3}`, "")
	if r["state"] != "running" || r["idle"] != true || took < 300*time.Millisecond {
		t.Errorf("idle after %v: %v", took, r)
	} else {
		cl.tool(3, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, r["job_id"]))
	}
	r, _, _ = executeUntil(t, cl, 4, "exec sleep 30", `{"pattern":"never"}`, `,"yield_after":0.3`)
	if r["state"] != "running" || r["yielded"] != true || r["matched"] != nil {
		t.Errorf("yield_after with until: %v", r)
	} else {
		cl.tool(5, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, r["job_id"]))
	}
	_, text, isErr := cl.tool(6, "execute", `{"command":"true","nowait":true,"until":{"idle":1}}`)
	if !isErr || !strings.Contains(text, "nowait") || !strings.Contains(text, "until") {
		t.Errorf("nowait with until: %s", text)
	}
}

// TestAgentUntilSaysWhyNothingMatched: under the agent profile an until
// that yields without its line says, when every stream it watched is
// empty, that a pipe's output may sit in the program's buffer; not when
// a watched stream has bytes, on a terminal, or outside the profile.
func TestAgentUntilSaysWhyNothingMatched(t *testing.T) {
	t.Parallel()
	const buffered = "stdout is empty: a program writing to a pipe can hold its lines in a buffer until it exits; " +
		"tty:true, or its unbuffered mode (python -u), shows them as they are written."
	cl := agentSession(t, "2024-11-05")
	for i, tc := range []struct{ args, note string }{
		{`{"command":"echo starting >&2; exec sleep 30","yield_after":0.5,"until":{"pattern":"Serving","stream":"stdout"}}`, buffered},
		{`{"command":"exec sleep 30","yield_after":0.5,"until":{"pattern":"Serving"}}`, "stdout and stderr are empty:"},
		{`{"command":"echo starting; exec sleep 30","yield_after":0.5,"until":{"pattern":"Serving"}}`, ""},
		{`{"command":"exec sleep 30","yield_after":0.5,"until":{"pattern":"Serving"},"tty":true}`, ""},
		{`{"command":"exec sleep 30","yield_after":0.5}`, ""},
	} {
		res, text, _ := cl.shellTool(i+1, "execute", json.RawMessage(tc.args))
		note, _ := res["note"].(string)
		if res["yielded"] != true || tc.note == "" && note != "" || !strings.HasPrefix(note, tc.note) {
			t.Errorf("%s: %s", tc.args, text)
		}
		cl.shellTool(100+i, "kill", json.RawMessage(fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, res["job_id"])))
	}
	cl.shellTool(20, "execute", json.RawMessage(`{"command":"exec sleep 30","nowait":true}`))
	res, text, _ := cl.shellTool(21, "wait", json.RawMessage(`{"job_ids":["6"],"timeout":0.3,"until":{"pattern":"x","stream":"stdout"}}`))
	if !strings.Contains(text, `"note":"`+buffered+`"`) {
		t.Errorf("a wait that timed out: %s (%v)", text, res)
	}
	cl.shellTool(22, "kill", json.RawMessage(`{"job_id":"6","signal":"KILL"}`))
	cl = newRPCClient(t, configOf(t, "MCP_EXEC_YIELD_AFTER=0.5"))
	if _, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":"exec sleep 30","until":{"pattern":"Serving"}}`)); strings.Contains(text, "note") {
		t.Errorf("outside the profile: %s", text)
	}
	cl.shellTool(2, "kill", json.RawMessage(`{"job_id":"1","signal":"KILL"}`))
}
