package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestPeerRefusalNamesAJobsProcess: a connection whose client end a child
// of this process holds (a job's, as the server sees it) is refused, with
// the child's pid, and the verdict is kept for the connection; one this
// process made itself is served, though every child forked meanwhile
// holds a copy of it until its exec.
func TestPeerRefusalNamesAJobsProcess(t *testing.T) {
	onLinux(t)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	child := startSocketChild(t, connectMode, ln.Addr().String())
	c, err := acceptWithin(ln, jobDeadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v peerVerdict
	why := v.refused(c.LocalAddr(), c.RemoteAddr())
	if !strings.Contains(why, "own jobs (pid "+strconv.Itoa(child.pid)+", ") || !strings.Contains(why, "may not act as a client") {
		t.Errorf("a child's connection: %q, want a refusal naming pid %d", why, child.pid)
	}
	if again := v.refused(c.LocalAddr(), nil); again != why {
		t.Errorf("the second request's verdict %q differs from the first's %q", again, why)
	}

	own, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	served, err := acceptWithin(ln, jobDeadline)
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	if why := peerRefusal(served.LocalAddr(), served.RemoteAddr()); why != "" {
		t.Errorf("this process's own connection is refused: %q", why)
	}
	f, err := own.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	startSocketChild(t, holdMode, "", f) // a copy in a child, as between a fork and its exec
	if why := peerRefusal(served.LocalAddr(), served.RemoteAddr()); why != "" {
		t.Errorf("this process's own connection, a child holding a copy: %q", why)
	}
}
