package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The real-time signals: the kernel's run from 32 to 64, and the C library
// keeps the first two for itself, so RTMIN is 34 to kill(1) and strsignal(3).
const (
	realtimeFirst syscall.Signal = 32
	realtimeMin   syscall.Signal = 34
	realtimeMax   syscall.Signal = 64
)

// becomeSubreaper makes orphaned descendants re-parent to this process, so
// the reaper collects them and shutdown can find them. It reports false when
// the kernel lacks the feature (EINVAL before Linux 3.4).
func becomeSubreaper() (bool, error) {
	err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	return err == nil, err
}

// closeInheritedOnExec marks every descriptor above 2 close-on-exec, so the
// descriptors our own parent leaked to us never reach a job.
func closeInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	cloexecListed("/proc/self/fd") // kernels before 5.11
}

// readProcs lists every process visible in /proc. Processes that vanish
// while it reads are skipped.
func readProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	procs := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

// bootTime is when the system booted, from /proc/stat's btime, read once;
// zero when it cannot be read.
var bootTime = sync.OnceValue(func() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			if secs, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				return time.Unix(secs, 0)
			}
		}
	}
	return time.Time{}
})

// userHZ is the unit of /proc's start times: USER_HZ, 100 on every Linux
// architecture the server is built for.
const userHZ = 100

// ticksAt is t as /proc's start times count it: clock ticks since boot,
// rounded down and one tick early (btime is whole seconds); 0 when the
// boot time is unknown.
func ticksAt(t time.Time) uint64 {
	boot := bootTime()
	if boot.IsZero() || t.Before(boot) {
		return 0
	}
	ticks := uint64(t.Sub(boot) / (time.Second / userHZ))
	return max(ticks, 1+userHZ) - userHZ // btime drops up to a second
}

// pfExiting is the kernel's PF_EXITING: the process is in do_exit.
const pfExiting = 0x4

// readProc parses /proc/PID/stat; comm may hold spaces and parentheses, so
// the fields after it are found from the last ')'.
func readProc(pid int) (procInfo, bool) {
	b, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procInfo{}, false
	}
	rest := strings.Fields(s[end+1:])
	if len(rest) < 4 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(rest[1])
	pgid, _ := strconv.Atoi(rest[2])
	sid, _ := strconv.Atoi(rest[3])
	var start uint64
	var flags uint64
	if len(rest) > 6 {
		flags, _ = strconv.ParseUint(rest[6], 10, 64) // field 9, the kernel's flags
	}
	if len(rest) > 19 {
		start, _ = strconv.ParseUint(rest[19], 10, 64) // field 22, starttime
	}
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, sid: sid, comm: s[open+1 : end], state: rest[0], start: start,
		exiting: flags&pfExiting != 0}, true
}

// sessionMembers lists the processes in group or session id: a job's, whose
// process group and session are both its pid. It reads every process in
// /proc; groupSurvivors reads less where it can.
func sessionMembers(id int) []procInfo {
	return procsWhere(func(p procInfo) bool { return p.pgid == id || p.sid == id })
}

// procsWhere lists the processes in /proc that keep accepts; nil for none.
func procsWhere(keep func(procInfo) bool) []procInfo {
	var found []procInfo
	for _, p := range readProcs() {
		if keep(p) {
			found = append(found, p)
		}
	}
	return found
}

// descendants lists every process below pid in the process tree, read
// from the children files of each thread (/proc/PID/task/TID/children)
// down from pid: only what can be below it is opened, not every process.
// A kernel without those files is read whole instead (readProcs).
func descendants(pid int) []procInfo {
	if !childrenFiles() {
		return descendantsScanned(pid)
	}
	var found []procInfo
	seen := map[int]bool{pid: true}
	for below := childrenOf(pid); len(below) > 0 && len(found) < 1<<16; {
		child := below[0]
		below = below[1:]
		if seen[child] {
			continue
		}
		seen[child] = true
		p, ok := readProc(child)
		if !ok {
			continue // it went meanwhile
		}
		found = append(found, p)
		below = append(below, childrenOf(child)...)
	}
	return found
}

// childrenFiles reports whether the kernel lists a thread's children in
// /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
var childrenFiles = sync.OnceValue(func() bool {
	self := strconv.Itoa(os.Getpid())
	return unix.Access("/proc/self/task/"+self+"/children", unix.R_OK) == nil
})

