package main

import (
	"bytes"
	"fmt"
)

// The Shell toolkit's view of a stream. Its contract keeps, per stream, a
// budget of bytes and lines: a stream within both is shown whole; past
// either, a reader sees the first quarter (the head, where a compiler puts
// the error that matters), a marker line saying how much was dropped, and
// the last three quarters (the tail, where a test runner puts its summary).
// The window retains at least that much, so this is a way of reading it,
// not a second buffer.

// shellBudget is the output budget of one stream.
type shellBudget struct {
	bytes, lines int64
}

// shellPos is a position in a stream: the bytes and newlines before it.
type shellPos struct {
	bytes, lines int64
}

// shellPiece is what a reader gets of a stream from a position: the text,
// with the dropped marker where the budget dropped bytes, how much that
// was, and the position the next read starts from.
type shellPiece struct {
	text                 []byte
	dropBytes, dropLines int64
	end                  shellPos
}

// shellMarker is the line that stands for dropped bytes.
func shellMarker(dropBytes, dropLines int64) string {
	return fmt.Sprintf("[... %d bytes / %d lines dropped ...]\n", dropBytes, dropLines)
}

// readShellStream reads w from position from as the toolkit's budget shows
// it. Counts and text come from one look at the window, so the marker and
// the numbers always agree. Unless whole (the job has finished), the piece
// ends before a character the stream has only begun, which the next read
// returns whole.
func readShellStream(w *window, from shellPos, b shellBudget, whole bool) shellPiece {
	headMax := b.bytes / 4
	e := w.ends(headMax, b.bytes-headMax)
	end := e.total
	if !whole {
		end -= int64(len(e.last) - len(trimPartialRune(e.last)))
	}
	piece := shellPiece{end: shellPos{end, e.lines}}
	if e.total <= b.bytes && e.lines <= b.lines && e.lastFrom <= int64(len(e.first)) {
		// All of it is retained in the two copies, which meet or overlap.
		all := append(e.first[:e.lastFrom:e.lastFrom], e.last...)
		piece.text = all[min(from.bytes, end):end]
		return piece
	}
	head, tail, tailFrom := shellEnds(e, b)
	headLines, tailLines := int64(bytes.Count(head, newline)), int64(bytes.Count(tail, newline))
	var text []byte
	if from.bytes < int64(len(head)) {
		text = append(text, head[from.bytes:]...)
	}
	gapFrom, gapLines := int64(len(head)), headLines
	if from.bytes > gapFrom {
		gapFrom, gapLines = from.bytes, from.lines
	}
	if gapFrom < tailFrom {
		piece.dropBytes, piece.dropLines = tailFrom-gapFrom, e.lines-tailLines-gapLines
		text = append(text, shellMarker(piece.dropBytes, piece.dropLines)...)
	}
	tailEnd := int64(len(tail)) - (e.total - end)
	if start := max(from.bytes, tailFrom) - tailFrom; start < tailEnd {
		text = append(text, tail[start:tailEnd]...)
	}
	piece.text = text
	return piece
}

// shellEnds cuts the head and the tail out of a stream over its budget:
// the head is at most a quarter of the bytes and of the lines, the tail at
// most the other three quarters of each, both cut on character boundaries;
// the tail never reaches back into the head.
func shellEnds(e streamEnds, b shellBudget) (head, tail []byte, tailFrom int64) {
	head = e.first
	if int64(len(head)) < e.total {
		head = trimPartialRune(head)
	}
	head = firstLines(head, b.lines/4)
	tail = skipContinuation(e.last)
	tailFrom = e.lastFrom + int64(len(e.last)-len(tail))
	tail, tailFrom = lastLines(tail, tailFrom, b.lines-b.lines/4)
	if over := int64(len(head)) - tailFrom; over > 0 {
		tail, tailFrom = tail[min(over, int64(len(tail))):], tailFrom+over
	}
	return head, tail, tailFrom
}

// firstLines is b up to and with its n-th newline, or all of b if it has
// fewer.
func firstLines(b []byte, n int64) []byte {
	at := 0
	for i := int64(0); i < n; i++ {
		k := bytes.IndexByte(b[at:], '\n')
		if k < 0 {
			return b
		}
		at += k + 1
	}
	return b[:at]
}

// lastLines is b (which starts at offset from) without its first lines, so
// that at most n newlines remain, and where it then starts.
func lastLines(b []byte, from, n int64) ([]byte, int64) {
	extra := int64(bytes.Count(b, newline)) - n
	if extra <= 0 {
		return b, from
	}
	cut := len(firstLines(b, extra))
	return b[cut:], from + int64(cut)
}
