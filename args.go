package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"syscall"
)

// Tool arguments bind into one struct per tool. A field's `arg` tag gives
// its wire name, with ",required" when a call must give it (",listed" when
// the schema lists it as required for older clients but another argument
// may stand in for it; ",unlisted" when every call may give it but only the
// agent profile's schema shows it, so the schema a 1.0 client reads stays
// 1.0's); the field's Go type picks its kind in argKinds, the
// one table of each kind's decoder and JSON Schema. So handlers read typed
// fields, and the published schema, the checks a call gets and the refusal
// of an unknown argument all come from the same declaration; the tool table
// gives each argument its description.

// Argument types with a meaning of their own on the wire.
type (
	// seconds is a number of seconds, fractions allowed.
	seconds float64
	// jobID is a job id: a string, or a JSON integer meaning its decimal form.
	jobID string
	// replyBytes is a reply budget: a whole number of bytes, at least 1024.
	replyBytes int
	// byteCount is a whole number of bytes, 0 or more.
	byteCount int64
	// looseEnv is an env overlay whose unusable names are dropped, not
	// refused, as the exec-mcp gateway has it.
	looseEnv map[string]string
	// argList is a program's arguments: strings, or numbers taken as they
	// are spelled, as the Shell toolkit has it.
	argList []string
)

// argKind decodes and describes the arguments of one Go type.
type argKind struct {
	decode func(raw json.RawMessage) (any, error) // a value of exactly that type
	schema map[string]any                         // shared: schemaOf adds to a copy
}

// kindOf builds the argKind of T from a typed decoder.
func kindOf[T any](decode func(json.RawMessage) (T, error), schema map[string]any) argKind {
	return argKind{decode: func(raw json.RawMessage) (any, error) { return decode(raw) }, schema: schema}
}

// argKinds is every argument type a tool may declare. A pointer field of one
// of these types is nil when the call leaves it out.
var argKinds = map[reflect.Type]argKind{
	reflect.TypeFor[string]():            kindOf(decodeAs[string]("a string"), map[string]any{"type": "string"}),
	reflect.TypeFor[bool]():              kindOf(decodeAs[bool]("true or false"), map[string]any{"type": "boolean"}),
	reflect.TypeFor[seconds]():           kindOf(decodeAs[seconds]("a number of seconds"), map[string]any{"type": "number"}),
	reflect.TypeFor[jobID]():             kindOf(decodeJobID, jobIDSchema()),
	reflect.TypeFor[[]jobID]():           kindOf(decodeJobIDs, map[string]any{"type": "array", "items": jobIDSchema(), "minItems": 1}),
	reflect.TypeFor[map[string]string](): kindOf(decodeEnv, envSchema()),
	reflect.TypeFor[[]string]():          kindOf(decodeArgv, map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1}),
	reflect.TypeFor[replyBytes]():        kindOf(decodeReplyBytes, map[string]any{"type": "integer", "minimum": minReplyBytes}),
	reflect.TypeFor[streamSpec]():        kindOf(parseStreamSpec, streamSchema()),
	reflect.TypeFor[capturePolicy]():     kindOf(parseCapturePolicy, captureSchema()),
	reflect.TypeFor[syscall.Signal]():    kindOf(parseSignal, map[string]any{"type": "string"}),
	reflect.TypeFor[untilSpec]():         kindOf(parseUntilSpec, untilSchema()),
	reflect.TypeFor[ttySpec]():           kindOf(parseTTYSpec, ttySchema()),
	reflect.TypeFor[byteCount]():         kindOf(decodeByteCount, map[string]any{"type": "integer", "minimum": 0}),
	reflect.TypeFor[looseEnv]():          kindOf(decodeLooseEnv, envSchema()),
	reflect.TypeFor[argList]():           kindOf(decodeArgList, map[string]any{"type": "array", "items": map[string]any{"type": []string{"string", "number"}}}),
}

// param is one argument of a tool, read from its args struct.
type param struct {
	name     string
	required bool         // a call must give it
	listed   bool         // published as required though a call may leave it out for another
	unlisted bool         // accepted, but published only in the agent profile's schema
	field    int          // index of the struct field
	typ      reflect.Type // the kind's type; the field is *typ when ptr
	ptr      bool
}

// paramsOf reads the parameters of the args struct type t. A field without
// an arg tag, or of a type argKinds lacks, is a programming error: it panics
// when the tool table is built, before the server serves anything.
func paramsOf(t reflect.Type) []param {
	params := make([]param, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("arg"), ",")
		p := param{name: name, required: opts == "required", listed: opts == "listed", unlisted: opts == "unlisted", field: i, typ: f.Type}
		if p.typ.Kind() == reflect.Pointer {
			p.typ, p.ptr = p.typ.Elem(), true
		}
		if _, ok := argKinds[p.typ]; !ok || name == "" {
			panic(fmt.Sprintf("%s.%s: an argument needs an arg tag and a type in argKinds", t.Name(), f.Name))
		}
		params = append(params, p)
	}
	return params
}

