package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// probeMountNamespace checks that the calling thread, which it leaves
// changed and must be discarded, can have the read-only mount namespace a
// sandboxed job gets: it needs CAP_SYS_ADMIN, and mount_setattr (Linux
// 5.12).
func probeMountNamespace() error { return readOnlyMounts(nil) }

// readOnlyMounts moves the calling thread into a mount namespace of its own
// in which every mount is read-only except writable (each directory and
// what is mounted beneath it keeps the flags it had, so a read-only volume
// inside a root stays read-only). Mode, owner, times, xattrs and inode
// flags then cannot change outside writable: the kernel refuses them with
// EROFS on a read-only mount, whatever the path or descriptor used. Device
// files stay writable (a read-only mount does not stop writing a device).
// The caller must be on a thread it will discard.
func readOnlyMounts(writable []string) error {
	if slices.Contains(writable, "/") {
		// Everything is writable: nothing to make read-only. (A copy of
		// "/" mounted back on "/" would not even be seen: a path walk
		// starts at the thread's root, beneath what is mounted on it.)
		return nil
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// Private first: a mount made here must not propagate back to the
	// server's namespace, and one made there must not appear here.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	// Copies of the writable trees taken before everything turns
	// read-only keep their flags; they are put back on top afterwards.
	copies := make([]int, 0, len(writable))
	defer func() {
		for _, fd := range copies {
			_ = unix.Close(fd) // a detached copy not mounted is freed with it
		}
	}()
	for _, dir := range writable {
		fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("open_tree %s: %w", dir, err)
		}
		copies = append(copies, fd)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("mount_setattr / read-only: %w", err)
	}
	for i, dir := range writable {
		if err := unix.MoveMount(copies[i], "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("move_mount %s: %w", dir, err)
		}
	}
	return nil
}

// reopenDir returns the working directory a child forked from this thread
// should change to: dir itself, unless dir is a descriptor pinned before
// the thread moved to its own mounts (/proc/self/fd/N). Such a descriptor
// leads back to the server's writable mounts (".." from it climbs them),
// so resolved is opened again here and must be the very same directory.
// release closes what was opened, once the child has started.
func reopenDir(dir, resolved string) (string, func(), error) {
	none := func() {}
	if !strings.HasPrefix(dir, "/proc/self/fd/") || resolved == "" {
		return dir, none, nil
	}
	fd, err := unix.Open(resolved, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", none, fmt.Errorf("cwd %s: %w", resolved, err)
	}
	release := func() { _ = unix.Close(fd) } // the child has changed to it
	var pinned, here unix.Stat_t
	if err := unix.Stat(dir, &pinned); err != nil {
		release()
		return "", none, fmt.Errorf("cwd %s: %w", resolved, err)
	}
	if err := unix.Fstat(fd, &here); err != nil || here.Dev != pinned.Dev || here.Ino != pinned.Ino {
		release()
		return "", none, fmt.Errorf("cwd %s changed while the job started", resolved)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), release, nil
}

// dropCapabilities empties every capability set of the calling thread:
// bounding (when it may: that needs CAP_SETPCAP), ambient, inheritable,
// permitted and effective. With no_new_privs set, nothing the job execs
// gets any back, root's or a file's. Without CAP_SYS_ADMIN, CAP_SYS_PTRACE
// and CAP_PERFMON a root job cannot read other processes' /proc secrets;
// without CAP_CHOWN, CAP_FOWNER and CAP_LINUX_IMMUTABLE it cannot change
// what it does not own; without CAP_SYS_RESOURCE and CAP_SYS_NICE it
// cannot raise its own limits past what was set. Capabilities are per
// thread: the caller must be on a thread it will discard.
func dropCapabilities() error {
	last := lastCapability()
	for capability := 0; capability <= last; capability++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(capability), 0, 0, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL): // dropped, or unknown to this kernel
		case errors.Is(err, unix.EPERM):
			// No CAP_SETPCAP: the bounding set stays, but with
			// no_new_privs and empty sets an exec cannot use it.
			capability = last
		default:
			return fmt.Errorf("prctl(PR_CAPBSET_DROP): %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err) // EINVAL: no ambient set before Linux 4.3
	}
	header := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData // version 3 takes two: capabilities 0-31 and 32-63
	if err := unix.Capset(&header, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// lastCapability is the highest capability number the kernel knows, read once.
var lastCapability = sync.OnceValue(func() int {
	n, err := readNumber("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return unix.CAP_LAST_CAP // as this program was built to know
	}
	return int(n)
})
