// Seeing what a process waits on: the descriptor, or the set of them, that
// the system call it sleeps in waits to become readable, read from /proc.

package main

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// blockedReading finds one of members (a job's processes) that is asleep
// waiting to read end (in a read of it, or a poll, select or epoll wait
// whose set holds it: readsFrom.waitingOn), and returns its pid and how
// often it has run (from /proc/PID/schedstat): an unchanged count later
// means it never woke in between. A terminal's end is also read through /dev/tty by the members of
// session, the one it controls. It reports false when none is, or /proc
// cannot tell.
func blockedReading(members []procInfo, end inputEnd, session int) (pid int, runs uint64, ok bool) {
	if pid, ok = blockedReadingAfter(members, end, session, nil); ok {
		runs = scheduledRuns(pid)
	}
	return pid, runs, ok
}

// blockedReadingAfter is blockedReading for members that pass began first
// (nil: all do). began is asked before the member's wait is looked at, so
// what it reads of the member (bytesRead) comes from before the wait it
// is then found in: input the member took by then it took before that
// wait began.
func blockedReadingAfter(members []procInfo, end inputEnd, session int, began func(procInfo) bool) (pid int, ok bool) {
	for _, p := range members {
		if p.state != "S" || (began != nil && !began(p)) {
			continue
		}
		reads := readsFrom{dir: "/proc/" + strconv.Itoa(p.pid), end: end, controls: end.terminal && p.sid == session}
		if reads.waitingOn() {
			return p.pid, true
		}
	}
	return 0, false
}

// bytesRead is how many bytes the main thread of process pid has read
// (rchar of /proc/PID/task/PID/io, from any descriptor, by read, readv,
// pread and the like), the thread whose system call /proc/PID/syscall
// shows. It only grows, and only when a read takes bytes: a wait (poll,
// select, epoll) that wakes and sleeps again, or a read that times out
// or is interrupted, leaves it, so a rise says the thread took input, not
// only that it ran. False when the kernel keeps no count or the process
// cannot be looked at.
func bytesRead(pid int) (uint64, bool) {
	id := strconv.Itoa(pid)
	b, err := readProcFile("/proc/" + id + "/task/" + id + "/io")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readsFrom tells whether a descriptor of the process at dir is end.
type readsFrom struct {
	dir      string
	end      inputEnd
	controls bool // end is the process's controlling terminal: /dev/tty is end too
}

// devTTY is the device number of /dev/tty (major 5, minor 0), which stands
// for a process's controlling terminal.
var devTTY = unix.Mkdev(5, 0)

// at reports whether descriptor fd is the end, or /dev/tty standing for it.
func (r readsFrom) at(fd int64) bool {
	st, ok := r.stat(fd)
	return ok && r.is(st)
}

// stat stats the file open at descriptor fd of the process.
func (r readsFrom) stat(fd int64) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Stat(r.dir+"/fd/"+strconv.FormatInt(fd, 10), &st)
	return st, err == nil
}

// is reports whether the file st describes is the end, or /dev/tty
// standing for it.
func (r readsFrom) is(st unix.Stat_t) bool {
	if uint64(st.Dev) == r.end.dev && uint64(st.Ino) == r.end.ino {
		return true
	}
	return r.controls && st.Mode&unix.S_IFMT == unix.S_IFCHR && uint64(st.Rdev) == devTTY
}

// waitKind says where a waiting system call keeps the descriptors it waits
// to read from.
type waitKind int

const (
	waitRead   waitKind = iota + 1 // read, readv, pread64: the descriptor is the first argument
	waitPoll                       // poll, ppoll: an array of struct pollfd and its length
	waitSelect                     // select, pselect6: a count and a read fd_set
	waitEpoll                      // the epoll waits: an epoll descriptor, whose fdinfo lists what it watches
)

// waitCalls are the system calls, by number, that every Linux architecture
// has and a process sleeps in while it waits to read.
var waitCalls = map[int]waitKind{
	unix.SYS_READ: waitRead, unix.SYS_READV: waitRead, unix.SYS_PREAD64: waitRead,
	unix.SYS_PPOLL:       waitPoll,
	unix.SYS_PSELECT6:    waitSelect,
	unix.SYS_EPOLL_PWAIT: waitEpoll, unix.SYS_EPOLL_PWAIT2: waitEpoll,
}

