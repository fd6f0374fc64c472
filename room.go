// Whether there is room for another job: the slots MCP_EXEC_MAX_JOBS
// counts across sessions, and the descriptors and processes the system
// has left.

package main

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// jobSlots counts running jobs across sessions, for MCP_EXEC_MAX_JOBS.
type jobSlots struct {
	running atomic.Int64 // jobs started and not finished, in every session sharing it
}

// take takes a slot if fewer than most (0: no limit) are taken; a nil
// jobSlots always has room.
func (s *jobSlots) take(most int) (ok bool, seen int64) {
	if s == nil {
		return true, 0
	}
	for {
		n := s.running.Load()
		if most > 0 && n >= int64(most) {
			return false, n
		}
		if s.running.CompareAndSwap(n, n+1) {
			return true, n + 1
		}
	}
}

// takeAnyway takes a slot whatever the limit: for a job that already ran
// and whose tree still does.
func (s *jobSlots) takeAnyway() {
	if s != nil {
		s.running.Add(1)
	}
}

// give returns a slot taken.
func (s *jobSlots) give() {
	if s != nil {
		s.running.Add(-1)
	}
}

// count is how many slots are taken.
func (s *jobSlots) count() int64 {
	if s == nil {
		return 0
	}
	return s.running.Load()
}

// fdReserve is how many descriptors jobs leave to the server's own work.
func fdReserve(limit int) int { return max(64, limit/32) }

// fdsExhausted is the refusal of a job for want of descriptors: what is in
// use, of what limit, and what to do. The limit is read again: the one
// read at start may no longer be the one in force. With no descriptor
// left even /proc/self/fd cannot be listed, and the text says so instead
// of a count.
func fdsExhausted(limit int) error {
	if now := fdSoftLimit(); now > 0 {
		limit = now
	}
	inUse := "all but a few"
	if n := countOpenFds(); n >= 0 {
		inUse = strconv.Itoa(n)
	}
	return fmt.Errorf("%w: %s of %d file descriptors are in use (%d jobs hold pipes; %d stay reserved for the server); wait for or kill jobs, or raise the limit (ulimit -n)",
		errExhausted, inUse, limit, jobsRunning(), fdReserve(limit))
}

// processesExhausted is the refusal of a job for want of processes: the
// system would not fork, or the server keeps the rest for its threads.
func processesExhausted(err error) error {
	var lim syscall.Rlimit
	nproc := "unknown"
	if syscall.Getrlimit(rlimitNproc, &lim) == nil {
		nproc = strconv.FormatUint(lim.Cur, 10)
	}
	return fmt.Errorf("%w: the process limit is reached (%v; RLIMIT_NPROC is %s%s); wait for or kill jobs, or raise the limit",
		errExhausted, err, nproc, pidsMaxWords())
}

// fdLimit and nprocLimit are read once: they bind the whole process, and
// spawning a job should not cost a getrlimit each.
var (
	fdLimit    = sync.OnceValue(fdSoftLimit)
	nprocLimit = sync.OnceValue(nprocSoftLimit)
)

// processReserve is how many of RLIMIT_NPROC jobs leave to the server's own
// threads: the Go runtime cannot run without a new thread when it needs
// one, and a process limit counts threads.
const processReserve = 16

// processRoom refuses a job (errExhausted) when RLIMIT_NPROC binds this
// process (not root) and its threads and running jobs come within the
// reserve of it, or when its cgroup's pids.max is as near: every task in
// the cgroup counts there, the jobs' children too. Other processes of the
// same user count toward RLIMIT_NPROC too and are not seen here: a fork
// the system refuses is the same refusal.
func processRoom() error {
	if limit := nprocLimit(); limit > 0 {
		if used := int64(threadsOfSelf()) + jobsRunning(); used >= int64(limit-processReserve) {
			return processesExhausted(fmt.Errorf("%d threads and jobs of this server, %d kept for its own threads", used, processReserve))
		}
	}
	if used, most, ok := pidsUsage(); ok && used >= most-processReserve {
		return processesExhausted(fmt.Errorf("%d of the cgroup's %d tasks are in use, %d kept for this server's own threads", used, most, processReserve))
	}
	return nil
}

// jobsRunning is how many jobs of every session run now.
func jobsRunning() int64 { return jobsStarted.Load() - jobsFinished.Load() - jobsFailedToStart.Load() }
