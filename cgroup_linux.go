package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subtreePrefix starts the name of every server's own directory under its
// parent cgroup; serverLeaf is the leaf the server moves itself into, whose
// populated flag says whether that server still lives. serverHeld, an
// empty cgroup beside the leaf, says the server holds a flock(2) on its
// subtree directory for its whole life, so that a leaf populated by what a
// job moved into it is not taken for a live server once the lock is free.
const (
	subtreePrefix = "mcp-exec-"
	serverLeaf    = "server"
	serverHeld    = "held"
)

// cgroupEmptyDuration bounds how long removing a subtree waits for what it
// killed to be gone.
const cgroupEmptyDuration = 5 * time.Second

// cgroupWatcher is the process-wide watch on the jobs' cgroup.events
// files. openJobTrees sets it once, before any job starts; nil on process
// groups.
var cgroupWatcher *cgroupWatch

// intoCgroup makes a child started with sys begin in the cgroup directory
// open as fd (clone3 with CLONE_INTO_CGROUP), so its first instruction
// already runs there.
func intoCgroup(sys *syscall.SysProcAttr, fd int) {
	sys.UseCgroupFD, sys.CgroupFD = true, fd
}

// cgroupChanged is closed at the next change of a watched job cgroup's
// events (a cgroup emptied); nil, which never closes, without cgroups.
func cgroupChanged() <-chan struct{} {
	if cgroupWatcher == nil {
		return nil
	}
	return cgroupWatcher.next()
}

// limitRefusal is a per-job limit the subtree cannot enforce: the server
// refuses to start rather than fall back.
type limitRefusal struct{ msg string }

// Error is the refusal's whole message.
func (e limitRefusal) Error() string { return e.msg }

// openJobTrees chooses where jobs' processes are kept, once at start, as
// MCP_EXEC_CGROUP (mode) says: a cgroup per job under a subtree the server
// may write, or process groups. why says, when it is process groups, why.
// An error refuses the start: an explicit PATH that cannot be used, or a
// limit nothing here can enforce.
func openJobTrees(mode string, limits jobLimits) (jobTrees, string, error) {
	if mode == cgroupOff {
		why := "MCP_EXEC_CGROUP=off"
		return groupTrees{}, why, refuseLimitsWithout(limits, why)
	}
	t, err := makeCgroupTrees(mode, limits)
	if err == nil {
		return t, "", nil
	}
	var refusal limitRefusal
	switch {
	case errors.As(err, &refusal):
		return nil, "", err
	case mode != cgroupAuto:
		return nil, "", fmt.Errorf("MCP_EXEC_CGROUP=%s cannot be used: %w; give a writable cgroup v2 directory, auto or off", mode, err)
	}
	why := err.Error()
	return groupTrees{}, why, refuseLimitsWithout(limits, why)
}

