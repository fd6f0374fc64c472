package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// A tools/call reply line may be at most its budget long. A result is JSON
// text inside a JSON string inside the line, so each byte of a stream costs
// what two rounds of escaping make of it: one for an ordinary character, up
// to seven for a NUL (`\u0000`, whose backslash is escaped again). A
// structured reply carries the result a second time as structuredContent,
// where each byte costs one round of escaping more. fitText measures that
// cost exactly and cuts the largest slices to head + tail.

// lineCost measures what a result costs in its reply line.
type lineCost struct {
	structured bool // the result also goes out as structuredContent
}

// of is what the encoded result text costs.
func (lc lineCost) of(text []byte) int {
	n := quotedLen(text)
	if lc.structured {
		n += len(text)
	}
	return n
}

// data is what a stream's raw bytes cost. It adds the two encodings up
// rather than summing escape over b: escapedCost counts a run of plain
// ASCII a byte a character, and a structured reply carries each twice.
func (lc lineCost) data(b []byte) int {
	n := escapedCost(b, twiceEscapedSize)
	if lc.structured {
		n += quotedLen(b)
	}
	return n
}

// char is the cost and size of the character that starts b.
func (lc lineCost) char(b []byte) (cost, size int) {
	esc, size := jsonEscape(b)
	return lc.escape(esc, size), size
}

// escape is what one character costs, given its JSON escape ("" for none)
// and its size.
func (lc lineCost) escape(esc string, size int) int {
	cost := twiceEscapedSize(esc, size)
	if lc.structured {
		cost += onceEscapedSize(esc, size)
	}
	return cost
}

// sliceView is how a reply shows the stream slices of its results. The
// tool layer decides it per call (the profile, an output's plain); fitText
// applies it, after any cut, so the offsets and byte counts of a slice stay
// those of the raw bytes whatever its text shows.
type sliceView struct {
	lineCuts bool     // a cut's head ends and its tail starts at a line boundary within lineCutReachBytes
	plain    bool     // text without terminal escapes, redrawn lines as last drawn (plainText)
	notes    cutNotes // told of each cut, to say what it left out (highlights); nil: nothing is said
}

// cutNotes is told, once a cut is made, which slices of r it cut (none:
// r is whole again); it may add to r what a model should know of the
// bytes it does not see, and the fitting then makes room for that too.
type cutNotes func(r *resultJSON, cut []*sliceJSON)

// note tells v's notes, for each result with a slice in slots, which of
// them are cut (cut[i]: slots[i] is; nil: none).
func (v sliceView) note(slots []slot, cut []bool) {
	if v.notes == nil {
		return
	}
	for i := 0; i < len(slots); {
		r, its := slots[i].result, []*sliceJSON(nil)
		for ; i < len(slots) && slots[i].result == r; i++ { // a result's slots are side by side
			if cut != nil && cut[i] {
				its = append(its, slots[i].slice)
			}
		}
		v.notes(r, its)
	}
}

// highlightBudgetShare is the part of the reply budget (1/this) the
// highlights of a reply's results may take together, their text counted
// raw with highlightEntryBytes for each one's keys.
const highlightBudgetShare, highlightEntryBytes = 8, 48

// cutNotesOf is what a cut result says, with highlights on (h), of what
// it does not show: the lines of its gaps h finds (their text plain when
// plain), at most room bytes of them, and in its note how many bytes were
// not shown and how to reach them. Only a delivered result has the job
// whose windows are read.
func cutNotesOf(h *highlighter, plain bool, room int) cutNotes {
	return func(r *resultJSON, cut []*sliceJSON) {
		r.Highlights, r.HighlightsTotal = nil, 0
		r.sayCut("")
		j := r.delivered
		if j == nil || len(cut) == 0 {
			return
		}
		var p highlightPicker
		var parts []string
		var gone int64
		for _, s := range cut {
			name, w := "stdout", j.stdout
			if s == r.Stderr {
				name, w = "stderr", j.stderr
			}
			from, to := s.Omitted.Offset, s.Omitted.Offset+s.Omitted.Bytes
			h.scan(&p, name, w, from, to, j.terminal())
			gone += s.Omitted.Bytes - w.heldIn(from, to)
			if len(parts) == 0 {
				parts = append(parts, fmt.Sprintf("%d bytes of %s", s.Omitted.Bytes, name))
			} else {
				parts = append(parts, fmt.Sprintf("%d of %s", s.Omitted.Bytes, name))
			}
		}
		spent := 0
		for _, hl := range p.picked() {
			line := hl.line
			if plain {
				line = plainText(line)
			}
			if spent += len(line) + highlightEntryBytes; spent > room {
				break
			}
			r.Highlights = append(r.Highlights, highlightJSON{Stream: hl.stream, Offset: hl.offset, Line: string(line)})
		}
		if len(r.Highlights) > 0 {
			r.HighlightsTotal = p.total
		}
		said := strings.Join(parts, " and ") + " were not shown"
		if gone > 0 {
			said += fmt.Sprintf(" (%d of them are gone); output with grep reaches the rest.", gone)
		} else {
			said += "; output with grep reaches them."
		}
		r.sayCut(said)
	}
}

