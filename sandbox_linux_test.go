package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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

// needPython skips a test whose job is a python3 program when there is none.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
}

// TestSandboxedJobCannotReachAnAbstractSocketWithTheNetworkOn: with the
// network on, a sandboxed job connected to an abstract unix socket
// outside its sandbox (where X, D-Bus and container shims listen): the
// scope that refuses it was set only with the network off.
func TestSandboxedJobCannotReachAnAbstractSocketWithTheNetworkOn(t *testing.T) {
	needPython(t)
	name := fmt.Sprintf("mcp-exec-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at the end of the test
			}
			c.Close()
		}
	}()
	connect := fmt.Sprintf(`python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect("\0" + sys.argv[1]); print("connected")' %s`, name)
	dir := t.TempDir()
	if r := runIn(t, newRegistry(testConfig()), dir, connect); r.Stdout.Data != "connected\n" {
		t.Fatalf("the control did not connect: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
	for _, mode := range []string{"read-only", "roots"} {
		reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX="+mode, "MCP_EXEC_ROOTS="+dir)
		r := runIn(t, reg, dir, connect)
		if r.State == stateSuccess || !strings.Contains(r.Stderr.Data, "Operation not permitted") {
			t.Errorf("%s: a sandboxed job reached the abstract socket: %s %q %q", mode, r.State, r.Stdout.Data, r.Stderr.Data)
		}
	}
}

// hostObjectProbe is a python3 program that makes one system call, by
// number, on a kernel object the host owns, and prints "ok" or the errno.
const hostObjectProbe = `python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr, what, arg = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if what == "revoke":
    r = libc.syscall(nr, ctypes.c_long(3), ctypes.c_long(int(arg)))  # KEYCTL_REVOKE
elif what == "unlink":
    r = libc.syscall(nr, ctypes.c_char_p(arg.encode()))
else:
    params = ctypes.create_string_buffer(120)
    r = libc.syscall(nr, ctypes.c_long(1), params)
print("ok" if r >= 0 else "errno %d" % ctypes.get_errno())
'`

// TestSandboxedJobCannotReachHostObjects: a sandboxed job revoked a key
// in its user's keyring, removed a POSIX message queue of the host, and
// used io_uring, whose requests (a setxattr outside the roots) no seccomp
// filter sees. The same calls work unconfined (the control); sandboxed,
// the keyring and queue calls fail with EPERM and io_uring with ENOSYS,
// and the key and the queue are still there.
func TestSandboxedJobCannotReachHostObjects(t *testing.T) {
	needPython(t)
	free := newRegistry(testConfig())
	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	probe := func(r *registry, nr uintptr, what, arg string) string {
		t.Helper()
		res := runIn(t, r, "/", fmt.Sprintf("%s %d %s %s", hostObjectProbe, nr, what, arg))
		return strings.TrimSpace(res.Stdout.Data + res.Stderr.Data)
	}
	unique := fmt.Sprintf("mcp-exec-test-%d-%d", os.Getpid(), time.Now().UnixNano())

	t.Run("keyring", func(t *testing.T) {
		addKey := func(name string) int {
			id, err := unix.AddKey("user", name, []byte("secret"), unix.KEY_SPEC_USER_KEYRING)
			if err != nil {
				t.Skipf("no keyring here: %v", err)
			}
			t.Cleanup(func() { _, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0) })
			if err := unix.KeyctlSetperm(id, 0x3f3f0000); err != nil { // possessor and user: everything
				t.Fatal(err)
			}
			return id
		}
		revoked := func(id int) bool {
			_, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, make([]byte, 16), 0)
			return errors.Is(err, unix.EKEYREVOKED)
		}
		control := addKey(unique + "-control")
		if got := probe(free, unix.SYS_KEYCTL, "revoke", fmt.Sprint(control)); got != "ok" || !revoked(control) {
			t.Skipf("the control could not revoke the key: %s", got)
		}
		victim := addKey(unique)
		if got := probe(reg, unix.SYS_KEYCTL, "revoke", fmt.Sprint(victim)); got != "errno 1" || revoked(victim) {
			t.Errorf("a sandboxed job revoking a key of its user: %s, revoked %v; want errno 1 (EPERM)", got, revoked(victim))
		}
	})

	t.Run("message queue", func(t *testing.T) {
		makeQueue := func(name string) {
			if err := mqOpen(name, unix.O_CREAT|unix.O_RDWR); err != nil {
				t.Skipf("no POSIX message queues here: %v", err)
			}
			t.Cleanup(func() { _ = mqUnlink(name) })
		}
		control := unique + "-control"
		makeQueue(control)
		if got := probe(free, unix.SYS_MQ_UNLINK, "unlink", control); got != "ok" || mqOpen(control, unix.O_RDONLY) == nil {
			t.Fatalf("the control did not remove the queue: %s", got)
		}
		makeQueue(unique)
		got := probe(reg, unix.SYS_MQ_UNLINK, "unlink", unique)
		if err := mqOpen(unique, unix.O_RDONLY); got != "errno 1" || err != nil {
			t.Errorf("a sandboxed job removing a host queue: %s, the queue now: %v; want errno 1 (EPERM) and the queue there", got, err)
		}
	})

	t.Run("io_uring", func(t *testing.T) {
		if got := probe(free, unix.SYS_IO_URING_SETUP, "setup", "-"); got != "ok" {
			t.Skipf("no io_uring here even unconfined: %s", got)
		}
		if got := probe(reg, unix.SYS_IO_URING_SETUP, "setup", "-"); got != "errno 38" {
			t.Errorf("a sandboxed job's io_uring_setup: %s, want errno 38 (ENOSYS)", got)
		}
	})
}