// probeTreeKind says which tree a server started now would use, without
// changing anything: for --help.
func probeTreeKind(mode string) string {
	if mode == cgroupOff || intoCgroupOffered() != nil {
		return treeProcessGroup
	}
	mount, rw := cgroup2Mount()
	if mount == "" || !rw {
		return treeProcessGroup
	}
	parent := mode
	if mode == cgroupAuto {
		own, err := ownCgroup()
		if err != nil {
			return treeProcessGroup
		}
		parent = filepath.Join(mount, own)
	}
	if unix.Access(parent, unix.W_OK) != nil {
		return treeProcessGroup
	}
	return treeCgroup
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted (its root
// as this process sees it) from /proc/self/mountinfo, and whether it is
// mounted read-write; "" when it is not mounted.
func cgroup2Mount() (string, bool) {
	text, err := readProcFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(text), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		fields, fsFields := strings.Fields(left), strings.Fields(right)
		if !ok || len(fields) < 6 || len(fsFields) < 1 || fsFields[0] != "cgroup2" || fields[3] != "/" {
			continue
		}
		return fields[4], slices.Contains(strings.Split(fields[5], ","), "rw")
	}
	return "", false
}

// cloneArgs is the kernel's struct clone_args up to its cgroup field
// (CLONE_ARGS_SIZE_VER2).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// intoCgroupOffered says why a child cannot be started inside a cgroup
// here, or nil when it can: clone3 must exist (an emulator such as
// qemu-user may lack it) and know CLONE_INTO_CGROUP (Linux 5.7). It asks
// for a child in the cgroup of a descriptor that cannot be open, so the
// kernel refuses before any child exists: EBADF means both are there.
func intoCgroupOffered() error {
	args := cloneArgs{flags: unix.CLONE_INTO_CGROUP, exitSignal: uint64(unix.SIGCHLD), cgroup: math.MaxInt32}
	_, _, errno := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	switch errno {
	case unix.EBADF:
		return nil
	case unix.ENOSYS:
		return errors.New("clone3 is not available here (an emulator or a kernel before 5.3), so no job could start inside its cgroup")
	case unix.EINVAL:
		return errors.New("the kernel does not know CLONE_INTO_CGROUP (Linux 5.7), so no job could start inside its cgroup")
	}
	return fmt.Errorf("clone3 into a cgroup could not be checked (%v)", errno)
}

// ownCgroup is this process's cgroup v2 path, from /proc/self/cgroup's
// "0::" line.
func ownCgroup() (string, error) {
	text, err := readProcFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(text), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// cgroupTrees keeps each job in a cgroup of its own, below the server's
// subtree.
type cgroupTrees struct {
	mount                string // where the cgroup v2 hierarchy is mounted: /proc/PID/cgroup paths are below it
	home                 string // the cgroup the server started in, to go back to at shutdown
	subtree              string // the server's own directory; its leaf holds the server
	made                 bool   // this server made subtree (set once, before any job), so it may empty it
	unhold               func() // drops the server's lock on its subtree (nil: none is held)
	limits               jobLimits
	pidsPeak, memoryPeak bool         // the subtree has the pids, memory controller
	seq                  atomic.Int64 // numbers the job directories
	sampler              procsSampler // counts processes where pidsPeak is false

	mu    sync.Mutex          // guards boxes; never held over a system call
	boxes map[*cgroupBox]bool // boxes not yet removed
}

// makeCgroupTrees makes the server's subtree under its own cgroup (mode
// auto) or the directory mode names, after emptying leftovers of servers
// that were killed, and moves the server into the subtree's leaf.
func makeCgroupTrees(mode string, limits jobLimits) (*cgroupTrees, error) {
	mount, rw := cgroup2Mount()
	switch {
	case mount == "":
		return nil, errors.New("no cgroup v2 hierarchy is mounted")
	case !rw:
		return nil, fmt.Errorf("the cgroup v2 hierarchy at %s is mounted read-only", mount)
	}
	if err := intoCgroupOffered(); err != nil {
		return nil, err
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(mount, own)
	parent := home
	if mode != cgroupAuto {
		parent = filepath.Clean(mode)
		if !strings.HasPrefix(parent+"/", strings.TrimSuffix(mount, "/")+"/") {
			return nil, fmt.Errorf("%s is not inside the cgroup v2 hierarchy at %s", parent, mount)
		}
	}
	if err := unix.Access(parent, unix.W_OK); err != nil {
		return nil, fmt.Errorf("cannot write the cgroup %s: %w", parent, err)
	}
	if err := offersLimits(parent, limits); err != nil {
		return nil, err
	}
	subtree := filepath.Join(parent, subtreePrefix+randomHex(6))
	t := &cgroupTrees{mount: mount, home: home, subtree: subtree, limits: limits, boxes: map[*cgroupBox]bool{}}
	if err := cleanThenEnter(parent, cgroupLockDuration, t.enter); err != nil {
		t.leave()
		return nil, err
	}
	if err := t.enableControllers(parent); err != nil {
		t.leave()
		return nil, err
	}
	w, err := newCgroupWatch()
	if err != nil {
		t.leave()
		return nil, err
	}
	cgroupWatcher = w
	return t, nil
}

// enter makes the subtree and its leaf and moves the server into the leaf:
// cgroup v2 lets only a cgroup without processes of its own hand
// controllers to its children. Then it locks the subtree for the server's
// life and marks it so (serverHeld); a server that cannot is still
// known alive by its leaf, as before the mark.
func (t *cgroupTrees) enter() error {
	for _, dir := range []string{t.subtree, filepath.Join(t.subtree, serverLeaf)} {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("make the cgroup %s: %w", dir, err)
		}
		t.made = true
	}
	// "0" is this process, whatever pid namespace it is in.
	if err := writeCgroupFile(filepath.Join(t.subtree, serverLeaf), "cgroup.procs", "0"); err != nil {
		return fmt.Errorf("move the server into %s: %w", filepath.Join(t.subtree, serverLeaf), err)
	}
	// The lock before the mark: a mark always means a lock was held.
	unlock, locked := lockCgroupDir(t.subtree, 0)
	if locked && unix.Mkdir(filepath.Join(t.subtree, serverHeld), 0o755) == nil {
		t.unhold = unlock
		return nil
	}
	unlock()
	logf("the cgroup %s cannot be locked for the server's life; a server killed after a job moved a process into its leaf leaves it behind", t.subtree)
	return nil
}

// leave moves the server back where it started and removes the subtree
// it made. Once the server is out, whatever is still below the subtree
// (a process a job moved into the server's leaf, a cgroup a job made
// beside its own) is killed and removed with it, deepest first: a leaf
// left populated would pass for a live server's and never be cleaned.
// Best effort: a subtree left is a leftover the next server removes.
func (t *cgroupTrees) leave() {
	moved := writeCgroupFile(t.home, "cgroup.procs", "0") == nil
	if !t.made {
		return
	}
	if unhold := t.unhold; unhold != nil {
		t.unhold = nil
		defer unhold() // once the subtree is gone, or left as a leftover
	}
	if own, err := ownCgroup(); moved && err == nil && !below(filepath.Join(t.mount, own), t.subtree) {
		removeCgroupTree(t.subtree)
		return
	}
	// Still inside: killing the subtree would kill the server.
	_ = unix.Rmdir(filepath.Join(t.subtree, serverHeld)) // best effort, as above
	_ = unix.Rmdir(filepath.Join(t.subtree, serverLeaf))
	_ = unix.Rmdir(t.subtree)
}

// below reports whether the cgroup path is dir or a directory below it.
func below(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// offersLimits refuses limits whose controller parent's cgroup does not
// offer: no subtree below it can have that controller.
func offersLimits(parent string, limits jobLimits) error {
	offered := strings.Fields(readCgroupFile(parent, "cgroup.controllers"))
	for _, row := range limits.rows() {
		if row.set && !slices.Contains(offered, row.controller) {
			return limitRefusal{fmt.Sprintf("%s is refused: the cgroup %s offers no %s controller (it offers: %s), so the limit could not be enforced; unset it, or run where the cgroup v2 %s controller is delegated",
				row.setting, parent, row.controller, wordsOr(offered, "none"), row.controller)}
		}
	}
	return nil
}

// enableControllers hands the subtree's job directories the controllers
// the limits need (refusing the start where that fails) and, best effort,
// those usage reads.
func (t *cgroupTrees) enableControllers(parent string) error {
	for _, row := range t.limits.rows() {
		if !row.set {
			continue
		}
		for _, dir := range []string{parent, t.subtree} {
			if slices.Contains(strings.Fields(readCgroupFile(dir, "cgroup.subtree_control")), row.controller) {
				continue
			}
			if err := writeCgroupFile(dir, "cgroup.subtree_control", "+"+row.controller); err != nil {
				return limitRefusal{fmt.Sprintf("%s is refused: the %s controller cannot be enabled in the cgroup %s (%v), so the limit could not be enforced; unset it, or run where that cgroup has no processes of its own (a systemd scope with Delegate=yes)",
					row.setting, row.controller, dir, err)}
			}
		}
	}
	offered := strings.Fields(readCgroupFile(t.subtree, "cgroup.controllers"))
	for _, c := range []string{"memory", "pids"} {
		if slices.Contains(offered, c) {
			_ = writeCgroupFile(t.subtree, "cgroup.subtree_control", "+"+c) // best effort: usage only
		}
	}
	enabled := strings.Fields(readCgroupFile(t.subtree, "cgroup.subtree_control"))
	t.pidsPeak, t.memoryPeak = slices.Contains(enabled, "pids"), slices.Contains(enabled, "memory")
	return nil
}

// cgroupLockDuration bounds how long a starting server waits for another
// that is cleaning leftovers (each waits up to cgroupEmptyDuration).
const cgroupLockDuration = 3 * cgroupEmptyDuration

// lockCgroupDir takes an exclusive flock(2) on the directory dir, trying
// until wait has passed; unlock releases it (and is safe to call when
// locked is false). Servers take it on their parent cgroup around cleaning
// leftovers and entering their own subtree.
func lockCgroupDir(dir string, wait time.Duration) (unlock func(), locked bool) {
	fd, err := openRetrying(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return func() {}, false
	}
	unlock = func() { _ = unix.Close(fd) } // closing the only descriptor drops the lock
	deadline := time.Now().Add(wait)
	backoff := time.Millisecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return unlock, true
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline):
			return unlock, false
		}
		// Another server is cleaning: rare, and it ends by itself, so a
		// bounded backoff is simpler than a lock-waiting thread.
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// cleanThenEnter removes the leftovers under parent, then runs enter,
// which makes and enters a new subtree. A subtree whose leaf is empty is a
// dead server's, except while its server is between making the leaf and
// entering it: both steps run under one lock on parent, so no server sees
// another's half-made subtree. Where the lock is not had within wait, the
// leftovers stay for a later server and enter runs all the same.
func cleanThenEnter(parent string, wait time.Duration, enter func() error) error {
	unlock, locked := lockCgroupDir(parent, wait)
	defer unlock()
	if locked {
		cleanLeftovers(parent)
	} else {
		logf("leftover cgroups under %s are not cleaned: another process held its lock for %v", parent, wait)
	}
	return enter()
}

// cleanLeftovers empties and removes the subtrees under parent of servers
// that are gone: their leaf has no process, or, where the server marked
// the subtree (serverHeld), no server holds its lock any more, whatever
// a job moved into the leaf. A live server's leaf holds it. A subtree named as a server names its own (subtreePrefix and 12 hex
// digits) that has no leaf at all is a dead server's too: one killed while
// it removed its subtree, or one that left a cgroup its job made and so
// removed its leaf but not its subtree. The caller holds
// lockCgroupDir(parent), so no subtree is half made.
func cleanLeftovers(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), subtreePrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		switch populatedAt(filepath.Join(dir, serverLeaf)) {
		case 0:
		case -1:
			if !isSubtreeName(e.Name()) || !missing(filepath.Join(dir, serverLeaf)) {
				continue // not one of ours
			}
		default:
			if missing(filepath.Join(dir, serverHeld)) || heldByServer(dir) {
				continue // a live server's, or one from before the lock
			}
		}
		if removeCgroupTree(dir) {
			logf("removed the cgroup %s a server that was killed left, with what ran in it", dir)
		}
	}
}

