package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// resultJSON is the wire form of a job result or status. The fields after
// StartError are 1.1's; each is left out unless it says something, so a 1.0
// client sees 1.0's objects.
type resultJSON struct {
	JobID           string             `json:"job_id"`
	State           string             `json:"state"`
	ExitCode        *int               `json:"exit_code,omitempty"`
	Signal          string             `json:"signal,omitempty"`
	StartError      string             `json:"start_error,omitempty"`
	TimedOut        bool               `json:"timed_out,omitempty"`         // its time limit ended it
	Yielded         bool               `json:"yielded,omitempty"`           // an execute returned before the end
	WaitingForInput bool               `json:"waiting_for_input,omitempty"` // a process is blocked reading stdin
	Procs           *int               `json:"procs,omitempty"`             // a running job's processes now (its cgroup's, or its group's)
	OOMKilled       bool               `json:"oom_killed,omitempty"`        // the kernel killed a process of its cgroup for memory
	Recent          *recentJSON        `json:"recent,omitempty"`            // the newest output of a job that yielded or waits for input
	Stdout          *sliceJSON         `json:"stdout,omitempty"`
	Stderr          *sliceJSON         `json:"stderr,omitempty"`
	Highlights      []highlightJSON    `json:"highlights,omitempty"`       // lines of what a cut left out that look like failures
	HighlightsTotal int                `json:"highlights_total,omitempty"` // every such line found, listed or not
	Uncaptured      map[string]int64   `json:"uncaptured,omitempty"`       // bytes per stream the capture left out unsaid
	Usage           *usageJSON         `json:"usage,omitempty"`
	Matched         *matchJSON         `json:"matched,omitempty"`         // the line that ended a wait early
	Idle            bool               `json:"idle,omitempty"`            // a wait ended early on quiet
	Survivors       []survivorJSON     `json:"survivors,omitempty"`       // processes its shell left alive
	SurvivorsCount  int                `json:"survivors_count,omitempty"` // all of them, named or not
	Lingering       bool               `json:"lingering,omitempty"`       // delivered, and its tree still runs: kill by its id ends it
	Listening       json.RawMessage    `json:"listening,omitempty"`       // TCP addresses its processes listen on; null: unreadable
	Note            string             `json:"note,omitempty"`            // one sentence on what a lingering tree means
	Kept            bool               `json:"kept,omitempty"`            // cut to fit (or, agent profile, uncaptured bytes): still readable a while
	Deferred        bool               `json:"deferred,omitempty"`        // finished, but left for the next wait
	ElapsedS        *float64           `json:"elapsed_s,omitempty"`       // seconds since a running job started (a timed-out wait, agent profile)
	Clamped         map[string]float64 `json:"clamped,omitempty"`         // a call's wait arguments lowered to MCP_EXEC_MAX_YIELD, in seconds

	delivered *job         // the job whose result this is, when the call delivered it
	searched  [2]*grepJSON // stdout's and stderr's search, when its capture was a grep: shown in its slice's place (onWire)
	cutSaid   string       // the sentence on what a cut left out that ends Note, to take back when the cut changes
}

// highlightJSON is one line of what a cut left out that looks like a
// failure: its stream, the offset its text starts at, and the text.
type highlightJSON struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Line   string `json:"line"`
}

// sayCut ends r's note with sentence, the one on what its cut left out,
// in place of the one said before ("": none).
func (r *resultJSON) sayCut(sentence string) {
	if r.cutSaid != "" {
		r.Note = strings.TrimSuffix(strings.TrimSuffix(r.Note, r.cutSaid), " ")
	}
	r.cutSaid = sentence
	if sentence != "" {
		r.Note = strings.TrimPrefix(r.Note+" "+sentence, " ")
	}
}

// onWire is r as a reply carries it: r itself, or, when its capture
// searched a stream, r with each search where that stream's slice goes.
// Only such a result pays for a marshaller of its own.
func (r *resultJSON) onWire() any {
	if r.searched == [2]*grepJSON{} {
		return r
	}
	return searchedResultJSON{r}
}

