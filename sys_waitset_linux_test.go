package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitSetMode is the part a re-executed test binary plays to sleep in one
// waiting system call (WAITSET_NR) on a set of descriptors (WAITSET_WATCH):
//
//	pipe    a pipe of its own
//	socket  a listening socket of its own
//	stdin   a pipe of its own, then its stdin
//	dup     a pipe of its own, then a copy of its stdin, fd 0 being /dev/null
//
// It exits 3 when the kernel lacks the call, and 2 when the call returns.
const waitSetMode = "waitset"

func init() {
	childModes[waitSetMode] = waitOnSet
	if os.Getenv(childModeEnv) == waitSetMode {
		// The main goroutine keeps the main thread, the one whose
		// /proc/PID/syscall a look reads: only locking in init holds it there.
		runtime.LockOSThread()
	}
}

// waitOnSet is the waitset part: it builds its set and sleeps on it.
func waitOnSet() int {
	nr, err := strconv.Atoi(os.Getenv("WAITSET_NR"))
	if err != nil {
		return 1
	}
	set, err := waitSetOf(os.Getenv("WAITSET_WATCH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		errno := sleepIn(nr, set)
		switch errno {
		case unix.EINTR:
			continue
		case unix.ENOSYS:
			return 3
		}
		fmt.Fprintf(os.Stderr, "system call %d returned: %v\n", nr, errno)
		return 2
	}
}

// waitSetOf makes the descriptors of one WAITSET_WATCH.
func waitSetOf(watch string) ([]int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // both ends stay open: nothing ever arrives
		return nil, err
	}
	switch watch {
	case "pipe":
		return []int{p[0]}, nil
	case "socket":
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return nil, err
		}
		if err := unix.Bind(s, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return nil, err
		}
		return []int{s}, unix.Listen(s, 1)
	case "stdin":
		return []int{p[0], 0}, nil
	case "dup":
		copied, err := unix.Dup(0)
		if err != nil {
			return nil, err
		}
		null, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		return []int{p[0], copied}, unix.Dup2(null, 0)
	}
	return nil, fmt.Errorf("no such set %q", watch)
}

// sleepIn makes system call nr wait, without a timeout, for set to become
// readable, in the arguments its kind takes.
func sleepIn(nr int, set []int) syscall.Errno {
	noTimeout := ^uintptr(0) // -1 ms for poll and epoll_wait; ppoll, select and epoll_pwait2 take a NULL pointer
	if nr == unix.SYS_PPOLL || nr == unix.SYS_EPOLL_PWAIT2 || waitKindOf(nr) == waitSelect {
		noTimeout = 0
	}
	switch waitKindOf(nr) {
	case waitPoll:
		fds := make([]unix.PollFd, len(set))
		for i, fd := range set {
			fds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		_, _, errno := unix.Syscall6(uintptr(nr), uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), noTimeout, 0, 0, 0)
		return errno
	case waitSelect:
		var fds unix.FdSet
		top := 0
		for _, fd := range set {
			fds.Set(fd)
			top = max(top, fd)
		}
		_, _, errno := unix.Syscall6(uintptr(nr), uintptr(top+1), uintptr(unsafe.Pointer(&fds)), 0, 0, noTimeout, 0)
		return errno
	case waitEpoll:
		ep, err := unix.EpollCreate1(0)
		if err != nil {
			return err.(syscall.Errno)
		}
		for _, fd := range set {
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
				return err.(syscall.Errno)
			}
		}
		var ev [1]unix.EpollEvent
		_, _, errno := unix.Syscall6(uintptr(nr), uintptr(ep), uintptr(unsafe.Pointer(&ev[0])), 1, noTimeout, 0, 0)
		return errno
	}
	return unix.EINVAL
}

// setWaitCalls are this architecture's waiting calls that wait on a set.
func setWaitCalls() map[int]waitKind {
	calls := map[int]waitKind{}
	for nr, k := range waitCalls {
		calls[nr] = k
	}
	for nr, k := range legacyWaitCalls[runtime.GOARCH] {
		calls[nr] = k
	}
	for nr, k := range calls {
		if k == waitRead {
			delete(calls, nr)
		}
	}
	return calls
}

// kindNames name the kinds in test names.
var kindNames = map[waitKind]string{waitPoll: "poll", waitSelect: "select", waitEpoll: "epoll"}

