package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAgentProfileDefaults: the agent profile changes the defaults it names
// and an explicit variable still wins.
func TestAgentProfileDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig([]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_MAX_REPLY_BYTES=100000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.maxReplyBytes != 100000 || cfg.yieldAfter != 50*time.Second || cfg.defaultTimeout != 50*time.Second ||
		cfg.keepHeadBytes != 16384 || cfg.capture.onError != (captureSpec{stdout: specAll, stderr: specAll}) {
		t.Errorf("agent profile: %+v", cfg)
	}
	compat, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if compat.maxReplyBytes != 8<<20 || compat.yieldAfter != 0 || compat.defaultTimeout != 60*time.Second ||
		compat.keepHeadBytes != 0 || compat.capture != defaultCapture || compat.killGrace != 5*time.Second {
		t.Errorf("compat profile: %+v", compat)
	}
}

// TestBadSettingsRefused: each bad value is refused naming the variable and
// what it accepts.
func TestBadSettingsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kv, mention string }{
		{"MCP_EXEC_PROFILE=fast", "compat or agent"},
		{"MCP_EXEC_MAX_REPLY_BYTES=100", "at least 1024"},
		{"MCP_EXEC_TIME_LIMIT=-1", "negative"},
		{"MCP_EXEC_YIELD_AFTER=soon", "seconds"},
		{"MCP_EXEC_KEEP_HEAD_BYTES=-5", "at least 0"},
		{"MCP_EXEC_CAPTURE={\"on_success\":\"x\"}", "capture spec"},
		{"MCP_EXEC_KEPT_SECONDS=NaN", "seconds"},
		{"MCP_EXEC_SANDBOX=yes", "off, read-only or roots"},
		{"MCP_EXEC_NETWORK=maybe", "on or off"},
		{"MCP_EXEC_RLIMITS=cpu=abc", "whole number"},
		{"MCP_EXEC_RLIMITS=cpu=1K", "whole number or unlimited"},
		{"MCP_EXEC_RLIMITS=files=10", "unknown resource"},
		{"MCP_EXEC_RLIMITS=nofile=10,nofile=20", "twice"},
		{"MCP_EXEC_RLIMITS=nofile", "name=value"},
		{"MCP_EXEC_RLIMITS=as=99999999999T", "whole number"},
		{"MCP_EXEC_USAGE=yes", "0 or 1"},
		{"MCP_EXEC_SANDBOX=roots", "MCP_EXEC_ROOTS is not set"},
	} {
		_, err := loadConfig([]string{tc.kv})
		name, _, _ := strings.Cut(tc.kv, "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %v; want an error naming %s and %q", tc.kv, err, name, tc.mention)
		}
	}
}

// TestRlimitsParse: sizes take binary suffixes, unlimited is RLIM_INFINITY,
// and the order given is kept.
func TestRlimitsParse(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg, err := loadConfig([]string{"MCP_EXEC_RLIMITS=cpu=60, as=4G,fsize=unlimited,stack=8M,nofile=4096"})
	if err != nil {
		t.Fatal(err)
	}
	want := []rlimit{
		{rlimitResources["cpu"].resource, 60},
		{rlimitResources["as"].resource, 4 << 30},
		{rlimitResources["fsize"].resource, rlimInfinity},
		{rlimitResources["stack"].resource, 8 << 20},
		{rlimitResources["nofile"].resource, 4096},
	}
	if !slices.Equal(cfg.rlimits, want) {
		t.Errorf("rlimits %v, want %v", cfg.rlimits, want)
	}
}

// TestUsageFollowsConfinement: usage is off in compat, on under the agent
// profile or any confinement, and MCP_EXEC_USAGE wins over both.
func TestUsageFollowsConfinement(t *testing.T) {
	onLinux(t)
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"MCP_EXEC_PROFILE=agent"}, true},
		{[]string{"MCP_EXEC_NETWORK=off"}, true},
		{[]string{"MCP_EXEC_RLIMITS=nofile=64"}, true},
		{[]string{"MCP_EXEC_SANDBOX=read-only", "MCP_EXEC_USAGE=0"}, false},
		{[]string{"MCP_EXEC_USAGE=1"}, true},
	} {
		cfg, err := loadConfig(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.usage != tc.want {
			t.Errorf("%v: usage %v, want %v", tc.env, cfg.usage, tc.want)
		}
	}
}
