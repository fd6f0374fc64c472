package main

import (
	"encoding/json"
	"math"
	"syscall"
	"testing"
)

func TestParseStreamSpec(t *testing.T) {
	t.Parallel()
	valid := []struct {
		in   string
		want streamSpec
	}{
		{`null`, streamSpec{}},
		{`"none"`, streamSpec{}},
		{`"all"`, specAll},
		{`{"tail": 3}`, streamSpec{kind: streamTail, tail: 3}},
		{`{"tail": 0}`, streamSpec{kind: streamTail, tail: 0}},
		{`{"from": 5}`, streamSpec{kind: streamRange, from: 5, length: -1}},
		{`{"from": 5, "length": 10}`, streamSpec{kind: streamRange, from: 5, length: 10}},
		{`{"from": 5, "length": 0}`, streamSpec{kind: streamRange, from: 5, length: 0}},
		{`{"from": 5, "length": -2}`, streamSpec{kind: streamRange, from: 5, length: 0}}, // negative length: empty data
		{`{"from": 5, "length": null}`, streamSpec{kind: streamRange, from: 5, length: -1}},
		{`{"from": -3}`, streamSpec{kind: streamRange, from: -3, length: -1}}, // counts as 0 at read time
		{`{"from": 0, "unaligned": true}`, streamSpec{kind: streamRange, length: -1, unaligned: true}},
		{`{"from": 0, "unaligned": false}`, streamSpec{kind: streamRange, length: -1}},
		{`{"from": 0, "unaligned": null}`, streamSpec{kind: streamRange, length: -1}},
		{`{"from": 2.0}`, streamSpec{kind: streamRange, from: 2, length: -1}},
		{`{"from": 1e30}`, streamSpec{kind: streamRange, from: math.MaxInt64, length: -1}},
		{`{"from": 9223372036854775807}`, streamSpec{kind: streamRange, from: math.MaxInt64, length: -1}},
	}
	for _, tc := range valid {
		got, err := parseStreamSpec(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseStreamSpec(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	invalid := []invalidCase{
		{`"ALL"`, []string{"ALL"}},
		{`"stdout"`, []string{"stdout"}},
		{`""`, []string{`""`}},
		{`5`, []string{"stream spec", "5"}},
		{`true`, []string{"stream spec", "true"}},
		{`["all"]`, []string{"stream spec"}},
		{`{}`, []string{"tail", "from"}},
		{`{"tail": 1, "from": 2}`, []string{"tail", "range"}},
		{`{"tail": 1.5}`, []string{"tail", "integer", "1.5"}},
		{`{"tail": "x"}`, []string{"tail", "integer"}},
		{`{"tail": null}`, []string{"tail", "integer"}},
		{`{"tail": [1]}`, []string{"tail", "integer"}},
		{`{"from": "x"}`, []string{"from", "integer"}},
		{`{"from": 1.5}`, []string{"from", "integer", "1.5"}},
		{`{"from": null}`, []string{"from", "integer"}},
		{`{"from": true}`, []string{"from", "integer"}},
		{`{"length": 3}`, []string{"from"}},
		{`{"from": 0, "length": "x"}`, []string{"length", "integer"}},
		{`{"from": 0, "length": 2.5}`, []string{"length", "integer"}},
		{`{"from": 0, "unaligned": "yes"}`, []string{"unaligned", "yes"}},
		{`{"from": 0, "unaligned": 1}`, []string{"unaligned"}},
		{`{"from": 0, "bogus": 1}`, []string{"bogus"}},
		{`{"Tail": 3}`, []string{"Tail"}},
		{`{"from": 0, "from": 1}`, []string{"from"}},
	}
	for _, tc := range invalid {
		_, err := parseStreamSpec(json.RawMessage(tc.in))
		checkMentions(t, "parseStreamSpec("+tc.in+")", err, tc.mention)
	}
}

// TestQuotedNumbersAcceptedAsIntegers: wire-1.0 says a bad argument type is
// "invalid", and the published schema types tail/from/length as integers, but
// parseInteger decodes into json.Number, which also takes a JSON string
// holding a number: {"tail": "3"} is served as {"tail": 3}.
func TestQuotedNumbersAcceptedAsIntegers(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"3"`, `"-1"`, `"1e2"`} {
		if n, err := parseInteger(json.RawMessage(in)); err == nil {
			t.Errorf("parseInteger(%s) = %d, nil; want an error: a string is not an integer", in, n)
		}
	}
	for _, in := range []string{`{"tail": "3"}`, `{"from": "0"}`, `{"from": 0, "length": "4"}`} {
		if s, err := parseStreamSpec(json.RawMessage(in)); err == nil {
			t.Errorf("parseStreamSpec(%s) = %+v, nil; want an error naming the quoted number", in, s)
		}
	}
}

func TestParseCaptureSpec(t *testing.T) {
	t.Parallel()
	tail2 := streamSpec{kind: streamTail, tail: 2}
	valid := []struct {
		in   string
		want captureSpec
	}{
		{`"stdout"`, captureSpec{stdout: specAll}},
		{`"stderr"`, captureSpec{stderr: specAll}},
		{`"all"`, captureSpec{stdout: specAll, stderr: specAll}},
		{`"none"`, captureSpec{}},
		{`{}`, captureSpec{}},
		{`{"stdout": "all"}`, captureSpec{stdout: specAll}},
		{`{"stderr": {"tail": 2}}`, captureSpec{stderr: tail2}},
		{`{"stdout": null, "stderr": "all"}`, captureSpec{stderr: specAll}},
		{`{"stdout": {"tail": 2}, "stderr": {"from": 0}}`, captureSpec{stdout: tail2, stderr: streamSpec{kind: streamRange, length: -1}}},
	}
	for _, tc := range valid {
		got, err := parseCaptureSpec(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseCaptureSpec(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	invalid := []invalidCase{
		{`"both"`, []string{"both"}},
		{`"STDOUT"`, []string{"STDOUT"}},
		{`5`, []string{"capture spec", "5"}},
		{`["stdout"]`, []string{"capture spec"}},
		{`{"stdout": "bogus"}`, []string{"stdout", "bogus"}},
		{`{"stdout": "stdout"}`, []string{"stdout"}},
		{`{"stderr": {"tail": "x"}}`, []string{"stderr", "tail"}},
		{`{"stdin": "all"}`, []string{"stdin"}},
		{`{"Stdout": "all"}`, []string{"Stdout"}},
	}
	for _, tc := range invalid {
		_, err := parseCaptureSpec(json.RawMessage(tc.in))
		checkMentions(t, "parseCaptureSpec("+tc.in+")", err, tc.mention)
	}
}

func TestParseCapturePolicy(t *testing.T) {
	t.Parallel()
	all := captureSpec{stdout: specAll, stderr: specAll}
	valid := []struct {
		in   string
		want capturePolicy
	}{
		{`{}`, defaultCapture},
		{`{"on_success": "all"}`, capturePolicy{onSuccess: all, onError: captureStderr}},
		{`{"on_error": "none"}`, capturePolicy{onSuccess: captureStdout}},
		{`{"on_success": null}`, defaultCapture},
		{`{"on_success": "stderr", "on_error": "stdout"}`, capturePolicy{onSuccess: captureStderr, onError: captureStdout}},
		{`{"on_error": {"stderr": {"tail": 1}}}`, capturePolicy{onSuccess: captureStdout, onError: captureSpec{stderr: streamSpec{kind: streamTail, tail: 1}}}},
		{`"all"`, capturePolicy{onSuccess: all, onError: all}}, // a bare capture spec covers both outcomes
	}
	for _, tc := range valid {
		got, err := parseCapturePolicy(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseCapturePolicy(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	invalid := []invalidCase{
		{`{"on_success": "bogus"}`, []string{"on_success", "bogus"}},
		{`{"on_error": 5}`, []string{"on_error", "5"}},
		{`{"on_succes": "all"}`, []string{"on_succes"}},
		{`{"stdout": "all"}`, []string{"stdout"}},
		{`5`, []string{"capture spec", "5"}},
		{`"bogus"`, []string{"bogus"}},
		{`[]`, []string{"capture spec"}},
	}
	for _, tc := range invalid {
		_, err := parseCapturePolicy(json.RawMessage(tc.in))
		checkMentions(t, "parseCapturePolicy("+tc.in+")", err, tc.mention)
	}
}

func TestParseSignal(t *testing.T) {
	t.Parallel()
	valid := []struct {
		in   string
		want syscall.Signal
	}{
		{`"TERM"`, syscall.SIGTERM}, {`"SIGTERM"`, syscall.SIGTERM}, {`"term"`, syscall.SIGTERM},
		{`"KILL"`, syscall.SIGKILL}, {`"SIGKILL"`, syscall.SIGKILL}, {`"sigkill"`, syscall.SIGKILL},
		{`"9"`, syscall.SIGKILL}, {`"15"`, syscall.SIGTERM}, {`" KILL "`, syscall.SIGKILL},
		{`"HUP"`, syscall.SIGHUP}, {`"INT"`, syscall.SIGINT}, {`"USR1"`, syscall.SIGUSR1},
		{`"ASSURED"`, assured}, {`"assured"`, assured},
		{`"32"`, 32}, {`"34"`, 34}, {`"64"`, 64}, {`"RTMIN"`, 34}, {`"SIGRTMIN+2"`, 36},
		{`"rtmax"`, 64}, {`"RTMAX-1"`, 63}, {`"RTMIN+30"`, 64}, {`"RTMAX-30"`, 34},
	}
	for _, tc := range valid {
		got, err := parseSignal(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("parseSignal(%s) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	invalid := []invalidCase{
		{`"FOO"`, []string{"unknown signal", "FOO"}},
		{`"SIGFOO"`, []string{"unknown signal", "SIGFOO"}},
		{`""`, []string{"unknown signal"}},
		{`"0"`, []string{"unknown signal", "0"}},
		{`0`, []string{"string", "0"}},
		{`9`, []string{"string", "9"}}, // the schema says string: a JSON number is the wrong type
		{`"-1"`, []string{"unknown signal", "-1"}},
		{`"99"`, []string{"unknown signal", "99"}},
		{`"65"`, []string{"unknown signal", "65"}},
		{`"RTMIN+31"`, []string{"unknown signal", "RTMIN+31"}},
		{`"RTMAX+1"`, []string{"unknown signal", "RTMAX+1"}},
		{`"RTMIN-1"`, []string{"unknown signal"}},
		{`"RTMIN+"`, []string{"unknown signal"}},
		{`"RTMAX-x"`, []string{"unknown signal"}},
		{`true`, []string{"signal", "true"}},
		{`1.5`, []string{"signal", "1.5"}},
		{`{"name": "TERM"}`, []string{"signal"}},
	}
	for _, tc := range invalid {
		_, err := parseSignal(json.RawMessage(tc.in))
		checkMentions(t, "parseSignal("+tc.in+")", err, tc.mention)
	}
}

// TestPlainTextShowsRedrawsLastDrawn: a line redrawn after carriage
// returns shows what was drawn last, "\r\n" ends a line, a return with
// nothing drawn after it keeps the line, and escapes go as before.
func TestPlainTextShowsRedrawsLastDrawn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"\rprogress 1%\rprogress 2%\rprogress 100%\n", "progress 100%\n"},
		{"a\r\nb\r\n", "a\nb\n"},
		{"50%\r", "50%"},
		{"50%\r\x1b[K", "50%"},
		{"50%\x1b[2K\r100%\ndone", "100%\ndone"},
		{"first\nx\ry\rz\nlast\r\r\n", "first\nz\nlast\n"},
		{"\x1b[31mred\x1b[0m\r\n\x1b]0;title\x07ok", "red\nok"},
		{"héllo\rwörld", "wörld"},
		{"", ""},
	} {
		if got := string(plainText([]byte(tc.raw))); got != tc.want {
			t.Errorf("plainText(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
