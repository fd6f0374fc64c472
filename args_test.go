package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// wrongValue is, for each argument type, a JSON value of the wrong type.
var wrongValue = map[reflect.Type]string{
	reflect.TypeFor[string]():            `5`,
	reflect.TypeFor[bool]():              `"yes"`,
	reflect.TypeFor[seconds]():           `"5"`,
	reflect.TypeFor[jobID]():             `true`,
	reflect.TypeFor[map[string]string](): `["A=1"]`,
	reflect.TypeFor[[]string]():          `"echo"`,
	reflect.TypeFor[replyBytes]():        `"65536"`,
	reflect.TypeFor[[]jobID]():           `"1"`,
	reflect.TypeFor[streamSpec]():        `5`,
	reflect.TypeFor[capturePolicy]():     `5`,
	reflect.TypeFor[syscall.Signal]():    `true`,
	reflect.TypeFor[untilSpec]():         `"ready"`,
	reflect.TypeFor[ttySpec]():           `"yes"`,
	reflect.TypeFor[byteCount]():         `-1`,
	reflect.TypeFor[looseEnv]():          `["A=1"]`,
	reflect.TypeFor[argList]():           `[true]`,
}

// goodValue is, for each argument type, a valid JSON value.
var goodValue = map[reflect.Type]string{
	reflect.TypeFor[string]():            `"x"`,
	reflect.TypeFor[bool]():              `true`,
	reflect.TypeFor[seconds]():           `0`,
	reflect.TypeFor[jobID]():             `"x"`,
	reflect.TypeFor[map[string]string](): `{"A": "1"}`,
	reflect.TypeFor[[]string]():          `["echo", "x"]`,
	reflect.TypeFor[replyBytes]():        `65536`,
	reflect.TypeFor[[]jobID]():           `["x"]`,
	reflect.TypeFor[streamSpec]():        `"all"`,
	reflect.TypeFor[capturePolicy]():     `{"on_success": "all"}`,
	reflect.TypeFor[syscall.Signal]():    `"TERM"`,
	reflect.TypeFor[untilSpec]():         `{"pattern":"ready"}`,
	reflect.TypeFor[ttySpec]():           `true`,
	reflect.TypeFor[byteCount]():         `1024`,
	reflect.TypeFor[looseEnv]():          `{"A": "1", "not-a-name": "ignored"}`,
	reflect.TypeFor[argList]():           `["-n", 5]`,
}

// bind binds raw into a fresh args value of tool and returns it.
func bind(tool *toolSpec, raw map[string]json.RawMessage) (reflect.Value, error) {
	args := reflect.New(tool.argsType).Elem()
	return args, bindArgs(tool.name, tool.params, raw, args)
}

// TestBindArgs checks every argument of every tool: valid values bind, a
// wrong type is refused naming the argument, null and absence are the same,
// and an unknown argument is refused naming it and the accepted ones.
func TestBindArgs(t *testing.T) {
	t.Parallel()
	if len(jobTools) != 7 {
		t.Fatalf("%d tools, want 7", len(jobTools))
	}
	if len(goodValue) != len(argKinds) || len(wrongValue) != len(argKinds) {
		t.Fatalf("goodValue and wrongValue need one value per argument type (%d)", len(argKinds))
	}
	all := toolsFor(configOf(t, "MCP_EXEC_TOOLS=jobs,exec,shell")).list
	for i := range all {
		tool := &all[i]
		t.Run(tool.name, func(t *testing.T) {
			t.Parallel()
			good := map[string]json.RawMessage{}
			for _, p := range tool.params {
				good[p.name] = json.RawMessage(goodValue[p.typ])
			}
			args, err := bind(tool, good)
			if err != nil {
				t.Fatalf("bind(all valid) = %v", err)
			}
			for _, p := range tool.params {
				if args.Field(p.field).IsZero() && p.typ != reflect.TypeFor[seconds]() {
					t.Errorf("%s: a valid value left the field empty", p.name)
				}
				raw := maps.Clone(good)
				raw[p.name] = json.RawMessage(wrongValue[p.typ])
				_, err := bind(tool, raw)
				checkMentions(t, fmt.Sprintf("%s with %s=%s", tool.name, p.name, wrongValue[p.typ]), err, []string{"invalid", p.name})

				for _, absent := range []bool{false, true} {
					raw = maps.Clone(good)
					if absent {
						delete(raw, p.name)
					} else {
						raw[p.name] = json.RawMessage(`null`) // null means absent
					}
					args, err := bind(tool, raw)
					if p.required {
						checkMentions(t, fmt.Sprintf("%s without %s", tool.name, p.name), err, []string{p.name, "is required"})
					} else if err != nil || !args.Field(p.field).IsZero() {
						t.Errorf("%s without %s: %v; want the field left empty", tool.name, p.name, err)
					}
				}
			}
			raw := maps.Clone(good)
			raw["no_such_argument"] = json.RawMessage(`1`)
			_, err = bind(tool, raw)
			mention := []string{"invalid", `unknown argument "no_such_argument" for ` + tool.name, "accepted:"}
			for _, p := range tool.params {
				mention = append(mention, p.name)
			}
			checkMentions(t, tool.name+" with an unknown argument", err, mention)
		})
	}
	t.Run("values", func(t *testing.T) {
		t.Parallel()
		invalid := []struct {
			tool, arg, value string
			mention          []string
		}{
			{"wait", "job_ids", `[]`, []string{"non-empty"}},
			{"wait", "job_ids", `["1", true]`, []string{"job_ids"}},
			{"wait", "job_ids", `["1", 2.5]`, []string{"job_ids"}},
			{"wait", "timeout", `"soon"`, []string{"timeout"}},
			{"status", "job_id", `1e3`, []string{"job_id"}},
			{"execute", "env", `{"A": 1}`, []string{"env", "A"}},
			{"execute", "env", `{"": "x"}`, []string{"env"}},
			{"execute", "env", `{"A=B": "x"}`, []string{"env", "A=B"}},
			{"execute", "env", `{"A": "x\u0000y"}`, []string{"env"}},
			{"kill", "signal", `"NOPE"`, []string{"unknown signal"}},
			{"output", "stdout", `{"tail": -1.5}`, []string{"stdout", "tail"}},
		}
		for _, tc := range invalid {
			tool := jobToolsByName[tc.tool]
			raw := requiredOnly(tool)
			raw[tc.arg] = json.RawMessage(tc.value)
			_, err := bind(tool, raw)
			checkMentions(t, fmt.Sprintf("%s %s=%s", tc.tool, tc.arg, tc.value), err, append([]string{"invalid"}, tc.mention...))
		}
	})
}

