// Starting a job's process: its pipes or terminal, its environment and
// working directory, and the private TMPDIR a sandboxed job gets.

package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// launch creates the job's pipes and starts `$SHELL -c command` with them.
// onExit runs on the reaper's goroutine once the shell has exited, possibly
// before launch returns; everything it touches exists before the fork. A
// launch that fails gives back all it made: the private TMPDIR, our ends of
// the pipes (which ends the pumps) and the child's ends.
func (j *job) launch(cfg *config, req startRequest, onExit func(exitStatus)) (err error) {
	var undo []func() // what a failed launch gives back, run last first
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if req.dir != "" {
		if err := checkDir(req.dir); err != nil {
			return err
		}
	}
	// The caller's env is layered over the trace context: a variable it
	// names on purpose wins over what the host's _meta carried.
	base := cfg.baseEnv
	if add, unset := req.trace.variables(cfg.envDeny); add != nil {
		base = withoutNames(mergeEnv(base, add), unset)
	}
	overlay, unset := req.env, req.unsetEnv
	if cfg.jobEnvDefaults {
		overlay, unset = withEnvDefaults(base, req.env, req.unsetEnv, req.tty == nil)
	}
	env := withoutNames(mergeEnv(base, overlay), unset)
	if req.lingers {
		env = mergeEnv(env, j.tree.markTree())
	}
	// Masked with the values this very environment holds: the server's
	// own that it passes on, and the call's.
	j.maskRules = cfg.mask.rulesFor(env)
	j.command = commandWords(req, j.maskRules)
	path, argv := cfg.shell, []string{cfg.shell, "-c", req.command}
	if req.argv != nil {
		// Under an allowlist the program is found with the server's PATH:
		// a caller's env must not swap what the list allows for its own.
		search := env
		if cfg.allow != nil {
			search = cfg.baseEnv
		}
		found, err := lookPath(req.argv[0], search)
		if err != nil {
			return err
		}
		path, argv = found, req.argv
	}
	if cfg.launcher != nil {
		// The launcher gets the program by the path found here, so it runs
		// exactly what the policy checked.
		program := append([]string{path}, argv[1:]...)
		found, err := lookPath(cfg.launcher[0], cfg.baseEnv) // the operator's, not the caller's
		if err != nil {
			return fmt.Errorf("MCP_EXEC_LAUNCHER: %w", err)
		}
		path, argv = found, append(slices.Clip(cfg.launcher), program...)
	}
	confine := confinementFor(cfg, "")
	if confine.fsRestricted {
		tmp, err := makeJobTemp()
		if err != nil {
			return err
		}
		j.tmpDir, confine = tmp, confinementFor(cfg, tmp)
		env = mergeEnv(env, map[string]string{"TMPDIR": tmp})
		undo = append(undo, j.removeTemp)
	}
	if req.argv == nil && req.cwdReport != nil {
		argv[len(argv)-1] = req.cwdReport.wrap(j.tmpDir, req.command) // the command is last, after any launcher
	}
	if confine.rlimits != nil {
		path, argv = launcherArgv(confine.rlimits, path, argv)
	}
	if err := processRoom(); err != nil {
		return err
	}
	in, out, errp, err := makeJobPipes()
	if req.tty != nil && err == nil {
		in, out, errp, err = onTerminal(in, out, errp, *req.tty)
	}
	if err != nil {
		return err // both close what they made when they fail
	}
	childEnds := true // the child's ends are still ours to close
	undo = append(undo, func() {
		closeAll([]*os.File{in.ours, out.ours, errp.ours}) // the pumps end at the close
		if childEnds {
			for _, p := range []jobPipe{in, out, errp} {
				_ = syscall.Close(p.child) // best effort: nothing was started
			}
		}
	})
	j.stdin = newStdinPipe(in.ours)
	j.stdin.eofByte = req.tty != nil
	j.inputEnd = inputEndOf(in.child, req.tty != nil)
	j.tree.notePipes(in.child, out.child, errp.child)
	j.prompts = req.reportPrompts || req.tty != nil // a terminal is where prompts are read, whoever asks
	if req.streamed {
		j.outGate, j.errGate = newReadGate(), newReadGate()
	}
	j.onPipes = req.tty == nil
	j.pipesOpen = 2 // before the pumps run: each end counts down; see readyToPublish
	j.stdout.masks, j.stderr.masks = j.maskRules != nil, j.maskRules != nil
	j.stdoutPump = startPump(out.ours, j.stdout, j.outGate, j, newMasker(j.maskRules, j.stdout, cfg.mask.hold))
	j.errPump = startPump(errp.ours, j.stderr, j.errGate, j, newMasker(j.maskRules, j.stderr, cfg.mask.hold))
	dir, release, err := pinDir(cfg, req.dir)
	if err != nil {
		return err
	}
	confine.cwd = req.dir // admitted and resolved: found again in the job's own mounts
	// Its processes are counted only for a usage that reports procs_max.
	box, err := jobTreesInForce().box(req.reportPrompts && cfg.usage)
	if err != nil {
		release()
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			return fdsExhausted(fdLimit()) // the cgroup's directory is one more descriptor, as the pipes are
		}
		return err
	}
	j.box = box
	undo = append(undo, box.release)
	inCgroup := box.spawnFD() >= 0
	pid, err := spawnNotify(spawnSpec{
		path:     path,
		argv:     argv,
		dir:      dir,
		env:      env,
		files:    []uintptr{uintptr(in.child), uintptr(out.child), uintptr(errp.child)},
		confine:  &confine,
		ctty:     req.tty != nil,
		cgroupFD: box.spawnFD(),
		inCgroup: inCgroup,
	}, onExit)
	release()
	box.started()
	for _, p := range []jobPipe{in, out, errp} {
		_ = syscall.Close(p.child) // best effort: the child has its copy; ours would hide EOF
	}
	childEnds = false
	if err != nil {
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return processesExhausted(err)
		case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
			return fdsExhausted(fdLimit())
		case inCgroup && slices.ContainsFunc(cgroupSpawnErrnos, func(e syscall.Errno) bool { return errors.Is(err, e) }):
			return fmt.Errorf("start %s: the kernel would not start it in the job's cgroup (%w); the job is refused rather than run outside it (MCP_EXEC_CGROUP=off keeps jobs on process groups)", path, err)
		}
		return fmt.Errorf("start %s: %w", path, err)
	}
	j.pid = pid
	return nil
}

