package main

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompRules says which system calls a confined job's filter refuses.
// Each part covers what Landlock does not.
type seccompRules struct {
	// netOff: socket(2) of any family but AF_UNIX fails with EACCES, and
	// io_uring, which can make sockets without socket(2), is unavailable.
	// Landlock covers TCP only.
	netOff bool
	// othersUntouched: resource limits, priorities, CPU affinity,
	// scheduling and I/O priority may be changed for the caller only
	// (pid 0, as nice, ulimit and taskset without -p spell it), never for
	// another process: the kernel checks only the user for these, so a job
	// could otherwise lower the server's RLIMIT_CPU and have it killed.
	// Reading another process's limits stays allowed.
	othersUntouched bool
	// noMetadata: changing a file's mode, owner, times, extended
	// attributes or inode flags fails with EPERM, everywhere. Landlock has
	// no right for these, and a filter cannot see paths: this is the rule
	// where no read-only mount namespace can be made. One form stays:
	// setting a descriptor's times to now (futimens(fd, NULL)), which is
	// how touch finishes a file it has just opened for writing; writing
	// is what Landlock checks.
	noMetadata bool
	// noHostObjects: the kernel objects a sandbox's Landlock rules cannot
	// see are out of reach. The keyrings (keyctl, add_key, request_key)
	// and POSIX message queues (every mq_* call) fail with EPERM: a job
	// could otherwise revoke or replace its user's keys, or remove a
	// queue the host uses. io_uring fails with ENOSYS, so programs fall
	// back to plain system calls: its requests (setxattr, socket, …)
	// never pass through this filter.
	noHostObjects bool
}

// any reports whether r refuses anything.
func (r seccompRules) any() bool {
	return r.netOff || r.othersUntouched || r.noMetadata || r.noHostObjects
}

// hostObjectCalls are the keyring and POSIX message queue calls
// noHostObjects refuses, on every architecture.
var hostObjectCalls = []uint32{
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR,
}

// ioUringCalls are io_uring's calls: the rules that keep a job from it
// refuse all three, so a ring shared by another process is no way in either.
var ioUringCalls = []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}

// metadataCalls are the system calls that change inode metadata, on every
// architecture; legacyCalls adds the older ones some architectures keep.
var metadataCalls = []uint32{
	unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_FCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
}

// legacyCalls are the system call numbers only some architectures have
// (arm64 and riscv64 have none of them), by GOARCH; numbers as the
// kernel's tables give them.
var legacyCalls = map[string]struct {
	metadata   []uint32 // chmod, chown, lchown, utime, utimes, futimesat
	socketcall uint32   // socketcall(2), which makes sockets too; 0: none
}{
	"amd64":   {metadata: []uint32{90, 92, 94, 132, 235, 261}},
	"ppc64le": {metadata: []uint32{15, 181, 16, 30, 251, 290}, socketcall: 102},
}

// ioctlWrite is the direction bits of an _IOW ioctl number on this
// architecture (they differ on powerpc), read off one the package defines.
const ioctlWrite = unix.FS_IOC_SETFLAGS & 0xe0000000

// flagIoctls are the ioctls that change inode flags (chattr), the
// project-and-flags attribute and the inode generation, in their native
// and 32-bit sizes.
var flagIoctls = []uint32{
	ioctlWrite | 8<<16 | 'f'<<8 | 2,   // FS_IOC_SETFLAGS
	ioctlWrite | 4<<16 | 'f'<<8 | 2,   // FS_IOC32_SETFLAGS
	ioctlWrite | 28<<16 | 'X'<<8 | 32, // FS_IOC_FSSETXATTR
	ioctlWrite | 8<<16 | 'v'<<8 | 2,   // FS_IOC_SETVERSION
	ioctlWrite | 4<<16 | 'v'<<8 | 2,   // FS_IOC32_SETVERSION
}

// auditArch is the seccomp architecture token of each supported GOARCH;
// little-endian ones only, as the filter reads an argument's low half first.
var auditArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
	"ppc64le": unix.AUDIT_ARCH_PPC64LE,
}

