package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// ---------------------------------------------------------------------------
// window.go
// ---------------------------------------------------------------------------

// refWindow is the naive reference for window: it keeps every byte ever
// written and derives from them what a window of limit bytes must answer,
// per wire-1.0 "The stream slice" and "Capture and stream specs".
type refWindow struct {
	limit int
	all   []byte

	charsFor  int        // len(all) when charsMemo was computed, plus one
	charsMemo [][2]int64 // chars() for that length
}

func (m *refWindow) write(p []byte) { m.all = append(m.all, p...) }

func (m *refWindow) span() (start, total int64) {
	total = int64(len(m.all))
	return max(0, total-int64(m.limit)), total
}

// chars lists the absolute [first, end) ranges of the valid multi-byte
// characters among the retained bytes, decoding forward from the window
// start (a window that starts inside a character sees its tail as invalid
// bytes).
func (m *refWindow) chars() [][2]int64 {
	if m.charsFor == len(m.all)+1 {
		return m.charsMemo
	}
	start, total := m.span()
	var out [][2]int64
	for p := start; p < total; {
		_, size := utf8.DecodeRune(m.all[p:total])
		if size > 1 {
			out = append(out, [2]int64{p, p + int64(size)})
		}
		p += int64(size)
	}
	m.charsFor, m.charsMemo = len(m.all)+1, out
	return out
}

func (m *refWindow) readAll() slice {
	start, total := m.span()
	return slice{data: m.all[start:total], offset: start, total: total, truncated: start > 0, dropped: start}
}

// readRange follows the server's reading of wire-1.0: dropped_bytes counts
// the requested bytes [from, from+length) that lie below the window start,
// and a from below the start is served from the start, length counting from
// there.
func (m *refWindow) readRange(from, length int64, unaligned bool) slice {
	start, total := m.span()
	s := slice{total: total}
	from = max(from, 0)
	if from < start {
		s.dropped = start - from
		if length >= 0 {
			s.dropped = min(s.dropped, length)
		}
		s.truncated, from = s.dropped > 0, start
	}
	from = min(from, total)
	to := total
	if length >= 0 && from+length < total {
		to = from + length
	}
	if !unaligned {
		empty := from == to
		for _, c := range m.chars() {
			if c[0] < from && from < c[1] {
				from = c[0]
			}
		}
		if empty {
			to = from
		}
		for _, c := range m.chars() {
			if !empty && c[0] < to && to < c[1] {
				to = c[1]
			}
		}
	}
	s.offset, s.data = from, m.all[from:to]
	return s
}

// readTail: lines start at the window start and after every '\n' that is not
// the last byte. Asking for as many lines as the window holds, or more, gives
// the whole window, truncated when the window dropped its head (its first line
// may be partial).
func (m *refWindow) readTail(n int64) slice {
	start, total := m.span()
	if n <= 0 {
		return slice{offset: total, total: total}
	}
	starts := []int64{start}
	for p := start; p < total-1; p++ {
		if m.all[p] == '\n' {
			starts = append(starts, p+1)
		}
	}
	if start == total || n >= int64(len(starts)) {
		return m.readAll()
	}
	from := starts[int64(len(starts))-n]
	return slice{data: m.all[from:total], offset: from, total: total}
}

// sameSlice reports how got differs from want, or "" when they agree.
func sameSlice(got, want slice) string {
	switch {
	case !bytes.Equal(got.data, want.data):
		return fmt.Sprintf("data %q, want %q", got.data, want.data)
	case got.offset != want.offset:
		return fmt.Sprintf("offset %d, want %d", got.offset, want.offset)
	case got.total != want.total:
		return fmt.Sprintf("total %d, want %d", got.total, want.total)
	case got.truncated != want.truncated:
		return fmt.Sprintf("truncated %v, want %v", got.truncated, want.truncated)
	case got.dropped != want.dropped:
		return fmt.Sprintf("dropped %d, want %d", got.dropped, want.dropped)
	}
	return ""
}

