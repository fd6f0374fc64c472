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

// TestJobPipeEndsFlags: a job's pipe is close-on-exec at both ends, ours
// non-blocking (the poller needs it) and the child's blocking (a program
// reading a non-blocking stdin gets EAGAIN), whichever end the child gets.
func TestJobPipeEndsFlags(t *testing.T) {
	t.Parallel()
	for _, childReads := range []bool{true, false} {
		child, ours, err := jobPipeEnds(childReads)
		if err != nil {
			t.Fatal(err)
		}
		for _, end := range []struct {
			fd          int
			nonblocking bool
			writes      bool
		}{{child, false, !childReads}, {ours, true, childReads}} {
			fl, err := unix.FcntlInt(uintptr(end.fd), unix.F_GETFL, 0)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.FcntlInt(uintptr(end.fd), unix.F_GETFD, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := fl&unix.O_NONBLOCK != 0; got != end.nonblocking {
				t.Errorf("childReads %v: fd %d non-blocking %v, want %v", childReads, end.fd, got, end.nonblocking)
			}
			if got := fl&unix.O_ACCMODE == unix.O_WRONLY; got != end.writes {
				t.Errorf("childReads %v: fd %d writes %v, want %v", childReads, end.fd, got, end.writes)
			}
			if fd&unix.FD_CLOEXEC == 0 {
				t.Errorf("childReads %v: fd %d is not close-on-exec", childReads, end.fd)
			}
		}
		syscall.Close(child)
		syscall.Close(ours)
	}
}

// TestPipeHungUp: a pipe's read end has hung up once its last writer is
// closed, and not before, whether or not bytes are left to read.
func TestPipeHungUp(t *testing.T) {
	t.Parallel()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	if pipeHungUp(fds[0]) {
		t.Error("hung up with its writer open")
	}
	if _, err := syscall.Write(fds[1], []byte("left")); err != nil {
		t.Fatal(err)
	}
	if pipeHungUp(fds[0]) {
		t.Error("hung up with its writer open and bytes to read")
	}
	syscall.Close(fds[1])
	if !pipeHungUp(fds[0]) {
		t.Error("not hung up with its writer closed and bytes to read")
	}
}
