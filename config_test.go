package main

import (
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
	} {
		_, err := loadConfig([]string{tc.kv})
		name, _, _ := strings.Cut(tc.kv, "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %v; want an error naming %s and %q", tc.kv, err, name, tc.mention)
		}
	}
}
