package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// shellClient is an initialized legacy session offering the shell set
// under settings.
func shellClient(t *testing.T, settings ...string) *rpcClient {
	t.Helper()
	onLinux(t)
	cl := newRPCClient(t, configOf(t, append([]string{"MCP_EXEC_TOOLS=shell"}, settings...)...))
	cl.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`)
	return cl
}

// shellTool calls a shell tool, skipping the job events that arrive in
// between, and returns its decoded result, its text and isError.
func (cl *rpcClient) shellTool(id int, name string, args any) (map[string]any, string, bool) {
	cl.t.Helper()
	a, _ := json.Marshal(args)
	cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, a))
	for {
		line := cl.next(jobDeadline)
		var reply struct {
			ID     *int `json:"id"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal(line, &reply) != nil || reply.ID == nil || *reply.ID != id {
			cl.events = append(cl.events, line)
			continue
		}
		text := reply.Result.Content[0].Text
		var v map[string]any
		_ = json.Unmarshal([]byte(text), &v) // a tool error is plain text
		return v, text, reply.Result.IsError
	}
}

// TestShellJobLifecycle: start answers at once, poll follows the job
// without its output, kill ends it with SIGKILL, and a kill of a finished
// job changes nothing.
func TestShellJobLifecycle(t *testing.T) {
	t.Parallel()
	cl := shellClient(t)
	start, _, _ := cl.shellTool(1, "sh_start", map[string]any{"command": "sh", "args": []string{"-c", "echo ready; exec sleep 60"}})
	id, _ := start["job"].(string)
	if !regexp.MustCompile(`^j\d+-[0-9a-z]{6}$`).MatchString(id) || start["state"] != "running" {
		t.Fatalf("start = %v", start)
	}
	eventually(t, jobDeadline, "the job wrote its line", func() bool {
		poll, _, _ := cl.shellTool(2, "sh_poll", map[string]any{"job": id})
		return poll["stdout-bytes"] == float64(6) && poll["exit"] == nil && poll["state"] == "running" && poll["killed"] == false
	})
	kill, _, _ := cl.shellTool(3, "sh_kill", map[string]any{"job": id})
	if kill["killed"] != true || kill["state"] != "killed" {
		t.Errorf("kill = %v", kill)
	}
	eventually(t, jobDeadline, "the killed job's status", func() bool {
		poll, _, _ := cl.shellTool(4, "sh_poll", map[string]any{"job": id})
		return poll["exit"] == float64(137) && poll["state"] == "killed"
	})
	again, _, isErr := cl.shellTool(5, "sh_kill", map[string]any{"job": id})
	out, _, _ := cl.shellTool(6, "sh_output", map[string]any{"job": id})
	if isErr || again["state"] != "killed" || out["stdout"] != "ready\n" || out["eof"] != true {
		t.Errorf("after the end: kill %v (error %v), output %v", again, isErr, out)
	}
}

// TestShellEventsOncePerJob: each started job sends exactly one started and
// one terminal event; a job that could not be spawned sends only the
// terminal one, before its handle; no event holds an argument or output.
func TestShellEventsOncePerJob(t *testing.T) {
	t.Parallel()
	cl := shellClient(t)
	ids := map[string]bool{}
	for i, args := range []map[string]any{
		{"command": "echo", "args": []string{"secret-arg"}},
		{"command": "sh", "args": []string{"-c", "echo '{\"method\":\"notifications/job\"}'; exit 4"}},
		{"command": "no-such-program-here"},
	} {
		start, _, _ := cl.shellTool(10+i, "sh_start", args)
		ids[start["job"].(string)] = true
	}
	type event struct{ Job, State, Command string }
	seen := map[string][]event{}
	count := 0
	for count < 5 {
		for _, line := range cl.events {
			var msg struct {
				Method string
				Params map[string]any
			}
			if json.Unmarshal(line, &msg) != nil || msg.Method != "notifications/job" {
				t.Fatalf("unexpected line %s", line)
			}
			if strings.Contains(string(line), "secret-arg") || strings.Contains(string(line), "{\\\"method") {
				t.Errorf("an event tells arguments or output: %s", line)
			}
			e := event{msg.Params["job"].(string), msg.Params["state"].(string), msg.Params["command"].(string)}
			seen[e.Job] = append(seen[e.Job], e)
			count++
		}
		cl.events = nil
		if count < 5 {
			cl.events = append(cl.events, cl.next(jobDeadline))
		}
	}
	for id := range ids {
		var states []string
		for _, e := range seen[id] {
			states = append(states, e.State)
		}
		got := strings.Join(states, ",")
		if got != "started,exited" && !(got == "exited" && seen[id][0].Command == "no-such-program-here") {
			t.Errorf("job %s: events %s", id, got)
		}
	}
	cl.expectNoReply("the five events")
}

