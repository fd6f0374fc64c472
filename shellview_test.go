package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// shellWindow is a window sized as the shell set sizes its jobs' windows.
func shellWindow(b shellBudget) *window {
	return newWindow(int(b.bytes-b.bytes/4), int(b.bytes/4))
}

// TestShellStreamWithinBudgetIsWhole: a stream within both budgets is shown
// as it is, from any position.
func TestShellStreamWithinBudgetIsWhole(t *testing.T) {
	b := shellBudget{1024, 24}
	w := shellWindow(b)
	text := strings.Repeat("line\n", 20)
	_, _ = w.Write([]byte(text))
	if p := readShellStream(w, shellPos{}, b, true); string(p.text) != text || p.dropBytes != 0 || p.end != (shellPos{100, 20}) {
		t.Errorf("whole read = %q, dropped %d, end %+v", p.text, p.dropBytes, p.end)
	}
	if p := readShellStream(w, shellPos{50, 10}, b, true); string(p.text) != text[50:] {
		t.Errorf("read from 50 = %q", p.text)
	}
}

// TestShellStreamKeepsHeadAndTail replays the toolkit's own example: 199
// lines past a 1 KiB budget keep a quarter at the head and three quarters
// at the tail, and the marker's numbers are the report's and add up.
func TestShellStreamKeepsHeadAndTail(t *testing.T) {
	b := shellBudget{1024, 24}
	w := shellWindow(b)
	var all strings.Builder
	for i := 1; i <= 199; i++ {
		fmt.Fprintf(&all, "%03d ...................................\n", i)
	}
	_, _ = w.Write([]byte(all.String()))
	p := readShellStream(w, shellPos{}, b, true)
	marker := shellMarker(p.dropBytes, p.dropLines)
	head, tail, ok := strings.Cut(string(p.text), marker)
	if !ok {
		t.Fatalf("no marker %q in %q", marker, p.text)
	}
	if p.dropBytes != 7000 || p.dropLines != 175 {
		t.Errorf("dropped %d bytes / %d lines, want 7000 / 175", p.dropBytes, p.dropLines)
	}
	if int64(len(head)) > b.bytes/4 || int64(len(tail)) > b.bytes-b.bytes/4 {
		t.Errorf("head %d and tail %d bytes exceed a quarter and three quarters of %d", len(head), len(tail), b.bytes)
	}
	if int64(len(head)+len(tail))+p.dropBytes != int64(all.Len()) ||
		int64(strings.Count(head, "\n")+strings.Count(tail, "\n"))+p.dropLines != 199 {
		t.Errorf("head, tail and dropped do not add up to the stream")
	}
	if !strings.HasPrefix(all.String(), head) || !strings.HasSuffix(all.String(), tail) {
		t.Errorf("head or tail is not the stream's own")
	}
}

// TestShellStreamLineBudget: many short lines within the byte budget are
// still cut by the line budget, a quarter and three quarters.
func TestShellStreamLineBudget(t *testing.T) {
	b := shellBudget{1 << 20, 40}
	w := shellWindow(b)
	_, _ = w.Write([]byte(strings.Repeat("x\n", 1000)))
	p := readShellStream(w, shellPos{}, b, true)
	head, tail, _ := strings.Cut(string(p.text), shellMarker(p.dropBytes, p.dropLines))
	if strings.Count(head, "\n") != 10 || strings.Count(tail, "\n") != 30 || p.dropLines != 960 || p.dropBytes != 1920 {
		t.Errorf("head %d lines, tail %d lines, dropped %d lines / %d bytes; want 10, 30, 960, 1920",
			strings.Count(head, "\n"), strings.Count(tail, "\n"), p.dropLines, p.dropBytes)
	}
}

// TestShellStreamNeverSplitsCharacters: whatever the budget, head and tail
// are valid UTF-8 cut from a stream of multi-byte characters.
func TestShellStreamNeverSplitsCharacters(t *testing.T) {
	for budget := int64(1024); budget < 1100; budget++ {
		b := shellBudget{budget, 1000}
		w := shellWindow(b)
		_, _ = w.Write([]byte("a" + strings.Repeat("é€😀", 200) + "b"))
		p := readShellStream(w, shellPos{}, b, true)
		if !utf8.Valid(p.text) || p.dropBytes == 0 {
			t.Fatalf("budget %d: %d bytes dropped, valid UTF-8 %v", budget, p.dropBytes, utf8.Valid(p.text))
		}
	}
}