func TestWindowWrites(t *testing.T) {
	t.Parallel()
	huge := bytes.Repeat([]byte("0123456789"), 100)
	ones := make([][]byte, 100)
	for i := range ones {
		ones[i] = []byte{'a' + byte(i%26)}
	}
	cases := []struct {
		name   string
		limit  int
		writes [][]byte
	}{
		{"empty window", 8, nil},
		{"empty write", 8, [][]byte{{}}},
		{"short", 8, [][]byte{[]byte("abc")}},
		{"exact fill", 8, [][]byte{[]byte("abcdefgh")}},
		{"exact fill in parts", 8, [][]byte{[]byte("abcd"), []byte("efgh")}},
		{"one over", 8, [][]byte{[]byte("abcdefghi")}},
		{"wrap", 8, [][]byte{[]byte("abcdef"), []byte("ghij")}},
		{"wrap twice", 8, [][]byte{[]byte("abcdef"), []byte("ghijkl"), []byte("mnopqrstu")}},
		{"long single write", 4, [][]byte{[]byte("abcdefghij")}},
		{"huge single write", 8, [][]byte{huge}},
		{"huge write after a partial fill", 8, [][]byte{[]byte("xy"), huge}},
		{"huge write after a wrap", 8, [][]byte{[]byte("abcdefghijk"), huge, []byte("z")}},
		{"many 1-byte writes", 8, ones},
		{"multi-part", 8, [][]byte{[]byte("ab"), []byte("cd"), []byte("efghijk"), []byte("l")}},
		{"limit 1", 1, [][]byte{[]byte("abc"), []byte("d")}},
		{"limit 0 means 1", 0, [][]byte{[]byte("abc")}},
		{"chunk-sized limit", windowChunkBytes, [][]byte{huge, bytes.Repeat(huge, 70)}},
		{"limit beyond one chunk", windowChunkBytes + 7, [][]byte{bytes.Repeat(huge, 66), huge[:13], bytes.Repeat(huge, 70)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWindow(tc.limit, 0)
			ref := &refWindow{limit: max(tc.limit, 1)}
			for _, p := range tc.writes {
				n, err := w.Write(p)
				if n != len(p) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
				}
				ref.write(p)
			}
			got, want := w.readAll(0), ref.readAll()
			if d := sameSlice(got, want); d != "" {
				t.Fatalf("readAll: %s", d)
			}
			retained := int64(len(got.data))
			if got.truncated && got.dropped != got.total-retained {
				t.Errorf("dropped %d, want total-retained = %d", got.dropped, got.total-retained)
			}
			if start, total := w.stats(); start != want.offset || total != want.total {
				t.Errorf("stats() = %d, %d; want %d, %d", start, total, want.offset, want.total)
			}
		})
	}
}

func TestWindowOffsetsAfterWrap(t *testing.T) {
	t.Parallel()
	// Byte i of the stream is byte(i), so every returned byte names its own
	// absolute offset.
	const limit = 10
	w := newWindow(limit, 0)
	for i := 0; i < 257; i += 3 {
		w.Write([]byte{byte(i), byte(i + 1), byte(i + 2)})
	}
	start, total := w.stats()
	if total != 258 || start != 248 {
		t.Fatalf("stats() = %d, %d; want 248, 258", start, total)
	}
	for from := start; from <= total; from++ {
		s := w.readRange(from, 4, true, 0)
		if s.offset != from || s.truncated {
			t.Fatalf("readRange(%d, 4): offset %d truncated %v", from, s.offset, s.truncated)
		}
		for i, b := range s.data {
			if b != byte(from+int64(i)) {
				t.Fatalf("readRange(%d, 4): byte %d is %d, want %d", from, i, b, byte(from+int64(i)))
			}
		}
	}
}

