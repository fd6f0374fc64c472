package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// cliOption is one command-line option that takes a value and stands for
// a setting of the environment.
type cliOption struct {
	name    string // the option as typed, "--listen"
	setting string // the environment variable the value sets
	needs   string // what a missing value should have been, with an example
}

// cliOptions are the options taking a value, each accepted as --name=VALUE
// and --name VALUE.
var cliOptions = []cliOption{
	{name: "--listen", setting: "MCP_EXEC_LISTEN", needs: "an address, e.g. --listen 127.0.0.1:8080"},
}

// cliAction is what the command line asks for.
type cliAction int

const (
	actServe     cliAction = iota // serve, with the settings the options give
	actVersion                    // print the version and exit
	actHelp                       // print the help and exit
	actTokenFile                  // print the file of the token an HTTP server on --listen's port keeps, and exit
)

// cliFlags are the arguments taking no value, with what each asks for.
var cliFlags = map[string]cliAction{
	"--version": actVersion, "-version": actVersion, "-v": actVersion,
	"--help": actHelp, "-help": actHelp, "-h": actHelp,
	"--token-file": actTokenFile,
}

// usageError is a command line the server cannot follow; its text names
// what is wrong and what was expected.
type usageError struct{ msg string }

// Error is the one line printed before the pointer to --help.
func (e *usageError) Error() string { return e.msg }

// usageErrorf is a usageError of the formatted text.
func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// terminalHint is the line on stderr when stdin is a terminal.
const terminalHint = "waiting for MCP messages (JSON-RPC, one per line) on stdin; an MCP client normally starts this server. Run mcp-exec --help for how to try it by hand"

// parseArgs reads the command line (without the program name): what it
// asks for and, to serve, the settings its options stand for (NAME=value,
// appended to the environment). --help or --version anywhere wins. An
// unknown argument, an option without its value or one given twice is an
// *usageError whose text names what is wrong.
func parseArgs(args []string) (cliAction, []string, error) {
	var settings []string
	seen := map[string]bool{}
	act := actServe
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(arg, "=")
		if flag, ok := cliFlags[name]; ok {
			if hasValue {
				return actServe, nil, usageErrorf("%s takes no value", name)
			}
			if flag != actTokenFile { // it reads --listen: the options go on
				return flag, nil, nil
			}
			act = flag
			continue
		}
		opt, ok := optionNamed(name)
		if !ok {
			return actServe, nil, usageErrorf("unknown argument %q", arg)
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			value, hasValue = args[i], true
		}
		if !hasValue || value == "" {
			return actServe, nil, usageErrorf("%s needs %s", opt.name, opt.needs)
		}
		if seen[opt.name] {
			return actServe, nil, usageErrorf("%s is given twice; give it once", opt.name)
		}
		seen[opt.name] = true
		settings = append(settings, opt.setting+"="+value)
	}
	return act, settings, nil
}

// optionNamed is the option called name, if there is one.
func optionNamed(name string) (cliOption, bool) {
	for _, o := range cliOptions {
		if o.name == name {
			return o, true
		}
	}
	return cliOption{}, false
}

// handleFlags answers --version and --help and returns the settings the
// other arguments stand for; a usage error exits 2 after one line on
// stderr pointing to --help. A first argument naming this very executable
// is skipped, as an image run with its own path as command (`podman run
// IMAGE /usr/local/bin/mcp-exec`) passes it through the entrypoint.
func handleFlags(args []string) (settings []string, tokenFile bool) {
	if len(args) > 0 && isOwnExecutable(args[0]) {
		args = args[1:]
	}
	act, settings, err := parseArgs(args)
	if err != nil {
		exit(2, "%v; run mcp-exec --help for the usage", err)
	}
	switch act {
	case actVersion:
		fmt.Printf("mcp-exec %s (commit %s, %s)\n", version, buildCommit(), runtime.Version())
		os.Exit(0)
	case actHelp:
		fmt.Print(usage())
		os.Exit(0)
	}
	return settings, act == actTokenFile
}

// tryExample is the first --help example: one call through a pipe. The
// sleep keeps stdin open while the job runs, since a call still running
// when stdin closes is answered cancelled (-32800).
const tryExample = `(printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"try","version":"0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo hello from a job"}}}'; \
   sleep 1) | mcp-exec`

// usage is the --help text.
func usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp-exec %s: an MCP server over stdio that runs shell commands as jobs.\n\n", version)
	b.WriteString("Usage: mcp-exec            serve MCP (newline-delimited JSON-RPC) on stdin/stdout\n")
	b.WriteString("       mcp-exec --listen HOST:PORT  serve MCP over Streamable HTTP at /mcp, with /healthz, /metrics, /exec\n")
	b.WriteString("                           (also --listen=HOST:PORT)\n")
	b.WriteString("       mcp-exec --token-file --listen HOST:PORT  print the file of the bearer token that server keeps\n")
	b.WriteString("       mcp-exec --version  print the version\n       mcp-exec --help     print this help\n")
	b.WriteString("A first argument naming this executable itself is skipped (an image run with its own path).\n\n")
	b.WriteString("Environment:\n")
	for _, v := range configVars {
		def := "; default " + v.def
		if v.def == "" { // its doc says what unset means
			def = ""
		}
		if v.agentDef != "" {
			def += " (agent: " + v.agentDef + ")"
		}
		fmt.Fprintf(&b, "  %s\n      %s%s\n", v.name, v.doc, def)
	}
	b.WriteString("  SHELL                       jobs run as $SHELL -c COMMAND (/bin/sh when unset)\n\n")
	b.WriteString(treeWords(probeTreeKind(cgroupSetting())) + "\n\n")
	b.WriteString("Examples:\n")
	b.WriteString("  Run one command by hand (stdin stays open a second, so the call is answered):\n")
	b.WriteString("  " + tryExample + "\n\n")
	b.WriteString("  Serve over HTTP on loopback; the bearer token's file is named on stderr:\n")
	b.WriteString("  mcp-exec --listen 127.0.0.1:8080\n\n")
	b.WriteString("Documentation: docs/ and README.md in the source repository; installed from the\n")
	b.WriteString("Debian package, /usr/share/doc/mcp-exec (README.md and docs/).\n")
	return b.String()
}

// exit ends the process with status after one line on stderr.
func exit(status int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcp-exec: "+format+"\n", args...)
	os.Exit(status)
}

// isOwnExecutable reports whether path names the file this process runs.
func isOwnExecutable(path string) bool {
	if !strings.Contains(path, "/") {
		return false // a bare word is a flag or a typo, never our path
	}
	self, err := os.Executable()
	if err != nil {
		return false
	}
	a, errA := os.Stat(path)
	b, errB := os.Stat(self)
	return errA == nil && errB == nil && os.SameFile(a, b)
}
