package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// The protocol revisions served, and how each shapes a reply. The legacy
// era (2024-11-05 to 2025-11-25) begins with initialize, which fixes the
// session's revision. The modern era (2026-07-28) has no handshake: each
// request names its revision and the client's capabilities in _meta. The
// era is chosen request by request (1.0's shapes before initialize); jobs
// belong to the session whatever the era of the requests naming them.

// The revisions served, newest first. initialize echoes one of
// supportedVersions, never a modern one (legacy clients reject it).
var (
	supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} // supportedVersions are the legacy revisions
	modernVersions    = []string{"2026-07-28"}                                           // modernVersions are the modern revisions
)

// The reserved _meta keys of the modern era.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaProgressOutput  = "com.mcp-exec/progressOutput" // ours: true asks progress to carry the newest output lines
)

// logLevels are the levels a modern request may ask for (RFC 5424).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Legacy revisions that change what a session may do.
const (
	firstStructuredVersion = "2025-06-18" // firstStructuredVersion is the first with titles, outputSchema and structuredContent
	batchVersion           = "2025-03-26" // batchVersion is the one whose clients may send batches
)

// shapeOf is the shape for a request of the given era in a session that
// negotiated legacy revision negotiated ("" before initialize).
func shapeOf(modern bool, negotiated string) replyShape {
	// Revisions are dates, so they compare as strings.
	return replyShape{modern: modern, structured: modern || negotiated >= firstStructuredVersion}
}

// modernRequest reports whether params carry the modern era's _meta, and
// answers the errors the revision names: -32022 for a revision not served,
// -32602 for a required field missing or malformed. caps is a modern
// request's clientCapabilities object, as sent.
func modernRequest(params json.RawMessage) (modern bool, caps json.RawMessage, rerr *rpcError) {
	// Most requests say nothing of the sort: look for the key's bytes first.
	if !bytes.Contains(params, []byte("io.modelcontextprotocol/")) {
		return false, nil, nil
	}
	p, err := decodeObject(params)
	if err != nil {
		return false, nil, nil // the method's own checks answer a malformed params
	}
	meta, err := decodeObject(p["_meta"])
	if err != nil {
		return false, nil, nil
	}
	rawVersion, hasVersion := meta[metaProtocolVersion]
	_, hasCaps := meta[metaClientCaps]
	if !hasVersion && !hasCaps {
		return false, nil, nil
	}
	var asked string
	if !hasVersion || json.Unmarshal(rawVersion, &asked) != nil {
		return true, nil, newError(codeInvalidParams, "invalid params: _meta[%q] must name the protocol revision (served: %s)", metaProtocolVersion, strings.Join(modernVersions, ", "))
	}
	if !slices.Contains(modernVersions, asked) {
		e := newError(codeUnsupportedVersion, "unsupported protocol version %q (served: %s; legacy clients use initialize with %s)",
			clipText(asked), strings.Join(modernVersions, ", "), strings.Join(supportedVersions, ", "))
		e.Data = map[string]any{"supported": modernVersions, "requested": asked}
		return true, nil, e
	}
	if c, ok := meta[metaClientCaps]; !ok || len(c) == 0 || c[0] != '{' {
		return true, nil, newError(codeInvalidParams, "invalid params: _meta[%q] is required in %s and must be an object", metaClientCaps, asked)
	}
	if raw, ok := meta[metaLogLevel]; ok {
		var level string
		if json.Unmarshal(raw, &level) != nil || !slices.Contains(logLevels, level) {
			return true, nil, newError(codeInvalidParams, "invalid params: _meta[%q] must be one of %s", metaLogLevel, strings.Join(logLevels, ", "))
		}
	}
	return true, meta[metaClientCaps], nil
}

// serverInfo names this server.
func serverInfo() map[string]any {
	return map[string]any{"name": "mcp-exec", "version": version}
}

// modernResultHead is what a modern result object starts with, before its
// own members.
func modernResultHead() []byte { return modernResultHeadAs(resultComplete) }

// modernResultHeadAs is modernResultHead for a result of another
// resultType ("task").
func modernResultHeadAs(resultType string) []byte {
	info, _ := marshal(serverInfo()) // cannot fail: two strings
	return concat(`{"resultType":"`+resultType+`","_meta":{"`+metaServerInfo+`":`, info, "}")
}

// typedResult is a modern result whose resultType is not "complete": body
// is dressed with resultType (a tools/call answered with a task). It is
// the request's answer as it is: no tool's result.
type typedResult struct {
	resultType string
	body       any // a wire value: what json.Marshal encodes
}

// finish is r: the request's whole answer.
func (r typedResult) finish(*toolCall) (answer, error) { return r, nil }

// wire is r's body encoded as a result object of its resultType.
func (r typedResult) wire() (wireAnswer, error) { return wireOf(r.body, r.resultType) }

// toolError is "": r is no tool error.
func (r typedResult) toolError() string { return "" }

// callResult is r's encoding as one text item: r is never a tool's
// result, so this is for completeness.
func (r typedResult) callResult(structured bool) callResultJSON {
	text, _ := marshal(r.body) // a wire value: the reply encoded it first
	return toolText(text).callResult(structured)
}

// dressResultAs gives an encoded result object the modern era's members,
// with resultType.
func dressResultAs(res []byte, resultType string) []byte {
	head := modernResultHeadAs(resultType)
	body := bytes.TrimSpace(res[1:]) // after the object's "{"
	if len(body) > 0 && body[0] != '}' {
		head = append(head, ',')
	}
	return append(head, body...)
}
