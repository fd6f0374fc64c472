// A running job's newest output, as a model would want to read it: the
// prompt it waits at, or its latest progress.

package main

import (
	"bytes"
	"strings"
)

// A stream's recent output is at most this many of its newest lines and
// this many bytes of them.
const (
	recentLines = 3
	recentBytes = 400
)

// recentReadBytes is how much of a terminal's newest output is read to
// find recentBytes of text: escape sequences take room and are stripped.
const recentReadBytes = 4 * recentBytes

// recentJSON is a job's newest output per stream; a stream with none is
// left out.
type recentJSON struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
}

// plain is r with terminal escapes stripped from its text, or nil when
// r is nil or no text is left.
func (r *recentJSON) plain() *recentJSON {
	if r == nil {
		return nil
	}
	p := recentJSON{Stdout: string(plainText([]byte(r.Stdout))), Stderr: string(plainText([]byte(r.Stderr)))}
	if p == (recentJSON{}) {
		return nil
	}
	return &p
}

// recentOf is j's newest output, or nil when it wrote nothing. A line
// redrawn with carriage returns (a progress bar) shows as it was last
// drawn, and a terminal's escape sequences are stripped.
func recentOf(j *job) *recentJSON {
	r := recentJSON{Stdout: recentText(j.stdout, j.inputEnd.terminal), Stderr: recentText(j.stderr, j.inputEnd.terminal)}
	if r == (recentJSON{}) {
		return nil
	}
	return &r
}

// recentText is the newest lines of w, bounded, as valid UTF-8 text.
func recentText(w *window, onTerminal bool) string {
	return recentTextSince(w, 0, onTerminal)
}

// outputMark is where a job's streams stood at a moment: their totals.
type outputMark struct{ stdout, stderr int64 }

// outputMarkOf is where j's streams stand now.
func outputMarkOf(j *job) outputMark {
	_, out := j.stdout.stats()
	_, errb := j.stderr.stats()
	return outputMark{stdout: out, stderr: errb}
}

// recentSince is recentOf counted from mark: j's newest output among what
// it wrote after mark, or nil when it wrote nothing since.
func recentSince(j *job, mark outputMark) *recentJSON {
	onTerminal := j.inputEnd.terminal
	r := recentJSON{Stdout: recentTextSince(j.stdout, mark.stdout, onTerminal), Stderr: recentTextSince(j.stderr, mark.stderr, onTerminal)}
	if r == (recentJSON{}) {
		return nil
	}
	return &r
}

// recentTextSince is the newest lines of w at or after offset from,
// bounded, as valid UTF-8 text.
func recentTextSince(w *window, from int64, onTerminal bool) string {
	s := w.readTail(recentLines, recentReadBytes)
	raw, at := s.data, s.offset
	if s.tail != nil { // longer than the read: the newest bytes are after the gap
		raw, at = s.tail, s.tailOffset
	}
	if skip := from - at; skip > 0 {
		raw = raw[min(skip, int64(len(raw))):]
	}
	return string(newestText(raw, onTerminal))
}

// newestText is the last recentLines lines of raw, at most recentBytes of
// them, each line as a terminal would show it last: escape sequences
// stripped when raw is a terminal's, and of a line redrawn after carriage
// returns only its last drawing.
func newestText(raw []byte, onTerminal bool) []byte {
	if onTerminal {
		raw = plainText(raw) // which shows a redrawn line as last drawn too
	} else {
		raw = redrawn(raw)
	}
	keep := int64(recentLines) // newlines: an unterminated last line is one of the lines
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		keep--
	}
	raw, _ = lastLines(raw, 0, keep)
	if len(raw) > recentBytes {
		raw = skipContinuation(raw[len(raw)-recentBytes:])
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD"))
}

// redrawn keeps, of each line of b, what follows its last carriage return
// that has text after it: "50%\r100%\n" is "100%\n", and "\r\n" ends a line.
func redrawn(b []byte) []byte {
	if bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line, rest, found := bytes.Cut(b, []byte("\n"))
		text := bytes.TrimRight(line, "\r")
		if i := bytes.LastIndexByte(text, '\r'); i >= 0 {
			text = text[i+1:]
		}
		out = append(out, text...)
		if found {
			out = append(out, '\n')
		}
		b = rest
	}
	return out
}

// untilQuietNote is, for a running job whose wait for a line (spec) ended
// without one, the sentence on why when every stream it watched is still
// empty: a program on a pipe often holds its lines in a buffer until it
// exits, and the model would otherwise wait again for nothing. "" when
// spec watches no line or watches a port too, the job is on a terminal
// (nothing is held there), or a watched stream has bytes.
func untilQuietNote(spec *untilSpec, j *job) string {
	if spec == nil || spec.pattern == nil || spec.listen || j.inputEnd.terminal {
		return ""
	}
	var empty []string
	for _, s := range []struct {
		name string
		w    *window
	}{{"stdout", j.stdout}, {"stderr", j.stderr}} {
		if spec.stream != "any" && spec.stream != s.name {
			continue
		}
		if _, total := s.w.stats(); total > 0 {
			return ""
		}
		empty = append(empty, s.name)
	}
	verb := " is"
	if len(empty) > 1 {
		verb = " are"
	}
	return strings.Join(empty, " and ") + verb + " empty: a program writing to a pipe can hold its lines in a buffer until it exits; " +
		"tty:true, or its unbuffered mode (python -u), shows them as they are written."
}
