package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A job's process may leave its cgroup: where the server and its jobs run
// as one user in a delegated tree, or as root, nothing stops it writing
// its pid into another cgroup.procs it can write (the delegated root, the
// server's leaf, another job's cgroup). The kernel offers no way to refuse
// that short of a cgroup namespace per job on a hierarchy mounted with
// nsdelegate, and even then root, or the owner of the files, can undo it.
// So the server finds such processes instead: every one is still below
// the server in the process tree, since the server is a child subreaper
// and an orphan comes back to it, and /proc/PID/cgroup says where it is.

// escaped lists, oldest pid first, the processes outside the box that are
// the job's (see escapes). It reads the server's whole process tree and
// each descendant's /proc/PID/cgroup, every call: a kill's look, not a
// sampler's.
func (b *cgroupBox) escaped() []procInfo {
	self := os.Getpid()
	return b.trees.escapes(self, descendants(self), b.trees.cgroupOf)[b]
}

// escapes attributes the server's descendants (procs, as descendants(self)
// read them; self is the server) that are outside a job's box to the jobs
// whose they are, for every live box at once:
//
//   - A process is the job's whose box holds its nearest ancestor that is
//     in any box: the kernel starts a child in its parent's cgroup, so a
//     process outside that box, or in another job's, left it (or its
//     parent did, after the fork) by a write to cgroup.procs. An
//     ancestor outside every box passes on its own attribution.
//   - A process outside every box whose ancestors are all outside every
//     box too (its parent exited, and it came back to the server as an
//     orphan) is linked to no job by the process tree any more: it is
//     every live job's that started before it did. That is too many, on
//     purpose: a kill that ends it with a job it was not started by ends a
//     process nothing could tell from that job's own, while one that
//     missed it would answer terminated: true with a process of the job
//     alive, which the contract forbids. A job that started after it
//     cannot have started it.
//
// A process in a job's box whose parent is in another job's box is named
// in both: which of the two moved, the kernel does not say. cgroupOf says
// which cgroup directory a pid is in (false: unknown, taken as outside
// every box, the safe side again). The lists are sorted by pid; a box
// with none is absent.
func (t *cgroupTrees) escapes(self int, procs []procInfo, cgroupOf func(pid int) (string, bool)) map[*cgroupBox][]procInfo {
	t.mu.Lock()
	boxes := make([]*cgroupBox, 0, len(t.boxes))
	byDir := make(map[string]*cgroupBox, len(t.boxes))
	for b := range t.boxes {
		boxes = append(boxes, b)
		byDir[b.dir] = b
	}
	t.mu.Unlock()
	if len(boxes) == 0 {
		return nil
	}
	home := make(map[int]*cgroupBox, len(procs)) // pid to the box it is in; nil: outside every box
	byPid := make(map[int]procInfo, len(procs))
	for _, p := range procs {
		if p.pid == self {
			continue
		}
		byPid[p.pid] = p
		if dir, ok := cgroupOf(p.pid); ok {
			home[p.pid] = t.boxAt(dir, byDir)
		}
	}
	owners := map[int][]*cgroupBox{} // pid to the jobs it is attributed to, once worked out
	var ownersOf func(p procInfo, depth int) []*cgroupBox
	ownersOf = func(p procInfo, depth int) []*cgroupBox {
		if o, done := owners[p.pid]; done {
			return o
		}
		var o []*cgroupBox
		parent, linked := byPid[p.ppid]
		switch {
		case linked && depth < len(procs) && home[parent.pid] != nil:
			o = []*cgroupBox{home[parent.pid]}
		case linked && depth < len(procs):
			o = ownersOf(parent, depth+1) // an ancestor outside every box: its jobs are this one's
		case home[p.pid] == nil:
			// Orphaned (its parent is the server, or exited), or a ring
			// an inconsistent reading of moving pids made.
			for _, b := range boxes {
				if b.start <= p.start {
					o = append(o, b)
				}
			}
		}
		owners[p.pid] = o
		return o
	}
	found := map[*cgroupBox][]procInfo{}
	for _, p := range byPid {
		for _, b := range ownersOf(p, 0) {
			if b != home[p.pid] {
				found[b] = append(found[b], p)
			}
		}
	}
	for b := range found {
		slices.SortFunc(found[b], func(x, y procInfo) int { return x.pid - y.pid })
	}
	return found
}

// boxAt is the live box whose directory is dir or holds it (a cgroup the
// job made below its own), or nil.
func (t *cgroupTrees) boxAt(dir string, byDir map[string]*cgroupBox) *cgroupBox {
	for below(dir, t.subtree) && dir != t.subtree {
		if b, ok := byDir[dir]; ok {
			return b
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// cgroupOf is the cgroup directory pid is in, from the "0::" line of its
// /proc/PID/cgroup (a path in this process's cgroup namespace, below the
// mount); false when it cannot be read: the process is gone, or the
// kernel shows it no cgroup v2.
func (t *cgroupTrees) cgroupOf(pid int) (string, bool) {
	b, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false // ENOENT, ESRCH: it exited meanwhile
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(t.mount, path), true
		}
	}
	return "", false
}