// install puts r's filter on the calling thread, thread-local on purpose
// (no TSYNC): the caller forks the job from this thread and then lets it
// end. A system call of another architecture (i386 on amd64) kills the
// process, since its numbers mean other calls and would slip past the
// checks; an x32 call fails with EACCES.
func (r seccompRules) install() error {
	prog, err := r.native()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// nativePrograms is process-wide state: each rule set's filter for this
// machine (seccompRules → []unix.SockFilter), assembled at its first spawn
// of many. The kernel copies a filter, so one slice serves every thread.
var nativePrograms sync.Map

// native is r's filter for this machine's architecture.
func (r seccompRules) native() ([]unix.SockFilter, error) {
	if prog, ok := nativePrograms.Load(r); ok {
		return prog.([]unix.SockFilter), nil
	}
	prog, err := r.program(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	nativePrograms.Store(r, prog)
	return prog, nil
}

// program assembles r's filter for goarch.
func (r seccompRules) program(goarch string) ([]unix.SockFilter, error) {
	arch, ok := auditArch[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", goarch)
	}
	legacy := legacyCalls[goarch]
	var a bpfAsm
	a.load(seccompArch)
	a.jeq(arch, "", "kill")
	a.load(seccompNr)
	a.jge(0x40000000, "eacces", "") // the x32 ABI's numbers
	if r.netOff || r.noHostObjects {
		for _, nr := range ioUringCalls {
			a.jeq(nr, "enosys", "")
		}
	}
	if r.noHostObjects {
		for _, nr := range hostObjectCalls {
			a.jeq(nr, "eperm", "")
		}
	}
	if r.netOff {
		if legacy.socketcall != 0 {
			a.jeq(legacy.socketcall, "eacces", "")
		}
		a.jeq(unix.SYS_SOCKET, "socket", "")
	}
	if r.othersUntouched {
		a.jeq(unix.SYS_PRLIMIT64, "prlimit", "")
		a.jeq(unix.SYS_SETPRIORITY, "setpriority", "")
		a.jeq(unix.SYS_IOPRIO_SET, "ioprio", "")
		for _, nr := range []uint32{unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETATTR} {
			a.jeq(nr, "self", "")
		}
	}
	if r.noMetadata {
		for _, nr := range slices.Concat(metadataCalls, legacy.metadata) {
			a.jeq(nr, "eperm", "")
		}
		a.jeq(unix.SYS_UTIMENSAT, "utimensat", "")
		a.jeq(unix.SYS_IOCTL, "ioctl", "")
	}
	a.jmp("allow")

	a.label("socket") // socket(family, ...): unix sockets only
	a.load(seccompArg(0))
	a.jeq(unix.AF_UNIX, "allow", "eacces")

	a.label("prlimit") // prlimit64(pid, resource, new, old): another's only to read
	a.load(seccompArg(0))
	a.jeq(0, "allow", "")
	a.load(seccompArg(2))
	a.jeq(0, "", "eperm")
	a.load(seccompArg(2) + 4)
	a.jeq(0, "allow", "eperm")

	a.label("setpriority") // setpriority(which, who, nice): own process or group
	a.load(seccompArg(1))
	a.jeq(0, "", "eperm")
	a.load(seccompArg(0))
	a.jeq(unix.PRIO_PROCESS, "allow", "")
	a.jeq(unix.PRIO_PGRP, "allow", "eperm")

	a.label("ioprio") // ioprio_set(which, who, prio): own process or group
	a.load(seccompArg(1))
	a.jeq(0, "", "eperm")
	a.load(seccompArg(0))
	a.jeq(ioprioWhoProcess, "allow", "")
	a.jeq(ioprioWhoPgrp, "allow", "eperm")

	a.label("self") // sched_set*(pid, ...): the caller only
	a.load(seccompArg(0))
	a.jeq(0, "allow", "eperm")

	a.label("utimensat") // utimensat(dirfd, path, times, flags): only (fd, NULL, NULL)
	for _, half := range []uint32{seccompArg(1), seccompArg(1) + 4, seccompArg(2), seccompArg(2) + 4} {
		a.load(half)
		a.jeq(0, "", "eperm")
	}
	a.jmp("allow")

	a.label("ioctl") // ioctl(fd, request, arg): not the inode flags
	a.load(seccompArg(1))
	for _, req := range flagIoctls {
		a.jeq(req, "eperm", "")
	}
	a.jmp("allow")

	a.ret("allow", unix.SECCOMP_RET_ALLOW)
	a.ret("eperm", unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.ret("eacces", unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	a.ret("enosys", unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	a.ret("kill", unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// ioprio_set's "which": a process, or a process group (0: the caller's).
const (
	ioprioWhoProcess = 1
	ioprioWhoPgrp    = 2
)

// Offsets in struct seccomp_data: the system call number, the audit
// architecture, and the arguments (8 bytes each; the low half first on a
// little-endian machine, which is the half a 32-bit argument is in).
const (
	seccompNr   = 0
	seccompArch = 4
)

// seccompArg is the offset of argument i's low half.
func seccompArg(i int) uint32 { return 16 + 8*uint32(i) }

// bpfAsm assembles a classic BPF program whose jumps name labels; every
// jump goes forward, as BPF requires, and "" means the next instruction.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int // label → index of the instruction it names
	jumps  []bpfJump
}

// bpfJump is a jump instruction whose targets are still labels.
type bpfJump struct {
	at     int
	jt, jf string
}

// emit appends one instruction.
func (a *bpfAsm) emit(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// load loads the 32-bit word at offset of struct seccomp_data.
func (a *bpfAsm) load(offset uint32) { a.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offset) }

// jeq jumps to jt when the loaded word equals k, else to jf.
func (a *bpfAsm) jeq(k uint32, jt, jf string) {
	a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k, jt, jf)
}

// jge jumps to jt when the loaded word is k or more, else to jf.
func (a *bpfAsm) jge(k uint32, jt, jf string) {
	a.jump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, k, jt, jf)
}

// jmp jumps to to, always.
func (a *bpfAsm) jmp(to string) { a.jump(unix.BPF_JMP|unix.BPF_JA, 0, to, "") }

// jump appends a conditional jump to the labels jt and jf ("": the next
// instruction), resolved once the program is complete.
func (a *bpfAsm) jump(code uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, bpfJump{len(a.prog), jt, jf})
	a.emit(code, k)
}

// label names the next instruction.
func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

// ret is a labelled return of action.
func (a *bpfAsm) ret(name string, action uint32) {
	a.label(name)
	a.emit(unix.BPF_RET|unix.BPF_K, action)
}

// assemble resolves the jumps: a label too far for BPF's 8-bit offsets,
// behind the jump, or missing is an error, never a wrong program.
func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	offset := func(at int, to string) (uint32, error) {
		if to == "" {
			return 0, nil
		}
		target, ok := a.labels[to]
		if !ok {
			return 0, fmt.Errorf("no label %q", to)
		}
		skip := target - at - 1
		if skip < 0 {
			return 0, fmt.Errorf("label %q is behind instruction %d", to, at)
		}
		return uint32(skip), nil
	}
	for _, j := range a.jumps {
		jt, err := offset(j.at, j.jt)
		if err != nil {
			return nil, err
		}
		jf, err := offset(j.at, j.jf)
		if err != nil {
			return nil, err
		}
		ins := &a.prog[j.at]
		if ins.Code == unix.BPF_JMP|unix.BPF_JA {
			ins.K = jt // an unconditional jump's offset is 32 bits wide
			continue
		}
		if jt > 255 || jf > 255 {
			return nil, fmt.Errorf("a jump from %d is too long", j.at)
		}
		ins.Jt, ins.Jf = uint8(jt), uint8(jf)
	}
	return a.prog, nil
}
