package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testCgroupParent makes an empty cgroup below this test's own, as the
// parent a server's subtree goes under, and removes it with what is left in
// it at the end; it skips where no cgroup v2 directory is writable.
func testCgroupParent(t *testing.T) string {
	t.Helper()
	mount, rw := cgroup2Mount()
	own, err := ownCgroup()
	if mount == "" || !rw || err != nil {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	parent := filepath.Join(mount, own, "mcp-exec-test-"+randomHex(4))
	if err := unix.Mkdir(parent, 0o755); err != nil {
		t.Skipf("cannot make a cgroup under this test's own (%v)", err)
	}
	t.Cleanup(func() { removeCgroupTree(parent) })
	return parent
}

// startIn starts sleep in the cgroup dir and returns it; it is killed at
// the test's end.
func startIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd, err := spawnIn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// spawnIn is startIn for a goroutine other than the test's: it reports
// what failed instead of ending the test.
func spawnIn(t *testing.T, dir string) (*exec.Cmd, error) {
	cmd, err := startSleep(t, nil)
	if err != nil {
		return nil, err
	}
	return cmd, writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(cmd.Process.Pid))
}

// cloneIn starts sleep straight into the cgroup dir, as the server starts
// a job, so it is never seen outside it.
func cloneIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	fd, err := openRetrying(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sys := &syscall.SysProcAttr{}
	intoCgroup(sys, fd)
	cmd, err := startSleep(t, sys)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// startSleep starts a long sleep with sys, killed at the test's end.
func startSleep(t *testing.T, sys *syscall.SysProcAttr) (*exec.Cmd, error) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = sys
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A server between making its leaf and entering it has an empty leaf, as a
// dead server's has: another server starting then must not remove it.
func TestCleaningSparesASubtreeItsServerIsStillEntering(t *testing.T) {
	parent := testCgroupParent(t)
	subtree := filepath.Join(parent, subtreePrefix+"entering")
	leaf := filepath.Join(subtree, serverLeaf)
	made, enterNow, entered := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		entered <- cleanThenEnter(parent, time.Second, func() error {
			for _, dir := range []string{subtree, leaf} {
				if err := unix.Mkdir(dir, 0o755); err != nil {
					return err
				}
			}
			close(made)
			<-enterNow
			_, err := spawnIn(t, leaf)
			return err
		})
	}()
	<-made
	// The second server waits for the lock only briefly, then cleans
	// nothing: the half-made subtree must still be there.
	if err := cleanThenEnter(parent, 50*time.Millisecond, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !exists(leaf) {
		t.Fatal("a server's subtree was removed while it was entering it")
	}
	close(enterNow)
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	if err := cleanThenEnter(parent, time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !exists(leaf) {
		t.Fatal("a live server's subtree was removed")
	}
}

// A subtree whose server is gone is removed with what its jobs left
// running, whatever their sessions.
func TestCleaningRemovesADeadServersSubtreeAndKillsItsJobs(t *testing.T) {
	parent := testCgroupParent(t)
	subtree := filepath.Join(parent, subtreePrefix+"dead")
	job := filepath.Join(subtree, "job-1")
	for _, dir := range []string{subtree, filepath.Join(subtree, serverLeaf), job} {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	daemon := startIn(t, job)
	if err := cleanThenEnter(parent, time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if exists(subtree) {
		t.Fatal("a dead server's subtree was left")
	}
	if err := daemon.Wait(); err == nil {
		t.Fatal("the dead server's job ended by itself; it should have been killed")
	}
}

// awaitCgroupEmpty returns as soon as the cgroup empties, woken by its
// events file, and says so.
func TestAwaitCgroupEmptySeesTheLastProcessGo(t *testing.T) {
	parent := testCgroupParent(t)
	dir := filepath.Join(parent, "job")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := startIn(t, dir)
	if populatedAt(dir) != 1 {
		t.Fatal("a cgroup with a process is not populated")
	}
	if awaitCgroupEmpty(dir, time.Now().Add(20*time.Millisecond)) {
		t.Fatal("a cgroup with a live process was reported empty")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !awaitCgroupEmpty(dir, time.Now().Add(10*time.Second)) {
		t.Fatal("the cgroup did not empty after its only process was reaped")
	}
}

// Without a pids controller the sampler counts a job's processes: three
// started after the job's cgroup was added are seen at once, and the
// sampler's goroutine ends once no cgroup is left to count.
func TestProcsSamplerSeesProcessesAndStopsWhenNoneIsLeft(t *testing.T) {
	parent := testCgroupParent(t)
	dir := filepath.Join(parent, "job")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	trees := &cgroupTrees{}
	b := &cgroupBox{dir: dir, fd: -1, trees: trees}
	trees.sampler.add(b)
	for range 3 {
		cloneIn(t, dir)
	}
	counted := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.procsMax
	}
	for deadline := time.Now().Add(10 * time.Second); counted() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the sampler counted %d of 3 processes in 10 s", counted())
		}
		time.Sleep(10 * time.Millisecond) // the sampler has no event to await
	}
	b.ended()
	running := func() bool {
		trees.sampler.mu.Lock()
		defer trees.sampler.mu.Unlock()
		return trees.sampler.running
	}
	for deadline := time.Now().Add(10 * time.Second); running(); {
		if time.Now().After(deadline) {
			t.Fatal("the sampler still runs 10 s after its last cgroup ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The watch's reader, parked in the runtime's poller on a non-blocking
// inotify descriptor, announces the change when a job's cgroup empties:
// kill's wait is woken by it rather than by its polling backoff.
func TestCgroupWatchWakesWhenAJobCgroupEmpties(t *testing.T) {
	parent := testCgroupParent(t)
	dir := filepath.Join(parent, "job")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newCgroupWatch()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.add(&cgroupBox{dir: dir, fd: -1, trees: &cgroupTrees{}}); err != nil {
		t.Fatal(err)
	}
	cmd := cloneIn(t, dir)
	changed := w.next()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatal("the watch announced no emptying within 10 s")
		}
		// The next channel is taken before the look, so a change
		// between the two still wakes the next round.
		changed = w.next()
		if populatedAt(dir) == 0 {
			return
		}
	}
}

// A new pid is given out before its process shows in the cgroup, so the
// sampler that counted on the wake that saw the pid counts once more on
// the next; it used to stop there and miss the process for good.
func TestSamplerCountsAgainTheWakeAfterANewPid(t *testing.T) {
	var g sampleGate
	for i, step := range []struct {
		pid  string
		want bool
	}{
		{"100", true},  // first wake: new
		{"100", true},  // the wake after a new pid
		{"100", false}, // nothing forked since
		{"100", false},
		{"101", true}, // a fork
		{"101", true},
		{"101", false},
		{"", true}, // unreadable: count
		{"", true},
	} {
		if got := g.count(step.pid); got != step.want {
			t.Fatalf("wake %d (newest pid %q): count %v, want %v", i, step.pid, got, step.want)
		}
	}
}

// The start-up check of clone3 into a cgroup starts no child and finds it
// offered on any kernel this suite runs on (5.7 and later).
func TestIntoCgroupOfferedChecksWithoutAChild(t *testing.T) {
	if err := intoCgroupOffered(); err != nil {
		t.Skipf("not offered here: %v", err)
	}
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid > 0 {
		t.Fatalf("the check left a child (pid %d)", pid)
	} else if err != nil && !errors.Is(err, unix.ECHILD) {
		t.Fatal(err)
	}
}

// testTrees makes a server's subtree and its leaf under a fresh test
// cgroup, as makeCgroupTrees would, without moving the test into the
// leaf: home is the test's own cgroup, so leave moves it nowhere.
func testTrees(t *testing.T) *cgroupTrees {
	t.Helper()
	parent := testCgroupParent(t)
	mount, _ := cgroup2Mount()
	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	trees := &cgroupTrees{mount: mount, home: filepath.Join(mount, own), subtree: filepath.Join(parent, subtreePrefix+"test"),
		made: true, boxes: map[*cgroupBox]bool{}}
	for _, dir := range []string{trees.subtree, filepath.Join(trees.subtree, serverLeaf)} {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return trees
}

// testWatch is one watch on cgroup events for every test that wants one:
// a watch is never closed (the server keeps its own for good), and a
// watch per test run would use up the user's inotify instances.
func testWatch(t *testing.T) *cgroupWatch {
	t.Helper()
	w, err := sharedTestWatch()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var sharedTestWatch = sync.OnceValues(newCgroupWatch)

// testBox makes the next job's cgroup in trees as box does, watched by w
// when it is not nil.
func testBox(t *testing.T, trees *cgroupTrees, w *cgroupWatch) *cgroupBox {
	t.Helper()
	dir := filepath.Join(trees.subtree, "job-"+strconv.FormatInt(trees.seq.Add(1), 10))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &cgroupBox{dir: dir, fd: -1, trees: trees, start: bootTicks()}
	if w != nil {
		if err := w.add(b); err != nil {
			t.Fatal(err)
		}
		b.watch = w
	}
	trees.mu.Lock()
	trees.boxes[b] = true
	trees.mu.Unlock()
	return b
}

// mkdirs makes each of dirs, parents first.
func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// close kills what a job moved into a cgroup it made below its own, and
// removes both, deepest first; the subtree goes too, with what a job left
// in the server's leaf.
func TestCloseRemovesTheCgroupsAJobMadeBelowItsOwn(t *testing.T) {
	trees := testTrees(t)
	b := testBox(t, trees, nil)
	deep := filepath.Join(b.dir, "sub", "deeper")
	mkdirs(t, filepath.Join(b.dir, "sub"), deep)
	cloneIn(t, b.dir)
	daemon := startIn(t, deep)
	squatter := startIn(t, filepath.Join(trees.subtree, serverLeaf))
	trees.close()
	if exists(b.dir) || exists(trees.subtree) {
		t.Fatalf("close left %s or the subtree behind", b.dir)
	}
	for _, cmd := range []*exec.Cmd{daemon, squatter} {
		if err := cmd.Wait(); err == nil {
			t.Fatal("a process left below the subtree ended by itself; close should have killed it")
		}
	}
}

// A forgotten job's cgroup goes once it is empty, with the cgroups the job
// made below it: at release when it is empty then, or when the watch sees
// it empty later.
func TestReleaseRemovesTheCgroupsAJobMadeBelowItsOwn(t *testing.T) {
	trees := testTrees(t)
	w := testWatch(t)
	empty := testBox(t, trees, w)
	mkdirs(t, filepath.Join(empty.dir, "sub"), filepath.Join(empty.dir, "sub", "deeper"))
	empty.release()
	if exists(empty.dir) {
		t.Fatal("release of an empty job left its cgroup")
	}
	busy := testBox(t, trees, w)
	sub := filepath.Join(busy.dir, "sub")
	mkdirs(t, sub)
	daemon := startIn(t, sub)
	busy.release()
	if !exists(sub) {
		t.Fatal("release removed a cgroup a daemon still runs in")
	}
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	eventually(t, 10*time.Second, "the emptied job's cgroups removed", func() bool { return !exists(busy.dir) })
	trees.mu.Lock()
	left := len(trees.boxes)
	trees.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d removed boxes still listed", left)
	}
}

// shellIn starts sh -c script straight into the cgroup dir, as the server
// starts a job, and returns it with its stdout's first line once written.
// It is killed at the test's end.
func shellIn(t *testing.T, dir, script string) (*exec.Cmd, string) {
	t.Helper()
	fd, err := openRetrying(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	intoCgroup(cmd.SysProcAttr, fd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%q wrote no line: %v", script, err)
	}
	return cmd, strings.TrimSpace(line)
}

// pidsOf lists the pids of procs.
func pidsOf(procs []procInfo) []int {
	pids := make([]int, 0, len(procs))
	for _, p := range procs {
		pids = append(pids, p.pid)
	}
	return pids
}

// A snapshot reads every member of the job's cgroup, those of a cgroup it
// made below its own too, with the cgroup frozen, and leaves it thawed:
// the processes run on.
func TestSnapshotReadsTheBoxFrozenAndThawsIt(t *testing.T) {
	trees := testTrees(t)
	b := testBox(t, trees, testWatch(t))
	sub := filepath.Join(b.dir, "sub")
	mkdirs(t, sub)
	busy, _ := shellIn(t, b.dir, `echo started; while :; do :; done`)
	want := []int{cloneIn(t, b.dir).Process.Pid, cloneIn(t, b.dir).Process.Pid, startIn(t, sub).Process.Pid, busy.Process.Pid}
	slices.Sort(want)
	// Several at once: none may thaw the cgroup under another's reading.
	readings := make(chan []procInfo, 4)
	for range cap(readings) {
		go func() {
			procs, ok := b.snapshot()
			if !ok {
				procs = nil
			}
			readings <- procs
		}()
	}
	for range cap(readings) {
		procs := <-readings
		if procs == nil {
			t.Fatal("a cgroup of sleeping and running processes did not freeze within its bound")
		}
		if got := pidsOf(procs); !slices.Equal(got, want) {
			t.Fatalf("snapshot read %v, want %v (oldest first)", got, want)
		}
		for _, p := range procs {
			switch {
			case p.start == 0:
				t.Fatalf("snapshot read %+v, without its start", p)
			case p.pid == busy.Process.Pid && (p.comm != "sh" || p.state != "R"):
				t.Fatalf("snapshot read the busy loop as %+v, want sh running", p)
			case p.pid != busy.Process.Pid && (p.comm != "sleep" || p.state != "S" && p.state != "R"):
				t.Fatalf("snapshot read %+v, want a sleep", p)
			}
		}
	}
	for _, dir := range []string{b.dir, sub} {
		if frozenAt(dir) != 0 || strings.TrimSpace(readCgroupFile(dir, "cgroup.freeze")) != "0" {
			t.Fatalf("%s is left frozen after the snapshot", dir)
		}
	}
}

// Where the cgroup cannot be frozen (here a directory with no
// cgroup.freeze, as on a kernel before 5.2) the members are read all the
// same, and the reading says it is not exact.
func TestSnapshotWithoutAFreezerReadsAnyway(t *testing.T) {
	dir := t.TempDir()
	cmd, err := startSleep(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := cmd.Process.Pid
	list := strconv.Itoa(os.Getpid()) + "\n" + strconv.Itoa(child) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &cgroupBox{dir: dir, fd: -1, trees: &cgroupTrees{}}
	procs, ok := b.snapshot()
	if ok {
		t.Fatal("a reading without a freezer was called exact")
	}
	if got, want := pidsOf(procs), []int{min(os.Getpid(), child), max(os.Getpid(), child)}; !slices.Equal(got, want) {
		t.Fatalf("snapshot read %v, want %v", got, want)
	}
	if exists(filepath.Join(dir, "cgroup.freeze")) {
		t.Fatal("the snapshot made a cgroup.freeze where there was none")
	}
}

// A server killed while it read a job frozen leaves it so: the next
// server thaws the leftover, its sub-cgroups first among parents, before
// it kills and removes it.
func TestCleaningThawsAFrozenLeftover(t *testing.T) {
	parent := testCgroupParent(t)
	subtree := filepath.Join(parent, subtreePrefix+"frozen")
	job := filepath.Join(subtree, "job-1")
	sub := filepath.Join(job, "sub")
	mkdirs(t, subtree, filepath.Join(subtree, serverLeaf), job, sub)
	startIn(t, job)
	startIn(t, sub)
	for _, dir := range []string{job, sub} {
		if err := writeCgroupFile(dir, "cgroup.freeze", "1"); err != nil {
			t.Fatal(err)
		}
	}
	if !awaitCgroupEvents(job, func() bool { return frozenAt(job) == 1 }, time.Now().Add(10*time.Second)) {
		t.Fatal("the job did not freeze")
	}
	thawCgroupTree(subtree)
	for _, dir := range []string{job, sub} {
		if !awaitCgroupEvents(dir, func() bool { return frozenAt(dir) == 0 }, time.Now().Add(10*time.Second)) {
			t.Fatalf("%s stays frozen after the thaw", dir)
		}
	}
	for _, dir := range []string{job, sub} {
		if err := writeCgroupFile(dir, "cgroup.freeze", "1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cleanThenEnter(parent, time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if exists(subtree) {
		t.Fatal("a dead server's frozen subtree was left")
	}
}

// reapAtEnd kills pid, an orphan that came back to the test (a child
// subreaper, as the server is), and collects it at the test's end, so no
// zombie is left for another test's wait.
func reapAtEnd(t *testing.T, pid int) {
	t.Cleanup(func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		for {
			var ws unix.WaitStatus
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if !errors.Is(err, unix.EINTR) {
				return // ECHILD: the reaper took it, or it was never ours
			}
		}
	})
}

// A process that moves itself out of its job's cgroup, into the server's
// leaf, a cgroup outside the subtree or another job's, is still the job's:
// by its parent while that is in the job, and, orphaned, by the jobs
// started before it. Members in their own job's cgroup are nobody's
// escapees.
func TestEscapeesAreFoundAndAttributed(t *testing.T) {
	trees := testTrees(t)
	parent := filepath.Dir(trees.subtree)
	elsewhere := filepath.Join(parent, "elsewhere")
	mkdirs(t, elsewhere)
	leaf := filepath.Join(trees.subtree, serverLeaf)
	early, job := testBox(t, trees, nil), testBox(t, trees, nil)
	member := cloneIn(t, job.dir).Process.Pid

	// A child that moves itself into dir and prints its pid; its parent
	// stays in the job.
	moveTo := func(dir string) string {
		return `sh -c 'echo $$ > ` + dir + `/cgroup.procs && echo $$ && exec sleep 300' & wait`
	}
	shell, line := shellIn(t, job.dir, moveTo(leaf))
	toLeaf, _ := strconv.Atoi(line)
	// Moves itself into another job's cgroup.
	_, line = shellIn(t, job.dir, moveTo(early.dir))
	toEarly, _ := strconv.Atoi(line)
	// Double-forks, so its parent is gone, then moves out of the subtree.
	_, line = shellIn(t, job.dir, `(sh -c 'echo $$ > `+elsewhere+`/cgroup.procs && echo $$ && exec sleep 300' &)`)
	orphan, _ := strconv.Atoi(line)
	reapAtEnd(t, orphan)
	eventually(t, 10*time.Second, "the double-forked process orphaned", func() bool {
		p, ok := procNow(orphan)
		return ok && p.ppid == os.Getpid()
	})
	p, _ := procNow(orphan)
	for bootTicks() <= p.start {
		time.Sleep(5 * time.Millisecond) // a clock tick to pass: no event marks it
	}
	late := testBox(t, trees, nil)

	found := map[*cgroupBox][]int{}
	for _, b := range []*cgroupBox{early, job, late} {
		found[b] = pidsOf(b.escaped())
	}
	for _, c := range []struct {
		what string
		pid  int
		in   []*cgroupBox
	}{
		{"moved to the server's leaf", toLeaf, []*cgroupBox{job}},
		{"moved to another job's cgroup", toEarly, []*cgroupBox{job}},
		{"orphaned, moved out of the subtree", orphan, []*cgroupBox{early, job}},
		{"a member", member, nil},
		{"a job's shell", shell.Process.Pid, nil},
	} {
		for _, b := range []*cgroupBox{early, job, late} {
			if got, want := slices.Contains(found[b], c.pid), slices.Contains(c.in, b); got != want {
				t.Errorf("%s (%d): among %s's escapees %v, want %v (found %v)", c.what, c.pid, filepath.Base(b.dir), got, want, found[b])
			}
		}
	}
}

// The attribution rules on a made-up process tree: the nearest ancestor
// in a box decides, an escapee passes its jobs to its children, an orphan
// is every earlier job's, a process whose cgroup cannot be read counts as
// outside, and the server is nobody's.
func TestEscapesAttributeByAncestorThenByStart(t *testing.T) {
	trees := &cgroupTrees{subtree: "/cg/srv", boxes: map[*cgroupBox]bool{}}
	a := &cgroupBox{dir: "/cg/srv/job-1", start: 100}
	b := &cgroupBox{dir: "/cg/srv/job-2", start: 200}
	c := &cgroupBox{dir: "/cg/srv/job-3", start: 300}
	for _, x := range []*cgroupBox{a, b, c} {
		trees.boxes[x] = true
	}
	const self = 1
	where := map[int]string{
		self: "/cg/srv/server",
		10:   a.dir,               // a's shell
		11:   a.dir + "/sub/deep", // a's, in a cgroup it made
		12:   "/cg/srv/server",    // left a for the server's leaf
		13:   "/cg/other",         // its child, moved again
		14:   b.dir,               // left a for b
		15:   "/cg",               // orphan, started between b and c
		16:   "/cg/srv/server",    // orphan's child
		17:   "",                  // unreadable (gone), parent in a
		20:   b.dir,               // b's shell
		21:   a.dir,               // b's child moved into a
		30:   c.dir,               // c's shell, orphan-like (parent is the server)
	}
	procs := []procInfo{
		{pid: 10, ppid: self, start: 110}, {pid: 11, ppid: 10, start: 120}, {pid: 12, ppid: 11, start: 130},
		{pid: 13, ppid: 12, start: 140}, {pid: 14, ppid: 10, start: 150}, {pid: 15, ppid: self, start: 250},
		{pid: 16, ppid: 15, start: 260}, {pid: 17, ppid: 10, start: 170}, {pid: 20, ppid: self, start: 210},
		{pid: 21, ppid: 20, start: 220}, {pid: 30, ppid: self, start: 310}, {pid: self, ppid: 0, start: 1},
	}
	cgroupOf := func(pid int) (string, bool) { return where[pid], where[pid] != "" }
	got := trees.escapes(self, procs, cgroupOf)
	want := map[*cgroupBox][]int{a: {12, 13, 14, 15, 16, 17}, b: {15, 16, 21}}
	for _, x := range []*cgroupBox{a, b, c} {
		if g := pidsOf(got[x]); !slices.Equal(g, want[x]) {
			t.Errorf("escapees of %s: %v, want %v", x.dir, g, want[x])
		}
	}
	if got := (&cgroupTrees{boxes: map[*cgroupBox]bool{}}).escapes(self, procs, cgroupOf); got != nil {
		t.Errorf("with no job, escapees %v", got)
	}
}

// A subtree named as a server names its own that has lost its leaf (its
// server was killed while removing it, or an older server left a cgroup
// its job made) is a dead server's, and is removed; a directory with the
// prefix but another name, and no leaf, is not a server's and stays.
func TestCleaningRemovesASubtreeWithoutItsLeaf(t *testing.T) {
	parent := testCgroupParent(t)
	dead := filepath.Join(parent, subtreePrefix+"0123456789ab")
	other := filepath.Join(parent, subtreePrefix+"notes")
	mkdirs(t, dead, filepath.Join(dead, "job-1"), filepath.Join(dead, "job-1", "sub"), other)
	daemon := startIn(t, filepath.Join(dead, "job-1", "sub"))
	if err := cleanThenEnter(parent, time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if exists(dead) {
		t.Fatal("a dead server's subtree without its leaf was left")
	}
	if err := daemon.Wait(); err == nil {
		t.Fatal("the dead server's job ended by itself; it should have been killed")
	}
	if !exists(other) {
		t.Fatal("a directory that is no server's subtree was removed")
	}
}

// A job may move a process into its server's leaf; once that server is
// gone the leaf is still populated, and only the lock a server holds on
// its marked subtree for its life tells a live server's from a dead one's.
func TestCleaningTellsADeadServersLeafByItsLock(t *testing.T) {
	parent := testCgroupParent(t)
	subtree := func(name string) (dir string, squatter *exec.Cmd) {
		dir = filepath.Join(parent, subtreePrefix+name)
		mkdirs(t, dir, filepath.Join(dir, serverLeaf), filepath.Join(dir, serverHeld))
		return dir, startIn(t, filepath.Join(dir, serverLeaf))
	}
	dead, squatter := subtree("dead")
	live, _ := subtree("live")
	unlock, locked := lockCgroupDir(live, time.Second)
	defer unlock()
	if !locked {
		t.Fatal("cannot lock the live server's subtree")
	}
	if err := cleanThenEnter(parent, time.Second, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if exists(dead) {
		t.Fatal("a dead server's subtree, its leaf holding what a job moved there, was left")
	}
	if err := squatter.Wait(); err == nil {
		t.Fatal("the process in the dead server's leaf ended by itself; it should have been killed")
	}
	if !exists(filepath.Join(live, serverLeaf)) {
		t.Fatal("a live server's subtree was removed")
	}
}

// enter locks the subtree it made and marks it; leave drops the lock and
// removes the subtree with the mark.
func TestEnterHoldsTheSubtreeUntilLeave(t *testing.T) {
	trees := testTrees(t)
	// testTrees made the subtree; enter makes its own beside it.
	trees.subtree += "-entered"
	trees.made = false
	if err := trees.enter(); err != nil {
		t.Fatal(err)
	}
	defer trees.leave()
	if !exists(filepath.Join(trees.subtree, serverHeld)) || !heldByServer(trees.subtree) {
		t.Fatal("the entered subtree is not marked and locked")
	}
	trees.leave()
	if exists(trees.subtree) {
		t.Fatal("leave left the subtree")
	}
}
