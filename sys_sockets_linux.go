package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The TCP sockets a few processes hold, as /proc shows them: which of them
// listen, and which process holds the client's end of a connection. A
// process names its sockets only by inode (the socket:[INODE] links in
// /proc/PID/fd); the kernel's tables, /proc/PID/net/tcp and tcp6, give
// each inode its addresses and state. The tables are per network
// namespace, so the processes are grouped by theirs and each namespace's
// tables are read once.

// tcpStateListen is TCP_LISTEN, as the st column of /proc/net/tcp writes
// it (in hex).
const tcpStateListen = 0x0A

// tcpRow is one socket of a /proc/net/tcp or tcp6 table, its addresses
// with IPv4-mapped IPv6 ones written as IPv4.
type tcpRow struct {
	local, remote netip.AddrPort
	state         uint8
	inode         uint64
}

// listeningOf lists the TCP sockets in LISTEN that any of pids holds
// open, as "ADDR:PORT": numeric, IPv6 in brackets ("[::]:5173"),
// IPv4-mapped addresses as IPv4 ("127.0.0.1:8000"), each once, in address
// order (IPv4 before IPv6, then by address, then by port), at most most
// of them (most <= 0: all). A pid that is gone, or whose descriptors
// cannot be read (another user's), holds none. Only the pids' own
// descriptors are read, and the tables only when one of them is a socket.
//
// ok is false when some pid holds a socket and no table could be read at
// all: /proc mounted without /proc/net (subset=pid), or /proc/PID/net
// closed to this process. Then nothing can be said, which is not "none";
// an empty list with ok true is none. A namespace whose tables cannot be
// read while another's can (its processes all gone meanwhile) adds
// nothing to the list.
func listeningOf(pids []int, most int) (addrs []string, ok bool) {
	groups := socketsByNamespace(pids)
	if len(groups) == 0 {
		return nil, true
	}
	found := map[netip.AddrPort]bool{}
	read := false
	for _, g := range groups {
		err := g.scan(func(state uint8, inode uint64) bool { return state == tcpStateListen && g.inodes[inode] },
			func(r tcpRow) { found[r.local] = true })
		read = read || err == nil
	}
	if !read {
		return nil, false
	}
	sorted := make([]netip.AddrPort, 0, len(found))
	for ap := range found {
		sorted = append(sorted, ap)
	}
	slices.SortFunc(sorted, func(a, b netip.AddrPort) int { return a.Compare(b) })
	if most > 0 && len(sorted) > most {
		sorted = sorted[:most]
	}
	addrs = make([]string, len(sorted))
	for i, ap := range sorted {
		addrs[i] = ap.String() // numeric; an IPv6 address in brackets
	}
	return addrs, true
}

