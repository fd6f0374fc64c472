package main

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// A stream's complete lines are what both a wait's until.pattern and
// output's grep look at: the lines of what a window keeps (the kept head,
// then the ring), in order, from an offset on. lineCursor walks them a read
// at a time and can be resumed, so a wait that looks again reads only what
// was written since. A line is complete when its newline was written and
// its first byte is known to start it: the fragment after a gap (bytes the
// window no longer keeps) or after an offset inside a line is skipped.

// lineReadBytes is how much of a window one read of a cursor copies.
const lineReadBytes = 64 << 10

// maxHeldLineBytes bounds the bytes of one line a cursor holds; a longer line
// is matched on its first maxHeldLineBytes bytes.
const maxHeldLineBytes = 64 << 10

// lineCursor is how far the lines of one window have been walked.
type lineCursor struct {
	w         *window
	at        int64  // bytes before this offset were read
	line      []byte // the line begun before at: its first maxHeldLineBytes bytes
	lineAt    int64  // its offset
	lineBytes int64  // its length so far, which may pass len(line)
	whole     bool   // line starts a line (false: a fragment, skipped)
	started   bool   // whole was settled by the first read
	skipped   int64  // bytes passed over because the window no longer kept them
}

// newLineCursor is a cursor at the lines that begin at or after from.
func newLineCursor(w *window, from int64) *lineCursor {
	from = max(from, 0)
	return &lineCursor{w: w, at: from, lineAt: from}
}

// stopLines is what a cursor's visitor returns to end a walk after a line.
const stopLines = true

// walk calls visit with each complete line read from the window from the
// cursor on: its offset, its text (without the newline and a carriage
// return before it, at most maxHeldLineBytes) and its full length, until
// visit returns stopLines (the cursor then rests just past that line) or
// what the window held when the walk began is read. With ended, the stream
// is over: an unterminated last line is complete too. It reports whether
// visit stopped it. text is only valid during visit.
func (c *lineCursor) walk(ended bool, visit func(at int64, text []byte, length int64) bool) bool {
	_, total := c.w.stats() // what is written meanwhile waits for the next walk
	for c.at < total {
		if !c.started { // does the cursor start at a line's start?
			c.started, c.whole = true, c.at == 0
			if c.at > 0 {
				b := c.w.readRange(c.at-1, 1, true, 0)
				c.whole = b.offset == c.at-1 && len(b.data) == 1 && b.data[0] == '\n'
			}
		}
		sl := c.w.readRange(c.at, min(total-c.at, lineReadBytes), true, 0)
		if len(sl.data) == 0 {
			break
		}
		data := sl.data
		if sl.offset > c.at { // a gap: what was there is gone
			c.skipped += sl.offset - c.at
			c.line, c.lineAt, c.lineBytes, c.whole = c.line[:0], sl.offset, 0, false
		}
		c.at = sl.offset + int64(len(sl.data))
		for {
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 {
				c.grow(data)
				break
			}
			c.grow(data[:nl])
			end := c.at - int64(len(data)) + int64(nl) + 1
			at, text, length, whole := c.lineAt, c.line, c.lineBytes, c.whole
			c.line, c.lineAt, c.lineBytes, c.whole = c.line[:0], end, 0, true
			data = data[nl+1:]
			if whole && visit(at, bytes.TrimSuffix(text, []byte("\r")), length) {
				c.at = end
				return true
			}
		}
	}
	if ended && c.whole && c.lineBytes > 0 {
		at, text, length := c.lineAt, c.line, c.lineBytes
		c.line, c.lineAt, c.lineBytes = c.line[:0], c.at, 0
		return visit(at, bytes.TrimSuffix(text, []byte("\r")), length)
	}
	return false
}

// grow adds the next bytes of the current line, keeping its first
// maxHeldLineBytes.
func (c *lineCursor) grow(b []byte) {
	c.lineBytes += int64(len(b))
	c.line = append(c.line, b[:min(len(b), max(maxHeldLineBytes-len(c.line), 0))]...)
}

// searchedTo is where the complete lines walked so far end: the start of
// the line not yet complete.
func (c *lineCursor) searchedTo() int64 { return c.lineAt }

// shownLineBytes is the longest text of one line a grep shows; a longer
// line shows that much around its match.
const shownLineBytes = 2048

// grepJSON is output's answer for a stream given as {"grep": ...}.
type grepJSON struct {
	Matches    []grepMatchJSON `json:"matches"`
	MatchCount int             `json:"match_count"` // lines that match in the searched range, listed or not
	Searched   searchedJSON    `json:"searched"`
	// Dropped and Note say, for a model, how many bytes of the asked range
	// were not searched because they are gone, and from which offset on
	// matches can be seen (showDropped; nil and "": not said).
	Dropped *int64 `json:"dropped_bytes,omitempty"`
	Note    string `json:"note,omitempty"`
	lost    int64  // what Dropped says once shown
	// Next is the from that lists the matches after the listed ones, when
	// max or the reply budget left some out.
	Next *int64 `json:"next,omitempty"`
}

// searchedJSON is the range a grep searched: [from, to), less the bytes in
// it the stream no longer keeps. to ends the last complete line.
type searchedJSON struct {
	From         int64 `json:"from"`
	To           int64 `json:"to"`
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
}

// grepMatchJSON is one line that matched, with the context lines asked for
// (each clipped like the line). A clipped line also says which part of it
// Line shows.
type grepMatchJSON struct {
	Offset  int64        `json:"offset"`
	Line    string       `json:"line"`
	Clipped *clippedJSON `json:"clipped,omitempty"`
	Before  []string     `json:"before,omitempty"`
	After   []string     `json:"after,omitempty"`
	end     int64        // just past the line's newline
	cost    int          // bytes of text it shows, line and context
	pending int          // context lines after it still to come
}

