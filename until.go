package main

import (
	"strconv"
	"strings"
	"time"
)

// A wait with until ends early for a running job: when it has written a
// complete line matching a pattern, or when it has been quiet for a while.
// A pattern looks at the lines the job's windows keep, from the oldest
// kept byte (the kept head included) or from the offset until.from, and
// then at each new line as it is written: a watch resumes its cursors
// where they stopped, so one look costs what was written since the last
// one, and a line split across pipe reads still matches once its newline
// arrives.

// untilLookInterval is how often a waiting until looks at its jobs' output:
// well inside the 100 ms in which a match should end the wait.
const untilLookInterval = 25 * time.Millisecond

// untilWatch watches the running jobs of one wait.
type untilWatch struct {
	spec    untilSpec
	streams []*lineScan          // pattern: one per watched stream of each job
	quiet   map[*job]*quietClock // idle: each job's output total and since when it stays
	hit     *untilHit            // what ended the wait, once a look found it
	jobs    []*job               // listening: the jobs whose trees are looked at
	portAt  time.Time            // listening: when the trees' sockets are read next
}

// untilPortLookInterval is how often a wait for a port reads its jobs'
// sockets: a look reads every descriptor of every process of the tree.
const untilPortLookInterval = 100 * time.Millisecond

// lineScan is how far one stream of one job has been matched.
type lineScan struct {
	job    *job
	name   string
	cursor *lineCursor
}

// quietClock says since when a job's output has not grown.
type quietClock struct {
	total int64
	since time.Time
}

// newUntilWatch starts watching jobs per spec: a pattern from spec.from,
// or from the first byte each stream still keeps.
func newUntilWatch(spec untilSpec, jobs []*job) *untilWatch {
	u := &untilWatch{spec: spec, quiet: map[*job]*quietClock{}}
	if spec.listen {
		u.jobs = jobs
	}
	now := time.Now()
	from := int64(0) // the cursor starts at the oldest byte kept
	if spec.from != nil {
		from = *spec.from
	}
	for _, j := range jobs {
		if spec.listen && spec.pattern == nil {
			continue
		}
		if spec.pattern == nil {
			u.quiet[j] = &quietClock{total: j.outputBytes(), since: now}
			continue
		}
		for _, s := range []struct {
			name string
			w    *window
		}{{"stdout", j.stdout}, {"stderr", j.stderr}} {
			if spec.stream == "any" || spec.stream == s.name {
				u.streams = append(u.streams, &lineScan{job: j, name: s.name, cursor: newLineCursor(s.w, from)})
			}
		}
	}
	return u
}

// stopOnUntil makes opts end a wait early once one of jobs meets spec,
// and returns what ended it, to read once the wait is over (nil: nothing).
func stopOnUntil(spec untilSpec, jobs []*job, opts *awaitOptions) func() *untilHit {
	watch := newUntilWatch(spec, jobs)
	opts.stopEarly, opts.stopEvery = watch, untilLookInterval
	if spec.listen {
		// It watches the tree, not the shell: a shell that started the
		// server in the background and exited leaves the wait on.
		opts.holdEnded = func(j *job) bool { return !j.treeGone() }
	}
	return func() *untilHit { return watch.hit }
}

// stopNow looks at the watched jobs and reports whether one meets the
// spec; what it found stays in hit.
func (u *untilWatch) stopNow() bool {
	u.hit = u.look()
	return u.hit != nil
}

// untilHit is what ended a wait early for one job.
type untilHit struct {
	job       *job
	matched   *lineMatch // the line that matched; nil for idle or a port
	listening string     // the address that opened, "ADDR:PORT"; "" for none
}

// lineMatch is a line that matched: its stream, offset and text, and the
// offset just past it.
type lineMatch struct {
	stream string
	offset int64
	line   string
	next   int64
}

