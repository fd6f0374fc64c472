// What is remembered of a job the registry forgot (nobody collected it
// in time, or MCP_EXEC_MAX_FINISHED pushed it out), so its id's error can
// say why.

package main

import (
	"fmt"
)

// expiredJobs remembers why the most recently forgotten jobs of one kind
// (expired, or delivered) were forgotten.
type expiredJobs struct {
	why   map[string]string // by job id
	order []string          // ids, oldest first
}

// expiredRemembered bounds what expiredJobs keeps.
const expiredRemembered = 4096

// add remembers why id was forgotten; an id added again keeps its place.
func (e *expiredJobs) add(id, why string) {
	if e.why == nil {
		e.why = map[string]string{}
	}
	if _, ok := e.why[id]; ok {
		e.why[id] = why
		return
	}
	if len(e.order) == expiredRemembered {
		delete(e.why, e.order[0])
		e.order = e.order[1:]
	}
	e.why[id] = why
	e.order = append(e.order, id)
}

// expiredJob is errUnknownJob for a job forgotten by MCP_EXEC_JOB_TTL or
// MCP_EXEC_MAX_FINISHED, saying why.
type expiredJob struct{ id, why string }

// Error names the id and why it was forgotten.
func (e expiredJob) Error() string {
	return fmt.Sprintf("%v: %s (expired: %s)", errUnknownJob, e.id, e.why)
}

// Unwrap makes an expired job an unknown one.
func (e expiredJob) Unwrap() error { return errUnknownJob }

// deliveredJob is errUnknownJob for a job whose result an earlier call took.
type deliveredJob struct{ id string }

// Error names the id and that an earlier call took its result.
func (e deliveredJob) Error() string {
	return fmt.Sprintf("%v: %s (delivered to an earlier call)", errUnknownJob, e.id)
}

// Unwrap makes a delivered job an unknown one.
func (e deliveredJob) Unwrap() error { return errUnknownJob }
