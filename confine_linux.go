package main

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rlimitResources names the resource limits MCP_EXEC_RLIMITS may set, as
// ulimit and prlimit(1) call them; byteSized ones take K/M/G/T suffixes.
var rlimitResources = map[string]struct {
	resource  int
	byteSized bool
}{
	"as":         {unix.RLIMIT_AS, true},
	"core":       {unix.RLIMIT_CORE, true},
	"cpu":        {unix.RLIMIT_CPU, false},
	"data":       {unix.RLIMIT_DATA, true},
	"fsize":      {unix.RLIMIT_FSIZE, true},
	"locks":      {unix.RLIMIT_LOCKS, false},
	"memlock":    {unix.RLIMIT_MEMLOCK, true},
	"msgqueue":   {unix.RLIMIT_MSGQUEUE, true},
	"nice":       {unix.RLIMIT_NICE, false},
	"nofile":     {unix.RLIMIT_NOFILE, false},
	"nproc":      {unix.RLIMIT_NPROC, false},
	"rss":        {unix.RLIMIT_RSS, true},
	"rtprio":     {unix.RLIMIT_RTPRIO, false},
	"sigpending": {unix.RLIMIT_SIGPENDING, false},
	"stack":      {unix.RLIMIT_STACK, true},
}

// Landlock access rights that change the filesystem, by the ABI version
// that introduced them. Reading and executing are never restricted: a
// sandboxed job may read anything its user can.
const (
	landlockWritesV1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	landlockReferV2    = unix.LANDLOCK_ACCESS_FS_REFER    // link and rename across directories
	landlockTruncateV3 = unix.LANDLOCK_ACCESS_FS_TRUNCATE // truncate(2), O_TRUNC
	landlockIoctlV5    = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// landlockFileRights are the rights a rule on a file (not a directory) may carry.
	landlockFileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | landlockTruncateV3 | landlockIoctlV5
)

// harmlessDevices may be written under a filesystem sandbox: writing them
// changes nothing anyone else can read.
var harmlessDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// landlockABI returns the kernel's Landlock ABI version, or 0 and why not
// when Landlock is unavailable.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// restrictThread imposes c's filesystem and network restrictions on the
// calling thread, and on every process it forks from now on: no_new_privs,
// a Landlock domain and a seccomp filter are per thread, and a child
// inherits its parent thread's. The caller must have locked the goroutine
// to its thread and must let the thread end with it (return from the
// goroutine still locked), so the restriction never reaches the server's
// other work; the Go runtime makes new threads from an unlocked one, so
// it does not spread that way either. Errors are *confineError.
func (c confinement) restrictThread() error {
	if !c.fsRestricted && !c.netOff {
		return nil
	}
	// Landlock and seccomp both require it of an unprivileged process, and
	// it keeps a setuid program from running with more than the job has.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &confineError{confineFailedFS, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)}
	}
	if err := c.restrictLandlock(); err != nil {
		return err
	}
	if c.netOff {
		if err := denyIPSockets(); err != nil {
			return &confineError{confineFailedNet, fmt.Errorf("seccomp filter: %w (network off needs seccomp filters: Linux 3.17 or later, allowed by podman's and docker's default profiles)", err)}
		}
	}
	return nil
}

// setRlimits sets each limit, soft and hard, on the calling process: rlimits
// are process-wide, so only a launcher, never the server, may call it.
// Errors are *confineError.
func setRlimits(limits []rlimit) error {
	for _, l := range limits {
		// syscall.Setrlimit, not unix's: it tells the runtime not to put back
		// its own raised RLIMIT_NOFILE at exec.
		lim := syscall.Rlimit{Cur: l.value, Max: l.value}
		if err := syscall.Setrlimit(l.resource, &lim); err != nil {
			return &confineError{confineFailedRlimits, fmt.Errorf("setrlimit %s=%d: %w", rlimitName(l.resource), l.value, err)}
		}
	}
	return nil
}

