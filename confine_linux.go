package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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
// changes nothing anyone else can read. /dev/tty is the opener's own
// controlling terminal, and a job has one only when it was started with a
// terminal of its own (its pty); without, opening it fails with ENXIO.
var harmlessDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", ownTerminal}

// ownTerminal is the device that stands for the opener's controlling
// terminal, whichever that is.
const ownTerminal = "/dev/tty"

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
//     outside its domain; then reading terminals, in a second domain;
//   - seccomp: other processes' limits and priorities, the keyrings,
//     POSIX message queues and io_uring, and metadata everywhere when it
//     has no mount namespace of its own.
func (c confinement) restrictThread() error {
	if !c.restrictsThread() {
		return nil
	}
	fsFailed := func(what string, err error) error {
		return &confineError{confineFailedFS, fmt.Errorf("%s: %w", what, err)}
	}
	terminals := -1
	if c.fsRestricted {
		fd, err := terminalRulesFd()
		if err != nil {
			return fsFailed("rules keeping jobs off terminals", err)
		}
		if fd >= 0 {
			defer unix.Close(fd) // the domain made from it holds what it needs
		}
		terminals = fd
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
	if err := c.restrictLandlock(terminals); err != nil {
		return err
	}
	rules := seccompRules{netOff: c.netOff, othersUntouched: c.fsRestricted, noMetadata: c.fsRestricted && !c.ownMounts,
		noHostObjects: c.fsRestricted}
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
// 6+), so a job cannot signal the server or another job, nor reach a
// service listening on an abstract socket. A sandboxed job's thread then
// gets a second domain, the rule set terminals (terminalRulesFd; -1 for
// none), that keeps it from reading terminals.
func (c confinement) restrictLandlock(terminals int) error {
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
		// Both scopes, whatever the network setting: an abstract socket
		// is no file, so no write rule keeps a job from the X server,
		// D-Bus or a container shim listening on one.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
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
	if terminals >= 0 {
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(terminals), 0, 0); errno != 0 {
			return c.failed(fmt.Errorf("landlock_restrict_self (terminals): %w", errno))
		}
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

// terminalRules is a Landlock rule set, made once and shared by every
// sandboxed job, that handles reading files only and grants it everywhere
// but on terminals: every entry of / but /dev, and in /dev every entry
// that is not a terminal device and holds none (see grantDev). A job's
// thread restricted by it cannot open the server's controlling terminal,
// another job's pty or a console by any name (/dev/pts/N, /dev/ttyN,
// /dev/console, /proc/PID/fd/0) to read what is typed there; /dev/tty,
// which is always the opener's own terminal, stays readable. The grants
// are by inode, so they hold in a job's own mount namespace too.
type terminalRules struct {
	stamp   [2]dirStamp // of / and /dev when the rules were made
	ruleset *os.File    // closed when replaced; the runtime keeps it open while in use
}

// dirStamp identifies a directory's entries as they were: adding,
// removing or renaming an entry changes its mtime and ctime.
type dirStamp struct {
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// currentTerminalRules is process-wide state: the rules made for / and
// /dev as they last were (*terminalRules, nil until the first sandboxed
// job). A new entry of / or /dev (a top-level directory, a device node
// udev makes) makes a new set for the next job; a terminal made later
// deeper in a directory of /dev that held none when the set was made is
// not seen (udev makes terminals in /dev itself, devpts is never granted).
var currentTerminalRules atomic.Pointer[terminalRules]

// terminalRulesFd returns a descriptor of its own, for the caller to
// close, of the terminal rules as they are for / and /dev now (made again
// if either changed since), or -1 when the kernel has no Landlock (which
// restrictLandlock then reports). The caller takes it before it drops its
// capabilities: making the rules reads /dev as the server may.
func terminalRulesFd() (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return -1, nil
	}
	var lastErr error
	// A set replaced by another job's start between terminalRulesNow and
	// the dup is closed under us: a few tries take the newer one.
	for range 3 {
		rules, err := terminalRulesNow(abi)
		if err != nil {
			return -1, err
		}
		conn, err := rules.ruleset.SyscallConn()
		if err != nil {
			return -1, fmt.Errorf("the terminal rules: %w", err)
		}
		fd, dupErr := -1, error(nil)
		if err := conn.Control(func(ruleset uintptr) {
			fd, dupErr = unix.FcntlInt(ruleset, unix.F_DUPFD_CLOEXEC, 0)
		}); err != nil {
			lastErr = err
			continue
		}
		if dupErr != nil {
			return -1, fmt.Errorf("the terminal rules: %w", dupErr)
		}
		return fd, nil
	}
	return -1, fmt.Errorf("the terminal rules kept changing: %w", lastErr)
}

// terminalRulesNow returns rules made for / and /dev as they are now.
func terminalRulesNow(abi int) (*terminalRules, error) {
	var stamp [2]dirStamp
	for i, dir := range []string{"/", "/dev"} {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return nil, fmt.Errorf("stat %s: %w", dir, err)
		}
		stamp[i] = dirStamp{uint64(st.Dev), uint64(st.Ino), st.Mtim, st.Ctim}
	}
	cur := currentTerminalRules.Load()
	if cur != nil && cur.stamp == stamp {
		return cur, nil
	}
	made, err := makeTerminalRules(abi)
	if err != nil {
		return nil, err
	}
	made.stamp = stamp
	if !currentTerminalRules.CompareAndSwap(cur, made) {
		_ = made.ruleset.Close() // another start made a set at the same time: use that one
		return currentTerminalRules.Load(), nil
	}
	if cur != nil {
		_ = cur.ruleset.Close() // the runtime closes it once no restriction uses it any more
	}
	return made, nil
}

// makeTerminalRules makes the rule set terminalRules describes.
func makeTerminalRules(abi int) (*terminalRules, error) {
	attr := unix.LandlockRulesetAttr{Handled_access_fs: unix.LANDLOCK_ACCESS_FS_READ_FILE}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), rulesetAttrSize(abi), 0)
	if errno != 0 {
		return nil, fmt.Errorf("landlock_create_ruleset (terminals): %w", errno)
	}
	ruleset := int(fd)
	g := terminalGrants{ruleset: ruleset, majors: terminalMajors()}
	err := g.grantEntries("/", func(name string) bool { return name != "dev" })
	if err == nil {
		err = g.grantDev("/dev")
	}
	if err != nil {
		_ = unix.Close(ruleset)
		return nil, err
	}
	return &terminalRules{ruleset: os.NewFile(uintptr(ruleset), "landlock terminal rules")}, nil
}

