package main

import (
	"bytes"
	"time"
)

// A wait with until ends early for a running job: when it writes a
// complete line matching a pattern, or when it has been quiet for a while.
// untilWatch looks at each job's new output only, so one look costs what
// was written since the last one, and a line split across pipe reads still
// matches once its newline arrives.

// untilLookInterval is how often a waiting until looks at its jobs' output:
// well inside the 100 ms in which a match should end the wait.
const untilLookInterval = 25 * time.Millisecond

// maxPartialLineBytes bounds the unterminated line kept between looks; a
// longer line is matched on its first bytes only.
const maxPartialLineBytes = 64 << 10

// untilWatch watches the running jobs of one wait.
type untilWatch struct {
	spec    untilSpec
	streams []*lineScan          // pattern: one per watched stream of each job
	quiet   map[*job]*quietClock // idle: each job's output total and since when it stays
}

// lineScan is how far one stream of one job has been matched.
type lineScan struct {
	job       *job
	name      string
	w         *window
	scanned   int64  // bytes before this offset were looked at
	partial   []byte // an unterminated line that began before scanned
	partialAt int64  // its offset
}

// quietClock says since when a job's output has not grown.
type quietClock struct {
	total int64
	since time.Time
}

// newUntilWatch starts watching jobs per spec, from now (or spec.from).
func newUntilWatch(spec untilSpec, jobs []*job) *untilWatch {
	u := &untilWatch{spec: spec, quiet: map[*job]*quietClock{}}
	now := time.Now()
	for _, j := range jobs {
		if spec.pattern == nil {
			u.quiet[j] = &quietClock{total: j.outputBytes(), since: now}
			continue
		}
		for _, s := range []struct {
			name string
			w    *window
		}{{"stdout", j.stdout}, {"stderr", j.stderr}} {
			if spec.stream != "any" && spec.stream != s.name {
				continue
			}
			_, total := s.w.stats()
			from := total
			if spec.from != nil {
				from = min(*spec.from, total)
			}
			u.streams = append(u.streams, &lineScan{job: j, name: s.name, w: s.w, scanned: from, partialAt: from})
		}
	}
	return u
}

// untilHit is what ended a wait early for one job.
type untilHit struct {
	job     *job
	matched *lineMatch // the line that matched; nil for idle
}

// lineMatch is a line that matched: its stream, offset and text.
type lineMatch struct {
	stream string
	offset int64
	line   string
}

// look reports the first running job that meets the spec now, if any.
func (u *untilWatch) look() *untilHit {
	if u.spec.pattern == nil {
		now := time.Now()
		for j, c := range u.quiet {
			if j.terminal() {
				continue
			}
			if total := j.outputBytes(); total != c.total {
				c.total, c.since = total, now
			} else if now.Sub(c.since) >= u.spec.idle {
				return &untilHit{job: j}
			}
		}
		return nil
	}
	for _, s := range u.streams {
		if s.job.terminal() {
			continue
		}
		if m := s.scan(u.spec); m != nil {
			return &untilHit{job: s.job, matched: m}
		}
	}
	return nil
}

// scan matches the complete lines written since the last scan.
func (s *lineScan) scan(spec untilSpec) *lineMatch {
	start, total := s.w.stats()
	if s.scanned < start { // the window dropped bytes nobody looked at
		s.scanned, s.partial, s.partialAt = start, nil, start
	}
	for s.scanned < total {
		sl := s.w.readRange(s.scanned, min(total-s.scanned, readBufferBytes), true, 0)
		if len(sl.data) == 0 {
			return nil
		}
		s.scanned = sl.offset + int64(len(sl.data))
		data := sl.data
		for {
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 {
				room := maxPartialLineBytes - len(s.partial)
				s.partial = append(s.partial, data[:min(len(data), max(room, 0))]...)
				break
			}
			line := append(s.partial, data[:nl]...)
			at := s.partialAt
			s.partial, s.partialAt = nil, s.scanned-int64(len(data))+int64(nl)+1
			data = data[nl+1:]
			if spec.pattern.Match(bytes.TrimSuffix(line, []byte("\r"))) {
				return &lineMatch{stream: s.name, offset: at, line: string(line)}
			}
		}
	}
	return nil
}
