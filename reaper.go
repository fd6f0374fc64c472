package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The reaper is the one owner of child reaping in this process. Nothing else
// may call wait4/waitid or use os/exec: a second waiter would steal exit
// statuses, and a job would report another process's exit. It collects every
// child with wait4(-1), hands a job's status to the callback registered at
// spawn, and discards the statuses of orphans re-parented to us (as PID 1
// or subreaper).

// exitStatus is how a child ended.
type exitStatus struct {
	pid    int            // the child's, which was also its process group's
	code   int            // exit status, or -1 when a signal killed it
	signal syscall.Signal // the fatal signal; 0 when it exited normally
	usage  resourceUsage  // what it and the children it waited for used
}

// resourceUsage is the CPU time and peak memory of a child, from wait4.
type resourceUsage struct {
	userMs, sysMs int64 // CPU time in user and kernel mode
	maxRSSKiB     int64 // the largest resident set of the child or of one of its waited-for children
}

// childTable records the children this process started, process-wide: jobs of
// every session share one reaper.
type childTable struct {
	// gate is held shared by spawn from fork until the new pid is recorded,
	// and exclusively by the reaper while it looks a reaped pid up. So a pid
	// the reaper collects is either recorded already or not ours at all.
	// It is the one lock held across a syscall (fork), and only for that.
	// Lock order: gate, then mu (spawnNotify records the pid, route and
	// tracksAfterForks look it up, under both); never gate under mu.
	gate sync.RWMutex

	// mu guards byPid, reaped and orphans. It is taken alone or under
	// gate, never the other way, and nothing else is locked under it.
	mu      sync.Mutex
	byPid   map[int]func(exitStatus) // live children and who to tell of their exit
	reaped  broadcast                // announced after each reap batch
	orphans int                      // statuses discarded because no job owned them
	start   sync.Once                // starts the reaper loop
	sigchld chan os.Signal           // carries SIGCHLD; 1-buffered, signals coalesce
}

// children is process-wide state: the child table. spawnNotify records each
// child it starts, and the reaper's loop (route) removes it as it reaps.
// It is a variable of its own, not a part of theProcess (process.go):
// process.go sits below the files that name it (kill.go, tree.go, rpc.go)
// but above this one, so moving it there means changing those files too.
var children = &childTable{
	byPid:   map[int]func(exitStatus){},
	reaped:  newBroadcast(),
	sigchld: make(chan os.Signal, 1),
}

// startReaper subscribes to SIGCHLD and starts the reap loop once. spawn calls
// it before the first fork, so no child can exit unobserved.
func (t *childTable) startReaper() {
	t.start.Do(func() {
		signal.Notify(t.sigchld, syscall.SIGCHLD)
		go t.loop()
	})
}

// loop reaps on every SIGCHLD. SIGCHLDs coalesce, so each wake-up drains
// every exited child until wait4 reports none ready or no children.
func (t *childTable) loop() {
	for {
		<-t.sigchld
		if t.reapAll() > 0 {
			t.mu.Lock()
			t.reaped.announce()
			t.mu.Unlock()
		}
	}
}

// reapAll collects every child that has exited and returns how many it
// collected.
func (t *childTable) reapAll() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return n // no children at all
		case err != nil:
			logf("reaper: wait4: %v", err)
			return n
		case pid <= 0:
			return n // children exist, none has exited; not an error
		}
		n++
		st := decodeStatus(ws)
		st.pid = pid
		st.usage = resourceUsage{userMs: timevalMs(ru.Utime), sysMs: timevalMs(ru.Stime), maxRSSKiB: maxRSSKiB(&ru)}
		t.route(pid, st)
	}
}

// route hands a reaped child's status to the callback registered at spawn.
func (t *childTable) route(pid int, st exitStatus) {
	t.gate.Lock() // waits out any fork whose pid is not recorded yet
	t.mu.Lock()
	owner, ok := t.byPid[pid]
	delete(t.byPid, pid)
	if !ok {
		t.orphans++
	}
	t.mu.Unlock()
	t.gate.Unlock()
	if ok {
		owner(st)
	}
}

// counts says how many children are tracked and how many orphans' statuses
// were discarded, for debug/stats.
func (t *childTable) counts() (tracked, orphans int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byPid), t.orphans
}

// tracks reports whether pid is a child spawn started that the reaper has
// not collected yet: a job's shell.
func (t *childTable) tracks(pid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byPid[pid]
	return ok
}

// tracksAfterForks is tracks once every fork under way has recorded its
// child: a child that still holds the server's descriptors between fork
// and exec is then seen as the job's shell it is about to be.
func (t *childTable) tracksAfterForks(pid int) bool {
	t.gate.Lock() // waits out the forks; nothing but the lookup is done under it
	defer t.gate.Unlock()
	return t.tracks(pid)
}

// reapedSignal returns a channel that is closed after the next reap batch.
// Waiters for a process group to drain select on it instead of spinning.
func (t *childTable) reapedSignal() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reaped.next()
}

