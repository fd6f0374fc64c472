// The working directory a session keeps between calls (MCP_EXEC_KEEP_CWD):
// where the last blocking execute's shell ended, and how that shell tells.

package main

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// How a shell tells where it ended. The kernel drops a process's working
// directory before the process becomes a zombie, so nothing can be read
// from /proc once the shell has exited; the shell has to say it itself.
// The command is run as
//
//	trap '{ command pwd -P >|FILE; } 2>/dev/null' EXIT; COMMAND
//
// with FILE a file the server created for this job alone and holds open.
// Why this form:
//   - An EXIT trap runs on `exit N` and at the end of the script, and the
//     shell keeps N (or the last status) as its exit status: the trap
//     changes no result.
//   - A file, not an extra descriptor: a descriptor would be inherited by
//     every process the command starts, and a background child holding it
//     would keep it open past the shell. Subshells and background children
//     do not inherit the trap, so only the shell itself writes FILE.
//   - FILE is in the job's private TMPDIR when it has one: the only place a
//     sandboxed job (MCP_EXEC_SANDBOX=read-only or roots) may write.
//   - One line, the trap first: the command keeps its $LINENO, $0 and "$@".
//   - `command` skips a function named pwd; `>|` writes even under set -C;
//     the braces' 2>/dev/null also hide the trap's trace under set -x.
//
// What it costs: with a trap set, a shell no longer execs the command's
// last program in its own place, so a program that dies of a signal the
// shell did not get (a segfault) shows as exit status 128+N, as it does
// for any shell running more than one command. When nothing is written,
// the directory does not move: the command replaced the EXIT trap with its
// own, exec'd another program, or the shell was killed (dash writes
// nothing then; bash still does).
const cwdTrapOpen, cwdTrapClose = "trap '{ command pwd -P >|", "; } 2>/dev/null' EXIT; "

// posixShells are the shells whose syntax the trap is written in; under
// another $SHELL the directory is not tracked.
var posixShells = []string{"sh", "dash", "bash", "ash", "ksh", "ksh93", "mksh", "zsh", "yash", "posh", "busybox"}

// cwdReport is where one job's shell writes the directory it ended in.
// launch creates the file (wrap); finalDir reads it once the job has ended
// and removes it; both are safe to call more than once and from any
// goroutine. The file is made, read and removed with plain system calls:
// os.File would offer each descriptor to the runtime's poller, which
// refuses a regular file, and flip its flags to and fro on every job.
type cwdReport struct {
	once sync.Once // reads the file once: finalDir's answer, kept in dir
	fd   int       // the file the shell writes, held open; -1: none
	path string    // its name
	dir  string    // what the shell wrote, trimmed; "" when nothing
}

// cwdReportSeq numbers the report files of this process: each name is
// new in a directory only this process writes (or a job's own TMPDIR).
var cwdReportSeq atomic.Uint64

// cwdReports is process-wide state: the directory the report files of
// unsandboxed jobs go in, made at the first and removed with the jobs'
// temporary directories at shutdown. Its lock guards dir.
var cwdReports struct {
	mu  sync.Mutex
	dir string
}

// sharedReportDir is the directory for report files of jobs without a
// TMPDIR of their own, made on first use (again after a failure).
func sharedReportDir() (string, error) {
	cwdReports.mu.Lock()
	defer cwdReports.mu.Unlock()
	if cwdReports.dir == "" {
		dir, err := makeJobTemp()
		if err != nil {
			return "", err
		}
		cwdReports.dir = dir
	}
	return cwdReports.dir, nil
}

// forgetSharedReportDir forgets dir as the report directory, if it still
// is, so the next report makes a new one.
func forgetSharedReportDir(dir string) {
	cwdReports.mu.Lock()
	defer cwdReports.mu.Unlock()
	if cwdReports.dir == dir {
		cwdReports.dir = ""
	}
}

// newCwdReport returns a report for a blocking execute's job, or nil when
// cfg does not keep the cwd or its shell is not one the trap is written for.
func newCwdReport(cfg *config) *cwdReport {
	if !cfg.keepCwd {
		return nil
	}
	name := filepath.Base(cfg.shell)
	for _, sh := range posixShells {
		if name == sh {
			return &cwdReport{fd: -1}
		}
	}
	return nil
}

// wrap creates the report file in tmpDir, the job's private TMPDIR, or
// when it has none in the process's report directory, and returns command
// with the trap in front. When the file cannot be made, or its path would
// need quoting, command comes back as it was: the job runs and the
// directory does not move. A shell that writes after finalDir removed the
// file (bash running its trap when torn down) leaves a small file in that
// directory until shutdown removes it.
func (r *cwdReport) wrap(tmpDir, command string) string {
	if r == nil {
		return command
	}
	for attempt := 0; ; attempt++ {
		dir := tmpDir
		if dir == "" {
			shared, err := sharedReportDir()
			if err != nil {
				return command
			}
			dir = shared
		}
		path := filepath.Join(dir, ".cwd-"+strconv.FormatUint(cwdReportSeq.Add(1), 10))
		if !plainPath(path) {
			return command
		}
		fd, err := openNew(path)
		if tmpDir == "" && errors.Is(err, unix.ENOENT) && attempt == 0 {
			// The jobs' temporary directories were removed (a shutdown
			// of an earlier server in this process): make it again.
			forgetSharedReportDir(dir)
			continue
		}
		if err != nil {
			return command
		}
		r.fd, r.path = fd, path
		return cwdTrapOpen + path + cwdTrapClose + command
	}
}

