package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// jobProcesses lists every process of this server's jobs, this process
// left out: the processes below it in the process tree (orphans come back
// to it, a subreaper, so a daemon a job left is still below it), and,
// where jobs have cgroups, every process in a cgroup under the server's
// subtree, nested ones too (a job may make cgroups of its own below its
// job's). A pid may be gone by the time the caller reads it.
//
// err says the list cannot be trusted: /proc cannot be read (a missing
// /proc would otherwise look like a server without jobs), or a cgroup of
// the subtree cannot be listed.
func jobProcesses() ([]int, error) {
	self := os.Getpid()
	if _, err := readDirNames("/proc/self/task"); err != nil {
		return nil, fmt.Errorf("reading /proc/self/task: %w", err)
	}
	seen := map[int]bool{self: true}
	var pids []int
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	for _, p := range descendants(self) {
		add(p.pid)
	}
	if dir := jobCgroupSubtree(); dir != "" {
		members, err := cgroupProcsBelow(dir)
		if err != nil {
			return nil, err
		}
		for _, pid := range members {
			add(pid)
		}
	}
	return pids, nil
}

// jobCgroupSubtree is the cgroup v2 directory every job's cgroup is made
// under, the server's own; "" when jobs are kept on process groups. It is
// set once at start (startTrees), before any connection is served.
func jobCgroupSubtree() string {
	if t, ok := jobTreesInForce().(*cgroupTrees); ok {
		return t.subtree
	}
	return ""
}

// cgroupProcsBelow lists the processes in cgroup dir and in every cgroup
// below it, from their cgroup.procs files. A cgroup removed while it is
// read holds none; one that cannot be read otherwise is an error.
func cgroupProcsBelow(dir string) ([]int, error) {
	var pids []int
	for todo := []string{dir}; len(todo) > 0; {
		d := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		b, err := readProcFile(filepath.Join(d, "cgroup.procs"))
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV):
			continue // removed meanwhile (a job's cgroup at its end)
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", filepath.Join(d, "cgroup.procs"), err)
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		entries, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("listing %s: %w", d, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				todo = append(todo, filepath.Join(d, e.Name()))
			}
		}
	}
	return pids, nil
}
