package main

import (
	"encoding/json"
	"strings"
)

// A tools/call may carry W3C trace context in its _meta: traceparent and
// tracestate, as a tracing host propagates them. The session reads them
// where it reads the request (traceFromMeta) and hands the job core plain
// values, a jobTrace: the variables the job gets and the trace id the job
// log carries. Nothing below the session reads _meta.
//
// A traceparent that is not valid is ignored, not refused: _meta is the
// host's, not the model's, so refusing would fail a command over something
// neither the model nor the person can fix from the call, and the
// trace-context recommendation itself has a receiver start afresh rather
// than fail. The job then runs as it would with no trace context.

// Environment variables a job's trace context is carried in, the names
// OpenTelemetry's environment-carrier convention uses.
const (
	envTraceparent = "TRACEPARENT"
	envTracestate  = "TRACESTATE"
)

// tracestateMaxBytes is the longest tracestate passed on, the
// recommendation's own bound on what a receiver must accept.
const tracestateMaxBytes = 512

// jobTrace is the trace context a job runs in. The zero value is none: the
// job's environment is the server's and the caller's, untouched.
type jobTrace struct {
	id    string            // the traceparent's trace-id, 32 lowercase hex digits; "" for none
	env   map[string]string // TRACEPARENT, and TRACESTATE when the call carried a valid one
	unset []string          // TRACESTATE when the call carried none: the server's own belongs to another trace
}

// traceFromMeta is the trace context a request's _meta (nil when it has
// none) carries: none unless _meta.traceparent is a valid version-00
// traceparent string. A tracestate that is not valid is left out alone.
func traceFromMeta(meta map[string]json.RawMessage) jobTrace {
	var parent, state string
	if json.Unmarshal(meta["traceparent"], &parent) != nil {
		return jobTrace{}
	}
	id, ok := traceIDOf(parent)
	if !ok {
		return jobTrace{}
	}
	t := jobTrace{id: id, env: map[string]string{envTraceparent: parent}}
	if json.Unmarshal(meta["tracestate"], &state) == nil && validTracestate(state) {
		t.env[envTracestate] = state
	} else {
		t.unset = []string{envTracestate}
	}
	return t
}

// traceIDOf is the trace-id of traceparent, when it is valid: version 00,
// exactly "00-" 32 hex digits "-" 16 hex digits "-" 2 hex digits, all
// lowercase, neither id all zeros.
func traceIDOf(traceparent string) (string, bool) {
	fields := strings.Split(traceparent, "-")
	if len(fields) != 4 || fields[0] != "00" {
		return "", false
	}
	for i, want := range []int{2, 32, 16, 2} {
		if !isLowerHex(fields[i], want) {
			return "", false
		}
	}
	if allZeros(fields[1]) || allZeros(fields[2]) {
		return "", false
	}
	return fields[1], true
}

// isLowerHex reports whether s is n lowercase hexadecimal digits.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// allZeros reports whether s is only '0's.
func allZeros(s string) bool { return strings.Trim(s, "0") == "" }

// validTracestate reports whether s can be passed on as TRACESTATE: not
// empty, at most tracestateMaxBytes, printable ASCII only (no control
// character can reach the job's environment). Its members are the
// tracing vendors' to read; they are not checked one by one.
func validTracestate(s string) bool {
	if strings.TrimSpace(s) == "" || len(s) > tracestateMaxBytes {
		return false
	}
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// variables is what trace does to a job's environment: the variables it
// adds (those denyEnv names left out: the operator's list holds for them
// too) and the names it removes (a TRACESTATE of another trace). Both nil
// when there is no trace.
func (t jobTrace) variables(denyEnv map[string]bool) (add map[string]string, unset []string) {
	if t.id == "" {
		return nil, nil
	}
	add = make(map[string]string, len(t.env))
	for k, v := range t.env {
		if !denyEnv[k] {
			add[k] = v
		}
	}
	return add, t.unset
}
