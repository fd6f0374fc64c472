package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The ways decodeObject refuses a JSON value that is otherwise valid.
var (
	errNotObject    = errors.New("not a JSON object")
	errDuplicateKey = errors.New("duplicate key")
)

// decodeObject splits a JSON object into its members, keyed by their exact
// (unescaped) names, without copying the values. Duplicate keys are an
// error, so no spelling can smuggle a second value past a check; case
// variants are simply different keys.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	data = trimJSONSpace(data)
	if !json.Valid(data) {
		var v any
		return nil, json.Unmarshal(data, &v) // the decoder says what is wrong
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, errNotObject
	}
	obj := map[string]json.RawMessage{}
	i := skipSpace(data, 1)
	for data[i] != '}' {
		end := skipValue(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			_ = json.Unmarshal(data[i:end], &k) // valid JSON: cannot fail
			key = []byte(k)
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the ':'
		end = skipValue(data, i)
		if _, dup := obj[string(key)]; dup {
			return nil, fmt.Errorf("%w %q", errDuplicateKey, key)
		}
		obj[string(key)] = data[i:end:end]
		i = skipSpace(data, end)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return obj, nil
}

// trimJSONSpace trims the four whitespace bytes JSON allows, and no others.
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i; data
// must be valid JSON.
func skipValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing object
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// concat joins literal and raw JSON pieces.
func concat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		case json.RawMessage:
			b = append(b, p...)
		}
	}
	return b
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// quotedLen is how many bytes appendQuoted adds for s. It takes eight
// bytes at a time while they are ASCII without control characters, adding
// one for each quote and backslash: a list of 10,000 jobs is mostly quotes.
func quotedLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := binary.LittleEndian.Uint64(s[i:])
			if (w&highBits)|controlBytes(w) == 0 {
				n += 8 + bits.OnesCount64(zeroBytes(w^(ones*'"'))|zeroBytes(w^(ones*'\\')))
				i += 8
				continue
			}
		}
		if size := quotedASCII[s[i]]; size != 0 {
			n += int(size)
			i++
			continue
		}
		esc, size := jsonEscape(s[i:])
		n += escapedSize(esc, size)
		i += size
	}
	return n
}

// escapedSize is how many bytes a character takes in a JSON string: its
// escape, or its size bytes as they are.
func escapedSize(esc string, size int) int {
	if esc == "" {
		return size
	}
	return len(esc)
}

// escapedCost sums cost over the characters of s (each given its escape in
// a JSON string, see jsonEscape, and its size); runs of plain ASCII cost a
// byte each.
func escapedCost(s []byte, cost func(esc string, size int) int) int {
	n := 0
	for i := 0; i < len(s); {
		if plain := plainRun(s[i:]); plain > 0 {
			n += plain
			i += plain
			continue
		}
		esc, size := jsonEscape(s[i:])
		n += cost(esc, size)
		i += size
	}
	return n
}

