package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// placeholders fills the {names} of descriptions with the values in force.
func placeholders(cfg *config) *strings.Replacer {
	return strings.NewReplacer(
		"{window}", sizeWords(cfg.maxOutputBytes),
		"{budget}", sizeWords(cfg.maxReplyBytes),
		"{wait}", secondsWords(cfg.defaultTimeout, "none: polls"),
		"{yield}", secondsWords(cfg.yieldAfter, "off"),
		"{time_limit}", secondsWords(cfg.timeLimit, "none"),
		"{grace}", secondsWords(cfg.killGrace, "at once"),
		"{capture}", captureWords(cfg.capture),
		"{policy}", policyWords(cfg),
		"{exec_timeout}", secondsWords(execTimeout(cfg), ""),
		"{exec_max_timeout}", ifSet(cfg.maxTimeLimit > 0, ", at most "+secondsWords(cfg.maxTimeLimit, "")),
		"{exec_cwd}", execCwdWords(cfg),
		"{shell_timeout}", secondsWords(shellRunDefault(cfg), ""),
		"{shell_bytes}", sizeWords(cfg.shellOutputBytes),
		"{shell_lines}", strconv.Itoa(cfg.shellOutputLines),
		"{shell_allow}", shellAllowWords(cfg),
		"{ttl}", secondsWords(cfg.jobTTL, "ever"),
		"{finished}", strconv.Itoa(cfg.maxFinished),
		"{max_jobs}", ifSet(cfg.maxJobs > 0, fmt.Sprintf(" At most %d jobs run at once.", cfg.maxJobs)),
		"{retained}", retainedWords(cfg),
		"{kept}", secondsWords(cfg.keptDuration, "no time"),
		"{block}", blockWords(cfg),
		"{yield_advice}", yieldAdviceWords(cfg),
		"{carry}", carryWords(cfg),
		"{keep_cwd}", ifSet(cfg.keepCwd, " "+carryWords(cfg)),
		"{cwd_default}", cwdDefaultWords(cfg),
		"{max_yield}", ifSet(cfg.maxYield > 0, ", at most "+secondsWords(cfg.maxYield, "")),
		"{highlights}", ifSet(cfg.highlight != nil, " A cut result's highlights [{stream, offset, line}] are lines of the gap that look like failures."),
		"{mask}", maskWords(cfg),
		"{env_defaults}", ifSet(cfg.jobEnvDefaults, " Unless set, jobs get NO_COLOR=1, PAGER=cat, GIT_PAGER=cat, on pipes TERM=dumb; an env value \"\" unsets."),
	)
}

// maskWords says, in one sentence, what output masks under cfg.
func maskWords(cfg *config) string {
	var what []string
	if cfg.mask.values {
		what = append(what, "values of secret-named variables")
	}
	if cfg.mask.patterns {
		what = append(what, "token formats")
	}
	if len(what) == 0 {
		return ""
	}
	return " Output shows secrets (" + strings.Join(what, ", ") + ") as [masked:NAME]; MCP_EXEC_MASK=off on the server turns that off."
}

// retainedWords says what each stream of a job keeps under cfg.
func retainedWords(cfg *config) string {
	if cfg.keepHeadBytes > 0 {
		return "its first " + sizeWords(cfg.keepHeadBytes) + " and last " + sizeWords(cfg.maxOutputBytes)
	}
	return "its last " + sizeWords(cfg.maxOutputBytes)
}

// blockWords says how long a blocking execute blocks under cfg.
func blockWords(cfg *config) string {
	if cfg.yieldAfter > 0 {
		return "Blocks until it exits or for " + secondsWords(cfg.yieldAfter, "") +
			", then returns the running job (yielded:true) to collect with wait; nowait:true returns at once."
	}
	return "Blocks until it exits; for anything over a minute use nowait:true or yield_after, then wait."
}

// yieldAdviceWords tells the model how its calls stay under a host's
// time-out under cfg.
func yieldAdviceWords(cfg *config) string {
	wait := secondsWords(cfg.defaultTimeout, "0: polls")
	if cfg.yieldAfter > 0 {
		return "execute blocks at most " + secondsWords(cfg.yieldAfter, "") + " (yield_after), then returns the running job; " +
			"collect it with wait (timeout default " + wait + "): no call outlasts a host's 60 s time-out."
	}
	return "execute blocks until the job ends: for anything over a minute (a host's usual time-out) use nowait:true or yield_after, " +
		"then wait (timeout default " + wait + ")."
}

// carryWords says, in one sentence, what carries over from one call to the
// next: the model would otherwise assume the persistent shell it knows.
func carryWords(cfg *config) string {
	if cfg.keepCwd {
		return "Each call runs in a new shell: variables and functions never carry over; " +
			"the directory does (a call without cwd starts where the previous blocking execute's shell ended)."
	}
	return "Each call runs in a new shell: nothing carries over (cd, variables); give cwd and env per call."
}

// cwdDefaultWords names the directory a job starts in without cwd.
func cwdDefaultWords(cfg *config) string {
	if cfg.keepCwd {
		return "where the previous blocking execute's shell ended, at first the server's"
	}
	return "the server's"
}

// textOf is t's description and argument docs in the words of d,
// placeholders not yet filled.
func textOf(t *toolSpec, d dialect) toolWords {
	if !d.agent || t.agent == nil {
		return toolWords{t.description, t.docs}
	}
	docs := maps.Clone(t.docs)
	maps.Copy(docs, t.agent.docs)
	return toolWords{t.agent.description, docs}
}