// TestShellExpiredJobSaysWhy: beyond MCP_EXEC_MAX_FINISHED the oldest
// finished job is forgotten, and its handle is refused saying so.
func TestShellExpiredJobSaysWhy(t *testing.T) {
	t.Parallel()
	cl := shellClient(t, "MCP_EXEC_MAX_FINISHED=1")
	var ids []string
	for i := range 2 {
		start, _, _ := cl.shellTool(20+i, "sh_start", map[string]any{"command": "true"})
		ids = append(ids, start["job"].(string))
		eventually(t, jobDeadline, "the job's end", func() bool {
			poll, _, _ := cl.shellTool(30, "sh_poll", map[string]any{"job": ids[i]})
			return poll["state"] == "exited"
		})
	}
	_, text, isErr := cl.shellTool(40, "sh_output", map[string]any{"job": ids[0]})
	if !isErr || !strings.Contains(text, "expired") || !strings.Contains(text, "start a new job rather than hoping") {
		t.Errorf("output of an expired job: %q (error %v)", text, isErr)
	}
}

// TestShellMaxJobsNamesTheJobs: a start past MCP_EXEC_MAX_JOBS is refused
// with the ids of the jobs in the way.
func TestShellMaxJobsNamesTheJobs(t *testing.T) {
	t.Parallel()
	cl := shellClient(t, "MCP_EXEC_MAX_JOBS=1")
	start, _, _ := cl.shellTool(1, "sh_start", map[string]any{"command": "sleep", "args": []string{"60"}})
	_, text, isErr := cl.shellTool(2, "sh_start", map[string]any{"command": "true"})
	if !isErr || !strings.Contains(text, start["job"].(string)) {
		t.Errorf("second start: %q (error %v), want a refusal naming %v", text, isErr, start["job"])
	}
	cl.shellTool(3, "sh_kill", map[string]any{"job": start["job"]})
}

// TestShellCursorOfAnotherJobIsRefused: a cursor is bound to its job and
// cannot be edited.
func TestShellCursorOfAnotherJobIsRefused(t *testing.T) {
	t.Parallel()
	cl := shellClient(t)
	a, _, _ := cl.shellTool(1, "sh_start", map[string]any{"command": "echo", "args": []string{"a"}})
	b, _, _ := cl.shellTool(2, "sh_start", map[string]any{"command": "echo", "args": []string{"b"}})
	out, _, _ := cl.shellTool(3, "sh_output", map[string]any{"job": a["job"]})
	cursor := out["cursor"].(string)
	for i, bad := range []map[string]any{
		{"job": b["job"], "cursor": cursor},
		{"job": a["job"], "cursor": "x" + cursor},
		{"job": a["job"], "cursor": "MC4wLjAuMA." + strings.Repeat("0", 24)},
	} {
		if _, text, isErr := cl.shellTool(4+i, "sh_output", bad); !isErr || !strings.Contains(text, "Invalid cursor") {
			t.Errorf("cursor %v: %q (error %v)", bad, text, isErr)
		}
	}
}

// TestShellJobIDsUnguessableWhereClientsShareAServer: where job ids must
// not be guessed, the random part carries over 128 bits.
func TestShellJobIDsUnguessableWhereClientsShareAServer(t *testing.T) {
	id := shellJobName(7, true)
	if !regexp.MustCompile(`^j7-[0-9a-z]{26}$`).MatchString(id) {
		t.Errorf("id %q", id)
	}
}

