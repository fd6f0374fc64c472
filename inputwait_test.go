package main

import "testing"

// TestInputLookReadsOnlyTheJobsProcesses: looking whether a job waits for
// input reads its own process tree, not all of /proc. It once scanned every
// process on each status and output call, and the garbage took the memory
// bench from 1.04 to 1.58 of its floor.
func TestInputLookReadsOnlyTheJobsProcesses(t *testing.T) {
	onLinux(t) // not parallel: AllocsPerRun counts the whole process's allocations
	reg := newRegistry(testConfig())
	var others []*job
	for i := 0; i < 60; i++ {
		others = append(others, startJob(t, reg, "exec sleep 60")) // processes a look must skip
	}
	j := startJob(t, reg, "exec sleep 60")
	for _, o := range append(others, j) {
		waitForSleeps(t, o.pid, 1)
	}
	if allocs := testing.AllocsPerRun(20, func() { j.waitingForInput() }); allocs > 400 {
		t.Errorf("a look at one job allocates %.0f times; it reads more than the job's processes", allocs)
	}
}
