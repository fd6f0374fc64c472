// Which processes belong to a job, and how a kill or a teardown reaches
// and waits for all of them, including those that left its process group
// or session.

package main

import (
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A job's tree, without cgroups, is what /proc can link to it: the members
// of its process group and of its session (the shell leads both, so their
// ids are its pid); every process below one of those by parent links; the
// processes seen in the tree at an earlier look that still live (same pid,
// same start time), so a grandchild re-parented to the server after its
// parent died is still the job's; and the orphans re-parented to the
// server (its subreaper role) that hold one of the job's pipes, which is
// what ties a daemon to a job whose shell is gone. A daemon whose parent
// had already exited before any look, and that closed the job's pipes, is
// linked to nothing: only a cgroup could tell.

// fileKey identifies an open file as stat shows it through any descriptor
// or /proc/PID/fd link: device and inode. A pipe's two ends share one.
type fileKey struct{ dev, ino uint64 }

// pipeKeyOf is the fileKey of the pipe open at fd; false when fd is no
// pipe or fstat fails.
func pipeKeyOf(fd int) (fileKey, bool) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true // the fields' types differ by system
}

// jobTree is what the server keeps to find a job's processes beyond its
// group.
type jobTree struct {
	pipes []fileKey // the job's stdin, stdout and stderr pipes (or terminal); set before the spawn, read-only after

	mu   sync.Mutex     // guards seen
	seen map[int]uint64 // pid to start time of each process the last look found in the tree
}

// notePipes records the pipes handed to the job as its fds 0, 1 and 2.
// Only pipes count: a terminal's number, and so its inode, is given again
// once it is closed, to another job's.
func (t *jobTree) notePipes(fds ...int) {
	for _, fd := range fds {
		if k, ok := pipeKeyOf(fd); ok && !slices.Contains(t.pipes, k) {
			t.pipes = append(t.pipes, k)
		}
	}
}

// remembered is a copy of the processes seen at the last look.
func (t *jobTree) remembered() map[int]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[int]uint64, len(t.seen))
	for pid, start := range t.seen {
		seen[pid] = start
	}
	return seen
}

// remember replaces what the tree remembers with the processes of a look.
func (t *jobTree) remember(members []procInfo) {
	seen := make(map[int]uint64, len(members))
	for _, p := range members {
		seen[p.pid] = p.start
	}
	t.mu.Lock()
	t.seen = seen
	t.mu.Unlock()
}

// procTable is one reading of every process in /proc, indexed the ways a
// job's tree is found.
type procTable struct {
	byPid     map[int]procInfo
	kids      map[int][]int // pid to its children's pids
	inGroup   map[int][]int // process group id to its members
	inSession map[int][]int // session id to its members
	selfPid   int
	isLeader  func(pid int) bool // a job's shell this process started and has not reaped
}

// newProcTable indexes procs (from procSnapshot).
func newProcTable(procs []procInfo) procTable {
	t := procTable{byPid: make(map[int]procInfo, len(procs)), kids: map[int][]int{}, inGroup: map[int][]int{},
		inSession: map[int][]int{}, selfPid: os.Getpid(), isLeader: children.tracks}
	for _, p := range procs {
		t.byPid[p.pid] = p
		t.kids[p.ppid] = append(t.kids[p.ppid], p.pid)
		t.inGroup[p.pgid] = append(t.inGroup[p.pgid], p.pid)
		t.inSession[p.sid] = append(t.inSession[p.sid], p.pid)
	}
	return t
}