// TestWaitingForInputOnlyWhenStdinIsPolled: a job whose process sleeps in
// poll, select or epoll waits for input only when the set it waits on holds
// the job's stdin, under any descriptor number. A poll or select on another
// pipe or a listening socket (curl, python3 -m http.server) was reported
// waiting for input, as the job's stdin was its descriptor 0, and execute
// yielded after a second.
func TestWaitingForInputOnlyWhenStdinIsPolled(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := agentRegistry() // the first look decides: one look tells
	want := map[string]bool{"pipe": false, "socket": false, "stdin": true, "dup": true}
	for nr, kind := range setWaitCalls() {
		for _, watch := range []string{"pipe", "socket", "stdin", "dup"} {
			t.Run(fmt.Sprintf("%s-%d-%s", kindNames[kind], nr, watch), func(t *testing.T) {
				t.Parallel()
				j := startJob(t, reg, fmt.Sprintf("export %s=%s WAITSET_NR=%d WAITSET_WATCH=%s; exec '%s'",
					childModeEnv, waitSetMode, nr, watch, os.Args[0]))
				awaitSleepingIn(t, j, nr)
				if got := j.waitingForInput(); got != want[watch] {
					t.Errorf("system call %d on the %s set: waiting for input %v, want %v", nr, watch, got, want[watch])
				}
			})
		}
	}
}

// awaitSleepingIn waits until j's process sleeps in system call nr and j
// has been silent for inputWaitDuration, without a look at its input; it
// skips when the kernel lacks the call.
func awaitSleepingIn(t *testing.T, j *job, nr int) {
	t.Helper()
	prefix := strconv.Itoa(nr) + " "
	eventually(t, jobDeadline, fmt.Sprintf("sleeping in system call %d, silent for 1 s", nr), func() bool {
		if isClosed(j.done) {
			if j.final.exitCode == 3 {
				t.Skipf("the kernel lacks system call %d", nr)
			}
			t.Fatalf("the waiting process ended: exit %d", j.final.exitCode)
		}
		p, ok := readProc(j.pid)
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", j.pid))
		return ok && p.state == "S" && strings.HasPrefix(string(b), prefix) && j.silentFor(time.Now()) >= inputWaitDuration
	})
}

// fakeProc is a made-up /proc/PID directory whose set the tests write.
type fakeProc struct {
	t     *testing.T
	dir   string
	stdin string // the file its fd/0 names: the job's input end
	other string // the file its fd/3 names
}

// setAt is where the fake process's set lives in its mem file.
const setAt = 0x1000

