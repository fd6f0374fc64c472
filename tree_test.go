package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stateOf is the state letter of pid from /proc/PID/stat, read by the
// test itself; false when there is no such process.
func stateOf(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return "", false
	}
	return fields[0], true
}

// livingPid reports whether pid names a process that has not exited.
func livingPid(pid int) bool {
	state, ok := stateOf(pid)
	return ok && state != "Z"
}

// pidFrom waits for a job to write a pid into path and returns it.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, jobDeadline, "the job wrote a pid to "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// killAtEnd KILLs pid when the test ends if it is still the process named
// comm (a setsid process is out of reach of the job's group cleanup).
func killAtEnd(t *testing.T, pid int, comm string) {
	t.Cleanup(func() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == comm {
			_ = syscall.Kill(pid, syscall.SIGKILL) // best effort: it may have just gone
		}
	})
}

// TestKillReportsASetsidChildAsASurvivorOrKillsIt: a process that left its
// job's group and session with setsid (a child of the shell, a grandchild
// re-parented to the server by a double fork, or one left behind by a
// shell that has exited) is part of the job's tree: after kill answers
// terminated:true it is dead, and otherwise the answer names it. kill used
// to signal the group only and answer terminated while it lived on.
func TestKillReportsASetsidChildAsASurvivorOrKillsIt(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	cases := []struct {
		name, command string
		sig           syscall.Signal
		shellExits    bool
	}{
		{"setsid child, TERM", `setsid sleep 1000 & echo $! > "$PIDFILE"; wait`, syscall.SIGTERM, false},
		{"setsid child, KILL", `setsid sleep 1000 & echo $! > "$PIDFILE"; wait`, syscall.SIGKILL, false},
		{"double fork into a new session", `(setsid sleep 1000 & echo $! > "$PIDFILE"); exec sleep 1000`, syscall.SIGTERM, false},
		{"left behind by a shell that exited", `(setsid sleep 1000 & echo $! > "$PIDFILE")`, syscall.SIGTERM, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			j := startReq(t, reg, startRequest{command: tc.command, env: map[string]string{"PIDFILE": pidFile}, policy: defaultCapture})
			pid := pidFrom(t, pidFile)
			killAtEnd(t, pid, "sleep")
			eventually(t, jobDeadline, "the setsid sleep runs", func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				return err == nil && strings.TrimSpace(string(b)) == "sleep"
			})
			if tc.shellExits {
				awaitDone(t, j)
			}
			out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{tc.sig}, wait: jobDeadline})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case out.terminated && livingPid(pid):
				t.Errorf("kill answered terminated (%+v) while setsid sleep %d lives", out, pid)
			case !out.terminated && !strings.Contains(out.survivors, strconv.Itoa(pid)):
				t.Errorf("kill answered terminated:false without naming setsid sleep %d: %q", pid, out.survivors)
			case !out.terminated:
				t.Errorf("a sleep that dies of %v survived the kill: %q", tc.sig, out.survivors)
			}
		})
	}
}