// tcpPeerAmong finds the process holding the client's end of a TCP
// connection this process accepted, whose ends are local (ours) and remote
// (the client's): the socket whose own address is remote and whose peer
// is local, looked up in this process's network namespace and, when it is
// not there and the client's address is not a loopback one (which never
// leaves a namespace), in those of the candidates. It returns the
// candidates that hold that socket, in their order; none when no
// candidate does or the socket is gone (the client closed it: nobody can
// send on it any more).
//
// err says the answer cannot be trusted: this namespace's tables cannot
// be read, or the socket exists, no candidate was seen holding it and some
// candidate's descriptors could not be read (a setuid program's, for a
// server that is not root). A caller that guards something with the answer
// refuses on err.
func tcpPeerAmong(local, remote netip.AddrPort, candidates []int) (pids []int, err error) {
	local, remote = unmappedPort(local), unmappedPort(remote)
	if len(candidates) == 0 {
		return nil, nil
	}
	inodes := map[uint64]bool{}
	isClient := func(r tcpRow) {
		if r.local == remote && r.remote == local {
			inodes[r.inode] = true
		}
	}
	anyInode := func(state uint8, inode uint64) bool { return inode != 0 } // 0: no process holds it (TIME_WAIT)
	own := netGroup{dirs: []string{"/proc/self/net"}}
	if err := own.scan(anyInode, isClient); err != nil {
		return nil, err
	}
	if len(inodes) == 0 && !remote.Addr().IsLoopback() {
		self := netNamespace(os.Getpid())
		groups, _ := namespacesOf(candidates)
		for key, g := range groups {
			if key != self {
				_ = g.scan(anyInode, isClient) // a namespace whose processes all went holds nothing
			}
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	var unreadable []int
	for _, pid := range candidates {
		holds := false
		err := eachSocket(pid, func(inode uint64) bool {
			holds = inodes[inode]
			return holds
		})
		switch {
		case err != nil:
			unreadable = append(unreadable, pid)
		case holds:
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 && len(unreadable) > 0 {
		return nil, fmt.Errorf("the descriptors of pid %d cannot be read, so whether it holds the connection from %s is not known", unreadable[0], remote)
	}
	return pids, nil
}

// unmappedPort is ap with an IPv4-mapped IPv6 address written as IPv4, as
// the tables' rows are.
func unmappedPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// netGroup is the processes of one network namespace that hold sockets,
// and the inodes of those sockets.
type netGroup struct {
	dirs   []string        // the namespace's /proc/.../net directories, any of which has its tables
	inodes map[uint64]bool // the sockets the processes hold
}

// scan reads the namespace's tcp and tcp6 tables from the first of its
// directories that has them, and gives visit each row that keep accepts
// (keep sees only the state and inode: the rows a caller passes over cost
// no address parsing). It fails only when no table can be read: a host
// without IPv6 has no tcp6, and that is no failure.
func (g *netGroup) scan(keep func(state uint8, inode uint64) bool, visit func(tcpRow)) error {
	var errs []error
	for _, dir := range g.dirs {
		v4, err4 := readProcFile(dir + "/tcp")
		v6, err6 := readProcFile(dir + "/tcp6")
		if err4 != nil && err6 != nil {
			errs = append(errs, fmt.Errorf("reading %s/tcp and tcp6: %w", dir, err4))
			continue // a process gone: its namespace may still be read through another
		}
		scanTCPTable(v4, keep, visit)
		scanTCPTable(v6, keep, visit)
		return nil
	}
	if len(errs) == 0 {
		return errors.New("no process left to read the namespace's TCP tables through")
	}
	return errors.Join(errs...)
}

// socketsByNamespace groups those of pids that hold sockets by their
// network namespace, with the inodes of their sockets; nil when none holds
// any.
func socketsByNamespace(pids []int) map[string]*netGroup {
	var holders []int
	held := map[int][]uint64{}
	for _, pid := range pids {
		_ = eachSocket(pid, func(inode uint64) bool { // unreadable: it holds none we can know of
			held[pid] = append(held[pid], inode)
			return false
		})
		if len(held[pid]) > 0 {
			holders = append(holders, pid)
		}
	}
	if len(holders) == 0 {
		return nil
	}
	groups, keyOf := namespacesOf(holders)
	for _, pid := range holders {
		g := groups[keyOf[pid]]
		if g.inodes == nil {
			g.inodes = map[uint64]bool{}
		}
		for _, inode := range held[pid] {
			g.inodes[inode] = true
		}
	}
	return groups
}

// namespacesOf groups pids by network namespace, each group with the
// directories its tables can be read through (this process's own first,
// for its own namespace: it stays readable when every pid is gone), and
// says which group each pid is in. A pid whose namespace link cannot be
// read (gone, or another user's) is a group of its own, read through its
// /proc/PID/net.
func namespacesOf(pids []int) (groups map[string]*netGroup, keyOf map[int]string) {
	self := netNamespace(os.Getpid())
	groups, keyOf = map[string]*netGroup{}, make(map[int]string, len(pids))
	for _, pid := range pids {
		key := netNamespace(pid)
		if key == "" {
			key = "pid:" + strconv.Itoa(pid)
		}
		keyOf[pid] = key
		g := groups[key]
		if g == nil {
			g = &netGroup{}
			if key == self && self != "" {
				g.dirs = append(g.dirs, "/proc/self/net")
			}
			groups[key] = g
		}
		g.dirs = append(g.dirs, "/proc/"+strconv.Itoa(pid)+"/net")
	}
	return groups, keyOf
}

// netNamespace is the link /proc/PID/ns/net ("net:[4026531840]"), which
// names pid's network namespace; "" when it cannot be read (pid gone, or
// another user's).
func netNamespace(pid int) string {
	var buf [64]byte
	n, err := readlinkRetrying("/proc/"+strconv.Itoa(pid)+"/ns/net", buf[:])
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// eachSocket calls visit with the inode of every socket pid holds open,
// from the links in /proc/PID/fd, until visit returns true. A pid that is
// gone holds none (nil); a descriptor closed while the links are read is
// skipped. err says the descriptors cannot be listed at all (EACCES: a
// process of another user, or one that is not dumpable).
func eachSocket(pid int, visit func(inode uint64) (stop bool)) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	fds, err := readDirNames(dir)
	// A process in the middle of an exec refuses its descriptors for a
	// moment (EACCES): asked again, briefly, before that counts as
	// unreadable. One that stays unreadable (it made itself not dumpable)
	// is an error, for the caller to fail closed on.
	for try := 0; try < fdRetries && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)); try++ {
		time.Sleep(fdRetryDuration) // no event says an exec has ended
		fds, err = readDirNames(dir)
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH):
		return nil // gone: it holds nothing
	case err != nil:
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	const prefix = "socket:["
	var buf [64]byte // a socket's link is short; a longer target is no socket
	for _, fd := range fds {
		n, err := readlinkRetrying(dir+fd, buf[:])
		if err != nil {
			continue // ENOENT: closed meanwhile; ESRCH: the process went
		}
		link := buf[:n]
		if len(link) < len(prefix)+2 || string(link[:len(prefix)]) != prefix || link[n-1] != ']' {
			continue
		}
		inode, err := strconv.ParseUint(string(link[len(prefix):n-1]), 10, 64)
		if err == nil && visit(inode) {
			return nil
		}
	}
	return nil
}

// An unreadable descriptor table is read again this many times, this far
// apart (see eachSocket).
const (
	fdRetries       = 25
	fdRetryDuration = 2 * time.Millisecond
)

// readlinkRetrying is readlink(2) into buf, again on EINTR.
func readlinkRetrying(path string, buf []byte) (int, error) {
	for {
		n, err := unix.Readlink(path, buf)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// scanTCPTable gives visit each row of a /proc/net/tcp or tcp6 table
// (text) that keep accepts by state and inode. A line that does not parse
// (the header, a row of a newer layout) is skipped.
func scanTCPTable(text []byte, keep func(state uint8, inode uint64) bool, visit func(tcpRow)) {
	for len(text) > 0 {
		line := text
		if i := slices.Index(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		// "sl local rem st tx:rx tr:when retrnsmt uid timeout inode ..."
		f := strings.Fields(string(line))
		if len(f) < 10 {
			continue
		}
		state, err1 := strconv.ParseUint(f[3], 16, 8)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil || !keep(uint8(state), inode) {
			continue
		}
		local, ok1 := parseProcAddrPort(f[1])
		remote, ok2 := parseProcAddrPort(f[2])
		if ok1 && ok2 {
			visit(tcpRow{local: local, remote: remote, state: uint8(state), inode: inode})
		}
	}
}

// parseProcAddrPort parses an address of /proc/net/tcp or tcp6: hex
// address, a colon, hex port. The kernel prints the address as 32-bit
// words, each the integer whose bytes in this machine's order are the
// address's bytes in network order (0100007F is 127.0.0.1 on a
// little-endian machine), and the port as a plain number. An IPv4-mapped
// IPv6 address comes back as IPv4.
func parseProcAddrPort(s string) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok || len(hexPort) != 4 || len(hexAddr) != 8 && len(hexAddr) != 32 {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var b [16]byte
	for i := 0; i < len(hexAddr)/8; i++ {
		w, err := strconv.ParseUint(hexAddr[8*i:8*i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(b[4*i:], uint32(w))
	}
	addr := netip.AddrFrom16(b).Unmap()
	if len(hexAddr) == 8 {
		addr = netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}
