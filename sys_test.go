package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLookPathSkipsRelativeEntries: with an empty or relative entry in
// PATH, a program planted in the directory the search ran from was found
// (and, under an allowlist, ran from the job's cwd instead of the program
// the list meant).
func TestLookPathSkipsRelativeEntries(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Join(dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "planted"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, path := range []string{":/nonexistent", ".:/nonexistent", "bin:/nonexistent", "/nonexistent::", "./bin"} {
		found, err := lookPath("planted", []string{"PATH=" + path})
		if err == nil || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "relative entries are not searched") {
			t.Errorf("PATH=%s: found %q, %v; want not found, naming the skipped entries", path, found, err)
		}
	}
	found, err := lookPath("planted", []string{"PATH=.:" + filepath.Join(dir, "bin")})
	if err != nil || found != filepath.Join(dir, "bin", "planted") {
		t.Errorf("an absolute entry after a relative one: %q, %v", found, err)
	}
}
