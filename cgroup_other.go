//go:build !linux

package main

import "syscall"

// intoCgroup is Linux's (clone3 CLONE_INTO_CGROUP): elsewhere no job has
// a cgroup, so it is never asked for.
func intoCgroup(sys *syscall.SysProcAttr, fd int) {}

// cgroupChanged never closes: without cgroups nothing is watched.
func cgroupChanged() <-chan struct{} { return nil }

// openJobTrees keeps jobs on process groups: cgroups are Linux's.
func openJobTrees(mode string, limits jobLimits) (jobTrees, string, error) {
	why := "cgroups are Linux's"
	if mode == cgroupOff {
		why = "MCP_EXEC_CGROUP=off"
	}
	return groupTrees{}, why, refuseLimitsWithout(limits, why)
}

// probeTreeKind is process groups: cgroups are Linux's.
func probeTreeKind(mode string) string { return treeProcessGroup }
