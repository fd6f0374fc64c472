// Secrets masked where a job's output enters the server: the rules (known
// values in their encoded forms, token formats) compiled into one trie
// behind a two-byte prefilter, and the per-stream masker that applies
// them across the job's writes, holding back only what could still begin
// a secret.

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maskMinValueBytes is the shortest environment value masked: shorter
	// ones are rarely secrets and would mask ordinary words.
	maskMinValueBytes = 12
	// maskMinFileLineBytes is the shortest MCP_EXEC_MASK_FILE line masked.
	maskMinFileLineBytes = 4
	// maskPEMDropBytes bounds what a private key block drops when no END
	// line comes.
	maskPEMDropBytes = 16 << 10
	// maskOpenTokenBytes caps a token whose format sets no length, so a
	// stream of token characters is not held for ever.
	maskOpenTokenBytes = 512
	// maskMarkerPrefix begins every marker; no cut or range splits one.
	maskMarkerPrefix = "[masked:"
	// maskNameBytes caps the name a marker shows.
	maskNameBytes = 64
	// maskScratchBytes bounds the scratch a masker keeps between feeds:
	// a pipe read of 64 KiB and room for markers.
	maskScratchBytes = 256 << 10
)

// maskDefaultNames is MCP_EXEC_MASK_NAMES' default: the environment
// variables whose values are secrets, as globs matched without case.
const maskDefaultNames = "*TOKEN*, *SECRET*, *PASSWORD*, *PASSWD*, *API_KEY*, *APIKEY*, *PRIVATE_KEY*, *CREDENTIAL*, *ACCESS_KEY*"

// tokenBody is how a token format goes on after its prefix: at least min
// and at most max bytes of the class (max 0: maskOpenTokenBytes).
type tokenBody struct {
	class    *[256]bool
	min, max int
	jwt      bool // three dot-separated base64url parts (after "eyJ")
	pem      bool // a private key block: the BEGIN line's rest, then dropped
}

// maskLiteral is one string the trie finds: a secret's form (value) or
// the prefix of a token format (body set).
type maskLiteral struct {
	text  string
	label string // the marker's name
	value bool   // a known value: wins over a token format
	body  *tokenBody
}

// trieNode is one state of the trie, looked up only at prefilter
// candidates: its edges are few, so a scan beats a map.
type trieNode struct {
	edges []trieEdge
	lits  []*maskLiteral // the literals that end here
}

// trieEdge leads from a node on one byte.
type trieEdge struct {
	c  byte
	to int32
}

// step follows n's edge on c; false when there is none.
func (n *trieNode) step(c byte) (int32, bool) {
	for _, e := range n.edges {
		if e.c == c {
			return e.to, true
		}
	}
	return 0, false
}

// maskRules is an immutable, compiled set of what to mask; a job's
// maskers share it. The zero value masks nothing.
type maskRules struct {
	nodes   []trieNode
	pairAt0 pairSet   // some literal begins with the two bytes
	pairAt1 pairSet   // some literal has the two bytes second and third
	first   [256]bool // some literal begins with the byte
	count   int       // literals
}

// empty reports whether r masks nothing.
func (r *maskRules) empty() bool { return r == nil || r.count == 0 }

// classOf is the class of ASCII letters and digits, and extra.
func classOf(extra string) *[256]bool {
	var c [256]bool
	for b := '0'; b <= '9'; b++ {
		c[b] = true
	}
	for b := 'a'; b <= 'z'; b++ {
		c[b], c[b-32] = true, true
	}
	for i := 0; i < len(extra); i++ {
		c[extra[i]] = true
	}
	return &c
}

