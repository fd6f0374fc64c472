package main

import "errors"

// Sentinels that map errors to replies. Every error a tool handler returns,
// except errCancelled, becomes a tool error (a result with isError, for the
// model to read); the ones a caller can act on wrap errInvalid,
// errUnknownJob, errNotRunning, errAlreadyClosed, errStdinBroken,
// errRefused or errExhausted.
// JSON-RPC errors: errCancelled is -32800, errBadParams and errUnknownTool
// are -32602; anything else is -32603.
var (
	errCancelled     = errors.New("request cancelled")
	errBadParams     = errors.New("invalid params")
	errUnknownTool   = errors.New("unknown tool")
	errInvalid       = errors.New("invalid argument")
	errUnknownJob    = errors.New("unknown job_id")
	errNotRunning    = errors.New("no longer running")
	errAlreadyClosed = errors.New("already closed")
	errStdinBroken   = errors.New("nothing reads its stdin any more (broken pipe)")
	errRefused       = errors.New("refused by policy")
	errExhausted     = errors.New("cannot start a job")
)

// errTooManyJobs is a refusal because MCP_EXEC_MAX_JOBS jobs run already,
// for the contracts that report it in a shape of their own.
var errTooManyJobs = errors.New("too many running jobs")

// tooManyJobs is such a refusal: its text is its own, and it is both
// errRefused and errTooManyJobs. active is how many jobs ran when it was
// refused.
type tooManyJobs struct {
	text   string
	active int
}

// Error is the refusal's text, naming the limit and the jobs running.
func (e tooManyJobs) Error() string { return e.text }

// Is makes the refusal both errRefused and errTooManyJobs.
func (e tooManyJobs) Is(target error) bool { return target == errRefused || target == errTooManyJobs }

// refusingSetting names the setting behind the refusal, for the job log.
func (e tooManyJobs) refusingSetting() string { return "MCP_EXEC_MAX_JOBS" }

// refusal is a refusal by one setting: its text is err's, which wraps
// errRefused, and setting names the setting that refused (for the job log).
type refusal struct {
	setting string
	err     error
}

// refusedBy marks err, a refusal, as setting's.
func refusedBy(setting string, err error) error { return refusal{setting, err} }

// Error is the refusal's own text.
func (e refusal) Error() string { return e.err.Error() }

// Unwrap gives the refusal, which wraps errRefused.
func (e refusal) Unwrap() error { return e.err }

// refusingSetting names the setting that refused, for the job log.
func (e refusal) refusingSetting() string { return e.setting }

// refusingSetting is the setting that refused err, or "" when err is no
// refusal by a setting.
func refusingSetting(err error) string {
	var r interface{ refusingSetting() string }
	if errors.As(err, &r) {
		return r.refusingSetting()
	}
	return ""
}
