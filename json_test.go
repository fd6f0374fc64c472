package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
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

// TestQuotedAsEncodingJSON: appendQuoted escapes as encoding/json does
// (without HTML escaping), quotedLen counts exactly what it adds, and
// plainRun stops at the first byte escaped, wherever in an eight-byte word
// the escaped bytes, invalid UTF-8 and U+2028 fall.
func TestQuotedAsEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := []string{"", "a", "abcdefgh", "abcdefg\"", "\"abcdefgh", "ab\\cdefghij", "\x00\x1f\x7f ~",
		"éèà日本\u2028\u2029x", "\xff\xfe\xc3", "{\"job_id\":\"1\",\"state\":\"success\"}",
		"12345678\t12345678\n", "\xe2\x80", "tail\xe2\x80\xa8", "<>&", "\x1f\x20\x21\x22\x5b\x5c\x5d\x9f\xa0"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\"\\\n\x00\x1f\x7f\x80\xc3\xa9\xe2\x80\xa8 ")
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		cases = append(cases, string(b))
	}
	for _, in := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			t.Fatal(err)
		}
		inside := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
		inside = inside[1 : len(inside)-1]
		got := appendQuoted([]byte("x"), []byte(in))
		if !bytes.Equal(got[1:], inside) {
			t.Errorf("appendQuoted(%q) = %q, want %q", in, got[1:], inside)
		}
		if n := quotedLen([]byte(in)); n != len(inside) {
			t.Errorf("quotedLen(%q) = %d, want %d", in, n, len(inside))
		}
		plain := 0
		for plain < len(in) && in[plain] < 0x80 && in[plain] >= 0x20 && in[plain] != '"' && in[plain] != '\\' {
			plain++
		}
		if got := plainRun([]byte(in)); got != plain {
			t.Errorf("plainRun(%q) = %d, want %d", in, got, plain)
		}
	}
}
