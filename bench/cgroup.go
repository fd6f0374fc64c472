package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cgroupOff is the setting that keeps a server's jobs on process groups:
// the floor every cgroup row is measured against.
const cgroupOff = "MCP_EXEC_CGROUP=off"

// cgroupsHere reports whether a server started by this bench runs its jobs
// in cgroups (root, a writable cgroup v2 hierarchy); each row says so when
// it does not, as it then compares process groups with themselves.
func cgroupsHere(bin string) bool {
	s := launch(bin, "MCP_EXEC_PROFILE=agent")
	go s.readLoop()
	defer s.stop()
	res := s.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bench", "version": "1"}})
	return strings.Contains(fmt.Sprint(res), "Job tree: cgroup")
}

// benchCgroupRows are the costs of a cgroup per job against process groups
// on the same build: a round trip, a kill of a 100-process tree, idle CPU.
func benchCgroupRows(bin string) []row {
	here := cgroupsHere(bin)
	rows := []row{benchCgroupRoundTrip(bin), benchCgroupKill(bin), benchCgroupIdle(bin)}
	if !here {
		for i := range rows {
			rows[i].Note = "no writable cgroup v2 subtree here: both servers use process groups; " + rows[i].Note
		}
	}
	return rows
}

// benchCgroupRoundTrip is an execute round trip with a cgroup per job
// (made, entered by clone3, watched, removed) against process groups.
func benchCgroupRoundTrip(bin string) row {
	r := costAgainst(bin, 300*time.Microsecond, nil, []string{cgroupOff})
	r.Name = "cgroup round trip"
	return r
}

// benchCgroupKill times a KILL of a job with 100 processes until kill
// answers that the tree is dead, with a cgroup (cgroup.kill, then its
// events) against process groups (the group signalled, /proc read).
func benchCgroupKill(bin string) row {
	boxed := startServer(bin)
	defer boxed.stop()
	grouped := startServer(bin, cgroupOff)
	defer grouped.stop()
	var a, b []time.Duration
	for i := 0; i < 7; i++ {
		if i%2 == 0 {
			a = append(a, killTree(boxed, 100))
			b = append(b, killTree(grouped, 100))
		} else {
			b = append(b, killTree(grouped, 100))
			a = append(a, killTree(boxed, 100))
		}
	}
	v, f := median(a), median(b)
	r := float64(v) / float64(f)
	return row{Name: "cgroup kill 100 procs", Value: ms(v), Floor: ms(f), Unit: "ms", Ratio: r, Target: "<= 1.2", Pass: r <= 1.2}
}

// killTree starts a job that forks n sleepers, waits until all are
// started, and times one kill with KILL to its answer, which must say the
// tree is dead.
func killTree(s *server, n int) time.Duration {
	dir, err := os.MkdirTemp("", "mcp-exec-bench-kill-")
	check(err)
	defer os.RemoveAll(dir)
	ready := filepath.Join(dir, "ready")
	cmd := fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep 600 & i=$((i+1)); done; : > %s; wait", n, ready)
	res := s.tool("execute", map[string]any{"command": cmd, "nowait": true})
	id := res.(map[string]any)["job_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("job %s did not start its %d processes within 30 s", id, n))
		}
		time.Sleep(time.Millisecond) // the bench's own poll; the server is not in it
	}
	t := time.Now()
	got := s.tool("kill", map[string]any{"job_id": id, "signal": "KILL"})
	took := time.Since(t)
	if m, ok := got.(map[string]any); !ok || m["terminated"] != true {
		check(fmt.Errorf("kill of a %d-process tree did not say it is dead: %v", n, got))
	}
	return took // kill's answer delivered the job's result: nothing is left to collect
}

// benchCgroupIdle is the server's CPU over 10 s with 50 sleeping jobs, a
// cgroup each, against the same on process groups.
func benchCgroupIdle(bin string) row {
	v, f := idleCPU(bin), idleCPU(bin, cgroupOff)
	extra := v - f
	return row{Name: "cgroup idle cost", Value: ms(v), Floor: ms(f), Unit: "ms", Ratio: float64(v) / float64(max(f, time.Millisecond)),
		Target: "+<= 5 ms", Pass: extra <= 5*time.Millisecond, Note: fmt.Sprintf("%.1f ms more over 10 s, 50 jobs", ms(extra))}
}