// bindArgs decodes raw into the args struct dst per params. An unknown
// argument is refused by name; null means absent.
func bindArgs(tool string, params []param, raw map[string]json.RawMessage, dst reflect.Value) error {
	if err := refuseUnknown(tool, params, raw); err != nil {
		return err
	}
	for _, p := range params {
		r, ok := raw[p.name]
		if !ok || isNull(r) {
			if p.required {
				return fmt.Errorf("%w: %s is required", errInvalid, p.name)
			}
			continue
		}
		v, err := argKinds[p.typ].decode(r)
		if err != nil {
			return fmt.Errorf("%w %s: %w", errInvalid, p.name, err)
		}
		value := reflect.ValueOf(v)
		if p.ptr {
			ptr := reflect.New(p.typ)
			ptr.Elem().Set(value)
			value = ptr
		}
		dst.Field(p.field).Set(value)
	}
	return nil
}

// refuseUnknown names every argument of raw that tool does not take.
func refuseUnknown(tool string, params []param, raw map[string]json.RawMessage) error {
	var unknown []string
	for name := range raw {
		if !slices.ContainsFunc(params, func(p param) bool { return p.name == name }) {
			unknown = append(unknown, fmt.Sprintf("%q", clipText(name)))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return &unknownArgsError{tool: tool, unknown: unknown, params: params}
}

// unknownArgsError is a call's refusal for arguments its tool does not
// take. Its text lists what the tool accepts, as 1.1 worded it; a caller
// may trade the list for the nearest names (nearMissHint).
type unknownArgsError struct {
	tool    string
	unknown []string // the names given, quoted and clipped, sorted
	params  []param
}

// Unwrap makes the refusal an errInvalid.
func (e *unknownArgsError) Unwrap() error { return errInvalid }

// Error names the unknown arguments and every accepted one.
func (e *unknownArgsError) Error() string {
	accepted := make([]string, len(e.params))
	for i, p := range e.params {
		accepted[i] = p.name
	}
	list := "none"
	if len(accepted) > 0 {
		list = strings.Join(accepted, ", ")
	}
	return fmt.Sprintf("%v: %s %s for %s (accepted: %s)", errInvalid, e.what(), strings.Join(e.unknown, ", "), e.tool, list)
}

// what is "unknown argument", plural when more than one is.
func (e *unknownArgsError) what() string {
	if len(e.unknown) > 1 {
		return "unknown arguments"
	}
	return "unknown argument"
}

// schemaOf is the inputSchema of a tool with params, described by docs.
func schemaOf(params []param, docs map[string]string) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		if p.unlisted {
			continue
		}
		s := maps.Clone(argKinds[p.typ].schema)
		s["description"] = docs[p.name]
		props[p.name] = s
		if p.required || p.listed {
			required = append(required, p.name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema
}

// decodeAs is the decoder of plain JSON values of type T; what names them
// in the refusal.
func decodeAs[T any](what string) func(json.RawMessage) (T, error) {
	return func(r json.RawMessage) (T, error) {
		var v T
		if json.Unmarshal(r, &v) != nil {
			var zero T
			return zero, fmt.Errorf("must be %s, got %s", what, clip(r))
		}
		return v, nil
	}
}

// decodeJobID takes a string, or an integer as its decimal digits.
func decodeJobID(r json.RawMessage) (jobID, error) {
	if integerID(r) {
		return jobID(r), nil
	}
	return decodeAs[jobID]("a string")(r)
}

// decodeJobIDs takes a non-empty array of job ids.
func decodeJobIDs(r json.RawMessage) ([]jobID, error) {
	var items []json.RawMessage
	if json.Unmarshal(r, &items) != nil || items == nil {
		return nil, fmt.Errorf("must be an array of strings, got %s", clip(r))
	}
	if len(items) == 0 {
		return nil, errors.New("must be non-empty")
	}
	ids := make([]jobID, len(items))
	for i, item := range items {
		var err error
		if ids[i], err = decodeJobID(item); err != nil {
			return nil, fmt.Errorf("must be an array of strings, got %s", clip(item))
		}
	}
	return ids, nil
}

// decodeStrings decodes an object of strings.
func decodeStrings(r json.RawMessage) (map[string]string, error) {
	obj, err := decodeObject(r)
	if err != nil {
		return nil, fmt.Errorf("must be an object of strings: %v", err)
	}
	strs := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("value of %q must be a string, got %s", k, clip(v))
		}
		strs[k] = s
	}
	return strs, nil
}

// decodeEnv decodes an env overlay: an object of strings with usable names.
func decodeEnv(r json.RawMessage) (map[string]string, error) {
	env, err := decodeStrings(r)
	for k, s := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("%q cannot be an environment variable (no '=' or NUL in names, no NUL in values)", k)
		}
	}
	return env, err
}