// onWireAll is onWire of each of rs.
func onWireAll(rs []*resultJSON) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r.onWire()
	}
	return out
}

// searchedResultJSON is a result whose capture searched a stream, written
// as output writes a search: the status fields, and per stream the search
// or the slice. It reads the result when it is written, so a cut made
// after it was made shows.
type searchedResultJSON struct{ r *resultJSON }

// MarshalJSON writes s's result with its searches in place.
func (s searchedResultJSON) MarshalJSON() ([]byte, error) {
	out := outputJSON{resultJSON: s.r}
	for i, st := range []struct {
		slice *sliceJSON
		into  *any
	}{{s.r.Stdout, &out.Stdout}, {s.r.Stderr, &out.Stderr}} {
		switch {
		case s.r.searched[i] != nil:
			*st.into = s.r.searched[i]
		case st.slice != nil:
			*st.into = st.slice
		}
	}
	return marshal(out)
}

// outputJSON is output's answer when a stream is searched: the status
// fields, and per stream a slice (still the result's, so a cut to the
// budget reaches it) or a search (grepJSON).
type outputJSON struct {
	*resultJSON
	Stdout any `json:"stdout,omitempty"`
	Stderr any `json:"stderr,omitempty"`
}

// matchJSON is the line that ended a wait with until.pattern. Next is the
// offset just past it: the until.from that looks past it.
type matchJSON struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Line   string `json:"line"`
	Next   int64  `json:"next"`

	listening string // a port that opened ended the wait: the match is {"listening": ADDR}
}

// MarshalJSON writes a port's match as {"listening": "ADDR:PORT"}, a
// line's with its four members.
func (m matchJSON) MarshalJSON() ([]byte, error) {
	if m.listening != "" {
		return json.Marshal(map[string]string{"listening": m.listening})
	}
	type line matchJSON // without this method
	return json.Marshal(line(m))
}

// survivorJSON is a process a job's shell left alive.
type survivorJSON struct {
	PID   int    `json:"pid"`
	Name  string `json:"name"`
	State string `json:"state"`
}

// maxSurvivorsNamed bounds the survivors a result lists; a fork bomb's
// thousands would drown it. survivors_count gives the total.
const maxSurvivorsNamed = 10

// survivorsOf is the wire form of the processes a shell left alive, and
// their number.
func survivorsOf(procs []procInfo) ([]survivorJSON, int) {
	var named []survivorJSON
	for _, p := range procs[:min(len(procs), maxSurvivorsNamed)] {
		named = append(named, survivorJSON{PID: p.pid, Name: p.comm, State: p.state})
	}
	return named, len(procs)
}

// usageJSON is what a job that ran used, on its terminal results.
type usageJSON struct {
	WallMs    int64            `json:"wall_ms"`
	UserMs    int64            `json:"user_ms"`
	SysMs     int64            `json:"sys_ms"`
	MaxRSSKiB int64            `json:"max_rss_kib"`
	Cgroup    *cgroupUsageJSON `json:"cgroup,omitempty"` // what the job's cgroup counted, all its processes together
}

// cgroupUsageJSON is what a job's cgroup counted.
type cgroupUsageJSON struct {
	CPUSeconds      float64 `json:"cpu_s"`
	ProcsMax        int     `json:"procs_max"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes,omitempty"` // only where the memory controller is enabled
}

// sliceJSON is the wire form of a stream slice. Data holds raw bytes; the
// JSON encoder replaces invalid UTF-8 with U+FFFD, so the reply stays valid
// while offset/bytes/total_bytes count raw bytes. A slice with a gap also
// has Omitted and Tail.
type sliceJSON struct {
	Data         string    `json:"data"`
	Offset       int64     `json:"offset"`                  // where Data starts in the stream
	Bytes        int       `json:"bytes"`                   // raw bytes in Data
	TotalBytes   int64     `json:"total_bytes"`             // all the stream ever wrote
	Truncated    bool      `json:"truncated"`               // the range reached into bytes already dropped
	DroppedBytes *int64    `json:"dropped_bytes,omitempty"` // how many of its bytes were dropped
	Omitted      *gapJSON  `json:"omitted,omitempty"`
	Tail         *tailJSON `json:"tail,omitempty"`
	Masked       int       `json:"masked,omitempty"` // markers in Data and Tail, where the stream is masked

	counts bool // the stream is masked: Masked is kept up to date
}