var (
	alnum        = classOf("")
	alnumUnder   = classOf("_")
	base64URL    = classOf("-_")
	alnumDash    = classOf("-")
	upperDigits  = onlyOf("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
	pemLineClass = onlyOf("ABCDEFGHIJKLMNOPQRSTUVWXYZ ")
)

// onlyOf is the class of exactly chars.
func onlyOf(chars string) *[256]bool {
	var c [256]bool
	for i := 0; i < len(chars); i++ {
		c[chars[i]] = true
	}
	return &c
}

// tokenRules are the token formats `patterns` masks: each prefix, its
// rule's name and body.
var tokenRules = []struct {
	prefixes []string
	label    string
	body     tokenBody
}{
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, "github_token", tokenBody{class: alnum, min: 36, max: 255}},
	{[]string{"github_pat_"}, "github_pat", tokenBody{class: alnumUnder, min: 40, max: 255}},
	{[]string{"glpat-"}, "gitlab_token", tokenBody{class: base64URL, min: 20}},
	{[]string{"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-"}, "slack_token", tokenBody{class: alnumDash, min: 10}},
	{[]string{"AKIA", "ASIA", "ABIA", "ACCA"}, "aws_access_key_id", tokenBody{class: upperDigits, min: 16, max: 16}},
	{[]string{"sk-proj-", "sk-svcacct-", "sk-admin-"}, "openai_key", tokenBody{class: base64URL, min: 20}},
	{[]string{"sk-"}, "openai_key", tokenBody{class: alnum, min: 40}},
	{[]string{"sk-ant-"}, "anthropic_key", tokenBody{class: base64URL, min: 32}},
	{[]string{"AIza"}, "google_api_key", tokenBody{class: base64URL, min: 35, max: 35}},
	{[]string{"sk_live_", "rk_live_"}, "stripe_key", tokenBody{class: alnum, min: 24}},
	{[]string{"npm_"}, "npm_token", tokenBody{class: alnum, min: 36, max: 36}},
	{[]string{"pypi-AgEIcHlwaS5vcmc"}, "pypi_token", tokenBody{class: base64URL, min: 50}},
	{[]string{"eyJ"}, "jwt", tokenBody{class: base64URL, jwt: true}},
	{[]string{"-----BEGIN "}, "private_key", tokenBody{class: pemLineClass, pem: true}},
}

// maskSpec is what a job's masking is made of, as the configuration and
// the call give it.
type maskSpec struct {
	values   bool
	patterns bool
	names    []string      // globs, upper case
	file     []string      // MCP_EXEC_MASK_FILE's lines
	hold     time.Duration // MCP_EXEC_MASK_HOLD_MS
}

// parseMaskMode reads MCP_EXEC_MASK: values,patterns | values | patterns | off.
func parseMaskMode(v string) (values, patterns bool, err error) {
	if v == "off" {
		return false, false, nil
	}
	for _, w := range strings.Split(v, ",") {
		switch strings.TrimSpace(w) {
		case "values":
			values = true
		case "patterns":
			patterns = true
		default:
			return false, false, fmt.Errorf("%q: want values,patterns, values, patterns or off", v)
		}
	}
	return values, patterns, nil
}

// parseMaskNames reads MCP_EXEC_MASK_NAMES: a comma list of globs.
func parseMaskNames(v string) ([]string, error) {
	var names []string
	for _, g := range strings.Split(v, ",") {
		g = strings.ToUpper(strings.TrimSpace(g))
		if g == "" {
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("%q: not a glob (* and ? and [..] are)", g)
		}
		names = append(names, g)
	}
	return names, nil
}

