package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestFailureForms: the default highlights are the failure forms, not
// the bare words around them.
func TestFailureForms(t *testing.T) {
	t.Parallel()
	h := &highlighter{}
	for line, want := range map[string]string{
		"main.c:42: error: expected ';'":              "error:",
		"error[E0308]: mismatched types":              "error[",
		"TypeError: x is not a function":              "Error:",
		"2024-01-01 ERROR db gone":                    "ERROR",
		"FAILED tests/test_x.py::test_y":              "FAILED",
		"FAIL: TestParse (0.01s)":                     "FAIL:",
		"FAIL src/app.test.js":                        "FAIL ",
		"fatal: not a git repository":                 "fatal:",
		"panic: runtime error: index out of range":    "panic:",
		"Traceback (most recent call last):":          "Traceback (most",
		"java.lang.IllegalStateException: closed":     "Exception",
		"npm ERR! code ELIFECYCLE":                    "npm ERR!",
		"Segmentation fault (core dumped)":            "Segmentation fault",
		"cat: x: No such file or directory":           "No such file or directory",
		"sh: 1: frob: command not found":              "command not found",
		"main.o: undefined reference to `f'":          "undefined reference",
		"cc -Werror -Wall -c x.c":                     "",
		"build finished: 0 errors, 0 warnings":        "",
		"--- PASS: TestFAIL (0.00s) FAIL here":        "",
		"errors were found":                           "",
		"a.c:1: warning: unused, then error: at last": "error:",
	} {
		lo, hi, ok := h.match([]byte(line))
		got := ""
		if ok {
			got = line[lo:hi]
		}
		if got != want {
			t.Errorf("%q: matched %q, want %q", line, got, want)
		}
	}
}

// TestParseHighlight: off, failures, or an RE2 that does not match an
// empty line.
func TestParseHighlight(t *testing.T) {
	t.Parallel()
	if h, err := parseHighlight("off"); h != nil || err != nil {
		t.Errorf("off: %v, %v", h, err)
	}
	if h, err := parseHighlight("failures"); h == nil || h.re != nil || err != nil {
		t.Errorf("failures: %v, %v", h, err)
	}
	if h, err := parseHighlight(`^E\d+`); h == nil || h.re == nil || err != nil {
		t.Errorf("a pattern: %v, %v", h, err)
	}
	for _, bad := range []string{"(", "x*"} {
		if _, err := parseHighlight(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	for settings, on := range map[string]bool{"": false, "MCP_EXEC_PROFILE=agent": true} {
		if cfg := configOf(t, settings); (cfg.highlight != nil) != on {
			t.Errorf("%q: highlight %v, want on %v", settings, cfg.highlight, on)
		}
	}
	if cfg := configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_HIGHLIGHT=off"); cfg.highlight != nil {
		t.Error("MCP_EXEC_HIGHLIGHT=off under the agent profile: still on")
	}
}

// TestHighlightPicker: distinct lines only; past 20, the first 10 and the
// last 10, every matching line counted.
func TestHighlightPicker(t *testing.T) {
	t.Parallel()
	var p highlightPicker
	for i := range 30 {
		p.add(highlight{stream: "stderr", offset: int64(i), line: []byte(fmt.Sprint("error: ", i))})
		p.add(highlight{stream: "stderr", offset: int64(i), line: []byte(fmt.Sprint("error: ", i))}) // a repeat
	}
	got := p.picked()
	var offsets []int64
	for _, h := range got {
		offsets = append(offsets, h.offset)
	}
	if want := "[0 1 2 3 4 5 6 7 8 9 20 21 22 23 24 25 26 27 28 29]"; fmt.Sprint(offsets) != want || p.total != 60 {
		t.Errorf("picked %v of %d, want %s of 60", offsets, p.total, want)
	}
	var few highlightPicker
	for i := range 15 {
		few.add(highlight{offset: int64(i), line: []byte(fmt.Sprint(i))})
	}
	if len(few.picked()) != 15 {
		t.Errorf("15 found: %d picked", len(few.picked()))
	}
}

// TestHighlightScan: only lines starting in the range count; a line over
// 300 bytes shows 300 around its match, on character boundaries, its
// offset where the shown text starts.
func TestHighlightScan(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400) + " error: here " + strings.Repeat("ü", 400)
	text := "error: before\nok\n" + long + "\nerror: after\n"
	w := newWindow(1<<20, 0)
	_, _ = w.Write([]byte(text))
	var p highlightPicker
	from := int64(len("error: before\nok\n")) - 2    // inside "ok": its line is not in the range
	to := int64(strings.Index(text, "error: after")) // the range ends where that line starts
	(&highlighter{}).scan(&p, "stdout", w, from, to, true)
	got := p.picked()
	if len(got) != 1 {
		t.Fatalf("found %d highlights, want the long line only: %+v", len(got), got)
	}
	h := got[0]
	if len(h.line) > highlightLineBytes || !utf8.Valid(h.line) || !strings.Contains(string(h.line), "error: here") {
		t.Errorf("the long line shows %d bytes: %q", len(h.line), h.line)
	}
	if at := h.offset; text[at:at+int64(len(h.line))] != string(h.line) {
		t.Errorf("offset %d does not start the shown text", at)
	}
}

