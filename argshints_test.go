package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// paramsNamed are params with those names, for the hint's tests.
func paramsNamed(names ...string) []param {
	ps := make([]param, len(names))
	for i, n := range names {
		ps[i] = param{name: n}
	}
	return ps
}

func TestNearMissHintNamesWhatAnAliasStandsFor(t *testing.T) {
	exec := paramsNamed("command", "cwd", "yield_after", "time_limit", "nowait")
	err := nearMissHint(refuseUnknown("execute", exec, map[string]json.RawMessage{"timeout": nil}))
	want := `unknown argument "timeout" for execute; did you mean yield_after (seconds before a running job is returned) or time_limit (seconds before it is killed)?`
	if !strings.Contains(err.Error(), want) || !errors.Is(err, errInvalid) {
		t.Fatalf("got %q, want it to contain %q and be invalid", err, want)
	}
}

func TestNearMissHintFindsATypoAndKeepsTheListWhenNothingIsNear(t *testing.T) {
	ps := paramsNamed("job_id", "signal", "timeout")
	for given, want := range map[string]string{
		"jobId":   "did you mean job_id (the job to act on)?",
		"signl":   "did you mean signal (the signal to send)?",
		"flavour": "(accepted: job_id, signal, timeout)",
	} {
		err := nearMissHint(refuseUnknown("kill", ps, map[string]json.RawMessage{given: nil}))
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %q, want %q in it", given, err, want)
		}
	}
}

func TestNearMissHintOffersTheClosestTypoFirst(t *testing.T) {
	// Both are near "abcdefgh"; the one edit away comes before the one
	// two edits away, though the tool lists it last.
	ps := paramsNamed("abcdefzz", "abcdefgz")
	err := nearMissHint(refuseUnknown("tool", ps, map[string]json.RawMessage{"abcdefgh": nil}))
	if !strings.Contains(err.Error(), "did you mean abcdefgz or abcdefzz?") {
		t.Errorf("got %q, want the closer name first", err)
	}
}

func TestAgentArgHintListsTheObjectFormsOfAStreamSpec(t *testing.T) {
	_, err := parseStreamSpec([]byte(`"tail"`))
	got := agentArgHint(err).Error()
	for _, form := range []string{`{"tail": N}`, `{"from": P`, `{"grep": RE2}`} {
		if !strings.Contains(got, form) {
			t.Errorf("%q lacks %s", got, form)
		}
	}
	if !strings.HasPrefix(got, `stream spec "tail" is not "none" or "all"`) {
		t.Errorf("%q: the 1.0 words must stay first", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"signl", "signal", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