// TestShellResultFitsReplyBudget: output that escapes to six times its
// size is cut further until the reply fits the reply budget, and the
// result says how much it dropped.
func TestShellResultFitsReplyBudget(t *testing.T) {
	t.Parallel()
	cl := shellClient(t, "MCP_EXEC_MAX_REPLY_BYTES=4096")
	cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sh_run","arguments":{"command":"head","args":["-c","100000","/dev/zero"]}}}`)
	line := cl.next(jobDeadline)
	if len(line)+1 > 4096 || !strings.Contains(string(line), `truncated`) {
		t.Errorf("reply of %d bytes (budget 4096): %.300s", len(line)+1, line)
	}
}

// TestShellSpawnFailureInOutput: a background job that could not be
// spawned says why on its stderr, as a run does.
func TestShellSpawnFailureInOutput(t *testing.T) {
	t.Parallel()
	cl := shellClient(t)
	start, _, _ := cl.shellTool(1, "sh_start", map[string]any{"command": "no-such-program-here"})
	out, _, _ := cl.shellTool(2, "sh_output", map[string]any{"job": start["job"]})
	poll, _, _ := cl.shellTool(3, "sh_poll", map[string]any{"job": start["job"]})
	if !strings.HasPrefix(out["stderr"].(string), "Failed to spawn process no-such-program-here: no such file or directory (error code -2)") ||
		poll["exit"] != float64(-1) || poll["state"] != "exited" || out["eof"] != true {
		t.Errorf("output %v, poll %v", out, poll)
	}
}

// TestShutdownSparesTheServersGroupAfterASpawnFailure: a job that never
// started has no process group; ending the session must not signal group
// 0, which is the server's own (and its client's).
func TestShutdownSparesTheServersGroupAfterASpawnFailure(t *testing.T) {
	onLinux(t)
	if err := signalGroup(0, 0); !errors.Is(err, errGroupGone) {
		t.Errorf("signalGroup(0) = %v, want errGroupGone: there is no such group", err)
	}
	reg := newRegistry(configOf(t, "MCP_EXEC_TOOLS=shell"))
	j, started, err := reg.start(startRequest{argv: []string{"no-such-program-here"}, keepFailed: true, contract: shellContract})
	if err != nil || started || j.pid != 0 {
		t.Fatalf("start: %v, started %v, pid %d", err, started, j.pid)
	}
	if err := j.signal(0); err != nil || groupAlive(j.pid) {
		t.Errorf("a job that never started is signalled (%v) or seen alive", err)
	}
}

// TestShellRunStreamsToModernRequestsThatAskForIt: a 2026-07-28 sh_run that
// sets a log level of info gets its output as notifications/message before
// the result, and the batches add up to the result's stdout; one that sets
// warning, or none, gets no message.
func TestShellRunStreamsToModernRequestsThatAskForIt(t *testing.T) {
	t.Parallel()
	cl := shellClient(t)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}%s}`
	run := `"name":"sh_run","arguments":{"command":"sh","args":["-c","echo one; sleep 0.4; echo two; echo err >&2"]}`
	for i, tc := range []struct {
		level    string
		messages bool
	}{{`,"io.modelcontextprotocol/logLevel":"info"`, true}, {`,"io.modelcontextprotocol/logLevel":"warning"`, false}, {"", false}} {
		cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,%s}}`, 50+i, run, fmt.Sprintf(meta, tc.level)))
		streamed := map[string]string{}
		for {
			var msg struct {
				ID     *int `json:"id"`
				Method string
				Params struct {
					Level, Logger string
					Data          map[string]string
				}
			}
			line := cl.next(jobDeadline)
			if json.Unmarshal(line, &msg) != nil {
				t.Fatalf("line %s", line)
			}
			if msg.ID != nil {
				if !strings.Contains(string(line), `one\\ntwo\\n`) {
					t.Errorf("result %s", line)
				}
				break
			}
			if msg.Method != "notifications/message" || msg.Params.Level != "info" || msg.Params.Logger != "sh_run" {
				t.Errorf("notification %s", line)
			}
			streamed[msg.Params.Data["stream"]] += msg.Params.Data["text"]
		}
		if got := (streamed["stdout"] == "one\ntwo\n" && streamed["stderr"] == "err\n"); got != tc.messages {
			t.Errorf("log level %q: streamed %q", tc.level, streamed)
		}
	}
}