// childrenOf lists the children of every thread of pid; none when pid is
// gone.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := readDirNames(dir)
	if err != nil {
		return nil
	}
	var kids []int
	for _, tid := range tids {
		b, _ := readProcFile(dir + "/" + tid + "/children") // a thread may end meanwhile
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				kids = append(kids, child)
			}
		}
	}
	return kids
}

// descendantsScanned is descendants from every process in /proc, by
// parent.
func descendantsScanned(pid int) []procInfo {
	procs := readProcs()
	below := map[int]bool{pid: true}
	var found []procInfo
	for grew := true; grew; {
		grew = false
		for _, p := range procs {
			if below[p.ppid] && !below[p.pid] {
				below[p.pid] = true
				found = append(found, p)
				grew = true
			}
		}
	}
	return found
}

// hasChildren reports whether this process has a child, running, stopped
// or exited and not yet reaped. It only peeks (WNOWAIT): the reaper still
// collects every status. With no child there is no descendant either, as
// every descendant's parent is a descendant or, orphaned, us (as PID 1 or
// subreaper) or an init outside the tree.
func hasChildren() bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			return false
		}
		return true // a child exists (or waitid failed: assume one does)
	}
}

// readProcFile reads a file under /proc whole with plain system calls:
// os.ReadFile would offer each descriptor to the runtime's poller, which
// refuses it, and flip its flags to and fro (four fcntl calls a file).
func readProcFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readDirNames lists the names in a directory under /proc with plain
// system calls, for the reason readProcFile gives.
func readDirNames(path string) ([]string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// jobPipeEnds creates a job's pipe, both ends close-on-exec from birth:
// ours non-blocking, for the runtime poller, and the child's blocking, as
// programs expect; childReads says which end is the child's. Both ends are
// made non-blocking together and the child's is set back with one
// F_SETFL, which sets every flag it can change: none but O_NONBLOCK is on
// a new pipe, so 0 clears just that. One call fewer than making ours
// non-blocking afterwards, which reads the flags first.
func jobPipeEnds(childReads bool) (child, ours int, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, -1, err
	}
	child, ours = fds[1], fds[0]
	if childReads {
		child, ours = fds[0], fds[1]
	}
	if _, err := unix.FcntlInt(uintptr(child), unix.F_SETFL, 0); err != nil {
		_ = unix.Close(fds[0]) // best effort: cleaning up
		_ = unix.Close(fds[1])
		return -1, -1, err
	}
	return child, ours, nil
}

// pipeHungUp reports whether the pipe read at fd has no writer left: what
// it still holds is all it will ever hold. poll(2) says so without reading.
func pipeHungUp(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 1 && fds[0].Revents&unix.POLLHUP != 0
	}
}

// pipeUnread is how many bytes the pipe or terminal read at fd holds that
// nobody has read yet (FIONREAD, spelled TIOCINQ here); 0 when it cannot
// tell.
func pipeUnread(fd int) int {
	for {
		n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0
		}
		return n
	}
}

// countOpenFds counts this process's open descriptors (not counting the
// one used to list them).
func countOpenFds() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1
}

// residentKiB is this process's resident set size.
func residentKiB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return -1
}

// processTree lists pid and its descendants, as far as their main threads'
// children lists go (a process started by another thread is missed; the
// shells jobs run in have one thread). It reads a few small files per
// process instead of all of /proc.
func processTree(pid int) []procInfo {
	var procs []procInfo
	queue := []int{pid}
	for len(queue) > 0 && len(procs) < 4096 {
		p, ok := readProc(queue[0])
		queue = queue[1:]
		if !ok {
			continue
		}
		procs = append(procs, p)
		id := strconv.Itoa(p.pid)
		b, err := os.ReadFile("/proc/" + id + "/task/" + id + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				queue = append(queue, child)
			}
		}
	}
	return procs
}

// processGroups lists every process visible in /proc by process group.
func processGroups() map[int][]procInfo {
	groups := map[int][]procInfo{}
	for _, p := range readProcs() {
		groups[p.pgid] = append(groups[p.pgid], p)
	}
	return groups
}

