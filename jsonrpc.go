package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxLineBytes caps one request line. A longer line is answered with a parse
// error and skipped without being held in memory.
const maxLineBytes = 16 << 20

// JSON-RPC error codes, and those MCP adds.
const (
	codeParse              = -32700
	codeInvalidRequest     = -32600
	codeNoMethod           = -32601
	codeInvalidParams      = -32602
	codeInternal           = -32603
	codeCancelled          = -32800
	codeHeaderMismatch     = -32020 // a modern request's HTTP headers disagree with its body
	codeMissingCapability  = -32021 // a modern request needs a capability its client did not declare
	codeUnsupportedVersion = -32022 // a modern request's revision is not served; its data lists those that are
)

// rpcError is a JSON-RPC error reply.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Error is the message the client is sent.
func (e *rpcError) Error() string { return e.Message }

// newError is a JSON-RPC error with code and a formatted message.
func newError(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// errLineTooLong reports a request line over maxLineBytes.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its terminator. A line longer than
// limit is consumed and dropped, and errLineTooLong returned. At EOF a last
// unterminated line is returned with io.EOF.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		content := len(line) + len(chunk)
		if err == nil {
			content-- // the newline is not part of the line
		}
		if content > limit {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		if cap(line)-len(line) < len(chunk) {
			// Double explicitly: append's gentler growth would allocate
			// about five times a long line's size on the way to the cap.
			grown := make([]byte, len(line), min(max(2*cap(line), len(line)+len(chunk)), limit+1))
			copy(grown, line)
			line = grown
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			line = line[:len(line)-1]
		}
		return line, err
	}
}

// validID accepts string ids and integer ids of any size (echoed verbatim,
// so 2^53+1 survives). null, fractions and exponents are rejected.
func validID(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		// Echoed byte for byte, so it must be valid UTF-8 itself.
		var s string
		return utf8.Valid(id) && json.Unmarshal(id, &s) == nil
	}
	return integerID(id)
}

// idKey maps an id to a comparable key: "7" and 7 stay different ids, and
// two spellings of the same string are the same id.
func idKey(id json.RawMessage) (string, bool) {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	if integerID(id) {
		return "n" + string(id), true
	}
	return "", false
}

// errorCodes maps the sentinels a request may fail with to JSON-RPC codes.
var errorCodes = []struct {
	err  error
	code int
}{
	{errCancelled, codeCancelled},
	{errBadParams, codeInvalidParams},
	{errUnknownTool, codeInvalidParams},
}

// rpcErrorOf is the JSON-RPC error a request that failed with err answers:
// an *rpcError as it is, a sentinel of errorCodes with its code, anything
// else an internal error.
func rpcErrorOf(err error) *rpcError {
	var rerr *rpcError
	if errors.As(err, &rerr) {
		return rerr
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return newError(e.code, "%v", err)
		}
	}
	return newError(codeInternal, "internal error: %v", err)
}