// treeIn lists the processes of j's tree in table t, oldest pid first,
// and remembers them for the next look.
func (j *job) treeIn(t procTable) []procInfo {
	members := map[int]bool{}
	var queue []int
	add := func(pid int) {
		if pid != t.selfPid && !members[pid] {
			members[pid] = true
			queue = append(queue, pid)
		}
	}
	if j.ownsID(t) {
		add(j.pid)
		for _, pid := range t.inGroup[j.pid] {
			add(pid)
		}
		for _, pid := range t.inSession[j.pid] {
			add(pid)
		}
	}
	for pid, start := range j.tree.remembered() {
		if p, ok := t.byPid[pid]; ok && p.start == start {
			add(pid)
		}
	}
	below := func() {
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, kid := range t.kids[pid] {
				add(kid)
			}
		}
	}
	below()
	// Orphans of the server not linked yet: the pipe test reads their
	// descriptors, so it runs last and only for them.
	// A child forked for another job holds every pipe of the server
	// until its exec closes them: it is recorded as that job's shell
	// before a fork still under way lets the gate go (see childTable).
	for _, pid := range t.kids[t.selfPid] {
		if !members[pid] && pid != j.pid && !t.isLeader(pid) && holdsAny(pid, j.tree.pipes) && !children.tracksAfterForks(pid) {
			add(pid)
		}
	}
	below()
	found := make([]procInfo, 0, len(members))
	for pid := range members {
		if p, ok := t.byPid[pid]; ok {
			found = append(found, p)
		}
	}
	slices.SortFunc(found, func(a, b procInfo) int { return a.pid - b.pid })
	j.tree.remember(found)
	return found
}

// ownsID reports whether the processes in group or session j.pid are the
// job's. The kernel keeps a pid number from reuse while any process has it
// as its group or session id, so they are, unless the number already
// belongs to a new process: one alive under it once the job's shell is
// reaped, or another job's shell.
func (j *job) ownsID(t procTable) bool {
	if j.pid <= 0 {
		return false // never started: 0 is no group
	}
	_, there := t.byPid[j.pid]
	return !there || !j.terminal()
}

// idReused reports whether the job's pid already names a new process: its
// shell was reaped, and a process lives under that pid.
func (j *job) idReused() bool {
	if !j.terminal() {
		return false
	}
	_, there := procNow(j.pid)
	return there
}

// groupLive reports whether the job's process group has a member, zombies
// included.
func (j *job) groupLive() bool { return !j.idReused() && groupAlive(j.pid) }

// orphansReturn is set once this process is PID 1 or a child subreaper:
// every descendant is then below one of its children, and a shutdown
// sweep can follow its own process tree alone.
var orphansReturn atomic.Bool

// reach is what one kill or teardown goes after: the trees of jobs and,
// for a shutdown, every descendant of this process. It remembers every
// process a look found, to wait for each by pid and start time.
type reach struct {
	jobs       []*job
	everything bool           // also every descendant of this process
	known      map[int]uint64 // pid to start time of each process found and not yet seen gone
	sent       map[int]uint64 // those the current step has signalled
	grouped    bool           // the current step signalled the jobs' groups
}

// newReach returns a reach over jobs (and with everything over every
// descendant) that has found nothing yet. One goroutine uses it at a time.
func newReach(jobs []*job, everything bool) *reach {
	return &reach{jobs: jobs, everything: everything, known: map[int]uint64{}}
}

// look lists the processes reach goes after now, zombies included.
func (r *reach) look() []procInfo {
	found := map[int]procInfo{}
	if len(r.jobs) > 0 && (!r.everything || !orphansReturn.Load()) {
		t := newProcTable(procSnapshot())
		for _, j := range r.jobs {
			for _, p := range j.treeIn(t) {
				found[p.pid] = p
			}
		}
	}
	if r.everything {
		for _, p := range descendants(os.Getpid()) {
			found[p.pid] = p
		}
	}
	procs := make([]procInfo, 0, len(found))
	for _, p := range found {
		procs = append(procs, p)
		r.known[p.pid] = p.start
	}
	slices.SortFunc(procs, func(a, b procInfo) int { return a.pid - b.pid })
	return procs
}

// beginStep starts a new signal: every process may be sent it once.
func (r *reach) beginStep() { r.sent, r.grouped = map[int]uint64{}, false }

// send sends sig to the jobs' process groups (once a step) and to each of
// procs the step has not signalled yet that no group signal reached. A
// stopped process keeps a TERM pending until it runs again, so TERM is
// followed by CONT. It returns the first group signal's error other than
// the group being gone; single processes are best effort, as they may exit
// at any time.
func (r *reach) send(sig syscall.Signal, procs []procInfo) error {
	var first error
	groups := map[int]bool{}
	for _, j := range r.jobs {
		groups[j.pid] = true
		if !r.grouped && !j.idReused() {
			if err := j.signal(sig); err != nil && first == nil {
				first = err
			}
		}
	}
	for _, p := range procs {
		if start, ok := r.sent[p.pid]; ok && start == p.start {
			continue
		}
		r.sent[p.pid] = p.start
		if !r.grouped && groups[p.pgid] || p.state == "Z" {
			continue // the group signal reached it, or there is nothing left to signal
		}
		signalProcess(p, sig)
	}
	r.grouped = true
	return first
}