// terminalGrants adds read rules to ruleset, keeping off the terminal
// devices: character devices of the majors in majors.
type terminalGrants struct {
	ruleset int
	majors  map[uint32]bool
}

// grantEntries grants reading beneath each entry of dir that keep allows.
// Symbolic links get no rule: Landlock checks the file a path ends at,
// under its own directory's rules.
func (g terminalGrants) grantEntries(dir string, keep func(name string) bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("the terminal rules: %w", err)
	}
	for _, e := range entries {
		if !keep(e.Name()) || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		if err := g.grant(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// grantDev grants reading beneath every entry of dir (/dev or beneath it)
// but a terminal device, a devpts file system (every entry there is a
// pty) and a directory that cannot be read (it might hold either).
// Directories that hold a terminal are granted entry by entry.
func (g terminalGrants) grantDev(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing granted beneath it: see above
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			continue
		case e.IsDir() && g.holdsTerminal(path):
			if err := g.grantDev(path); err != nil {
				return err
			}
			continue
		case e.Type()&fs.ModeCharDevice != 0 && g.isTerminal(path):
			continue
		}
		if err := g.grant(path); err != nil {
			return err
		}
	}
	return nil
}

// grant adds the rule for path. A path the server cannot open (gone
// meanwhile, a stale network mount) gets none: jobs cannot read beneath
// it then, which confines them more, never less.
func (g terminalGrants) grant(path string) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	rule := unix.LandlockPathBeneathAttr{Allowed_access: unix.LANDLOCK_ACCESS_FS_READ_FILE, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(g.ruleset),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	switch errno {
	case 0, unix.EBADFD: // EBADFD: a kernel-internal file system, which Landlock never checks
		return nil
	}
	return fmt.Errorf("the terminal rules: landlock_add_rule %s: %w", path, errno)
}

// isTerminal reports whether the character device at path is a terminal
// other than /dev/tty, the opener's own.
func (g terminalGrants) isTerminal(path string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return true // unknown: keep it closed
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return false
	}
	major, minor := unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	if major == 5 && minor == 0 {
		return false // /dev/tty, by whatever name
	}
	return g.majors[major]
}

// holdsTerminal reports whether the directory at path is, or holds at any
// depth, a terminal device or a devpts file system, or cannot be read.
func (g terminalGrants) holdsTerminal(path string) bool {
	var fsStat unix.Statfs_t
	if err := unix.Statfs(path, &fsStat); err != nil || fsStat.Type == unix.DEVPTS_SUPER_MAGIC {
		return true
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return true
	}
	for _, e := range entries {
		sub := filepath.Join(path, e.Name())
		switch {
		case e.IsDir() && g.holdsTerminal(sub):
			return true
		case e.Type()&fs.ModeCharDevice != 0 && g.isTerminal(sub):
			return true
		}
	}
	return false
}

// fixedTerminalMajors are the device majors of terminals whatever the
// kernel reports: BSD ptys (2, 3), virtual consoles and serial ports (4),
// /dev/tty, /dev/console and /dev/ptmx (5), the consoles' screen memory
// (7, /dev/vcs*), Unix98 pty masters and slaves (128–143), and common
// serial and hypervisor consoles (166 ttyACM, 188 ttyUSB, 204, 229 hvc).
var fixedTerminalMajors = []uint32{2, 3, 4, 5, 7, 128, 129, 130, 131, 132, 133, 134, 135,
	136, 137, 138, 139, 140, 141, 142, 143, 166, 188, 204, 229}

// terminalMajors is fixedTerminalMajors and the major of every terminal
// driver the kernel lists in /proc/tty/drivers (which names dynamic ones).
func terminalMajors() map[uint32]bool {
	majors := map[uint32]bool{}
	for _, m := range fixedTerminalMajors {
		majors[m] = true
	}
	drivers, err := os.ReadFile("/proc/tty/drivers")
	if err != nil {
		return majors // hidden in some containers: the fixed ones then
	}
	for _, line := range strings.Split(string(drivers), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		if m, err := strconv.ParseUint(fields[2], 10, 32); err == nil {
			majors[uint32(m)] = true
		}
	}
	return majors
}