// heldByServer reports whether a server holds its lock on the subtree dir
// (taken in enter): a leaf populated by a process a job moved into it is a
// dead server's if not. What cannot be tried counts as held.
func heldByServer(dir string) bool {
	unlock, locked := lockCgroupDir(dir, 0)
	unlock()
	return !locked
}

// isSubtreeName reports whether name is one a server gives its subtree:
// subtreePrefix and 12 hex digits (randomHex(6)).
func isSubtreeName(name string) bool {
	id, ok := strings.CutPrefix(name, subtreePrefix)
	if !ok || len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// missing reports whether path does not exist (ENOENT); another error,
// such as EACCES, is not taken for absence.
func missing(path string) bool {
	var st unix.Stat_t
	for {
		err := unix.Stat(path, &st)
		if !errors.Is(err, unix.EINTR) {
			return errors.Is(err, unix.ENOENT)
		}
	}
}

// removeCgroupTree thaws every cgroup below dir (a server killed while it
// read a job frozen left it so), kills every process there, waits
// (bounded) for dir to empty and removes dir and every directory below
// it, deepest first. It reports whether dir is gone.
func removeCgroupTree(dir string) bool {
	thawCgroupTree(dir)
	killCgroup(dir)
	awaitCgroupEmpty(dir, time.Now().Add(cgroupEmptyDuration))
	return removeCgroupDirs(dir)
}

// cgroupDirs lists dir and every cgroup directory below it, parents
// before their children; what cannot be read is left out. A cgroup
// directory's link count is two plus its subdirectories, so one stat
// spares the walk where a job made none.
func cgroupDirs(dir string) []string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil && st.Nlink <= 2 {
		return []string{dir}
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil // best effort: what cannot be read is not removed
	})
	return dirs
}

