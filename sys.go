package main

import (
	"os"
	"strconv"
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

// fdSoftLimit is this process's soft RLIMIT_NOFILE, or 0 if unknown.
func fdSoftLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}
