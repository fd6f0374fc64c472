package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// signalWords describes sig as strsignal(3) does, in lower case
// ("terminated", "killed", "hangup", "real-time signal 2").
func signalWords(sig syscall.Signal) string {
	switch {
	case realtimeMin != 0 && sig >= realtimeMin && sig <= realtimeMax:
		return fmt.Sprintf("real-time signal %d", sig-realtimeMin)
	case isRealtime(sig):
		return fmt.Sprintf("unknown signal %d", int(sig)) // kept by the C library; strsignal names none
	}
	return strings.ToLower(sig.String())
}

// streamKind selects how a stream spec reads a window.
type streamKind int

const (
	streamNone streamKind = iota
	streamAll
	streamTail
	streamRange
	streamGrep // output only: the kept lines that match
)

// streamSpec is a parsed stream spec.
type streamSpec struct {
	kind      streamKind
	tail      int64
	from      int64
	length    int64 // < 0: to the end
	unaligned bool
	grep      *grepSpec // for streamGrep
}

// grepSpec is output's {"grep": RE2, "from"?, "max"?, "context"?}: list up
// to max of the complete kept lines from offset from on that match re,
// each with context lines before and after it.
type grepSpec struct {
	re      *regexp.Regexp
	from    int64
	max     int
	context int
}

// Bounds of a grep: matches listed by default and at most, and context
// lines at most on each side.
const (
	defaultGrepMax = 20
	maxGrepMax     = 1000
	maxGrepContext = 20
)

// captureSpec selects what a result carries of each stream.
type captureSpec struct{ stdout, stderr streamSpec }

// capturePolicy picks a captureSpec by how the job ended.
type capturePolicy struct{ onSuccess, onError captureSpec }

// The capture specs that 1.0's default policy and execute's shorthand
// words ("stdout", "stderr", ...) stand for.
var (
	specAll          = streamSpec{kind: streamAll}
	captureStdout    = captureSpec{stdout: specAll}
	captureStderr    = captureSpec{stderr: specAll}
	defaultCapture   = capturePolicy{onSuccess: captureStdout, onError: captureStderr}
	captureShorthand = map[string]captureSpec{
		"stdout": captureStdout, "stderr": captureStderr,
		"all": {stdout: specAll, stderr: specAll}, "none": {},
	}
)

// bareStreamWordError refuses a stream spec given as a word other than
// "none" or "all" ("tail", say), in the words 1.0 used.
type bareStreamWordError string

// Error says which words a stream spec may be.
func (w bareStreamWordError) Error() string {
	return fmt.Sprintf("stream spec %q is not \"none\" or \"all\"", string(w))
}

// parseStreamSpec parses "none", "all", {"tail": N} or {"from": P, "length": L?, "unaligned": B?}.
func parseStreamSpec(r json.RawMessage) (streamSpec, error) {
	if isNull(r) {
		return streamSpec{}, nil
	}
	var word string
	if json.Unmarshal(r, &word) == nil {
		switch word {
		case "none":
			return streamSpec{}, nil
		case "all":
			return specAll, nil
		}
		return streamSpec{}, bareStreamWordError(word)
	}
	obj, err := decodeObject(r)
	if err != nil {
		return streamSpec{}, fmt.Errorf(`stream spec must be "none", "all", {"tail": N} or {"from": P, ...}, got %s`, clip(r))
	}
	if _, ok := obj["grep"]; ok {
		return parseGrepSpec(obj)
	}
	if k := unknownKey(obj, "tail", "from", "length", "unaligned"); k != "" {
		return streamSpec{}, fmt.Errorf("stream spec has unknown key %q", k)
	}
	if t, ok := obj["tail"]; ok {
		if len(obj) != 1 {
			return streamSpec{}, errors.New(`stream spec mixes "tail" with a byte range`)
		}
		n, err := parseInteger(t)
		if err != nil {
			return streamSpec{}, fmt.Errorf("tail %v", err)
		}
		return streamSpec{kind: streamTail, tail: n}, nil
	}
	return parseRangeSpec(obj)
}