// removeCgroupDirs removes dir and every directory below it, deepest
// first, and reports whether dir is gone. A cgroup that still has a
// process (EBUSY) stays, with its parents.
func removeCgroupDirs(dir string) bool {
	dirs := cgroupDirs(dir)
	for i := len(dirs) - 1; i >= 0; i-- {
		for {
			err := unix.Rmdir(dirs[i])
			if !errors.Is(err, unix.EINTR) {
				break // ENOENT: gone already; EBUSY: reported below
			}
		}
	}
	return missing(dir)
}

// thawCgroupTree writes 0 to the cgroup.freeze of dir and of every cgroup
// below it, parents first (a child cannot thaw while its parent is
// frozen). Best effort: a kernel without cgroup.freeze froze nothing, and
// cgroup.kill ends frozen processes all the same.
func thawCgroupTree(dir string) {
	for _, d := range cgroupDirs(dir) {
		_ = writeCgroupFile(d, "cgroup.freeze", "0") // best effort, as above; 0 again is a no-op
	}
}

// killCgroup sends SIGKILL to every process in dir and below: at once
// through cgroup.kill, or member by member on a kernel without it.
func killCgroup(dir string) {
	if writeCgroupFile(dir, "cgroup.kill", "1") == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			for _, pid := range cgroupPids(path) {
				_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: it just went
			}
		}
		return nil
	})
}

// awaitCgroupEmpty waits until dir's cgroup.events says populated 0 or
// deadline passes, woken by inotify on the file, and reports whether it
// emptied (a cgroup gone counts as empty).
func awaitCgroupEmpty(dir string, deadline time.Time) bool {
	return awaitCgroupEvents(dir, func() bool { return populatedAt(dir) <= 0 }, deadline)
}

// awaitCgroupEvents waits until done holds or deadline passes, testing it
// at each change of dir's cgroup.events, seen through an inotify watch of
// its own, and reports whether it held. Where no watch can be set, done is
// tested once. A job's box waits on the shared watch instead (awaitEvents).
func awaitCgroupEvents(dir string, done func() bool, deadline time.Time) bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return done()
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(dir, "cgroup.events"), unix.IN_MODIFY); err != nil {
		return done()
	}
	buf := make([]byte, 4096)
	for {
		if done() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return done()
		}
		for { // drain: only the file's state matters
			if _, err := unix.Read(fd, buf); err != nil && !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}
}

// populatedAt is dir's cgroup.events populated: 1, 0, or -1 when it cannot
// be read (gone, or no cgroup).
func populatedAt(dir string) int { return cgroupEventAt(dir, "populated") }

// frozenAt is dir's cgroup.events frozen: 1 once every process below dir
// is frozen, 0, or -1 when it cannot be read (gone, no cgroup, or a kernel
// without the freezer, before 5.2).
func frozenAt(dir string) int { return cgroupEventAt(dir, "frozen") }

