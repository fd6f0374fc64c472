package main

import "errors"

// Sentinels that map errors to replies. A tool error (a result with isError,
// for the model to read) wraps errInvalid, errUnknownJob, errNotRunning or
// errAlreadyClosed. JSON-RPC errors: errCancelled is -32800, errBadParams
// and errUnknownTool are -32602.
var (
	errCancelled     = errors.New("request cancelled")
	errBadParams     = errors.New("invalid params")
	errUnknownTool   = errors.New("unknown tool")
	errInvalid       = errors.New("invalid argument")
	errUnknownJob    = errors.New("unknown job_id")
	errNotRunning    = errors.New("no longer running")
	errAlreadyClosed = errors.New("already closed")
)
