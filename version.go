package main

import (
	_ "embed"
	"runtime/debug"
	"strings"
)

// versionFile is the VERSION file at the top of the source tree, the one
// place the release number is written.
//
//go:embed VERSION
var versionFile string

// version is the release this binary was built as: what --version,
// serverInfo.version and the packages say. It is read from VERSION when
// compiled, so `go install` and `go test` see the number the release files
// carry without any linker flag.
var version = strings.TrimSpace(versionFile)

// commit is the commit the source was built from, set at build time with
// -ldflags "-X main.commit=..."; buildCommit says what --version names.
var commit = "unknown"

// buildCommit is the commit this binary was built from: the one the
// linker stamped (commit), else the one the go command recorded for a
// build in a checkout (vcs.revision, with "-dirty" when the tree had
// changes), else "unknown".
func buildCommit() string {
	if commit != "unknown" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return commit
	}
	recorded, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			recorded = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if recorded == "" {
		return commit
	}
	recorded = recorded[:min(len(recorded), 12)]
	if dirty {
		recorded += "-dirty"
	}
	return recorded
}
