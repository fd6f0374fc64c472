// mcp-exec is an MCP server over stdio that runs shell commands as jobs:
// execute, wait, status, output, input, kill and list_jobs.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// version is the release, replaced at build time with
// -ldflags "-X main.version=...".
var version = "1.0.0"

const (
	// shutdownKillDuration bounds the wait for processes after KILL at shutdown.
	shutdownKillDuration = time.Second
	// shutdownFlushDuration bounds the last write of replies at shutdown.
	shutdownFlushDuration = 500 * time.Millisecond
	// trimQuietDuration is how long requests must pause before memory a
	// burst freed is handed back to the system.
	trimQuietDuration = time.Second
	// trimMinBytes is how much must have been allocated since the last
	// trim for another to be worth a collection.
	trimMinBytes = 16 << 20
	// trimRechecks and trimMinFreeBytes bound the looks after a trim: free
	// heap above the floor is handed back again.
	trimRechecks     = 10
	trimMinFreeBytes = 512 << 10
)

func main() {
	handleFlags(os.Args[1:])
	cfg := mustLoadConfig(os.Environ())
	signals := watchSignals()
	prepareProcess()
	out := newWriter(os.Stdout)
	c := newConn(cfg, out)
	go trimWhenIdle(c.activity)
	reason := serveUntilDone(c, out, signals)
	shutdown(c, out, reason)
	os.Exit(0)
}

// config is the server's configuration, read once from the environment.
type config struct {
	defaultTimeout   time.Duration // wait's timeout when none is given
	maxOutputBytes   int           // window size per stream per job
	progressInterval time.Duration // between progress notifications
	debug            bool          // serve debug/stats (tests and the soak script)
	shell            string        // the shell jobs run in
	baseEnv          []string      // the environment jobs start from
}

// configVar is one MCP_EXEC_* variable.
type configVar struct {
	name, def, doc string
	set            func(c *config, value string) error
}

var configVars = []configVar{
	{"MCP_EXEC_DEFAULT_TIMEOUT", "60", "seconds wait blocks when the call gives no timeout (>= 0, fractions allowed)",
		func(c *config, v string) (err error) { c.defaultTimeout, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_OUTPUT_BYTES", "1048576", "bytes of output kept per stream per job; older bytes are dropped (>= 1)",
		func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New("must be a whole number of bytes, at least 1")
			}
			c.maxOutputBytes = n
			return nil
		}},
	{"MCP_EXEC_PROGRESS_INTERVAL", "10", "seconds between progress notifications of a blocking call (> 0)",
		func(c *config, v string) (err error) { c.progressInterval, err = parseSeconds(v, false); return }},
	{"MCP_EXEC_DEBUG", "0", "1 serves the debug/stats method (goroutines, fds, RSS) for tests and soak runs",
		func(c *config, v string) error {
			switch v {
			case "0", "1":
				c.debug = v == "1"
				return nil
			}
			return errors.New("must be 0 or 1")
		}},
}

// parseSeconds reads a number of seconds; zero is allowed only if zeroOK.
func parseSeconds(v string, zeroOK bool) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errors.New("must be a number of seconds")
	case f < 0:
		return 0, errors.New("must not be negative")
	case f == 0 && !zeroOK:
		return 0, errors.New("must be greater than 0")
	}
	return secondsToDuration(f), nil
}

// loadConfig reads the configuration from environ. An unknown MCP_EXEC_*
// variable is an error: it is almost always a typo.
func loadConfig(environ []string) (*config, error) {
	c := &config{baseEnv: environ}
	known := map[string]configVar{}
	for _, v := range configVars {
		known[v.name] = v
		if err := v.set(c, v.def); err != nil {
			return nil, fmt.Errorf("default of %s: %w", v.name, err)
		}
	}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MCP_EXEC_") {
			continue
		}
		v, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("unknown variable %s; the valid ones are %s", name, strings.Join(configNames(), ", "))
		}
		if value == "" {
			continue // set but empty: keep the default
		}
		if err := v.set(c, value); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", name, value, err)
		}
	}
	c.shell = resolveShell(os.Getenv("SHELL"))
	return c, nil
}

// configNames lists the variable names in order.
func configNames() []string {
	names := make([]string, len(configVars))
	for i, v := range configVars {
		names[i] = v.name
	}
	sort.Strings(names)
	return names
}

// resolveShell picks $SHELL, or /bin/sh when it is unset, and finds it on
// PATH when it is a bare name. A shell that cannot be found is kept as is:
// each job then fails to start with a start_error that names it.
func resolveShell(shell string) string {
	if shell == "" {
		return "/bin/sh"
	}
	if !strings.Contains(shell, "/") {
		if path, err := exec.LookPath(shell); err == nil {
			return path
		}
	}
	return shell
}

