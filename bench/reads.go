package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// What a model reads: the bytes of the tool list it reads on every turn and
// of the replies to typical calls, next to what the shells models know cut
// a command's output at. Each row's floor is Claude Code's cut (30,000
// characters); its note says how the text compares with what Codex shows a
// model (about 10 KiB and 256 lines, head and tail).
const (
	claudeCodeChars = 30000
	codexBytes      = 10 << 10
	codexLines      = 256
)

// readsScripts are the commands whose replies are measured.
const (
	// failingTestScript prints 40 lines of a test run, a failure on
	// stderr, and fails.
	failingTestScript = `i=1; while [ $i -le 40 ]; do echo "test_case_$i ... ok"; i=$((i+1)); done; ` +
		`echo 'FAIL: test_parse (tests/test_parse.py:12): expected 3, got 4' >&2; exit 1`
	// fiveMBScript writes 5,000,000 bytes of log lines with one line to
	// find near the end, inside what the default 1 MiB window keeps (a
	// line the window dropped is found by no search).
	fiveMBScript = `awk 'BEGIN { for (i = 1; i <= 100000; i++) { if (i == 90000) printf "ERROR: disk quota exceeded at step %06d ........\n", i; ` +
		`else printf "step %06d: processing item, all fine so far .........\n", i } }'`
	searchPattern = "^ERROR"
)

func benchReads(bin string) []row {
	var rows []row
	for _, set := range []string{"jobs", "exec", "shell"} {
		for _, profile := range []string{"agent", "compat"} {
			s := startServer(bin, "MCP_EXEC_TOOLS="+set, "MCP_EXEC_PROFILE="+profile)
			tools := s.call("tools/list", map[string]any{})["result"].(map[string]any)["tools"]
			s.stop()
			target := "-"
			if set == "jobs" && profile == "agent" {
				target = "<= 10240"
			}
			r := readsRow("list "+set+" "+profile, compactJSON(tools), target)
			r.Note = fmt.Sprintf("%.1f KiB, read on every turn", r.Value/1024)
			rows = append(rows, r)
		}
	}
	for _, profile := range []string{"agent", "compat"} {
		s := startServer(bin, "MCP_EXEC_PROFILE="+profile)
		agent := profile == "agent"
		rows = append(rows, readsRow("true "+profile, s.toolText("execute", map[string]any{"command": "true"}), ifAgent(agent, "<= 160")))
		rows = append(rows, readsRow("failing test "+profile, s.toolText("execute", map[string]any{"command": failingTestScript}), "-"))
		big := s.call("tools/call", map[string]any{"name": "execute", "arguments": map[string]any{"command": fiveMBScript}})
		rows = append(rows, readsRow("5 MB result "+profile, replyText(big), ifAgent(agent, "<= 32768")))
		if agent {
			rows = append(rows, searchRow(s, big))
		}
		s.stop()
	}
	return rows
}

// searchRow measures one output grep of the delivered 5 MB result for its
// one ERROR line, or says the binary has no grep.
func searchRow(s *server, big map[string]any) row {
	var result struct {
		JobID string `json:"job_id"`
		Kept  bool   `json:"kept"`
	}
	_ = json.Unmarshal([]byte(replyText(big)), &result)
	r := row{Name: "search agent", Floor: claudeCodeChars, Unit: "B", Target: "<= 1024", Pass: true}
	if !result.Kept {
		r.Note = "n/a (the 5 MB result was not kept)"
		return r
	}
	reply := s.call("tools/call", map[string]any{"name": "output", "arguments": map[string]any{
		"job_id": result.JobID, "stdout": map[string]any{"grep": searchPattern}}})
	text := replyText(reply)
	if isToolError(reply) {
		r.Note = "n/a (grep not supported by this binary)"
		if !strings.Contains(text, "grep") {
			r.Note = "n/a: " + text
		}
		return r
	}
	found := readsRow(r.Name, text, r.Target)
	if !strings.Contains(text, "ERROR: disk quota exceeded") {
		found.Pass, found.Note = false, "the line was not found: "+found.Note
	}
	return found
}

// readsRow is a row of text a model reads, against Claude Code's cut, with
// target ("-": none) in bytes.
func readsRow(name, text, target string) row {
	n := len(text)
	// The lines of output shown: a JSON reply escapes them as \n.
	lines := strings.Count(text, "\n") + strings.Count(text, `\n`)
	codex := "within Codex's 10 KiB / 256 lines"
	if n > codexBytes || lines > codexLines {
		codex = "over Codex's 10 KiB / 256 lines"
	}
	r := row{Name: name, Value: float64(n), Floor: claudeCodeChars, Unit: "B", Ratio: float64(n) / claudeCodeChars,
		Target: target, Pass: true, Note: fmt.Sprintf("%d lines; %s", lines, codex)}
	var most int
	if _, err := fmt.Sscanf(target, "<= %d", &most); err == nil {
		r.Pass = n <= most
	}
	return r
}

// ifAgent is target under the agent profile, "-" (none) outside it.
func ifAgent(agent bool, target string) string {
	if agent {
		return target
	}
	return "-"
}

// toolText is the text a model reads of a tool call's reply.
func (s *server) toolText(name string, args map[string]any) string {
	return replyText(s.call("tools/call", map[string]any{"name": name, "arguments": args}))
}

// replyText is the text of a tools/call reply's content.
func replyText(reply map[string]any) string {
	res, ok := reply["result"].(map[string]any)
	if !ok {
		check(fmt.Errorf("error reply: %v", reply))
	}
	var text strings.Builder
	for _, c := range res["content"].([]any) {
		if t, ok := c.(map[string]any)["text"].(string); ok {
			text.WriteString(t)
		}
	}
	return text.String()
}

// isToolError reports whether a tools/call reply is a tool error.
func isToolError(reply map[string]any) bool {
	res, _ := reply["result"].(map[string]any)
	return res["isError"] == true
}

// compactJSON is v as the server writes it: compact, keys sorted, no HTML
// escapes.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	check(enc.Encode(v))
	return strings.TrimSuffix(b.String(), "\n")
}
