package main

import (
	"encoding/json"
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