// signalProcess sends sig to p unless its pid now names another process.
func signalProcess(p procInfo, sig syscall.Signal) {
	if now, ok := procNow(p.pid); !ok || now.start != p.start {
		return // gone, or the pid was reused
	}
	for _, s := range []syscall.Signal{sig, syscall.SIGCONT} {
		if s == syscall.SIGCONT && sig != syscall.SIGTERM {
			break
		}
		for errors.Is(syscall.Kill(p.pid, s), syscall.EINTR) {
		}
		// ESRCH (it just exited) and EPERM (not ours to signal: it is
		// then reported as a survivor) leave nothing to do.
	}
}

// knownGone reports, without a whole look, whether every process found so
// far is gone and the jobs' groups are empty; with everything, whether
// this process has no child left. Cheap enough for every reap batch.
func (r *reach) knownGone() bool {
	if r.everything && orphansReturn.Load() {
		return !hasChildren()
	}
	for _, j := range r.jobs {
		if j.groupLive() {
			return false
		}
	}
	for pid, start := range r.known {
		if p, ok := procNow(pid); ok && p.start == start {
			return false
		}
		delete(r.known, pid) // gone, and its pid cannot bring it back
	}
	return !r.everything || !hasChildren()
}

// allGone reports whether a look that found left finds nothing at all.
func (r *reach) allGone(left []procInfo) bool {
	if len(left) > 0 {
		return false
	}
	for _, j := range r.jobs {
		if j.groupLive() {
			return false
		}
	}
	return !r.everything || !hasChildren()
}

// Sweeps look again on a backoff between these bounds, for processes
// forked since the last look (a process that keeps re-forking itself).
const (
	sweepLookFirstDuration = 10 * time.Millisecond
	sweepLookMaxDuration   = 200 * time.Millisecond
)

// sweepStep sends sig to everything reach finds and, until deadline, looks
// again and signals what is new, until a look finds nothing. It reports
// whether one did.
func (r *reach) sweepStep(sig syscall.Signal, deadline time.Time) bool {
	r.beginStep()
	_ = r.send(sig, r.look()) // best effort: what a signal misses is looked for again
	gap := sweepLookFirstDuration
	for {
		// Wait for what was found to go; a process forked since the
		// last look is not among it, so look again after gap anyway.
		lookAt := earlier(deadline, time.Now().Add(gap))
		looked := time.Now()
		awaitProcesses(r.knownGone, lookAt, nil)
		left := r.look()
		if r.allGone(left) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		_ = r.send(sig, left) // best effort, as above
		gap = min(2*gap, sweepLookMaxDuration)
		// A tree that re-forks as fast as it dies would have it look
		// without pause: not more often than the first gap.
		pauseUntil(earlier(deadline, looked.Add(sweepLookFirstDuration)))
	}
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pauseUntil returns at t.
func pauseUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d) // a rate limit, not a wait for an event
	}
}

// endTrees sends TERM to the trees of jobs (and with everything to every
// descendant of this process), gives them grace, then KILLs whatever is
// found, looking again on a backoff, until nothing is left or bound
// (from the start) passes. It returns what was left and how long it took.
func endTrees(jobs []*job, everything bool, grace, bound time.Duration) ([]procInfo, time.Duration) {
	began := time.Now()
	r := newReach(jobs, everything)
	if r.sweepStep(syscall.SIGTERM, began.Add(grace)) || r.sweepStep(syscall.SIGKILL, began.Add(bound)) {
		return nil, time.Since(began)
	}
	return alive(r.look()), time.Since(began)
}

// alive keeps those of procs that are alive now: the same process is
// still under its pid and is not a zombie this process will reap (its
// reaper collects them at once). A zombie of another parent stays: it is
// still there, and says so.
func alive(procs []procInfo) []procInfo {
	var left []procInfo
	self := os.Getpid()
	for _, p := range procs {
		now, ok := procNow(p.pid)
		if !ok || now.start != p.start || now.state == "Z" && now.ppid == self {
			continue
		}
		left = append(left, now)
	}
	return left
}