// scheduledRuns is how many times pid has been put on a CPU.
func scheduledRuns(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return 0
	}
	n, _ := strconv.ParseUint(fields[2], 10, 64)
	return n
}

// openPath is the path of the file open at fd, as /proc names it.
func openPath(fd int) (string, bool) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return p, err == nil && strings.HasPrefix(p, "/")
}

// maxRSSKiB is a child's peak resident set from its rusage; Linux counts
// it in KiB.
func maxRSSKiB(ru *syscall.Rusage) int64 { return int64(ru.Maxrss) }

// hideFromJobs keeps what is private to the server away from its jobs,
// which run as the same user, and returns what it could not do. With
// undumpable (not asked for by 1.0, whose jobs may read the server's
// /proc/PID/cwd), its /proc files open only with CAP_SYS_PTRACE, so a job
// can neither write to the client's stdout through /proc/PID/fd/1 nor read
// the server's memory; jobs, which exec, do not inherit the flag. The
// variables named secret* are wiped from /proc/PID/environ for jobs that
// have the capability; the Go runtime reads its own copy.
func hideFromJobs(secret string, undumpable bool) error {
	var errs []error
	if undumpable {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			errs = append(errs, fmt.Errorf("cannot make the server undumpable (%w): its jobs can read its /proc files", err))
		}
	}
	if err := wipeEnviron(secret); err != nil {
		errs = append(errs, fmt.Errorf("cannot wipe %s* from /proc/self/environ (%w): jobs able to read it can see them", secret, err))
	}
	return errors.Join(errs...)
}

// wipeEnviron rewrites this process's original environment block, where
// /proc/self/environ reads it, without the variables named prefix*: the
// others move up, and zero bytes fill the end.
func wipeEnviron(prefix string) error {
	// The runtime's copy is the original block unless the process changed
	// it, which the server never does: without such a variable there,
	// there is nothing to read or wipe.
	if !slices.ContainsFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, prefix) }) {
		return nil
	}
	shown, err := readProcFile("/proc/self/environ")
	if err != nil || !strings.Contains(string(shown), prefix) {
		return err // nothing to wipe
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	start, err := environStart(mem, shown)
	if err != nil {
		return err
	}
	kept := make([]byte, 0, len(shown))
	for _, kv := range strings.Split(string(shown), "\x00") {
		if kv != "" && !strings.HasPrefix(kv, prefix) {
			kept = append(append(kept, kv...), 0)
		}
	}
	_, err = mem.WriteAt(kept[:len(shown)], start)
	return err
}

// environStart finds where the environment block shown in
// /proc/self/environ starts in this process's memory: at env_start of
// /proc/self/stat, field 50 counting from 1 on the kernels seen (proc(5)
// numbers it 51), or the third field from the end. The address is used only
// once the memory there holds exactly the block shown.
func environStart(mem *os.File, shown []byte) (int64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may hold spaces and parentheses,
	// start with field 3 (state).
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	found := make([]byte, len(shown))
	for _, i := range []int{47, len(fields) - 3} {
		if i < 0 || i >= len(fields) {
			continue
		}
		start, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil || start <= 0 {
			continue
		}
		if _, err := mem.ReadAt(found, start); err == nil && string(found) == string(shown) {
			return start, nil
		}
	}
	return 0, errors.New("the environment block is not where /proc/self/stat says")
}

// openPTY makes a pseudo-terminal of rows x cols: the master, non-blocking
// for the runtime poller, and the slave's descriptor, close-on-exec (a
// spawn hands it to the child as it does any descriptor).
func openPTY(rows, cols uint16) (master *os.File, slave int, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		unix.Close(m)
		return nil, -1, fmt.Errorf("unlock the terminal: %w", err)
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		unix.Close(m)
		return nil, -1, fmt.Errorf("size the terminal: %w", err)
	}
	// TIOCGPTPEER opens the slave through the master, with no path lookup
	// a process of another user or namespace could race (Linux 4.13+).
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	s := int(fd)
	if errno != 0 {
		n, nerr := unix.IoctlGetInt(m, unix.TIOCGPTN)
		if nerr != nil {
			unix.Close(m)
			return nil, -1, fmt.Errorf("find the terminal: %w", nerr)
		}
		s, err = unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(m)
			return nil, -1, fmt.Errorf("open the terminal: %w", err)
		}
	}
	return os.NewFile(uintptr(m), "ptmx"), s, nil
}