// plainSchemaOf is the inputSchema of params under the agent profile: what
// a model reads on every turn, so each argument is its JSON type(s) and the
// doc that says the rest, without nested alternatives; only the arguments
// a call must give are required (command is one of command or argv).
func plainSchemaOf(params []param, docs map[string]string) map[string]any {
	props := map[string]any{}
	var required []string
	for _, p := range params {
		s := plainSchema(argKinds[p.typ].schema)
		s["description"] = docs[p.name]
		props[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema
}

// plainSchema is a copy of s with alternatives (anyOf) reduced to their
// types and an object's properties left to the description.
func plainSchema(s map[string]any) map[string]any {
	alts, ok := s["anyOf"].([]any)
	if !ok {
		out := maps.Clone(s)
		if out["type"] == "object" {
			delete(out, "properties")
			delete(out, "required")
		}
		if items, ok := out["items"].(map[string]any); ok {
			out["items"] = plainSchema(items)
		}
		return out
	}
	var types []string
	for _, alt := range alts {
		if t, ok := alt.(map[string]any)["type"].(string); ok && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if len(types) == 1 {
		return map[string]any{"type": types[0]}
	}
	return map[string]any{"type": types}
}

// openObjectSchema is every tool's outputSchema under the agent profile:
// clients validate structuredContent against it and models do not read
// it, so an open object says all that is needed.
func openObjectSchema() map[string]any { return map[string]any{"type": "object"} }

// ifSet is text when cond holds, else "".
func ifSet(cond bool, text string) string {
	if cond {
		return text
	}
	return ""
}

// execCwdWords names the exec tool's default working directory.
func execCwdWords(cfg *config) string {
	if cfg.execCwd != "" {
		return cfg.execCwd
	}
	if cfg.roots != nil {
		return cfg.roots[0] + "; must be inside " + strings.Join(cfg.roots, ", ")
	}
	return "the server's"
}

// shellAllowWords states the shell set's allow list.
func shellAllowWords(cfg *config) string {
	if cfg.allow == nil {
		return " Any program may run."
	}
	return " Allowed (exactly as spelled): " + strings.Join(sortedAllow(cfg), ", ") + "."
}

// policyWords states the policy in force for tool descriptions, or "" when
// none is set.
func policyWords(cfg *config) string {
	var parts []string
	if cfg.allow != nil {
		how := "spelled exactly"
		if cfg.offers(toolSetJobs) || cfg.offers(toolSetExec) {
			how = "argv[0] spelled exactly; command needs the shell"
		}
		parts = append(parts, "programs allowed ("+how+"): "+strings.Join(cfg.allow, ", "))
	}
	if cfg.roots != nil {
		parts = append(parts, "cwd must be inside "+strings.Join(cfg.roots, ", ")+" (default "+cfg.roots[0]+")")
	}
	switch cfg.sandbox {
	case sandboxReadOnly:
		parts = append(parts, "read-only sandbox: jobs write only to their own $TMPDIR and /dev/null (kernel-enforced; other writes fail with Permission denied or Read-only file system)"+metadataWords())
	case sandboxRoots:
		parts = append(parts, "sandbox: jobs write only inside "+strings.Join(cfg.roots, ", ")+", their own $TMPDIR and /dev/null (kernel-enforced)"+metadataWords())
	}
	if cfg.networkOff {
		parts = append(parts, "network off: jobs cannot open IP sockets (no downloads, no package installs)")
	}
	if cfg.rlimitsText != "" {
		parts = append(parts, "each job's resource limits: "+cfg.rlimitsText)
	}
	if len(cfg.envDeny) > 0 {
		parts = append(parts, "env may not set "+strings.Join(sortedKeys(cfg.envDeny), ", "))
	}
	if cfg.maxJobs > 0 {
		parts = append(parts, fmt.Sprintf("at most %d jobs run at once", cfg.maxJobs))
	}
	if cfg.jobTTL > 0 && cfg.offers(toolSetJobs) { // the shell set states its own
		parts = append(parts, "finished jobs not collected within "+secondsWords(cfg.jobTTL, "")+" are forgotten")
	}
	if cfg.maxFinished > 0 && cfg.offers(toolSetJobs) {
		parts = append(parts, fmt.Sprintf("at most %d finished jobs wait to be collected", cfg.maxFinished))
	}
	if len(parts) == 0 {
		return ""
	}
	return " Policy: " + strings.Join(parts, "; ") + "."
}

// metadataWords tells a model, where jobs have no mount namespace of their
// own, that changing files' metadata fails even where they may write.
func metadataWords() string {
	if mountNamespaces() {
		return ""
	}
	return "; chmod, chown, setting times (touch -d, cp -p) and xattrs fail everywhere"
}

// sizeWords writes a byte count for people: 1 MiB, 64 KiB, 1500 bytes.
func sizeWords(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// secondsWords writes a duration in seconds, or zero's meaning.
func secondsWords(d time.Duration, zero string) string {
	if d <= 0 {
		return zero
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// captureWords writes a capture policy as its JSON shorthand when it has one.
func captureWords(p capturePolicy) string {
	word := func(c captureSpec) string {
		for name, spec := range captureShorthand {
			if spec == c {
				return `"` + name + `"`
			}
		}
		return "a custom spec"
	}
	return `{"on_success": ` + word(p.onSuccess) + `, "on_error": ` + word(p.onError) + `}`
}