// cgroupSpawnErrnos are clone3's refusals of CLONE_INTO_CGROUP: no clone3,
// a cgroup that cannot take processes, one the server may not use.
var cgroupSpawnErrnos = []syscall.Errno{syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.EBUSY, syscall.EINVAL}

// onTerminal puts a job on a pseudo-terminal instead of the pipes made for
// it: the terminal is the child's stdin, stdout and stderr (and controlling
// terminal); its master is read into the stdout window and written by
// input. The stderr pipe stays, closed on the child's side, so its pump
// ends at once with nothing. On failure it closes what the pipes held.
func onTerminal(in, out, errp jobPipe, size ttySpec) (jobPipe, jobPipe, jobPipe, error) {
	master, slave, err := openPTY(size.rows, size.cols)
	if err == nil {
		// Four descriptors of our own, each closed once: the writer on the
		// master, and the slave three times over for the child's 0, 1, 2.
		fds, derr := dupAll(int(master.Fd()), slave, slave)
		if derr == nil {
			closeAll([]*os.File{in.ours, out.ours})
			for _, p := range []jobPipe{in, out, errp} {
				_ = syscall.Close(p.child) // best effort: replaced by the terminal
			}
			_ = syscall.SetNonblock(fds[0], true)
			return jobPipe{child: slave, ours: os.NewFile(uintptr(fds[0]), "ptmx-in")},
				jobPipe{child: fds[1], ours: master}, jobPipe{child: fds[2], ours: errp.ours}, nil
		}
		err = derr
		master.Close()
		_ = syscall.Close(slave)
	}
	closeAll([]*os.File{in.ours, out.ours, errp.ours})
	for _, p := range []jobPipe{in, out, errp} {
		_ = syscall.Close(p.child) // best effort: nothing was started
	}
	return in, out, errp, fmt.Errorf("make a terminal: %w", err)
}

// dupAll duplicates each fd, close-on-exec from birth; on failure it
// closes the duplicates it made.
func dupAll(fds ...int) ([]int, error) {
	var dups []int
	for _, fd := range fds {
		// One step, not dup then FD_CLOEXEC: another goroutine (another
		// session's job) may fork between the two and inherit the copy.
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, m := range dups {
				_ = syscall.Close(m) // best effort: cleaning up a failed start
			}
			return nil, err
		}
		dups = append(dups, d)
	}
	return dups, nil
}

// jobPipe is one of a job's stdio pipes: the child's end is a plain blocking
// descriptor handed to the child and then closed; ours is non-blocking and
// lives in the runtime poller, so waiting on it parks a goroutine, not a thread.
type jobPipe struct {
	child int
	ours  *os.File
}

// makeJobPipes creates the stdin, stdout and stderr pipes of one job. It
// refuses (errExhausted) when the descriptors run out, or come so close to
// the limit that the server's own work (answering, reading /proc, HTTP)
// would find none: descriptors are numbered lowest first, so a new pipe
// numbered near the limit means nearly all are in use.
func makeJobPipes() (in, out, errp jobPipe, err error) {
	var made []jobPipe
	undo := func() {
		for _, m := range made {
			_ = syscall.Close(m.child) // best effort: cleaning up a failed start
			_ = m.ours.Close()
		}
	}
	limit := fdLimit()
	for i := 0; i < 3; i++ {
		p, err := makeJobPipe(i == 0)
		if err != nil {
			undo()
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				return in, out, errp, fdsExhausted(limit)
			}
			return in, out, errp, fmt.Errorf("create pipe: %w", err)
		}
		made = append(made, p)
		if limit > 0 && max(p.child, int(p.ours.Fd())) >= limit-fdReserve(limit) {
			undo()
			return in, out, errp, fdsExhausted(limit)
		}
	}
	return made[0], made[1], made[2], nil
}