// openNew creates path, which must not exist, for reading and writing by
// this process alone, close-on-exec.
func openNew(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// plainPath reports whether p needs no quoting inside the single-quoted trap.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if b := p[i]; !isLetter(b) && !(b >= '0' && b <= '9') && !strings.ContainsRune("/._-+", rune(b)) {
			return false
		}
	}
	return p != ""
}

// finalDir is the directory the shell wrote, read the first time it is
// asked (call it once the job has ended), or "" when it wrote none.
func (r *cwdReport) finalDir() string {
	if r == nil {
		return ""
	}
	r.once.Do(func() {
		if r.fd < 0 {
			return
		}
		// Read by the descriptor: the path may be gone with the TMPDIR.
		b := make([]byte, 4097)
		n, err := unix.Pread(r.fd, b, 0)
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Pread(r.fd, b, 0)
		}
		if err == nil && n < len(b) && n > 1 && b[n-1] == '\n' {
			r.dir = string(b[:n-1])
		}
		_ = unix.Unlink(r.path) // best effort: the directory goes at shutdown (or with the job's TMPDIR)
		_ = unix.Close(r.fd)    // no EINTR retry: Linux closes the descriptor whatever close returns
		r.fd = -1
	})
	return r.dir
}

// release gives the report's file back without a directory: for a job
// that did not start, or whose end nobody will take.
func (r *cwdReport) release() { r.finalDir() }

// cwdKeeper is a session's kept working directory. The zero value keeps
// none. Every method takes its lock only to read or write its fields:
// directories are resolved, and files read, outside it.
type cwdKeeper struct {
	mu  sync.Mutex // guards dir, moves and pending
	dir string     // resolved; "": none kept, a call starts where it would without the setting
	// moves counts the times dir was set: a yielded execute moves the
	// directory when it is delivered only if nothing set it since.
	moves uint64
	// pending is the last yielded execute of the session, whose end may
	// still move the directory when wait delivers it.
	pending struct {
		jobID  string
		report *cwdReport
		moves  uint64
	}
}

// startDir is the directory a call starts in: given when the call names
// one (a relative one taken from the kept directory), else the kept
// directory when it still exists and is inside MCP_EXEC_ROOTS, else ""
// (the default, as without the setting). A blocking call that names a
// directory (moves) sets the kept one to it; a nowait call never does.
func (k *cwdKeeper) startDir(cfg *config, given string, moves bool) string {
	if !cfg.keepCwd {
		return given
	}
	k.mu.Lock()
	kept, seen := k.dir, k.moves
	k.mu.Unlock()
	if given != "" {
		if !filepath.IsAbs(given) && kept != "" {
			given = filepath.Join(kept, given)
		}
		if moves {
			k.moveTo(cfg, given, 0, false)
		}
		return given
	}
	if kept == "" {
		return ""
	}
	if _, ok := usableDir(cfg, kept); ok {
		return kept
	}
	// Gone, or moved out of the roots (a symlink swapped): forget it, so
	// the calls after this one do not keep trying it.
	k.mu.Lock()
	if k.moves == seen {
		k.dir = ""
	}
	k.mu.Unlock()
	return ""
}

// ended moves the kept directory to where a blocking execute's shell
// ended, if the shell said so and the directory can be kept.
func (k *cwdKeeper) ended(cfg *config, r *cwdReport) {
	if dir := r.finalDir(); dir != "" {
		k.moveTo(cfg, dir, 0, false)
	}
}

// yielded remembers a blocking execute that returned before its job ended
// (its report is read at the job's end, done): when wait delivers it and
// nothing has set the directory since, it moves the directory as a
// blocking end would. Only the newest such execute is remembered.
func (k *cwdKeeper) yielded(jobID string, r *cwdReport, done <-chan struct{}) {
	go func() {
		<-done
		r.finalDir() // the descriptor goes back at the job's end, delivered or not
	}()
	k.mu.Lock()
	k.pending.jobID, k.pending.report, k.pending.moves = jobID, r, k.moves
	k.mu.Unlock()
}

// delivered is told each job wait delivers: the remembered yielded
// execute's end moves the directory now, unless it was set meanwhile.
func (k *cwdKeeper) delivered(cfg *config, jobID string) {
	k.mu.Lock()
	if k.pending.report == nil || k.pending.jobID != jobID {
		k.mu.Unlock()
		return
	}
	r, seen := k.pending.report, k.pending.moves
	k.pending.jobID, k.pending.report = "", nil
	k.mu.Unlock()
	if dir := r.finalDir(); dir != "" {
		k.moveTo(cfg, dir, seen, true)
	}
}

// moveTo keeps dir when it resolves to a directory inside the roots;
// when onlyIf, only if the directory was not set since the count seen.
// Setting it forgets the pending yielded execute.
func (k *cwdKeeper) moveTo(cfg *config, dir string, seen uint64, onlyIf bool) {
	resolved, ok := usableDir(cfg, dir)
	if !ok {
		return
	}
	k.mu.Lock()
	if onlyIf && k.moves != seen {
		k.mu.Unlock()
		return
	}
	k.dir = resolved
	k.moves++
	k.pending.jobID, k.pending.report = "", nil // its job releases its report when it ends
	k.mu.Unlock()
}

// usableDir resolves dir, symlinks followed, and reports whether it is a
// directory a call may start in: inside MCP_EXEC_ROOTS when they are set.
func usableDir(cfg *config, dir string) (string, bool) {
	resolved, err := resolveDir(dir)
	if err != nil {
		return "", false
	}
	if cfg.roots == nil {
		return resolved, true
	}
	for _, root := range cfg.roots {
		if within(resolved, root) {
			return resolved, true
		}
	}
	return "", false
}
