package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCgroupProcsBelowReadsNestedCgroups: the processes of a cgroup and
// of every cgroup below it are listed, a job's own nested cgroups
// included; a missing cgroup holds none.
func TestCgroupProcsBelowReadsNestedCgroups(t *testing.T) {
	root := t.TempDir()
	for dir, procs := range map[string]string{"": "", "job-1": "11\n12\n", "job-1/inner": "13\n", "job-2": "", "server": "1\n"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := cgroupProcsBelow(root)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []int{1, 11, 12, 13}) {
		t.Errorf("cgroupProcsBelow = %v, %v; want [1 11 12 13]", got, err)
	}
	if got, err := cgroupProcsBelow(filepath.Join(root, "gone")); err != nil || len(got) != 0 {
		t.Errorf("a cgroup removed meanwhile: %v, %v; want none", got, err)
	}
}

// TestJobProcessesAreBelowTheServer: a child of this process (a job's,
// as the server sees it) is one of the jobs' processes; this process is
// not.
func TestJobProcessesAreBelowTheServer(t *testing.T) {
	t.Parallel()
	child := startSocketChild(t, holdMode, "")
	pids, err := jobProcesses()
	if err != nil || !slices.Contains(pids, child.pid) || slices.Contains(pids, os.Getpid()) {
		t.Errorf("jobProcesses = %v, %v; want %d in it and not %d", pids, err, child.pid, os.Getpid())
	}
}
