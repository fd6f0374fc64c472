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

// The launcher: a job that runs confined starts as this very executable,
// re-executed with launcherMarker as its argv[0]. It imposes the
// confinement on itself, then execs the job's program in the same process,
// so the job's first instruction already runs restricted and the job's pid
// (and process group) is the launcher's. Its arguments, after the marker:
//
//	fs=restricted          writes refused except beneath w= directories
//	w=DIR                  a writable directory (repeated)
//	net=off                no network
//	rlimit=RESOURCE:VALUE  a resource limit (repeated)
//	--                     then the program's path and its full argv;
//	                       nothing after "--" is a probe: confine and exit 0
const launcherMarker = "mcp-exec:launch"

// selfExecutable is how a process names its own executable: still valid
// when the file was replaced or deleted after the server started.
const selfExecutable = "/proc/self/exe"

// isLauncher reports whether this process was started as a job's launcher.
func isLauncher(args []string) bool {
	return len(args) > 0 && args[0] == launcherMarker
}

// launcherArgv returns the path and argv that run program (its path and full
// argv) under c through the launcher; a nil program makes a probe.
func launcherArgv(c confinement, path string, argv []string) (string, []string) {
	args := []string{launcherMarker}
	if c.fsRestricted {
		args = append(args, "fs=restricted")
		for _, dir := range c.writable {
			args = append(args, "w="+dir)
		}
	}
	if c.netOff {
		args = append(args, "net=off")
	}
	for _, l := range c.rlimits {
		args = append(args, fmt.Sprintf("rlimit=%d:%d", l.resource, l.value))
	}
	args = append(args, "--")
	if argv != nil {
		args = append(append(args, path), argv...)
	}
	return selfExecutable, args
}

// parseLauncherArgs reads what launcherArgv wrote (without the marker).
func parseLauncherArgs(args []string) (c confinement, path string, argv []string, err error) {
	for i, a := range args {
		key, value, _ := strings.Cut(a, "=")
		switch {
		case a == "--":
			rest := args[i+1:]
			if len(rest) == 1 {
				return c, "", nil, errors.New("a program path with no argv")
			}
			if len(rest) > 1 {
				path, argv = rest[0], rest[1:]
			}
			return c, path, argv, nil
		case a == "fs=restricted":
			c.fsRestricted = true
		case key == "w":
			c.writable = append(c.writable, value)
		case a == "net=off":
			c.netOff = true
		case key == "rlimit":
			r, v, _ := strings.Cut(value, ":")
			resource, err1 := strconv.Atoi(r)
			limit, err2 := strconv.ParseUint(v, 10, 64)
			if err1 != nil || err2 != nil {
				return c, "", nil, fmt.Errorf("bad launcher argument %q", a)
			}
			c.rlimits = append(c.rlimits, rlimit{resource, limit})
		default:
			return c, "", nil, fmt.Errorf("bad launcher argument %q", a)
		}
	}
	return c, "", nil, errors.New("launcher arguments end without --")
}

// runLauncher is the whole life of a launcher process: confine, then exec
// the program, with the environment it was given. It never returns. What
// goes wrong is said on stderr, which is the job's, with a shell's exit
// status: 126 could not run, 127 not found, 121-123 could not confine.
func runLauncher(args []string) {
	c, path, argv, err := parseLauncherArgs(args[1:])
	if err != nil {
		launcherFail(launcherFailedExec, err)
	}
	if err := c.apply(); err != nil {
		var ce *confineError
		status := launcherFailedFS
		if errors.As(err, &ce) {
			status = ce.status
		}
		launcherFail(status, fmt.Errorf("cannot confine the job: %w", err))
	}
	if path == "" {
		os.Exit(0) // a probe: confined, so it works
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

// confinementFor is what cfg imposes on a job whose private temporary
// directory is tmp ("" for none).
func confinementFor(cfg *config, tmp string) confinement {
	c := confinement{fsRestricted: cfg.sandbox != sandboxOff, netOff: cfg.networkOff, rlimits: cfg.rlimits}
	if c.fsRestricted {
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
// asks of jobs, by confining a launcher that then runs nothing. Its error
// names the setting that cannot be had, and why.
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
		launcherFailedRlimits: "MCP_EXEC_RLIMITS",
		launcherFailedFS:      "MCP_EXEC_SANDBOX=" + cfg.sandbox,
		launcherFailedNet:     "MCP_EXEC_NETWORK=off",
	}[status]
	if setting == "" {
		setting = "MCP_EXEC_SANDBOX, MCP_EXEC_NETWORK or MCP_EXEC_RLIMITS"
	}
	return fmt.Errorf("%s cannot be enforced here, so the server will not start: %w", setting, err)
}

// probeConfinement runs the launcher once with c and no program, and
// returns nil when it could confine itself, or the launcher's exit status
// and what it said. The server calls it at startup: a sandbox the kernel
// cannot enforce stops the server instead of leaving jobs unconfined.
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
	path, argv := launcherArgv(c, "", nil)
	_, err = spawnNotify(spawnSpec{path: path, argv: argv, env: []string{},
		files: []uintptr{null.Fd(), null.Fd(), w.Fd()}}, func(st exitStatus) { exited <- st })
	w.Close()
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

// jobTemps holds the private temporary directories of sandboxed jobs, in
// one directory per server process, made at the first need.
var jobTemps struct {
	mu   sync.Mutex // guards base
	base string     // "" until made
}

// makeJobTemp creates a fresh, empty directory only one job will use as its
// TMPDIR.
func makeJobTemp() (string, error) {
	jobTemps.mu.Lock()
	if jobTemps.base == "" {
		base, err := os.MkdirTemp("", "mcp-exec-jobs-")
		if err != nil {
			jobTemps.mu.Unlock()
			return "", fmt.Errorf("make the jobs' temporary directory: %w", err)
		}
		jobTemps.base = base
	}
	base := jobTemps.base
	jobTemps.mu.Unlock()
	dir, err := os.MkdirTemp(base, "job-")
	if err != nil {
		return "", fmt.Errorf("make the job's temporary directory: %w", err)
	}
	return dir, nil
}

// removeJobTemps removes every job's temporary directory; for shutdown,
// after the jobs are gone.
func removeJobTemps() {
	jobTemps.mu.Lock()
	base := jobTemps.base
	jobTemps.base = ""
	jobTemps.mu.Unlock()
	if base != "" {
		_ = os.RemoveAll(base) // best effort: a leftover temporary directory harms no one
	}
}
