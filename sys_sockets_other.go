//go:build !linux

package main

import (
	"errors"
	"net/netip"
)

// listeningOf cannot read which sockets a process holds without /proc:
// ok is false, as it is on Linux when the tables cannot be read.
func listeningOf(pids []int, most int) (addrs []string, ok bool) { return nil, false }

// tcpPeerAmong cannot tell here which process holds a connection's other
// end (there is no /proc): it says so with errors.ErrUnsupported, which a
// caller tells apart from a failed look on Linux.
func tcpPeerAmong(local, remote netip.AddrPort, candidates []int) (pids []int, err error) {
	return nil, errors.ErrUnsupported
}