func TestWindowReadRange(t *testing.T) {
	t.Parallel()
	// limit 10, 20 bytes written: retained "abcdefghij" at offsets 10..19.
	wrapped := newWindow(10, 0)
	wrapped.Write([]byte("0123456789abcdefghij"))
	fresh := newWindow(64, 0)
	fresh.Write([]byte("hello world"))
	cases := []struct {
		name         string
		w            *window
		from, length int64
		data         string
		offset       int64
		dropped      int64 // > 0: truncated with this many dropped bytes
	}{
		{"inside", wrapped, 12, 3, "cde", 12, 0},
		{"window start to end", wrapped, 10, -1, "abcdefghij", 10, 0},
		{"to the end", wrapped, 15, -1, "fghij", 15, 0},
		{"length past the end", wrapped, 18, 100, "ij", 18, 0},
		{"zero length", wrapped, 15, 0, "", 15, 0},
		{"one byte below start", wrapped, 9, -1, "abcdefghij", 10, 1},
		{"below start, length counts from the start", wrapped, 5, 3, "abc", 10, 3},
		{"partly below start", wrapped, 8, 5, "abcde", 10, 2},
		{"from 0 after wrap", wrapped, 0, 2, "ab", 10, 2},
		{"from 0 to the end after wrap", wrapped, 0, -1, "abcdefghij", 10, 10},
		{"negative from counts as 0", wrapped, -4, 2, "ab", 10, 2},
		{"zero length below start is not truncated", wrapped, 3, 0, "", 10, 0},
		{"at total", wrapped, 20, 5, "", 20, 0},
		{"beyond total", wrapped, 25, 5, "", 20, 0},
		{"far beyond total", wrapped, math.MaxInt64, -1, "", 20, 0},
		{"fresh from 0", fresh, 0, 5, "hello", 0, 0},
		{"fresh negative from", fresh, -100, -1, "hello world", 0, 0},
		{"fresh huge length", fresh, 6, math.MaxInt64, "world", 6, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, unaligned := range []bool{false, true} {
				s := tc.w.readRange(tc.from, tc.length, unaligned, 0)
				want := slice{data: []byte(tc.data), offset: tc.offset, total: s.total, truncated: tc.dropped > 0, dropped: tc.dropped}
				if d := sameSlice(s, want); d != "" {
					t.Errorf("readRange(%d, %d, unaligned=%v): %s", tc.from, tc.length, unaligned, d)
				}
			}
		})
	}
}

func TestWindowReadTail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		limit   int
		written string
		n       int64
		data    string
		offset  int64
		dropped int64 // > 0: truncated
	}{
		{"empty window", 64, "", 1, "", 0, 0},
		{"last line", 64, "a\nb\nc\n", 1, "c\n", 4, 0},
		{"two lines", 64, "a\nb\nc\n", 2, "b\nc\n", 2, 0},
		{"exactly all lines", 64, "a\nb\nc\n", 3, "a\nb\nc\n", 0, 0},
		{"more lines than written", 64, "a\nb\nc\n", 10, "a\nb\nc\n", 0, 0},
		{"unterminated last line", 64, "a\nb\nc", 1, "c", 4, 0},
		{"unterminated, two lines", 64, "a\nb\nc", 2, "b\nc", 2, 0},
		{"empty lines", 64, "\n\n\n", 2, "\n\n", 1, 0},
		{"zero lines", 64, "a\nb\n", 0, "", 4, 0},
		{"negative lines", 64, "a\nb\n", -3, "", 4, 0},
		{"single line no newline", 64, "abc", 1, "abc", 0, 0},
		{"CRLF endings kept", 64, "a\r\nb\r\n", 1, "b\r\n", 3, 0},
		// limit 6 of "l1\nl2\nl3\n": retained "l2\nl3\n" from offset 3.
		{"after wrap, inside", 6, "l1\nl2\nl3\n", 1, "l3\n", 6, 0},
		{"after wrap, as many lines as held", 6, "l1\nl2\nl3\n", 2, "l2\nl3\n", 3, 3},
		{"after wrap, more lines than held", 6, "l1\nl2\nl3\n", 5, "l2\nl3\n", 3, 3},
		{"after wrap, no newline held", 4, "abcdefgh", 1, "efgh", 4, 4},
		{"after wrap, starts with newline", 4, "abc\nd\n", 1, "d\n", 4, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWindow(tc.limit, 0)
			w.Write([]byte(tc.written))
			s := w.readTail(tc.n, 0)
			want := slice{data: []byte(tc.data), offset: tc.offset, total: int64(len(tc.written)), truncated: tc.dropped > 0, dropped: tc.dropped}
			if d := sameSlice(s, want); d != "" {
				t.Errorf("readTail(%d) of %q (limit %d): %s", tc.n, tc.written, tc.limit, d)
			}
		})
	}
}