// countMasked sets s's Masked from its text, where it counts.
func (s *sliceJSON) countMasked() {
	if s == nil || !s.counts {
		return
	}
	s.Masked = maskedIn(s.Data)
	if s.Tail != nil {
		s.Masked += maskedIn(s.Tail.Data)
	}
}

// showPlain makes s's text plainText (a nil s: nothing); its offsets and
// byte counts stay those of the raw bytes, so a reader pages on as before.
func (s *sliceJSON) showPlain() {
	if s == nil {
		return
	}
	s.Data = string(plainText([]byte(s.Data)))
	if s.Tail != nil { // a new tail: the raw one may be shared with a copy of s
		tail := *s.Tail
		tail.Data = string(plainText([]byte(tail.Data)))
		s.Tail = &tail
	}
}

// gapJSON is the range between a slice's two parts.
type gapJSON struct {
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
}

// tailJSON is the part of a slice after its gap.
type tailJSON struct {
	Data   string `json:"data"`
	Offset int64  `json:"offset"`
	Bytes  int    `json:"bytes"`
}

// statusOf is the job's status object.
func statusOf(j *job) *resultJSON {
	o := j.outcome()
	r := &resultJSON{JobID: j.id, State: o.state, StartError: o.startError}
	if o.state != stateRunning {
		code := o.exitCode
		r.ExitCode = &code
		if o.signal > 0 {
			r.Signal = signalWords(o.signal)
		}
		r.TimedOut = o.timedOut
		r.Survivors, r.SurvivorsCount = survivorsOf(o.survivors)
		if u := o.usage; u != nil {
			r.Usage = &usageJSON{WallMs: u.wall.Milliseconds(), UserMs: u.userMs, SysMs: u.sysMs, MaxRSSKiB: u.maxRSSKiB}
			if c := u.cgroup; c != nil {
				r.Usage.Cgroup = &cgroupUsageJSON{CPUSeconds: math.Round(c.cpuSeconds*1000) / 1000, ProcsMax: c.procsMax, MemoryPeakBytes: c.memoryPeakBytes}
			}
		}
		r.OOMKilled = o.oomKilled
		if o.lingers && j.lingersNow() {
			r.Lingering = true
			r.Listening = j.listeningJSON()
			r.Note = fmt.Sprintf("Processes it started keep running; kill with job_id %q ends them.", j.id)
		}
	}
	return r
}

// listeningJSON is the TCP addresses j's processes listen on, as the
// listening member carries them: nil when none, null when they cannot be
// read.
func (j *job) listeningJSON() json.RawMessage {
	addrs, ok := listeningOf(j.treePids(), maxListening)
	switch {
	case !ok:
		return json.RawMessage("null")
	case len(addrs) == 0:
		return nil
	}
	b, _ := json.Marshal(addrs) // strings only: cannot fail
	return b
}

// resultWithin is a finished job's result, delivered by the caller, with
// the slices its capture policy selects for how it ended and what that
// left out. A reply can carry at most limit bytes of a stream (0: no
// limit): only the ends of a bigger slice are read.
func resultWithin(j *job, limit int) *resultJSON {
	r := statusOf(j)
	c := j.policy.onSuccess
	if r.State != stateSuccess {
		c = j.policy.onError
	}
	r.delivered = j
	searches := 0
	for _, spec := range []streamSpec{c.stdout, c.stderr} {
		if spec.kind == streamGrep {
			searches++
		}
	}
	for i, s := range []struct {
		name  string
		w     *window
		spec  streamSpec
		slice **sliceJSON
	}{{"stdout", j.stdout, c.stdout, &r.Stdout}, {"stderr", j.stderr, c.stderr, &r.Stderr}} {
		var left int64
		if s.spec.kind == streamGrep {
			r.searched[i], left = searchWithin(s.w, s.spec.grep, limit, searches)
		} else {
			*s.slice, left = sliceWithin(s.w, s.spec, limit)
		}
		if left > 0 {
			if r.Uncaptured == nil {
				r.Uncaptured = map[string]int64{}
			}
			r.Uncaptured[s.name] = left
		}
	}
	return r
}

