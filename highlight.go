// Highlights: the lines of the part of a stream a cut result did not show
// that look like a failure, so the first reply already carries a build's
// one error line from the middle of its output.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
)

// MCP_EXEC_HIGHLIGHT's words besides an RE2 pattern.
const (
	highlightOff      = "off"
	highlightFailures = "failures"
)

// highlighter says which lines are highlights: those re matches, or, with
// no re, those holding a failure form.
type highlighter struct {
	re *regexp.Regexp // MCP_EXEC_HIGHLIGHT's own pattern; nil: failureForms
}

// failureForms are what a failure prints, not bare words: "error:" but not
// "-Werror" or "0 errors". The default highlights are the lines that hold
// one; an atStart form counts only at the start of a line. Each is looked
// for as a literal, which is many times faster than an RE2 alternation of
// them on every line of a large gap.
var failureForms = []struct {
	text    []byte
	atStart bool
}{
	{[]byte("error:"), false}, {[]byte("error["), false}, {[]byte("Error:"), false}, {[]byte("ERROR"), false},
	{[]byte("FAILED"), false}, {[]byte("FAIL:"), true}, {[]byte("FAIL "), true}, {[]byte("fatal:"), false},
	{[]byte("panic:"), false}, {[]byte("Traceback (most"), false}, {[]byte("Exception"), false},
	{[]byte("npm ERR!"), false}, {[]byte("Segmentation fault"), false}, {[]byte("No such file or directory"), false},
	{[]byte("command not found"), false}, {[]byte("undefined reference"), false},
}

// parseHighlight reads MCP_EXEC_HIGHLIGHT: off (nil), failures (the
// failure forms) or an RE2 pattern.
func parseHighlight(v string) (*highlighter, error) {
	switch v {
	case highlightOff:
		return nil, nil
	case highlightFailures:
		return &highlighter{}, nil
	}
	re, err := regexp.Compile(v)
	if err != nil {
		return nil, fmt.Errorf("must be off, failures or an RE2 regular expression: %v", err)
	}
	if re.MatchString("") {
		return nil, errors.New("the pattern matches an empty line, so every line would be a highlight")
	}
	return &highlighter{re: re}, nil
}

// match reports where the first highlight form in line is.
func (h *highlighter) match(line []byte) (lo, hi int, ok bool) {
	if h.re != nil {
		loc := h.re.FindIndex(line)
		if loc == nil {
			return 0, 0, false
		}
		return loc[0], loc[1], true
	}
	lo = -1
	for _, f := range failureForms {
		i := bytes.Index(line, f.text)
		if f.atStart && i != 0 || i < 0 || lo >= 0 && i >= lo {
			continue
		}
		lo, hi = i, i+len(f.text)
	}
	return lo, hi, lo >= 0
}

// Bounds of a result's highlights: listed at most, and of them the last
// ones when more were found; the longest text one shows.
const (
	highlightsAtMost   = 20
	highlightsAtEnd    = 10
	highlightLineBytes = 300
)

// highlightScanBytes bounds the bytes of one gap looked at: a larger gap
// (spill keeps up to a gigabyte) is looked at in its first and last halves
// of this, so a reply is not held up by a search no model asked for.
const highlightScanBytes = 8 << 20

// highlight is one line found: its stream, the offset of its shown text
// (the line's start, or where its clipped part starts) and that text.
type highlight struct {
	stream string
	offset int64
	line   []byte
}

// highlightPicker keeps, of the highlights found in order, the first
// highlightsAtMost distinct ones and, once more are found, the last
// highlightsAtEnd distinct ones, and counts every matching line.
type highlightPicker struct {
	first, last []highlight
	total       int
}

// add counts h and keeps it unless a kept one shows the same text.
func (p *highlightPicker) add(h highlight) {
	p.total++
	for _, kept := range [][]highlight{p.first, p.last} {
		for _, k := range kept {
			if bytes.Equal(k.line, h.line) {
				return
			}
		}
	}
	if len(p.first) < highlightsAtMost {
		p.first = append(p.first, h)
		return
	}
	if len(p.last) == highlightsAtEnd {
		p.last = append(p.last[:0], p.last[1:]...)
	}
	p.last = append(p.last, h)
}

// picked is the highlights to show, in stream order: all that were kept,
// or, when more were found than highlightsAtMost, the first
// highlightsAtMost-highlightsAtEnd and the last highlightsAtEnd.
func (p *highlightPicker) picked() []highlight {
	if len(p.last) == 0 {
		return p.first
	}
	head := highlightsAtMost - highlightsAtEnd
	later := append(p.first[head:len(p.first):len(p.first)], p.last...)
	return append(p.first[:head:head], later[len(later)-highlightsAtEnd:]...)
}

// scan adds to p the highlights of the complete lines of w, a stream
// named stream, that start in [from, to); ended says the stream is over,
// so an unterminated last line counts. A gap longer than
// highlightScanBytes is looked at in its two ends.
func (h *highlighter) scan(p *highlightPicker, stream string, w *window, from, to int64, ended bool) {
	ranges := [][2]int64{{from, to}}
	if to-from > highlightScanBytes {
		half := int64(highlightScanBytes / 2)
		ranges = [][2]int64{{from, from + half}, {to - half, to}}
	}
	for _, r := range ranges {
		end := r[1]
		newLineCursor(w, r[0]).walk(ended, func(at int64, text []byte, _ int64) bool {
			if at >= end {
				return stopLines
			}
			if lo, hi, ok := h.match(text); ok {
				shown, cut := clipAroundTo(text, lo, hi, highlightLineBytes)
				p.add(highlight{stream: stream, offset: at + int64(max(cut, 0)), line: shown})
			}
			return !stopLines
		})
	}
}
