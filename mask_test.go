package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a masker's sink that tests read while a timer may write.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testSecret = "hunter2-correct-horse-battery"

// testMaskRules masks testSecret (as API_TOKEN) and the token formats.
func testMaskRules(t testing.TB) *maskRules {
	t.Helper()
	names, err := parseMaskNames(maskDefaultNames)
	if err != nil {
		t.Fatal(err)
	}
	spec := maskSpec{values: true, patterns: true, names: names, hold: time.Hour}
	r := spec.rulesFor([]string{"API_TOKEN=" + testSecret, "HOME=/root", "SHORT_TOKEN=abc"})
	if r == nil {
		t.Fatal("no rules")
	}
	return r
}

// maskedWhole is what masking data in one write and a flush gives.
func maskedWhole(r *maskRules, data string) string {
	var out syncBuffer
	m := newMasker(r, &out, time.Hour)
	m.Write([]byte(data))
	m.flush()
	return out.String()
}

// maskedSplit is the same with data written in two parts at cut.
func maskedSplit(r *maskRules, data string, cut int) string {
	var out syncBuffer
	m := newMasker(r, &out, time.Hour)
	m.Write([]byte(data[:cut]))
	m.Write([]byte(data[cut:]))
	m.flush()
	return out.String()
}

// valueForms are testSecret's encodings as a job might print them.
func valueForms() map[string]string {
	forms := map[string]string{
		"raw":       testSecret,
		"hex":       hex.EncodeToString([]byte(testSecret)),
		"HEX":       strings.ToUpper(hex.EncodeToString([]byte(testSecret))),
		"percent":   percentEncode(testSecret+"!", false),
		"PERCENT":   percentEncode(testSecret+"!", true),
		"base64":    base64.StdEncoding.EncodeToString([]byte(testSecret)),
		"base64url": base64.URLEncoding.EncodeToString([]byte(testSecret)),
	}
	for _, pad := range []string{"x", "xy"} { // other alignments within a group
		forms["base64+"+pad] = base64.StdEncoding.EncodeToString([]byte(pad + testSecret + "\n"))
		forms["base64url+"+pad] = base64.URLEncoding.EncodeToString([]byte(pad + testSecret + "?>"))
	}
	return forms
}

// TestMaskValueInEveryFormAndSplit: a known value is masked raw, in hex
// of either case, percent-encoded and in base64 of both alphabets at every
// alignment, whether it comes in one write or split at any byte.
func TestMaskValueInEveryFormAndSplit(t *testing.T) {
	r := testMaskRules(t)
	core := map[string]string{}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 0; k < 3; k++ {
			core[base64Core(enc, testSecret, k)] = "core"
		}
	}
	for name, form := range valueForms() {
		data := "before " + form + " after\n"
		whole := maskedWhole(r, data)
		if !strings.Contains(whole, "[masked:API_TOKEN]") {
			t.Errorf("%s: not masked: %q", name, whole)
		}
		for c := range core {
			if strings.Contains(whole, c) {
				t.Errorf("%s: a base64 core of the value shows: %q", name, whole)
			}
		}
		for cut := 1; cut < len(data); cut++ {
			if got := maskedSplit(r, data, cut); got != whole {
				t.Fatalf("%s split at %d: %q, whole: %q", name, cut, got, whole)
			}
		}
	}
	if got := maskedWhole(r, "abc and /root\n"); got != "abc and /root\n" {
		t.Errorf("a short value or a name not secret was masked: %q", got)
	}
}

// TestMaskTokenFormats: each token format is masked with its rule's name;
// near misses are left alone.
func TestMaskTokenFormats(t *testing.T) {
	r := testMaskRules(t)
	a := func(n int) string { return strings.Repeat("a1B2", n)[:n] }
	masked := map[string]string{
		"ghp_" + a(36):                                  "github_token",
		"github_pat_" + a(82):                           "github_pat",
		"glpat-" + a(20):                                "gitlab_token",
		"xoxb-123456789012-" + a(24):                    "slack_token",
		"AKIAIOSFODNN7EXAMPLE":                          "aws_access_key_id",
		"sk-proj-" + a(40):                              "openai_key",
		"sk-ant-api03-" + a(80):                         "anthropic_key",
		"AIzaSyA" + a(32):                               "google_api_key",
		"sk_live_" + a(24):                              "stripe_key",
		"npm_" + a(36):                                  "npm_token",
		"pypi-AgEIcHlwaS5vcmc" + a(60):                  "pypi_token",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0": "jwt",
	}
	for tok, rule := range masked {
		got := maskedWhole(r, "x="+tok+" ;\n")
		if got != "x=[masked:"+rule+"] ;\n" {
			t.Errorf("%s: %q", rule, got)
		}
	}
	for _, plain := range []string{"ghp_short", "-Werror and 0 errors", "sk-learn", "AKIA", "eyJ.x.y", "AKIAIOSFODNN7EXAMPLEXTRA"} {
		if got := maskedWhole(r, plain); got != plain {
			t.Errorf("%q became %q", plain, got)
		}
	}
}