// TestWindowAlignEveryOffset reads every range that starts or ends at every
// byte of a 2-, 3- and 4-byte character, at every position of the ring, and
// checks that aligned reads widen to whole characters and unaligned reads
// slice exactly.
func TestWindowAlignEveryOffset(t *testing.T) {
	t.Parallel()
	const limit = 16
	for _, ch := range []string{"é", "€", "😀"} {
		size := int64(len(ch))
		content := []byte("ab" + ch + "cd")
		for phase := 0; phase < limit; phase++ {
			w := newWindow(limit, 0)
			w.Write(bytes.Repeat([]byte("x"), phase))
			w.Write(content)
			_, total := w.stats()
			base := total - int64(len(content)) // absolute offset of content[0]
			c0, c1 := base+2, base+2+size       // the character
			inside := func(p int64) bool { return c0 < p && p < c1 }
			for from := base; from <= base+int64(len(content)); from++ {
				for to := from; to <= base+int64(len(content)); to++ {
					u := w.readRange(from, to-from, true, 0)
					if u.offset != from || !bytes.Equal(u.data, content[from-base:to-base]) {
						t.Fatalf("%q phase %d unaligned [%d,%d): offset %d data %q", ch, phase, from, to, u.offset, u.data)
					}
					wantFrom, wantTo := from, to
					if inside(from) {
						wantFrom = c0
					}
					if inside(to) {
						wantTo = c1
					}
					if from == to {
						wantTo = wantFrom
					}
					a := w.readRange(from, to-from, false, 0)
					if a.offset != wantFrom || !bytes.Equal(a.data, content[wantFrom-base:wantTo-base]) {
						t.Fatalf("%q phase %d aligned [%d,%d): offset %d data %q; want offset %d data %q",
							ch, phase, from, to, a.offset, a.data, wantFrom, content[wantFrom-base:wantTo-base])
					}
					if !utf8.Valid(a.data) {
						t.Fatalf("%q phase %d aligned [%d,%d) split a character: %q", ch, phase, from, to, a.data)
					}
				}
			}
		}
	}
}

func TestWindowAlignEdges(t *testing.T) {
	t.Parallel()
	t.Run("window starts inside a character", func(t *testing.T) {
		t.Parallel()
		w := newWindow(5, 0)
		w.Write([]byte("😀xyz")) // 7 bytes; retained: the last two bytes of 😀, then xyz
		for _, from := range []int64{2, 3} {
			s := w.readRange(from, -1, false, 0)
			if s.offset != from || !bytes.Equal(s.data, []byte("😀xyz")[from:]) {
				t.Errorf("readRange(%d): offset %d data %q; the lead byte is gone, so from cannot move back", from, s.offset, s.data)
			}
		}
	})
	t.Run("stream ends inside a character", func(t *testing.T) {
		t.Parallel()
		w := newWindow(64, 0)
		w.Write([]byte("ab\xe2\x82"))
		s := w.readRange(0, 3, false, 0)
		if s.offset != 0 || string(s.data) != "ab\xe2" {
			t.Errorf("readRange(0, 3) = %d %q; an incomplete character is not a character", s.offset, s.data)
		}
	})
	t.Run("invalid bytes stay put", func(t *testing.T) {
		t.Parallel()
		w := newWindow(64, 0)
		w.Write([]byte("a\x80\x80\xffb"))
		s := w.readRange(2, 1, false, 0)
		if s.offset != 2 || string(s.data) != "\x80" {
			t.Errorf("readRange(2, 1) = %d %q", s.offset, s.data)
		}
	})
	t.Run("empty read inside a character", func(t *testing.T) {
		t.Parallel()
		w := newWindow(64, 0)
		w.Write([]byte("a€b"))
		s := w.readRange(2, 0, false, 0)
		if s.offset != 1 || len(s.data) != 0 {
			t.Errorf("readRange(2, 0) = %d %q; want empty at the character's first byte", s.offset, s.data)
		}
	})
	t.Run("encoded U+FFFD is a character", func(t *testing.T) {
		t.Parallel()
		w := newWindow(64, 0)
		w.Write([]byte("a\uFFFDb"))
		s := w.readRange(2, 1, false, 0)
		if s.offset != 1 || string(s.data) != "\uFFFD" {
			t.Errorf("readRange(2, 1) = %d %q", s.offset, s.data)
		}
	})
}

