package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLingerSetKeepsOrderAndForgets: the set lists what it keeps oldest
// first, finds by id, and forgets only the job it kept under that id.
func TestLingerSetKeepsOrderAndForgets(t *testing.T) {
	var l lingerSet
	a, b, other := &job{id: "a"}, &job{id: "b"}, &job{id: "a"}
	l.add(a)
	l.add(b)
	if got := l.list(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("list = %v, want a then b", got)
	}
	if l.find("a") != a || !l.has(b) || l.has(other) {
		t.Fatal("find or has answered for the wrong job")
	}
	if l.remove(other) {
		t.Fatal("removed a job of the same id that was never kept")
	}
	if !l.remove(a) || l.remove(a) || l.find("a") != nil {
		t.Fatal("a was not forgotten exactly once")
	}
	if got := l.list(); len(got) != 1 || got[0] != b {
		t.Fatalf("list after removal = %v, want b", got)
	}
}

// TestLingeringStatesMoveForwardOnly: a job lingers only once ended, is
// emptied once, and an emptied job never lingers again.
func TestLingeringStatesMoveForwardOnly(t *testing.T) {
	for _, from := range []jobState{jobRunning, jobExited, jobSettled} {
		j := &job{state: from}
		if _, _, ok := j.beginLingering(); ok {
			t.Errorf("a job in state %d began to linger", from)
		}
	}
	j := &job{state: jobEnded}
	if _, _, ok := j.beginLingering(); !ok || j.state != jobLingering {
		t.Fatalf("an ended job did not linger (state %d)", j.state)
	}
	if _, _, ok := j.beginLingering(); !ok {
		t.Fatal("a job lingering already, delivered again, must still linger")
	}
	if !j.endLingering() || j.endLingering() {
		t.Fatal("endLingering must report true exactly once")
	}
	if _, _, ok := j.beginLingering(); ok || j.state != jobEmptied {
		t.Fatal("an emptied job lingered again")
	}
}

// TestUntilListeningIsAPortOrTrue: until.listening takes a port or true,
// alone or beside pattern, and refuses the rest with what is allowed.
func TestUntilListeningIsAPortOrTrue(t *testing.T) {
	good := map[string]untilSpec{
		`{"listening": 5173}`:                   {listen: true, port: 5173},
		`{"listening": true}`:                   {listen: true},
		`{"listening": 80, "pattern": "ready"}`: {listen: true, port: 80, stream: "any"},
		`{"pattern": "x", "listening": 65535}`:  {listen: true, port: 65535, stream: "any"},
	}
	for in, want := range good {
		got, err := parseUntilSpec(json.RawMessage(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got.listen != want.listen || got.port != want.port || got.stream != want.stream {
			t.Errorf("%s: got listen %v port %d stream %q", in, got.listen, got.port, got.stream)
		}
	}
	bad := []string{`{"listening": 0}`, `{"listening": 65536}`, `{"listening": false}`, `{"listening": "5173"}`,
		`{"listening": 5173, "idle": 2}`, `{"listening": 5173, "from": 3}`, `{"listening": 1.5}`}
	for _, in := range bad {
		_, err := parseUntilSpec(json.RawMessage(in))
		if err == nil || !strings.Contains(err.Error(), "until") {
			t.Errorf("%s: err = %v, want a refusal that names until", in, err)
		}
	}
}

// TestPortMatchIsWrittenAsListening: a match made by a port is
// {"listening": ADDR}; a line's keeps its four members.
func TestPortMatchIsWrittenAsListening(t *testing.T) {
	b, err := json.Marshal(&resultJSON{JobID: "1", State: stateRunning, Matched: &matchJSON{listening: "127.0.0.1:8000"}})
	if err != nil || !strings.Contains(string(b), `"matched":{"listening":"127.0.0.1:8000"}`) {
		t.Fatalf("port match: %s (%v)", b, err)
	}
	b, _ = json.Marshal(&matchJSON{Stream: "stdout", Line: "up", Next: 3})
	if string(b) != `{"stream":"stdout","offset":0,"line":"up","next":3}` {
		t.Fatalf("line match: %s", b)
	}
}

// TestLingeringJobClaimsOnlyItsOwnOrphans: on process groups a job that
// stays in reach once claimed every orphan born in its life, so a job of
// another session named a setsid daemon it never started as its survivor.
// An orphan is now claimed by the job whose mark its environment carries:
// a number unique in the server that agent jobs get as MCP_EXEC_JOB_MARK
// (and 1.0 jobs do not); job ids are per session, two sessions share them.
func TestLingeringJobClaimsOnlyItsOwnOrphans(t *testing.T) {
	t.Parallel()
	onLinux(t)
	other := agentSession(t, "2025-03-26")
	started, _, _ := other.shellTool(1, "execute", map[string]any{"command": "sleep 1", "nowait": true})
	daemon := agentSession(t, "2025-03-26")
	res, _, _ := daemon.shellTool(1, "execute", map[string]any{"command": "setsid sleep 60 >/dev/null 2>&1 < /dev/null & echo $MCP_EXEC_JOB_MARK"})
	defer daemon.shellTool(9, "kill", map[string]any{"job_id": res["job_id"], "signal": "KILL"})
	if out, _ := res["stdout"].(map[string]any); out == nil || !strings.HasPrefix(out["data"].(string), strconv.Itoa(os.Getpid())+".") {
		t.Errorf("the job did not see its mark: %v", res)
	}
	_, text, _ := other.shellTool(2, "wait", map[string]any{"job_ids": []any{started["job_id"]}, "timeout": 30})
	if strings.Contains(text, "survivors") {
		t.Errorf("a job claimed another session's daemon, born in its life: %s", text)
	}
	plain := newRPCClient(t, testConfig())
	if res, text, _ := plain.shellTool(1, "execute", map[string]any{"command": "echo ${MCP_EXEC_JOB_MARK-unset}"}); res["stdout"].(map[string]any)["data"] != "unset\n" {
		t.Errorf("outside the profile a job got a mark: %s", text)
	}
}
