package main

// confinement is what a job's launcher imposes on its own process before it
// executes the job, so that the job's first instruction already runs under
// it. The zero value imposes nothing.
type confinement struct {
	fsRestricted bool     // writes are refused except beneath writable and to harmless devices
	writable     []string // directories the job may write beneath, when fsRestricted
	netOff       bool     // no IP sockets at all; TCP bind and connect refused as well
	rlimits      []rlimit // set, soft and hard, in this order

	// ownMounts (with fsRestricted) gives the job a mount namespace of its
	// own in which every mount is read-only but the writable places, so
	// that mode, owner, times, xattrs and flags, which Landlock does not
	// check, cannot change outside them either. Without it a sandboxed
	// job's seccomp filter refuses those changes everywhere.
	ownMounts bool
	// cwd is the job's working directory as admitted and resolved; with
	// ownMounts it is opened again inside the job's namespace, since a
	// directory pinned before would lead back to the server's mounts.
	cwd string
}

// rlimit is one resource limit: a resource number (RLIMIT_*) and its value,
// rlimInfinity for none.
type rlimit struct {
	resource int
	value    uint64
}

// rlimInfinity is RLIM_INFINITY: no limit.
const rlimInfinity = ^uint64(0)

// any reports whether c imposes anything.
func (c confinement) any() bool {
	return c.restrictsThread() || len(c.rlimits) > 0
}

// restrictsThread reports whether c needs a restricted thread to fork from.
func (c confinement) restrictsThread() bool {
	return c.fsRestricted || c.netOff
}

// What failed to confine a job, one per kind of restriction, so the
// startup check can name the setting at fault: a thread's restriction
// reports it in confineError, the rlimits launcher as its exit status (a
// job's own exit statuses are never these: a launcher that fails never runs
// the job). The last two are a launcher's exec failures, as a shell says
// them.
const (
	confineFailedRlimits = 121
	confineFailedFS      = 122
	confineFailedNet     = 123
	launcherFailedExec   = 126 // as a shell says it: found but could not run
	launcherNotFound     = 127 // as a shell says it: not found
)

// confineError is a confinement that could not be applied: which part
// failed (one of the confineFailed* statuses) and why.
type confineError struct {
	status int
	err    error
}

// Error is the confinement's failure as the kernel said it.
func (e *confineError) Error() string { return e.err.Error() }

// Unwrap gives the kernel's error, for errors.Is on its errno.
func (e *confineError) Unwrap() error { return e.err }