// mustLoadConfig loads the configuration or exits with status 2 and one line
// on stderr.
func mustLoadConfig(environ []string) *config {
	cfg, err := loadConfig(environ)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcp-exec: configuration error: %v\n", err)
		os.Exit(2)
	}
	return cfg
}

// handleFlags answers --version and --help; any other argument is a usage
// error. The server itself takes no arguments, except that a first argument
// naming this very executable is skipped: an image started with the
// server's own path as its command (`podman run IMAGE /usr/local/bin/mcp-exec`)
// hands it to us through the entrypoint, and must still serve.
func handleFlags(args []string) {
	if len(args) > 0 && isOwnExecutable(args[0]) {
		args = args[1:]
	}
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "--version", "-version", "-v":
		fmt.Printf("mcp-exec %s\n", version)
		os.Exit(0)
	case "--help", "-help", "-h":
		fmt.Print(usage())
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "mcp-exec: unknown argument %q\n%s", args[0], usage())
	os.Exit(2)
}

// isOwnExecutable reports whether path names the file this process runs.
func isOwnExecutable(path string) bool {
	if !strings.Contains(path, "/") {
		return false // a bare word is a flag or a typo, never our path
	}
	self, err := os.Executable()
	if err != nil {
		return false
	}
	a, errA := os.Stat(path)
	b, errB := os.Stat(self)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// usage is the --help text.
func usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp-exec %s: an MCP server over stdio that runs shell commands as jobs.\n\n", version)
	b.WriteString("Usage: mcp-exec            serve MCP (newline-delimited JSON-RPC) on stdin/stdout\n")
	b.WriteString("       mcp-exec --version  print the version\n       mcp-exec --help     print this help\n")
	b.WriteString("A first argument naming this executable itself is skipped (an image run with its own path).\n\n")
	b.WriteString("Environment:\n")
	for _, v := range configVars {
		fmt.Fprintf(&b, "  %-27s default %-8s %s\n", v.name, v.def, v.doc)
	}
	b.WriteString("  SHELL                       jobs run as $SHELL -c COMMAND (/bin/sh when unset)\n")
	return b.String()
}

// watchSignals subscribes to the signals that end the server. As PID 1 an
// unhandled SIGTERM would do nothing at all, so they are always handled.
// SIGPIPE is subscribed so a vanished client turns into EPIPE, not death.
// A SIGHUP or SIGINT that was ignored when the server started (nohup, a
// background job of a script) stays without effect on it. It is still
// handled rather than left ignored, because a child inherits an ignored
// signal but gets the default action for one the runtime handles: jobs
// start with default dispositions either way.
func watchSignals() <-chan os.Signal {
	ignored := map[os.Signal]bool{}
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		ignored[sig] = signal.Ignored(sig) // only true before Notify takes it over
	}
	arrived := make(chan os.Signal, 4) // carries every subscribed signal
	signal.Notify(arrived, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return stoppingSignals(arrived, ignored)
}

// stoppingSignals passes on the first signal from arrived that is not in
// ignored; later ones are dropped, shutdown having begun.
func stoppingSignals(arrived <-chan os.Signal, ignored map[os.Signal]bool) <-chan os.Signal {
	stop := make(chan os.Signal, 1) // carries the signal that ends the server
	go func() {
		for sig := range arrived {
			if ignored[sig] {
				continue
			}
			select {
			case stop <- sig:
			default:
			}
		}
	}()
	return stop
}

// prepareProcess readies the process to own children: inherited descriptors
// stay out of jobs, orphans come back to us for reaping, and the reaper runs.
func prepareProcess() {
	closeInheritedOnExec()
	if os.Getpid() != 1 {
		if _, err := becomeSubreaper(); err != nil {
			logf("cannot become a child subreaper (%v); orphans go to the system's init", err)
		}
	}
	children.startReaper()
}

// serveUntilDone serves the client until stdin ends, a signal arrives or
// stdout breaks, and says which.
func serveUntilDone(c *conn, out *writer, signals <-chan os.Signal) string {
	eof := make(chan error, 1)
	go func() { eof <- c.serve(pollableStdin()) }()
	select {
	case err := <-eof:
		if err != nil {
			return fmt.Sprintf("stdin: %v", err)
		}
		return "stdin closed"
	case sig := <-signals:
		return "signal " + sig.String()
	case <-out.gone:
		return "stdout closed"
	}
}

