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
// still matches; lines before the call match only with from.
func TestWaitUntilPattern(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	jid := startNowait(t, cl, 1, "echo booting; sleep 0.3; printf 're'; sleep 0.3; printf 'ady on 8080\\n'; exec sleep 30")
	e, took := untilEntry(t, cl, 2, jid, `{"pattern":"^ready on [0-9]+$","stream":"stdout"}`, 20)
	m, _ := e["matched"].(map[string]any)
	if e["state"] != "running" || m == nil || m["line"] != "ready on 8080" || m["stream"] != "stdout" || m["offset"] != float64(8) {
		t.Fatalf("entry %v", e)
	}
	if took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("the wait took %v; the line came after about 0.6 s", took)
	}
	// Written before this call: not seen without from, seen with it.
	if e, _ := untilEntry(t, cl, 3, jid, `{"pattern":"booting"}`, 0.3); e["matched"] != nil {
		t.Errorf("an old line matched without from: %v", e)
	}
	if e, _ := untilEntry(t, cl, 4, jid, `{"pattern":"booting","from":0}`, 5); e["matched"] == nil {
		t.Errorf("from 0 did not see the first line: %v", e)
	}
	cl.tool(5, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))
}

// TestWaitUntilIdle: idle returns once the job has been quiet that long,
// and not before.
func TestWaitUntilIdle(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, testConfig())
	jid := startNowait(t, cl, 1, "for i in 1 2 3; do echo $i; sleep 0.2; done; exec sleep 30")
	e, took := untilEntry(t, cl, 2, jid, `{"idle":0.5}`, 20)
	if e["idle"] != true || e["state"] != "running" {
		t.Fatalf("entry %v", e)
	}
	if took < 900*time.Millisecond { // 0.4 s of output, then 0.5 s quiet
		t.Errorf("idle after %v, before the job went quiet", took)
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
