// Command floor is the do-nothing server the whole-life rows of the bench
// compare mcp-exec with: it answers the first request line with an empty
// result echoing its id, then reads until end of input and exits. It uses
// bufio and os only, so its life is a Go program's least: the runtime's
// start, one read, one write, one exit. The bench builds it as the release
// is built (stripped, static, -trimpath).
package main

import (
	"bufio"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return
	}
	id := []byte("null")
	if i := indexOf(line, `"id":`); i >= 0 {
		rest := line[i+5:]
		end := 0
		for end < len(rest) && rest[end] != ',' && rest[end] != '}' {
			end++
		}
		id = rest[:end]
	}
	out := append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":{}}`+"\n"...)
	if _, err := os.Stdout.Write(out); err != nil {
		return
	}
	buf := make([]byte, 4096)
	for {
		if _, err := in.Read(buf); err != nil {
			return
		}
	}
}

// indexOf is the first index of s in b, or -1 (bytes and strings are left
// out so the floor initialises nothing it does not need).
func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