// TestWindowMemoryGrowth: a window's storage follows what its stream wrote,
// up to the limit.
func TestWindowMemoryGrowth(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	idle := newWindow(limit, 0)
	if n := idle.allocated(); n != 0 {
		t.Errorf("a window nobody wrote to holds %d bytes", n)
	}
	small := newWindow(limit, 0)
	small.Write([]byte("0123456789"))
	if n := small.allocated(); n > 4096 {
		t.Errorf("a window that received 10 bytes holds %d bytes", n)
	}
	for _, chunk := range []int{1000, 4096, 65536, 3 * limit} {
		w := newWindow(limit, 0)
		p := bytes.Repeat([]byte("y"), chunk)
		for written := 0; written < 2*limit; written += chunk {
			w.Write(p)
		}
		if n := w.allocated(); n != limit {
			t.Errorf("a window of %d that received 2x that in %d-byte writes holds %d bytes", limit, chunk, n)
		}
	}
}

// windowLimitFor maps a test's size to a window limit: sizes below 0xF000
// are limits of one chunk or less (size+1); the 4096 sizes above step
// through limits of about one to four chunks, so chunk boundaries and a
// ring made of several chunks are reachable.
func windowLimitFor(size uint16) int {
	if size < 0xF000 {
		return 1 + int(size)
	}
	return windowChunkBytes - 2048 + int(size-0xF000)*48
}

// diffWindow is the differential check against refWindow, in the shape a fuzz
// target takes (FuzzWindow(f, data, cuts []byte, size uint16)): size picks
// the limit, cuts split data into writes, and after every write a set of
// reads derived from the inputs must agree with the reference.
func diffWindow(t *testing.T, data, cuts []byte, size uint16) {
	t.Helper()
	limit := windowLimitFor(size)
	w, ref := newWindow(limit, 0), &refWindow{limit: limit}
	check := func(what string, got, want slice) {
		t.Helper()
		if d := sameSlice(got, want); d != "" {
			t.Fatalf("limit %d, %d bytes written, %s: %s", limit, len(ref.all), what, d)
		}
	}
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		c := byte(0)
		if i < len(cuts) {
			c = cuts[i]
			if c < 250 {
				n = min(n, int(c)*(limit/64+1)/4)
			}
		}
		w.Write(data[:n])
		ref.write(data[:n])
		data = data[n:]

		start, total := ref.span()
		check("readAll", w.readAll(0), ref.readAll())
		for _, tail := range []int64{-1, 0, 1, 2, int64(c % 7), 1 << 40} {
			check(fmt.Sprintf("readTail(%d)", tail), w.readTail(tail, 0), ref.readTail(tail))
		}
		froms := []int64{-1, 0, start - 1, start, start + 1, total - 1, total, total + 1, int64(c) * total / 255}
		lengths := []int64{-1, 0, 1, 2, 3, int64(c % 5), int64(limit)}
		if total-start <= 48 { // small windows: every offset
			for p := start - 1; p <= total+1; p++ {
				froms = append(froms, p)
			}
		}
		for _, from := range froms {
			for _, length := range lengths {
				for _, unaligned := range []bool{false, true} {
					check(fmt.Sprintf("readRange(%d, %d, %v)", from, length, unaligned),
						w.readRange(from, length, unaligned, 0), ref.readRange(from, length, unaligned))
				}
			}
		}
		if a := w.allocated(); a > limit || int64(a) < min(total, int64(limit)) {
			t.Fatalf("limit %d, %d bytes written: %d bytes allocated", limit, total, a)
		}
	}
}

