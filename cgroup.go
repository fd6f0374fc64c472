package main

import (
	"fmt"
	"os"
	"strings"
)

// Trees a job's processes are kept in ("tree" in /healthz, --help and the
// instructions).
const (
	treeCgroup       = "cgroup"        // a cgroup v2 directory per job
	treeProcessGroup = "process-group" // the job's process group and session, and what /proc links to them
)

// cgroupOff and cgroupAuto are MCP_EXEC_CGROUP's words besides a directory.
const (
	cgroupOff  = "off"
	cgroupAuto = "auto"
)

// jobLimits are the per-job limits a cgroup enforces; a zero field is no
// limit.
type jobLimits struct {
	memoryBytes int64   // memory.max
	pids        int     // pids.max
	cpuCores    float64 // cpu.max, as a share of one core's time
}

// limitRow names one per-job limit: its setting, the controller that
// enforces it and whether it is set.
type limitRow struct {
	setting, controller string
	set                 bool
}

// rows lists the limits with the setting and controller of each.
func (l jobLimits) rows() []limitRow {
	return []limitRow{
		{"MCP_EXEC_JOB_MEMORY", "memory", l.memoryBytes > 0},
		{"MCP_EXEC_JOB_PIDS", "pids", l.pids > 0},
		{"MCP_EXEC_JOB_CPU", "cpu", l.cpuCores > 0},
	}
}

// jobTrees makes the box each job's processes are kept in. It is chosen
// once at start (openJobTrees) and never changes.
type jobTrees interface {
	// kind is treeCgroup or treeProcessGroup.
	kind() string
	// box makes a new job's box; an error refuses the job. With
	// countProcs its processes are counted for usage's procs_max.
	box(countProcs bool) (jobBox, error)
	// close empties and removes every box left, for shutdown.
	close()
}

// jobBox is what keeps one job's processes together beyond its process
// group. With a cgroup, every process the job ever starts stays in it; on
// process groups the box holds nothing and kill relies on the group, the
// session and /proc (see reach). Its methods do not block for long and
// may be called from any goroutine.
type jobBox interface {
	// spawnFD is the open directory the job's first process starts in
	// (CLONE_INTO_CGROUP), or -1.
	spawnFD() int
	// started closes what only the spawn needed.
	started()
	// members lists the pids in the box now, its sub-cgroups' included;
	// ok is false when the box cannot list them (process groups).
	members() (pids []int, ok bool)
	// snapshot lists the box's processes at one instant, oldest pid
	// first, zombies included: the cgroup is frozen while it is read and
	// thawed before snapshot returns, whatever happened. Each entry's
	// name and start are as read while frozen, its state as read just
	// after the thaw (a frozen process reads as sleeping). ok reports
	// that the reading is exact; it is false on process groups (procs is
	// nil: read the group) and where the cgroup could not be frozen in
	// time (a member in uninterruptible sleep holds freezing up, or the
	// kernel has no cgroup.freeze): procs is then a reading taken while
	// the box ran, and the caller reads again until two agree.
	snapshot() (procs []procInfo, ok bool)
	// escaped lists, oldest pid first, zombies included, the processes
	// outside this box that are the job's: descendants of the server that
	// left the box (or whose parent, or a nearer ancestor, did) for
	// another cgroup; see cgroupTrees.escapes for how each is attributed.
	// nil on process groups, where the group and /proc are the tree.
	escaped() []procInfo
	// populated reports whether any process is still in the box; false
	// for a box that cannot tell.
	populated() bool
	// killAll sends SIGKILL to every process in the box at once, and
	// reports whether it could.
	killAll() bool
	// usage is what the box counted, or nil.
	usage() *cgroupUsage
	// oomKilled reports whether the kernel killed a process of the box
	// for memory.
	oomKilled() bool
	// ended says the job's result is final: what the box counted has been
	// read, and counting stops.
	ended()
	// release says the job is forgotten: the box goes once it is empty.
	release()
}

// cgroupUsage is what a job's cgroup counted over its life.
type cgroupUsage struct {
	cpuSeconds      float64
	procsMax        int
	memoryPeakBytes int64 // 0: the memory controller is not enabled
}

// groupTrees keeps jobs on process groups: no box holds anything.
type groupTrees struct{}

// kind says jobs are kept on process groups.
func (groupTrees) kind() string { return treeProcessGroup }

// box gives every job the same empty box.
func (groupTrees) box(bool) (jobBox, error) { return groupBox{}, nil }

// close has nothing to remove.
func (groupTrees) close() {}

// groupBox is a job's box on process groups: empty, as the group is the
// job's tree.
type groupBox struct{}

// spawnFD is -1: the child is started in the server's own cgroup.
func (groupBox) spawnFD() int { return -1 }

// started has no descriptor to close.
func (groupBox) started() {}

// members is unknown (false): the caller reads the process group.
func (groupBox) members() ([]int, bool) { return nil, false }

// snapshot is unknown (false): the caller reads the process group until
// two readings agree.
func (groupBox) snapshot() ([]procInfo, bool) { return nil, false }

// escaped is nil: without a cgroup nothing can be left, and the group,
// the session and /proc are the job's tree.
func (groupBox) escaped() []procInfo { return nil }

// populated is false: the caller watches the process group instead.
func (groupBox) populated() bool { return false }

// killAll does nothing (false): the caller signals the process group.
func (groupBox) killAll() bool { return false }

// usage is nil: a process group counts nothing for the job.
func (groupBox) usage() *cgroupUsage { return nil }

// oomKilled is false: without a cgroup no OOM kill is the job's own.
func (groupBox) oomKilled() bool { return false }

// ended has no sampler to leave.
func (groupBox) ended() {}

// release has no directory to remove.
func (groupBox) release() {}

// refuseLimitsWithout is the start-up refusal of limits no cgroup can
// enforce: what, why and what is allowed.
func refuseLimitsWithout(l jobLimits, why string) error {
	for _, row := range l.rows() {
		if row.set {
			return fmt.Errorf("%s is refused: per-job limits are written to the job's cgroup, and there is none (%s); unset it, or run the server where a cgroup v2 subtree is writable (root on a host, a systemd scope with Delegate=yes, podman with a read-write cgroup2 mount)", row.setting, why)
		}
	}
	return nil
}

// treeWords is the sentence --help and the instructions give about the
// tree in force: "Job tree: " and its name, then what that means for kill.
func treeWords(kind string) string {
	if kind == treeCgroup {
		return "Job tree: cgroup (kill ends all a job started)."
	}
	return "Job tree: process-group (kill may miss setsid daemons)."
}

// cgroupSetting is MCP_EXEC_CGROUP from the environment, as --help reads
// it before the configuration is loaded.
func cgroupSetting() string {
	if v := strings.TrimSpace(os.Getenv("MCP_EXEC_CGROUP")); v != "" {
		return v
	}
	return cgroupAuto
}
