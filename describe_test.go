package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// toolsByName is the tools/list of cfg for a structured client, by name.
func toolsByName(cfg *config) map[string]map[string]any {
	byName := map[string]map[string]any{}
	for _, tool := range toolListFor(cfg, true, false)["tools"].([]map[string]any) {
		byName[tool["name"].(string)] = tool
	}
	return byName
}

// TestAgentToolListIsPlain: under the agent profile no schema nests
// alternatives, every output schema is the open object, and execute
// requires neither command nor argv (either will do).
func TestAgentToolListIsPlain(t *testing.T) {
	cfg := configOf(t, "MCP_EXEC_PROFILE=agent")
	b, err := marshal(toolListFor(cfg, true, false))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "anyOf") {
		t.Errorf("agent tools/list nests alternatives: %s", b)
	}
	for _, off := range []string{"0", "50"} {
		ins := instructionsFor(configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_YIELD_AFTER="+off))
		if m := regexp.MustCompile(`\{[a-z_]+\}`).FindString(ins); m != "" {
			t.Errorf("agent instructions leave %s unfilled: %s", m, ins)
		}
	}
	for name, tool := range toolsByName(cfg) {
		if out, ok := tool["outputSchema"]; ok && !reflect.DeepEqual(out, openObjectSchema()) {
			t.Errorf("%s: outputSchema %v, want the open object", name, out)
		}
		text, _ := marshal(tool)
		for _, p := range []string{"{budget}", "{window}", "{retained}", "{yield}", "{wait}", "{kept}", "{block}", "{carry}", "{capture}", "{grace}", "{time_limit}", "{cwd_default}"} {
			if strings.Contains(string(text), p) {
				t.Errorf("%s: placeholder %s left unfilled", name, p)
			}
		}
	}
	if req, ok := toolsByName(cfg)["execute"]["inputSchema"].(map[string]any)["required"]; ok {
		t.Errorf("execute requires %v under the agent profile; command or argv will do", req)
	}
	if req := toolsByName(testConfig())["execute"]["inputSchema"].(map[string]any)["required"]; !reflect.DeepEqual(req, []string{"command"}) {
		t.Errorf("execute requires %v without the profile, want 1.0's [command]", req)
	}
}

// TestAgentTextsStateTheValuesInForce: the agent texts carry the settings,
// not the defaults they were written with.
func TestAgentTextsStateTheValuesInForce(t *testing.T) {
	cfg := configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_YIELD_AFTER=20", "MCP_EXEC_MAX_REPLY_BYTES=32768", "MCP_EXEC_KEEP_HEAD_BYTES=4096")
	execute := toolsByName(cfg)["execute"]["description"].(string)
	for _, want := range []string{"for 20 s", "over 32 KiB", "first 4 KiB"} {
		if !strings.Contains(execute, want) {
			t.Errorf("execute's description lacks %q: %s", want, execute)
		}
	}
	off := configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_YIELD_AFTER=0", "MCP_EXEC_KEEP_HEAD_BYTES=0")
	d := toolsByName(off)["execute"]["description"].(string)
	if !strings.Contains(d, "Blocks until it exits;") || !strings.Contains(d, "keeps its last 1 MiB.") {
		t.Errorf("with yield_after and head retention off, execute's description says %s", d)
	}
}

// TestCarryOverSentence: under the agent profile execute's description and
// the instructions say what carries over between calls; with the directory
// kept they say so, and without the profile 1.0's texts stay unless the
// directory is kept.
func TestCarryOverSentence(t *testing.T) {
	description := func(cfg *config) string { return toolsByName(cfg)["execute"]["description"].(string) }
	agent := configOf(t, "MCP_EXEC_PROFILE=agent", "MCP_EXEC_KEEP_CWD=0")
	for _, text := range []string{description(agent), instructionsFor(agent)} {
		if !strings.Contains(text, "nothing carries over (cd, variables)") {
			t.Errorf("agent text does not say nothing carries over: %s", text)
		}
	}
	kept := configOf(t, "MCP_EXEC_PROFILE=agent") // the profile keeps the directory
	for _, text := range []string{description(kept), instructionsFor(kept)} {
		if !strings.Contains(text, "variables and functions never carry over; the directory does") {
			t.Errorf("with the directory kept, agent text says: %s", text)
		}
	}
	if d := description(testConfig()); strings.Contains(d, "new shell") {
		t.Errorf("1.0's execute description changed: %s", d)
	}
	compatKept := testConfig()
	compatKept.keepCwd = true
	if d := description(compatKept); !strings.Contains(d, "the directory does") {
		t.Errorf("with the directory kept, execute's description does not say so: %s", d)
	}
}

// TestPlainSchema: alternatives become their types, also inside an array's
// items, and an object's properties are left to its description.
func TestPlainSchema(t *testing.T) {
	for _, c := range []struct {
		in, want map[string]any
	}{
		{streamSchema(), map[string]any{"type": []string{"string", "object"}}},
		{untilSchema(), map[string]any{"type": "object"}},
		{captureSchema(), map[string]any{"type": "object"}},
		{jobIDSchema(), map[string]any{"type": []string{"string", "integer"}}},
		{map[string]any{"type": "array", "items": jobIDSchema(), "minItems": 1},
			map[string]any{"type": "array", "items": map[string]any{"type": []string{"string", "integer"}}, "minItems": 1}},
		{envSchema(), envSchema()},
	} {
		if got := plainSchema(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("plainSchema(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestWithAgentTextsRefusesStrayDocs: an agent doc for an argument the tool
// does not take is a programming error, caught when the table is built.
func TestWithAgentTextsRefusesStrayDocs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("a doc for no argument was accepted")
		}
	}()
	tools := []toolSpec{{name: "t", docs: map[string]string{"a": "A."}}}
	withAgentTexts(tools, map[string]toolWords{"t": {docs: map[string]string{"b": "B."}}})
}