// parseGrepSpec parses {"grep": RE2, "from"?: P, "max"?: N, "context"?: L}.
func parseGrepSpec(obj map[string]json.RawMessage) (streamSpec, error) {
	if k := unknownKey(obj, "grep", "from", "max", "context"); k != "" {
		return streamSpec{}, fmt.Errorf(`grep has unknown key %q (allowed: grep, from, max, context)`, k)
	}
	var pattern string
	if json.Unmarshal(obj["grep"], &pattern) != nil {
		return streamSpec{}, fmt.Errorf("grep must be a string holding an RE2 regular expression, got %s", clip(obj["grep"]))
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return streamSpec{}, fmt.Errorf("grep is not an RE2 regular expression: %v", err)
	}
	from, most, context := int64(0), int64(defaultGrepMax), int64(0)
	for _, m := range []struct {
		key      string
		into     *int64
		low, top int64
	}{{"from", &from, 0, math.MaxInt64}, {"max", &most, 1, maxGrepMax}, {"context", &context, 0, maxGrepContext}} {
		raw, ok := obj[m.key]
		if !ok || isNull(raw) {
			continue
		}
		n, err := parseInteger(raw)
		if err != nil || n < m.low || n > m.top {
			allowed := fmt.Sprintf("from %d to %d", m.low, m.top)
			if m.top == math.MaxInt64 {
				allowed = "an offset, 0 or more"
			}
			return streamSpec{}, fmt.Errorf("grep %s must be a whole number, %s, got %s", m.key, allowed, clip(raw))
		}
		*m.into = n
	}
	g := &grepSpec{re: re, from: from, max: int(most), context: int(context)}
	return streamSpec{kind: streamGrep, grep: g}, nil
}

// parseRangeSpec parses {"from": P, "length": L?, "unaligned": B?}.
func parseRangeSpec(obj map[string]json.RawMessage) (streamSpec, error) {
	s := streamSpec{kind: streamRange, length: -1}
	f, ok := obj["from"]
	if !ok {
		return s, errors.New(`stream spec needs "tail" or "from"`)
	}
	var err error
	if s.from, err = parseInteger(f); err != nil {
		return s, fmt.Errorf("from %v", err)
	}
	if l, ok := obj["length"]; ok && !isNull(l) {
		if s.length, err = parseInteger(l); err != nil {
			return s, fmt.Errorf("length %v", err)
		}
		if s.length < 0 {
			s.length = 0 // a negative length selects nothing
		}
	}
	if u, ok := obj["unaligned"]; ok && !isNull(u) {
		if json.Unmarshal(u, &s.unaligned) != nil {
			return s, fmt.Errorf("unaligned must be true or false, got %s", clip(u))
		}
	}
	return s, nil
}

// parseCaptureSpec parses "stdout", "stderr", "all", "none" or {stdout, stderr}.
func parseCaptureSpec(r json.RawMessage) (captureSpec, error) {
	var word string
	if json.Unmarshal(r, &word) == nil {
		if c, ok := captureShorthand[word]; ok {
			return c, nil
		}
		return captureSpec{}, fmt.Errorf(`capture spec %q is not "stdout", "stderr", "all" or "none"`, word)
	}
	obj, err := decodeObject(r)
	if err != nil {
		return captureSpec{}, fmt.Errorf(`capture spec must be a word or {"stdout": ..., "stderr": ...}, got %s`, clip(r))
	}
	var c captureSpec
	if k := unknownKey(obj, "stdout", "stderr"); k != "" {
		return c, fmt.Errorf("capture spec has unknown key %q", k)
	}
	err = parseMembers(obj, parseStreamSpec, member[streamSpec]{"stdout", &c.stdout}, member[streamSpec]{"stderr", &c.stderr})
	return c, err
}

// captureGrepRefusal is why a capture that is not a call's own, or is
// outside the agent profile, takes no grep: 1.0's capture did not, and the
// other tool sets render their results without one.
const captureGrepRefusal = `grep is for output (a search of what a job kept); capture takes "none", "all", {"tail": N} or {"from": P, ...}`