// readMaskFile reads MCP_EXEC_MASK_FILE: one secret per line; lines
// shorter than maskMinFileLineBytes are refused, as they would mask words.
func readMaskFile(name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var lines []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l == "" {
			continue
		}
		if len(l) < maskMinFileLineBytes {
			return nil, fmt.Errorf("%s: line %d is shorter than %d bytes; it would mask ordinary words", name, i+1, maskMinFileLineBytes)
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// secretName reports whether an environment variable's name marks its
// value a secret.
func (s *maskSpec) secretName(name string) bool {
	up := strings.ToUpper(name)
	for _, g := range s.names {
		if ok, _ := path.Match(g, up); ok {
			return true
		}
	}
	return false
}

// rulesFor compiles what a job whose environment is env ("NAME=value")
// masks; nil when nothing.
func (s *maskSpec) rulesFor(env []string) *maskRules {
	if s == nil || (!s.values && !s.patterns) {
		return nil
	}
	// What the rules are made of, as one key: consecutive jobs of a
	// session mostly share it, so the trie is built once, not per spawn.
	var key strings.Builder
	fmt.Fprintf(&key, "%t %t %q", s.values, s.patterns, s.file)
	var secrets [][2]string
	if s.values {
		for _, kv := range env {
			name, value, _ := strings.Cut(kv, "=")
			if len(value) >= maskMinValueBytes && s.secretName(name) {
				secrets = append(secrets, [2]string{value, name})
				fmt.Fprintf(&key, " %q=%q", name, value)
			}
		}
	}
	if last := lastMaskRules.Load(); last != nil && last.key == key.String() {
		return last.rules
	}
	b := newRuleBuilder()
	for _, sv := range secrets {
		b.addValue(sv[0], sv[1])
	}
	if s.values {
		for _, l := range s.file {
			b.addValue(l, "file")
		}
	}
	if s.patterns {
		for _, t := range tokenRules {
			for _, p := range t.prefixes {
				body := t.body
				b.add(&maskLiteral{text: p, label: t.label, body: &body})
			}
		}
	}
	rules := b.rules()
	lastMaskRules.Store(&keyedMaskRules{key: key.String(), rules: rules})
	return rules
}

// keyedMaskRules is compiled rules with the key of what made them.
type keyedMaskRules struct {
	key   string
	rules *maskRules // immutable; nil: nothing to mask
}

// lastMaskRules is process-wide state: the rules rulesFor compiled last,
// written by any spawn; rules are immutable, so sharing them is safe.
var lastMaskRules atomic.Pointer[keyedMaskRules]

// ruleBuilder collects literals once each.
type ruleBuilder struct {
	r    *maskRules
	seen map[string]bool
}

// newRuleBuilder starts an empty set of rules.
func newRuleBuilder() *ruleBuilder {
	return &ruleBuilder{r: &maskRules{nodes: []trieNode{{}}}, seen: map[string]bool{}}
}

// rules is what b collected; nil when nothing, so a job masks nothing.
func (b *ruleBuilder) rules() *maskRules {
	if b.r.count == 0 {
		return nil
	}
	return b.r
}

// add puts l in the trie.
func (b *ruleBuilder) add(l *maskLiteral) {
	key := l.text + "\x00" + strconv.FormatBool(l.value)
	if len(l.text) < 3 || b.seen[key] {
		return
	}
	b.seen[key] = true
	r := b.r
	n := int32(0)
	for i := 0; i < len(l.text); i++ {
		c := l.text[i]
		next, ok := r.nodes[n].step(c)
		if !ok {
			r.nodes = append(r.nodes, trieNode{})
			next = int32(len(r.nodes) - 1)
			r.nodes[n].edges = append(r.nodes[n].edges, trieEdge{c, next})
		}
		n = next
	}
	r.nodes[n].lits = append(r.nodes[n].lits, l)
	r.pairAt0.add(l.text[0], l.text[1])
	r.pairAt1.add(l.text[1], l.text[2])
	r.first[l.text[0]] = true
	r.count++
}

// addValue adds value's forms: raw, hex in either case, percent-encoded
// in either case, and base64 in both alphabets at each alignment.
func (b *ruleBuilder) addValue(value, name string) {
	if len(name) > maskNameBytes {
		name = name[:maskNameBytes]
	}
	forms := []string{value, hex.EncodeToString([]byte(value)), strings.ToUpper(hex.EncodeToString([]byte(value)))}
	if p := percentEncode(value, false); p != value {
		forms = append(forms, p, percentEncode(value, true))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 0; k < 3; k++ {
			forms = append(forms, base64Core(enc, value, k))
		}
	}
	for _, f := range forms {
		if len(f) >= maskMinFileLineBytes {
			b.add(&maskLiteral{text: f, label: name, value: true})
		}
	}
}

// percentEncode escapes every byte outside the unreserved set as %XX.
func percentEncode(s string, lower bool) string {
	digits := "0123456789ABCDEF"
	if lower {
		digits = "0123456789abcdef"
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if alnum[c] || c == '-' || c == '.' || c == '_' || c == '~' {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

// base64Core is the part of value's base64 that value alone decides when
// it starts k bytes into a 3-byte group: the characters whose six bits
// all come from value.
func base64Core(enc *base64.Encoding, value string, k int) string {
	full := enc.EncodeToString(append(make([]byte, k), value...))
	from := (8*k + 5) / 6
	to := (8 * (k + len(value))) / 6
	if to <= from {
		return ""
	}
	return full[from:to]
}

// maskMatch is what matchAt found at a position.
type maskMatch struct {
	end     int    // where the match ends; 0: none
	label   string // the marker's name
	pending bool   // more bytes could make (or lengthen) a match here
	pem     bool   // a private key block begins: drop what follows
}

// nextCandidate is the first position at or after i where a literal
// could begin; len(data) when none. It reads two bytes at every second
// position: every literal is at least 3 long, so one that begins at s
// has its first two bytes (pairAt0) at an even s, or its second and third
// (pairAt1) at the even s+1. The last two positions, which no such pair
// covers, are looked at byte by byte.
func (r *maskRules) nextCandidate(data []byte, i int) int {
	n := len(data)
	if i&1 == 1 && i+1 < n && r.pairAt0.has(data[i], data[i+1]) {
		return i
	}
	k := (i + 1) &^ 1 // the first even position that covers a start at or after i
	for ; k+1 < n; k += 2 {
		a, b := data[k], data[k+1]
		hit0, hit1 := r.pairAt0.has(a, b), r.pairAt1.has(a, b)
		switch {
		case hit1 && k-1 >= i:
			return k - 1
		case hit0:
			return k
		}
	}
	for j := max(i, n-2); j < n; j++ {
		if r.first[data[j]] {
			return j
		}
	}
	return n
}

// pairSet is a set of two-byte sequences.
type pairSet [1024]uint64

// add puts a, b in the set.
func (p *pairSet) add(a, b byte) {
	v := uint16(a)<<8 | uint16(b)
	p[v>>6] |= 1 << (v & 63)
}

// has reports whether a, b is in the set.
func (p *pairSet) has(a, b byte) bool {
	v := uint16(a)<<8 | uint16(b)
	return p[v>>6]&(1<<(v&63)) != 0
}

// matchAt finds the match that begins at data[at]: the longest value, or
// else the longest token. final: no more bytes come.
func (r *maskRules) matchAt(data []byte, at int, final bool) maskMatch {
	var best, bestToken maskMatch
	n := int32(0)
	i := at
	for {
		for _, l := range r.nodes[n].lits {
			if l.value {
				if i > best.end {
					best = maskMatch{end: i, label: l.label}
				}
				continue
			}
			m := l.body.match(data, i, final)
			m.label = l.label
			if m.pending {
				return maskMatch{pending: true}
			}
			if m.end > bestToken.end {
				bestToken = m
			}
		}
		if i == len(data) {
			if len(r.nodes[n].edges) > 0 && !final {
				return maskMatch{pending: true}
			}
			break
		}
		next, ok := r.nodes[n].step(data[i])
		if !ok {
			break
		}
		n, i = next, i+1
	}
	if best.end > 0 {
		return best
	}
	return bestToken
}

// match reads a token's body from data[i]; pending when the body runs to
// the end of data and could go on.
func (t *tokenBody) match(data []byte, i int, final bool) maskMatch {
	switch {
	case t.jwt:
		return t.matchJWT(data, i, final)
	case t.pem:
		return t.matchPEM(data, i, final)
	}
	most := t.max
	if most == 0 {
		most = maskOpenTokenBytes
	}
	j := i
	for j < len(data) && j-i < most && t.class[data[j]] {
		j++
	}
	switch {
	case j == len(data) && j-i < most && !final:
		return maskMatch{pending: true}
	case j-i < t.min:
		return maskMatch{}
	case t.max != 0 && j < len(data) && t.class[data[j]]:
		return maskMatch{} // longer than the format: something else
	}
	return maskMatch{end: j}
}

// matchJWT reads the rest of "eyJ…" as three base64url parts joined by
// dots, each at least 8 long.
func (t *tokenBody) matchJWT(data []byte, i int, final bool) maskMatch {
	j := i
	for part := 0; part < 3; part++ {
		from := j
		for j < len(data) && j-from < maskOpenTokenBytes*4 && base64URL[data[j]] {
			j++
		}
		if j == len(data) && !final {
			return maskMatch{pending: true}
		}
		if j-from < 8 && !(part == 0 && j-from >= 5) {
			return maskMatch{}
		}
		if part < 2 {
			if j >= len(data) || data[j] != '.' {
				return maskMatch{}
			}
			j++
		}
	}
	return maskMatch{end: j}
}

// matchPEM reads the rest of a BEGIN line: "[A-Z ]*PRIVATE KEY-----";
// pending while data ends inside it.
func (t *tokenBody) matchPEM(data []byte, i int, final bool) maskMatch {
	const tail = "PRIVATE KEY-----"
	for j := i; j <= len(data) && j-i <= 40; j++ {
		rest := data[j:]
		if bytes.HasPrefix(rest, []byte(tail)) {
			return maskMatch{end: j + len(tail), pem: true}
		}
		if !final && len(rest) < len(tail) && bytes.HasPrefix([]byte(tail), rest) {
			return maskMatch{pending: true}
		}
		if j == len(data) || !pemLineClass[data[j]] {
			break
		}
	}
	return maskMatch{}
}

// marker is what a masked span shows.
func marker(label string) string { return maskMarkerPrefix + label + "]" }

// maskSink is where a masker's output goes: a job's window.
type maskSink interface{ Write(p []byte) (int, error) }

// masker masks one stream of one job. The pump feeds it each read; it
// writes to its sink what can no longer be part of a secret, and holds
// back the newest bytes only while they could begin one, at most hold
// after the last feed, and never past flush (the pump's end, or the job's
// settling).
type masker struct {
	rules *maskRules // immutable
	sink  maskSink
	hold  time.Duration

	mu      sync.Mutex  // guards the fields below and orders writes to sink
	held    []byte      // fed, not yet written: could begin a secret
	pem     int         // >0: inside a private key block, bytes dropped so far (+1)
	pemTail []byte      // the last dropped bytes, to find an END line split across feeds
	timer   *time.Timer // releases held after hold; nil when none is armed
	out     []byte      // scratch for the masked output
}

// newMasker masks into sink with rules; nil rules: nil (no masking).
func newMasker(rules *maskRules, sink maskSink, hold time.Duration) *masker {
	if rules.empty() {
		return nil
	}
	return &masker{rules: rules, sink: sink, hold: hold}
}

// Write masks p and writes what is settled to the sink; never fails.
func (m *masker) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.feedLocked(p, false)
	if len(m.held) > 0 && m.timer == nil {
		m.timer = time.AfterFunc(m.hold, m.release)
	}
	return len(p), nil
}

// release writes what is held as it was written: no more bytes came in
// time to make it a secret.
func (m *masker) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.timer = nil
	m.flushLocked()
}

// flush masks and writes everything held: the stream has ended, or the
// job has.
func (m *masker) flush() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	m.flushLocked()
}

// flushLocked writes held, masked as if no more bytes came.
func (m *masker) flushLocked() {
	if len(m.held) == 0 {
		return
	}
	held := m.held
	m.held = nil
	m.feedLocked(held, true)
	if len(m.held) > 0 { // cannot happen when final; never lose bytes
		_, _ = m.sink.Write(m.held)
		m.held = nil
	}
}

// feedLocked masks held+p and writes the settled part; final: hold
// nothing back.
func (m *masker) feedLocked(p []byte, final bool) {
	data := p
	if len(m.held) > 0 {
		data = append(m.held, p...)
		m.held = nil
	}
	// A feed with nothing to mask is written as it came, in one write;
	// out collects the feed only once it has a marker.
	out := m.out[:0]
	i := 0
	if m.pem > 0 {
		i = m.dropPEM(data)
	}
	run, end := i, len(data) // data[run:end] is still to be written
	for i < end {
		j := m.rules.nextCandidate(data, i)
		if j == end {
			break
		}
		found := m.rules.matchAt(data, j, final)
		switch {
		case found.pending:
			m.held = append([]byte(nil), data[j:]...)
			end = j
		case found.end > j:
			out = append(out, data[run:j]...)
			out = append(out, marker(found.label)...)
			i = found.end
			if found.pem {
				m.pem, m.pemTail = 1, nil
				i += m.dropPEM(data[i:])
			}
			run = i
		default:
			i = j + 1
		}
	}
	switch {
	case len(out) == 0 && run < end:
		_, _ = m.sink.Write(data[run:end])
	case len(out) > 0:
		out = append(out, data[run:end]...)
		_, _ = m.sink.Write(out)
	}
	if cap(out) <= maskScratchBytes { // a read's worth and its markers: kept for the next
		m.out = out[:0]
	}
}

// dropPEM drops the bytes of a private key block from data's start, up
// to and with its END line, or until maskPEMDropBytes are gone, and
// returns how many it dropped.
func (m *masker) dropPEM(data []byte) int {
	const end = "-----END "
	search := append(m.pemTail, data...)
	if k := bytes.Index(search, []byte(end)); k >= 0 {
		stop := len(search)
		if nl := bytes.IndexByte(search[k:], '\n'); nl >= 0 {
			stop = k + nl // the END line's newline stays: what follows keeps its line
		} else if d := bytes.Index(search[k+len(end):], []byte("-----")); d >= 0 {
			stop = k + len(end) + d + 5
		} else {
			m.keepPEMTail(search)
			m.pem += len(data)
			return len(data)
		}
		kept := len(m.pemTail)
		m.pem, m.pemTail = 0, nil
		return max(stop-kept, 0)
	}
	m.pem += len(data)
	if m.pem > maskPEMDropBytes {
		over := m.pem - maskPEMDropBytes - 1
		m.pem, m.pemTail = 0, nil
		return len(data) - min(over, len(data))
	}
	m.keepPEMTail(search)
	return len(data)
}

// keepPEMTail keeps the last bytes searched, for an END line the next
// feed completes.
func (m *masker) keepPEMTail(search []byte) {
	const keep = 80
	if len(search) > keep {
		search = search[len(search)-keep:]
	}
	m.pemTail = append([]byte(nil), search...)
}

// maskString masks s whole with rules (a job's command, for the job log
// and events).
func maskString(rules *maskRules, s string) string {
	if rules.empty() {
		return s
	}
	var b bytes.Buffer
	m := &masker{rules: rules, sink: &b}
	m.feedLocked([]byte(s), true)
	return b.String()
}

// maskedIn counts the markers in s.
func maskedIn(s string) int { return strings.Count(s, maskMarkerPrefix) }

// markerAround is where a marker spanning position at of s begins, and
// where it ends; ok false when at is not inside one.
func markerAround(s string, at int) (from, to int, ok bool) {
	lo := max(at-len(maskMarkerPrefix)-maskNameBytes-1, 0)
	k := strings.LastIndex(s[lo:min(at, len(s))], maskMarkerPrefix)
	if k < 0 {
		return 0, 0, false
	}
	from = lo + k
	close := strings.IndexByte(s[from:], ']')
	if close < 0 || from+close+1 <= at {
		return 0, 0, false
	}
	return from, from + close + 1, true
}