// spawnSpec is what spawn needs to start one child.
type spawnSpec struct {
	path  string    // executable
	argv  []string  // full argv, argv[0] included
	dir   string    // working directory; "" keeps ours
	env   []string  // complete environment
	files []uintptr // become the child's fds 0, 1, 2, ...

	// confine, when it restricts anything, is imposed on a fresh thread
	// the child is then forked from, so the child starts restricted.
	confine *confinement
	ctty    bool // the child's fd 0 becomes its controlling terminal
	// cgroupFD, when inCgroup, is the open cgroup directory the child
	// starts in (clone3 CLONE_INTO_CGROUP): it is never in the server's.
	cgroupFD int
	inCgroup bool
}

// spawnNotify starts a child in a new session and process group and returns
// its pid. It calls onExit with the child's exit status, once, on the
// reaper's goroutine, possibly before spawnNotify returns; onExit must not
// block. The caller owns the child's fds in spec.files and must close them.
func spawnNotify(spec spawnSpec, onExit func(exitStatus)) (int, error) {
	if spec.confine != nil && spec.confine.restrictsThread() {
		return spawnConfined(spec, onExit)
	}
	children.startReaper()
	attr := &syscall.ProcAttr{
		Dir:   spec.dir,
		Env:   spec.env,
		Files: spec.files,
		// A session of its own: the child leads a new process group (its
		// pgid is its pid, as kill needs) and has no controlling terminal,
		// so nothing in it can stop on, or read from, the server's tty.
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: spec.ctty, Ctty: 0},
	}
	if spec.inCgroup {
		intoCgroup(attr.Sys, spec.cgroupFD)
	}
	children.gate.RLock()
	defer children.gate.RUnlock()
	pid, err := syscall.ForkExec(spec.path, spec.argv, attr)
	if err != nil {
		return 0, err
	}
	children.mu.Lock()
	children.byPid[pid] = onExit
	children.mu.Unlock()
	return pid, nil
}

// spawnConfined is spawnNotify from a thread of its own that is first
// restricted by spec.confine, and that ends with the spawn.
func spawnConfined(spec spawnSpec, onExit func(exitStatus)) (int, error) {
	var pid int
	err := onDiscardedThread(func() error {
		if err := spec.confine.restrictThread(); err != nil {
			return err
		}
		dir, release, err := spec.confine.jobDir(spec.dir)
		if err != nil {
			return err
		}
		defer release()
		spec.dir, spec.confine = dir, nil
		pid, err = spawnNotify(spec, onExit)
		return err
	})
	return pid, err
}

// onDiscardedThread runs f on a thread of its own that ends with it, so
// whatever f changes about its thread (namespaces, credentials, filters)
// never reaches the server's other work: the thread is never unlocked, so
// the Go runtime discards it instead of running anything else on it, and
// the runtime makes new threads from an unlocked one, so it does not
// spread that way either. The main thread, which the runtime parks for
// good instead of ending, is never the one used.
func onDiscardedThread(f func() error) error {
	done := make(chan error, 1) // carries f's outcome back
	go func() {
		runtime.LockOSThread() // for good: see above
		if onMainThread() {
			// Held here, the main thread cannot take the next try: it
			// lands on another thread, and this one goes back untouched.
			err := onDiscardedThread(f)
			runtime.UnlockOSThread()
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// decodeStatus turns a wait status into an exitStatus.
func decodeStatus(ws syscall.WaitStatus) exitStatus {
	switch {
	case ws.Exited():
		return exitStatus{code: ws.ExitStatus()}
	case ws.Signaled():
		return exitStatus{code: -1, signal: ws.Signal()}
	}
	return exitStatus{code: -1}
}

// timevalMs is a timeval in whole milliseconds.
func timevalMs(tv syscall.Timeval) int64 {
	return int64(tv.Sec)*1000 + int64(tv.Usec)/1000
}

// errGroupGone reports that no process is left in a process group.
var errGroupGone = errors.New("process group is gone")

// signalGroup sends sig to every process in group pgid. It returns
// errGroupGone when the group has no members left (ESRCH).
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		// No group: a job that never started has pid 0, and kill(-0)
		// would signal the server's own group, and whoever started it.
		return errGroupGone
	}
	for {
		err := syscall.Kill(-pgid, sig)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ESRCH):
			return errGroupGone
		default:
			return fmt.Errorf("signal group %d: %w", pgid, err)
		}
	}
}

// groupAlive reports whether any process, zombies included, is still in
// group pgid. EPERM means a member exists that we may not signal.
func groupAlive(pgid int) bool { return !errors.Is(signalGroup(pgid, 0), errGroupGone) }

// awaitProcesses blocks until gone reports true, stop is closed, or deadline
// passes, and reports gone's last answer. Processes end without telling us
// directly, so it re-checks on every reap batch (our children and orphans
// re-parented to us) and otherwise on a backoff, for processes reaped by
// someone else.
func awaitProcesses(gone func() bool, deadline time.Time, stop <-chan struct{}) bool {
	backoff := time.Millisecond
	for {
		reaped, emptied := children.reapedSignal(), cgroupChanged()
		if gone() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		timer := time.NewTimer(min(backoff, left))
		select {
		case <-reaped:
		case <-emptied: // a job's cgroup changed: it may have emptied
		case <-timer.C:
			backoff = min(2*backoff, 64*time.Millisecond)
		case <-stop:
			timer.Stop()
			return gone()
		}
		timer.Stop()
	}
}
