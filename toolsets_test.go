package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDefaultOffersTheSevenJobTools: with no setting, the seven 1.0 tools
// and only those.
func TestDefaultOffersTheSevenJobTools(t *testing.T) {
	want := []string{"execute", "wait", "status", "output", "input", "kill", "list_jobs"}
	if got := toolsFor(testConfig()).names(); !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
}

// TestToolSetsSideBySide: a comma list offers the sets in its order, the
// shell set under its prefix.
func TestToolSetsSideBySide(t *testing.T) {
	cfg := configOf(t, "MCP_EXEC_TOOLS=shell,exec,jobs", "MCP_EXEC_TOOL_PREFIX=rg")
	got := toolsFor(cfg).names()
	want := []string{"rg_run", "rg_start", "rg_poll", "rg_output", "rg_kill", "rg_allowed", "exec",
		"execute", "wait", "status", "output", "input", "kill", "list_jobs"}
	if !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if ins := instructionsFor(cfg); !strings.Contains(ins, "rg_run") || !strings.Contains(ins, "exec") || !strings.Contains(ins, "execute") {
		t.Errorf("instructions %q do not name every set", ins)
	}
}

// TestToolSetSettingsRefused: an unknown set, a set twice and a prefix that
// would make invalid tool names stop the server at startup.
func TestToolSetSettingsRefused(t *testing.T) {
	for _, setting := range []string{
		"MCP_EXEC_TOOLS=shells", "MCP_EXEC_TOOLS=jobs,jobs", "MCP_EXEC_TOOLS=jobs,", "MCP_EXEC_TOOL_PREFIX=1x",
		"MCP_EXEC_TOOL_PREFIX=a b", "MCP_EXEC_TOOL_PREFIX=" + strings.Repeat("a", 33), "MCP_EXEC_SHELL_MAX_OUTPUT_BYTES=1023",
		"MCP_EXEC_SHELL_MAX_OUTPUT_LINES=9",
	} {
		name, _, _ := strings.Cut(setting, "=")
		if _, err := loadConfig([]string{setting}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want a refusal naming %s", setting, err, name)
		}
	}
	if _, err := loadConfig([]string{"MCP_EXEC_TIME_LIMIT=10", "MCP_EXEC_MAX_TIME_LIMIT=5"}); err == nil {
		t.Errorf("a default time limit over the maximum was accepted")
	}
}

// TestShellSetDefaultsLimitFinishedJobs: the shell set's jobs are never
// collected, so offering it bounds finished jobs unless a setting says
// otherwise.
func TestShellSetDefaultsLimitFinishedJobs(t *testing.T) {
	if cfg := configOf(t, "MCP_EXEC_TOOLS=shell"); cfg.jobTTL != time.Hour || cfg.maxFinished != 100 {
		t.Errorf("ttl %v, max finished %d", cfg.jobTTL, cfg.maxFinished)
	}
	if cfg := configOf(t, "MCP_EXEC_TOOLS=shell", "MCP_EXEC_JOB_TTL=0", "MCP_EXEC_MAX_FINISHED=0"); cfg.jobTTL != 0 || cfg.maxFinished != 0 {
		t.Errorf("explicit settings lost: ttl %v, max finished %d", cfg.jobTTL, cfg.maxFinished)
	}
	if cfg := testConfig(); cfg.jobTTL != 0 || cfg.maxFinished != 0 {
		t.Errorf("the jobs set alone keeps jobs until collected, as 1.0: ttl %v, max finished %d", cfg.jobTTL, cfg.maxFinished)
	}
}

// toolListBytes is the size of the tools array a structured client reads
// under settings, as compact JSON on the wire.
func toolListBytes(t *testing.T, settings ...string) int {
	t.Helper()
	b, err := marshal(toolListFor(configOf(t, settings...), true, false)["tools"])
	if err != nil {
		t.Fatal(err)
	}
	return len(bytes.TrimSpace(b))
}

// TestToolListSizes: what a model reads on every turn stays within its
// bound: 10 KiB for the jobs set under the agent profile (wire-1.2's
// target), and about today's size for the others, so a growing description
// is a choice, not an accident.
func TestToolListSizes(t *testing.T) {
	for _, c := range []struct {
		set, profile string
		most         int
	}{
		{"jobs", "agent", 10 << 10},
		{"jobs", "compat", 28000}, // 1.0's texts, and the schemas of 1.2's until on execute and grep
		{"exec", "agent", 1600},
		{"exec", "compat", 1600},
		{"shell", "agent", 4300},
		{"shell", "compat", 4300},
	} {
		if n := toolListBytes(t, "MCP_EXEC_TOOLS="+c.set, "MCP_EXEC_PROFILE="+c.profile); n > c.most {
			t.Errorf("%s set, %s profile: tools/list is %d bytes, more than %d", c.set, c.profile, n, c.most)
		}
	}
	if n := len(instructionsFor(configOf(t, "MCP_EXEC_PROFILE=agent"))); n > 700 {
		t.Errorf("agent instructions are %d bytes, more than 700", n)
	}
}

// toolListFor is the tools/list result under cfg for a client that
// declared no tasks.
func toolListFor(cfg *config, structured, modern bool) map[string]any {
	b := newToolBook(cfg)
	return b.toolList(b.dialectOf(replyShape{modern: modern, structured: structured}, tasksOff))
}

// instructionsFor is the instructions under cfg for a client that
// declared no tasks.
func instructionsFor(cfg *config) string {
	b := newToolBook(cfg)
	return b.instructions(b.dialectOf(replyShape{}, tasksOff))
}

// TestToolBookHoldsEveryDialectsList: every dialect a session can decide
// for a request (each legacy revision before and after initialize, with
// and without tasks, and the modern era with and without the extension)
// finds its tools/list in the book, computed when the book was, and it
// is the list computing it afresh gives.
func TestToolBookHoldsEveryDialectsList(t *testing.T) {
	for _, cfg := range []*config{testConfig(), configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_TOOLS=jobs,exec,shell")} {
		b := newToolBook(cfg)
		negotiated := append([]string{""}, supportedVersions...)
		for _, rev := range negotiated {
			for _, form := range []taskForm{tasksOff, tasksLegacy} {
				if form == tasksLegacy && rev != tasksVersion {
					continue // tasks are offered only in a 2025-11-25 session
				}
				checkBookList(t, b, b.dialectOf(shapeOf(false, rev), form))
			}
		}
		for _, form := range []taskForm{tasksOff, tasksModern} {
			checkBookList(t, b, b.dialectOf(shapeOf(true, ""), form))
		}
	}
}

// checkBookList fails t unless b holds d's tools/list, equal to a fresh one.
func checkBookList(t *testing.T, b *toolBook, d dialect) {
	t.Helper()
	held, ok := b.lists[d]
	if !ok {
		t.Fatalf("no tools/list in the book for %+v", d)
	}
	got, _ := marshal(held)
	want, _ := marshal(b.listFor(d))
	if !bytes.Equal(got, want) {
		t.Errorf("%+v: the book's list differs from a fresh one", d)
	}
}
