package main

import (
	_ "embed"
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
