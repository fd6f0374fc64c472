package main

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
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
		{"MCP_EXEC_JOB_LOG=stdout", "JSON-RPC only"},
		{"MCP_EXEC_JOB_LOG=/dev/stdout", "JSON-RPC only"},
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

// TestUsageFollowsConfinement: usage is off by default, on with any
// confinement outside the agent profile, and MCP_EXEC_USAGE wins over both.
func TestUsageFollowsConfinement(t *testing.T) {
	onLinux(t)
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"MCP_EXEC_PROFILE=agent"}, false},
		{[]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_NETWORK=off"}, false},
		{[]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_SANDBOX=read-only", "MCP_EXEC_USAGE=1"}, true},
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

// TestDerivedDefaults pins each rule of derivedDefaults: given these
// variables, that value; a given MCP_EXEC_* variable wins over its rule.
func TestDerivedDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	usage := func(c *config) any { return c.usage }
	maxJobs := func(c *config) any { return c.maxJobs }
	maxTimeLimit := func(c *config) any { return c.maxTimeLimit }
	execCwd := func(c *config) any { return c.execCwd }
	jobTTL := func(c *config) any { return c.jobTTL }
	maxFinished := func(c *config) any { return c.maxFinished }
	shell := func(c *config) any { return c.shellSpelled + " " + c.shell }
	shellFound := func(c *config) any { return c.shellSpelled + " " + strconv.FormatBool(filepath.IsAbs(c.shell)) }
	cases := []struct {
		setting string // the rule's setting
		env     []string
		got     func(c *config) any
		want    any
	}{
		{"MCP_EXEC_USAGE", nil, usage, false},
		{"MCP_EXEC_USAGE", []string{"MCP_EXEC_NETWORK=off"}, usage, true},
		{"MCP_EXEC_USAGE", []string{"MCP_EXEC_SANDBOX=read-only"}, usage, true},
		{"MCP_EXEC_USAGE", []string{"MCP_EXEC_NETWORK=off", "MCP_EXEC_USAGE=0"}, usage, false},
		{"MCP_EXEC_USAGE", []string{"MCP_EXEC_NETWORK=off", "MCP_EXEC_PROFILE=agent"}, usage, false},
		{"MCP_EXEC_MAX_JOBS", []string{"MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=3"}, maxJobs, 3},
		{"MCP_EXEC_MAX_JOBS", []string{"MAX_CONCURRENT_EXECS=3"}, maxJobs, 0},
		{"MCP_EXEC_MAX_JOBS", []string{"MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=3", "MCP_EXEC_MAX_JOBS=5"}, maxJobs, 5},
		{"MCP_EXEC_MAX_TIME_LIMIT", []string{"MCP_EXEC_TOOLS=jobs,exec", "MAX_TIMEOUT_SECONDS=90"}, maxTimeLimit, 90 * time.Second},
		{"MCP_EXEC_MAX_TIME_LIMIT", []string{"MAX_TIMEOUT_SECONDS=90"}, maxTimeLimit, time.Duration(0)},
		{"MCP_EXEC_MAX_TIME_LIMIT", []string{"MCP_EXEC_TOOLS=exec", "MAX_TIMEOUT_SECONDS=90", "MCP_EXEC_MAX_TIME_LIMIT=30"}, maxTimeLimit, 30 * time.Second},
		{"the exec tool's cwd", []string{"MCP_EXEC_TOOLS=exec", "DEFAULT_CWD=" + dir}, execCwd, resolved},
		{"the exec tool's cwd", []string{"DEFAULT_CWD=" + dir}, execCwd, ""},
		{"MCP_EXEC_JOB_TTL", nil, jobTTL, time.Duration(0)},
		{"MCP_EXEC_JOB_TTL", []string{"MCP_EXEC_TOOLS=jobs,shell"}, jobTTL, time.Hour},
		{"MCP_EXEC_JOB_TTL", []string{"MCP_EXEC_TOOLS=shell", "MCP_EXEC_JOB_TTL=5"}, jobTTL, 5 * time.Second},
		{"MCP_EXEC_MAX_FINISHED", nil, maxFinished, 0},
		{"MCP_EXEC_MAX_FINISHED", []string{"MCP_EXEC_TOOLS=shell"}, maxFinished, 100},
		{"MCP_EXEC_MAX_FINISHED", []string{"MCP_EXEC_TOOLS=shell", "MCP_EXEC_MAX_FINISHED=0"}, maxFinished, 0},
		{"SHELL", nil, shell, "/bin/sh /bin/sh"},
		{"SHELL", []string{"SHELL=/no/such/zsh"}, shell, "/no/such/zsh /no/such/zsh"},
		{"SHELL", []string{"SHELL=sh", "PATH=" + dir + ":/bin:/usr/bin"}, shellFound, "sh true"},
	}
	pinned := map[string]bool{}
	for _, tc := range cases {
		pinned[tc.setting] = true
		c, err := loadConfig(tc.env)
		if err != nil {
			t.Errorf("%s %v: %v", tc.setting, tc.env, err)
			continue
		}
		if got := tc.got(c); got != tc.want {
			t.Errorf("%s %v: %v, want %v", tc.setting, tc.env, got, tc.want)
		}
	}
	for _, rule := range derivedDefaults {
		if !pinned[rule.setting] {
			t.Errorf("no case pins the rule for %s", rule.setting)
		}
	}
}

// TestDerivedDefaultsTable: every rule is documented, and a rule's stated
// default is its variable's own.
func TestDerivedDefaultsTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, rule := range derivedDefaults {
		if rule.setting == "" || rule.def == "" || rule.changedBy == "" || rule.apply == nil {
			t.Errorf("rule %+v is not fully described", rule)
		}
		if seen[rule.setting] {
			t.Errorf("two rules decide %s", rule.setting)
		}
		seen[rule.setting] = true
		if v, ok := findConfigVar(rule.setting); ok && !strings.HasPrefix(rule.def, v.def) {
			t.Errorf("rule for %s says the default is %q; the variable's is %q", rule.setting, rule.def, v.def)
		}
	}
}

