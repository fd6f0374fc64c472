package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The exchange rows of "what a model reads": the calls and reply bytes a
// model needs for a whole exchange with a job, not one reply. Each is
// measured under the agent profile as 1.3 answers it and as 1.2 did
// (input answering at once, so each answer costs a status or a wait; spill
// off, so a window's lost middle stays lost), next to what Codex's exec
// and Claude Code's Bash tool need by their documented behaviour: Codex's
// write_stdin writes to a running session and returns the output that
// follows (openai/codex, codex-rs exec_command and write_stdin tools);
// Claude Code's Bash tool runs one command to its end with no way to write
// to it later, and keeps an output over its 30,000-character cut in a file
// the model can read or search (its Bash tool documentation).

// exchangeReplCommand is a Python REPL on pipes, unbuffered.
const exchangeReplCommand = "exec python3 -u -i -q"

// exchangeReplLines are the three lines the REPL session types.
var exchangeReplLines = []string{"a = 6*7\n", "print(a)\n", "exit()\n"}

// exchangePromptScript asks two questions with read -p, then answers.
const exchangePromptScript = `read -p 'Name? ' n; read -p 'Overwrite config? [y/N] ' a; echo "hello $n ($a)"`

// exchangeLogScript writes a 2.2 MB build log with one error line at
// about 1.1 MB, before the last 1 MiB a window keeps.
const exchangeLogScript = `awk 'BEGIN { for (i = 1; i <= 48000; i++) { if (i == 24000) printf "src/module_%05d.c:88: error: expected ; before }\n", i; ` +
	`else printf "[%05d/48000] CC src/module_%05d.c.o ........\n", i, i } }'`

// exchange counts a model's calls and the reply bytes it reads.
type exchange struct {
	s     *server
	calls int
	bytes int
}

