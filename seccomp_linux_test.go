package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSeccompProgramAssemblesEverywhere: every rule set assembles for
// every architecture the filter supports, jumps in range.
func TestSeccompProgramAssemblesEverywhere(t *testing.T) {
	t.Parallel()
	for goarch := range auditArch {
		for _, r := range []seccompRules{{netOff: true}, {othersUntouched: true}, {noMetadata: true}, {noHostObjects: true}, {true, true, true, true}} {
			prog, err := r.program(goarch)
			if err != nil || len(prog) == 0 || len(prog) > unix.BPF_MAXINSNS {
				t.Errorf("%s %+v: %d instructions, %v", goarch, r, len(prog), err)
			}
		}
	}
}

// onFilteredThread runs f on a discarded thread under r's filter, with
// no_new_privs, as a confined job's thread has them.
func onFilteredThread(t *testing.T, r seccompRules, f func()) {
	t.Helper()
	err := onDiscardedThread(func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return err
		}
		if err := r.install(); err != nil {
			return err
		}
		f()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSandboxedJobCannotTouchOtherProcesses: a sandboxed job lowered the
// server's RLIMIT_CPU with prlimit --pid $PPID (and the kernel then
// killed the server), reniced it, and moved another session's job: the
// filter lets these calls name the caller only (pid 0), and lets another
// process's limits be read.
func TestSandboxedJobCannotTouchOtherProcesses(t *testing.T) {
	onLinux(t)
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	pid := other.Process.Pid
	lowered := unix.Rlimit{Cur: 1, Max: 1}
	var cpus unix.CPUSet
	cpus.Set(0)
	refused := map[string]error{}
	allowed := map[string]error{}
	onFilteredThread(t, seccompRules{othersUntouched: true}, func() {
		refused["prlimit another's cpu"] = unix.Prlimit(pid, unix.RLIMIT_CPU, &lowered, nil)
		refused["setpriority another"] = unix.Setpriority(unix.PRIO_PROCESS, pid, 10)
		refused["setpriority the user's processes"] = unix.Setpriority(unix.PRIO_USER, 0, 10)
		refused["setpriority another group"] = unix.Setpriority(unix.PRIO_PGRP, pid, 10)
		refused["sched_setaffinity another"] = unix.SchedSetaffinity(pid, &cpus)
		_, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(pid), 7)
		refused["ioprio_set another"] = errnoErr(errno)
		_, _, errno = unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(pid), 0, 0)
		refused["sched_setscheduler another"] = errnoErr(errno)
		var old, core unix.Rlimit
		allowed["prlimit reads another's"] = unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old)
		if err := unix.Prlimit(0, unix.RLIMIT_CORE, nil, &core); err == nil {
			allowed["prlimit the caller's"] = unix.Prlimit(0, unix.RLIMIT_CORE, &core, nil) // as it was: rlimits are the whole process's
		}
		allowed["nice the caller"] = unix.Setpriority(unix.PRIO_PROCESS, 0, 1)
		allowed["affinity of the caller"] = unix.SchedGetaffinity(0, &cpus)
	})
	for what, err := range refused {
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v, want EPERM", what, err)
		}
	}
	for what, err := range allowed {
		if err != nil {
			t.Errorf("%s: %v, want it allowed", what, err)
		}
	}
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, nil, &lim); err != nil || lim.Cur == 1 {
		t.Errorf("the other process's cpu limit: %+v, %v", lim, err)
	}
}

// TestMetadataRefusedWithoutMountNamespace: where no mount namespace can be
// made, mode, owner, times, xattrs and flags cannot change anywhere, while
// touch's own way to finish a new file (its descriptor's times set to
// now) still works.
func TestMetadataRefusedWithoutMountNamespace(t *testing.T) {
	onLinux(t)
	path := filepath.Join(t.TempDir(), "f")
	mustWrite(t, path, "x")
	refused := map[string]error{}
	var now error
	onFilteredThread(t, seccompRules{noMetadata: true}, func() {
		refused["chmod"] = unix.Fchmodat(unix.AT_FDCWD, path, 0o777, 0)
		refused["chown"] = unix.Fchownat(unix.AT_FDCWD, path, os.Getuid(), os.Getgid(), 0)
		refused["utimensat with times"] = unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{{Sec: 1}, {Sec: 1}}, 0)
		refused["setxattr"] = unix.Setxattr(path, "user.test", []byte("1"), 0)
		refused["removexattr"] = unix.Removexattr(path, "user.test")
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			refused["open"] = err
			return
		}
		defer unix.Close(fd)
		refused["fchmod"] = unix.Fchmod(fd, 0o777)
		refused["fsetxattr"] = unix.Fsetxattr(fd, "user.test", []byte("1"), 0)
		refused["chattr"] = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, 0)
		refused["utimensat by path, now"] = unix.UtimesNanoAt(unix.AT_FDCWD, path, nil, 0)
		_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
		now = errnoErr(errno)
	})
	for what, err := range refused {
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v, want EPERM", what, err)
		}
	}
	if now != nil {
		t.Errorf("futimens(fd, NULL): %v, want it allowed", now)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file's mode changed: %v %v", fi.Mode(), err)
	}
}

