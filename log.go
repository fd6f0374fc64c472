package main

import (
	"fmt"
	"os"
)

// logf writes a diagnostic line to stderr; stdout carries only JSON-RPC.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcp-exec: "+format+"\n", args...)
}