// decodeArgv takes a non-empty array of strings without NUL bytes.
func decodeArgv(r json.RawMessage) ([]string, error) {
	var argv []string
	if json.Unmarshal(r, &argv) != nil || argv == nil {
		return nil, fmt.Errorf("must be an array of strings, got %s", clip(r))
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("must name a program: a non-empty array whose first string is not empty")
	}
	if slices.ContainsFunc(argv, func(s string) bool { return strings.ContainsRune(s, 0) }) {
		return nil, errors.New("must not contain NUL bytes")
	}
	return argv, nil
}

// decodeReplyBytes takes a whole number of bytes, at least minReplyBytes.
func decodeReplyBytes(r json.RawMessage) (replyBytes, error) {
	n, err := parseInteger(r)
	if err != nil || n < minReplyBytes {
		return 0, fmt.Errorf("must be a whole number of bytes, at least %d, got %s", minReplyBytes, clip(r))
	}
	return replyBytes(min(n, math.MaxInt32)), nil
}

// decodeByteCount takes a whole number of bytes, 0 or more.
func decodeByteCount(r json.RawMessage) (byteCount, error) {
	n, err := parseInteger(r)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("must be a whole number of bytes, 0 or more, got %s", clip(r))
	}
	return byteCount(n), nil
}

// decodeLooseEnv takes an object of strings and keeps the entries whose
// names a shell could set, dropping the rest.
func decodeLooseEnv(r json.RawMessage) (looseEnv, error) {
	env, err := decodeStrings(r)
	for k, s := range env {
		if !shellName(k) || strings.ContainsRune(s, 0) {
			delete(env, k)
		}
	}
	return env, err
}

// shellName reports whether name is a portable variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func shellName(name string) bool {
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b != '_' && !isLetter(b) && !(i > 0 && b >= '0' && b <= '9') {
			return false
		}
	}
	return name != ""
}

// decodeArgList takes an array of strings and numbers (a number stands for
// its JSON spelling), none holding a NUL byte.
func decodeArgList(r json.RawMessage) (argList, error) {
	var items []json.RawMessage
	if json.Unmarshal(r, &items) != nil || items == nil {
		return nil, fmt.Errorf("must be an array of strings, got %s", clip(r))
	}
	args := make(argList, len(items))
	for i, item := range items {
		var s string
		switch {
		case isNull(item):
			return nil, fmt.Errorf("must be an array of strings, but item %d is null", i)
		case json.Unmarshal(item, &s) == nil:
		case isJSONNumber(item):
			s = string(item)
		default:
			return nil, fmt.Errorf("must be an array of strings, but item %d is %s", i, clip(item))
		}
		if strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("item %d contains a NUL byte, which would cut the argument short", i)
		}
		args[i] = s
	}
	return args, nil
}

// isJSONNumber reports whether r is a JSON number.
func isJSONNumber(r json.RawMessage) bool {
	var n json.Number
	return len(r) > 0 && (r[0] == '-' || r[0] >= '0' && r[0] <= '9') && json.Unmarshal(r, &n) == nil
}

// jobIDSchema says a job id is a string, or an integer meaning the same.
func jobIDSchema() map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
}

// envSchema says an env overlay is an object of strings.
func envSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
}

// streamSchema is the JSON Schema of a stream spec.
func streamSchema() map[string]any {
	return map[string]any{"anyOf": []any{
		map[string]any{"type": "string", "enum": []string{"none", "all"}},
		map[string]any{"type": "object", "properties": map[string]any{"tail": map[string]any{"type": "integer", "minimum": 0}}, "required": []string{"tail"}},
		map[string]any{"type": "object", "properties": map[string]any{
			"from": map[string]any{"type": "integer"}, "length": map[string]any{"type": "integer"}, "unaligned": map[string]any{"type": "boolean"},
		}, "required": []string{"from"}},
	}}
}

// captureSchema is the JSON Schema of a capture policy.
func captureSchema() map[string]any {
	spec := map[string]any{"anyOf": []any{
		map[string]any{"type": "string", "enum": []string{"stdout", "stderr", "all", "none"}},
		map[string]any{"type": "object", "properties": map[string]any{"stdout": streamSchema(), "stderr": streamSchema()}},
	}}
	return map[string]any{"type": "object", "properties": map[string]any{"on_success": spec, "on_error": spec}}
}