// grepAt is where p's first grep is, as an error names a member
// ("on_error: stderr"), or "" when p has none.
func (p capturePolicy) grepAt() string {
	for _, side := range []struct {
		name string
		c    captureSpec
	}{{"on_success", p.onSuccess}, {"on_error", p.onError}} {
		for _, s := range []struct {
			name string
			spec streamSpec
		}{{"stdout", side.c.stdout}, {"stderr", side.c.stderr}} {
			if s.spec.kind == streamGrep {
				return side.name + ": " + s.name
			}
		}
	}
	return ""
}

// member names a member of a JSON object and where its parsed value goes.
type member[T any] struct {
	key  string
	into *T
}

// parseMembers parses each member of obj that is present and not null with
// parse, in the order given; an error names the member.
func parseMembers[T any](obj map[string]json.RawMessage, parse func(json.RawMessage) (T, error), members ...member[T]) error {
	for _, m := range members {
		raw, ok := obj[m.key]
		if !ok || isNull(raw) {
			continue
		}
		v, err := parse(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", m.key, err) // wrapped: a bare stream word still gets its hint
		}
		*m.into = v
	}
	return nil
}

// parseCapturePolicy parses {on_success, on_error}; a bare capture spec
// applies to both outcomes.
func parseCapturePolicy(r json.RawMessage) (capturePolicy, error) {
	p := defaultCapture
	obj, err := decodeObject(r)
	if err != nil {
		c, err := parseCaptureSpec(r)
		if err != nil {
			return p, err
		}
		return capturePolicy{onSuccess: c, onError: c}, nil
	}
	if k := unknownKey(obj, "on_success", "on_error"); k != "" {
		return p, fmt.Errorf("capture has unknown key %q (use on_success and on_error)", k)
	}
	err = parseMembers(obj, parseCaptureSpec, member[captureSpec]{"on_success", &p.onSuccess}, member[captureSpec]{"on_error", &p.onError})
	return p, err
}

// assured is the pseudo-signal for TERM-then-KILL.
const assured = syscall.Signal(-1)

// parseSignal accepts "TERM", "SIGTERM", "term", "15", a real-time signal
// ("34", "RTMIN+2", "SIGRTMAX-1") or "ASSURED": a string, as the schema says.
func parseSignal(r json.RawMessage) (syscall.Signal, error) {
	var name string
	if json.Unmarshal(r, &name) != nil {
		return 0, fmt.Errorf(`a signal must be a string such as "TERM", "KILL", "9" or "ASSURED", got %s`, clip(r))
	}
	up := strings.ToUpper(strings.TrimSpace(name))
	if up == "ASSURED" {
		return assured, nil
	}
	if sig, ok := signalByName(up); ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q: use a name such as TERM, KILL, INT or HUP, a number such as \"9\", a real-time signal such as RTMIN+1, or ASSURED", name)
}

// signalByName resolves an upper-case signal number or name, with or
// without the SIG prefix.
func signalByName(up string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(up); err == nil {
		sig := syscall.Signal(n)
		return sig, n > 0 && (unix.SignalName(sig) != "" || isRealtime(sig))
	}
	up = strings.TrimPrefix(up, "SIG")
	if sig, ok := realtimeByName(up); ok {
		return sig, true
	}
	sig := unix.SignalNum("SIG" + up)
	return sig, sig != 0
}

// realtimeByName resolves RTMIN, RTMIN+n, RTMAX and RTMAX-n, numbered as
// kill(1) numbers them for programs built on the C library.
func realtimeByName(up string) (syscall.Signal, bool) {
	base, sign, step := realtimeMin, "+", 1
	rest, ok := strings.CutPrefix(up, "RTMIN")
	if !ok {
		base, sign, step = realtimeMax, "-", -1
		rest, ok = strings.CutPrefix(up, "RTMAX")
	}
	if !ok || realtimeMin == 0 {
		return 0, false
	}
	n := 0
	if rest != "" {
		digits, ok := strings.CutPrefix(rest, sign)
		var err error
		if n, err = strconv.Atoi(digits); !ok || err != nil || n < 0 {
			return 0, false
		}
	}
	sig := base + syscall.Signal(n*step)
	return sig, sig >= realtimeMin && sig <= realtimeMax
}

// isRealtime reports whether sig is one of the system's real-time signals,
// the two the C library keeps for itself included.
func isRealtime(sig syscall.Signal) bool {
	return realtimeFirst != 0 && sig >= realtimeFirst && sig <= realtimeMax
}

