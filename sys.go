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
}

// pipeInode is the inode number of the pipe fd belongs to.
func pipeInode(fd int) uint64 {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return 0
	}
	return uint64(st.Ino) // the field's type differs by system
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

func (e notFoundError) Error() string { return e.text }
func (e notFoundError) Unwrap() error { return syscall.ENOENT }