// windowPieces are the bytes random window inputs are made of: lines,
// multi-byte characters, invalid and truncated sequences.
var windowPieces = []string{"a", "bc", "\n", "\r\n", "é", "€", "😀", "\xff", "\x80", "\xe2\x82", "\xf0\x9f", "\x00", "\uFFFD"}

// TestWindowMatchesReference runs diffWindow on inputs from a fixed seed.
func TestWindowMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2, 53))
	sizes := []uint16{0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 63, 200}
	for round := 0; round < 300; round++ {
		size := sizes[rng.IntN(len(sizes))]
		if round%50 == 49 {
			// A ring of one to four chunks. (This once wrapped around
			// uint16 and only ever made small windows.)
			size = uint16(0xF000 + rng.IntN(0x1000))
		}
		limit := windowLimitFor(size)
		var data []byte
		for len(data) < 3*limit+rng.IntN(limit+8) {
			data = append(data, windowPieces[rng.IntN(len(windowPieces))]...)
		}
		cuts := make([]byte, rng.IntN(40))
		for i := range cuts {
			cuts[i] = byte(rng.IntN(256))
		}
		t.Run(fmt.Sprintf("round%d-limit%d", round, limit), func(t *testing.T) {
			diffWindow(t, data, cuts, size)
		})
	}
}

func TestWindowServe(t *testing.T) {
	t.Parallel()
	w := newWindow(64, 0)
	w.Write([]byte("one\ntwo\n"))
	cases := []struct {
		spec streamSpec
		data string
		off  int64
	}{
		{streamSpec{}, "", 8},
		{specAll, "one\ntwo\n", 0},
		{streamSpec{kind: streamTail, tail: 1}, "two\n", 4},
		{streamSpec{kind: streamRange, from: 4, length: -1}, "two\n", 4},
		{streamSpec{kind: streamRange, from: 4, length: 2}, "tw", 4},
	}
	for _, tc := range cases {
		s := w.serve(tc.spec)
		if string(s.data) != tc.data || s.offset != tc.off || s.total != 8 {
			t.Errorf("serve(%+v) = %q at %d (total %d); want %q at %d", tc.spec, s.data, s.offset, s.total, tc.data, tc.off)
		}
	}
	// Specs as a client writes them, through the parser (wire-1.0 "Capture
	// and stream specs").
	wire := []struct {
		spec, data string
		off        int64
	}{
		{`"none"`, "", 8},
		{`{"from": 2, "length": -1}`, "", 2}, // a negative length returns empty data
		{`{"from": -5, "length": 3}`, "one", 0},
		{`{"from": 100}`, "", 8}, // beyond total: empty at total_bytes
		{`{"tail": 0}`, "", 8},
		{`{"tail": 5}`, "one\ntwo\n", 0},
	}
	for _, tc := range wire {
		spec, err := parseStreamSpec(json.RawMessage(tc.spec))
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		s := w.serve(spec)
		if string(s.data) != tc.data || s.offset != tc.off || s.truncated {
			t.Errorf("%s: %q at %d (truncated %v); want %q at %d", tc.spec, s.data, s.offset, s.truncated, tc.data, tc.off)
		}
	}
}

func TestWindowConcurrentWritesAndReads(t *testing.T) {
	t.Parallel()
	w := newWindow(100, 0)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				w.Write([]byte("0123456789"))
				w.readTail(2, 0)
				w.readRange(int64(i), 7, false, 0)
			}
		}()
	}
	wg.Wait()
	s := w.readAll(0)
	if s.total != 4*500*10 || len(s.data) != 100 || string(s.data) != strings.Repeat("0123456789", 10) {
		t.Fatalf("after concurrent writes: total %d, %q", s.total, s.data)
	}
}

