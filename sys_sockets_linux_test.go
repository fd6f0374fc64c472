package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The socket child modes: a re-executed test binary that opens what
// SOCKETS_OPEN says, prints one line about it and then holds it until its
// stdin closes.
const (
	listenMode  = "listen on the addresses given"
	connectMode = "connect to the address given"
	holdMode    = "hold nothing until stdin closes"
)

func init() {
	childModes[listenMode] = listenOn
	childModes[connectMode] = connectTo
	childModes[holdMode] = func() int { return holdUntilStdinCloses("held") }
}

// listenOn listens on each address of SOCKETS_OPEN (comma-separated; one
// written "mapped:PORT" is the IPv4-mapped ::ffff:127.0.0.1, bound on a
// dual-stack IPv6 socket, which Go's net package would not make) and
// prints the addresses bound, space-separated.
func listenOn() int {
	var bound []string
	for _, addr := range strings.Split(os.Getenv("SOCKETS_OPEN"), ",") {
		if port, ok := strings.CutPrefix(addr, "mapped:"); ok {
			got, err := listenMapped(port)
			if err != nil {
				fmt.Println("error:", err)
				return 1
			}
			bound = append(bound, got)
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		bound = append(bound, ln.Addr().String())
	}
	return holdUntilStdinCloses(strings.Join(bound, " "))
}

// listenMapped listens on [::ffff:127.0.0.1]:port with a plain AF_INET6
// socket, and answers the port bound.
func listenMapped(port string) (string, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0)
	if err != nil {
		return "", err
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		return "", err
	}
	var p int
	fmt.Sscan(port, &p)
	sa := &unix.SockaddrInet6{Port: p, Addr: netip.MustParseAddr("::ffff:127.0.0.1").As16()}
	if err := unix.Bind(fd, sa); err != nil {
		return "", err
	}
	if err := unix.Listen(fd, 8); err != nil {
		return "", err
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("mapped:%d", got.(*unix.SockaddrInet6).Port), nil
}

// connectTo connects to SOCKETS_OPEN and prints the connection's own
// address.
func connectTo() int {
	c, err := net.Dial("tcp", os.Getenv("SOCKETS_OPEN"))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return holdUntilStdinCloses(c.LocalAddr().String())
}

// holdUntilStdinCloses prints line and returns once stdin reaches its end.
func holdUntilStdinCloses(line string) int {
	fmt.Println(line)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// socketChild is a re-executed test binary in one of the socket modes.
type socketChild struct {
	pid  int
	line string // what it printed once its sockets were open
}

// startSocketChild starts the test binary in mode with SOCKETS_OPEN=open,
// inheriting extra as its descriptors 3 and up, and waits, at most
// jobDeadline, for its line; it is ended when the test ends.
func startSocketChild(t *testing.T, mode, open string, extra ...*os.File) socketChild {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, "SOCKETS_OPEN="+open)
	cmd.ExtraFiles = extra
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(jobDeadline):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case line := <-lines:
		if line == "" || strings.HasPrefix(line, "error:") {
			t.Fatalf("%s (%s): %q", mode, open, line)
		}
		return socketChild{pid: cmd.Process.Pid, line: line}
	case <-time.After(jobDeadline):
		t.Fatalf("%s (%s): no line within %v", mode, open, jobDeadline)
	}
	panic("unreachable")
}

// hasIPv6Loopback reports whether ::1 can be bound here.
func hasIPv6Loopback() bool {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestListeningOfFindsAChildsListeners: the listeners a child opened are
// found with their exact addresses, IPv6 in brackets, in address order;
// most cuts the list; a pid of no process, or one without sockets, has
// none, and that is known (ok).
func TestListeningOfFindsAChildsListeners(t *testing.T) {
	onLinux(t)
	t.Parallel()
	open := "127.0.0.1:0,127.0.0.1:0"
	if hasIPv6Loopback() {
		open += ",[::]:0,[::1]:0"
	}
	child := startSocketChild(t, listenMode, open)
	var want []string
	for _, a := range strings.Fields(child.line) {
		want = append(want, netip.MustParseAddrPort(a).String())
	}
	slices.SortFunc(want, func(a, b string) int {
		return netip.MustParseAddrPort(a).Compare(netip.MustParseAddrPort(b))
	})
	got, ok := listeningOf([]int{child.pid}, 20)
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("listeningOf(child) = %q, %v; want %q, true", got, ok, want)
	}
	if strings.Contains(open, "[::]") && !slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "[::]:") }) {
		t.Errorf("the wildcard IPv6 listener is not written [::]:PORT: %q", got)
	}
	if got, ok := listeningOf([]int{child.pid}, 1); !ok || !slices.Equal(got, want[:1]) {
		t.Errorf("listeningOf(child, 1) = %q, %v; want %q", got, ok, want[:1])
	}
	idle := startSocketChild(t, holdMode, "")
	if got, ok := listeningOf([]int{child.pid, idle.pid, child.pid}, 0); !ok || !slices.Equal(got, want) {
		t.Errorf("a pid given twice, and one without listeners: %q, %v; want %q", got, ok, want)
	}
	if got, ok := listeningOf([]int{idle.pid}, 20); !ok || len(got) != 0 {
		t.Errorf("a process without sockets: %q, %v; want none, true", got, ok)
	}
	if got, ok := listeningOf([]int{1 << 30}, 20); !ok || len(got) != 0 {
		t.Errorf("a pid of no process: %q, %v; want none, true", got, ok)
	}
}