// TestSettingsCheckedInOrder: a bad HTTP setting is reported before a bad
// gateway variable, and the checks between settings see what the rules
// set.
func TestSettingsCheckedInOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     []string
		mention string
	}{
		{[]string{"MCP_EXEC_LISTEN=0.0.0.0:1", "MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=many"}, "MCP_EXEC_LISTEN=0.0.0.0:1 is reachable"},
		{[]string{"MCP_EXEC_TOOLS=exec", "MAX_CONCURRENT_EXECS=many"}, `MAX_CONCURRENT_EXECS="many" (the exec-mcp gateway's setting, read for MCP_EXEC_TOOLS=exec): must be a whole number, 0 or more`},
		{[]string{"MCP_EXEC_TOOLS=exec", "MAX_TIMEOUT_SECONDS=5", "MCP_EXEC_TIME_LIMIT=10"}, "MCP_EXEC_TIME_LIMIT (10 s) is longer than MCP_EXEC_MAX_TIME_LIMIT (5 s) allows"},
	} {
		if _, err := loadConfig(tc.env); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.mention)
		}
	}
}

// cloneConfig is a deep copy of c. It fails the test when config has a
// field of a reference kind it does not copy, so a new one is not missed.
func cloneConfig(t *testing.T, c *config) config {
	t.Helper()
	copied := map[string]bool{"baseEnv": true, "allow": true, "roots": true, "envDeny": true, "launcher": true,
		"rlimits": true, "token": true, "metricsToken": true, "allowedOrigins": true, "toolSets": true, "httpHosts": true, "highlight": true}
	ct := reflect.TypeFor[config]()
	for i := range ct.NumField() {
		switch f := ct.Field(i); f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Func, reflect.Chan:
			if !copied[f.Name] {
				t.Fatalf("cloneConfig does not copy config.%s", f.Name)
			}
		}
	}
	d := *c
	d.baseEnv, d.allow, d.roots = slices.Clone(c.baseEnv), slices.Clone(c.allow), slices.Clone(c.roots)
	d.envDeny, d.launcher, d.rlimits = maps.Clone(c.envDeny), slices.Clone(c.launcher), slices.Clone(c.rlimits)
	d.token, d.metricsToken = slices.Clone(c.token), slices.Clone(c.metricsToken)
	d.allowedOrigins, d.toolSets, d.httpHosts = slices.Clone(c.allowedOrigins), slices.Clone(c.toolSets), slices.Clone(c.httpHosts)
	if c.highlight != nil { // its pattern is never written: the copy may share it
		h := *c.highlight
		d.highlight = &h
	}
	return d
}

// TestWithUsageIsACopy: the view reports usage and its source is unchanged.
func TestWithUsageIsACopy(t *testing.T) {
	t.Parallel()
	c, err := loadConfig([]string{"MCP_EXEC_ENV_DENY=SECRET", "MCP_EXEC_ALLOW=echo"})
	if err != nil {
		t.Fatal(err)
	}
	before := cloneConfig(t, c)
	view := c.withUsage()
	if view == c || !view.usage || c.usage {
		t.Errorf("view %p usage %v, source %p usage %v", view, view.usage, c, c.usage)
	}
	if !reflect.DeepEqual(before, *c) {
		t.Errorf("withUsage changed its source: %+v, was %+v", *c, before)
	}
	view.usage = before.usage
	if !reflect.DeepEqual(before, *view) {
		t.Errorf("the view differs in more than usage: %+v", *view)
	}
}