// TestWindowKeepsHead: with a head limit the window also keeps the stream's
// first bytes; "all" is then the head, a gap and the window, and ranges in
// the head are served from it.
func TestWindowKeepsHead(t *testing.T) {
	t.Parallel()
	stream := []byte("0123456789abcdefghij")
	for _, direct := range []bool{false, true} {
		w := newWindow(10, 4)
		for _, piece := range [][]byte{stream[:3], stream[3:12], stream[12:]} {
			if span := w.reserve(len(piece)); direct && span != nil && len(span) >= len(piece) {
				w.commit(copy(span, piece))
				continue
			} else if span != nil {
				w.commit(0)
			}
			_, _ = w.Write(piece)
		}
		all := w.readAll(0)
		if string(all.data) != "0123" || all.offset != 0 || all.omitted != 6 || string(all.tail) != "abcdefghij" ||
			all.tailOffset != 10 || !all.truncated || all.dropped != 6 || all.total != 20 {
			t.Errorf("direct %v: all = %+v", direct, all)
		}
		if r := w.readRange(2, 5, false, 0); string(r.data) != "23" || r.offset != 2 || !r.truncated || r.dropped != 3 {
			t.Errorf("direct %v: range from the head into the gap = %+v", direct, r)
		}
		if r := w.readRange(1, 2, false, 0); string(r.data) != "12" || r.truncated {
			t.Errorf("direct %v: range in the head = %+v", direct, r)
		}
		if r := w.readRange(5, 3, false, 0); string(r.data) != "abc" || r.offset != 10 || !r.truncated || r.dropped != 3 {
			t.Errorf("direct %v: range in the gap = %+v", direct, r)
		}
		if r := w.readTail(1, 0); string(r.data) != "abcdefghij" || r.offset != 10 || !r.truncated {
			t.Errorf("direct %v: tail = %+v", direct, r)
		}
	}
	// A full head never ends inside a character.
	h := newWindow(10, 4)
	_, _ = h.Write([]byte("aé€bcdefghijklmnop"))
	if all := h.readAll(0); string(all.data) != "aé" || all.offset+int64(len(all.data))+all.omitted != all.tailOffset || !utf8.Valid(all.tail) {
		t.Errorf("head cut inside a character: %+v", all)
	}
	// While the head still reaches the window, everything is one range.
	w := newWindow(10, 8)
	_, _ = w.Write(stream[:15])
	if all := w.readAll(0); string(all.data) != string(stream[:15]) || all.offset != 0 || all.truncated || all.tail != nil {
		t.Errorf("head meeting the window: all = %+v", all)
	}
}

// allocated is how many bytes of storage the window holds.
func (w *window) allocated() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.chunks {
		n += len(c)
	}
	return n
}

// serve reads what spec selects.
func (w *window) serve(spec streamSpec) slice { return w.serveWithin(spec, 0) }

// TestWindowAllCopiesAtMostLimitOfTheHead: "all" within a limit copies no
// more of a big kept head than the limit, and the head's rest joins the gap,
// counted as cut, not dropped.
func TestWindowAllCopiesAtMostLimitOfTheHead(t *testing.T) {
	t.Parallel()
	w := newWindow(100, 60)
	_, _ = w.Write([]byte(strings.Repeat("h", 59) + "é" + strings.Repeat("w", 400)))
	s := w.readAll(30)
	switch {
	case string(s.data) != strings.Repeat("h", 30) || s.offset != 0:
		t.Errorf("head %q at %d, want 30 bytes at 0", s.data, s.offset)
	case s.offset+int64(len(s.data))+s.omitted != s.tailOffset || s.tailOffset+int64(len(s.tail)) != s.total:
		t.Errorf("offsets do not chain: %+v", s)
	case len(s.tail) != 30 || s.dropped != 461-100-59 || s.cut != s.omitted-s.dropped:
		t.Errorf("tail %d bytes, dropped %d, cut %d of %d omitted", len(s.tail), s.dropped, s.cut, s.omitted)
	}
	if s := w.readAll(59); string(s.data) != strings.Repeat("h", 59) {
		t.Errorf("a head cut at 59 bytes ends inside a character: %q", s.data[50:])
	}
}
