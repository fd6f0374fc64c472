package main

import (
	"encoding/json"
	"testing"
)

// metaOf is a request's _meta decoded as the session decodes it.
func metaOf(t *testing.T, js string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceFromMetaTakesOnlyAValidTraceparent(t *testing.T) {
	for _, tc := range []struct {
		meta   string
		wantID string
	}{
		{`{"traceparent":"` + validParent + `"}`, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{`{}`, ""},
		{`{"traceparent":42}`, ""},
		{`{"traceparent":"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, ""}, // another version
		{`{"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}`, ""}, // uppercase
		{`{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, ""}, // zero trace id
		{`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}`, ""}, // zero parent id
		{`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"}`, ""},
		{`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n"}`, ""},
	} {
		if got := traceFromMeta(metaOf(t, tc.meta)).id; got != tc.wantID {
			t.Errorf("%s: trace id %q, want %q", tc.meta, got, tc.wantID)
		}
	}
	if got := traceFromMeta(nil).id; got != "" {
		t.Errorf("no _meta: trace id %q", got)
	}
}

func TestTraceVariablesCarryStateOrUnsetAForeignOne(t *testing.T) {
	add, unset := traceFromMeta(metaOf(t, `{"traceparent":"`+validParent+`","tracestate":"congo=t61rcWkgMzE"}`)).variables(nil)
	if add[envTraceparent] != validParent || add[envTracestate] != "congo=t61rcWkgMzE" || len(unset) != 0 {
		t.Errorf("add %v, unset %v", add, unset)
	}
	add, unset = traceFromMeta(metaOf(t, `{"traceparent":"`+validParent+`","tracestate":"a=\u0001"}`)).variables(nil)
	if _, ok := add[envTracestate]; ok || len(unset) != 1 || unset[0] != envTracestate {
		t.Errorf("an invalid tracestate: add %v, unset %v; want it left out and the server's removed", add, unset)
	}
	add, _ = traceFromMeta(metaOf(t, `{"traceparent":"`+validParent+`"}`)).variables(map[string]bool{envTraceparent: true})
	if _, ok := add[envTraceparent]; ok {
		t.Errorf("a denied TRACEPARENT was added: %v", add)
	}
	if add, unset := (jobTrace{}).variables(nil); add != nil || unset != nil {
		t.Errorf("no trace: add %v, unset %v", add, unset)
	}
}
