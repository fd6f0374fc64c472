package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdmitAllowList: argv[0] must be spelled as listed; a command needs
// the shell listed.
func TestAdmitAllowList(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.allow = []string{"git", "/bin/sh"}
	cfg.shellSpelled, cfg.shell = "/bin/sh", "/bin/sh"
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"git", "log"}, true}, {[]string{"/usr/bin/git"}, false}, {[]string{"./git"}, false},
		{[]string{"GIT"}, false}, {[]string{"git "}, false}, {[]string{"sh", "-c", "id"}, false}, {nil, true},
	} {
		_, err := admit(cfg, tc.argv, nil, "")
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, errRefused) || !strings.Contains(err.Error(), "MCP_EXEC_ALLOW"))) {
			t.Errorf("argv %q: %v, want allowed %v", tc.argv, err, tc.ok)
		}
	}
	cfg.allow = []string{"git"}
	if _, err := admit(cfg, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "shell") {
		t.Errorf("a command with the shell not listed: %v", err)
	}
}

// TestAdmitRoots: the cwd must resolve inside a root, whatever the
// spelling: symlinks out, dot-dot, a file.
func TestAdmitRoots(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	var err error
	if cfg.roots, err = parseRoots(root); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, want string // want "" = refused
	}{
		{"", cfg.roots[0]}, {root, cfg.roots[0]}, {root + "/sub/", filepath.Join(cfg.roots[0], "sub")},
		{root + "/sub/..", cfg.roots[0]}, {root + "/..", ""}, {root + "/out", ""}, {root + "/out/..", ""},
		{root + "/file", ""}, {outside, ""}, {"/", ""}, {root + "/missing", ""}, {root + "x", ""},
	} {
		got, err := admit(cfg, nil, nil, tc.dir)
		switch {
		case tc.want == "" && (err == nil || !errors.Is(err, errRefused) || !strings.Contains(err.Error(), cfg.roots[0])):
			t.Errorf("cwd %q: %q, %v; want a refusal naming the roots", tc.dir, got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("cwd %q: %q, %v; want %q", tc.dir, got, err, tc.want)
		}
	}
}

// TestAdmitEnvDeny: a denied name is refused, named, with the list.
func TestAdmitEnvDeny(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.envDeny = map[string]bool{"LD_PRELOAD": true, "BASH_ENV": true}
	if _, err := admit(cfg, nil, map[string]string{"LD_PRELOAD": "x", "OK": "1"}, ""); err == nil ||
		!strings.Contains(err.Error(), "LD_PRELOAD") || !strings.Contains(err.Error(), "BASH_ENV") {
		t.Errorf("denied env: %v", err)
	}
	if _, err := admit(cfg, nil, map[string]string{"ld_preload": "x"}, ""); err != nil {
		t.Errorf("names are case-sensitive: %v", err)
	}
}

// TestMaxJobsRefusesBeyondTheLimit: past MCP_EXEC_MAX_JOBS a start is
// refused naming the running jobs; once one ends, another may start.
func TestMaxJobsRefusesBeyondTheLimit(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.maxJobs = 2
	reg := newRegistry(cfg)
	a, b := startJob(t, reg, "exec sleep 60"), startJob(t, reg, "exec sleep 60")
	_, _, err := reg.start(startRequest{command: "true", policy: defaultCapture})
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), a.id+", "+b.id) || !strings.Contains(err.Error(), "MCP_EXEC_MAX_JOBS is 2") {
		t.Fatalf("a third job: %v", err)
	}
	killGroup(a.pid)
	awaitDone(t, a)
	startJob(t, reg, "true")
}

// TestFinishedJobsExpire: beyond MCP_EXEC_MAX_FINISHED the oldest finished
// job is forgotten, and after MCP_EXEC_JOB_TTL any; their ids say why.
func TestFinishedJobsExpire(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.maxFinished = 1
	reg := newRegistry(cfg)
	first := startJob(t, reg, "true")
	awaitDone(t, first)
	second := startJob(t, reg, "true")
	awaitDone(t, second)
	eventually(t, jobDeadline, "the oldest finished job expires", func() bool {
		_, err := reg.lookup(first.id)
		return err != nil && strings.Contains(err.Error(), "expired: more than MCP_EXEC_MAX_FINISHED")
	})
	collect(t, reg, second)

	cfg2 := testConfig()
	cfg2.jobTTL = 100 * time.Millisecond
	reg2 := newRegistry(cfg2)
	j := startJob(t, reg2, "true")
	eventually(t, jobDeadline, "the finished job expires", func() bool {
		_, err := reg2.lookup(j.id)
		return err != nil && strings.Contains(err.Error(), "expired: finished and not collected within MCP_EXEC_JOB_TTL")
	})
}