// appendQuoted appends s as the inside of a JSON string, escaped exactly as
// encoding/json escapes a string without HTML escaping. Bytes held as they
// are are copied a run at a time, the run found eight bytes at a time.
func appendQuoted(b, s []byte) []byte {
	run := 0 // where the bytes not yet copied start
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			m := escapedBytes(binary.LittleEndian.Uint64(s[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8 // the first byte not held as it is
		}
		c := s[i]
		if quotedASCII[c] == 1 {
			i++
			continue
		}
		esc, size := "", 1
		if c < utf8.RuneSelf { // a quote, backslash or control character
			esc = asciiEscapes[c]
		} else if esc, size = jsonEscape(s[i:]); esc == "" {
			i += size // a character held as it is: part of the run
			continue
		}
		b = append(b, s[run:i]...)
		if len(esc) == 2 { // \" and the like: two bytes, without a copy call
			b = append(b, esc[0], esc[1])
		} else {
			b = append(b, esc...)
		}
		i += size
		run = i
	}
	return append(b, s[run:]...)
}

// plainRun is how many bytes at the start of s are ASCII that a JSON string
// holds as they are: the common case, copied in one piece.
func plainRun(s []byte) int {
	i := 0
	for i+8 <= len(s) {
		if m := escapedBytes(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for ; i < len(s); i++ {
		if quotedASCII[s[i]] != 1 {
			return i
		}
	}
	return len(s)
}

// Eight bytes at once, as a little-endian word: ones has a 1 in every
// byte, highBits each byte's top bit.
const (
	ones     = 0x0101010101010101
	highBits = 0x8080808080808080
)

// zeroBytes has the top bit set in exactly the bytes of w that are 0.
func zeroBytes(w uint64) uint64 {
	return ^(((w &^ highBits) + ^uint64(highBits)) | w | ^uint64(highBits))
}

// controlBytes has the top bit set in the bytes of w whose low seven bits
// are below 0x20: the ASCII control characters, and some bytes with the
// top bit set, which callers test apart.
func controlBytes(w uint64) uint64 {
	return ^((w &^ highBits) + ones*(0x80-0x20)) & highBits
}

// escapedBytes has the top bit set in exactly the bytes of w that a JSON
// string does not hold as they are: not ASCII, a control character, a
// quote or a backslash. Every term is exact per byte (no carry crosses
// bytes), so the lowest set bit finds the first such byte.
func escapedBytes(w uint64) uint64 {
	return (w & highBits) | controlBytes(w) | zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\'))
}

// jsonEscape says how the character that starts s is written inside a JSON
// string: esc is its escape, or "" when its size bytes are copied as they
// are. Quote, backslash and control characters are escaped, invalid UTF-8
// becomes U+FFFD, and U+2028 and U+2029 are escaped, as encoding/json does.
func jsonEscape(s []byte) (esc string, size int) {
	if c := s[0]; c < utf8.RuneSelf {
		return asciiEscapes[c], 1
	}
	r, size := utf8.DecodeRune(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`, 1
	case r == '\u2028':
		return `\u2028`, size
	case r == '\u2029':
		return `\u2029`, size
	}
	return "", size
}

// asciiEscapes holds the JSON string escape of every ASCII byte that needs one.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	const hex = "0123456789abcdef"
	for c := 0; c < 0x20; c++ {
		t[c] = `\u00` + hex[c>>4:c>>4+1] + hex[c&0xF:c&0xF+1]
	}
	t['\b'], t['\f'], t['\n'], t['\r'], t['\t'] = `\b`, `\f`, `\n`, `\r`, `\t`
	t['"'], t['\\'] = `\"`, `\\`
	return t
}()

// quotedASCII is how many bytes each ASCII byte takes inside a JSON string
// (1 as it is, else its escape's length); 0 for a byte that starts a
// multi-byte character, which jsonEscape decodes.
var quotedASCII = func() (t [256]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = uint8(max(len(asciiEscapes[c]), 1))
	}
	return t
}()

// firstRunes is s cut to its first most characters.
func firstRunes(s string, most int) string {
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	return string([]rune(s)[:most])
}

// clipText shortens a caller's string for an error message, which must not
// grow with what the caller sent.
func clipText(s string) string {
	const most = 100
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// clip shortens a raw JSON value for an error message.
func clip(r json.RawMessage) string {
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(r)
}

// isNull says whether r is the JSON literal null.
func isNull(r json.RawMessage) bool { return string(r) == "null" }

// parseInteger accepts a JSON number with no fractional part; values beyond
// int64 saturate.
func parseInteger(r json.RawMessage) (int64, error) {
	var n json.Number
	if len(r) == 0 || r[0] == '"' || json.Unmarshal(r, &n) != nil { // json.Number would take "3" too
		return 0, fmt.Errorf("must be an integer, got %s", clip(r))
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil && !errors.Is(err, strconv.ErrRange) || f != math.Trunc(f) {
		return 0, fmt.Errorf("must be an integer, got %s", clip(r))
	}
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64, nil
	case f <= math.MinInt64:
		return math.MinInt64, nil
	}
	return int64(f), nil
}

// unknownKey returns the first key of obj, in sorted order, that is not
// allowed, or "" when all are; errors then do not depend on map order.
func unknownKey(obj map[string]json.RawMessage, allowed ...string) string {
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return slices.Min(unknown)
}

// integerID reports whether id is a number id we accept: an integer of any
// size with no sign but '-', no leading zero, no fraction or exponent.
func integerID(id []byte) bool {
	if len(id) > 0 && id[0] == '-' {
		id = id[1:]
	}
	if len(id) == 0 || (id[0] == '0' && len(id) > 1) {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
