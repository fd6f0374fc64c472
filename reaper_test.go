package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReaperStress: 200 concurrent jobs that each orphan a sleep and exit 7
// all report 7, and afterwards no child of this process is a zombie. As the
// subreaper, this
// process also inherits the 200 orphaned sleeps; the reaper must collect
// those too without confusing them with the jobs.
func TestReaperStress(t *testing.T) {
	onLinux(t)
	reg := newRegistry(testConfig())
	const n = 200
	jobs := make([]*job, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, started, _ := reg.start(startRequest{command: "sleep 0.05 & exit 7", policy: defaultCapture})
			if !started {
				mu.Lock()
				failures = append(failures, j.final.startError)
				mu.Unlock()
				return
			}
			jobs[i] = j
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, j := range jobs {
			if j != nil {
				killGroup(j.pid)
			}
		}
	})
	if len(failures) > 0 {
		t.Fatalf("%d jobs failed to start: %v", len(failures), failures[0])
	}
	for _, j := range jobs {
		got := collect(t, reg, j)
		if o := got.outcome(); o.exitCode != 7 || o.signal != 0 || o.state != stateError {
			t.Errorf("job %s (pid %d): %+v, want exit_code 7", j.id, j.pid, o)
		}
	}
	children.mu.Lock()
	for _, j := range jobs {
		if _, still := children.byPid[j.pid]; still {
			t.Errorf("the reaper still lists job pid %d after its status was delivered", j.pid)
		}
	}
	children.mu.Unlock()
	eventually(t, 10*time.Second, "no zombie children", func() bool { return len(zombieChildren()) == 0 })
}

// TestExitStatus: exit statuses, including shell conventions for a command
// that is not executable (126) or not found (127), and deaths by signal,
// reported as exit_code -1 with strsignal words (wire-1.0 job result).
func TestExitStatus(t *testing.T) {
	t.Parallel()
	// Jobs inherit ignored signals. The server watches INT and HUP (main's
	// watchSignals), so its jobs start with them at default even when the
	// server's parent ignored them; do the same here for the duration.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(sigs) })

	reg := newRegistry(testConfig())
	cases := []struct {
		command string
		code    int
		signal  string
		state   string
	}{
		{"exit 0", 0, "", stateSuccess},
		{"true", 0, "", stateSuccess},
		{"exit 1", 1, "", stateError},
		{"exit 2", 2, "", stateError},
		{"exit 126", 126, "", stateError},
		{"exit 127", 127, "", stateError},
		{"exit 255", 255, "", stateError},
		{"/dev/null", 126, "", stateError},
		{"no-such-command-for-mcp-exec-tests", 127, "", stateError},
		{"kill -TERM $$", -1, "terminated", stateError},
		{"kill -KILL $$", -1, "killed", stateError},
		{"kill -HUP $$", -1, "hangup", stateError},
		{"kill -INT $$", -1, "interrupt", stateError},
	}
	for _, tc := range cases {
		t.Run(tc.command, func(t *testing.T) {
			t.Parallel()
			j := collect(t, reg, startJob(t, reg, tc.command))
			r := resultOf(j)
			if r.ExitCode == nil || *r.ExitCode != tc.code || r.Signal != tc.signal || r.State != tc.state {
				t.Errorf("%q: state %s exit_code %v signal %q; want %s %d %q",
					tc.command, r.State, derefInt(r.ExitCode), r.Signal, tc.state, tc.code, tc.signal)
			}
		})
	}
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
