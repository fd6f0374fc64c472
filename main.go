// mcp-exec is an MCP server over stdio that runs shell commands as jobs:
// execute, wait, status, output, input, kill and list_jobs.
//
// Its package-level variables are read-only once the program starts:
// tables, sentinel errors and facts read once (sync.OnceValue), except
// theProcess (what the process owns once: process.go), the few whose
// comment calls them process-wide state and names who writes them, and
// inputWaitDuration, which main sets from the configuration before it
// serves. The configuration is not one of them: loadConfig builds it once
// and it is passed down, read-only.
package main

import (
	"os"
	"strings"
)

// main is a job's launcher when started as one; else it serves one client
// on stdio, or many over HTTP with --listen, until the end, and exits 0.
func main() {
	if isLauncher(os.Args) {
		runLauncher(os.Args) // a job's launcher, never the server: does not return
	}
	settings, tokenFile := handleFlags(os.Args[1:])
	if tokenFile {
		printTokenFile(append(os.Environ(), settings...)) // does not return
	}
	cfg := mustLoadConfig(append(os.Environ(), settings...))
	// Before any job or session exists: every look for input wanted reads
	// it without a lock.
	inputWaitDuration = cfg.inputWait
	jobLog, err := openJobLog(cfg.jobLog)
	if err != nil {
		exit(2, "configuration error: %v", err)
	}
	srv := startServer(cfg, jobLog)
	if cfg.listen != "" {
		serveHTTP(srv)
	} else {
		serveStdio(srv)
	}
	os.Exit(0)
}

// serveStdio serves the one client on stdin and stdout until it leaves or
// a signal ends the server.
func serveStdio(srv *server) {
	t, err := openStdio(srv)
	if err != nil {
		exit(1, "%v", err)
	}
	if stdinIsTerminal() {
		// Someone typed the command by hand: without this line the server
		// would sit silent, looking hung. stderr only: stdout is the
		// client's.
		logf("%s", terminalHint)
	}
	_ = t.serveUntilDone(srv.stop) // why it stopped is the client's to know
	srv.shutdown()
	t.flush()
}

// printTokenFile prints the file of the bearer token a server started
// with environ reads (MCP_EXEC_TOKEN_FILE) or keeps (the one it generates
// for its port), and exits: 0, or 2 when there is none to name. It only
// reads the settings: no cgroup, no check of the kernel.
func printTokenFile(environ []string) {
	cfg, err := loadConfig(environ)
	if err != nil {
		exit(2, "configuration error: %v", err)
	}
	given := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "MCP_EXEC_TOKEN_FILE="); ok {
			given = v
		}
	}
	path, err := tokenFileOf(cfg, given)
	if err != nil {
		exit(2, "--token-file: %v", err)
	}
	os.Stdout.WriteString(path + "\n")
	os.Exit(0)
}

// serveHTTP serves HTTP clients until a signal ends the server.
func serveHTTP(srv *server) {
	t, err := openHTTP(srv)
	if err != nil {
		exit(2, "%v", err)
	}
	switch {
	case t.tokenPath != "":
		logf("no MCP_EXEC_TOKEN or MCP_EXEC_TOKEN_FILE is set: clients must send the token generated in %s (readable by this user only)", t.tokenPath)
	case t.token == nil:
		logf("MCP_EXEC_HTTP_AUTH=none: no token; every local user can run commands as uid %d here", os.Geteuid())
	}
	logf("serving MCP on http%s://%s/mcp (and /healthz, /metrics, /exec)", map[bool]string{true: "s"}[srv.cfg.tlsCert != ""], t.addr())
	logf("stopping: %s", t.serveUntilDone(srv.stop))
	srv.shutdown()
	t.close()
}

// mustLoadConfig loads the configuration or exits with status 2 and one line
// on stderr.
func mustLoadConfig(environ []string) *config {
	cfg, err := loadConfig(environ)
	if err == nil {
		err = checkConfinement(cfg)
	}
	if err == nil {
		err = startTrees(cfg)
	}
	if err != nil {
		exit(2, "configuration error: %v", err)
	}
	return cfg
}
