package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
)

// No job is a client of its own server. A job runs as the server's user,
// so it can read the token the server generated (or was given in a file)
// and connect over loopback like any client of that user; it would then
// act with the credential of every client: list, read and kill other
// clients' jobs, or start a job outside its own tree that its kill never
// reaches. So a connection whose client end is held by a process of one of
// the server's jobs is refused before any handler runs, whatever token it
// shows. Only a connection that can come from this machine is looked at:
// one from a loopback address, or from an address of this host.

// peerVerdict is whether one connection's client may be served: decided
// at its first request and kept for the connection, so a connection costs
// one look however many requests it carries, and one that never sends a
// request costs none (the accept loop, a single goroutine, never waits on
// /proc).
type peerVerdict struct {
	once    sync.Once
	refusal string // why the connection is refused; "" when it is served
}

// refused is why the connection whose ends are local (ours) and remote
// may not be served, or "" when it may; only the first call looks.
func (v *peerVerdict) refused(local, remote net.Addr) string {
	v.once.Do(func() { v.refusal = peerRefusal(local, remote) })
	return v.refusal
}

// peerRefusal looks at a connection's client: the refusal's text when a
// process of one of this server's jobs holds its end, or when that cannot
// be told of a connection that may come from this machine (fail closed);
// "" otherwise. A connection that is not TCP (a test's pipe) is not
// looked at, nor one from another machine, nor one on a system without
// /proc, where no process can be named (errors.ErrUnsupported).
func peerRefusal(local, remote net.Addr) string {
	l, okL := tcpAddrPort(local)
	r, okR := tcpAddrPort(remote)
	if !okL || !okR || !fromThisHost(l, r) {
		return ""
	}
	jobs, err := jobProcesses()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return ""
	case err != nil:
		return peerUnknown(err)
	case len(jobs) == 0:
		return "" // no job runs: no process of one can hold it
	}
	holders, err := tcpPeerAmong(l, r, jobs)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return ""
	case err != nil:
		return peerUnknown(err)
	case len(holders) == 0:
		return ""
	}
	// A child holds a copy of each descriptor of this process between its
	// fork and its exec: a connection this process made itself (a test's
	// client) is its own, and a job never gets to hold this process's
	// sockets otherwise. Asked only now, as this process may hold many.
	if own, err := tcpPeerAmong(l, r, []int{os.Getpid()}); err == nil && len(own) > 0 {
		return ""
	}
	name := ""
	if p, ok := procNow(holders[0]); ok && p.comm != "" {
		name = ", " + p.comm
	}
	return fmt.Sprintf("refused: this connection comes from a process of one of this server's own jobs (pid %d%s); "+
		"a job may not act as a client of the server that runs it, since with the token it could list, read and kill "+
		"other clients' jobs or start one that its own kill does not reach; only processes outside this server's jobs "+
		"may connect", holders[0], name)
}

// peerUnknown is the refusal of a connection from this machine whose
// client could not be told apart from a job's process.
func peerUnknown(err error) string {
	return fmt.Sprintf("refused: cannot tell whether this connection comes from a process of one of this server's own jobs (%v); "+
		"a job may not act as a client of the server that runs it, so connections from this machine are served only "+
		"while the server can read /proc", err)
}

// tcpAddrPort is a TCP address as a netip.AddrPort, an IPv4-mapped
// address written as IPv4; false for any other kind of address.
func tcpAddrPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.IsValid()
}

// fromThisHost reports whether a connection to local from remote may come
// from a process of this machine: remote is a loopback address, the very
// address it connected to, or another address of this host (a process may
// bind one before it connects). A listener on a loopback address meets
// only the first case, so the interfaces are read only for one on another
// address; when they cannot be read, the connection counts as local, and
// the look at /proc decides.
func fromThisHost(local, remote netip.AddrPort) bool {
	ra := remote.Addr()
	if ra.IsLoopback() || ra == local.Addr() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == ra.WithZone("") {
				return true
			}
		}
	}
	return false
}
