// Seeing a job wait for input: a process blocked reading its stdin pipe, or
// its terminal, or sleeping in a poll, select or epoll wait whose set holds
// it (blockedReading); one waiting on other descriptors only is not.

package main

import "time"

// inputWaitDuration is how long a job must have waited, its process blocked
// reading its input, for the job to count as waiting for input. main sets
// it once from MCP_EXEC_INPUT_WAIT_MS (default 1 s), before any job starts:
// read without a lock from then on.
var inputWaitDuration = time.Second

// inputProbeInterval is how often a blocked call looks for input wanted.
const inputProbeInterval = 250 * time.Millisecond

// lookAtMostJobs bounds the jobs a blocked wait looks at for input wanted:
// a look reads /proc, and a wait on a thousand jobs is a fan-in, not a
// conversation.
const lookAtMostJobs = 16

// waitingForInput looks at j's processes now and reports whether one waits
// for input: it is blocked reading j's input (its stdin pipe or terminal),
// and it has waited inputWaitDuration. A job with prompts knows that from
// this one look when it has been silent that long (silentFor); for any job,
// looks that saw the same process blocked, not run in between, that long
// apart know it too (the first look that finds a reader starts that clock).
// It reads /proc, so only calls that report or wait on it look.
func (j *job) waitingForInput() bool {
	if j.terminal() || j.inputEnd.ino == 0 {
		return false
	}
	return j.waitingForInputAmong(processTree(j.pid))
}

// seenWaiting reports whether j might be waiting for input without looking
// at /proc: a look has seen a reader that it has not seen go since.
func (j *job) seenWaiting() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sighting.pid != 0
}

// waitingForInputSeen is waitingForInput for a job a look has already seen
// reading, and false without a look for any other: cheap for many jobs.
func (j *job) waitingForInputSeen() bool {
	return j.seenWaiting() && j.waitingForInput()
}

// waitingForInputAtOnce is waitingForInput for a job that can be waiting by
// one look: one a look has seen reading, or one with prompts silent for
// inputWaitDuration; false without a look for any other. A reply on a job
// asked for once uses it: a busy job costs no look at /proc.
func (j *job) waitingForInputAtOnce() bool {
	if j.terminal() || j.inputEnd.ino == 0 {
		return false
	}
	if j.seenWaiting() || (j.prompts && j.silentFor(time.Now()) >= inputWaitDuration) {
		return j.waitingForInput()
	}
	return false
}

// waitingForInputAmong is waitingForInput with the job's processes already
// listed (members: its process tree, or its group from one pass over /proc
// for many jobs).
func (j *job) waitingForInputAmong(members []procInfo) bool {
	if j.terminal() || j.inputEnd.ino == 0 {
		return false
	}
	pid, runs, blocked := blockedReading(members, j.inputEnd, j.pid)
	now := time.Now()
	silent := j.prompts && j.silentFor(now) >= inputWaitDuration
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case !blocked:
		j.sighting = inputSighting{}
		return false
	case j.sighting.pid != pid || j.sighting.runs != runs:
		j.sighting = inputSighting{pid: pid, runs: runs, since: now}
		return silent
	}
	// Still silent or not: a job can write progress from one process while
	// another waits for a line.
	return silent || now.Sub(j.sighting.since) >= inputWaitDuration
}

// silentFor is how long j has gone, by the server's own clocks, without
// writing output or being written input, and since it started. A process
// found blocked reading after that long has had nothing to read for it.
// Only for a job that started (its pumps and stdin exist).
func (j *job) silentFor(now time.Time) time.Duration {
	silent := now.Sub(j.started)
	for _, s := range [...]*stamp{&j.stdoutPump.lastData, &j.errPump.lastData, &j.stdin.lastWrite} {
		if ago, ok := s.since(now); ok {
			silent = min(silent, ago)
		}
	}
	return silent
}

// nextInputLook is when a blocked call next looks for input wanted: an
// interval from now, or sooner when a job with prompts, blocked or not,
// will then have been silent inputWaitDuration, so a prompt is seen about
// a second after it was written rather than up to an interval later.
func nextInputLook(jobs []*job, now time.Time) time.Time {
	next := now.Add(inputProbeInterval)
	for _, j := range jobs {
		if !j.prompts || j.terminal() {
			continue
		}
		if left := inputWaitDuration - j.silentFor(now); left > 0 && now.Add(left+inputLookSlack).Before(next) {
			next = now.Add(left + inputLookSlack)
		}
	}
	return next
}

// inputLookSlack is how long after a job's silence reaches
// inputWaitDuration a look is made: past the edge, not on it.
const inputLookSlack = 10 * time.Millisecond

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
