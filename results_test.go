package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLeaveOutEmptyStreams: only the slices of streams that wrote nothing
// go; an empty read of a stream that wrote bytes stays.
func TestLeaveOutEmptyStreams(t *testing.T) {
	t.Parallel()
	r := &resultJSON{Stdout: &sliceJSON{}, Stderr: &sliceJSON{Offset: 5, TotalBytes: 5}}
	r.leaveOutEmptyStreams()
	if r.Stdout != nil || r.Stderr == nil {
		t.Errorf("stdout %v, stderr %v: want only the empty stream left out", r.Stdout, r.Stderr)
	}
}

// agentSession is a session under the agent profile, initialized for
// protocol version (a structured reply from 2025-06-18 on).
func agentSession(t *testing.T, version string, settings ...string) *rpcClient {
	t.Helper()
	return sessionAt(t, configOf(t, append([]string{"MCP_EXEC_PROFILE=agent"}, settings...)...), version)
}

// sessionAt is a session with cfg, initialized for protocol version.
func sessionAt(t *testing.T, cfg *config, version string) *rpcClient {
	t.Helper()
	cl := newRPCClient(t, cfg)
	cl.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, version))
	cl.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return cl
}

// TestAgentResultOfTrueIsCompact: under the agent profile, execute "true"
// answers in at most 160 bytes of text, without empty streams or usage;
// outside it, the result keeps 1.1's shape byte for byte.
func TestAgentResultOfTrueIsCompact(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2024-11-05", "2025-06-18"} {
		cl := agentSession(t, version, "MCP_EXEC_RLIMITS=nofile=4096") // confined: usage would be on outside the profile
		_, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":"true"}`))
		if len(text) > 160 || text != `{"job_id":"1","state":"success","exit_code":0}` {
			t.Errorf("%s: %d bytes: %s", version, len(text), text)
		}
		_, text, _ = cl.shellTool(2, "execute", json.RawMessage(`{"command":"echo oops >&2; exit 3"}`))
		if text != `{"job_id":"2","state":"error","exit_code":3,"stderr":{"data":"oops\n","offset":0,"bytes":5,"total_bytes":5,"truncated":false}}` {
			t.Errorf("%s: a failure with only stderr: %s", version, text)
		}
	}
	cl := agentSession(t, "2024-11-05", "MCP_EXEC_USAGE=1")
	if res, _, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":"true"}`)); res["usage"] == nil {
		t.Errorf("MCP_EXEC_USAGE=1 under the agent profile: no usage in %v", res)
	}
	cl = newRPCClient(t, testConfig())
	if _, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":"true"}`)); text != `{"job_id":"1","state":"success","exit_code":0,"stdout":{"data":"","offset":0,"bytes":0,"total_bytes":0,"truncated":false}}` {
		t.Errorf("outside the profile: %s", text)
	}
}

// TestAgentResultOfFiveMegabytesKeepsBothEnds: under the agent profile, a
// 5 MB result's text is at most 32 KiB in every protocol era, with a head
// from the stream's start (kept by head retention) and a tail of
// comparable size, the gap between them named.
func TestAgentResultOfFiveMegabytesKeepsBothEnds(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2024-11-05", "2025-06-18"} {
		cl := agentSession(t, version)
		_, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":"seq 1 800000 | head -c 5000000"}`))
		var r resultJSON
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			t.Fatalf("%s: %v: %.300s", version, err, text)
		}
		s := r.Stdout
		switch {
		case len(text) > 32<<10:
			t.Errorf("%s: %d bytes of text", version, len(text))
		case s == nil || s.Tail == nil || s.Omitted == nil || s.TotalBytes != 5000000 || !r.Kept:
			t.Fatalf("%s: not a kept result cut to a head and a tail: %.300s", version, text)
		case s.Offset != 0 || !strings.HasPrefix(s.Data, "1\n2\n3\n") || s.Tail.Offset+int64(s.Tail.Bytes) != s.TotalBytes:
			t.Errorf("%s: head at %d (%.20q), tail ending at %d", version, s.Offset, s.Data, s.Tail.Offset+int64(s.Tail.Bytes))
		case s.Offset+int64(s.Bytes) != s.Omitted.Offset || s.Omitted.Offset+s.Omitted.Bytes != s.Tail.Offset:
			t.Errorf("%s: the gap is not named: %+v", version, *s.Omitted)
		case s.Bytes < 8<<10 || s.Tail.Bytes < 8<<10 || s.Bytes > 2*s.Tail.Bytes || s.Tail.Bytes > 2*s.Bytes:
			t.Errorf("%s: head of %d bytes, tail of %d: not comparable", version, s.Bytes, s.Tail.Bytes)
		}
	}
}

