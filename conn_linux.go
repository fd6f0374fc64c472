package main

import "golang.org/x/sys/unix"

// socketHungUp reports whether the peer of a connected socket has shut
// its end (POLLRDHUP) or the connection failed, without waiting.
func socketHungUp(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(fds, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil || n == 0:
			return false
		}
		return fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	}
}