// legacyWaitCalls are the older waiting calls only some architectures keep
// (arm64, riscv64 and loong64 have none), by GOARCH; numbers as the
// kernel's tables give them.
var legacyWaitCalls = map[string]map[int]waitKind{
	"amd64": {7: waitPoll, 23: waitSelect, 232: waitEpoll}, // poll, select, epoll_wait
}

// waitKindOf is the kind of waiting system call nr on this architecture,
// or 0 when nr is not one.
func waitKindOf(nr int) waitKind {
	if k, ok := waitCalls[nr]; ok {
		return k
	}
	return legacyWaitCalls[runtime.GOARCH][nr]
}

// maxWaitSetFds bounds the descriptors of one poll or select set looked
// at: a process waiting on its terminal watches a handful, and each costs
// a stat of /proc/PID/fd/N.
const maxWaitSetFds = 1024

// waitCall is the system call a process sleeps in, as /proc/PID/syscall
// shows it: its number and arguments, and the whole line (which also holds
// the stack and instruction pointers) to tell a later look at another call.
type waitCall struct {
	nr   int
	args [6]uint64
	line string
}

// readWaitCall reads the system call the process at dir sleeps in; false
// when it runs, sleeps outside a system call, or cannot be read.
func readWaitCall(dir string) (waitCall, bool) {
	b, err := readProcFile(dir + "/syscall")
	if err != nil {
		return waitCall{}, false
	}
	fields := strings.Fields(string(b))
	if len(fields) < 7 {
		return waitCall{}, false // "running", "-1 SP PC", or no permission to look
	}
	call := waitCall{line: strings.Join(fields, " ")}
	if call.nr, err = strconv.Atoi(fields[0]); err != nil || call.nr < 0 {
		return waitCall{}, false
	}
	for i := range call.args {
		if call.args[i], err = strconv.ParseUint(strings.TrimPrefix(fields[1+i], "0x"), 16, 64); err != nil {
			return waitCall{}, false
		}
	}
	return call, true
}

// waitingOn reports whether the process at r.dir sleeps waiting to read
// r.end: in a read of it, or in a poll, select or epoll wait whose set
// holds it for reading. A set that cannot be read (no permission, a short
// read, the process gone) holds nothing, and a set counts only when the
// process still sleeps in the same call after it was read, so a set torn
// by the process moving on is never taken for the call's.
func (r readsFrom) waitingOn() bool {
	call, ok := readWaitCall(r.dir)
	if !ok {
		return false
	}
	switch waitKindOf(call.nr) {
	case waitRead:
		return r.at(int64(call.args[0]))
	case waitPoll:
		return r.polls(call) && r.stillIn(call)
	case waitSelect:
		return r.selects(call) && r.stillIn(call)
	case waitEpoll:
		return r.watchedBy(int64(call.args[0])) && r.stillIn(call)
	}
	return false
}

// stillIn reports whether the process at r.dir still sleeps in call.
func (r readsFrom) stillIn(call waitCall) bool {
	again, ok := readWaitCall(r.dir)
	return ok && again.line == call.line
}

// pollReadEvents are the poll events that ask for input: POLLIN, POLLPRI,
// and POLLRDNORM and POLLRDBAND (0x40 and 0x80, which the unix package
// does not name).
const pollReadEvents = unix.POLLIN | unix.POLLPRI | 0x40 | 0x80

// polls reports whether the pollfd array of a poll or ppoll call (address,
// count) asks for input from the end; only the first maxWaitSetFds entries
// are read.
func (r readsFrom) polls(call waitCall) bool {
	const entryBytes = 8 // struct pollfd: int fd; short events, revents
	n := min(call.args[1], maxWaitSetFds)
	set, ok := readMemory(r.dir, call.args[0], int(n)*entryBytes)
	if !ok {
		return false
	}
	for i := 0; i+entryBytes <= len(set); i += entryBytes {
		fd := int32(binary.NativeEndian.Uint32(set[i:]))
		events := binary.NativeEndian.Uint16(set[i+4:])
		if fd >= 0 && events&pollReadEvents != 0 && r.at(int64(fd)) {
			return true
		}
	}
	return false
}

