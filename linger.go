// Lingering jobs: a job delivered while processes of its tree still run
// stays in reach by its id until the tree is empty.

package main

import (
	"slices"
	"time"
)

// lingerLookDuration is how often a lingering tree is looked at when no
// cgroup event can say it emptied (process groups), and how long a
// cgroup's watch is trusted before a look anyway.
const lingerLookDuration = time.Second

// lingerSet is a registry's lingering jobs: delivered jobs whose trees
// still run, by id and in the order they began to linger. The registry's
// mu guards it.
type lingerSet struct {
	byID  map[string]*job
	order []*job
}

// add keeps j.
func (l *lingerSet) add(j *job) {
	if l.byID == nil {
		l.byID = map[string]*job{}
	}
	l.byID[j.id] = j
	l.order = append(l.order, j)
}

// remove forgets j and reports whether it was kept.
func (l *lingerSet) remove(j *job) bool {
	if l.byID[j.id] != j {
		return false
	}
	delete(l.byID, j.id)
	l.order = slices.DeleteFunc(l.order, func(o *job) bool { return o == j })
	return true
}

// has reports whether j is kept.
func (l *lingerSet) has(j *job) bool { return l.byID[j.id] == j }

// find is the kept job with id, or nil.
func (l *lingerSet) find(id string) *job { return l.byID[id] }

// list is the kept jobs, oldest first, in a new slice.
func (l *lingerSet) list() []*job { return slices.Clone(l.order) }

// awaitTreeGone returns once nothing of j's tree is alive: a cgroup's
// events wake it, else it looks every lingerLookDuration.
func (j *job) awaitTreeGone() {
	for !j.treeGone() {
		select {
		case <-cgroupChanged():
		case <-time.After(lingerLookDuration):
		}
	}
}

// lingersNow reports whether j's tree still runs past its result, so a
// report may call it lingering: it has not emptied, and nothing says it
// has yet. Not under a lock: it reads the cgroup or /proc.
func (j *job) lingersNow() bool {
	j.mu.Lock()
	emptied := j.state == jobEmptied
	j.mu.Unlock()
	return !emptied && !j.treeGone()
}

// treeGone reports whether nothing of j's tree is alive: its cgroup is
// empty, or, on process groups, its group has no member and no process
// remembered as its (a zombie has ended) lives.
func (j *job) treeGone() bool {
	box := j.boxed()
	if _, ok := box.members(); ok {
		return !box.populated() && len(box.escaped()) == 0
	}
	// Its shell was reaped: a process under its pid is a new one, and its
	// group, if any, not the job's.
	if _, reused := procNow(j.pid); !reused && groupAlive(j.pid) {
		return false
	}
	for pid, start := range j.tree.remembered() {
		if p, ok := procNow(pid); ok && p.start == start && p.state != "Z" {
			return false
		}
	}
	return true
}