// look reports the first running job that meets the spec now, if any.
func (u *untilWatch) look() *untilHit {
	if now := time.Now(); u.spec.listen && !now.Before(u.portAt) {
		u.portAt = now.Add(untilPortLookInterval)
		for _, j := range u.jobs {
			if addr := j.listeningOn(u.spec.port); addr != "" {
				return &untilHit{job: j, listening: addr}
			}
		}
	}
	if u.spec.listen && u.spec.pattern == nil {
		return nil
	}
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

// maxListening bounds the addresses an entry names.
const maxListening = 20

// listeningOn is the first address j's tree listens on at port (any port
// when 0), or "".
func (j *job) listeningOn(port int) string {
	addrs, _ := listeningOf(j.treePids(), maxListening)
	for _, a := range addrs {
		if port == 0 || strings.HasSuffix(a, ":"+strconv.Itoa(port)) {
			return a
		}
	}
	return ""
}

// scan matches the complete lines the cursor has not looked at yet.
func (s *lineScan) scan(spec untilSpec) *lineMatch {
	var m *lineMatch
	s.cursor.walk(false, func(at int64, text []byte, length int64) bool {
		if !spec.pattern.Match(text) {
			return !stopLines
		}
		m = &lineMatch{stream: s.name, offset: at, line: string(text), next: at + length + 1}
		return stopLines
	})
	return m
}

// An exchange: a call that writes to a job's input waits for the job's
// answer, not for its end. The job has answered when it reads its input
// again (a REPL back at its prompt), or when it printed something after the
// write and then went quiet for a while (it answered and works on, or
// sleeps); the call's own deadline and the job's end bound the wait as
// for any other.

// Answer timings. answerQuietDuration is how long a job that printed since
// the write must stay silent: longer than the pauses between the pieces of
// one answer, short against a model's turn. answerLookInterval is how
// often a watch looks in /proc for the job reading again; a look reads only
// the job's own processes.
const (
	answerQuietDuration = 300 * time.Millisecond
	answerLookInterval  = 50 * time.Millisecond
)

// answerWatch ends the wait that follows a write to a job's input once the
// job has answered. It is made before the write, so what it saw then is
// not taken for an answer.
type answerWatch struct {
	j       *job
	before  inputReadsMark // what the job's processes had read before the write
	written int64          // the job's output bytes before the write
	quiet   quietClock     // the job's output total and since when it stays
	looked  int64          // the output total at the last look in /proc
	next    time.Time      // when to look in /proc next
	reading bool           // the last look saw the job read its input again
	// settledLooks counts the looks in a row that found it reading, its
	// pipes empty and nothing new.
	settledLooks int
}

// newAnswerWatch starts watching j for an answer to a write of wrote
// bytes about to be made.
func newAnswerWatch(j *job, wrote int) *answerWatch {
	now, total := time.Now(), j.outputBytes()
	return &answerWatch{j: j, before: inputReadsMarkOf(j, wrote), written: total, looked: total,
		quiet: quietClock{total: total, since: now}}
}

// stopNow reports whether j has answered: quiet for answerQuietDuration
// after printing, or reading its input again with what it printed before
// that already read from its pipes.
func (a *answerWatch) stopNow() bool {
	if a.j.terminal() {
		return false // its end is delivered instead
	}
	now, total := time.Now(), a.j.outputBytes()
	if total != a.quiet.total {
		a.quiet = quietClock{total: total, since: now}
	} else if total > a.written && now.Sub(a.quiet.since) >= answerQuietDuration {
		return true
	}
	if now.Before(a.next) {
		return false
	}
	a.next = now.Add(answerLookInterval)
	steady := total == a.looked // nothing arrived since the last look
	a.looked = total
	a.reading = a.readsAgain()
	// A prompt printed just before the read may still be in the pipe, or
	// in a pump between its read and the window: wait until a look finds
	// the pipes empty and the total as the previous look left it.
	if !(a.reading && steady && a.pipesRead()) {
		a.settledLooks = 0
		return false
	}
	a.settledLooks++
	// On a terminal what the job wrote reaches the master through the
	// kernel's flip buffer, which a worker pushes later: on a loaded
	// machine a look can find the reader back, and the master empty,
	// before the answer's last bytes are readable. Two looks in a row.
	return a.j.onPipes || a.settledLooks >= 2
}

// readsAgain looks whether a process of the job is blocked reading its
// input in a wait begun after it took input since the write
// (readsAgainSince), not in the wait it was in when the write came.
func (a *answerWatch) readsAgain() bool {
	return a.j.readsAgainSince(a.before)
}

// pipesRead reports whether the job's output pipes hold no unread bytes.
func (a *answerWatch) pipesRead() bool {
	for _, p := range []*pump{a.j.stdoutPump, a.j.errPump} {
		if p != nil && p.unread() > 0 {
			return false
		}
	}
	return true
}

// readingAgain is what the watch knows at the end of the wait: whether the
// job reads its input again, looked at once more when the wait ended for
// another reason (quiet, the deadline) since the last look.
func (a *answerWatch) readingAgain() bool {
	if !a.reading && !a.j.terminal() {
		a.reading = a.readsAgain()
	}
	return a.reading
}