// TestKillNamesOnlyLivingSurvivors: a process of the job's tree that has
// exited is not named as a survivor, even while it waits to be reaped by
// this process (whose reaper collects it at once): only the process that
// really ignores TERM is. kill named a job's dead processes, and a model
// then spent a call chasing them. The test holds the reaper still (it waits
// for the spawn gate the test holds) to keep the exited orphan a zombie
// while kill answers.
func TestKillNamesOnlyLivingSurvivors(t *testing.T) {
	onLinux(t)
	dir := t.TempDir()
	reg := newRegistry(testConfig())
	env := map[string]string{"GO1": filepath.Join(dir, "go1"), "GO2": filepath.Join(dir, "go2"), "PIDFILE": filepath.Join(dir, "pid")}
	awaitFile := `while [ ! -e "$GO" ]; do sleep 0.01; done`
	// The exited orphan: a grandchild of the shell, re-parented to this
	// process, that exits on GO2.
	j := startReq(t, reg, startRequest{policy: defaultCapture, env: env,
		command: `trap '' TERM; (GO="$GO2" sh -c '` + awaitFile + `' & echo $! > "$PIDFILE"); exec sleep 1000`})
	orphan := pidFrom(t, env["PIDFILE"])
	waitForSleeps(t, j.pid, 1)
	// A child of this process that exits on GO1, to hold the reaper.
	holder := startReq(t, reg, startRequest{policy: defaultCapture, env: env, command: `GO="$GO1"; ` + awaitFile})

	children.gate.RLock()
	held := true
	release := func() {
		if held {
			held = false
			children.gate.RUnlock()
		}
	}
	defer release()
	if err := os.WriteFile(env["GO1"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reaper has collected the holder and now waits for the gate.
	eventually(t, jobDeadline, "the holder is reaped", func() bool { _, there := stateOf(holder.pid); return !there })
	if err := os.WriteFile(env["GO2"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, jobDeadline, "the orphan is a zombie", func() bool { s, _ := stateOf(orphan); return s == "Z" })

	out, err := reg.kill(plainWaiter(), j, killPlan{signals: []syscall.Signal{syscall.SIGTERM}, wait: 200 * time.Millisecond})
	release()
	if err != nil {
		t.Fatal(err)
	}
	if out.terminated {
		t.Fatalf("kill answered terminated with a TERM-ignoring sleep alive: %+v", out)
	}
	if strings.Contains(out.survivors, strconv.Itoa(orphan)+" ") {
		t.Errorf("kill named %d, which had exited, as a survivor: %q", orphan, out.survivors)
	}
	if !strings.Contains(out.survivors, strconv.Itoa(j.pid)+" (sleep") {
		t.Errorf("kill did not name the living sleep %d: %q", j.pid, out.survivors)
	}
	awaitDone(t, holder)
}

func init() {
	childModes["shutdown a setsid reforker"] = shutdownReforker
}

// reforker is a job whose perl keeps re-forking itself into new sessions:
// every millisecond a generation forks the next, which calls setsid, and
// exits, noting the newest pid in $DIR/last. Beside it 200 sleeps ignore
// TERM below a shell in a session of its own, which the job's group KILL
// does not reach: a walk of the process tree reads them after the chain
// and takes longer than a generation lives, so a single look per signal
// always misses the newest generation, as the sweep of a server with many
// jobs would. The chain stops once $DIR/stop exists.
const reforker = `trap '' TERM
setsid sh -c 'for i in $(seq 200); do sleep 1000 & done; wait' &
perl -MPOSIX -e '
while (!-e "$ENV{DIR}/stop") {
	my $pid = fork;
	next unless defined $pid;
	exit 0 if $pid;
	POSIX::setsid();
	open(my $f, ">", "$ENV{DIR}/last.tmp") or next;
	print $f "$$\n";
	close $f;
	rename "$ENV{DIR}/last.tmp", "$ENV{DIR}/last";
	select(undef, undef, undef, 0.001);
}' &
exec sleep 1000`

// chainMoves reports whether the reforker of dir still makes generations:
// the newest pid it noted changes within a while. A dead chain cannot be
// seen to do nothing any sooner than by giving it that time.
func chainMoves(dir string) bool {
	newest := func() string { b, _ := os.ReadFile(filepath.Join(dir, "last")); return string(b) }
	was := newest()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if newest() != was {
			return true
		}
	}
	return false
}

// shutdownReforker plays a server that owns its process: it starts the
// reforker as a job, sweeps once as its shutdown does, says whether the
// chain survived, shuts down and exits.
func shutdownReforker() int {
	prepareProcess(false)
	srv := newServer(testConfig())
	srv.ownsProcess = true
	ss, err := srv.open(srv.cfg, "test", &collectingSink{})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	dir := os.Getenv("REFORKER_DIR")
	if _, started, err := ss.reg.start(startRequest{command: reforker, env: map[string]string{"DIR": dir}, policy: defaultCapture}); !started || err != nil {
		fmt.Println("the reforker did not start:", err)
		return 2
	}
	for end := time.Now().Add(jobDeadline); !chainMoves(dir); {
		if time.Now().After(end) {
			fmt.Println("the reforker did not start its chain")
			return 2
		}
	}
	terminateAll(ss.reg.list(), true)
	fmt.Printf("the chain moves after the sweep: %v\n", chainMoves(dir))
	srv.shutdown()
	return 0
}

// TestShutdownSweepsASetsidReforker: once a server that owns its process
// has shut down, nothing of a job that keeps re-forking itself with setsid
// is left. The sweep used to look for descendants once per signal, so a
// generation forked after the look outlived the server.
func TestShutdownSweepsASetsidReforker(t *testing.T) {
	onLinux(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		// A chain that survived runs on under this process: stop it.
		_ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600)
	})
	code, out := runChild(t, append(testConfig().baseEnv, childModeEnv+"=shutdown a setsid reforker", "REFORKER_DIR="+dir))
	if code != 0 {
		t.Fatalf("the server child failed (exit %d): %s", code, out)
	}
	if !strings.Contains(out, "the chain moves after the sweep: false\n") {
		t.Errorf("the reforker outlived the shutdown sweep: %s", out)
	}
	if chainMoves(dir) {
		t.Errorf("the reforker outlived the server: %s", out)
	}
	if !strings.Contains(out, "shutdown: every process the server started is gone") {
		t.Errorf("the shutdown did not say how the sweep went: %s", out)
	}
}
