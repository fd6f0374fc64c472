package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shellsHere are the POSIX shells of this machine the trap is tried with.
func shellsHere(t *testing.T) []string {
	var found []string
	for _, name := range []string{"dash", "bash"} {
		if path, err := exec.LookPath(name); err == nil {
			found = append(found, path)
		}
	}
	if len(found) == 0 {
		t.Skip("neither dash nor bash is installed")
	}
	return found
}

// runTracked runs command as a job of shell started in dir, its shell
// tracked as MCP_EXEC_KEEP_CWD tracks it, and returns its exit code, its
// stdout and stderr and the directory it reported.
func runTracked(t *testing.T, shell, dir, command string) (code int, stdout, stderr, ended string) {
	t.Helper()
	cfg := configOf(t, "MCP_EXEC_KEEP_CWD=1")
	cfg.shell = shell
	report := newCwdReport(cfg)
	if report == nil {
		t.Fatalf("no report for %s", shell)
	}
	j := startReq(t, newRegistry(cfg), startRequest{command: command, dir: dir, policy: defaultCapture, cwdReport: report})
	awaitDone(t, j)
	if report.fd < 0 && report.dir == "" {
		t.Fatal("the command was not wrapped")
	}
	o := j.outcome()
	if o.signal != 0 {
		t.Fatalf("the shell died of signal %d", o.signal)
	}
	return o.exitCode, string(j.stdout.readAll(0).data), string(j.stderr.readAll(0).data), report.finalDir()
}

func TestCwdTrapReportsWhereTheShellEnded(t *testing.T) {
	start := t.TempDir()
	sub := filepath.Join(start, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	realStart, _ := filepath.EvalSymlinks(start)
	realSub := filepath.Join(realStart, "sub")
	cases := []struct {
		name, command string
		code          int
		dir           string // "": no report
	}{
		{"cd", "cd sub", 0, realSub},
		{"no cd", "true", 0, realStart},
		{"exit keeps its status", "cd sub; exit 7", 7, realSub},
		{"failure keeps its status", "cd sub; false", 1, realSub},
		{"set -e", "set -e; cd sub; false; cd ..", 1, realSub},
		{"subshell does not report", "cd sub; (cd /; exit 0)", 0, realSub},
		{"background child does not report", "cd sub; (cd / && sleep 0.2) & exit 0", 0, realSub},
		{"a pwd function is skipped", "pwd() { echo elsewhere; }; cd sub", 0, realSub},
		{"noclobber", "set -C; cd sub", 0, realSub},
		{"exec replaces the shell: no report", "cd sub; exec true", 0, ""},
		{"own EXIT trap replaces ours: no report", "cd sub; trap 'true' EXIT", 0, ""},
		{"directory removed: no report", "mkdir gone && cd gone && rmdir ../gone", 0, ""},
	}
	for _, shell := range shellsHere(t) {
		for _, tc := range cases {
			t.Run(filepath.Base(shell)+"/"+tc.name, func(t *testing.T) {
				code, _, stderr, dir := runTracked(t, shell, start, tc.command)
				if code != tc.code || dir != tc.dir || stderr != "" {
					t.Errorf("exit %d, reported %q, stderr %q; want exit %d, reported %q, no stderr", code, dir, stderr, tc.code, tc.dir)
				}
			})
		}
	}
}

func TestCwdTrapIsNotTracedUnderSetX(t *testing.T) {
	for _, shell := range shellsHere(t) {
		_, _, stderr, dir := runTracked(t, shell, "/", "set -x; cd /usr")
		if dir != "/usr" || strings.Contains(stderr, "pwd") {
			t.Errorf("%s: reported %q, stderr %q; want /usr and no trace of the trap", shell, dir, stderr)
		}
	}
}

func TestCwdTrapKeepsLineNumbersAndArguments(t *testing.T) {
	for _, shell := range shellsHere(t) {
		cfg := configOf(t)
		cfg.shell = shell
		plain := startReq(t, newRegistry(cfg), startRequest{command: "echo $LINENO $0 $#", policy: defaultCapture})
		awaitDone(t, plain)
		_, tracked, _, _ := runTracked(t, shell, "/", "echo $LINENO $0 $#")
		if want := string(plain.stdout.readAll(0).data); tracked != want {
			t.Errorf("%s: %q tracked, %q plain", shell, tracked, want)
		}
	}
}

func TestCwdReportInTheJobsTemporaryDirectory(t *testing.T) {
	tmp := t.TempDir()
	report := reportIn(t, tmp, "/usr")
	if filepath.Dir(report.path) != tmp {
		t.Fatalf("report file %s; want it in %s", report.path, tmp)
	}
	if dir := report.finalDir(); dir != "/usr" {
		t.Errorf("reported %q, want /usr", dir)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the report file stays in the job's TMPDIR: %v", left)
	}
}

func TestCwdReportLeavesNothingBehind(t *testing.T) {
	report := newCwdReport(&config{keepCwd: true, shell: "/bin/sh"})
	report.wrap("", "true")
	if report.fd < 0 {
		t.Fatal("no report file")
	}
	path := report.path
	report.release()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s stays after release (%v)", path, err)
	}
	if report.finalDir() != "" { // a second call reads nothing again
		t.Error("a released report has a directory")
	}
}

