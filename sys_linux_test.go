package main

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestJobPipesKeepDefaultSizeNotEnlarged pins that job pipes are not
// enlarged: 1 MiB pipes once counted against a non-root user's
// pipe-user-pages-soft budget (two per job), and past it every new pipe of
// that user was cut to two pages.
func TestJobPipesKeepDefaultSizeNotEnlarged(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defaultSize, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETPIPE_SZ, 0)
	syscall.Close(fds[0])
	syscall.Close(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	in, out, errp, err := makeJobPipes()
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]jobPipe{"stdin": in, "stdout": out, "stderr": errp} {
		size, err := unix.FcntlInt(p.ours.Fd(), unix.F_GETPIPE_SZ, 0)
		if err != nil {
			t.Fatal(err)
		}
		if size != defaultSize {
			t.Errorf("%s pipe holds %d bytes, want the default %d", name, size, defaultSize)
		}
		syscall.Close(p.child)
		p.ours.Close()
	}
}