// TestLauncherAndOwnSession: the launcher runs first, the job leads its
// own session, and jobs do not see the server's MCP_EXEC_* settings.
func TestLauncherAndOwnSession(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg, err := loadConfig(append(os.Environ(), "MCP_EXEC_DEBUG=1", `MCP_EXEC_LAUNCHER=["env","LAUNCHED=yes"]`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.shell = "/bin/sh"
	reg := newRegistry(cfg)
	j := startJob(t, reg, `echo $LAUNCHED $$ $(cut -d' ' -f6 /proc/$$/stat); env | grep -c '^MCP_EXEC_' || true`)
	r := resultOf(collect(t, reg, j))
	fields := strings.Fields(r.Stdout.Data)
	if len(fields) != 4 || fields[0] != "yes" || fields[1] != fields[2] || fields[3] != "0" {
		t.Errorf("launched %q: want LAUNCHED=yes, session id = pid, no MCP_EXEC_ variable", r.Stdout.Data)
	}
}

// TestAllowFindsProgramWithServerPath: under an allowlist a caller's PATH in
// env cannot make a listed name run another file (it ran the caller's git).
func TestAllowFindsProgramWithServerPath(t *testing.T) {
	onLinux(t)
	t.Parallel()
	evil := t.TempDir()
	if err := os.WriteFile(filepath.Join(evil, "printenv"), []byte("#!/bin/sh\necho pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.allow = []string{"printenv"}
	reg := newRegistry(cfg)
	j := startReq(t, reg, startRequest{argv: []string{"printenv", "X"}, env: map[string]string{"PATH": evil, "X": "safe"}, policy: defaultCapture})
	if r := resultOf(collect(t, reg, j)); r.Stdout == nil || r.Stdout.Data != "safe\n" {
		t.Errorf("printenv under an allowlist ran %+v; want the server's printenv", r.Stdout)
	}
}

// TestCwdSwappedAfterCheckIsRefused: a directory admitted inside the roots
// and then swapped for a symlink pointing out is refused when the job is
// about to start in it (jobs started outside the roots).
func TestCwdSwappedAfterCheckIsRefused(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	flip := filepath.Join(root, "flip")
	for _, d := range []string{flip, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	var err error
	if cfg.roots, err = parseRoots(root); err != nil {
		t.Fatal(err)
	}
	dir, err := admit(cfg, nil, nil, flip)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(flip); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, flip); err != nil {
		t.Fatal(err)
	}
	if pinned, release, err := pinDir(cfg, dir); err == nil {
		release()
		t.Errorf("the swapped cwd was pinned as %q; want a refusal", pinned)
	}
}

// TestJobsEndingBeforeListedCountAsFinished: jobs that end while they are
// still being started count against MCP_EXEC_MAX_FINISHED (two stayed).
func TestJobsEndingBeforeListedCountAsFinished(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := testConfig()
	cfg.maxFinished = 1
	reg := newRegistry(cfg)
	for i := 0; i < 100; i++ {
		awaitDone(t, startJob(t, reg, "true"))
		// The limit applies once the end is published, just after done.
		eventually(t, jobDeadline, "at most 1 finished job is listed", func() bool { return len(reg.list()) <= 1 })
	}
}

// TestAllowListedShellNameAllowsCommands: MCP_EXEC_ALLOW=git,grep,ls,sh,
// docs/policy-and-sandbox.md's own example, refused every command when SHELL=/bin/sh: the
// bare sh names the same file as the shell, as PATH finds it.
func TestAllowListedShellNameAllowsCommands(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.baseEnv = []string{"PATH=/usr/bin:/bin"}
	cfg.shellSpelled, cfg.shell = "/bin/sh", "/bin/sh"
	cfg.allow = []string{"git", "grep", "ls", "sh"}
	if _, err := admit(cfg, nil, nil, ""); err != nil {
		t.Errorf("a command with sh listed and SHELL=/bin/sh: %v", err)
	}
	if _, err := admit(cfg, []string{"/bin/sh", "-c", "id"}, nil, ""); err == nil {
		t.Error("argv /bin/sh is still refused: argv[0] is checked as spelled")
	}
	cfg.allow = []string{"ls"}
	if _, err := admit(cfg, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "shell /bin/sh") {
		t.Errorf("a command with only ls listed: %v", err)
	}
}

// TestShellReadFromGivenEnvironment: loadConfig read SHELL from the
// process's environment, not from the environment it was given.
func TestShellReadFromGivenEnvironment(t *testing.T) {
	t.Setenv("SHELL", "/nonexistent/process-shell")
	cfg, err := loadConfig([]string{"SHELL=sh", "PATH=/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.shellSpelled != "sh" || !filepath.IsAbs(cfg.shell) {
		t.Errorf("shell %q (spelled %q), want sh found on the given PATH", cfg.shell, cfg.shellSpelled)
	}
}