// leaveOutEmptyStreams drops the slices of streams that never wrote a
// byte (total_bytes 0): under the agent profile, a result says only what
// a model needs to read.
func (r *resultJSON) leaveOutEmptyStreams() {
	for _, s := range []**sliceJSON{&r.Stdout, &r.Stderr} {
		if *s != nil && (*s).TotalBytes == 0 {
			*s = nil
		}
	}
}

// searchWithin is a capture's grep of a finished job's stream w, its
// listed lines within a share of a reply of limit bytes (0: no limit) that
// searches streams search, and what it leaves for output to read: every
// byte, since a search shows lines, not the stream. It says, as output's
// agent-profile grep does, what was gone before it.
func searchWithin(w *window, spec *grepSpec, limit, searches int) (*grepJSON, int64) {
	room := math.MaxInt
	if limit > 0 {
		room = limit / grepBudgetShare / searches
	}
	g := grepWindow(w, spec, true, room)
	g.showDropped()
	_, total := w.stats()
	return g, total
}

// sliceWithin reads spec from w (nil for "none"), copying only the ends of
// a range longer than 2*limit bytes (limit 0: all of it). It also returns
// how many bytes of the stream the spec leaves out without saying so:
// neither read, nor counted as dropped, nor left out only for size.
func sliceWithin(w *window, spec streamSpec, limit int) (*sliceJSON, int64) {
	if spec.kind == streamNone {
		_, total := w.stats()
		return nil, total
	}
	s := w.serveWithin(spec, int64(limit))
	out := &sliceJSON{Data: string(s.data), Offset: s.offset, Bytes: len(s.data), TotalBytes: s.total, Truncated: s.truncated}
	if s.truncated {
		out.DroppedBytes = &s.dropped
	}
	if s.tail != nil {
		out.Omitted = &gapJSON{Offset: s.offset + int64(len(s.data)), Bytes: s.omitted}
		out.Tail = &tailJSON{Data: string(s.tail), Offset: s.tailOffset, Bytes: len(s.tail)}
	}
	out.counts = w.masks
	out.countMasked()
	left := s.total - int64(len(s.data)) - int64(len(s.tail)) - s.cut
	if s.truncated {
		left -= s.dropped
	}
	return out, max(left, 0)
}

// killJSON is the wire form of kill's answer.
type killJSON struct {
	JobID             string         `json:"job_id"`
	Terminated        bool           `json:"terminated"`
	AlreadyTerminated bool           `json:"already_terminated,omitempty"`
	SignalSent        int            `json:"signal_sent,omitempty"`
	Escalated         bool           `json:"escalated,omitempty"`
	State             string         `json:"state,omitempty"`
	Detail            string         `json:"detail,omitempty"`
	Survivors         []survivorJSON `json:"survivors,omitempty"` // a lingering tree's processes the kill left alive
	Result            any            `json:"result,omitempty"`    // the result's onWire
}

// The outputSchema of each tool's result (2025-06-18 on). Each is an
// object, as clients require of an outputSchema, and open: a member a
// later release adds does not break a client that validates.

