package main

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// procSnapshot reads every process in /proc once.
func procSnapshot() []procInfo { return readProcs() }

// procNow reads one process's /proc/PID/stat; false when there is none.
func procNow(pid int) (procInfo, bool) { return readProc(pid) }

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