// selects reports whether the read fd_set of a select or pselect6 call
// (count, address) holds the end; only descriptors below maxWaitSetFds are
// looked at. An fd_set is an array of longs, descriptor d bit d%64 of long
// d/64 (on a 64-bit system).
func (r readsFrom) selects(call waitCall) bool {
	n := min(call.args[0], maxWaitSetFds)
	words := (int(n) + bits.UintSize - 1) / bits.UintSize
	set, ok := readMemory(r.dir, call.args[1], words*bits.UintSize/8)
	if !ok {
		return false
	}
	for w := 0; w < words; w++ {
		word := nativeWord(set[w*bits.UintSize/8:])
		for word != 0 {
			bit := bits.TrailingZeros64(word)
			word &^= 1 << bit
			if fd := w*bits.UintSize + bit; fd < int(n) && r.at(int64(fd)) {
				return true
			}
		}
	}
	return false
}

// nativeWord is the long at the start of b, in this machine's size and
// byte order.
func nativeWord(b []byte) uint64 {
	if bits.UintSize == 32 {
		return uint64(binary.NativeEndian.Uint32(b))
	}
	return binary.NativeEndian.Uint64(b)
}

// readMemory reads n bytes at address addr of the process at dir through
// its mem file, which opens only for a caller allowed to trace it; false
// for none to read, a null or out-of-range address, a refusal or a short
// read.
func readMemory(dir string, addr uint64, n int) ([]byte, bool) {
	if n <= 0 || addr == 0 || addr > math.MaxInt64-uint64(n) {
		return nil, false
	}
	fd, err := unix.Open(dir+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	buf := make([]byte, n)
	for got := 0; got < n; {
		m, err := unix.Pread(fd, buf[got:], int64(addr)+int64(got))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || m <= 0 {
			return nil, false // an unmapped page (EIO), or the process has gone
		}
		got += m
	}
	return buf, true
}

// epollReadEvents are the epoll events that ask for input.
const epollReadEvents = unix.EPOLLIN | unix.EPOLLPRI | unix.EPOLLRDNORM | unix.EPOLLRDBAND

// watchedBy reports whether the epoll descriptor epfd watches the end for
// input. Its fdinfo has a line per watched file, "tfd: N events: HEX ...",
// and on newer kernels "ino:HEX sdev:HEX" of the file itself: the
// number N is the descriptor it was added by, which may have been closed
// or reused since, so where the line names the file it must be the one
// open at N.
func (r readsFrom) watchedBy(epfd int64) bool {
	b, err := readProcFile(r.dir + "/fdinfo/" + strconv.FormatInt(epfd, 10))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		w, ok := parseWatch(line)
		if !ok || w.events&epollReadEvents == 0 {
			continue
		}
		st, open := r.stat(w.fd)
		if open && (!w.named || uint64(st.Ino) == w.ino) && r.is(st) {
			return true
		}
		if w.named && w.ino == r.end.ino && unix.Mkdev(uint32(w.sdev>>20), uint32(w.sdev&0xfffff)) == r.end.dev {
			return true // the file itself, whatever descriptor holds it now
		}
	}
	return false
}

// epollWatch is one watched file of an epoll fdinfo.
type epollWatch struct {
	fd        int64
	events    uint32
	named     bool   // the line gave ino and sdev
	ino, sdev uint64 // sdev as the kernel keeps it: major<<20 | minor
}

// parseWatch reads an epoll fdinfo line such as
// "tfd:        0 events:       19 data:        0  pos:0 ino:3 sdev:d".
func parseWatch(line string) (epollWatch, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "tfd:" || f[2] != "events:" {
		return epollWatch{}, false
	}
	fd, err1 := strconv.ParseInt(f[1], 10, 64)
	events, err2 := strconv.ParseUint(f[3], 16, 32)
	if err1 != nil || err2 != nil {
		return epollWatch{}, false
	}
	w := epollWatch{fd: fd, events: uint32(events)}
	var haveIno, haveDev bool
	for _, kv := range f[4:] {
		var err error
		switch k, v, _ := strings.Cut(kv, ":"); k {
		case "ino":
			w.ino, err = strconv.ParseUint(v, 16, 64)
			haveIno = err == nil
		case "sdev":
			w.sdev, err = strconv.ParseUint(v, 16, 64)
			haveDev = err == nil
		}
	}
	w.named = haveIno && haveDev
	return w, true
}
