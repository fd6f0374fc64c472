package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// linesOf walks a fresh cursor from from over w and returns "offset:text"
// for each complete line.
func linesOf(w *window, from int64, ended bool) []string {
	var got []string
	newLineCursor(w, from).walk(ended, func(at int64, text []byte, _ int64) bool {
		got = append(got, fmt.Sprintf("%d:%s", at, text))
		return !stopLines
	})
	return got
}

// TestLineCursorCompleteLines: only complete lines, from a line start; a
// carriage return before the newline is not text; the unterminated last
// line counts once the stream has ended.
func TestLineCursorCompleteLines(t *testing.T) {
	w := newWindow(1024, 0)
	w.Write([]byte("one\r\ntwo\nthr"))
	for _, c := range []struct {
		from  int64
		ended bool
		want  string
	}{
		{0, false, "0:one 5:two"},
		{0, true, "0:one 5:two 9:thr"},
		{5, false, "5:two"},
		{6, false, ""}, // inside "two": not a complete line
		{99, true, ""},
	} {
		if got := strings.Join(linesOf(w, c.from, c.ended), " "); got != c.want {
			t.Errorf("from %d ended %v: %q, want %q", c.from, c.ended, got, c.want)
		}
	}
}

// TestLineCursorResumes: a cursor takes up where it stopped, and a line
// written in pieces is one line.
func TestLineCursorResumes(t *testing.T) {
	w := newWindow(1024, 0)
	c := newLineCursor(w, 0)
	var got []string
	visit := func(at int64, text []byte, length int64) bool {
		got = append(got, fmt.Sprintf("%d:%s:%d", at, text, length))
		return string(text) == "stop"
	}
	for _, piece := range []string{"ab", "c\nstop\nd", "ef\n"} {
		w.Write([]byte(piece))
		c.walk(false, visit)
	}
	if want := "0:abc:3 4:stop:4 9:def:3"; strings.Join(got, " ") != want {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// TestLineCursorGaps: past the kept head and where the ring dropped bytes,
// the fragment that follows the gap is no line, and the skipped bytes are
// counted.
func TestLineCursorGaps(t *testing.T) {
	w := newWindow(16, 8)
	w.Write([]byte("head\nhe")) // the kept head: 8 bytes, "head\nhea"
	w.Write([]byte("ad2\n0123456789\nlast\n"))
	c := newLineCursor(w, 0)
	var got []string
	c.walk(false, func(at int64, text []byte, _ int64) bool {
		got = append(got, fmt.Sprintf("%d:%s", at, text))
		return !stopLines
	})
	// The ring keeps the last 16 bytes, from offset 11: "0123456789\nlast\n"
	// begins right after a newline, but the cursor cannot know it.
	if want := "0:head 22:last"; strings.Join(got, " ") != want {
		t.Errorf("lines %q, want %q", got, want)
	}
	if c.skipped != 11-8 {
		t.Errorf("skipped %d bytes, want 3", c.skipped)
	}
}

// TestLineCursorLongLine: a line longer than a cursor holds is matched on
// its first bytes, its full length still told.
func TestLineCursorLongLine(t *testing.T) {
	w := newWindow(4*maxHeldLineBytes, 0)
	w.Write([]byte(strings.Repeat("x", 2*maxHeldLineBytes) + "\nend\n"))
	var lengths []int64
	var held []int
	newLineCursor(w, 0).walk(false, func(_ int64, text []byte, length int64) bool {
		lengths, held = append(lengths, length), append(held, len(text))
		return !stopLines
	})
	if fmt.Sprint(lengths) != fmt.Sprint([]int64{2 * maxHeldLineBytes, 3}) || held[0] != maxHeldLineBytes {
		t.Errorf("lengths %v held %v", lengths, held)
	}
}

// grepOf searches w for pattern with the given options.
func grepOf(t *testing.T, w *window, spec string, ended bool, room int) *grepJSON {
	t.Helper()
	s, err := parseStreamSpec(json.RawMessage(spec))
	if err != nil || s.kind != streamGrep {
		t.Fatalf("spec %s: %v", spec, err)
	}
	return grepWindow(w, s.grep, ended, room)
}

// TestGrepWindow: matches, their count, context, max with next, and the
// searched range.
func TestGrepWindow(t *testing.T) {
	w := newWindow(1<<20, 0)
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
	g := grepOf(t, w, `{"grep":"^line [0-9]*7$","max":2,"context":1}`, true, 1<<20)
	b, _ := json.Marshal(g)
	want := `{"matches":[{"offset":42,"line":"line 7","before":["line 6"],"after":["line 8"]},` +
		`{"offset":119,"line":"line 17","before":["line 16"],"after":["line 18"]}],"match_count":10,"searched":{"from":0,"to":792},"next":127}`
	if string(b) != want {
		t.Errorf("grep:\n%s\nwant\n%s", b, want)
	}
	g = grepOf(t, w, `{"grep":"7$","from":127}`, false, 1<<20)
	if g.MatchCount != 8 || g.Matches[0].Line != "line 27" || g.Next != nil || g.Searched.From != 127 {
		t.Errorf("from next: %+v", g)
	}
	if g := grepOf(t, w, `{"grep":"nothing"}`, false, 1<<20); len(g.Matches) != 0 || g.MatchCount != 0 || g.Searched.To != 792 {
		t.Errorf("no match: %+v", g)
	}
}

// TestGrepWindowBounds: a long line is clipped around its match; the
// listed lines stay within room, the rest counted and reachable by next.
func TestGrepWindowBounds(t *testing.T) {
	w := newWindow(1<<20, 0)
	w.Write([]byte(strings.Repeat("a", 10000) + "NEEDLE" + strings.Repeat("b", 10000) + "\n"))
	g := grepOf(t, w, `{"grep":"NEEDLE"}`, false, 1<<20)
	m := g.Matches[0]
	if len(m.Line) > shownLineBytes || !strings.Contains(m.Line, "NEEDLE") || m.Clipped == nil ||
		m.Clipped.LineBytes != 20006 || m.Clipped.Offset+int64(strings.Index(m.Line, "NEEDLE")) != 10000 {
		t.Errorf("clipped match: %d bytes, clipped %+v", len(m.Line), m.Clipped)
	}
	w = newWindow(1<<20, 0)
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(w, "%03d %s\n", i, strings.Repeat("x", 100))
	}
	g = grepOf(t, w, `{"grep":"x","max":1000}`, false, 2000)
	if n := len(g.Matches); n == 0 || n > 20 || g.MatchCount != 1000 || g.Next == nil || *g.Next != int64(n*105) {
		t.Errorf("within room: %d listed of %d, next %v", n, g.MatchCount, g.Next)
	}
}

// TestGrepSpecRefusals: each bad grep says what is allowed; the default
// capture takes no grep.
func TestGrepSpecRefusals(t *testing.T) {
	for spec, want := range map[string]string{
		`{"grep":"("}`:              "not an RE2",
		`{"grep":5}`:                "must be a string",
		`{"grep":"x","max":-1}`:     "max must be a whole number, from 1 to 1000",
		`{"grep":"x","max":0}`:      "from 1 to 1000",
		`{"grep":"x","context":99}`: "context must be a whole number, from 0 to 20",
		`{"grep":"x","from":-3}`:    "an offset, 0 or more",
		`{"grep":"x","tail":3}`:     `unknown key "tail"`,
	} {
		if _, err := parseStreamSpec(json.RawMessage(spec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
	// A call's capture parses a grep (its handler decides whether the
	// profile shows one); the default capture, MCP_EXEC_CAPTURE, takes none.
	if p, err := parseCapturePolicy(json.RawMessage(`{"on_error":{"stdout":{"grep":"x"}}}`)); err != nil || p.grepAt() != "on_error: stdout" {
		t.Errorf("grep in capture: %v, at %q", err, p.grepAt())
	}
	if _, err := loadConfig([]string{`MCP_EXEC_CAPTURE={"on_success":"all","on_error":{"stderr":{"grep":"x"}}}`}); err == nil ||
		!strings.Contains(err.Error(), "on_error: stderr: grep is for output") {
		t.Errorf("grep in MCP_EXEC_CAPTURE: %v", err)
	}
	if s, _ := parseStreamSpec(json.RawMessage(`{"grep":"a.c"}`)); s.grep.max != defaultGrepMax || !s.grep.re.MatchString("abc") || s.grep.re.String() != regexp.MustCompile("a.c").String() {
		t.Errorf("defaults: %+v", s.grep)
	}
}

// TestOutputGrepRunningAndKept: output searches a running job's stream,
// and a kept (cut) result's after delivery, in one small reply.
func TestOutputGrepRunningAndKept(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cl := newRPCClient(t, configOf(t, "MCP_EXEC_PROFILE=agent"))
	jid := startNowait(t, cl, 1, "seq 1 50000; echo 'warning: disk almost full' >&2; exec sleep 30")
	e, _ := untilEntry(t, cl, 2, jid, `{"pattern":"^warning","stream":"stderr"}`, 20)
	if e["matched"] == nil {
		t.Fatalf("entry %v", e)
	}
	v, text, isErr := cl.tool(3, "output", fmt.Sprintf(`{"job_id":%q,"stdout":{"grep":"^4999[0-9]$","max":3},"stderr":"all"}`, jid))
	if isErr {
		t.Fatal(text)
	}
	r := v.(map[string]any)
	g := r["stdout"].(map[string]any)
	if r["state"] != "running" || g["match_count"] != float64(10) || len(g["matches"].([]any)) != 3 ||
		r["stderr"].(map[string]any)["data"] != "warning: disk almost full\n" {
		t.Errorf("running: %s", text)
	}
	cl.tool(4, "kill", fmt.Sprintf(`{"job_id":%q,"signal":"KILL"}`, jid))

	// About 5 MB: the result is cut to fit and kept.
	v, text, _ = cl.tool(5, "execute", `{"command":"seq 1 700000"}`)
	r = v.(map[string]any)
	if r["kept"] != true {
		t.Fatalf("not kept: %.300s", text)
	}
	_, text, isErr = cl.tool(6, "output", fmt.Sprintf(`{"job_id":%q,"stdout":{"grep":"^699999$"}}`, r["job_id"]))
	if isErr || len(text) > 1024 || !strings.Contains(text, `"line":"699999"`) || !strings.Contains(text, `"match_count":1`) {
		t.Errorf("search of a kept result (%d bytes): %s", len(text), text)
	}
}
