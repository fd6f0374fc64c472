//go:build !linux

package main

import "errors"

// rlimitResources is empty here: MCP_EXEC_RLIMITS needs the Linux launcher.
var rlimitResources = map[string]struct {
	resource  int
	byteSized bool
}{}

// errNoConfinement says this system has no way to confine a job.
var errNoConfinement = errors.New("job confinement (sandbox, network off, rlimits) is built only for Linux")

// landlockABI reports that there is no Landlock here.
func landlockABI() (int, error) { return 0, errNoConfinement }

// restrictThread refuses: nothing can be enforced on this system.
func (c confinement) restrictThread() error {
	if !c.fsRestricted && !c.netOff {
		return nil
	}
	return &confineError{confineFailedFS, errNoConfinement}
}

// setRlimits refuses: the launcher runs only on Linux.
func setRlimits(limits []rlimit) error {
	if len(limits) == 0 {
		return nil
	}
	return &confineError{confineFailedRlimits, errNoConfinement}
}

// jobDir is dir: no job has a mount namespace of its own here.
func (c confinement) jobDir(dir string) (string, func(), error) { return dir, func() {}, nil }

// probeMountNamespace refuses: there are no mount namespaces here.
func probeMountNamespace() error { return errNoConfinement }