// TestMaskPrivateKeyBlockDropsToItsEnd: the marker stands at the BEGIN
// line and the block's bytes are gone up to its END line, even when the
// END line comes split over writes.
func TestMaskPrivateKeyBlockDropsToItsEnd(t *testing.T) {
	r := testMaskRules(t)
	data := "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAbm9uZQ==\n-----END OPENSSH PRIVATE KEY-----\nnext line\n"
	want := "key:\n[masked:private_key]\nnext line\n"
	if got := maskedWhole(r, data); got != want {
		t.Fatalf("whole: %q", got)
	}
	for cut := 1; cut < len(data); cut++ {
		if got := maskedSplit(r, data, cut); got != want {
			t.Fatalf("split at %d: %q", cut, got)
		}
	}
	endless := "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("A", maskPEMDropBytes+100)
	// 16 KiB dropped after the BEGIN line: its newline, then the As.
	if got := maskedWhole(r, endless); got != "[masked:private_key]"+strings.Repeat("A", 101) {
		t.Errorf("a block with no END dropped %d bytes", len(endless)-len(got))
	}
}

// TestMaskHoldsOnlyWhatCouldBeginASecret: bytes that cannot begin a
// secret are written at once; a possible beginning is held, and released
// as written after the hold.
func TestMaskHoldsOnlyWhatCouldBeginASecret(t *testing.T) {
	r := testMaskRules(t)
	var out syncBuffer
	m := newMasker(r, &out, 20*time.Millisecond)
	m.Write([]byte("plain line\nghp_abc"))
	if got := out.String(); got != "plain line\n" {
		t.Fatalf("written at once: %q", got)
	}
	deadline := time.Now().Add(jobDeadline)
	for out.String() != "plain line\nghp_abc" {
		if time.Now().After(deadline) {
			t.Fatalf("the held bytes were never released: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.Write([]byte(" done\n"))
	m.flush()
	if got := out.String(); got != "plain line\nghp_abc done\n" {
		t.Errorf("after release: %q", got)
	}
}

// TestMaskStringForCommands: a command line is masked whole.
func TestMaskStringForCommands(t *testing.T) {
	r := testMaskRules(t)
	if got := maskString(r, "curl -H 'Authorization: "+testSecret+"' x"); got != "curl -H 'Authorization: [masked:API_TOKEN]' x" {
		t.Errorf("%q", got)
	}
	if got := maskString(nil, testSecret); got != testSecret {
		t.Errorf("no rules changed the text: %q", got)
	}
}

// TestMaskSettings: the modes, names and file parse or are refused with
// what is allowed.
func TestMaskSettings(t *testing.T) {
	for v, want := range map[string][2]bool{"off": {}, "values": {true, false}, "patterns": {false, true}, "values,patterns": {true, true}} {
		values, patterns, err := parseMaskMode(v)
		if err != nil || values != want[0] || patterns != want[1] {
			t.Errorf("%s: %v %v %v", v, values, patterns, err)
		}
	}
	if _, _, err := parseMaskMode("on"); err == nil || !strings.Contains(err.Error(), "values,patterns") {
		t.Errorf("on: %v", err)
	}
	if _, err := parseMaskNames("[x"); err == nil {
		t.Error("a broken glob was taken")
	}
	dir := t.TempDir()
	short := dir + "/short"
	if err := os.WriteFile(short, []byte("long enough line\nab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readMaskFile(short); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a short line: %v", err)
	}
}

// TestAgentOutputIsMaskedEverywhere: under the agent profile a secret the
// call's env gives is masked in the result, the output tool (all, from,
// grep) and the command in the job log; outside it nothing changes.
func TestAgentOutputIsMaskedEverywhere(t *testing.T) {
	t.Parallel()
	onLinux(t)
	cl := agentSession(t, "2025-03-26")
	args := map[string]any{"command": "echo \"id=$DEPLOY_TOKEN\"; sleep 30", "env": map[string]string{"DEPLOY_TOKEN": testSecret},
		"until": map[string]any{"pattern": "id="}}
	res, text, _ := cl.shellTool(1, "execute", args)
	if strings.Contains(text, testSecret) || !strings.Contains(text, "[masked:DEPLOY_TOKEN]") {
		t.Fatalf("execute: %s", text)
	}
	id := res["job_id"]
	for _, spec := range []any{map[string]any{"from": 0}, map[string]any{"from": 3}, map[string]any{"grep": "masked"}} {
		_, text, _ := cl.shellTool(2, "output", map[string]any{"job_id": id, "stdout": spec})
		if strings.Contains(text, testSecret) || !strings.Contains(text, "[masked:DEPLOY_TOKEN]") {
			t.Errorf("output %v: %s", spec, text)
		}
		if _, grep := spec.(map[string]any)["grep"]; !grep && !strings.Contains(text, `"masked":1`) {
			t.Errorf("output %v: no count of the markers: %s", spec, text)
		}
	}
	cl.shellTool(3, "kill", map[string]any{"job_id": id, "signal": "KILL"})
	plain := newRPCClient(t, testConfig())
	_, text, _ = plain.shellTool(1, "execute", map[string]any{"command": "echo $DEPLOY_TOKEN", "env": map[string]string{"DEPLOY_TOKEN": testSecret}})
	var r resultJSON
	if json.Unmarshal([]byte(text), &r) != nil || r.Stdout == nil || r.Stdout.Data != testSecret+"\n" || strings.Contains(text, "masked") {
		t.Errorf("outside the profile: %s", text)
	}
}

// FuzzMasker: whatever surrounds a secret and wherever the writes split,
// the secret never shows, and the output is the one a single write gives.
func FuzzMasker(f *testing.F) {
	f.Add([]byte("noise "), []byte(" more"), uint16(3), uint8(0))
	f.Add([]byte("ghp_"), []byte("-----BEGIN "), uint16(40), uint8(5))
	r := testMaskRules(f)
	forms := []string{}
	for _, v := range valueForms() {
		forms = append(forms, v)
	}
	f.Fuzz(func(t *testing.T, before, after []byte, cut uint16, form uint8) {
		secret := forms[int(form)%len(forms)]
		data := string(before) + " " + secret + " " + string(after)
		whole := maskedWhole(r, data)
		split := maskedSplit(r, data, int(cut)%(len(data)+1))
		if split != whole {
			t.Fatalf("split at %d: %q, whole: %q", int(cut)%(len(data)+1), split, whole)
		}
		if strings.Contains(whole, testSecret) {
			t.Fatalf("the secret shows: %q", whole)
		}
	})
}

// discardSink takes what a benchmark's masker writes.
type discardSink struct{}

func (discardSink) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkMaskerText is the masker's cost on text with few candidates.
func BenchmarkMaskerText(b *testing.B) {
	r := testMaskRules(b)
	line := []byte("lorem ipsum dolor sit amet, consectetur 0123456789 ABCDEF\n")
	data := bytes.Repeat(line, (64<<10)/len(line))
	m := newMasker(r, discardSink{}, time.Hour)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		m.Write(data)
	}
}

// TestMaskedBytesAreWhatSpills: the bytes that leave a masked stream's
// window for its spill file are the masked ones: read back from the spill
// they show the marker, never the value.
func TestMaskedBytesAreWhatSpills(t *testing.T) {
	t.Parallel()
	w, _ := spillWindow(t, 64<<10, 0, 1<<30, 0)
	m := newMasker(testMaskRules(t), w, time.Hour)
	m.Write([]byte("id=" + testSecret + "\n"))
	m.Write(bytes.Repeat([]byte("x"), 300<<10))
	m.flush()
	a := w.readRange(0, 40, true, 0)
	if a.truncated || !strings.HasPrefix(string(a.data), "id=[masked:API_TOKEN]\n") {
		t.Fatalf("the first bytes, from the spill: %q (truncated %v)", a.data, a.truncated)
	}
}