// lineCutReachBytes is how far a cut end moves, at most, to reach a line
// boundary: far enough for most lines, short enough that the ends keep
// about the size the budget gave them.
const lineCutReachBytes = 1024

// show gives every slot's slice the view v, in place.
func (v sliceView) show(slots []slot) {
	if !v.plain {
		return
	}
	for _, s := range slots {
		s.slice.showPlain()
	}
}

// cutReserveBytes is what a cut adds to a slice's text besides its data
// (the omitted and tail members, escaped), with room to spare.
const cutReserveBytes = 160

// fitText encodes body, its results' slices shown in view, and, while its
// text would escape to more than budget bytes, cuts the stream slices of
// the results in it: the budget left after everything else is shared
// fairly, largest slices cut first, each keeping its first and last bytes
// and naming the gap. A result with a cut slice
// gets kept; the caller keeps its job readable. If even empty slices would
// not fit, the text is returned as small as cuts can make it.
func fitText(body any, results []*resultJSON, budget int, lc lineCost, view sliceView) ([]byte, error) {
	slots := slotsIn(results)
	whole := make([]sliceJSON, len(slots)) // each slice as it was, to cut afresh each round
	for i, s := range slots {
		whole[i] = *s.slice
	}
	view.note(slots, nil) // whole: nothing to say of a cut made for an earlier fit
	view.show(slots)
	text, err := marshal(body)
	if err != nil || lc.of(text) <= budget || len(slots) == 0 {
		return text, err
	}
	if view.plain { // the cut is measured and made on the raw bytes
		for i, s := range slots {
			*s.slice = whole[i]
		}
		if text, err = marshal(body); err != nil {
			return text, err
		}
	}
	over := lc.of(text) - budget
	spent := 0
	for i := range whole {
		spent += lc.data([]byte(whole[i].Data)) + tailCost(&whole[i], lc)
	}
	reserve := cutReserveBytes
	if lc.structured {
		reserve *= 2
	}
	room := max(spent-over-reserve*len(slots), 0)
	rounds := 0
	render := func(room int) ([]byte, int) {
		allowances := shareFairly(whole, room, lc)
		cut := make([]bool, len(slots))
		for i, s := range slots {
			*s.slice = whole[i]
			if cut[i] = allowances[i] >= 0; cut[i] {
				cutSlice(s.slice, allowances[i], lc, view.lineCuts)
				s.result.Kept = s.result.delivered != nil
			}
		}
		view.note(slots, cut)
		view.show(slots)
		if text, err = marshal(body); err != nil {
			return text, 0 // nothing smaller would marshal either
		}
		return text, lc.of(text)
	}
	smaller := func(room, over int) int {
		if rounds++; rounds == 8 { // estimates keep missing: the last try cuts everything
			return 0
		}
		return room - over - reserve
	}
	text = shrinkToFit(room, 0, budget, render, smaller)
	return text, err
}

// shrinkToFit renders at size and then at ever smaller sizes until a
// rendering costs no more than budget or size is down to least, and
// returns the last rendering. render gives a rendering and its cost;
// smaller gives the next size after one whose rendering cost over more
// than budget (it must be below size; least or below makes the last try).
// It is the one way a result is made to fit its reply.
func shrinkToFit[T any](size, least, budget int, render func(size int) (T, int), smaller func(size, over int) int) T {
	for {
		r, cost := render(size)
		if cost <= budget || size <= least {
			return r
		}
		size = max(smaller(size, cost-budget), least)
	}
}

// slicesAsTheyAre saves the stream slices of results and
// returns what puts them back as they were: fitText cuts them in place, and
// a caller that fits them again must start from the whole slices.
func slicesAsTheyAre(results []*resultJSON) (putBack func()) {
	slots := slotsIn(results)
	saved := make([]sliceJSON, len(slots))
	for i, s := range slots {
		saved[i] = *s.slice
	}
	return func() {
		for i, s := range slots {
			*s.slice = saved[i]
		}
	}
}

// slot is one stream slice of a result in a reply.
type slot struct {
	result *resultJSON
	slice  *sliceJSON
}

// slotsIn finds the stream slices of results.
func slotsIn(results []*resultJSON) []slot {
	var slots []slot
	for _, r := range results {
		for _, s := range []*sliceJSON{r.Stdout, r.Stderr} {
			if s != nil {
				slots = append(slots, slot{r, s})
			}
		}
	}
	return slots
}

