package main

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procSnapshot reads every process in /proc once.
func procSnapshot() []procInfo { return readProcs() }

// procNow reads one process's /proc/PID/stat; false when there is none.
func procNow(pid int) (procInfo, bool) { return readProc(pid) }

// environHas reports whether process pid started with the variable kv
// ("NAME=value") in its environment, as /proc/PID/environ shows it; false
// when it cannot be read.
func environHas(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, v := range bytes.Split(b, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}

// holdsAny reports whether process pid has one of files open, as its
// /proc/PID/fd links show them (they stat as the file itself). A process
// whose descriptors cannot be read (another user's) holds none.
func holdsAny(pid int, files []fileKey) bool {
	if len(files) == 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	fds, err := readDirNames(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(dir+fd, &st) != nil {
			continue // closed meanwhile
		}
		for _, f := range files {
			if uint64(st.Dev) == f.dev && st.Ino == f.ino {
				return true
			}
		}
	}
	return false
}
