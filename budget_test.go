package main

import (
	"bytes"
	"encoding/json"
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
// fitText escapes to no more than its budget, every cut keeps the first and
// last bytes of what it cut with exact offsets, and no cut splits a valid
// character.
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
		text, err := fitText(results, results, budget, lineCost{})
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
			text, err := fitText(res, []*resultJSON{res}, budget, lc)
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
