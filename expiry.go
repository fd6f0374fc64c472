// Forgetting finished jobs nobody collected (MCP_EXEC_MAX_FINISHED,
// MCP_EXEC_JOB_TTL), remembering why, and keeping delivered jobs whose
// result was cut readable a while.

package main

import (
	"fmt"
	"time"
)

// finishedLocked applies the limits on finished jobs to j, which has just
// finished and is listed: MCP_EXEC_MAX_FINISHED now, MCP_EXEC_JOB_TTL later.
// Caller holds r.mu.
func (r *registry) finishedLocked(j *job) {
	if j.finishedSeen {
		return // both publish and start may see it finish
	}
	j.finishedSeen = true
	r.expireBeyondLocked(r.cfg.maxFinished)
	if ttl := r.cfg.jobTTL; ttl > 0 {
		time.AfterFunc(ttl, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.expireLocked(j, fmt.Sprintf("finished and not collected within MCP_EXEC_JOB_TTL (%v)", ttl))
		})
	}
}

// expireBeyondLocked forgets the oldest finished, uncollected jobs beyond
// most (0: no limit). Caller holds r.mu.
func (r *registry) expireBeyondLocked(most int) {
	if most <= 0 {
		return
	}
	var finished []*job
	for e := r.order.Front(); e != nil; e = e.Next() {
		if j := e.Value.(*job); j.terminal() {
			finished = append(finished, j)
		}
	}
	for _, j := range finished[:max(len(finished)-most, 0)] {
		r.expireLocked(j, fmt.Sprintf("more than MCP_EXEC_MAX_FINISHED (%d) finished jobs waited to be collected; the oldest go first", most))
	}
}

// expireLocked forgets a finished job nobody collected, and remembers why
// for a while. Caller holds r.mu.
func (r *registry) expireLocked(j *job, why string) {
	if j.terminal() && r.removeLocked(j) {
		r.expired.add(j.id, why)
	}
}

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

// keep lets status and output read a delivered job whose result was cut,
// for d; then it is forgotten.
func (r *registry) keep(j *job, d time.Duration) {
	if d <= 0 {
		return
	}
	r.mu.Lock()
	r.kept[j.id] = j
	r.mu.Unlock()
	time.AfterFunc(d, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.kept[j.id] == j {
			delete(r.kept, j.id)
		}
	})
}