// resultSchema describes a job's result or status (resultJSON).
func resultSchema() map[string]any {
	integer, boolean, text := schemaType("integer"), schemaType("boolean"), schemaType("string")
	return objectSchema(map[string]any{
		"job_id":            text,
		"state":             map[string]any{"type": "string", "enum": []string{stateRunning, stateSuccess, stateError}},
		"exit_code":         integer,
		"signal":            text,
		"start_error":       text,
		"timed_out":         boolean,
		"yielded":           boolean,
		"waiting_for_input": boolean,
		"stdout":            sliceSchema(),
		"stderr":            sliceSchema(),
		"uncaptured":        map[string]any{"type": "object", "additionalProperties": integer},
		"usage": objectSchema(map[string]any{
			"wall_ms": integer, "user_ms": integer, "sys_ms": integer, "max_rss_kib": integer,
		}, "wall_ms", "user_ms", "sys_ms", "max_rss_kib"),
		"kept":     boolean,
		"deferred": boolean,
		"survivors": map[string]any{"type": "array", "items": objectSchema(map[string]any{
			"pid": integer, "name": text, "state": text,
		}, "pid", "name", "state")},
		"survivors_count": integer,
		"matched":         objectSchema(map[string]any{"stream": text, "offset": integer, "line": text, "next": integer}, "stream", "offset", "line", "next"),
		"idle":            boolean,
	}, "job_id", "state")
}

// outputSchema describes output's result: resultSchema, each stream a
// slice or a search (outputJSON).
func outputSchema() map[string]any {
	s := resultSchema()
	props := s["properties"].(map[string]any)
	for _, name := range []string{"stdout", "stderr"} {
		props[name] = map[string]any{"anyOf": []any{sliceSchema(), grepSchema()}}
	}
	return s
}

// grepSchema describes a search of a stream (grepJSON).
func grepSchema() map[string]any {
	integer, lines := schemaType("integer"), map[string]any{"type": "array", "items": schemaType("string")}
	match := objectSchema(map[string]any{"offset": integer, "line": schemaType("string"), "before": lines, "after": lines,
		"clipped": objectSchema(map[string]any{"offset": integer, "line_bytes": integer}, "offset", "line_bytes")}, "offset", "line")
	return objectSchema(map[string]any{
		"matches":     map[string]any{"type": "array", "items": match},
		"match_count": integer,
		"searched":    objectSchema(map[string]any{"from": integer, "to": integer, "dropped_bytes": integer}, "from", "to"),
		"next":        integer,
	}, "matches", "match_count", "searched")
}

// sliceSchema describes a stream slice (sliceJSON).
func sliceSchema() map[string]any {
	integer := schemaType("integer")
	return objectSchema(map[string]any{
		"data":          schemaType("string"),
		"offset":        integer,
		"bytes":         integer,
		"total_bytes":   integer,
		"truncated":     schemaType("boolean"),
		"dropped_bytes": integer,
		"omitted":       objectSchema(map[string]any{"offset": integer, "bytes": integer}, "offset", "bytes"),
		"tail":          objectSchema(map[string]any{"data": schemaType("string"), "offset": integer, "bytes": integer}, "data", "offset", "bytes"),
	}, "data", "offset", "bytes", "total_bytes", "truncated")
}

// waitSchema describes wait's structured result: its array of results,
// wrapped in an object.
func waitSchema() map[string]any {
	return objectSchema(map[string]any{"results": map[string]any{"type": "array", "items": resultSchema()}}, "results")
}

// killSchema describes kill's result (killJSON).
func killSchema() map[string]any {
	return objectSchema(map[string]any{
		"job_id":             schemaType("string"),
		"terminated":         schemaType("boolean"),
		"already_terminated": schemaType("boolean"),
		"signal_sent":        schemaType("integer"),
		"escalated":          schemaType("boolean"),
		"state":              schemaType("string"),
		"detail":             schemaType("string"),
		"result":             resultSchema(),
	}, "job_id", "terminated")
}

// listJobsSchema describes list_jobs' result.
func listJobsSchema() map[string]any {
	entry := objectSchema(map[string]any{
		"job_id":            schemaType("string"),
		"state":             schemaType("string"),
		"waiting_for_input": schemaType("boolean"),
		"survivors":         schemaType("integer"),
	}, "job_id", "state")
	return objectSchema(map[string]any{
		"jobs":    map[string]any{"type": "array", "items": entry},
		"omitted": schemaType("integer"),
	}, "jobs")
}

// objectSchema is an object with these properties, the listed ones required.
func objectSchema(props map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// schemaType is a schema of one JSON type.
func schemaType(t string) map[string]any { return map[string]any{"type": t} }