// shareFairly splits room between the slices: one that costs no more than
// an equal share of what is left keeps all of it (allowance -1: not cut);
// the rest, the largest, split what remains equally.
func shareFairly(slices_ []sliceJSON, room int, lc lineCost) []int {
	order := make([]int, len(slices_))
	costs := make([]int, len(slices_))
	for i := range slices_ {
		order[i] = i
		costs[i] = lc.data([]byte(slices_[i].Data)) + tailCost(&slices_[i], lc)
	}
	slices.SortFunc(order, func(a, b int) int { return costs[a] - costs[b] })
	allowances := make([]int, len(slices_))
	for k, i := range order {
		share := room / (len(order) - k)
		if costs[i] <= share {
			allowances[i] = -1
			room -= costs[i]
			continue
		}
		allowances[i] = share
		room -= share
	}
	return allowances
}

// tailCost is what a slice's existing tail costs.
func tailCost(s *sliceJSON, lc lineCost) int {
	if s.Tail == nil {
		return 0
	}
	return lc.data([]byte(s.Tail.Data))
}

// cutSlice cuts s to at most allowance bytes of escaped data: a head from
// the start of its data and a tail from the end of its last part, each of
// about half, on character boundaries, with the gap between them named.
// With atLines, the head ends and the tail starts at a line boundary when
// one is within lineCutReachBytes of where the budget put them.
func cutSlice(s *sliceJSON, allowance int, lc lineCost, atLines bool) {
	first := []byte(s.Data)
	last, lastOffset := first, s.Offset
	if s.Tail != nil {
		last, lastOffset = []byte(s.Tail.Data), s.Tail.Offset
	}
	headBytes := prefixWithin(first, allowance/2, lc)
	if atLines && (headBytes < len(first) || s.Tail != nil) { // the head is followed by a gap
		headBytes = lineEndBefore(first, headBytes)
	}
	if from, _, in := markerAround(s.Data, headBytes); s.counts && in {
		headBytes = from // a marker is shown whole or not at all
	}
	tailStart := suffixWithin(last, allowance-lc.data(first[:headBytes]), lc)
	if atLines {
		tailStart = lineStartAfter(last, tailStart)
	}
	if _, to, in := markerAround(string(last), tailStart); s.counts && in {
		tailStart = to
	}
	if s.Tail == nil && tailStart < headBytes {
		tailStart = headBytes
	}
	tail := last[tailStart:]
	s.Data, s.Bytes = string(first[:headBytes]), headBytes
	gapFrom := s.Offset + int64(headBytes)
	s.Omitted = &gapJSON{Offset: gapFrom, Bytes: lastOffset + int64(tailStart) - gapFrom}
	s.Tail = &tailJSON{Data: string(tail), Offset: lastOffset + int64(tailStart), Bytes: len(tail)}
	s.countMasked()
}

// lineEndBefore is where a head of b cut at n ends: just past the last
// newline within lineCutReachBytes before n, or n when there is none. A
// head that already ends a line stays as it is.
func lineEndBefore(b []byte, n int) int {
	if n == 0 || b[n-1] == '\n' {
		return n
	}
	from := max(n-lineCutReachBytes, 0)
	if i := bytes.LastIndexByte(b[from:n], '\n'); i >= 0 {
		return from + i + 1
	}
	return n
}

// lineStartAfter is where a tail of b cut at n starts: just past the first
// newline within lineCutReachBytes from n, or n when there is none. At 0
// what precedes b is not known, so the start stays.
func lineStartAfter(b []byte, n int) int {
	if n == 0 || n >= len(b) || b[n-1] == '\n' {
		return n
	}
	// The newline must leave a byte after it: a tail moved past the end
	// would show nothing of the stream's last line.
	to := min(n+lineCutReachBytes, len(b)-1)
	if i := bytes.IndexByte(b[n:to], '\n'); i >= 0 {
		return n + i + 1
	}
	return n
}

// prefixWithin is how many bytes from the start of b, ending on a character
// boundary, cost at most budget.
func prefixWithin(b []byte, budget int, lc lineCost) int {
	n, spent := 0, 0
	for n < len(b) {
		cost, size := lc.char(b[n:])
		if spent+cost > budget {
			break
		}
		spent += cost
		n += size
	}
	return n
}

// suffixWithin is where the longest tail of b that starts on a character
// boundary and costs at most budget begins.
func suffixWithin(b []byte, budget int, lc lineCost) int {
	total := lc.data(b)
	n, spent := 0, 0
	for n < len(b) && total-spent > budget {
		cost, size := lc.char(b[n:])
		spent += cost
		n += size
	}
	return n
}

// twiceEscapedSize is what a character costs once its escape is escaped
// again: each backslash and quote of the escape doubles.
func twiceEscapedSize(esc string, size int) int {
	if esc == "" {
		return size
	}
	cost := len(esc)
	for i := 0; i < len(esc); i++ {
		if esc[i] == '\\' || esc[i] == '"' {
			cost++
		}
	}
	return cost
}

// onceEscapedSize is what a character costs escaped once.
func onceEscapedSize(esc string, size int) int {
	if esc == "" {
		return size
	}
	return len(esc)
}
