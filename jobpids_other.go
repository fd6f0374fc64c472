//go:build !linux

package main

import "errors"

// jobProcesses cannot list a job's processes here (no /proc, no cgroups):
// errors.ErrUnsupported says so, which a caller tells apart from a failed
// look on Linux.
func jobProcesses() ([]int, error) { return nil, errors.ErrUnsupported }