// cgroupEventAt is the flag key of dir's cgroup.events: 1, 0, or -1 when
// it cannot be read.
func cgroupEventAt(dir, key string) int {
	text := readCgroupFile(dir, "cgroup.events")
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			if v == "0" {
				return 0
			}
			return 1
		}
	}
	return -1
}

// cgroupTreePids lists the pids in the cgroup.procs of dir and of every
// cgroup below it.
func cgroupTreePids(dir string) []int {
	var pids []int
	for _, d := range cgroupDirs(dir) {
		pids = append(pids, cgroupPids(d)...)
	}
	return pids
}

// cgroupPids lists the pids in dir's cgroup.procs (this process's pid
// namespace's numbers).
func cgroupPids(dir string) []int {
	var pids []int
	for _, f := range strings.Fields(readCgroupFile(dir, "cgroup.procs")) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readCgroupFile is a cgroup file's text; "" when it cannot be read.
func readCgroupFile(dir, name string) string {
	b, err := readProcFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// writeCgroupFile writes value to a cgroup file in one write(2), as the
// kernel reads each write as one command.
func writeCgroupFile(dir, name, value string) error {
	fd, err := openRetrying(filepath.Join(dir, name), unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// openRetrying is open(2) again on EINTR.
func openRetrying(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}

// wordsOr joins words with spaces, or is none for no words.
func wordsOr(words []string, none string) string {
	if len(words) == 0 {
		return none
	}
	return strings.Join(words, " ")
}

// kind says jobs are kept in cgroups.
func (t *cgroupTrees) kind() string { return treeCgroup }

// box makes the next job's directory with the limits written, open for
// the spawn and watched for emptying; with countProcs, and no pids
// controller to keep the peak, the sampler counts its processes. A directory that cannot be made
// (the descendants limit, descriptors) refuses the job: it never runs
// outside its cgroup.
func (t *cgroupTrees) box(countProcs bool) (jobBox, error) {
	dir := filepath.Join(t.subtree, "job-"+strconv.FormatInt(t.seq.Add(1), 10))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the job's cgroup %s (%w); the job is refused rather than run outside a cgroup", dir, err)
	}
	b := &cgroupBox{dir: dir, fd: -1, trees: t, start: bootTicks()}
	err := t.writeLimits(dir)
	if err == nil {
		b.fd, err = openRetrying(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	}
	if err == nil {
		err = cgroupWatcher.add(b)
		b.watch = cgroupWatcher
	}
	if err != nil {
		b.started()
		_ = unix.Rmdir(dir) // best effort: nothing ran in it
		return nil, fmt.Errorf("cannot ready the job's cgroup %s (%w); the job is refused rather than run outside a cgroup", dir, err)
	}
	t.mu.Lock()
	t.boxes[b] = true
	t.mu.Unlock()
	if countProcs && !t.pidsPeak {
		t.sampler.add(b)
	}
	return b, nil
}

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat's start time
// (procInfo.start): 100 on every Linux architecture Go builds for.
const clockTicksPerSecond = 100

// bootTicks is the time since boot in clock ticks, rounded down, as
// /proc/PID/stat counts a process's start (CLOCK_BOOTTIME, in this time
// namespace): a process started after it has a start no smaller. 0 where
// the clock cannot be read, which every process started after.
func bootTicks() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano()) / uint64(time.Second/clockTicksPerSecond)
}

// cpuPeriodMicros is the cpu.max period a job's CPU limit is a share of.
const cpuPeriodMicros = 100000

// writeLimits writes the per-job limits into the job's directory.
func (t *cgroupTrees) writeLimits(dir string) error {
	l := t.limits
	files := []struct {
		set         bool
		name, value string
	}{
		{l.memoryBytes > 0, "memory.max", strconv.FormatInt(l.memoryBytes, 10)},
		{l.pids > 0, "pids.max", strconv.Itoa(l.pids)},
		{l.cpuCores > 0, "cpu.max", fmt.Sprintf("%d %d", int64(l.cpuCores*cpuPeriodMicros), cpuPeriodMicros)},
	}
	for _, f := range files {
		if f.set {
			if err := writeCgroupFile(dir, f.name, f.value); err != nil {
				return fmt.Errorf("write %s: %w", f.name, err)
			}
		}
	}
	return nil
}

// close kills what is left in every job's cgroup and the cgroups below
// it (cgroup.kill reaches them), waits (bounded) for them to empty,
// removes them deepest first, and takes the server out of its subtree,
// removing what is left there (leave).
func (t *cgroupTrees) close() {
	t.mu.Lock()
	boxes := make([]*cgroupBox, 0, len(t.boxes))
	for b := range t.boxes {
		boxes = append(boxes, b)
	}
	t.mu.Unlock()
	for _, b := range boxes {
		killCgroup(b.dir)
	}
	deadline := time.Now().Add(cgroupEmptyDuration)
	for _, b := range boxes {
		b.awaitEvents(func() bool { return populatedAt(b.dir) <= 0 }, deadline)
		b.remove()
	}
	t.leave()
}

// cgroupBox is one job's cgroup directory.
type cgroupBox struct {
	dir   string
	fd    int // the directory, open until the spawn is done; -1 after
	trees *cgroupTrees
	start uint64       // when the directory was made, in clock ticks since boot (as procInfo.start): every process of the job started since
	watch *cgroupWatch // the watch on its cgroup.events; nil when it is not watched

	// snapMu lets one snapshot at a time freeze the cgroup, so that no
	// snapshot thaws it under another's reading. Held over the freeze, the
	// reading and the thaw (bounded); no other lock is taken under it.
	snapMu sync.Mutex
	// removeMu lets one removal at a time run, so that close does not
	// go on to the subtree while the watcher is still removing a job's
	// directories. Held over the rmdirs; no other lock is taken under it.
	removeMu sync.Mutex

	mu       sync.Mutex // guards the fields below; never held over a system call
	procsMax int        // the most processes seen in it at once
	released bool       // the job is forgotten: remove once empty
	removed  bool       // its directory and those below it are gone
}

// spawnFD is the directory's descriptor, for clone3's CLONE_INTO_CGROUP.
func (b *cgroupBox) spawnFD() int { return b.fd }

// started closes the directory's descriptor once the child is inside.
func (b *cgroupBox) started() {
	if b.fd >= 0 {
		_ = unix.Close(b.fd) // the child has it in its cgroup already
		b.fd = -1
	}
}

// members reads cgroup.procs, the sub-cgroups' too, counting them
// toward procs_max.
func (b *cgroupBox) members() ([]int, bool) {
	pids := cgroupTreePids(b.dir)
	b.mu.Lock()
	b.procsMax = max(b.procsMax, len(pids))
	b.mu.Unlock()
	return pids, true
}

// snapshotFreezeDuration bounds how long a snapshot waits for a job's
// cgroup to freeze: a member in uninterruptible sleep is frozen only once
// it wakes, and the reading must not wait on a stuck disk.
const snapshotFreezeDuration = 100 * time.Millisecond

// snapshot freezes the cgroup (its sub-cgroups with it), waits on the
// watch for cgroup.events to say frozen 1 (at most
// snapshotFreezeDuration), reads every member's pid and /proc entry, and
// thaws it, on every path out. ok is true only when the cgroup was frozen
// before the reading and still was after it: a member of the job's own
// user may write cgroup.freeze too. A frozen process reads as sleeping
// (and one just thawed as running), so a member that was running just
// before the freeze is given as running; dead (Z), stopped (T) and
// uninterruptible (D) read true frozen. A server killed between freeze
// and thaw leaves the job frozen: the next server thaws it before it
// kills it (removeCgroupTree).
func (b *cgroupBox) snapshot() ([]procInfo, bool) {
	b.snapMu.Lock()
	defer b.snapMu.Unlock()
	running := map[int]uint64{} // pid to start of each member running before the freeze
	for _, pid := range cgroupTreePids(b.dir) {
		if p, there := procNow(pid); there && p.state == "R" {
			running[pid] = p.start
		}
	}
	procs, ok := b.frozenReading(snapshotFreezeDuration)
	for i, p := range procs {
		if start, was := running[p.pid]; was && start == p.start && p.state == "S" {
			procs[i].state = "R"
		}
	}
	return procs, ok
}

// frozenReading is snapshot's reading: the members' /proc entries, oldest
// pid first, and whether they were read with the cgroup frozen, which it
// waits for until wait has passed. The cgroup is thawed before it
// returns. The caller holds snapMu.
func (b *cgroupBox) frozenReading(wait time.Duration) ([]procInfo, bool) {
	deadline := time.Now().Add(wait)
	// Thawed on every way out, a panic's included; 0 on a cgroup that
	// never froze is a no-op.
	defer b.thaw()
	err := writeCgroupFile(b.dir, "cgroup.freeze", "1")
	if err != nil && !errors.Is(err, unix.ENOENT) {
		logf("cannot freeze the cgroup %s to read its processes at one instant (%v); they are read as they run", b.dir, err)
	}
	for {
		frozen := err == nil && b.awaitEvents(func() bool { return frozenAt(b.dir) == 1 }, deadline)
		procs := b.readMembers()
		// Exact only if it was frozen all along: a member's own user may
		// write cgroup.freeze too, and where a freeze closely follows a
		// thaw (the last snapshot's) the kernel can say frozen 1 and then
		// 0 again for a moment.
		switch {
		case frozen && frozenAt(b.dir) == 1:
			return procs, true
		case !frozen || !time.Now().Before(deadline):
			return procs, false
		}
	}
}

// readMembers is the /proc entry of every process in the cgroup and those
// below it, oldest pid first, counted toward procs_max.
func (b *cgroupBox) readMembers() []procInfo {
	pids := cgroupTreePids(b.dir)
	procs := make([]procInfo, 0, len(pids))
	for _, pid := range pids {
		if p, there := procNow(pid); there {
			procs = append(procs, p)
		}
	}
	slices.SortFunc(procs, func(x, y procInfo) int { return x.pid - y.pid })
	b.mu.Lock()
	b.procsMax = max(b.procsMax, len(pids))
	b.mu.Unlock()
	return procs
}

// thaw writes 0 to the cgroup's cgroup.freeze. ENOENT (the cgroup is gone,
// or the kernel has no freezer) leaves nothing frozen; another error is
// logged, as the job's processes then stay frozen until they are killed.
func (b *cgroupBox) thaw() {
	if err := writeCgroupFile(b.dir, "cgroup.freeze", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
		logf("cannot thaw the cgroup %s (%v): its processes stay frozen until the job is killed", b.dir, err)
	}
}

// awaitEvents waits until done holds or deadline passes, testing it at
// each change of the cgroup's events as the shared watch announces them
// (or through a watch of its own where the box is not watched), and
// reports whether it held.
func (b *cgroupBox) awaitEvents(done func() bool, deadline time.Time) bool {
	if b.watch == nil {
		return awaitCgroupEvents(b.dir, done, deadline)
	}
	for {
		// Taken before the test, so a change between the two still wakes.
		changed := b.watch.next()
		if done() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// populated reads cgroup.events: whether any process is left.
func (b *cgroupBox) populated() bool { return populatedAt(b.dir) == 1 }

// killAll writes cgroup.kill: every member gets SIGKILL at once.
func (b *cgroupBox) killAll() bool {
	killCgroup(b.dir)
	return true
}

// procsSampleMaxDuration bounds the gap between two counts of the jobs'
// processes where no pids controller keeps their peak, while processes
// are being created; procsSampleMinDuration is the first gap after a job
// starts, when a short job forks most.
const (
	procsSampleMinDuration = 2 * time.Millisecond
	procsSampleMaxDuration = time.Second
)

// procsSampler counts the processes of every job cgroup that no pids
// controller keeps the peak of: one goroutine for them all, running only
// while there are some, woken on a backoff. It reads their cgroup.procs
// only when a process was created in this pid namespace since its last
// count (the newest pid in /proc/loadavg), so jobs that sleep cost one
// small read a second, not one per job.
type procsSampler struct {
	added chan struct{} // carries a wake when a job's cgroup is added (capacity 1)

	mu      sync.Mutex          // guards boxes and running; never held over a system call
	boxes   map[*cgroupBox]bool // the cgroups counted
	running bool                // the goroutine runs (or is starting)
}

// add counts b's processes from now until remove.
func (s *procsSampler) add(b *cgroupBox) {
	s.mu.Lock()
	if s.boxes == nil {
		s.boxes, s.added = map[*cgroupBox]bool{}, make(chan struct{}, 1)
	}
	s.boxes[b] = true
	start := !s.running
	s.running = true
	added := s.added
	s.mu.Unlock()
	if start {
		go s.run()
	}
	nudge(added)
}

// remove stops counting b's processes.
func (s *procsSampler) remove(b *cgroupBox) {
	s.mu.Lock()
	delete(s.boxes, b)
	s.mu.Unlock()
}

// run counts until no cgroup is left. A new cgroup restarts the backoff.
func (s *procsSampler) run() {
	gap, due := procsSampleMinDuration, sampleGate{}
	for {
		s.mu.Lock()
		if len(s.boxes) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		boxes := make([]*cgroupBox, 0, len(s.boxes))
		for b := range s.boxes {
			boxes = append(boxes, b)
		}
		added := s.added
		s.mu.Unlock()
		if due.count(newestPid()) {
			for _, b := range boxes {
				b.members()
			}
		}
		t := time.NewTimer(gap)
		select {
		case <-added:
			t.Stop()
			gap = procsSampleMinDuration
		case <-t.C:
			gap = min(2*gap, procsSampleMaxDuration)
		}
	}
}

// sampleGate decides when the sampler reads the cgroups: on a wake that
// sees a new newest pid, and on the wake after it, since a child's pid is
// given out before the child shows in its cgroup.procs and a count taken
// in between misses it. A pid that cannot be read always counts.
type sampleGate struct {
	newest  string // the newest pid the last wake saw
	lastNew bool   // the last wake saw it change
}

// count takes this wake's newest pid and says whether to count now.
func (g *sampleGate) count(pid string) bool {
	fresh := pid == "" || pid != g.newest
	due := fresh || g.lastNew
	g.newest, g.lastNew = pid, fresh
	return due
}

// newestPid is the pid most recently given out in this pid namespace, the
// last field of /proc/loadavg; "" when it cannot be read.
func newestPid() string {
	b, err := readProcFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return ""
	}
	return fields[len(fields)-1]
}

// wasReleased reports whether the job was forgotten.
func (b *cgroupBox) wasReleased() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.released
}

// usage reads what the cgroup counted: CPU time, the most processes
// seen and, where the controllers are on, the peaks they kept.
func (b *cgroupBox) usage() *cgroupUsage {
	u := &cgroupUsage{}
	for _, line := range strings.Split(readCgroupFile(b.dir, "cpu.stat"), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			usec, _ := strconv.ParseInt(v, 10, 64)
			u.cpuSeconds = float64(usec) / 1e6
		}
	}
	b.members() // one more count, for a job too short for the sampler
	b.mu.Lock()
	u.procsMax = b.procsMax
	b.mu.Unlock()
	if b.trees.pidsPeak {
		if n, err := strconv.Atoi(strings.TrimSpace(readCgroupFile(b.dir, "pids.peak"))); err == nil {
			u.procsMax = max(u.procsMax, n)
		}
	}
	if b.trees.memoryPeak {
		u.memoryPeakBytes, _ = strconv.ParseInt(strings.TrimSpace(readCgroupFile(b.dir, "memory.peak")), 10, 64)
	}
	return u
}

// oomKilled reads memory.events: whether the kernel killed a member
// for memory.
func (b *cgroupBox) oomKilled() bool {
	for _, line := range strings.Split(readCgroupFile(b.dir, "memory.events"), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return v != "0"
		}
	}
	return false
}