// TestCwdReportAfterTheTemporaryDirectoriesWent: a report made after the
// jobs' temporary directories were removed (an earlier server's shutdown
// in this process) makes its directory again instead of not tracking.
func TestCwdReportAfterTheTemporaryDirectoriesWent(t *testing.T) {
	first := newCwdReport(&config{keepCwd: true, shell: "/bin/sh"})
	first.wrap("", "true")
	first.release()
	if err := os.RemoveAll(filepath.Dir(first.path)); err != nil {
		t.Fatal(err)
	}
	again := newCwdReport(&config{keepCwd: true, shell: "/bin/sh"})
	if wrapped := again.wrap("", "true"); wrapped == "true" || again.fd < 0 {
		t.Fatalf("not tracked after the directory went: %q", wrapped)
	}
	again.release()
}

func TestCwdReportOnlyForPOSIXShells(t *testing.T) {
	if newCwdReport(&config{keepCwd: true, shell: "/usr/bin/fish"}) != nil {
		t.Error("a fish shell gets the POSIX trap")
	}
	if newCwdReport(&config{keepCwd: false, shell: "/bin/sh"}) != nil {
		t.Error("a report without MCP_EXEC_KEEP_CWD")
	}
	if got := (*cwdReport)(nil).wrap("", "true"); got != "true" {
		t.Errorf("nil report wraps: %q", got)
	}
}

// reportOf is a report that says dir, as a shell ending there would.
func reportOf(t *testing.T, dir string) *cwdReport {
	t.Helper()
	return reportIn(t, t.TempDir(), dir)
}

// reportIn is reportOf with its file in tmp.
func reportIn(t *testing.T, tmp, dir string) *cwdReport {
	t.Helper()
	r := &cwdReport{fd: -1}
	r.wrap(tmp, "true")
	if err := os.WriteFile(r.path, []byte(dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCwdKeeperKeepsWhereTheShellEnded(t *testing.T) {
	cfg := &config{keepCwd: true}
	var k cwdKeeper
	if got := k.startDir(cfg, "", true); got != "" {
		t.Fatalf("nothing kept yet: %q", got)
	}
	dir := t.TempDir()
	real, _ := filepath.EvalSymlinks(dir)
	k.ended(cfg, reportOf(t, dir))
	if got := k.startDir(cfg, "", true); got != real {
		t.Errorf("start in %q, want %q", got, real)
	}
	if got := k.startDir(cfg, "/usr", false); got != "/usr" || k.dir != real {
		t.Errorf("a nowait cwd: start %q, kept %q; want /usr and %q kept", got, k.dir, real)
	}
	if got := k.startDir(cfg, "/usr", true); got != "/usr" || k.dir != "/usr" {
		t.Errorf("a blocking cwd: start %q, kept %q; want /usr for both", got, k.dir)
	}
	if got := k.startDir(cfg, "lib", true); got != "/usr/lib" {
		t.Errorf("a relative cwd starts in %q, want /usr/lib (from the kept directory)", got)
	}
	k.ended(cfg, reportOf(t, "")) // said nothing: stays
	if k.dir != "/usr/lib" {
		t.Errorf("kept %q after a shell that said nothing, want /usr/lib", k.dir)
	}
}

func TestCwdKeeperForgetsADirectoryThatIsGone(t *testing.T) {
	cfg := &config{keepCwd: true}
	var k cwdKeeper
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k.ended(cfg, reportOf(t, dir))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if got := k.startDir(cfg, "", true); got != "" || k.dir != "" {
		t.Errorf("start %q, kept %q; want the default and nothing kept", got, k.dir)
	}
}

func TestCwdKeeperNeverOutsideTheRoots(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	cfg := &config{keepCwd: true, roots: []string{root}}
	var k cwdKeeper
	k.ended(cfg, reportOf(t, "/usr"))
	if got := k.startDir(cfg, "", true); got != "" {
		t.Errorf("start in %q after a shell ended outside the roots, want the default", got)
	}
	k.ended(cfg, reportOf(t, root))
	if got := k.startDir(cfg, "", true); got != root {
		t.Errorf("start in %q, want the root %q", got, root)
	}
}

func TestCwdKeeperYieldedMovesWhenDelivered(t *testing.T) {
	cfg := &config{keepCwd: true}
	done := make(chan struct{})
	close(done)
	var k cwdKeeper
	k.yielded("1", reportOf(t, "/usr"), done)
	k.delivered(cfg, "2") // another job: nothing
	if k.dir != "" {
		t.Fatalf("moved by another job's delivery: %q", k.dir)
	}
	k.delivered(cfg, "1")
	if k.dir != "/usr" {
		t.Errorf("kept %q after delivery, want /usr", k.dir)
	}

	k.yielded("3", reportOf(t, "/var"), done)
	k.ended(cfg, reportOf(t, "/etc")) // a later call set it first
	k.delivered(cfg, "3")
	if k.dir != "/etc" {
		t.Errorf("kept %q, want /etc: the later call's", k.dir)
	}
}

func TestCwdKeeperOffKeepsNothing(t *testing.T) {
	var k cwdKeeper
	if got := k.startDir(&config{}, "rel", true); got != "rel" || k.dir != "" {
		t.Errorf("without the setting: start %q, kept %q", got, k.dir)
	}
}