// mqOpen opens (with O_CREAT: makes) the POSIX message queue name and
// closes it again.
func mqOpen(name string, flags int) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(flags|unix.O_CLOEXEC), 0o600, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return unix.Close(int(fd))
}

// mqUnlink removes the POSIX message queue name.
func mqUnlink(name string) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0)
	return errnoErr(errno)
}

// TestSandboxedJobCannotReadTheServersTerminal: a sandboxed job opened
// the server's terminal by name (/dev/pts/N) and read the line typed
// there, meant for the server. Unconfined the same job reads the line
// (the control, which also shows the sandboxed job left it there);
// sandboxed the open is refused. A sandboxed job started with a terminal
// of its own still uses it, through its descriptors and /dev/tty.
func TestSandboxedJobCannotReadTheServersTerminal(t *testing.T) {
	onLinux(t)
	master, slave, err := openPTY(24, 80)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	defer unix.Close(slave)
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.WriteString("secret\n"); err != nil { // typed at the server's terminal
		t.Fatal(err)
	}
	read := fmt.Sprintf("head -n 1 /dev/pts/%d", n)
	dir := t.TempDir()
	for _, mode := range []string{"read-only", "roots"} {
		reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX="+mode, "MCP_EXEC_ROOTS="+dir)
		r := runIn(t, reg, dir, read)
		if r.State == stateSuccess || strings.Contains(r.Stdout.Data, "secret") || !strings.Contains(r.Stderr.Data, "Permission denied") {
			t.Errorf("%s: a sandboxed job read the server's terminal: %s %q %q", mode, r.State, r.Stdout.Data, r.Stderr.Data)
		}
		if _, err := os.Stat("/dev/console"); err == nil {
			if r := runIn(t, reg, dir, "exec 3</dev/console"); r.State == stateSuccess {
				t.Errorf("%s: a sandboxed job opened /dev/console", mode)
			}
		}
	}
	if r := runIn(t, newRegistry(testConfig()), "/", read); r.Stdout.Data != "secret\n" {
		t.Errorf("the control did not read the line: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}

	reg := sandboxRegistry(t, "MCP_EXEC_SANDBOX=read-only")
	j := startReq(t, reg, startRequest{command: `stty size && read -p 'name? ' v </dev/tty && echo "hi $v" >/dev/tty && cat`,
		tty: &ttySpec{rows: 30, cols: 100}, policy: capturePolicy{onSuccess: allOf, onError: allOf}})
	eventually(t, jobDeadline, "the prompt", func() bool { return strings.Contains(string(j.stdout.readAll(0).data), "name? ") })
	if err := j.input(plainWaiter(), "bob\n", false); err != nil {
		t.Fatal(err)
	}
	if err := j.input(plainWaiter(), "last\n", true); err != nil {
		t.Fatal(err)
	}
	r := resultOf(collect(t, reg, j))
	if r.State != stateSuccess || !strings.Contains(r.Stdout.Data, "30 100\r\n") || !strings.Contains(r.Stdout.Data, "hi bob\r\n") {
		t.Errorf("a sandboxed terminal job: %s %q %q", r.State, r.Stdout.Data, r.Stderr.Data)
	}
}

func init() {
	childModes["list the server's descriptors"] = listServersDescriptors
}

// listServersDescriptors is a server, configured from the environment and
// running as the user TEST_SERVER_UID names, whose one job lists the
// server's descriptors and reads where one leads; it prints what the job
// printed, and whether its own mounts were the same after the job.
func listServersDescriptors() int {
	cfg, err := loadConfig(os.Environ())
	if err != nil {
		fmt.Println(err)
		return 3
	}
	if uid, _ := strconv.Atoi(os.Getenv("TEST_SERVER_UID")); uid != 0 {
		if err := becomeUser(uid); err != nil {
			fmt.Println(err)
			return 3
		}
	}
	prepareProcess(serverUndumpable(cfg))
	if err := checkConfinement(cfg); err != nil {
		fmt.Println(err)
		return 3
	}
	cfg.shell = "/bin/sh"
	before, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Println(err)
		return 3
	}
	reg := newRegistry(cfg)
	j, started, err := reg.start(startRequest{dir: "/", policy: capturePolicy{onSuccess: allOf, onError: allOf},
		command: `ls /proc/$PPID/fd >/dev/null && echo LISTED; readlink /proc/$PPID/fd/0 >/dev/null && echo OPENED`})
	if err != nil || !started {
		fmt.Println("start:", err)
		return 3
	}
	<-j.done
	r := resultOf(j)
	after, _ := os.ReadFile("/proc/self/mountinfo")
	fmt.Printf("stdout %q\nstderr %q\nmounts kept %v\n", r.Stdout.Data, r.Stderr.Data, string(after) == string(before))
	return 0
}

// becomeUser makes this process uid's, with uid as its group and no
// others, and dumpable again (a change of user clears the flag), as a
// server started as that user is.
func becomeUser(uid int) error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setresgid(uid, uid, uid); err != nil {
		return err
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
}

// TestSandboxedJobCannotListTheServersDescriptors: a sandboxed job listed
// the server's descriptors in /proc/PID/fd (its pipes to the client, its
// terminal). Under a sandbox the server is undumpable, so that directory
// is root's and a job running as another user cannot open it. A root job
// still lists the numbers (the directory is its user's), but without
// CAP_SYS_PTRACE cannot see where one leads. Unconfined both work (1.0).
// The sandbox mounts nothing in the server's mount namespace either.
func TestSandboxedJobCannotListTheServersDescriptors(t *testing.T) {
	onLinux(t)
	if _, err := landlockABI(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	if os.Getuid() != 0 {
		t.Skip("runs servers as root and as nobody: needs root")
	}
	t.Parallel()
	for _, tc := range []struct {
		uid            int
		setting        string
		listed, opened bool
	}{
		{65534, "MCP_EXEC_SANDBOX=off", true, true},
		{65534, "MCP_EXEC_SANDBOX=read-only", false, false},
		{0, "MCP_EXEC_SANDBOX=off", true, true},
		{0, "MCP_EXEC_SANDBOX=read-only", true, false},
	} {
		env := append(testConfig().baseEnv, childModeEnv+"=list the server's descriptors", tc.setting, fmt.Sprintf("TEST_SERVER_UID=%d", tc.uid))
		code, out := runChild(t, env)
		if code != 0 || strings.Contains(out, "LISTED") != tc.listed || strings.Contains(out, "OPENED") != tc.opened ||
			!strings.Contains(out, "mounts kept true") {
			t.Errorf("uid %d, %s: exit %d\n%s\nwant listed %v, opened %v, the mounts kept", tc.uid, tc.setting, code, out, tc.listed, tc.opened)
		}
	}
}