// TestAgentHighlightsOfAFailingBuild: a failing build's one error line in
// the middle of 5,000 lines is in the first reply's highlights, at the
// offset output reads it from, and the result says what it did not show;
// with MCP_EXEC_HIGHLIGHT=off, and outside the profile, nothing is added.
func TestAgentHighlightsOfAFailingBuild(t *testing.T) {
	t.Parallel()
	const build = `seq 1 2500 | sed 's/^/  CC src\/unit/' >&2; echo "main.c:42: error: expected ';'" >&2; seq 1 2500 | sed 's/^/  CC lib\/part/' >&2; exit 2`
	args := json.RawMessage(`{"command":` + quote(build) + `}`)
	cl := agentSession(t, "2025-06-18")
	_, text, _ := cl.shellTool(1, "execute", args)
	var r resultJSON
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Highlights) != 1 || r.HighlightsTotal != 1 || r.Stderr == nil || r.Stderr.Omitted == nil {
		t.Fatalf("highlights %+v of %d in %.300s", r.Highlights, r.HighlightsTotal, text)
	}
	h, gap := r.Highlights[0], r.Stderr.Omitted
	if h.Stream != "stderr" || h.Line != "main.c:42: error: expected ';'" || h.Offset < gap.Offset || h.Offset >= gap.Offset+gap.Bytes {
		t.Errorf("the highlight %+v, the gap %+v", h, *gap)
	}
	if want := fmt.Sprintf("%d bytes of stderr were not shown; output with grep reaches them.", gap.Bytes); r.Note != want {
		t.Errorf("note %q, want %q", r.Note, want)
	}
	_, out, _ := cl.shellTool(2, "output", json.RawMessage(fmt.Sprintf(`{"job_id":"1","stderr":{"from":%d,"length":%d}}`, h.Offset, len(h.Line))))
	if !strings.Contains(out, `"data":"main.c:42: error: expected ';'"`) {
		t.Errorf("output at the highlight's offset: %s", out)
	}
	for _, cfg := range []*config{configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_HIGHLIGHT=off"), configOf(t, "MCP_EXEC_MAX_REPLY_BYTES=65536")} {
		_, text, _ := sessionAt(t, cfg, "2025-06-18").shellTool(1, "execute", args)
		if strings.Contains(text, "highlights") || strings.Contains(text, "not shown") || !strings.Contains(text, `"omitted"`) {
			t.Errorf("highlights off: %.300s", text)
		}
	}
}

// TestHighlightsKeepToTheBudget: under a small reply budget a cut result's
// highlights shrink with it, and the reply stays within the budget.
func TestHighlightsKeepToTheBudget(t *testing.T) {
	t.Parallel()
	cl := agentSession(t, "2024-11-05")
	command := `for i in $(seq 200); do echo "src/file$i.c:$i: error: something is wrong with this line number $i"; done; exit 1`
	_, text, _ := cl.shellTool(1, "execute", json.RawMessage(`{"command":`+quote(command)+`,"max_reply_bytes":2048}`))
	var r resultJSON
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatal(err)
	}
	if len(text) > 2048 || r.HighlightsTotal == 0 || len(r.Highlights) >= highlightsAtMost {
		t.Errorf("%d bytes, %d highlights of %d: %s", len(text), len(r.Highlights), r.HighlightsTotal, text)
	}
}

// BenchmarkHighlightScan: the failure forms over a gap of 4 MiB of build
// lines with no failure in them, the common case a reply waits for.
func BenchmarkHighlightScan(b *testing.B) {
	var text strings.Builder
	for i := 0; text.Len() < 4<<20; i++ {
		fmt.Fprintf(&text, "gcc -O2 -Wall -Werror -c src/file%d.c -o build/file%d.o\n", i, i)
	}
	w := newWindow(8<<20, 0)
	_, _ = w.Write([]byte(text.String()))
	b.SetBytes(int64(text.Len()))
	for b.Loop() {
		var p highlightPicker
		(&highlighter{}).scan(&p, "stdout", w, 0, int64(text.Len()), true)
	}
}
