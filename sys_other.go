//go:build !linux

package main

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// Real-time signals are Linux's; zero says there are none.
const (
	realtimeFirst syscall.Signal = 0
	realtimeMin   syscall.Signal = 0
	realtimeMax   syscall.Signal = 0
)

// pipeHungUp is never sure here: a finished job's pipes are settled the
// slower way (awaitSettled), which holds everywhere.
func pipeHungUp(int) bool { return false }

// pipeUnread cannot tell here: a pipe counts as read to its end.
func pipeUnread(int) int { return 0 }

// jobPipeEnds creates a job's pipe, both ends close-on-exec: ours
// non-blocking, for the runtime poller, and the child's blocking;
// childReads says which end is the child's.
func jobPipeEnds(childReads bool) (child, ours int, err error) {
	fds, err := pipeCloseOnExec()
	if err != nil {
		return -1, -1, err
	}
	child, ours = fds[1], fds[0]
	if childReads {
		child, ours = fds[0], fds[1]
	}
	if err := syscall.SetNonblock(ours, true); err != nil {
		_ = syscall.Close(fds[0]) // best effort: cleaning up
		_ = syscall.Close(fds[1])
		return -1, -1, err
	}
	return child, ours, nil
}

// pipeCloseOnExec creates a pipe whose ends are close-on-exec. Without
// pipe2, ForkLock keeps a concurrent fork from inheriting them in between.
func pipeCloseOnExec() ([2]int, error) {
	var fds [2]int
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := syscall.Pipe(fds[:]); err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}

// becomeSubreaper is Linux-only; elsewhere orphans go to the system's init.
func becomeSubreaper() (bool, error) { return false, nil }

// closeInheritedOnExec marks every descriptor above 2 close-on-exec, so the
// descriptors our own parent leaked to us never reach a job.
func closeInheritedOnExec() { cloexecListed("/dev/fd") }

// sessionMembers lists nothing: there is no /proc to read.
func sessionMembers(id int) []procInfo { return nil }

// descendants needs /proc; without it shutdown relies on group signals.
func descendants(pid int) []procInfo { return nil }

// hasChildren needs waitid's peek; without it shutdown relies on group
// signals, as descendants knows none.
func hasChildren() bool { return false }

// countOpenFds counts open descriptors through /dev/fd.
func countOpenFds() int {
	entries, err := os.ReadDir("/dev/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1
}

// residentKiB needs /proc; -1 says unknown.
func residentKiB() int { return -1 }

// blockedReading needs /proc; elsewhere no job is seen waiting for input.
func blockedReading(members []procInfo, end inputEnd, session int) (pid int, runs uint64, ok bool) {
	return 0, 0, false
}

// blockedReadingAfter needs /proc, as blockedReading does.
func blockedReadingAfter(members []procInfo, end inputEnd, session int, began func(procInfo) bool) (pid int, ok bool) {
	return 0, false
}

// bytesRead is not kept here.
func bytesRead(pid int) (uint64, bool) { return 0, false }

// processTree needs /proc; elsewhere it knows no processes.
func processTree(pid int) []procInfo { return nil }

// processGroups needs /proc; elsewhere it knows no processes.
func processGroups() map[int][]procInfo { return nil }

// openPath needs /proc; elsewhere an open file's path is not known.
func openPath(fd int) (string, bool) { return "", false }

// maxRSSKiB is a child's peak resident set from its rusage; macOS counts
// it in bytes.
func maxRSSKiB(ru *syscall.Rusage) int64 { return int64(ru.Maxrss) / 1024 }

// hideFromJobs does nothing here: there is no /proc to hide.
func hideFromJobs(secret string, undumpable bool) error { return nil }

// openPTY is not built here.
func openPTY(rows, cols uint16) (*os.File, int, error) {
	return nil, -1, errors.New("terminal mode (tty) is built only for Linux")
}

// rlimitNproc is RLIMIT_NPROC.
const rlimitNproc = 7

// pidsMaxWords says nothing: there are no cgroups here.
func pidsMaxWords() string { return "" }

// pidsUsage is unknown here: no cgroups.
func pidsUsage() (used, most int64, ok bool) { return 0, 0, false }

// availableMemory is unknown here: no bound by default.
func availableMemory() int64 { return 0 }

// nprocSoftLimit is unknown here: no reserve is kept.
func nprocSoftLimit() int { return 0 }

// threadsOfSelf is unknown here.
func threadsOfSelf() int { return 0 }

// onMainThread cannot tell here; nothing restricts a thread on this system.
func onMainThread() bool { return false }

// procSnapshot needs /proc; elsewhere a job's tree is its process group.
func procSnapshot() []procInfo { return nil }

// environHas needs /proc; elsewhere no process is found by its environment.
func environHas(int, string) bool { return false }

// ticksAt has no /proc start times to match: 0.
func ticksAt(time.Time) uint64 { return 0 }

// procNow cannot read a process's start time without /proc: it reports
// whether pid exists, with a zero start time, as the looks here record.
func procNow(pid int) (procInfo, bool) {
	err := syscall.Kill(pid, 0)
	return procInfo{pid: pid}, err == nil || errors.Is(err, syscall.EPERM)
}

// holdsAny needs /proc to read another process's descriptors.
func holdsAny(pid int, files []fileKey) bool { return false }

// openUnlinked opens a new file in dir, mode 0600, named only until it is
// unlinked, at once.
func openUnlinked(dir string) (*os.File, error) { return openThenUnlink(dir) }

// punchHole is Linux's: elsewhere the blocks of given-up bytes are freed
// only when the file is closed.
func punchHole(f *os.File, off, n int64) error { return nil }

// freeBytes is the space an unprivileged user may still fill where path
// is (0 when it cannot be read).
func freeBytes(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// stdinIsTerminal is false here: the hint for a person at a terminal is
// given on Linux only.
func stdinIsTerminal() bool { return false }