// shutdown ends the session: blocked calls answer -32800, every job's tree
// gets TERM and, after a grace period, KILL, and pending replies are
// flushed. It returns within about teardownGraceDuration+2s.
func shutdown(c *conn, out *writer, reason string) {
	_ = reason // kept for debugging; the client knows why it closed
	c.cancelAll()
	terminateAll(c.reg.list())
	waitHandlers(c, shutdownKillDuration)
	out.flush(shutdownFlushDuration)
}

// terminateAll sends TERM to every job's process group and to every other
// descendant (orphans that left their group), waits up to the grace period,
// then KILLs whatever is left and waits a little more.
func terminateAll(jobs []*job) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for _, j := range jobs {
			_ = j.signal(sig) // best effort: the group may be gone
		}
		for _, p := range descendants(os.Getpid()) {
			_ = syscall.Kill(p.pid, sig) // best effort: it may have exited
		}
		wait := teardownGraceDuration
		if sig == syscall.SIGKILL {
			wait = shutdownKillDuration
		}
		if awaitAllGone(jobs, time.Now().Add(wait)) {
			return
		}
	}
}

// awaitAllGone waits until no job group and no descendant is left.
func awaitAllGone(jobs []*job, deadline time.Time) bool {
	for _, j := range jobs {
		if !awaitGroupGone(j.pid, deadline, nil) {
			return false
		}
	}
	return awaitProcesses(func() bool { return len(descendants(os.Getpid())) == 0 }, deadline, nil)
}

// stdinFile keeps the pollable stdin alive: its finalizer would close fd 0.
var stdinFile *os.File

// pollableStdin returns stdin as a file in the runtime poller when it is a
// pipe or socket, so reading it parks a goroutine instead of holding a
// thread in read(2) and delaying the request goroutines it just started.
// A terminal is left alone: other programs share its blocking mode.
func pollableStdin() *os.File {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return os.Stdin
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return os.Stdin
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	stdinFile = os.NewFile(0, "stdin")
	return stdinFile
}

// trimWhenIdle hands memory a burst of work freed back to the system once
// requests pause. The runtime would otherwise keep the burst's heap until
// its next collection, which an idle server may not start for minutes. After
// a trim it looks again each quiet second, a few times, because the burst's
// last frees can land after it; a request that finishes meanwhile means the
// burst went on, so it waits for the next quiet second and trims again if
// enough was allocated since. It costs a few collections per burst and
// nothing while the server is idle.
func trimWhenIdle(activity <-chan struct{}) {
	var trimmedAt uint64 // bytes allocated in all when memory was last handed back
	for range activity {
		for {
			for !quietFor(activity, trimQuietDuration) {
			}
			allocated := totalAllocBytes()
			if allocated-trimmedAt < trimMinBytes {
				break
			}
			trimmedAt = allocated
			returnMemory()
			if recheckTrim(activity) {
				break
			}
		}
	}
}

// recheckTrim looks at the heap each quiet second, trimRechecks times, and
// hands free memory above the floor back again. It reports false as soon
// as a request finishes meanwhile.
func recheckTrim(activity <-chan struct{}) bool {
	var m runtime.MemStats
	for i := 0; i < trimRechecks; i++ {
		if !quietFor(activity, trimQuietDuration) {
			return false
		}
		if runtime.ReadMemStats(&m); heapFreeBytes(&m) >= trimMinFreeBytes {
			debug.FreeOSMemory()
		}
	}
	return true
}

// returnMemory collects garbage and hands free heap back to the system.
func returnMemory() {
	runtime.GC() // the first collection only moves sync.Pool buffers to its victim cache
	debug.FreeOSMemory()
}

// totalAllocBytes is how many heap bytes the process has allocated in all.
func totalAllocBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// quietFor waits d and reports whether no activity arrived meanwhile.
func quietFor(activity <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-activity:
		return false
	case <-t.C:
		return true
	}
}

// heapFreeBytes is heap memory free for reuse and not yet returned to the
// system: what FreeOSMemory would hand back.
func heapFreeBytes(m *runtime.MemStats) uint64 { return m.HeapIdle - m.HeapReleased }

// waitHandlers waits, at most timeout, for running requests to reply.
func waitHandlers(c *conn, timeout time.Duration) {
	done := make(chan struct{})
	go func() { c.handlers.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// logf writes a diagnostic line to stderr; stdout carries only JSON-RPC.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcp-exec: "+format+"\n", args...)
}

// cloexecListed marks close-on-exec every descriptor above 2 listed in dir
// (/proc/self/fd or /dev/fd).
func cloexecListed(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
