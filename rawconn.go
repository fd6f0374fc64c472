package main

import "syscall"

// rawConnOf is v's descriptor as a syscall.RawConn (a file, a socket),
// or nil when v has none.
func rawConnOf(v any) syscall.RawConn {
	sc, ok := v.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