func newFakeProc(t *testing.T) *fakeProc {
	t.Helper()
	f := &fakeProc{t: t, dir: t.TempDir()}
	f.stdin, f.other = filepath.Join(f.dir, "stdin-pipe"), filepath.Join(f.dir, "other-pipe")
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.Mkdir(filepath.Join(f.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for fd, target := range map[string]string{"0": f.stdin, "3": f.other} {
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(f.dir, "fd", fd)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// reads is the readsFrom of the fake process with its fd/0 as the end.
func (f *fakeProc) reads() readsFrom {
	var st unix.Stat_t
	if err := unix.Stat(f.stdin, &st); err != nil {
		f.t.Fatal(err)
	}
	return readsFrom{dir: f.dir, end: inputEnd{dev: uint64(st.Dev), ino: uint64(st.Ino)}}
}

// sleeps writes the fake process's syscall file: nr and its arguments.
func (f *fakeProc) sleeps(nr int, args ...uint64) {
	line := strconv.Itoa(nr)
	for i := 0; i < 6; i++ {
		var a uint64
		if i < len(args) {
			a = args[i]
		}
		line += fmt.Sprintf(" 0x%x", a)
	}
	f.write("syscall", line+" 0x7ffc0000 0x7f000000\n")
}

// write writes a file of the fake process.
func (f *fakeProc) write(name, text string) {
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// memory writes b at setAt in the fake process's mem file.
func (f *fakeProc) memory(b []byte) {
	m, err := os.Create(filepath.Join(f.dir, "mem"))
	if err != nil {
		f.t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.WriteAt(b, setAt); err != nil {
		f.t.Fatal(err)
	}
}

// pollfds is a pollfd array of (fd, events) pairs.
func pollfds(pairs ...int) []byte {
	var b []byte
	for i := 0; i+1 < len(pairs); i += 2 {
		b = binary.NativeEndian.AppendUint32(b, uint32(int32(pairs[i])))
		b = binary.NativeEndian.AppendUint16(b, uint16(pairs[i+1]))
		b = binary.NativeEndian.AppendUint16(b, 0)
	}
	return b
}

// fdSet is an fd_set holding fds, one long's worth.
func fdSet(fds ...int) []byte {
	var s unix.FdSet
	for _, fd := range fds {
		s.Set(fd)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s)), 8)
}

// TestWaitSetUnreadableCountsAsNo: a set that cannot be read (no mem file,
// a short read, a null pointer, no fdinfo) or that the process has moved
// on from holds nothing, and so does a set that asks the end for anything
// but input or names another file; the same sets, readable, hold the end.
func TestWaitSetUnreadableCountsAsNo(t *testing.T) {
	onLinux(t)
	t.Parallel()
	kernelDev := func(dev uint64) uint64 { return uint64(unix.Major(dev))<<20 | uint64(unix.Minor(dev)) }
	for _, c := range []struct {
		name string
		set  func(f *fakeProc)
		want bool
	}{
		{"poll holding stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 2); f.memory(pollfds(3, 1, 0, 1)) }, true},
		{"poll without stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 1); f.memory(pollfds(3, 1, 0, 1)) }, false},
		{"poll for output on stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 1); f.memory(pollfds(0, unix.POLLOUT)) }, false},
		{"poll ignoring stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 1); f.memory(pollfds(-1, 1)) }, false},
		{"poll, no mem file", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 2) }, false},
		{"poll, a short read", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, setAt, 2); f.memory(pollfds(0, 1)[:6]) }, false},
		{"poll, a null array", func(f *fakeProc) { f.sleeps(unix.SYS_PPOLL, 0, 2); f.memory(pollfds(0, 1)) }, false},
		{"select holding stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PSELECT6, 4, setAt); f.memory(fdSet(0, 3)) }, true},
		{"select without stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PSELECT6, 4, setAt); f.memory(fdSet(3)) }, false},
		{"select counting below stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PSELECT6, 0, setAt); f.memory(fdSet(0)) }, false},
		{"select writing stdin", func(f *fakeProc) { f.sleeps(unix.SYS_PSELECT6, 1, 0, setAt); f.memory(fdSet(0)) }, false},
		{"select, no mem file", func(f *fakeProc) { f.sleeps(unix.SYS_PSELECT6, 1, setAt) }, false},
		{"select, a mem file that is no file", func(f *fakeProc) {
			f.sleeps(unix.SYS_PSELECT6, 1, setAt)
			if err := os.Mkdir(filepath.Join(f.dir, "mem"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"epoll watching stdin", func(f *fakeProc) {
			f.sleeps(unix.SYS_EPOLL_PWAIT, 5)
			f.write("fdinfo/5", "pos:\t0\nflags:\t02\nmnt_id:\t15\ntfd:        3 events:       19 data:                3\ntfd:        0 events:       19 data:                0\n")
		}, true},
		{"epoll watching another", func(f *fakeProc) {
			f.sleeps(unix.SYS_EPOLL_PWAIT, 5)
			f.write("fdinfo/5", "tfd:        3 events:       19 data:                3\n")
		}, false},
		{"epoll watching stdin for output", func(f *fakeProc) {
			f.sleeps(unix.SYS_EPOLL_PWAIT, 5)
			f.write("fdinfo/5", "tfd:        0 events:        4 data:                0\n")
		}, false},
		{"epoll, no fdinfo", func(f *fakeProc) { f.sleeps(unix.SYS_EPOLL_PWAIT, 5) }, false},
		{"epoll watching stdin added by a closed descriptor", func(f *fakeProc) {
			f.sleeps(unix.SYS_EPOLL_PWAIT, 5)
			var inStat unix.Stat_t
			unix.Stat(f.stdin, &inStat)
			f.write("fdinfo/5", fmt.Sprintf("tfd:        7 events:       19 data:  7  pos:0 ino:%x sdev:%x\n",
				inStat.Ino, kernelDev(uint64(inStat.Dev))))
		}, true},
		{"epoll watching another by a number stdin now has", func(f *fakeProc) {
			f.sleeps(unix.SYS_EPOLL_PWAIT, 5)
			var other unix.Stat_t
			unix.Stat(f.other, &other)
			f.write("fdinfo/5", fmt.Sprintf("tfd:        0 events:       19 data:  0  pos:0 ino:%x sdev:%x\n",
				other.Ino, kernelDev(uint64(other.Dev))))
		}, false},
	} {
		f := newFakeProc(t)
		c.set(f)
		if got := f.reads().waitingOn(); got != c.want {
			t.Errorf("%s: waiting for input %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWaitSetOfACallLeftBehindCountsAsNo: a set read for a call the
// process has since left (its syscall line changed) holds nothing, so a
// set torn by the process moving on is never reported.
func TestWaitSetOfACallLeftBehindCountsAsNo(t *testing.T) {
	onLinux(t)
	t.Parallel()
	f := newFakeProc(t)
	f.sleeps(unix.SYS_PPOLL, setAt, 1)
	f.memory(pollfds(0, 1))
	r := f.reads()
	call, ok := readWaitCall(f.dir)
	if !ok || !r.polls(call) || !r.stillIn(call) {
		t.Fatal("the fake process does not poll its stdin: the test shows nothing")
	}
	f.sleeps(unix.SYS_PPOLL, setAt+64, 1) // it returned and polls another array
	if r.stillIn(call) {
		t.Error("a process that left its call is taken to be still in it")
	}
	f.write("syscall", "running\n")
	if r.stillIn(call) || r.waitingOn() {
		t.Error("a running process is taken to wait for input")
	}
}