// requiredOnly is a valid set of tool's required arguments.
func requiredOnly(tool *toolSpec) map[string]json.RawMessage {
	raw := map[string]json.RawMessage{}
	for _, p := range tool.params {
		if p.required {
			raw[p.name] = json.RawMessage(goodValue[p.typ])
		}
	}
	return raw
}

// TestIntegerJobIDsAreTheirDecimalStrings: job_id 7 means "7", for job_id
// and for the items of job_ids.
func TestIntegerJobIDsAreTheirDecimalStrings(t *testing.T) {
	t.Parallel()
	args, err := bind(jobToolsByName["status"], map[string]json.RawMessage{"job_id": json.RawMessage(`7`)})
	if err != nil || args.Interface().(statusArgs).JobID != "7" {
		t.Errorf("status job_id 7: %v, %v", args, err)
	}
	args, err = bind(jobToolsByName["wait"], map[string]json.RawMessage{"job_ids": json.RawMessage(`[12345678901234567890, "x", -3]`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := args.Interface().(waitArgs).JobIDs; !reflect.DeepEqual(got, []jobID{"12345678901234567890", "x", "-3"}) {
		t.Errorf("wait job_ids = %q", got)
	}
}

// TestUnknownArgumentsAllNamed: several unknown arguments are named
// together, sorted, so the message does not depend on map order.
func TestUnknownArgumentsAllNamed(t *testing.T) {
	t.Parallel()
	raw := requiredOnly(jobToolsByName["execute"])
	raw["timeout"], raw["b"] = json.RawMessage(`1`), json.RawMessage(`null`)
	_, err := bind(jobToolsByName["execute"], raw)
	want := `unknown arguments "b", "timeout" for execute (accepted: command, argv, cwd, env, stdin, close_stdin, nowait, capture, time_limit, yield_after, until, tty, max_reply_bytes)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want it to contain %s", err, want)
	}
	_, err = bind(jobToolsByName["list_jobs"], map[string]json.RawMessage{"x": json.RawMessage(`1`)})
	if err == nil || !strings.Contains(err.Error(), `unknown argument "x" for list_jobs (accepted: none)`) {
		t.Errorf("list_jobs with x: %v", err)
	}
}

// TestUnknownArgumentMessageStaysShort: a huge unknown argument name is
// clipped in the refusal, which must not grow with what the caller sent.
func TestUnknownArgumentMessageStaysShort(t *testing.T) {
	t.Parallel()
	raw := requiredOnly(jobToolsByName["status"])
	raw[strings.Repeat("x", 100000)] = json.RawMessage(`1`)
	_, err := bind(jobToolsByName["status"], raw)
	if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), "unknown argument") {
		t.Errorf("refusal of %d bytes: %.200v", len(fmt.Sprint(err)), err)
	}
}

// TestArgListRefusesNull: null is not an argument, not even an empty one.
func TestArgListRefusesNull(t *testing.T) {
	if _, err := decodeArgList(json.RawMessage(`["a", null]`)); err == nil {
		t.Error("[\"a\", null] was taken as arguments")
	}
}
