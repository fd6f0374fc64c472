package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// changelogHeading is a release's heading in CHANGELOG.md: "## X.Y.Z — DATE".
var changelogHeading = regexp.MustCompile(`^## (\d+)\.(\d+)\.(\d+) — (\d{4}-\d{2}-\d{2})$`)

// TestVersionAgreesWithChangelog checks that the release number compiled in
// is VERSION's, that it is a plain X.Y.Z, and that CHANGELOG.md's newest
// heading names it: a release cannot be cut with the changelog behind.
func TestVersionAgreesWithChangelog(t *testing.T) {
	raw, err := os.ReadFile("VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(raw)); version != got {
		t.Fatalf("compiled-in version %q, VERSION says %q", version, got)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("VERSION %q is not X.Y.Z", version)
	}
	heads := releaseHeadings(t)
	if len(heads) == 0 || heads[0].version != version {
		t.Fatalf("CHANGELOG.md's newest release heading is %v, want %q first", heads, version)
	}
}

// TestChangelogHeadingsNewestFirst checks every "## " heading of
// CHANGELOG.md is a dated release, versions and dates both newest first.
func TestChangelogHeadingsNewestFirst(t *testing.T) {
	heads := releaseHeadings(t)
	for i := 1; i < len(heads); i++ {
		a, b := heads[i-1], heads[i]
		if !versionLess(b.parts, a.parts) || b.date > a.date {
			t.Errorf("CHANGELOG.md: %s (%s) is listed above %s (%s): newest first", a.version, a.date, b.version, b.date)
		}
	}
}

// release is one heading of CHANGELOG.md.
type release struct {
	version, date string
	parts         [3]int
}

// releaseHeadings are CHANGELOG.md's "## " headings in file order; a "## "
// heading that is not "## X.Y.Z — YYYY-MM-DD" fails the test.
func releaseHeadings(t *testing.T) []release {
	t.Helper()
	raw, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []release
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "## ") {
			continue
		}
		m := changelogHeading.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("CHANGELOG.md: heading %q is not \"## X.Y.Z — YYYY-MM-DD\"", line)
		}
		r := release{version: m[1] + "." + m[2] + "." + m[3], date: m[4]}
		for i := range r.parts {
			r.parts[i], _ = strconv.Atoi(m[i+1])
		}
		out = append(out, r)
	}
	return out
}

// versionLess reports whether release number a comes before b.
func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// TestBuildCommitPrefersTheStamp: a commit the linker stamped is named as
// it is; without one the go command's record of the checkout is read.
func TestBuildCommitPrefersTheStamp(t *testing.T) {
	saved := commit
	defer func() { commit = saved }()
	commit = "0123456789ab"
	if got := buildCommit(); got != "0123456789ab" {
		t.Errorf("stamped: %q", got)
	}
	commit = "unknown"
	if got := buildCommit(); !regexp.MustCompile(`^(unknown|[0-9a-f]{12}(-dirty)?)$`).MatchString(got) {
		t.Errorf("unstamped: %q, want unknown or the checkout's commit", got)
	}
}
