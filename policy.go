package main

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// admit checks what a job would run against the policy of cfg: argv (nil
// for a shell command), the env overlay and the cwd. It returns the cwd the
// job runs in, resolved. With no policy set it is 1.0: everything runs. A
// refusal wraps errRefused and says what was refused, by which setting, and
// what is allowed.
func admit(cfg *config, argv []string, env map[string]string, dir string) (string, error) {
	if err := cmp.Or(admitProgram(cfg, argv), admitEnv(cfg, env)); err != nil {
		return dir, err
	}
	return admitDir(cfg, dir)
}

// admitProgram checks argv[0], or for a command (argv nil) the shell,
// against MCP_EXEC_ALLOW: the spelling must equal an entry, as written.
func admitProgram(cfg *config, argv []string) error {
	if cfg.allow == nil {
		return nil
	}
	allowed := strings.Join(cfg.allow, ", ")
	if argv != nil {
		if !slices.Contains(cfg.allow, argv[0]) {
			return refusedBy("MCP_EXEC_ALLOW", fmt.Errorf("%w: program %q is not in MCP_EXEC_ALLOW (allowed, spelled exactly: %s)", errRefused, argv[0], allowed))
		}
		return nil
	}
	if !slices.ContainsFunc(cfg.allow, func(entry string) bool { return namesShell(cfg, entry) }) {
		return refusedBy("MCP_EXEC_ALLOW", fmt.Errorf("%w: a command runs in the shell %s (%s), which MCP_EXEC_ALLOW does not list; use argv with one of: %s", errRefused, cfg.shellSpelled, cfg.shell, allowed))
	}
	return nil
}

// namesShell reports whether an MCP_EXEC_ALLOW entry names the shell jobs
// run in: spelled as $SHELL spells it or as its resolved path, or finding
// the same file as the server's PATH finds it (sh allows SHELL=/bin/sh
// when PATH's sh is /bin/sh, or /usr/bin/sh linked to it).
func namesShell(cfg *config, entry string) bool {
	if entry == cfg.shellSpelled || entry == cfg.shell {
		return true
	}
	found, err := lookPath(entry, cfg.baseEnv)
	if err != nil {
		return false
	}
	a, errA := os.Stat(found)
	b, errB := os.Stat(cfg.shell)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// admitEnv checks the env argument's names against MCP_EXEC_ENV_DENY.
func admitEnv(cfg *config, env map[string]string) error {
	var denied []string
	for name := range env {
		if cfg.envDeny[name] {
			denied = append(denied, name)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	sort.Strings(denied)
	return refusedBy("MCP_EXEC_ENV_DENY", fmt.Errorf("%w: env may not set %s (MCP_EXEC_ENV_DENY: %s)", errRefused, strings.Join(denied, ", "), strings.Join(sortedKeys(cfg.envDeny), ", ")))
}

// admitDir resolves the cwd, symlinks followed, and with MCP_EXEC_ROOTS
// checks it is inside a root (the default cwd is then the first root). The
// job is started in the resolved directory, not in the spelling checked.
func admitDir(cfg *config, dir string) (string, error) {
	if cfg.roots == nil {
		return dir, nil
	}
	if dir == "" {
		return cfg.roots[0], nil
	}
	roots := strings.Join(cfg.roots, ", ")
	resolved, err := resolveDir(dir)
	if err != nil {
		return "", refusedBy("MCP_EXEC_ROOTS", fmt.Errorf("%w: cwd %v; MCP_EXEC_ROOTS allows: %s", errRefused, err, roots))
	}
	for _, root := range cfg.roots {
		if within(resolved, root) {
			return resolved, nil
		}
	}
	return "", refusedBy("MCP_EXEC_ROOTS", fmt.Errorf("%w: cwd %q resolves to %s, outside MCP_EXEC_ROOTS (allowed: %s)", errRefused, dir, resolved, roots))
}

// sortedKeys lists a set's members in order.
func sortedKeys(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }

// pinDir opens the cwd a job was admitted to and checks where the opened
// directory really is, then returns a path that names that very directory
// for the child's chdir, and a release to call once the child is started.
// A directory swapped for a symlink between admit's check and the child's
// chdir would otherwise let a job start outside the roots. Without roots,
// or where the system cannot name an open directory, dir is used as it is.
func pinDir(cfg *config, dir string) (string, func(), error) {
	none := func() {}
	if cfg.roots == nil || dir == "" {
		return dir, none, nil
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", none, refusedBy("MCP_EXEC_ROOTS", fmt.Errorf("%w: cwd %q: %v", errRefused, dir, err))
	}
	release := func() { _ = syscall.Close(fd) } // best effort: the child has chdir'ed
	real, named := openPath(fd)
	if !named {
		release()
		return dir, none, nil
	}
	for _, root := range cfg.roots {
		if within(real, root) {
			return "/proc/self/fd/" + strconv.Itoa(fd), release, nil
		}
	}
	release()
	return "", none, refusedBy("MCP_EXEC_ROOTS", fmt.Errorf("%w: cwd %q is now %s, outside MCP_EXEC_ROOTS (allowed: %s)", errRefused, dir, real, strings.Join(cfg.roots, ", ")))
}
