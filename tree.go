// Which processes a job has beyond its process group, as /proc shows
// them: what the server keeps of each job to find them (its pipes, the
// processes a look found), and one reading of every process, indexed.

package main

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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
	mark  string    // "NAME=value" its processes start with when it stays in reach (see markTree); set before the spawn

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

// treeMarkVariable names the variable the processes of a job that stays
// in reach start with. On process groups nothing else ties a setsid
// daemon to the job it left once it has come back to this process, so an
// orphan is claimed by the job whose mark its environment carries. Job ids
// are per session, so the mark is a number of its own, unique in this
// server.
const treeMarkVariable = "MCP_EXEC_JOB_MARK"

// treeMarks counts the marks given, for markTree.
var treeMarks atomic.Uint64

// markTree gives t a mark of its own and returns it as the variable and
// value its job's environment gets. Called once, before the spawn.
func (t *jobTree) markTree() map[string]string {
	value := strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(treeMarks.Add(1), 10)
	t.mark = treeMarkVariable + "=" + value
	return map[string]string{treeMarkVariable: value}
}

// orphansOf lists the processes that came back to this process as
// orphans (a setsid daemon, a double fork), started at or after ticks
// (clock ticks since boot) and with mark (a jobTree's) in their
// environment, with everything below them: not a job's shell, nor a child
// a fork under way is making. An orphan that cleared or rewrote its
// environment (env -i) is not found.
func orphansOf(mark string, ticks uint64) []procInfo {
	if !orphansReturn.Load() || ticks == 0 || mark == "" {
		return nil
	}
	t := newProcTable(procSnapshot())
	var found []procInfo
	queue := []int{}
	for _, pid := range t.kids[t.selfPid] {
		if p := t.byPid[pid]; p.start >= ticks && !children.tracksAfterForks(pid) && environHas(pid, mark) {
			queue = append(queue, pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		found = append(found, t.byPid[pid])
		queue = append(queue, t.kids[pid]...)
	}
	return found
}

// orphansReturn is set once this process is PID 1 or a child subreaper:
// every descendant is then below one of its children, and a shutdown
// sweep can follow its own process tree alone.
var orphansReturn atomic.Bool

// groupSurvivors lists the processes alive in group or session id after
// its leader (a job's shell) exited. Members are forked only from members,
// so where orphans return to this process every one is below it, and only
// its own tree is read, not every process's /proc.
func groupSurvivors(id int) []procInfo {
	if !orphansReturn.Load() {
		return sessionMembers(id)
	}
	var found []procInfo
	for _, p := range descendants(os.Getpid()) {
		if p.pgid == id || p.sid == id {
			found = append(found, p)
		}
	}
	return found
}
