package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// process is what the server owns once per process, whichever sessions and
// transports it serves: the memory its jobs' output windows hold, the
// counters /metrics serves, and the directory of the sandboxed jobs'
// private temporary directories. theProcess is the one value; startServer
// sets its bound, and the functions below hand its parts to the layers
// that use them. The child table (reaper.go's children) is process-wide
// too but stays a variable of its own: the files that name it (kill.go,
// tree.go, rpc.go) are not moved onto this value yet.
type process struct {
	windows windowMemory // every job's output windows and their bound
	metrics counters     // /metrics's counters
	temps   jobTempRoot  // the sandboxed jobs' temporary directories
	spills  spillStore   // where the bytes that leave the windows go (MCP_EXEC_SPILL)
	trees   jobTrees     // where each job's processes are kept (MCP_EXEC_CGROUP); set once by startTrees, nil: process groups
}

// theProcess is the process's own state, made before main runs.
var theProcess = &process{metrics: counters{responses: map[int]int64{}}}

// newWindow returns an empty window of a job: it retains at most the last
// limit bytes, and also the first headLimit bytes (0: none), and counts
// against the process's memory bound.
// With spill on, the bytes that leave it go to a file of its own.
func newWindow(limit, headLimit int) *window {
	w := theProcess.windows.newWindow(limit, headLimit)
	w.spillTo(theProcess.spills.forStream())
	return w
}

// startSpill readies the process's spill as cfg says (MCP_EXEC_SPILL);
// call it once, before the first job. Under auto, a directory that cannot
// be made leaves spill off, said on stderr: the windows then drop their
// oldest bytes as without it.
func startSpill(cfg *config) {
	dir, own := cfg.spill, false
	switch cfg.spill {
	case spillOff:
		return
	case spillAuto:
		var err error
		if dir, err = spillDir([]string{os.TempDir(), "/var/tmp", "/tmp"}, cfg.roots); err != nil {
			logf("spill is off: %v", err)
			return
		}
		own = true
	}
	theProcess.spills.configure(dir, own, cfg.spillBytes, cfg.spillLimit)
}

// startTrees chooses, once and before the first job, where jobs' processes
// are kept (MCP_EXEC_CGROUP): a cgroup per job, or process groups, said on
// stderr with the reason. Its error refuses the start (a setting that
// cannot be honoured).
func startTrees(cfg *config) error {
	trees, why, err := openJobTrees(cfg.cgroup, cfg.jobLimits)
	if err != nil {
		return err
	}
	if why != "" {
		logf("jobs are kept on process groups (\"tree\": \"process-group\"), not cgroups: %s", why)
	}
	theProcess.trees = trees
	return nil
}

// jobTreesInForce is where jobs' processes are kept: process groups until
// startTrees chose.
func jobTreesInForce() jobTrees {
	if theProcess.trees == nil {
		return groupTrees{}
	}
	return theProcess.trees
}

// treeInForce is the tree jobs' processes are kept in: treeCgroup or
// treeProcessGroup, for /healthz and the instructions.
func treeInForce() string { return jobTreesInForce().kind() }

// closeTrees empties and removes every job's cgroup left; for shutdown.
func closeTrees() { jobTreesInForce().close() }

// removeSpill removes the process's own spill directory; for shutdown.
func removeSpill() { theProcess.spills.remove() }

// spillDir makes the server's own directory for spill files (mode 0700)
// under the first of bases that lies in none of roots: jobs confined to
// the roots never see it, and its files have no names anyway.
func spillDir(bases, roots []string) (string, error) {
	var errs []error
	for _, base := range bases {
		real, err := filepath.EvalSymlinks(base)
		if err != nil || insideAny(real, roots) != "" {
			continue
		}
		dir, err := os.MkdirTemp(real, "mcp-exec-spill-")
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("every temporary directory (%s) is inside MCP_EXEC_ROOTS; set MCP_EXEC_SPILL to a directory outside them", strings.Join(bases, ", "))
	}
	return "", fmt.Errorf("make a private spill directory: %w", errors.Join(errs...))
}

// boundWindows keeps all jobs' windows within MCP_EXEC_MEMORY_LIMIT
// (windowMemory.enforce).
func boundWindows() { theProcess.windows.enforce() }

// windowBytesHeld is what all jobs' windows hold now.
func windowBytesHeld() int64 { return theProcess.windows.held() }

// The counters of theProcess, by the names their writers use: the job
// registry writes the job counts, the pumps outputBytes and the HTTP
// transport httpReplyBytes.
var (
	jobsStarted       = &theProcess.metrics.jobsStarted
	jobsFailedToStart = &theProcess.metrics.jobsFailedToStart
	jobsFinished      = &theProcess.metrics.jobsFinished
	jobsTimedOut      = &theProcess.metrics.jobsTimedOut
	outputBytes       = &theProcess.metrics.outputBytes
	httpReplyBytes    = &theProcess.metrics.httpReplyBytes
)

// countResponse counts one HTTP response with status code.
func countResponse(code int) { theProcess.metrics.countResponse(code) }

// writeMetrics writes the process's counters, then gauges, in the
// Prometheus text exposition format.
func writeMetrics(w io.Writer, gauges []metric) { theProcess.metrics.write(w, gauges) }

// makeJobTemp creates a fresh, empty directory only one job will use as
// its TMPDIR.
func makeJobTemp() (string, error) { return theProcess.temps.make() }

// removeJobTemps removes every job's temporary directory; for shutdown,
// after the jobs are gone.
func removeJobTemps() { theProcess.temps.remove() }

// jobTempRoot is the directory that holds the private temporary directories
// of sandboxed jobs, one per server process: made at the first need,
// removed at shutdown. The zero value has none yet.
type jobTempRoot struct {
	mu   sync.Mutex // guards base; taken alone, and no file is made under it but base itself
	base string     // "" until made
}

// make creates a fresh, empty directory under the root, making the root
// first if need be.
func (r *jobTempRoot) make() (string, error) {
	var err error
	r.mu.Lock()
	if r.base == "" {
		// Under the lock: two first jobs at once must share one root.
		r.base, err = os.MkdirTemp("", "mcp-exec-jobs-") // "" on error: the next job tries again
	}
	base := r.base
	r.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("make the jobs' temporary directory: %w", err)
	}
	dir, err := os.MkdirTemp(base, "job-")
	if err != nil {
		return "", fmt.Errorf("make the job's temporary directory: %w", err)
	}
	return dir, nil
}

// remove removes the root and everything in it; a later make starts a new
// one.
func (r *jobTempRoot) remove() {
	r.mu.Lock()
	base := r.base
	r.base = ""
	r.mu.Unlock()
	if base != "" {
		_ = os.RemoveAll(base) // best effort: a leftover temporary directory harms no one
	}
}