// clippedJSON says what part of a long line a match shows.
type clippedJSON struct {
	Offset    int64 `json:"offset"`     // where the shown text starts in the stream
	LineBytes int64 `json:"line_bytes"` // the whole line's length
}

// grepEntryBytes is what a listed match costs besides its text: its keys,
// offset and quotes, and each context line's quotes and comma.
const grepEntryBytes, grepContextBytes = 48, 4

// grepWindow searches the complete lines w keeps from spec.from on (the
// unterminated last one too when ended) and lists up to spec.max matches,
// as many as show at most room bytes of text in all (at least one).
func grepWindow(w *window, spec *grepSpec, ended bool, room int) *grepJSON {
	start, total := w.stats()
	from := min(spec.from, total)
	var lost int64
	if kept := w.readRange(from, 0, true, 0); from < start && kept.offset > from {
		lost = kept.offset - from
		from = kept.offset // before the oldest byte kept: the search starts there
	}
	g := &grepJSON{Matches: []grepMatchJSON{}}
	c := newLineCursor(w, from)
	var before [][]byte // the last spec.context lines, clipped
	spent := 0
	c.walk(ended, func(at int64, text []byte, length int64) bool {
		for i := len(g.Matches) - 1; i >= 0 && g.Matches[i].pending > 0; i-- {
			m := &g.Matches[i]
			after := clipLine(text, 0)
			m.After = append(m.After, string(after))
			m.pending--
			m.cost += len(after) + grepContextBytes
			spent += len(after) + grepContextBytes
		}
		if loc := spec.re.FindIndex(text); loc != nil {
			g.MatchCount++
			if len(g.Matches) < spec.max && (spent <= room || len(g.Matches) == 0) {
				m := grepMatchJSON{Offset: at, end: at + length + 1, pending: spec.context}
				shown, cut := clipAround(text, loc[0], loc[1])
				m.Line, m.cost = string(shown), len(shown)+grepEntryBytes
				if cut >= 0 {
					m.Clipped = &clippedJSON{Offset: at + int64(cut), LineBytes: length}
				}
				for _, b := range before {
					m.Before = append(m.Before, string(b))
					m.cost += len(b) + grepContextBytes
				}
				spent += m.cost
				g.Matches = append(g.Matches, m)
			}
		}
		if spec.context > 0 {
			if len(before) == spec.context {
				before = before[1:]
			}
			before = append(before, clipLine(text, 0))
		}
		return !stopLines
	})
	for n := len(g.Matches); n > 1 && spent > room; n-- {
		spent -= g.Matches[n-1].cost
		g.Matches = g.Matches[:n-1]
	}
	g.Searched = searchedJSON{From: from, To: c.searchedTo(), DroppedBytes: c.skipped}
	g.lost = lost + c.skipped
	if n := len(g.Matches); g.MatchCount > n && n > 0 {
		next := min(g.Matches[n-1].end, c.at)
		g.Next = &next
	}
	return g
}

// grepBudgetShare is the part of the reply budget (1/grepBudgetShare) a
// grep's listed lines may take.
const grepBudgetShare = 4

// plainGrep strips terminal escapes from a search's lines (nil: nothing).
func plainGrep(g *grepJSON) {
	if g == nil {
		return
	}
	plain := func(lines []string) {
		for i, l := range lines {
			lines[i] = string(plainText([]byte(l)))
		}
	}
	for i := range g.Matches {
		m := &g.Matches[i]
		m.Line = string(plainText([]byte(m.Line)))
		plain(m.Before)
		plain(m.After)
	}
}

// showDropped has g say how many bytes of the range it was asked to search
// are gone, 0 included, and when some are, in one sentence, where matches
// become visible.
func (g *grepJSON) showDropped() {
	if g == nil {
		return
	}
	g.Dropped = &g.lost
	if g.lost > 0 {
		g.Note = fmt.Sprintf("%d bytes of the stream were gone before the search, so matches before offset %d cannot be seen.",
			g.lost, g.Searched.From)
	}
}

// clipLine is text cut to shownLineBytes from byte at on, on character
// boundaries.
func clipLine(text []byte, at int) []byte { return clipLineTo(text, at, shownLineBytes) }

// clipLineTo is text cut to size bytes from byte at on, on character
// boundaries.
func clipLineTo(text []byte, at, size int) []byte {
	text = text[at:]
	if len(text) <= size {
		return bytes.Clone(text)
	}
	return bytes.Clone(trimPartialRune(text[:size]))
}

// clipAround is text, or, when longer than shownLineBytes, the part of it
// around the match [lo, hi) that fits, on character boundaries; cut is
// where that part starts in text (-1: not clipped).
func clipAround(text []byte, lo, hi int) ([]byte, int) {
	return clipAroundTo(text, lo, hi, shownLineBytes)
}

// clipAroundTo is clipAround with size bytes in place of shownLineBytes.
func clipAroundTo(text []byte, lo, hi, size int) ([]byte, int) {
	if len(text) <= size {
		return bytes.Clone(text), -1
	}
	mid := lo + min(hi-lo, size)/2
	from := min(max(mid-size/2, 0), len(text)-size)
	// Forward to a character's start, not back: going back would end the
	// part before the match's (or the line's) last byte. from stays at
	// most lo, which starts a character.
	for from < len(text) && !utf8.RuneStart(text[from]) {
		from++
	}
	return clipLineTo(text, from, size), from
}
