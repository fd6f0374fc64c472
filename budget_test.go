package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamKinds make stream contents whose escaped cost differs: plain text,
// NULs (seven bytes on the wire each), invalid UTF-8, multi-byte characters
// and quotes.
var streamKinds = []func(r *rand.Rand, n int) []byte{
	func(r *rand.Rand, n int) []byte { return bytes.Repeat([]byte("line of text\n"), n/13+1)[:n] },
	func(r *rand.Rand, n int) []byte { return make([]byte, n) },
	func(r *rand.Rand, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	},
	func(r *rand.Rand, n int) []byte { return []byte(strings.Repeat("é€😀\"\\", n/11+1))[:n] },
}

// TestFitTextStaysWithinBudget: whatever the streams hold, a result cut by
// fitText, at line boundaries or not, escapes to no more than its budget,
// every cut keeps the first and last bytes of what it cut with exact
// offsets, and no cut splits a valid character.
func TestFitTextStaysWithinBudget(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 120; round++ {
		var results []*resultJSON
		originals := map[*sliceJSON][]byte{}
		for k := 0; k < 1+r.IntN(3); k++ {
			res := &resultJSON{JobID: "1", State: stateSuccess, delivered: &job{}}
			for _, target := range []**sliceJSON{&res.Stdout, &res.Stderr} {
				if r.IntN(4) == 0 {
					continue
				}
				data := streamKinds[r.IntN(len(streamKinds))](r, r.IntN(200000))
				offset := int64(r.IntN(1000))
				*target = &sliceJSON{Data: string(data), Offset: offset, Bytes: len(data), TotalBytes: offset + int64(len(data))}
				originals[*target] = data
			}
			results = append(results, res)
		}
		budget := 1024 + r.IntN(100000)
		text, err := fitText(results, results, budget, lineCost{}, sliceView{lineCuts: round%2 == 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := quotedLen(text); got > budget {
			t.Fatalf("round %d: %d bytes of escaped text for a budget of %d", round, got, budget)
		}
		for s, data := range originals {
			checkCut(t, round, s, data)
		}
	}
}

// checkCut checks a slice against the bytes it was made from.
func checkCut(t *testing.T, round int, s *sliceJSON, data []byte) {
	t.Helper()
	start := s.Offset
	if s.Omitted == nil {
		if s.Data != string(data) || s.Tail != nil {
			t.Fatalf("round %d: an uncut slice changed", round)
		}
		return
	}
	head, tail := []byte(s.Data), []byte(s.Tail.Data)
	switch {
	case !bytes.HasPrefix(data, head) || s.Bytes != len(head):
		t.Fatalf("round %d: the head is not the start of the stream", round)
	case s.Offset+int64(s.Bytes) != s.Omitted.Offset || s.Omitted.Offset+s.Omitted.Bytes != s.Tail.Offset:
		t.Fatalf("round %d: offsets do not chain: %d+%d, %+v, tail at %d", round, s.Offset, s.Bytes, *s.Omitted, s.Tail.Offset)
	case s.Tail.Offset+int64(s.Tail.Bytes) != start+int64(len(data)) || !bytes.HasSuffix(data, tail):
		t.Fatalf("round %d: the tail is not the end of the stream", round)
	case utf8.Valid(data) && (!utf8.Valid(head) || !utf8.Valid(tail)):
		t.Fatalf("round %d: a cut split a character", round)
	}
}

// TestReplyLineWithinBudget: through a session, the whole reply line of a
// big result stays within MCP_EXEC_MAX_REPLY_BYTES, and the result says it
// was cut and kept.
func TestReplyLineWithinBudget(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.maxReplyBytes = 4096
	cl := newRPCClient(t, cfg)
	cl.send(`{"jsonrpc":"2.0","id":"a-rather-long-request-id","method":"tools/call","params":{"name":"execute","arguments":{"command":"head -c 100000 /dev/zero","capture":"all"}}}`)
	line := cl.next(jobDeadline)
	if len(line)+1 > 4096 { // next strips the newline
		t.Errorf("reply line of %d bytes for a budget of 4096", len(line)+1)
	}
	if !strings.Contains(string(line), `\"kept\":true`) || !strings.Contains(string(line), `\"omitted\"`) {
		t.Errorf("a cut result must say kept and name the gap: %.300s", line)
	}
}

// TestLineCostDataSumsItsCharacters: what a stream's bytes cost is the sum
// of what each of its characters costs, plain ASCII included, in a plain
// and in a structured reply. (A structured reply counted plain ASCII once,
// so cuts were sized for half the bytes they took.)
func TestLineCostDataSumsItsCharacters(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, lc := range []lineCost{{}, {structured: true}} {
		for k, kind := range streamKinds {
			b := kind(r, 3000)
			sum := 0
			for n := 0; n < len(b); {
				cost, size := lc.char(b[n:])
				sum += cost
				n += size
			}
			if got := lc.data(b); got != sum {
				t.Errorf("structured %v, kind %d: data costs %d, its characters %d", lc.structured, k, got, sum)
			}
		}
	}
}

// TestStructuredCutKeepsAHeadAndATail: a 6.9 MB stream behind a head kept
// by head retention, cut for a structured reply of 65536 bytes, keeps a
// head and a tail of comparable size with the gap named; before, its room
// came out at 0 and the head was cut away whole.
func TestStructuredCutKeepsAHeadAndATail(t *testing.T) {
	t.Parallel()
	w := newWindow(1<<20, 16384)
	var stream []byte
	for i := 1; i <= 1000000; i++ {
		stream = strconv.AppendInt(stream, int64(i), 10)
		stream = append(stream, '\n')
	}
	_, _ = w.Write(stream)
	for _, lc := range []lineCost{{}, {structured: true}} {
		for _, budget := range []int{65536 - 200, 16384 - 200} {
			s, _ := sliceWithin(w, streamSpec{kind: streamAll}, budget)
			res := &resultJSON{JobID: "1", State: stateSuccess, Stdout: s, delivered: &job{}}
			text, err := fitText(res, []*resultJSON{res}, budget, lc, sliceView{})
			if err != nil {
				t.Fatal(err)
			}
			s = res.Stdout
			head, tail := len(s.Data), 0
			if s.Tail != nil {
				tail = len(s.Tail.Data)
			}
			switch {
			case lc.of(text) > budget:
				t.Errorf("structured %v, budget %d: %d bytes on the line", lc.structured, budget, lc.of(text))
			case head < budget/16 || tail < budget/16 || head > 2*tail || tail > 2*head:
				t.Errorf("structured %v, budget %d: head %d bytes, tail %d: not both ends", lc.structured, budget, head, tail)
			case s.Omitted == nil || s.Offset+int64(s.Bytes) != s.Omitted.Offset || s.Omitted.Offset+s.Omitted.Bytes != s.Tail.Offset:
				t.Errorf("structured %v, budget %d: the gap is not named: %+v", lc.structured, budget, s)
			case !bytes.HasPrefix(stream, []byte(s.Data)) || !bytes.HasSuffix(stream, []byte(s.Tail.Data)):
				t.Errorf("structured %v, budget %d: the ends are not the stream's", lc.structured, budget)
			case !res.Kept:
				t.Errorf("structured %v, budget %d: a cut delivered result is not kept", lc.structured, budget)
			}
		}
	}
}

// TestDeferringWaitDeliversWhatFitsWhole: a wait whose five small results
// do not fit 1024 bytes of structured reply delivers the first whole and
// defers the rest, none of them said to be kept. Each fit used to start
// from the slices the fit before had cut, whose gaps made every result
// bigger: all five were deferred, the next wait the same, and every
// deferred entry said "kept".
func TestDeferringWaitDeliversWhatFitsWhole(t *testing.T) {
	t.Parallel()
	cl := sessionAt(t, testConfig(), "2025-06-18")
	var ids []string
	for i := 1; i <= 5; i++ {
		cl.shellTool(i, "execute", json.RawMessage(`{"command":"echo hi","nowait":true}`))
		ids = append(ids, strconv.Itoa(i))
		eventually(t, jobDeadline, "job "+ids[i-1]+" ending", func() bool {
			st, _, _ := cl.shellTool(100, "status", map[string]string{"job_id": ids[i-1]})
			return st["state"] == stateSuccess
		})
	}
	_, text, _ := cl.shellTool(6, "wait", map[string]any{"job_ids": ids, "timeout": 0, "max_reply_bytes": 1024})
	var entries []resultJSON
	if err := json.Unmarshal([]byte(text), &entries); err != nil || len(entries) != 5 {
		t.Fatalf("%v: %s", err, text)
	}
	if s := entries[0].Stdout; entries[0].Deferred || s == nil || s.Data != "hi\n" || s.Omitted != nil {
		t.Errorf("the first result is not delivered whole: %s", text)
	}
	for _, e := range entries {
		if e.Kept {
			t.Errorf("job %s is said to be kept: %s", e.JobID, text)
		}
	}
}

// TestLineCutsEndAndStartAtLines: with line cuts, a cut of 100-byte lines
// ends its head and starts its tail at a line boundary, and the gap's
// offsets still chain exactly; without them the cut falls where the
// budget puts it, inside a line.
func TestLineCutsEndAndStartAtLines(t *testing.T) {
	t.Parallel()
	var stream []byte
	for i := 1; i <= 2000; i++ {
		stream = append(stream, fmt.Sprintf("%099d\n", i)...)
	}
	for _, atLines := range []bool{true, false} {
		s := &sliceJSON{Data: string(stream), Bytes: len(stream), TotalBytes: int64(len(stream))}
		res := &resultJSON{JobID: "1", State: stateSuccess, Stdout: s, delivered: &job{}}
		if _, err := fitText(res, []*resultJSON{res}, 16333, lineCost{}, sliceView{lineCuts: atLines}); err != nil {
			t.Fatal(err)
		}
		checkCut(t, 0, res.Stdout, stream)
		s = res.Stdout
		onLines := strings.HasSuffix(s.Data, "\n") && s.Tail.Offset%100 == 0
		if onLines != atLines {
			t.Errorf("line cuts %v: head ends ...%q, tail starts at %d", atLines, s.Data[len(s.Data)-10:], s.Tail.Offset)
		}
	}
}

// TestLineCutsStayWhereNoLineEndsNearby: lines of 3000 bytes leave no
// newline within reach of most cuts; a cut end then stays where the budget
// put it (never further than lineCutReachBytes from it), its offsets exact.
func TestLineCutsStayWhereNoLineEndsNearby(t *testing.T) {
	t.Parallel()
	var stream []byte
	for i := 1; i <= 100; i++ {
		stream = append(stream, fmt.Sprintf("%02999d\n", i)...)
	}
	for budget := 4000; budget < 40000; budget += 1777 {
		s := &sliceJSON{Data: string(stream), Bytes: len(stream), TotalBytes: int64(len(stream))}
		res := &resultJSON{JobID: "1", State: stateSuccess, Stdout: s, delivered: &job{}}
		if _, err := fitText(res, []*resultJSON{res}, budget, lineCost{}, sliceView{lineCuts: true}); err != nil {
			t.Fatal(err)
		}
		checkCut(t, budget, res.Stdout, stream)
		s = res.Stdout
		head, tail := []byte(s.Data), s.Tail.Offset
		if !bytes.HasSuffix(head, []byte("\n")) && bytes.Contains(head[max(len(head)-lineCutReachBytes, 0):], []byte("\n")) {
			t.Errorf("budget %d: the head ends inside a line with a newline within reach", budget)
		}
		if stream[tail-1] != '\n' && bytes.Contains(stream[tail:min(int(tail)+lineCutReachBytes, len(stream)-1)], []byte("\n")) {
			t.Errorf("budget %d: the tail starts inside a line with a newline within reach", budget)
		}
	}
}

// TestPlainCutKeepsRawOffsets: a plain view of a cut slice shows the raw
// bytes' offsets. The escapes used to be stripped before the cut, which
// then counted the plain text's bytes as raw ones: the gap and the tail's
// offset pointed short of the bytes shown.
func TestPlainCutKeepsRawOffsets(t *testing.T) {
	t.Parallel()
	cl := sessionAt(t, testConfig(), "2025-03-26")
	command := `awk 'BEGIN { for (i = 1; i <= 3000; i++) printf "\033[31m%d\033[0m\n", i }'`
	var raw []byte
	for i := 1; i <= 3000; i++ {
		raw = append(raw, fmt.Sprintf("\x1b[31m%d\x1b[0m\n", i)...)
	}
	r, text, isErr := cl.shellTool(1, "execute", map[string]any{"command": command, "nowait": true})
	if isErr {
		t.Fatal(text)
	}
	id := r["job_id"]
	eventually(t, jobDeadline, "the job ending", func() bool {
		st, _, _ := cl.shellTool(100, "status", map[string]any{"job_id": id})
		return st["state"] == stateSuccess
	})
	_, text, _ = cl.shellTool(2, "output", map[string]any{"job_id": id, "stdout": "all", "plain": true, "max_reply_bytes": 4096})
	var out resultJSON
	if err := json.Unmarshal([]byte(text), &out); err != nil || out.Stdout == nil || out.Stdout.Tail == nil {
		t.Fatalf("%v: not a cut slice: %s", err, text)
	}
	s := out.Stdout
	end := s.Offset + int64(s.Bytes)
	switch {
	case s.TotalBytes != int64(len(raw)):
		t.Fatalf("total_bytes %d, the job wrote %d", s.TotalBytes, len(raw))
	case end != s.Omitted.Offset || s.Omitted.Offset+s.Omitted.Bytes != s.Tail.Offset:
		t.Errorf("offsets do not chain: %+v, %+v, tail at %d", s, *s.Omitted, s.Tail.Offset)
	case s.Tail.Offset+int64(s.Tail.Bytes) != s.TotalBytes:
		t.Errorf("the tail ends at %d of %d bytes", s.Tail.Offset+int64(s.Tail.Bytes), s.TotalBytes)
	case s.Data != string(plainText(raw[s.Offset:end])):
		t.Errorf("the head is not the plain text of bytes %d to %d", s.Offset, end)
	case s.Tail.Data != string(plainText(raw[s.Tail.Offset:])):
		t.Errorf("the tail is not the plain text of the bytes from %d", s.Tail.Offset)
	}
}

// TestAgentViewIsPlainAndOutputReadsRaw: under the agent profile a pipe
// job's result shows its text without escapes, offsets and counts those of
// the raw bytes; output shows the same by default and the raw bytes with
// plain:false. Outside the profile the result is the raw bytes.
func TestAgentViewIsPlainAndOutputReadsRaw(t *testing.T) {
	t.Parallel()
	const command, raw = `printf '\033[1mbold\033[0m\r\n'`, "\x1b[1mbold\x1b[0m\r\n"
	for _, c := range []struct {
		settings []string
		want     string
	}{{[]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_SPILL=off"}, "bold\n"}, {nil, raw}} {
		cl := sessionAt(t, configOf(t, c.settings...), "2025-03-26")
		_, text, _ := cl.shellTool(1, "execute", map[string]any{"command": command})
		var r resultJSON
		if err := json.Unmarshal([]byte(text), &r); err != nil || r.Stdout == nil {
			t.Fatalf("%v: %s", err, text)
		}
		if r.Stdout.Data != c.want || r.Stdout.Bytes != len(raw) || r.Stdout.TotalBytes != int64(len(raw)) {
			t.Errorf("%v: the result shows %+v", c.settings, *r.Stdout)
		}
		_, text, _ = cl.shellTool(2, "execute", map[string]any{"command": command, "nowait": true})
		_ = json.Unmarshal([]byte(text), &r)
		eventually(t, jobDeadline, "the job ending", func() bool {
			st, _, _ := cl.shellTool(100, "status", map[string]any{"job_id": r.JobID})
			return st["state"] == stateSuccess
		})
		for _, plain := range []any{nil, false} {
			args := map[string]any{"job_id": r.JobID, "stdout": "all"}
			want := c.want
			if plain != nil {
				args["plain"], want = plain, raw
			}
			var o resultJSON
			_, text, _ = cl.shellTool(3, "output", args)
			if err := json.Unmarshal([]byte(text), &o); err != nil || o.Stdout == nil || o.Stdout.Data != want || o.Stdout.Bytes != len(raw) {
				t.Errorf("%v, plain %v: output shows %s", c.settings, plain, text)
			}
		}
	}
}
