package main

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestPeerRefusalLooksOnlyAtTCP: an address that is not TCP's (a pipe's,
// in tests) is not looked at.
func TestPeerRefusalLooksOnlyAtTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if why := peerRefusal(a.LocalAddr(), a.RemoteAddr()); why != "" {
		t.Errorf("a pipe's connection: %q", why)
	}
}

// TestFromThisHost: loopback clients, and a client from the address it
// connected to, may be local processes; a documentation address of no
// interface here is another machine's.
func TestFromThisHost(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		local, remote string
		want          bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:40000", true},
		{"127.0.0.1:8080", "127.0.0.9:40000", true},
		{"[::1]:8080", "[::1]:40000", true},
		{"192.0.2.7:8080", "192.0.2.7:40000", true},
		{"192.0.2.7:8080", "198.51.100.9:40000", false},
		{"[2001:db8::7]:8080", "[2001:db8::9]:40000", false},
	} {
		if got := fromThisHost(ap(tc.local), ap(tc.remote)); got != tc.want {
			t.Errorf("fromThisHost(%s, %s) = %v, want %v", tc.local, tc.remote, got, tc.want)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(ipn.IP)
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() {
				continue
			}
			if !fromThisHost(ap("192.0.2.7:8080"), netip.AddrPortFrom(ip.Unmap(), 40000)) {
				t.Errorf("a client from %v, an address of this host, counts as another machine", ip)
			}
		}
	}
}

// TestTCPAddrPortUnmaps: an IPv4-mapped address is written as IPv4, as
// the kernel's tables are read.
func TestTCPAddrPortUnmaps(t *testing.T) {
	got, ok := tcpAddrPort(&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 80})
	if !ok || got != netip.MustParseAddrPort("127.0.0.1:80") {
		t.Errorf("tcpAddrPort(::ffff:127.0.0.1:80) = %v, %v", got, ok)
	}
	if _, ok := tcpAddrPort(&net.UnixAddr{Name: os.TempDir()}); ok {
		t.Error("a unix address is taken for TCP")
	}
}
