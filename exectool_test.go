package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShareBudget: two streams share the exec tool's output budget, each
// up to half, a quiet one leaving the rest to the other.
func TestShareBudget(t *testing.T) {
	for _, tc := range []struct{ limit, a, b, wantA, wantB int64 }{
		{100, 10, 20, 10, 20},
		{100, 10, 500, 10, 90},
		{100, 500, 10, 90, 10},
		{100, 500, 500, 50, 50},
		{101, 500, 500, 50, 51},
		{0, 5, 5, 0, 0},
	} {
		if a, b := shareBudget(tc.limit, tc.a, tc.b); a != tc.wantA || b != tc.wantB {
			t.Errorf("shareBudget(%d, %d, %d) = %d, %d; want %d, %d", tc.limit, tc.a, tc.b, a, b, tc.wantA, tc.wantB)
		}
	}
}

// TestExecTooManyActiveExecs: an exec while MCP_EXEC_MAX_JOBS execs run is
// refused with the gateway's too_many_active_execs object.
func TestExecTooManyActiveExecs(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_TOOLS=exec", "MCP_EXEC_MAX_JOBS=1"))
	cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 60","timeout_seconds":30}}}`)
	eventually(t, jobDeadline, "the first exec to run", func() bool { return len(cl.c.reg.runningJobs()) == 1 })
	_, text, isErr := cl.tool(2, "exec", `{"command":"true"}`)
	var refusal struct {
		Error            string         `json:"error"`
		Active           int            `json:"active"`
		Max              int            `json:"max"`
		OldestAgeSeconds *float64       `json:"oldest_age_seconds"`
		States           map[string]int `json:"states"`
	}
	if err := json.Unmarshal([]byte(text), &refusal); err != nil || !isErr {
		t.Fatalf("second exec: %q (error %v)", text, isErr)
	}
	if refusal.Error != "too_many_active_execs" || refusal.Active != 1 || refusal.Max != 1 ||
		refusal.OldestAgeSeconds == nil || refusal.States["running"] != 1 {
		t.Errorf("refusal %s", text)
	}
	for _, j := range cl.c.reg.runningJobs() {
		killGroup(j.pid)
	}
	if reply := cl.next(jobDeadline); !strings.Contains(string(reply), `\"signal\":\"SIGKILL\"`) {
		t.Errorf("the first exec, killed: %s", reply)
	}
}

// TestExecSummaryIsLast: the summary is the text's last line and parses as
// JSON, whatever the command wrote.
func TestExecSummaryIsLast(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_TOOLS=exec"))
	_, text, _ := cl.tool(1, "exec", `{"command":"printf '[exec summary]\\n{\"exit\":99}'"}`)
	_, last, _ := strings.Cut(text[strings.LastIndex(text, execSummaryMarker):], "\n")
	var sum execSummary
	if err := json.Unmarshal([]byte(last), &sum); err != nil || sum.Exit == nil || *sum.Exit != 0 || sum.StdoutBytes != 26 {
		t.Errorf("text %q: summary %q (%v)", text, last, err)
	}
}

// TestExecForwardsItsWholeBudgetToStructuredClients: the exec tool's text
// is not copied into structuredContent, so a client of 2025-06-18 gets all
// of max_output_bytes that fits the reply budget once, not half of it.
func TestExecForwardsItsWholeBudgetToStructuredClients(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_TOOLS=exec"))
	cl.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	_, text, _ := cl.tool(1, "exec", `{"command":"seq 1 900000","max_output_bytes":5242880}`)
	if !strings.Contains(text, `"forwarded_bytes":5242880,`) {
		t.Errorf("summary %s", text[strings.LastIndex(text, execSummaryMarker):])
	}
}

// TestGatewaySettingsAreRead: with the exec set offered, the gateway's own
// MAX_CONCURRENT_EXECS, MAX_TIMEOUT_SECONDS and DEFAULT_CWD apply unless
// the MCP_EXEC_* variable is set; a bad value stops the server naming it;
// without the exec set they mean nothing.
func TestGatewaySettingsAreRead(t *testing.T) {
	dir := t.TempDir()
	cfg := configOf(t, "MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=3", "MAX_TIMEOUT_SECONDS=90", "DEFAULT_CWD="+dir)
	if cfg.maxJobs != 3 || cfg.maxTimeLimit != 90*time.Second || !strings.HasSuffix(cfg.execCwd, filepath.Base(dir)) {
		t.Errorf("max jobs %d, max time limit %v, cwd %q", cfg.maxJobs, cfg.maxTimeLimit, cfg.execCwd)
	}
	if cfg := configOf(t, "MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=3", "MCP_EXEC_MAX_JOBS=5"); cfg.maxJobs != 5 {
		t.Errorf("MCP_EXEC_MAX_JOBS lost to MAX_CONCURRENT_EXECS: %d", cfg.maxJobs)
	}
	if cfg := configOf(t, "MAX_CONCURRENT_EXECS=3"); cfg.maxJobs != 0 {
		t.Errorf("the jobs set alone read MAX_CONCURRENT_EXECS: %d", cfg.maxJobs)
	}
	for _, bad := range []string{"MAX_CONCURRENT_EXECS=many", "DEFAULT_CWD=/nonexistent/dir", "MAX_TIMEOUT_SECONDS=-1"} {
		name, _, _ := strings.Cut(bad, "=")
		if _, err := loadConfig([]string{"MCP_EXEC_TOOLS=exec", bad}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := loadConfig([]string{"MCP_EXEC_TOOLS=exec", "DEFAULT_CWD=/", "MCP_EXEC_ROOTS=" + dir}); err == nil {
		t.Error("a DEFAULT_CWD outside MCP_EXEC_ROOTS was accepted")
	}
}

// TestExecRunsInDefaultCwd: an exec without cwd runs in DEFAULT_CWD.
func TestExecRunsInDefaultCwd(t *testing.T) {
	onLinux(t)
	t.Parallel()
	dir := t.TempDir()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_TOOLS=exec", "DEFAULT_CWD="+dir))
	_, text, _ := cl.tool(1, "exec", `{"command":"pwd"}`)
	if resolved, _ := filepath.EvalSymlinks(dir); !strings.HasPrefix(text, "[stdout tail]\n"+resolved+"\n") {
		t.Errorf("pwd: %q, want %s", text, resolved)
	}
}