// tool makes one tools/call and returns its decoded text: the object, or
// the first entry of an array (a wait on one job); empty when the text is
// neither.
func (e *exchange) tool(name string, args map[string]any) map[string]any {
	text := replyText(e.s.call("tools/call", map[string]any{"name": name, "arguments": args}))
	e.calls++
	e.bytes += len(text)
	var v any
	_ = json.Unmarshal([]byte(text), &v)
	if list, ok := v.([]any); ok && len(list) > 0 {
		v = list[0]
	}
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// awaitPrompt waits, outside the count (a model's own pause), until the
// job shows text at the end of stream, as a poll a test makes.
func awaitPrompt(s *server, jobID, stream, text string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var out map[string]any
		_ = json.Unmarshal([]byte(replyText(s.call("tools/call", map[string]any{"name": "output",
			"arguments": map[string]any{"job_id": jobID, stream: "all"}}))), &out)
		if st, ok := out[stream].(map[string]any); ok && strings.HasSuffix(fmt.Sprint(st["data"]), text) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(fmt.Errorf("job %s never showed %q on %s", jobID, text, stream))
}

// awaitWaiting waits, outside the count, until the job waits for input.
func awaitWaiting(s *server, jobID string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var st map[string]any
		_ = json.Unmarshal([]byte(replyText(s.call("tools/call", map[string]any{"name": "status",
			"arguments": map[string]any{"job_id": jobID}}))), &st)
		if st["waiting_for_input"] == true {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(fmt.Errorf("job %s never waited for input", jobID))
}

func benchExchanges(bin string) []row {
	var rows []row
	for _, era := range []string{"1.3", "1.2"} {
		rows = append(rows, replExchange(bin, era), promptExchange(bin, era), logExchange(bin, era))
	}
	return rows
}

// exchangeServer starts a server under the agent profile as era answers.
func exchangeServer(bin, era string) *server {
	if era == "1.2" {
		return startServer(bin, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_SPILL=off")
	}
	return startServer(bin, "MCP_EXEC_PROFILE=agent")
}

// inputArgs are input's arguments in era: 1.2 answered at once.
func inputArgs(era, jobID, data string) map[string]any {
	args := map[string]any{"job_id": jobID, "data": data}
	if era == "1.2" {
		args["yield_after"] = 0
	}
	return args
}

// exchangeRow is the row of one exchange: bytes read, calls in the note.
func exchangeRow(name string, e *exchange, ok bool, peers string) row {
	r := row{Name: name, Value: float64(e.bytes), Floor: claudeCodeChars, Unit: "B", Ratio: float64(e.bytes) / claudeCodeChars,
		Target: "report", Pass: ok, Note: fmt.Sprintf("%d calls; %s", e.calls, peers)}
	if !ok {
		r.Note = "FAILED: " + r.Note
	}
	return r
}

// replExchange types three lines into a Python REPL.
func replExchange(bin, era string) row {
	s := exchangeServer(bin, era)
	defer s.stop()
	e := &exchange{s: s}
	first := e.tool("execute", map[string]any{"command": exchangeReplCommand, "yield_after": 10})
	id := fmt.Sprint(first["job_id"])
	awaitPrompt(s, id, "stderr", ">>> ")
	var last map[string]any
	for _, line := range exchangeReplLines {
		last = e.tool("input", inputArgs(era, id, line))
		if era == "1.2" && last["state"] == "running" {
			if line == "exit()\n" {
				last = e.tool("wait", map[string]any{"job_ids": []string{id}, "timeout": 10})
			} else {
				awaitPrompt(s, id, "stderr", ">>> ")
				last = e.tool("status", map[string]any{"job_id": id})
			}
		}
	}
	return exchangeRow("REPL 3 lines "+era, e, last["state"] == "success",
		"Codex 4 (exec_command, then write_stdin per line); Claude Code: no input to a running command (the lines go in one script)")
}

// promptExchange answers a script's two read -p prompts.
func promptExchange(bin, era string) row {
	s := exchangeServer(bin, era)
	defer s.stop()
	e := &exchange{s: s}
	first := e.tool("execute", map[string]any{"command": exchangePromptScript, "yield_after": 10})
	id := fmt.Sprint(first["job_id"])
	second := e.tool("input", inputArgs(era, id, "ada\n"))
	if era == "1.2" {
		awaitWaiting(s, id) // bash prints no read -p prompt on a pipe
		second = e.tool("status", map[string]any{"job_id": id})
	}
	last := e.tool("input", inputArgs(era, id, "y\n"))
	if last["state"] == "running" {
		last = e.tool("wait", map[string]any{"job_ids": []string{id}, "timeout": 10})
	}
	out, _ := last["stdout"].(map[string]any)
	ok := second["state"] == "running" && strings.Contains(fmt.Sprint(out["data"]), "hello ada (y)")
	return exchangeRow("two prompts "+era, e, ok,
		"Codex 3 (exec_command, write_stdin per answer); Claude Code 1 only if the answers are known before (piped in)")
}

// logExchange finds the error line in the middle of a 2 MB log.
func logExchange(bin, era string) row {
	s := exchangeServer(bin, era)
	defer s.stop()
	e := &exchange{s: s}
	first := e.tool("execute", map[string]any{"command": exchangeLogScript})
	id := fmt.Sprint(first["job_id"])
	found := e.tool("output", map[string]any{"job_id": id, "stdout": map[string]any{"grep": ": error:"}})
	grep, _ := found["stdout"].(map[string]any)
	ok := fmt.Sprint(grep["match_count"]) == "1"
	if !ok { // the middle is gone: the build runs again into a search
		again := e.tool("execute", map[string]any{"command": exchangeLogScript + " | grep -n ': error:'"})
		out, _ := again["stdout"].(map[string]any)
		ok = strings.Contains(fmt.Sprint(out["data"]), "error: expected")
	}
	return exchangeRow("error in a 2 MB log "+era, e, ok,
		"Codex 2 (its 10 KiB head and tail lose the middle: run again through grep); Claude Code 2 (the output kept in a file, then searched)")
}