// errnoErr is nil for 0, else the errno.
func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// TestHostObjectCallsAreRefusedInTheFilter: the keyring and message queue
// calls fail with EPERM and io_uring's with ENOSYS under the sandbox's
// filter, on this architecture's numbers; unfiltered, the same calls are
// not refused that way (the control).
func TestHostObjectCallsAreRefusedInTheFilter(t *testing.T) {
	onLinux(t)
	calls := append(slices.Clone(hostObjectCalls), ioUringCalls...)
	try := func() map[uint32]unix.Errno {
		got := map[uint32]unix.Errno{}
		for _, nr := range calls {
			// Arguments no call accepts: whatever it does, it changes nothing.
			_, _, errno := unix.Syscall6(uintptr(nr), ^uintptr(0), 0, 0, 0, 0, 0)
			got[nr] = errno
		}
		return got
	}
	var filtered, free map[uint32]unix.Errno
	onFilteredThread(t, seccompRules{noHostObjects: true}, func() { filtered = try() })
	free = try()
	for _, nr := range calls {
		want := unix.EPERM
		if slices.Contains(ioUringCalls, nr) {
			want = unix.ENOSYS
		}
		if filtered[nr] != want {
			t.Errorf("system call %d under the filter: %v, want %v", nr, filtered[nr], want)
		}
		if free[nr] == want {
			t.Errorf("system call %d unfiltered: %v too; the control proves nothing", nr, free[nr])
		}
	}
}

// TestTerminalRulesAreMadeOnce: the rules that keep jobs off terminals
// are made once, not at each job's start, while / and /dev stay as they
// were.
func TestTerminalRulesAreMadeOnce(t *testing.T) {
	onLinux(t)
	abi, err := landlockABI()
	if err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	first, err := terminalRulesNow(abi)
	if err != nil {
		t.Fatal(err)
	}
	second, err := terminalRulesNow(abi)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("the rules were made again with / and /dev unchanged: %+v, %+v", first.stamp, second.stamp)
	}
}

// hostObjectNumbers are the numbers of hostObjectCalls (keyctl, add_key,
// request_key, then mq_open to mq_getsetattr) and ioUringCalls as each
// architecture's kernel table gives them.
var hostObjectNumbers = map[string][]uint32{
	"amd64":   {250, 248, 249, 240, 241, 242, 243, 244, 245, 425, 426, 427},
	"arm64":   {219, 217, 218, 180, 181, 182, 183, 184, 185, 425, 426, 427},
	"riscv64": {219, 217, 218, 180, 181, 182, 183, 184, 185, 425, 426, 427},
	"ppc64le": {271, 269, 270, 262, 263, 264, 265, 266, 267, 425, 426, 427},
}

// TestHostObjectCallNumbers: the filter refuses the calls by the numbers
// of the architecture it is built for (every one auditArch names).
func TestHostObjectCallNumbers(t *testing.T) {
	want, ok := hostObjectNumbers[runtime.GOARCH]
	if !ok {
		t.Skipf("no table for %s", runtime.GOARCH)
	}
	for goarch := range auditArch {
		if _, ok := hostObjectNumbers[goarch]; !ok {
			t.Errorf("no numbers to check for %s, which the filter supports", goarch)
		}
	}
	if got := append(slices.Clone(hostObjectCalls), ioUringCalls...); !slices.Equal(got, want) {
		t.Errorf("%s: the filter refuses %v, want %v", runtime.GOARCH, got, want)
	}
}
