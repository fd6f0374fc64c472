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

// inputReadsMark is where a job's reading stood as a write to its input
// was about to be made (inputReadsMarkOf): the bytes each of its
// processes had read, and its output total.
//
// The answer to the write is that the job reads again: a process of it
// blocked reading its input in a wait it began after it took input since
// the mark (readsAgainSince). The wait a process slept in as the bytes
// came is no answer, though a look finds it there until the kernel has
// woken the process for them (a terminal's input reaches its reader from
// a kernel worker, after the write returned): a REPL about to read exit()
// and exit is not waiting for input. Whether a look before the write saw
// it there (none does if it got there just after that look), or how
// often it woke in it since (a REPL polling with a time-out wakes ten
// times a second), cannot tell that wait from a new one; input taken
// since can.
type inputReadsMark struct {
	procs  map[int]readCount // by pid, the job's processes at the mark
	output int64             // the job's output bytes at the mark
	wrote  uint64            // the bytes the write after the mark gives it
}

// readCount is what one process had read (bytesRead) at a mark: start
// tells a reused pid, and known is false where the count could not be
// read.
type readCount struct {
	start uint64
	bytes uint64
	known bool
}

// inputReadsMarkOf is where j's reading stands now, for a write to its
// input about to be made: taken as late before the write as the caller
// can, since input taken between the two counts as taken after it.
func inputReadsMarkOf(j *job, wrote int) inputReadsMark {
	mark := inputReadsMark{output: writtenBytes(j), wrote: uint64(max(wrote, 0))}
	if j.terminal() || j.inputEnd.ino == 0 {
		return mark
	}
	members := processTree(j.pid)
	mark.procs = make(map[int]readCount, len(members))
	for _, p := range members {
		n, known := bytesRead(p.pid)
		mark.procs[p.pid] = readCount{start: p.start, bytes: n, known: known}
	}
	return mark
}

// readsAgainSince reports whether a process of j is blocked reading its
// input in a wait it began after mark: one that has read bytes since the
// mark, at least as many as the write gave, (any process the mark does not hold: it started later), found
// asleep waiting on the input after its count was read, so the wait came
// after that read. Where a count cannot be read, output since the mark
// stands in for the read: the job ran after the write. A process not yet
// woken for the write's bytes, or that took them and is exiting, is never
// reading again.
func (j *job) readsAgainSince(mark inputReadsMark) bool {
	if j.terminal() || j.inputEnd.ino == 0 {
		return false
	}
	printed := writtenBytes(j) > mark.output // before any wait is looked at
	_, ok := blockedReadingAfter(processTree(j.pid), j.inputEnd, j.pid, func(p procInfo) bool {
		then, held := mark.procs[p.pid]
		if !held || then.start != p.start { // started after the mark: all it read came later
			then = readCount{start: p.start, known: true}
		}
		now, known := bytesRead(p.pid)
		if !known || !then.known {
			return printed
		}
		// All of the write must be taken: a terminal hands a line over
		// in pieces, and a REPL that took the first one blocks reading
		// the rest, which is no new prompt.
		return now > then.bytes && now-then.bytes >= mark.wrote
	})
	return ok
}

// writtenBytes is the bytes j has written to both its streams, as
// outputBytes counts them a layer up.
func writtenBytes(j *job) int64 {
	_, out := j.stdout.stats()
	_, errb := j.stderr.stats()
	return out + errb
}
