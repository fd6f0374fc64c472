package main

import (
	"encoding/json"
	"math"
	"testing"
)

func TestParseInteger(t *testing.T) {
	t.Parallel()
	valid := []struct {
		in   string
		want int64
	}{
		{`0`, 0}, {`-0`, 0}, {`7`, 7}, {`-5`, -5}, {`1.0`, 1}, {`1e3`, 1000},
		{`9223372036854775807`, math.MaxInt64},
		{`12345678901234567890`, math.MaxInt64},
		{`-12345678901234567890`, math.MinInt64},
		{`1e400`, math.MaxInt64},
		{`-1e400`, math.MinInt64},
	}
	for _, tc := range valid {
		got, err := parseInteger(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseInteger(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`1.5`, `-0.1`, `1e-3`, `null`, `true`, `"x"`, `[]`, `{}`, `" 3"`} {
		_, err := parseInteger(json.RawMessage(in))
		checkMentions(t, "parseInteger("+in+")", err, []string{"integer", in})
	}
}

// TestIntegerIDAfterRegexpRemoval pins the hand-written id check to the
// grammar the regular expression it replaced accepted: ^-?(0|[1-9][0-9]*)$.
func TestIntegerIDAfterRegexpRemoval(t *testing.T) {
	for id, want := range map[string]bool{
		"0": true, "-0": true, "7": true, "-12": true, "9007199254740993": true,
		"123456789012345678901234567890": true,
		"":                               false, "-": false, "01": false, "-01": false, "+1": false, "1.0": false,
		"1e3": false, " 1": false, "1 ": false, "--1": false, "null": false, `"1"`: false,
	} {
		if got := integerID([]byte(id)); got != want {
			t.Errorf("integerID(%q) = %v, want %v", id, got, want)
		}
	}
}