// TestSessionLeavesConfigUnchanged: a session that lists the tools and runs
// jobs through every set leaves the configuration it was given as loaded.
func TestSessionLeavesConfigUnchanged(t *testing.T) {
	onLinux(t)
	t.Parallel()
	cfg := configOf(t, "MCP_EXEC_TOOLS=jobs,exec,shell", "MCP_EXEC_ROOTS="+t.TempDir(), "MCP_EXEC_ENV_DENY=SECRET",
		"MCP_EXEC_MAX_JOBS=4", "MCP_EXEC_JOB_EVENTS=1")
	before := cloneConfig(t, cfg)
	cl := newRPCClient(t, cfg)
	cl.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	cl.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if reply := cl.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); reply["result"] == nil {
		t.Fatalf("tools/list: %v", reply)
	}
	calls := []struct {
		name    string
		args    any
		refused bool
	}{
		{"execute", map[string]any{"command": "echo one"}, false},
		{"exec", map[string]any{"command": "echo two"}, false},
		{"sh_run", map[string]any{"command": "echo", "args": []string{"three"}}, false},
		{"execute", map[string]any{"command": "echo four", "env": map[string]string{"SECRET": "x"}}, true},
		{"list_jobs", map[string]any{}, false},
	}
	for i, c := range calls {
		if _, text, isErr := cl.shellTool(2+i, c.name, c.args); isErr != c.refused {
			t.Errorf("%s: %s (isError %v)", c.name, text, isErr)
		}
	}
	if !reflect.DeepEqual(before, *cfg) {
		t.Errorf("the session changed its configuration:\n%+v\nwas\n%+v", *cfg, before)
	}
}

// findConfigVar finds a variable of configVars by name.
func findConfigVar(name string) (configVar, bool) {
	for _, v := range configVars {
		if v.name == name {
			return v, true
		}
	}
	return configVar{}, false
}

// TestInputWaitSetting: MCP_EXEC_INPUT_WAIT_MS is milliseconds within its
// bounds, and unset it keeps the one second a 1.0 client sees, in the
// config and in the value the looks read before main sets it.
func TestInputWaitSetting(t *testing.T) {
	t.Parallel()
	if inputWaitDuration != time.Second {
		t.Errorf("the looks' wait before main sets it is %v, want 1s", inputWaitDuration)
	}
	for _, tc := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, time.Second},
		{[]string{"MCP_EXEC_PROFILE=agent"}, time.Second},
		{[]string{"MCP_EXEC_INPUT_WAIT_MS="}, time.Second},
		{[]string{"MCP_EXEC_INPUT_WAIT_MS=200"}, 200 * time.Millisecond},
		{[]string{"MCP_EXEC_INPUT_WAIT_MS=10"}, 10 * time.Millisecond},
		{[]string{"MCP_EXEC_INPUT_WAIT_MS=60000"}, time.Minute},
	} {
		cfg, err := loadConfig(tc.env)
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if cfg.inputWait != tc.want {
			t.Errorf("%v: input wait %v, want %v", tc.env, cfg.inputWait, tc.want)
		}
	}
	for _, v := range []string{"9", "60001", "0", "-5", "1.5", "1s", "fast"} {
		_, err := loadConfig([]string{"MCP_EXEC_INPUT_WAIT_MS=" + v})
		if err == nil || !strings.Contains(err.Error(), "MCP_EXEC_INPUT_WAIT_MS") || !strings.Contains(err.Error(), "milliseconds from 10 to 60000") {
			t.Errorf("MCP_EXEC_INPUT_WAIT_MS=%s: %v; want a refusal naming the range", v, err)
		}
	}
}

// TestMistypedSettingNamesTheNearest: a setting's name with a typo is
// refused in one line that names the setting meant before the list of
// all of them (1.0's message).
func TestMistypedSettingNamesTheNearest(t *testing.T) {
	for given, want := range map[string]string{"MCP_EXEC_PROFIL": "MCP_EXEC_PROFILE", "MCP_EXEC_MAX_YEILD": "MCP_EXEC_MAX_YIELD", "MCP_EXEC_MASKS": "MCP_EXEC_MASK"} {
		_, err := loadConfig([]string{given + "=1"})
		if err == nil || !strings.Contains(err.Error(), "did you mean "+want) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "MCP_EXEC_DEFAULT_TIMEOUT") {
			t.Errorf("%s: %v", given, err)
		}
	}
	if _, err := loadConfig([]string{"MCP_EXEC_ZZZZZZZZZZZZZZZZ=1"}); err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "the valid ones are") {
		t.Errorf("nothing near: %v", err)
	}
}
