package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestNewestText: a stream's recent output is its last three lines, at
// most 400 bytes of them, each line as last drawn, a terminal's escapes
// stripped, and never a broken character.
func TestNewestText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300) // 600 bytes on one line
	for _, c := range []struct {
		name, raw  string
		onTerminal bool
		want       string
	}{
		{"a prompt without a newline", "Name? ", false, "Name? "},
		{"the last three lines", "1\n2\n3\n4\n5\n", false, "3\n4\n5\n"},
		{"an unterminated last line is one", "1\n2\n3\n4\n5", false, "3\n4\n5"},
		{"a progress bar as last drawn", "building\n 10%\r 50%\r 90%\r", false, "building\n 90%"},
		{"a terminal's lines", "\x1b[1mStep 1\x1b[0m\r\nStep 2\r\n\x1b]0;title\x07Password: ", true, "Step 1\nStep 2\nPassword: "},
		{"a terminal line redrawn", "\x1b[2K\r 10%\x1b[2K\r 20%", true, " 20%"},
		{"at most 400 bytes, whole characters", "x\n" + long, false, long[200:]},
		{"nothing", "", false, ""},
	} {
		got := string(newestText([]byte(c.raw), c.onTerminal))
		if got != c.want {
			t.Errorf("%s: newestText(%q) = %q, want %q", c.name, c.raw, got, c.want)
		}
		if len(got) > recentBytes || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes, valid %v", c.name, len(got), utf8.ValidString(got))
		}
	}
}

// TestRecentOfAJob: recent names only the streams that wrote something,
// and is nil for a job that wrote nothing.
func TestRecentOfAJob(t *testing.T) {
	onLinux(t)
	t.Parallel()
	reg := newRegistry(testConfig())
	quiet := startJob(t, reg, "true")
	collect(t, reg, quiet)
	if r := recentOf(quiet); r != nil {
		t.Errorf("a job that wrote nothing has recent %+v", r)
	}
	loud := startJob(t, reg, "seq 1 1000; echo oops >&2")
	collect(t, reg, loud)
	if r := recentOf(loud); r == nil || *r != (recentJSON{Stdout: "998\n999\n1000\n", Stderr: "oops\n"}) {
		t.Errorf("recent of seq and a warning: %+v", r)
	}
}