// makeJobPipe creates one pipe; childReads says which end the child gets.
func makeJobPipe(childReads bool) (jobPipe, error) {
	// The pipes keep the system's default size. Enlarging them measured no
	// faster, and for a user without CAP_SYS_RESOURCE every enlarged pipe
	// counts against pipe-user-pages-soft: past it, every new pipe of that
	// user, the jobs' own pipelines included, is cut to two pages.
	child, ours, err := jobPipeEnds(childReads)
	if err != nil {
		return jobPipe{}, err
	}
	return jobPipe{child: child, ours: os.NewFile(uintptr(ours), "job pipe")}, nil
}

// checkCwd refuses a cwd argument that names no directory; "" is none.
func checkCwd(dir string) error {
	if dir == "" {
		return nil
	}
	if err := checkDir(dir); err != nil {
		return fmt.Errorf("%w: %v", errInvalid, err)
	}
	return nil
}

// checkDir explains a working directory that cannot be used.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cwd %q: %w", dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("cwd %q: not a directory", dir)
	}
	return nil
}

// closeAll closes every non-nil file.
func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close() // best effort: nothing useful to do on failure
		}
	}
}

// envDefault is a variable a job gets where nothing sets it
// (MCP_EXEC_JOB_ENV_DEFAULTS): what makes programs write for a reader of
// their output rather than for a screen, in colour, through a pager.
type envDefault struct {
	name, value string
	pipesOnly   bool   // a job on a terminal keeps the TERM its terminal has
	unlessSet   string // a variable that, set, asks for the opposite
}

// envDefaults are the variables MCP_EXEC_JOB_ENV_DEFAULTS gives.
var envDefaults = []envDefault{
	{name: "NO_COLOR", value: "1", unlessSet: "FORCE_COLOR"},
	{name: "PAGER", value: "cat"},
	{name: "GIT_PAGER", value: "cat"},
	{name: "TERM", value: "dumb", pipesOnly: true},
}

// withEnvDefaults is a job's env overlay and the names it removes, with
// envDefaults: each default that neither base (the server's environment)
// nor env names joins the overlay, and each name env gives an empty
// value is removed, so a call turns a default off with "NAME": "". env
// itself is not changed.
func withEnvDefaults(base []string, env map[string]string, unset []string, onPipes bool) (map[string]string, []string) {
	inBase := map[string]bool{}
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		inBase[name] = true
	}
	set := func(name string) bool { // after env has had its say
		v, given := env[name]
		return given && v != "" || !given && inBase[name]
	}
	overlay := maps.Clone(env)
	if overlay == nil {
		overlay = map[string]string{}
	}
	for _, d := range envDefaults {
		_, given := env[d.name]
		if given || inBase[d.name] || d.pipesOnly && !onPipes || d.unlessSet != "" && set(d.unlessSet) {
			continue
		}
		overlay[d.name] = d.value
	}
	unset = slices.Clip(unset) // an append must not write into the caller's list
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if env[name] == "" {
			unset = append(unset, name)
		}
	}
	return overlay, unset
}

// withoutNames is env without the variables named; env itself when there
// are none.
func withoutNames(env []string, names []string) []string {
	if len(names) == 0 {
		return env
	}
	kept := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(names, k) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// mergeEnv layers overlay on base; later keys replace earlier ones.
func mergeEnv(base []string, overlay map[string]string) []string {
	if len(overlay) == 0 {
		return base
	}
	env := make([]string, 0, len(base)+len(overlay))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := overlay[k]; !replaced {
			env = append(env, kv)
		}
	}
	for k, v := range overlay {
		env = append(env, k+"="+v)
	}
	return env
}

// removeTemp removes the job's private TMPDIR, if it has one.
func (j *job) removeTemp() {
	if j.tmpDir != "" {
		_ = os.RemoveAll(j.tmpDir) // best effort: a leftover directory harms no one, and shutdown sweeps it
	}
}

// removeTempUnlessUsed removes the private TMPDIR of a job whose shell has
// exited, unless processes it left behind may still use it: those keep it
// until the server shuts down.
func (j *job) removeTempUnlessUsed(pgid int) {
	if !groupAlive(pgid) {
		j.removeTemp()
	}
}

// commandWords is the first characters of what req asks to run, for job
// events: never a byte of what the job writes.
func commandWords(req startRequest, rules *maskRules) string {
	s := req.command
	if req.argv != nil {
		s = strings.Join(req.argv, " ")
	}
	return firstRunes(maskString(rules, s), commandEventRunes)
}
