//go:build linked

package main

// Built with -tags linked, the floor links what the server's HTTP transport
// links, and runs those packages' initialisation at start, but still does
// nothing else: the least a program that can serve HTTP and TLS pays for
// its life. The bench reports the server's ratio to it beside the ratio to
// the plain floor, so what linking costs and what the server's own work
// costs are seen apart.
import (
	_ "crypto/tls"
	_ "net/http"
)
