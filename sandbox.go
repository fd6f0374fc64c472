package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The launcher: a job with resource limits starts as this very executable,
// re-executed with launcherMarker as its argv[0]. It sets the limits on
// itself (they are process-wide, so the server cannot set them on its own
// process for a child), then execs the job's program in the same process:
// the job's first instruction already runs limited, and its pid (and
// process group) is the launcher's. Its arguments, after the marker:
//
//	rlimit=RESOURCE:VALUE  a resource limit (repeated)
//	--                     then the program's path and its full argv;
//	                       nothing after "--" is a probe: limit and exit 0
//
// The filesystem and network restrictions are not the launcher's: the
// server imposes them on the thread it forks the job from, which costs a
// fraction of re-executing a Go program.
const launcherMarker = "mcp-exec:launch"

// selfExecutable is how a process names its own executable: still valid
// when the file was replaced or deleted after the server started.
const selfExecutable = "/proc/self/exe"

// isLauncher reports whether this process was started as a job's launcher.
func isLauncher(args []string) bool {
	return len(args) > 0 && args[0] == launcherMarker
}

// launcherArgv returns the path and argv that run program (its path and full
// argv) through the launcher with limits; a nil argv makes a probe.
func launcherArgv(limits []rlimit, path string, argv []string) (string, []string) {
	args := []string{launcherMarker}
	for _, l := range limits {
		args = append(args, fmt.Sprintf("rlimit=%d:%d", l.resource, l.value))
	}
	args = append(args, "--")
	if argv != nil {
		args = append(append(args, path), argv...)
	}
	return selfExecutable, args
}

// parseLauncherArgs reads what launcherArgv wrote (without the marker).
func parseLauncherArgs(args []string) (limits []rlimit, path string, argv []string, err error) {
	for i, a := range args {
		if a == "--" {
			rest := args[i+1:]
			if len(rest) == 1 {
				return nil, "", nil, errors.New("a program path with no argv")
			}
			if len(rest) > 1 {
				path, argv = rest[0], rest[1:]
			}
			return limits, path, argv, nil
		}
		value, ok := strings.CutPrefix(a, "rlimit=")
		r, v, _ := strings.Cut(value, ":")
		resource, err1 := strconv.Atoi(r)
		limit, err2 := strconv.ParseUint(v, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, "", nil, fmt.Errorf("bad launcher argument %q", a)
		}
		limits = append(limits, rlimit{resource, limit})
	}
	return nil, "", nil, errors.New("launcher arguments end without --")
}

