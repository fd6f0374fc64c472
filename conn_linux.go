package main

import "golang.org/x/sys/unix"

// socketDelivery reports, without waiting, what the kernel knows of the
// bytes written to a connected TCP socket: all acknowledged by the peer,
// some still unacknowledged, or the connection failed. A peer that closed
// before the bytes arrived answers them with a reset, so "acknowledged"
// means the bytes reached the client's socket while it was open.
func socketDelivery(fd int) delivery {
	// The queue first, then the error: a reset empties the queue, and a
	// reset that lands between the two looks is then still seen as one.
	unacked, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil {
		return deliveryUnknown
	}
	fds := []unix.PollFd{{Fd: int32(fd)}} // POLLERR and POLLHUP are always reported
	for {
		_, err := unix.Poll(fds, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return deliveryUnknown
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			return deliveryFailed
		case unacked > 0:
			return deliveryPending
		}
		return deliveryAcked
	}
}