// ended stops counting the job's processes.
func (b *cgroupBox) ended() { b.trees.sampler.remove(b) }

// release marks the job forgotten and removes its directory if it is
// empty; else the watcher removes it once it empties (shutdown at the
// latest): a daemon the job left keeps running until then.
func (b *cgroupBox) release() {
	b.mu.Lock()
	b.released = true
	b.mu.Unlock()
	if !b.populated() {
		b.remove()
	}
}

// remove removes the directory and the cgroups the job made below it,
// deepest first. Once they are gone the box is forgotten; while one stays
// (a process came back: EBUSY) the box stays listed, for the next event
// or for close.
func (b *cgroupBox) remove() {
	b.removeMu.Lock()
	defer b.removeMu.Unlock()
	b.mu.Lock()
	removed := b.removed
	b.mu.Unlock()
	if removed {
		return
	}
	b.started()
	if !removeCgroupDirs(b.dir) {
		return
	}
	b.mu.Lock()
	b.removed = true
	b.mu.Unlock()
	b.trees.sampler.remove(b)
	b.trees.mu.Lock()
	delete(b.trees.boxes, b)
	b.trees.mu.Unlock()
}

// cgroupWatch is one inotify descriptor watching every job's
// cgroup.events: its reader wakes kill and teardown waits when a cgroup
// empties, and removes a forgotten job's cgroup then.
type cgroupWatch struct {
	events *os.File // the inotify descriptor, non-blocking, read through the runtime's poller

	mu      sync.Mutex           // guards byWatch and changed; never held over a system call
	byWatch map[int32]*cgroupBox // the box of each watch descriptor
	changed broadcast            // announced after each batch of events
}

