package main

import (
	"errors"
	"fmt"
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
// calling thread, and on every process it forks from now on: a mount
// namespace, no_new_privs, capabilities, a Landlock domain and a seccomp
// filter are all per thread, and a child inherits its parent thread's. The
// caller must be on a thread it will discard (onDiscardedThread), so the
// restriction never reaches the server's other work. Errors are
// *confineError.
//
// A sandboxed (fsRestricted) job gets every layer, in this order:
//   - its own mount namespace, all read-only but c.writable (ownMounts):
//     metadata outside the writable places; it needs CAP_SYS_ADMIN,
//     so it comes first;
//   - no_new_privs: nothing it execs gains privileges, and unprivileged
//     Landlock and seccomp require it;
//   - no capabilities: no other process's /proc secrets, no owner
//     override, no mounts;
//   - Landlock: writes by path, ptrace, signals and abstract sockets
//     outside its domain;
//   - seccomp: other processes' limits and priorities, and metadata
//     everywhere when it has no mount namespace of its own.
func (c confinement) restrictThread() error {
	if !c.restrictsThread() {
		return nil
	}
	fsFailed := func(what string, err error) error {
		return &confineError{confineFailedFS, fmt.Errorf("%s: %w", what, err)}
	}
	if c.ownMounts { // set only with fsRestricted
		if err := readOnlyMounts(c.writable); err != nil {
			return fsFailed("a read-only mount namespace", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fsFailed("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	if c.fsRestricted {
		if err := dropCapabilities(); err != nil {
			return fsFailed("dropping capabilities", err)
		}
	}
	if err := c.restrictLandlock(); err != nil {
		return err
	}
	rules := seccompRules{netOff: c.netOff, othersUntouched: c.fsRestricted, noMetadata: c.fsRestricted && !c.ownMounts}
	if !rules.any() {
		return nil
	}
	if err := rules.install(); err != nil {
		return c.failed(fmt.Errorf("seccomp filter: %w (the sandbox and network off need seccomp filters: Linux 3.17 or later, allowed by podman's and docker's default profiles)", err))
	}
	return nil
}

// jobDir is the working directory to give the job forked from a thread
// restricted by c (see reopenDir), and what to release once it started.
func (c confinement) jobDir(dir string) (string, func(), error) {
	if !c.ownMounts {
		return dir, func() {}, nil
	}
	return reopenDir(dir, c.cwd)
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
	if err != nil {
		if !c.fsRestricted {
			return nil // the seccomp filter alone keeps the job off the network
		}
		return c.failed(fmt.Errorf("the kernel offers no Landlock (%w): the filesystem sandbox needs Linux 5.13 or later with Landlock enabled (lsm=landlock)", err))
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
	if c.fsRestricted && abi < 6 {
		// Without signal scoping a sandboxed job could stop or kill the
		// server and other sessions' jobs: refuse rather than run less
		// confined than promised.
		return c.failed(fmt.Errorf("this kernel's Landlock is ABI %d: keeping a sandboxed job from signalling the server and other jobs needs ABI 6 (Linux 6.12)", abi))
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
		return c.failed(fmt.Errorf("landlock_create_ruleset: %w", errno))
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	if c.fsRestricted {
		for _, dir := range c.writable {
			if err := allowBeneath(ruleset, dir, writes); err != nil {
				return c.failed(err)
			}
		}
		for _, dev := range harmlessDevices {
			if err := allowBeneath(ruleset, dev, writes&landlockFileRights); err != nil && !errors.Is(err, unix.ENOENT) {
				return c.failed(err) // a minimal image may lack a device; nothing to allow then
			}
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return c.failed(fmt.Errorf("landlock_restrict_self: %w", errno))
	}
	return nil
}

// failed is err as the confineError of c: a sandbox's failure when c has a
// sandbox, else network off's.
func (c confinement) failed(err error) error {
	if c.fsRestricted {
		return &confineError{confineFailedFS, err}
	}
	return &confineError{confineFailedNet, err}
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

// rlimitName is the MCP_EXEC_RLIMITS name of a resource.
func rlimitName(resource int) string {
	for name, r := range rlimitResources {
		if r.resource == resource {
			return name
		}
	}
	return fmt.Sprint(resource)
}