// TestAgentUncapturedStaysReadable: under the agent profile a delivered
// result whose capture left bytes out is kept, and output reads what was
// left out; outside it, the result and the id's error stay 1.0's.
func TestAgentUncapturedStaysReadable(t *testing.T) {
	t.Parallel()
	const warn = `{"command":"echo built; echo 'warning: deprecated' >&2"}`
	cl := agentSession(t, "2024-11-05")
	res, text, _ := cl.shellTool(1, "execute", json.RawMessage(warn))
	if res["kept"] != true || res["uncaptured"] == nil {
		t.Fatalf("a result that left stderr out is not kept: %s", text)
	}
	res, text, _ = cl.shellTool(2, "output", json.RawMessage(`{"job_id":"1","stderr":"all"}`))
	if s, _ := res["stderr"].(map[string]any); s == nil || s["data"] != "warning: deprecated\n" {
		t.Errorf("output of the kept job's stderr: %s", text)
	}
	if _, text, isErr := cl.shellTool(3, "wait", json.RawMessage(`{"job_ids":["1"]}`)); !isErr || !strings.Contains(text, "already delivered") {
		t.Errorf("wait on a kept job: %s", text)
	}
	cl = newRPCClient(t, testConfig())
	if _, text, _ := cl.shellTool(1, "execute", json.RawMessage(warn)); strings.Contains(text, "kept") {
		t.Errorf("outside the profile: %s", text)
	}
	if _, text, _ := cl.shellTool(2, "output", json.RawMessage(`{"job_id":"1","stderr":"all"}`)); text != "unknown job_id: 1 (delivered to an earlier call)" {
		t.Errorf("outside the profile, output after delivery: %s", text)
	}
}

// TestAgentCaptureGrep: under the agent profile a capture's grep answers
// a failing build in a few hundred bytes, as output's grep does, whether
// execute, wait or kill delivers the result; the search's offset reads
// the line, the job stays kept for output; outside the profile capture
// refuses grep as it did.
func TestAgentCaptureGrep(t *testing.T) {
	t.Parallel()
	const build = `seq 1 2500 | sed 's/^/compiling unit /' >&2; echo "main.c:42: error: expected ';'" >&2; seq 1 2500 >&2; exit 2`
	capture := `{"on_error":{"stderr":{"grep":"error:"}}}`
	for _, version := range []string{"2024-11-05", "2025-06-18"} {
		cl := agentSession(t, version)
		res, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":`+quote(build)+`,"capture":`+capture+`}`))
		g, _ := res["stderr"].(map[string]any)
		matches, _ := g["matches"].([]any)
		if len(text) > 400 || len(matches) != 1 || g["match_count"] != 1.0 || res["kept"] != true {
			t.Fatalf("%s: %d bytes: %s", version, len(text), text)
		}
		m := matches[0].(map[string]any)
		if m["line"] != "main.c:42: error: expected ';'" {
			t.Errorf("%s: the match: %v", version, m)
		}
		from := int64(m["offset"].(float64))
		res, text, _ = cl.shellTool(2, "output", json.RawMessage(fmt.Sprintf(`{"job_id":"1","stderr":{"from":%d,"length":30}}`, from)))
		if s, _ := res["stderr"].(map[string]any); s == nil || s["data"] != "main.c:42: error: expected ';'" {
			t.Errorf("%s: output at the match's offset: %s", version, text)
		}
	}
	cl := agentSession(t, "2024-11-05")
	cl.shellTool(1, "execute", json.RawMessage(`{"command":"echo 'x error: y' >&2; exit 1","nowait":true,"capture":`+capture+`}`))
	res, text, _ := cl.shellTool(2, "wait", json.RawMessage(`{"job_ids":["1"],"timeout":10}`))
	if !strings.Contains(text, `"stderr":{"matches":[{"offset":0,"line":"x error: y"}]`) {
		t.Errorf("wait's delivery: %s (%v)", text, res)
	}
	cl.shellTool(3, "execute", json.RawMessage(`{"command":"echo 'x error: y' >&2; exec sleep 30","nowait":true,"capture":`+capture+`}`))
	eventually(t, 5*time.Second, "the line", func() bool {
		_, text, _ := cl.shellTool(4, "output", json.RawMessage(`{"job_id":"2","stderr":"all"}`))
		return strings.Contains(text, "x error: y")
	})
	if _, text, _ := cl.shellTool(5, "kill", json.RawMessage(`{"job_id":"2","signal":"KILL"}`)); !strings.Contains(text, `"result":{"job_id":"2","state":"error"`) ||
		!strings.Contains(text, `"stderr":{"matches":[{"offset":0,"line":"x error: y"}]`) {
		t.Errorf("kill's delivery: %s", text)
	}
	cl = newRPCClient(t, testConfig())
	if _, text, isErr := cl.shellTool(1, "execute", json.RawMessage(`{"command":"true","capture":`+capture+`}`)); !isErr ||
		text != `invalid argument capture: on_error: stderr: grep is for output (a search of what a job kept); capture takes "none", "all", {"tail": N} or {"from": P, ...}` {
		t.Errorf("outside the profile: %s", text)
	}
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
