package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func benchTTYThroughput(bin string) row {
	// 64 MiB through a tty job, against the same through script(1), a
	// plain copier on a terminal: the kernel's terminal layer is the floor
	// here (about 70 MiB/s on this VM, where a pipe moves 1.8 GiB/s).
	// Interleaved; the pipe path is given in the note.
	const cmd = "head -c 67108864 /dev/zero"
	s := startServer(bin)
	defer s.stop()
	none := map[string]any{"on_success": "none", "on_error": "none"}
	var tty, bare, pipe []time.Duration
	for i := 0; i < 5; i++ {
		t := time.Now()
		s.tool("execute", map[string]any{"command": cmd, "capture": none, "tty": true})
		tty = append(tty, time.Since(t))
		t = time.Now()
		check(exec.Command("script", "-q", "-c", cmd, "/dev/null").Run())
		bare = append(bare, time.Since(t))
		t = time.Now()
		s.tool("execute", map[string]any{"command": cmd, "capture": none})
		pipe = append(pipe, time.Since(t))
	}
	v, f, p := 64/median(tty).Seconds(), 64/median(bare).Seconds(), 64/median(pipe).Seconds()
	return row{Value: v, Floor: f, Unit: "MiB/s", Ratio: v / f, Target: ">= 0.8", Pass: v/f >= 0.8,
		Note: fmt.Sprintf("%.2f of the pipe path's %.0f MiB/s", v/p, p)}
}

func benchUntilCost(bin string) row {
	// Jobs each writing 10 lines a second; the server's CPU over a few
	// seconds with no waiter, then while one wait with until.pattern watches
	// all of them. The row is the extra CPU, as a share of one core.
	const jobs, window = 200, 4 * time.Second
	s := startServer(bin)
	defer s.stop()
	var ids []any
	for i := 0; i < jobs; i++ {
		r := s.tool("execute", map[string]any{"command": "while :; do echo tick; sleep 0.1; done", "nowait": true})
		ids = append(ids, r.(map[string]any)["job_id"])
	}
	defer func() {
		for _, id := range ids {
			s.tool("kill", map[string]any{"job_id": id, "signal": "KILL"})
		}
	}()
	time.Sleep(time.Second) // the jobs' start-up is not the steady state measured
	base := cpuSeconds(s.cmd.Process.Pid)
	time.Sleep(window)
	idle := cpuSeconds(s.cmd.Process.Pid) - base
	base = cpuSeconds(s.cmd.Process.Pid)
	s.tool("wait", map[string]any{"job_ids": ids, "timeout": window.Seconds(), "until": map[string]any{"pattern": "never printed"}})
	watched := cpuSeconds(s.cmd.Process.Pid) - base
	extra := (watched - idle) / window.Seconds()
	return row{Value: 100 * extra, Floor: 100 * idle / window.Seconds(), Unit: "%", Target: "+<= 5% of a core",
		Pass: extra <= 0.05, Note: fmt.Sprintf("%d jobs x 10 lines/s", jobs)}
}

// cpuSeconds is the user and system CPU time a process has used.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // clock ticks, 100 a second on Linux
}

func benchMemoryBound(bin string) row {
	// 1,000 jobs writing 512 KiB each (500 MiB of windows unbounded) under
	// MCP_EXEC_MEMORY_LIMIT=64MiB: the server's peak RSS against the bound
	// plus its idle RSS. The jobs themselves cost some too (two pump
	// goroutines and their stacks each, descriptors, records), hence 1.3.
	const jobs, bound = 1000, 64 << 10 // KiB
	s := startServer(bin, "MCP_EXEC_MEMORY_LIMIT=64MiB")
	defer s.stop()
	idle := rssKiB(s.cmd.Process.Pid)
	var ids []any
	for i := 0; i < jobs; i++ {
		r := s.tool("execute", map[string]any{"command": "yes 0123456789abcdef | head -c 524288", "nowait": true,
			"capture": map[string]any{"on_success": "none", "on_error": "none"}})
		ids = append(ids, r.(map[string]any)["job_id"])
	}
	for len(ids) > 0 { // collect them all, a hundred at a time, their windows read
		n := min(len(ids), 100)
		s.tool("wait", map[string]any{"job_ids": ids[:n], "timeout": 60})
		ids = ids[n:]
	}
	peak := peakRSSKiB(s.cmd.Process.Pid)
	floor := float64(bound) + idle
	return row{Value: peak / 1024, Floor: floor / 1024, Unit: "MiB", Ratio: peak / floor, Target: "<= 1.3", Pass: peak/floor <= 1.3}
}

// peakRSSKiB is a process's peak resident set (VmHWM).
func peakRSSKiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kib
		}
	}
	return 0
}
