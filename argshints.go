package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A model that names an argument wrongly most often means one the tool
// has under another name ("timeout" for yield_after or time_limit, "cmd"
// for command). Under the agent profile an unknown argument's refusal
// names the nearest accepted ones and what they do, which a model can act
// on in its next call; elsewhere the refusal lists every accepted name,
// as 1.1 did.

// argMeaning says in a few words what each argument does, for the hint;
// toolArgMeaning overrides it where a tool gives a name its own sense.
var argMeaning = map[string]string{
	"command":          "the shell command line to run",
	"argv":             "the program and its arguments, run without a shell",
	"args":             "the program's arguments",
	"cwd":              "the directory to run in",
	"env":              "variables to set for the job",
	"stdin":            "bytes written to the job's stdin first",
	"close_stdin":      "close stdin after writing it",
	"yield_after":      "seconds before a running job is returned",
	"time_limit":       "seconds before it is killed",
	"timeout":          "seconds to wait",
	"timeout_seconds":  "seconds before it is killed",
	"until":            "return when the output matches",
	"nowait":           "return the job id at once",
	"tty":              "run on a terminal",
	"capture":          "what a finished job's result carries",
	"job_id":           "the job to act on",
	"job_ids":          "the jobs to wait for",
	"job":              "the job to act on",
	"stdout":           `which stdout to return: {"tail": N}, {"from": P} or {"grep": RE2}`,
	"stderr":           `which stderr to return: {"tail": N}, {"from": P} or {"grep": RE2}`,
	"signal":           "the signal to send",
	"plain":            "text without terminal escapes",
	"data":             "the text to write to the job's stdin",
	"close":            "close the job's stdin after writing",
	"max_reply_bytes":  "the reply's size bound",
	"max_output_bytes": "bytes of output returned at most",
	"cursor":           "where the previous read ended",
}

// toolArgMeaning is argMeaning for a tool whose argument means more.
var toolArgMeaning = map[string]string{
	"kill.timeout": "seconds to wait for death",
}

// argAliases are names models use for an argument, normalized (see
// normalArg), with the arguments they stand for; only those the tool
// takes are offered.
var argAliases = map[string][]string{
	"timeout":     {"yield_after", "time_limit", "timeout_seconds"},
	"cmd":         {"command", "argv"},
	"cmdline":     {"command"},
	"commandline": {"command"},
	"script":      {"command"},
	"shell":       {"command"},
	"run":         {"command"},
	"program":     {"argv", "command"},
	"dir":         {"cwd"},
	"directory":   {"cwd"},
	"workdir":     {"cwd"},
	"workingdir":  {"cwd"},
	"path":        {"cwd"},
	"cd":          {"cwd"},
	"environment": {"env"},
	"vars":        {"env"},
	"input":       {"data", "stdin"},
	"text":        {"data", "stdin"},
	"keys":        {"data"},
	"line":        {"data"},
	"value":       {"data"},
	"id":          {"job_id", "job"},
	"pid":         {"job_id", "job"},
	"ids":         {"job_ids"},
	"jobs":        {"job_ids"},
	"background":  {"nowait"},
	"async":       {"nowait"},
	"detach":      {"nowait"},
	"detached":    {"nowait"},
	"lines":       {"stdout"},
	"tail":        {"stdout"},
	"head":        {"stdout"},
	"grep":        {"stdout", "until"},
	"pattern":     {"until", "stdout"},
	"regex":       {"until", "stdout"},
	"sig":         {"signal"},
	"limit":       {"max_reply_bytes", "max_output_bytes"},
	"maxbytes":    {"max_reply_bytes", "max_output_bytes"},
	"deadline":    {"time_limit", "timeout_seconds"},
	"pty":         {"tty"},
	"terminal":    {"tty"},
	"interactive": {"tty"},
	"eof":         {"close", "close_stdin"},
}

// streamObjectForms are the stream specs that are objects, in a few words.
const streamObjectForms = `as an object: {"tail": N} (the last N lines), {"from": P, "length": L} (bytes from offset P) or {"grep": RE2} (the lines that match)`

// agentArgHint is err, an argument's refusal, with what a model needs to
// get the next call right: the nearest accepted arguments for an unknown
// one (nearMissHint), the object forms for a stream spec given as a bare
// word. Other refusals are returned as they are.
func agentArgHint(err error) error {
	var bare bareStreamWordError
	if errors.As(err, &bare) {
		return fmt.Errorf("%w; %s", err, streamObjectForms)
	}
	return nearMissHint(err)
}

// nearMissHints is the most names a hint offers.
const nearMissHints = 2

// nearMissHint is err with an unknown argument's refusal worded as the
// nearest accepted arguments and what they do, when one is near; else
// err as it is.
func nearMissHint(err error) error {
	var unknown *unknownArgsError
	if !errors.As(err, &unknown) || len(unknown.unknown) != 1 {
		return err
	}
	name, qerr := strconv.Unquote(unknown.unknown[0])
	if qerr != nil {
		return err
	}
	near := nearestArgs(name, unknown.params)
	if len(near) == 0 {
		return err
	}
	offers := make([]string, len(near))
	for i, n := range near {
		offers[i] = n
		if m := meaningOf(unknown.tool, n); m != "" {
			offers[i] += " (" + m + ")"
		}
	}
	return fmt.Errorf("%w: unknown argument %s for %s; did you mean %s?", errInvalid, unknown.unknown[0],
		unknown.tool, strings.Join(offers, " or "))
}

// meaningOf is what argument name does in tool, in a few words.
func meaningOf(tool, name string) string {
	if m, ok := toolArgMeaning[tool+"."+name]; ok {
		return m
	}
	return argMeaning[name]
}

// nearestArgs are the accepted arguments given most likely meant, at most
// nearMissHints: those its alias stands for, else those a typo or two
// away.
func nearestArgs(given string, params []param) []string {
	accepted := map[string]bool{}
	for _, p := range params {
		accepted[p.name] = true
	}
	key := normalArg(given)
	var near []string
	for _, a := range argAliases[key] {
		if accepted[a] && len(near) < nearMissHints {
			near = append(near, a)
		}
	}
	if len(near) > 0 {
		return near
	}
	type typo struct {
		name     string
		distance int
	}
	var typos []typo
	for _, p := range params {
		if d := editDistance(key, normalArg(p.name)); d <= max(1, len(key)/4) {
			typos = append(typos, typo{p.name, d})
		}
	}
	// The closest first; among equals, the tool's own order.
	slices.SortStableFunc(typos, func(a, b typo) int { return a.distance - b.distance })
	for _, t := range typos[:min(len(typos), nearMissHints)] {
		near = append(near, t.name)
	}
	return near
}

// normalArg is name without case, '_' or '-': jobId, job-id and job_id
// are one name.
func normalArg(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, strings.ToLower(name))
}
