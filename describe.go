package main

import (
	"fmt"
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
	)
}

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
