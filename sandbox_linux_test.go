package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	childModes["start without landlock"] = func() int { return startUnder(landlockSyscalls) }
	childModes["start without seccomp"] = func() int { return startUnder([]uint32{unix.SYS_SECCOMP}) }
}

// landlockSyscalls are Landlock's system calls: a kernel without Landlock
// answers them ENOSYS.
var landlockSyscalls = []uint32{unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE, unix.SYS_LANDLOCK_RESTRICT_SELF}

// startUnder makes calls fail with ENOSYS in every thread of this process,
// as a kernel without them would, then loads the configuration in the
// environment and checks its confinement as the server's startup does. It
// prints the error and returns 2, or returns 0.
func startUnder(calls []uint32) int {
	if err := denySyscalls(calls); err != nil {
		fmt.Fprintln(os.Stderr, "cannot deny the calls:", err)
		return 3
	}
	cfg, err := loadConfig(os.Environ())
	if err == nil {
		err = checkConfinement(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// denySyscalls installs, on every thread, a seccomp filter answering the
// given calls ENOSYS.
func denySyscalls(calls []uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	prog := []unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}}
	for i, nr := range calls {
		// Each test jumps, on a match, over the tests left and the ALLOW.
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nr, Jt: uint8(len(calls) - i)})
	}
	prog = append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// TestSandboxRefusedWithoutKernelSupport: when the kernel cannot enforce
// the sandbox or the network setting the server refuses to start, naming
// the setting and what is missing; never does it run jobs unconfined. With
// Landlock gone, network off still stands on seccomp alone; the sandbox
// needs both.
func TestSandboxRefusedWithoutKernelSupport(t *testing.T) {
	onLinux(t)
	t.Parallel()
	for _, tc := range []struct {
		mode, setting, want string // want "" = starts
	}{
		{"start without landlock", "MCP_EXEC_SANDBOX=read-only", "MCP_EXEC_SANDBOX=read-only cannot be enforced here"},
		{"start without landlock", "MCP_EXEC_NETWORK=off", ""},
		{"start without seccomp", "MCP_EXEC_NETWORK=off", "MCP_EXEC_NETWORK=off cannot be enforced here"},
		// The sandbox needs seccomp too: Landlock does not keep a job
		// off other processes' limits and priorities.
		{"start without seccomp", "MCP_EXEC_SANDBOX=read-only", "MCP_EXEC_SANDBOX=read-only cannot be enforced here"},
	} {
		code, out := runChild(t, append(testConfig().baseEnv, childModeEnv+"="+tc.mode, tc.setting))
		switch {
		case tc.want == "" && code != 0:
			t.Errorf("%s, %s: exit %d %s; want it to start", tc.mode, tc.setting, code, out)
		case tc.want != "" && (code != 2 || !strings.Contains(out, tc.want)):
			t.Errorf("%s, %s: exit %d, %q; want exit 2 saying %q", tc.mode, tc.setting, code, out, tc.want)
		}
	}
}

func init() {
	childModes["start jobs past the fd limit"] = startPastFDLimit
}

// startPastFDLimit, with 256 descriptors allowed, starts jobs until one is
// refused, checks that each failure is the refusal for want of
// descriptors, that the server's own work still gets descriptors, and that
// they all come back once the jobs are gone. It exits 0 when all held.
func startPastFDLimit() int {
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 3
	}
	prepareProcess(false)
	cfg, err := loadConfig(os.Environ())
	if err != nil {
		fmt.Println(err)
		return 3
	}
	cfg.shell = "/bin/sh"
	reg := newRegistry(cfg)
	// The runtime's poller keeps two descriptors of its own (epoll and an
	// eventfd) from the first pollable file on, and nothing at start opens
	// one any more: a pipe opened and closed here makes them count as before.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before := countOpenFds()
	var jobs []*job
	refused := 0
	for i := 0; i < 300; i++ {
		j, started, err := reg.start(startRequest{command: "exec sleep 60"})
		switch {
		case err != nil && errors.Is(err, errExhausted) && strings.Contains(err.Error(), "of 256 file descriptors are in use"):
			refused++
		case err != nil:
			fmt.Println("another error:", err)
			return 1
		case !started:
			fmt.Println("a start failure:", j.final.startError)
			return 1
		default:
			jobs = append(jobs, j)
		}
	}
	if refused == 0 || len(jobs) == 0 {
		fmt.Println("started", len(jobs), "refused", refused)
		return 1
	}
	if f, err := os.Open("/proc/self/status"); err != nil { // the server's own work still opens files
		fmt.Println("the reserve is gone:", err)
		return 1
	} else {
		f.Close()
	}
	for _, j := range jobs {
		_ = j.signal(syscall.SIGKILL)
		<-j.done
		reg.deliver(j, nil)
	}
	deadline := time.Now().Add(20 * time.Second)
	for countOpenFds() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the pumps close their pipes as they reach EOF
	}
	if after := countOpenFds(); after > before {
		fmt.Println("descriptors left:", before, "->", after)
		return 1
	}
	fmt.Println("started", len(jobs), "refused", refused)
	return 0
}

// TestJobsPastTheFDLimitAreRefused: at the descriptor limit a job is
// refused with the message that says what is in use, never "bad file
// descriptor", and every descriptor comes back (in a child whose limit is
// 256).
func TestJobsPastTheFDLimitAreRefused(t *testing.T) {
	onLinux(t)
	t.Parallel()
	code, out := runChild(t, append(testConfig().baseEnv, childModeEnv+"=start jobs past the fd limit"))
	if code != 0 {
		t.Errorf("exit %d: %s", code, out)
	}
	t.Log(strings.TrimSpace(out))
}