// runLauncher is the whole life of a launcher process: set the limits, then
// exec the program with the environment it was given. It never returns.
// What goes wrong is said on stderr, which is the job's, with a shell's
// exit status (126 could not run, 127 not found) or 121, could not limit.
func runLauncher(args []string) {
	limits, path, argv, err := parseLauncherArgs(args[1:])
	if err != nil {
		launcherFail(launcherFailedExec, err)
	}
	if err := setRlimits(limits); err != nil {
		launcherFail(confineFailedRlimits, fmt.Errorf("cannot limit the job: %w", err))
	}
	if path == "" {
		os.Exit(0) // a probe: limited, so it works
	}
	for {
		err = syscall.Exec(path, argv, os.Environ())
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	status := launcherFailedExec
	if errors.Is(err, syscall.ENOENT) {
		status = launcherNotFound
	}
	launcherFail(status, fmt.Errorf("%s: %w", path, err))
}

// launcherFail says why on stderr and exits with status.
func launcherFail(status int, err error) {
	fmt.Fprintf(os.Stderr, "mcp-exec: %v\n", err)
	os.Exit(status)
}

// mountNamespaces reports, once, whether this server can give its
// sandboxed jobs mount namespaces of their own with read-only mounts. It
// tries on a thread that is discarded afterwards. Where it cannot, a
// sandboxed job's metadata changes are refused everywhere by its seccomp
// filter instead, and the server says so once.
var mountNamespaces = sync.OnceValue(func() bool {
	err := onDiscardedThread(probeMountNamespace)
	if err != nil {
		logf("sandbox: no mount namespace for jobs (%v): changes of mode, owner, times and xattrs are refused everywhere, inside the roots too", err)
	}
	return err == nil
})

// serverUndumpable reports whether the server under cfg makes itself
// undumpable, so that its /proc/PID/fd, mem and the like belong to root
// and jobs running as its user cannot list or open them: serving several
// clients (over HTTP), so one client's jobs cannot reach the others'
// connections, and under a sandbox, which promises that a job reaches
// nothing of the server's (its terminal, its client's pipes). Over stdio
// with no sandbox, jobs may read the server's /proc files as in 1.0.
func serverUndumpable(cfg *config) bool {
	return cfg.listen != "" || cfg.sandbox != sandboxOff
}

// confinementFor is what cfg imposes on a job whose private temporary
// directory is tmp ("" for none).
func confinementFor(cfg *config, tmp string) confinement {
	c := confinement{fsRestricted: cfg.sandbox != sandboxOff, netOff: cfg.networkOff, rlimits: cfg.rlimits}
	if c.fsRestricted {
		c.ownMounts = mountNamespaces()
		if tmp != "" {
			c.writable = append(c.writable, tmp)
		}
		if cfg.sandbox == sandboxRoots {
			c.writable = append(c.writable, cfg.roots...)
		}
	}
	return c
}

// checkConfinement confirms at startup that the kernel enforces what cfg
// asks of jobs, by starting a launcher under it that then runs nothing: a
// sandbox the kernel cannot enforce stops the server instead of leaving
// jobs unconfined. Its error names the setting that cannot be had, and why.
func checkConfinement(cfg *config) error {
	c := confinementFor(cfg, "")
	if !c.any() {
		return nil
	}
	status, err := probeConfinement(c)
	if err == nil {
		return nil
	}
	setting := map[int]string{
		confineFailedRlimits: "MCP_EXEC_RLIMITS",
		confineFailedFS:      "MCP_EXEC_SANDBOX=" + cfg.sandbox,
		confineFailedNet:     "MCP_EXEC_NETWORK=off",
	}[status]
	if setting == "" {
		setting = "MCP_EXEC_SANDBOX, MCP_EXEC_NETWORK or MCP_EXEC_RLIMITS"
	}
	return fmt.Errorf("%s cannot be enforced here, so the server will not start: %w", setting, err)
}

// probeConfinement starts the launcher once under c, with no program, and
// returns nil when it ran, or the confineFailed* status of what failed and
// why.
func probeConfinement(c confinement) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return 0, fmt.Errorf("probe: %w", err)
	}
	defer null.Close()
	exited := make(chan exitStatus, 1) // carries the probe's status from the reaper
	path, argv := launcherArgv(c.rlimits, "", nil)
	_, err = spawnNotify(spawnSpec{path: path, argv: argv, env: []string{}, confine: &c,
		files: []uintptr{null.Fd(), null.Fd(), w.Fd()}}, func(st exitStatus) { exited <- st })
	w.Close()
	var ce *confineError
	if errors.As(err, &ce) {
		return ce.status, err
	}
	if err != nil {
		return 0, fmt.Errorf("probe: start %s: %w", path, err)
	}
	said, _ := io.ReadAll(io.LimitReader(r, 4096)) // until the launcher exits and EOF
	select {
	case st := <-exited:
		if st.code == 0 {
			return 0, nil
		}
		why := strings.TrimPrefix(string(bytes.TrimSpace(said)), "mcp-exec: ")
		if why == "" {
			why = fmt.Sprintf("the launcher ended with status %d, signal %d", st.code, st.signal)
		}
		return st.code, errors.New(why)
	case <-time.After(probeMaxDuration):
		return 0, errors.New("probe: the launcher did not finish")
	}
}

// probeMaxDuration bounds the startup probe; it takes a few milliseconds.
const probeMaxDuration = 10 * time.Second