// untilSpec is wait's until: return as soon as a listed running job writes
// a complete line that matches pattern (on stream: stdout, stderr or any;
// from an offset, or from the call's start), or once a listed running job
// has been quiet for idle.
type untilSpec struct {
	pattern *regexp.Regexp
	stream  string
	from    *int64
	idle    time.Duration
	// listen: a TCP port of the job's tree in LISTEN ends the wait too:
	// port, or any port when port is 0.
	listen bool
	port   int
}

// maxIdleSeconds bounds until.idle: a day.
const maxIdleSeconds = 86400

// untilStreams are the values of until.stream.
var untilStreams = []string{"stdout", "stderr", "any"}

// parseUntilSpec parses {"pattern": RE2, "stream"?, "from"?} or {"idle": seconds}.
func parseUntilSpec(r json.RawMessage) (untilSpec, error) {
	var raw struct {
		Pattern   *string         `json:"pattern"`
		Stream    *string         `json:"stream"`
		From      *int64          `json:"from"`
		Idle      *float64        `json:"idle"`
		Listening json.RawMessage `json:"listening"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r)))
	dec.DisallowUnknownFields()
	if dec.Decode(&raw) != nil {
		return untilSpec{}, fmt.Errorf(`%w until: must be {"pattern": RE2, "stream": "stdout"|"stderr"|"any", "from": offset}, {"idle": seconds} or {"listening": PORT|true}, listening alone or beside pattern`, errInvalid)
	}
	var listen untilSpec
	if raw.Listening != nil {
		var err error
		if listen, err = parseUntilListening(raw.Listening); err != nil {
			return untilSpec{}, err
		}
		if raw.Idle != nil {
			return untilSpec{}, fmt.Errorf("%w until: listening goes alone or beside pattern, not with idle", errInvalid)
		}
		if raw.Pattern == nil {
			if raw.Stream != nil || raw.From != nil {
				return untilSpec{}, fmt.Errorf("%w until: stream and from go with pattern", errInvalid)
			}
			return listen, nil
		}
	}
	switch {
	case (raw.Pattern == nil) == (raw.Idle == nil):
		return untilSpec{}, fmt.Errorf("%w until: give pattern or idle, one of them", errInvalid)
	case raw.Idle != nil:
		if raw.Stream != nil || raw.From != nil {
			return untilSpec{}, fmt.Errorf("%w until: stream and from go with pattern, not idle", errInvalid)
		}
		if !(*raw.Idle > 0) || *raw.Idle > maxIdleSeconds {
			return untilSpec{}, fmt.Errorf("%w until.idle: must be a number of seconds greater than 0, at most %d", errInvalid, maxIdleSeconds)
		}
		return untilSpec{idle: time.Duration(*raw.Idle * float64(time.Second))}, nil
	}
	re, err := regexp.Compile(*raw.Pattern)
	if err != nil {
		return untilSpec{}, fmt.Errorf("%w until.pattern: %v", errInvalid, err)
	}
	spec := untilSpec{pattern: re, stream: "any", from: raw.From, listen: listen.listen, port: listen.port}
	if raw.Stream != nil {
		if !slices.Contains(untilStreams, *raw.Stream) {
			return untilSpec{}, fmt.Errorf("%w until.stream: must be stdout, stderr or any", errInvalid)
		}
		spec.stream = *raw.Stream
	}
	if spec.from != nil && *spec.from < 0 {
		return untilSpec{}, fmt.Errorf("%w until.from: must be an offset, 0 or more", errInvalid)
	}
	return spec, nil
}

// parseUntilListening parses until.listening: a port (1 to 65535) or
// true, any port.
func parseUntilListening(r json.RawMessage) (untilSpec, error) {
	var anyPort bool
	if json.Unmarshal(r, &anyPort) == nil && anyPort {
		return untilSpec{listen: true}, nil
	}
	var port int
	if json.Unmarshal(r, &port) == nil && port >= 1 && port <= 65535 {
		return untilSpec{listen: true, port: port}, nil
	}
	return untilSpec{}, fmt.Errorf("%w until.listening: must be a TCP port (1 to 65535) or true (any port)", errInvalid)
}

// untilSchema is the JSON Schema of wait's until. It leaves out
// listening, which the agent profile's texts name: a 1.0 client's
// tools/list stays byte for byte 1.0's, and the objects stay open.
func untilSchema() map[string]any {
	return map[string]any{"anyOf": []any{
		map[string]any{"type": "object", "required": []string{"pattern"}, "properties": map[string]any{
			"pattern": map[string]any{"type": "string"},
			"stream":  map[string]any{"type": "string", "enum": untilStreams},
			"from":    map[string]any{"type": "integer", "minimum": 0},
		}},
		map[string]any{"type": "object", "required": []string{"idle"}, "properties": map[string]any{
			"idle": map[string]any{"type": "number", "exclusiveMinimum": 0},
		}},
	}}
}

// ttySpec is execute's tty: run the job on a pseudo-terminal of this size;
// the zero value asks for none.
type ttySpec struct {
	rows, cols uint16
}

// Terminal sizes: the default, and the largest accepted.
const (
	defaultTTYRows, defaultTTYCols = 24, 80
	maxTTYSide                     = 1000
)

// parseTTYSpec parses true, false (no terminal: the zero ttySpec) or
// {"rows": R, "cols": C}.
func parseTTYSpec(r json.RawMessage) (ttySpec, error) {
	var on bool
	if json.Unmarshal(r, &on) == nil {
		if !on {
			return ttySpec{}, nil
		}
		return ttySpec{rows: defaultTTYRows, cols: defaultTTYCols}, nil
	}
	var size struct {
		Rows *int `json:"rows"`
		Cols *int `json:"cols"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r)))
	dec.DisallowUnknownFields()
	if dec.Decode(&size) != nil {
		return ttySpec{}, fmt.Errorf(`%w tty: must be true, false or {"rows": R, "cols": C}`, errInvalid)
	}
	spec := ttySpec{rows: defaultTTYRows, cols: defaultTTYCols}
	for _, side := range []struct {
		v   *int
		dst *uint16
	}{{size.Rows, &spec.rows}, {size.Cols, &spec.cols}} {
		if side.v == nil {
			continue
		}
		if *side.v < 1 || *side.v > maxTTYSide {
			return ttySpec{}, fmt.Errorf("%w tty: rows and cols must be from 1 to %d", errInvalid, maxTTYSide)
		}
		*side.dst = uint16(*side.v)
	}
	return spec, nil
}

