package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cloexecListed marks close-on-exec every descriptor above 2 listed in dir
// (/proc/self/fd or /dev/fd).
func cloexecListed(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// procInfo is what the process table (/proc/PID/stat) says about one
// process; only Linux reads it.
type procInfo struct {
	pid, ppid, pgid, sid int
	comm                 string
	state                string
	start                uint64 // when it started, in clock ticks since boot: a reused pid has another
	exiting              bool   // it is on its way out (PF_EXITING): dying, not a survivor
}

// dying reports whether p has ended or is ending: a zombie, dead, or
// exiting. Such a process is never reported as a survivor.
func (p procInfo) dying() bool { return p.exiting || p.state == "Z" || p.state == "X" }

// inputEnd is the file a job's processes read their input from, its stdin
// pipe or its terminal, as stat shows it through /proc/PID/fd from any
// mount namespace: device and inode. The zero inputEnd is none.
type inputEnd struct {
	dev, ino uint64
	// terminal: it is the slave of the job's terminal, which a process of
	// the job's session also reads through /dev/tty (a password prompt).
	terminal bool
}

// inputEndOf is the inputEnd of the file open at fd.
func inputEndOf(fd int, terminal bool) inputEnd {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return inputEnd{}
	}
	return inputEnd{dev: uint64(st.Dev), ino: uint64(st.Ino), terminal: terminal} // the fields' types differ by system
}

// fdSoftLimit is this process's soft RLIMIT_NOFILE, or 0 if unknown.
func fdSoftLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}

// lookPath finds program the way a shell would with the job's PATH, except
// that only absolute PATH entries are searched: an empty or relative entry
// names a directory relative to wherever the search happens, which is not
// where the job runs (it changes to its cwd first), so a file planted in a
// job's cwd could stand in for the program checked (os/exec refuses the
// same case with ErrDot). A name with a slash is used as it is. The path
// returned is absolute for a bare name, so a launcher runs that very file.
func lookPath(program string, env []string) (string, error) {
	if strings.Contains(program, "/") {
		return program, nil
	}
	pathList := envValue(env, "PATH")
	skipped := false
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			skipped = true
			continue
		}
		candidate := filepath.Join(dir, program)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	why := fmt.Sprintf("argv[0] %q: not found in PATH (%s)", program, pathList)
	if skipped {
		why += "; its empty and relative entries are not searched"
	}
	return "", notFoundError{why}
}

// envValue is the value of name in env (NAME=value entries; the last wins,
// as for execve's callers), or "".
func envValue(env []string, name string) string {
	value := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			value = v
		}
	}
	return value
}

// notFoundError is a program missing from PATH: ENOENT, as exec would say.
type notFoundError struct{ text string }

// Error says which program was not found, and where it was looked for.
func (e notFoundError) Error() string { return e.text }

// Unwrap makes the error ENOENT, as exec's would be.
func (e notFoundError) Unwrap() error { return syscall.ENOENT }

// fileKey identifies an open file as stat shows it through any descriptor
// or /proc/PID/fd link: device and inode. A pipe's two ends share one.
type fileKey struct{ dev, ino uint64 }

// delivery is what the kernel knows of the bytes written to a connection.
type delivery int

const (
	deliveryUnknown delivery = iota // the kernel cannot say (not TCP, not Linux)
	deliveryPending                 // some bytes are not yet acknowledged
	deliveryAcked                   // the peer's socket took every byte
	deliveryFailed                  // the connection was reset or closed
)

// openThenUnlink makes a file in dir, mode 0600, and unlinks it at once:
// its descriptor is then the only way to it.
func openThenUnlink(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "spill-")
	if err != nil {
		return nil, fmt.Errorf("make a spill file in %s: %w", dir, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("unlink the spill file %s: %w", f.Name(), err)
	}
	return f, nil
}