// rlimitNproc is RLIMIT_NPROC.
const rlimitNproc = unix.RLIMIT_NPROC

// pidsMaxWords names the pids limit of this process's cgroup (v2), as
// ", pids.max is N", or "" when there is none to read.
func pidsMaxWords() string {
	if dir := pidsCgroup(); dir != "" {
		if max, err := os.ReadFile(dir + "/pids.max"); err == nil {
			return ", the cgroup's pids.max is " + strings.TrimSpace(string(max))
		}
	}
	return ""
}

// pidsCgroup is the directory of the pids cgroup this process started in
// (cgroup v2, or v1's pids hierarchy), or "" when there is none to read.
var pidsCgroup = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.SplitN(line, ":", 3) // hierarchy:controllers:path
		if len(fields) != 3 {
			continue
		}
		var dir string
		switch {
		case fields[0] == "0" && fields[1] == "":
			dir = "/sys/fs/cgroup" + fields[2]
		case slices.Contains(strings.Split(fields[1], ","), "pids"):
			dir = "/sys/fs/cgroup/pids" + fields[2]
		default:
			continue
		}
		if _, err := os.Stat(dir + "/pids.max"); err == nil {
			return dir
		}
	}
	return ""
})

// pidsUsage is how many tasks this process's pids cgroup holds and its
// pids.max; ok is false when the cgroup sets no limit or cannot be read.
func pidsUsage() (used, most int64, ok bool) {
	dir := pidsCgroup()
	if dir == "" {
		return 0, 0, false
	}
	most, err := readNumber(dir + "/pids.max")
	if err != nil {
		return 0, 0, false // unreadable, or "max": no limit
	}
	used, err = readNumber(dir + "/pids.current")
	return used, most, err == nil
}

// readNumber reads a file that holds one decimal number.
func readNumber(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// availableMemory is the memory this process may use: its cgroup's limit
// (v2, then v1) when it sets one, else the machine's physical memory; 0
// when neither can be read.
func availableMemory() int64 {
	var limit int64
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if n, err := readNumber(path); err == nil && n > 0 {
			limit = n
			break
		}
	}
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) == nil {
		physical := int64(info.Totalram) * int64(info.Unit)
		if limit == 0 || limit > physical { // "no limit" reads as a huge number in v1
			limit = physical
		}
	}
	return limit
}

// nprocSoftLimit is the soft RLIMIT_NPROC when it binds this process (it
// is finite and the process is not root), else 0.
func nprocSoftLimit() int {
	var lim unix.Rlimit
	if os.Geteuid() == 0 || unix.Getrlimit(unix.RLIMIT_NPROC, &lim) != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}

// threadsOfSelf is how many threads this process has (/proc/self/stat
// field 20), or 0 when it cannot be read.
func threadsOfSelf() int {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 18 {
		return 0
	}
	n, _ := strconv.Atoi(fields[17])
	return n
}

// onMainThread reports whether the calling thread is the process's first.
func onMainThread() bool { return unix.Gettid() == unix.Getpid() }

// openUnlinked opens a new file in dir, mode 0600, that has no name: no
// path reaches it, and it goes when the descriptor is closed. Where the
// file system has no O_TMPFILE, a named file is made and unlinked at once.
func openUnlinked(dir string) (*os.File, error) {
	for {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), dir+"/(spill)"), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EINVAL):
			return openThenUnlink(dir)
		}
		return nil, fmt.Errorf("open a spill file in %s: %w", dir, err)
	}
}

// punchHole frees the blocks of n bytes of f from offset off; the file
// keeps its size, and reads there see zeros.
func punchHole(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// freeBytes is the space an unprivileged user may still fill where path
// is (0 when it cannot be read).
func freeBytes(path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// stdinIsTerminal reports whether stdin is a terminal (isatty: the
// terminal ioctl answers), that is whether a person started the server by
// hand rather than a client through a pipe.
func stdinIsTerminal() bool {
	for {
		_, err := unix.IoctlGetTermios(0, unix.TCGETS)
		if err != unix.EINTR {
			return err == nil // ENOTTY (a pipe, a file), EBADF (closed): not a terminal
		}
	}
}
