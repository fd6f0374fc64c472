// What is remembered of a job the registry forgot (nobody collected it
// in time, or MCP_EXEC_MAX_FINISHED pushed it out), so its id's error can
// say why.

package main

import (
	"fmt"
)

// expiredJobs remembers why the most recently expired jobs were forgotten.
type expiredJobs struct {
	why   map[string]string // by job id
	order []string          // ids, oldest first
}

// expiredRemembered bounds what expiredJobs keeps.
const expiredRemembered = 4096

func (e *expiredJobs) add(id, why string) {
	if e.why == nil {
		e.why = map[string]string{}
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

func (e expiredJob) Error() string {
	return fmt.Sprintf("%v: %s (expired: %s)", errUnknownJob, e.id, e.why)
}
func (e expiredJob) Unwrap() error { return errUnknownJob }
