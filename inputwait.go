// Seeing a job wait for input: a process blocked reading its stdin pipe.

package main

import "time"

// inputWaitDuration is how long a process must have been blocked reading
// its job's stdin for the job to count as waiting for input.
const inputWaitDuration = time.Second

// inputProbeInterval is how often a blocked call looks for input wanted.
const inputProbeInterval = 250 * time.Millisecond

// lookAtMostJobs bounds the jobs a blocked wait looks at for input wanted:
// a look reads /proc, and a wait on a thousand jobs is a fan-in, not a
// conversation.
const lookAtMostJobs = 16

// waitingForInput looks at j's processes now and reports whether one has
// been blocked reading j's stdin, without running in between, for at least
// inputWaitDuration as far as the looks so far can tell: the first look
// that finds a reader only starts the clock. It reads /proc, so only calls
// that report or wait on it look.
func (j *job) waitingForInput() bool {
	if j.terminal() || j.stdinIno == 0 {
		return false
	}
	return j.waitingForInputAmong(processTree(j.pid))
}

// seenWaiting reports whether j might be waiting for input without looking
// at /proc: a look has seen a reader that it has not seen go since. Only
// such a job can be waiting for input by a look now.
func (j *job) seenWaiting() bool {
	j.inputMu.Lock()
	defer j.inputMu.Unlock()
	return j.sighting.pid != 0
}

// waitingForInputSeen is waitingForInput for a job a look has already seen
// reading, and false without a look for any other: cheap for many jobs.
func (j *job) waitingForInputSeen() bool {
	return j.seenWaiting() && j.waitingForInput()
}

// waitingForInputAmong is waitingForInput with the job's processes already
// listed (members: its process tree, or its group from one pass over /proc
// for many jobs).
func (j *job) waitingForInputAmong(members []procInfo) bool {
	if j.terminal() || j.stdinIno == 0 {
		return false
	}
	pid, runs, blocked := blockedReading(members, j.stdinIno)
	now := time.Now()
	j.inputMu.Lock()
	defer j.inputMu.Unlock()
	switch {
	case !blocked:
		j.sighting = inputSighting{}
		return false
	case j.sighting.pid != pid || j.sighting.runs != runs:
		j.sighting = inputSighting{pid: pid, runs: runs, since: now}
		return false
	}
	return now.Sub(j.sighting.since) >= inputWaitDuration
}

// anyWaitingForInput looks at every running one of jobs and reports
// whether one waits for input.
func anyWaitingForInput(jobs []*job) bool {
	waiting := false
	for _, j := range jobs {
		if j.waitingForInput() {
			waiting = true
		}
	}
	return waiting
}