// TestListeningOfWritesIPv4MappedAsIPv4: a dual-stack socket bound to
// ::ffff:127.0.0.1 is listed as 127.0.0.1:PORT.
func TestListeningOfWritesIPv4MappedAsIPv4(t *testing.T) {
	onLinux(t)
	t.Parallel()
	if !hasIPv6Loopback() {
		t.Skip("no IPv6 here")
	}
	child := startSocketChild(t, listenMode, "mapped:0")
	port, _ := strings.CutPrefix(child.line, "mapped:")
	got, ok := listeningOf([]int{child.pid}, 20)
	if want := []string{"127.0.0.1:" + port}; !ok || !slices.Equal(got, want) {
		t.Errorf("listeningOf(child) = %q, %v; want %q", got, ok, want)
	}
}

// TestParseProcAddrPort: the tables' host-endian words and plain ports,
// as a little-endian kernel writes them.
func TestParseProcAddrPort(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the literals below are a little-endian kernel's")
	}
	for in, want := range map[string]string{
		"0100007F:1F40":                         "127.0.0.1:8000",
		"00000000:1435":                         "0.0.0.0:5173",
		"0101A8C0:0016":                         "192.168.1.1:22",
		"00000000000000000000000000000000:1435": "[::]:5173",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:1F40": "127.0.0.1:8000",
		"B80D0120000000000000000001000000:01BB": "[2001:db8::1]:443",
	} {
		got, ok := parseProcAddrPort(in)
		if !ok || got.String() != want {
			t.Errorf("parseProcAddrPort(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:1F4", "0100007:1F40", "0100007G:1F40"} {
		if got, ok := parseProcAddrPort(bad); ok {
			t.Errorf("parseProcAddrPort(%q) = %v, want no address", bad, got)
		}
	}
}

// TestScanTCPTableKeepsOnlyWhatIsAsked: the header and short lines are
// skipped, keep sees state and inode, and the rows kept carry both.
func TestScanTCPTableKeepsOnlyWhatIsAsked(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the literals below are a little-endian kernel's")
	}
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 0100007F:1F40 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n" +
		"   2: 0100007F:D432 0100007F:1F40 06 00000000:00000000 03:00000CB6 00000000     0        0 0 3 0000000000000000\n" +
		"   3: truncated\n"
	var rows []tcpRow
	scanTCPTable([]byte(table), func(state uint8, inode uint64) bool { return inode != 0 }, func(r tcpRow) { rows = append(rows, r) })
	want := []tcpRow{
		{local: netip.MustParseAddrPort("127.0.0.1:8000"), remote: netip.MustParseAddrPort("0.0.0.0:0"), state: tcpStateListen, inode: 4242},
		{local: netip.MustParseAddrPort("127.0.0.1:8000"), remote: netip.MustParseAddrPort("127.0.0.1:54321"), state: 1, inode: 4343},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows %+v, want %+v", rows, want)
	}
}

// TestTCPPeerAmongFindsTheConnectingChild: of a child that connected to
// a listener of this process and one that did not, only the first holds
// the client's end; this process, which holds the server's end, does not.
func TestTCPPeerAmongFindsTheConnectingChild(t *testing.T) {
	onLinux(t)
	t.Parallel()
	networks := []string{"127.0.0.1:0"}
	if hasIPv6Loopback() {
		networks = append(networks, "[::1]:0")
	}
	unrelated := startSocketChild(t, holdMode, "")
	for _, addr := range networks {
		t.Run(addr, func(t *testing.T) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client := startSocketChild(t, connectMode, ln.Addr().String())
			c, err := acceptWithin(ln, jobDeadline)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			local, remote := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
			if unmappedPort(remote).String() != client.line {
				t.Fatalf("accepted %v, the child connected from %s", remote, client.line)
			}
			got, err := tcpPeerAmong(local, remote, []int{unrelated.pid, client.pid, os.Getpid()})
			if err != nil || !slices.Equal(got, []int{client.pid}) {
				t.Errorf("tcpPeerAmong = %v, %v; want [%d] (the connecting child)", got, err, client.pid)
			}
			if got, err := tcpPeerAmong(local, remote, []int{unrelated.pid, os.Getpid()}); err != nil || len(got) != 0 {
				t.Errorf("without the child: %v, %v; want none", got, err)
			}
			if got, err := tcpPeerAmong(remote, local, []int{os.Getpid()}); err != nil || !slices.Equal(got, []int{os.Getpid()}) {
				t.Errorf("the ends swapped, this process holds the other end: %v, %v; want [%d]", got, err, os.Getpid())
			}
			if got, err := tcpPeerAmong(local, remote, nil); err != nil || len(got) != 0 {
				t.Errorf("no candidates: %v, %v; want none", got, err)
			}
		})
	}
}

// acceptWithin accepts one connection on ln, failing after limit.
func acceptWithin(ln net.Listener, limit time.Duration) (net.Conn, error) {
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(limit)); err != nil {
		return nil, err
	}
	return ln.Accept()
}