// ttySchema is the JSON Schema of execute's tty.
func ttySchema() map[string]any {
	side := map[string]any{"type": "integer", "minimum": 1, "maximum": maxTTYSide}
	return map[string]any{"anyOf": []any{
		map[string]any{"type": "boolean"},
		map[string]any{"type": "object", "properties": map[string]any{"rows": side, "cols": side}},
	}}
}

// plainText is terminal output as a reader sees it: without its escape
// sequences (CSI, OSC and two-byte escapes), and of a line redrawn after a
// carriage return (a progress bar) only what was drawn last. A carriage
// return before a newline ends the line with it; one with nothing drawn
// after it leaves the line as it was.
func plainText(b []byte) []byte {
	out := make([]byte, 0, len(b))
	lineStart, redraw := 0, false // where the line being drawn starts in out; a return was seen
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\r':
			redraw = true
		case c == '\n':
			out = append(out, c)
			lineStart, redraw = len(out), false
		case c == 0x1b && i+1 < len(b) && b[i+1] == '[': // CSI: parameters, then a final byte @..~
			i += 2
			for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
				i++
			}
		case c == 0x1b && i+1 < len(b) && b[i+1] == ']': // OSC: up to BEL or ESC \
			i += 2
			for i < len(b) && b[i] != 0x07 && !(b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\') {
				i++
			}
			if i < len(b) && b[i] == 0x1b {
				i++
			}
		case c == 0x1b && i+1 < len(b): // a two-byte escape
			i++
		default:
			if redraw { // the first byte drawn over the line: what was drawn before goes
				out, redraw = out[:lineStart], false
			}
			out = append(out, c)
		}
	}
	return out
}

// signalName is a signal's conventional name, such as "SIGTERM", or its
// number when it has none.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return strconv.Itoa(int(sig))
}