// TestShellCursorReconstructsOutput: a reader that keeps up, following a
// job that writes in odd pieces (splitting characters), gets every byte
// exactly once, with no marker.
func TestShellCursorReconstructsOutput(t *testing.T) {
	b := shellBudget{1024, 1000}
	w := shellWindow(b)
	rng := rand.New(rand.NewPCG(1, 2))
	var want, got bytes.Buffer
	src := []byte(strings.Repeat("ligne é 😀\n", 2000))
	var at shellPos
	for len(src) > 0 {
		n := min(len(src), 1+rng.IntN(300))
		_, _ = w.Write(src[:n])
		want.Write(src[:n])
		src = src[n:]
		p := readShellStream(w, at, b, false)
		if p.dropBytes != 0 {
			t.Fatalf("a reader that kept up was told %d bytes were dropped", p.dropBytes)
		}
		got.Write(p.text)
		at = p.end
	}
	got.Write(readShellStream(w, at, b, true).text)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("instalments (%d bytes) differ from the output (%d bytes)", got.Len(), want.Len())
	}
}

// TestShellCursorFallingBehindGetsMarker: a reader that falls more than
// the tail behind gets the marker for exactly the bytes and lines it
// missed, then the tail.
func TestShellCursorFallingBehindGetsMarker(t *testing.T) {
	b := shellBudget{1024, 1000}
	w := shellWindow(b)
	first := strings.Repeat("0123456789\n", 40) // 440 bytes: past the head
	_, _ = w.Write([]byte(first))
	p := readShellStream(w, shellPos{}, b, false)
	if string(p.text) != first {
		t.Fatalf("first read %q", p.text)
	}
	more := strings.Repeat("abcdefghij\n", 200) // 2200 bytes: the tail rolls past the reader
	_, _ = w.Write([]byte(more))
	q := readShellStream(w, p.end, b, true)
	tail := string(q.text[strings.Index(string(q.text), "]\n")+2:])
	missed := int64(len(first)+len(more)) - int64(len(tail)) - p.end.bytes
	if q.dropBytes != missed || q.dropLines != int64(strings.Count(more[:missed], "\n")) {
		t.Errorf("marker says %d bytes / %d lines, the reader missed %d bytes / %d lines",
			q.dropBytes, q.dropLines, missed, strings.Count(more[:missed], "\n"))
	}
	if !strings.HasSuffix(more, tail) || int64(len(tail)) > b.bytes-b.bytes/4 {
		t.Errorf("tail after the marker (%d bytes) is not the stream's last three quarters", len(tail))
	}
}

// FuzzShellView writes data to a window in pieces, reading after each piece
// from the last cursor, and checks what the toolkit's contract promises:
// every byte is either shown once or counted as dropped (the marker's
// numbers), newlines likewise, and valid UTF-8 is never cut inside a
// character.
func FuzzShellView(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{1, 2, 3}, uint16(64))
	f.Add([]byte(strings.Repeat("é€😀\n", 200)), []byte{7, 250, 3, 90}, uint16(100))
	f.Add([]byte(strings.Repeat("x\n", 3000)), []byte{255, 255, 1}, uint16(1024))
	f.Fuzz(func(t *testing.T, data, cuts []byte, size uint16) {
		if len(data) > 1<<16 || len(cuts) > 256 {
			return // bounds the work per input
		}
		b := shellBudget{int64(max(size, 64)), int64(max(size/16, 10))}
		w := shellWindow(b)
		var at shellPos
		var shown, dropped, lines int64
		read := func(whole bool) {
			p := readShellStream(w, at, b, whole)
			text := p.text
			if p.dropBytes > 0 {
				marker := shellMarker(p.dropBytes, p.dropLines)
				if !bytes.Contains(text, []byte(marker)) {
					t.Fatalf("dropped %d bytes without the marker: %q", p.dropBytes, text)
				}
				text = bytes.Replace(text, []byte(marker), nil, 1)
			}
			if utf8.Valid(data) && !utf8.Valid(text) {
				t.Fatalf("a character was cut: %q", text)
			}
			shown += int64(len(text))
			dropped += p.dropBytes
			lines += int64(bytes.Count(text, newline)) + p.dropLines
			at = p.end
		}
		rest := data
		for _, c := range cuts {
			n := min(len(rest), int(c))
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
			read(false)
		}
		_, _ = w.Write(rest)
		read(true)
		if shown+dropped != int64(len(data)) || lines != int64(bytes.Count(data, newline)) || at.bytes != int64(len(data)) {
			t.Fatalf("shown %d + dropped %d bytes of %d; %d of %d lines; cursor at %d",
				shown, dropped, len(data), lines, bytes.Count(data, newline), at.bytes)
		}
	})
}