// restrictLandlock makes the calling thread a Landlock domain: writes only
// beneath c.writable and to the harmless devices (when fsRestricted), no
// TCP bind or connect (when netOff and the kernel has Landlock networking),
// and no signals or abstract unix sockets reaching outside the domain (ABI
// 6+), so a job cannot signal the server or another job.
func (c confinement) restrictLandlock() error {
	abi, err := landlockABI()
	failed := confineFailedFS
	if !c.fsRestricted {
		failed = confineFailedNet
	}
	if err != nil {
		if !c.fsRestricted {
			return nil // the seccomp filter alone keeps the job off the network
		}
		return &confineError{failed, fmt.Errorf("the kernel offers no Landlock (%w): the filesystem sandbox needs Linux 5.13 or later with Landlock enabled (lsm=landlock)", err)}
	}
	var attr unix.LandlockRulesetAttr
	var writes uint64
	if c.fsRestricted {
		writes = landlockWritesFor(abi)
		attr.Handled_access_fs = writes
	}
	if c.netOff && abi >= 4 {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
		if c.netOff {
			attr.Scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	if attr.Handled_access_fs == 0 && attr.Handled_access_net == 0 && attr.Scoped == 0 {
		return nil
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), rulesetAttrSize(abi), 0)
	if errno != 0 {
		return &confineError{failed, fmt.Errorf("landlock_create_ruleset: %w", errno)}
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	if c.fsRestricted {
		for _, dir := range c.writable {
			if err := allowBeneath(ruleset, dir, writes); err != nil {
				return &confineError{failed, err}
			}
		}
		for _, dev := range harmlessDevices {
			if err := allowBeneath(ruleset, dev, writes&landlockFileRights); err != nil && !errors.Is(err, unix.ENOENT) {
				return &confineError{failed, err} // a minimal image may lack a device; nothing to allow then
			}
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return &confineError{failed, fmt.Errorf("landlock_restrict_self: %w", errno)}
	}
	return nil
}

// landlockWritesFor is every filesystem-changing right the given ABI knows.
func landlockWritesFor(abi int) uint64 {
	rights := uint64(landlockWritesV1)
	if abi >= 2 {
		rights |= landlockReferV2
	}
	if abi >= 3 {
		rights |= landlockTruncateV3
	}
	if abi >= 5 {
		rights |= landlockIoctlV5
	}
	return rights
}

// rulesetAttrSize is the size of struct landlock_ruleset_attr as the given
// ABI knows it: older kernels refuse a larger one with E2BIG.
func rulesetAttrSize(abi int) uintptr {
	switch {
	case abi >= 6:
		return 24 // handled_access_fs, handled_access_net, scoped
	case abi >= 4:
		return 16
	}
	return 8
}

// allowBeneath adds a rule granting rights on path and, for a directory,
// everything beneath it.
func allowBeneath(ruleset int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", path, errno)
	}
	return nil
}

// denyIPSockets installs a seccomp filter on the calling thread: socket(2)
// fails with EACCES for every family but AF_UNIX, and io_uring, which can
// create sockets without socket(2), is unavailable. Landlock covers only
// TCP; this covers UDP, raw and every other family too. A system call of
// another architecture (i386 on amd64, x32) kills the process: its numbers
// mean other calls and would slip past the checks.
func denyIPSockets() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		nrAt = 0  // offsetof(struct seccomp_data, nr)
		arAt = 4  // offsetof(struct seccomp_data, arch)
		a0At = 16 // offsetof(struct seccomp_data, args[0]), its low half on little-endian
	)
	// Jumps count the instructions to skip: Jt when the test holds, Jf otherwise.
	prog := []unix.SockFilter{
		/* 0 */ {Code: ldW, K: arAt},
		/* 1 */ {Code: jeq, K: arch, Jt: 1}, // native: on to 3
		/* 2 */ {Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
		/* 3 */ {Code: ldW, K: nrAt},
		/* 4 */ {Code: jge, K: 0x40000000, Jt: 5}, // an x32 call: to 10
		/* 5 */ {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 5}, // to 11
		/* 6 */ {Code: jeq, K: unix.SYS_SOCKET, Jf: 2}, // anything else: to 9
		/* 7 */ {Code: ldW, K: a0At},
		/* 8 */ {Code: jeq, K: unix.AF_UNIX, Jf: 1}, // another family: to 10
		/* 9 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		/* 10 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		/* 11 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// Thread-local on purpose (no TSYNC): the caller execs from this thread.
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// auditArch is the seccomp architecture token of each supported GOARCH;
// little-endian ones only, as the filter reads the low half of args[0] first.
var auditArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
	"ppc64le": unix.AUDIT_ARCH_PPC64LE,
}

// rlimitName is the MCP_EXEC_RLIMITS name of a resource.
func rlimitName(resource int) string {
	for name, r := range rlimitResources {
		if r.resource == resource {
			return name
		}
	}
	return fmt.Sprint(resource)
}