// newCgroupWatch starts the watch and its reader.
func newCgroupWatch() (*cgroupWatch, error) {
	// Non-blocking, so the reader parks in the runtime's poller rather
	// than holding a thread in read(2): each event then costs a
	// goroutine wake, not a thread's.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify for cgroup events: %w", err)
	}
	w := &cgroupWatch{events: os.NewFile(uintptr(fd), "inotify"), byWatch: map[int32]*cgroupBox{}, changed: newBroadcast()}
	go w.read()
	return w, nil
}

// next is the channel the next batch of events closes.
func (w *cgroupWatch) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed.next()
}

// add watches b's cgroup.events.
func (w *cgroupWatch) add(b *cgroupBox) error {
	// Through Control, not os.File.Fd, which would make the descriptor
	// blocking again.
	conn, err := w.events.SyscallConn()
	if err != nil {
		return err
	}
	wd, addErr := -1, error(nil)
	if err := conn.Control(func(fd uintptr) {
		wd, addErr = unix.InotifyAddWatch(int(fd), filepath.Join(b.dir, "cgroup.events"), unix.IN_MODIFY)
	}); err != nil {
		return err
	}
	if addErr != nil {
		return addErr
	}
	w.mu.Lock()
	w.byWatch[int32(wd)] = b
	w.mu.Unlock()
	return nil
}

// read reads events for good: each batch wakes the waiters, and a
// forgotten job's cgroup that emptied is removed.
func (w *cgroupWatch) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.events.Read(buf) // the poller retries EINTR and EAGAIN
		if err != nil {
			logf("cgroup events: %v; kill waits fall back to polling", err)
			return
		}
		var boxes []*cgroupBox
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if b, ok := w.byWatch[ev.Wd]; ok {
				if ev.Mask&unix.IN_IGNORED != 0 {
					delete(w.byWatch, ev.Wd) // the directory went
				} else {
					boxes = append(boxes, b)
				}
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		w.changed.announce()
		w.mu.Unlock()
		for _, b := range boxes {
			if b.wasReleased() && !b.populated() {
				b.remove()
			}
		}
	}
}
