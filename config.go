package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// config is the server's configuration, read once from the environment by
// loadConfig and read-only from then on: every session and transport shares
// one, and it keys the tool caches (toolTables, toolLists). Its slices and
// maps are never written either; the lists are clipped, so a reader's
// append copies. A view with another value is a new config (withUsage).
type config struct {
	profile          string        // compat (1.0) or agent: which defaults apply
	defaultTimeout   time.Duration // wait's timeout when none is given
	maxOutputBytes   int           // window size per stream per job
	keepHeadBytes    int           // first bytes of each stream kept past the window
	progressInterval time.Duration // between progress notifications
	timeLimit        time.Duration // a job's time limit when execute gives none; 0: none
	killGrace        time.Duration // between TERM and KILL when a time limit ends a job
	yieldAfter       time.Duration // a blocking execute's yield_after when none is given; 0: never
	maxYield         time.Duration // the longest wait timeout or yield_after a call blocks for; 0: no bound
	maxReplyBytes    int           // the reply budget of a tools/call line
	keptDuration     time.Duration // how long a cut result's job stays readable
	capture          capturePolicy // execute's capture when none is given
	highlight        *highlighter  // which lines of what a cut result leaves out it names (highlights); nil: none
	mask             maskSpec      // what jobs' output and commands are masked with (MCP_EXEC_MASK*)
	debug            bool          // serve debug/stats (tests and the soak script)
	shell            string        // the shell jobs run in
	shellSpelled     string        // the shell as $SHELL names it, for MCP_EXEC_ALLOW
	baseEnv          []string      // the environment jobs start from, without MCP_EXEC_*
	jobEnvDefaults   bool          // jobs get jobEnvDefaults where nothing sets them; an empty env value removes a variable

	// Policy; the zero values allow everything, as 1.0 did.
	allow       []string        // the only programs a job may start; nil: any
	roots       []string        // resolved directories a job's cwd must be inside; nil: any
	envDeny     map[string]bool // names the env argument may not set
	maxJobs     int             // running jobs per session; 0: no limit
	jobTTL      time.Duration   // finished, uncollected jobs are forgotten after this; 0: never
	maxFinished int             // finished, uncollected jobs kept at most; 0: no limit
	launcher    []string        // prefixed to every job's argv; nil: none
	sandbox     string          // off, read-only or roots: where jobs may write
	networkOff  bool            // jobs get no network
	rlimits     []rlimit        // resource limits set in every job
	rlimitsText string          // the same, as MCP_EXEC_RLIMITS spelled them
	usage       bool            // terminal results carry usage
	keepCwd     bool            // a call without cwd starts where the session's previous blocking execute's shell ended
	jobEvents   bool            // legacy stdio sessions get notifications/job
	memoryLimit int64           // bytes all output windows may hold together; 0: no bound; memoryLimitAuto: see memoryBound
	jobLog      string          // where the job log goes: "" off, jobLogStderr, or a file's path (see openJobLog)
	inputWait   time.Duration   // how long a job's process must wait reading its input before the job counts as waiting for input
	spill       string          // spillOff, spillAuto, or the resolved directory spill files go in
	spillBytes  int64           // bytes of one stream's spill kept at most
	spillLimit  int64           // bytes every spill keeps together; 0: no bound; memoryLimitAuto: a quarter of the free space
	cgroup      string          // cgroupAuto, cgroupOff, or the cgroup v2 directory jobs' cgroups go under
	jobLimits   jobLimits       // what each job's cgroup may use; zero fields: no limit

	// HTTP; listen "" serves stdio only.
	listen         string        // the address to serve HTTP on
	token          []byte        // the bearer token clients must send; nil: none
	metricsToken   []byte        // a bearer token that opens /metrics only; nil: none
	allowedOrigins []string      // browser origins allowed
	httpAuthNone   bool          // MCP_EXEC_HTTP_AUTH=none: no token at all, not even a generated one
	httpHosts      []string      // Host header names served besides loopback names and the listener's address
	tlsCert        string        // TLS certificate file; "" serves plain HTTP
	tlsKey         string        // its key file
	maxSessions    int           // open HTTP sessions at most; 0: no limit
	sessionIdle    time.Duration // an HTTP session idle this long ends, with its jobs; 0: never

	// Tool sets: which contracts a session offers.
	toolSets         []string      // jobs, exec, shell: in the order tools/list shows them
	toolPrefix       string        // the shell set's tool names start with it and "_"
	shellOutputBytes int           // the shell set's output budget per stream
	shellOutputLines int           // and its line budget per stream
	maxTimeLimit     time.Duration // the longest time limit a call may ask for; 0: any
	execCwd          string        // the exec tool's cwd when a call gives none; "": the server's (or the first root)
}

// Tool sets (MCP_EXEC_TOOLS).
const (
	toolSetJobs  = "jobs"  // the seven 1.0 tools
	toolSetExec  = "exec"  // the exec-mcp gateway's exec tool
	toolSetShell = "shell" // the Shell toolkit's six tools
)

// toolSetNames lists the tool sets MCP_EXEC_TOOLS accepts.
var toolSetNames = []string{toolSetJobs, toolSetExec, toolSetShell}

// offered is the tool sets the configuration offers, in order (none
// named: the jobs set).
func (c *config) offered() []string {
	if len(c.toolSets) == 0 {
		return []string{toolSetJobs}
	}
	return c.toolSets
}

// offers reports whether the configuration offers tool set name.
func (c *config) offers(name string) bool { return slices.Contains(c.offered(), name) }

// Profiles: compat keeps 1.0's defaults; agent sizes them for LLM hosts.
const (
	profileCompat = "compat"
	profileAgent  = "agent"
)

// Sandbox modes (MCP_EXEC_SANDBOX).
const (
	sandboxOff      = "off"
	sandboxReadOnly = "read-only"
	sandboxRoots    = "roots"
)

// minReplyBytes is the smallest reply budget: room for a result's fields.
const minReplyBytes = 1024

// configVar is one MCP_EXEC_* variable: its default, its default under the
// agent profile ("" = the same), and how to set it.
type configVar struct {
	name, def, agentDef, doc string
	set                      func(c *config, value string) error
}

var configVars = []configVar{
	{"MCP_EXEC_PROFILE", profileCompat, "", "compat (1.0 behaviour) or agent (defaults sized for LLM hosts; explicit variables still win)",
		func(c *config, v string) (err error) { c.profile, err = oneOf(v, profileCompat, profileAgent); return }},
	{"MCP_EXEC_DEFAULT_TIMEOUT", "60", "50", "seconds wait blocks when the call gives no timeout (>= 0, fractions allowed)",
		func(c *config, v string) (err error) { c.defaultTimeout, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_OUTPUT_BYTES", "1048576", "", "bytes of output kept per stream per job; older bytes are dropped (>= 1)",
		func(c *config, v string) (err error) { c.maxOutputBytes, err = parseBytes(v, 1); return }},
	{"MCP_EXEC_KEEP_HEAD_BYTES", "0", "16384", "first bytes of each stream kept even after the window moves past them (>= 0)",
		func(c *config, v string) (err error) { c.keepHeadBytes, err = parseBytes(v, 0); return }},
	{"MCP_EXEC_PROGRESS_INTERVAL", "10", "", "seconds between progress notifications of a blocking call (> 0)",
		func(c *config, v string) (err error) { c.progressInterval, err = parseSeconds(v, false); return }},
	{"MCP_EXEC_TIME_LIMIT", "0", "", "seconds a job may run before TERM, then KILL, end it; 0 = no limit (>= 0)",
		func(c *config, v string) (err error) { c.timeLimit, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_KILL_GRACE", "5", "", "seconds between the TERM and the KILL of a time limit (>= 0)",
		func(c *config, v string) (err error) { c.killGrace, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_YIELD_AFTER", "0", "50", "seconds a blocking execute waits before it returns the running job; 0 = until the end (>= 0)",
		func(c *config, v string) (err error) { c.yieldAfter, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_YIELD", "0", "50", "seconds a wait timeout or an execute or input yield_after blocks at most; a longer one is lowered to it and the result says clamped; the defaults of wait and yield_after are lowered to it too; 0 = no bound (>= 0)",
		func(c *config, v string) (err error) { c.maxYield, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_REPLY_BYTES", "8388608", "65536", "longest tools/call reply line; longer results are cut to head and tail (>= 1024)",
		func(c *config, v string) (err error) { c.maxReplyBytes, err = parseBytes(v, minReplyBytes); return }},
	{"MCP_EXEC_KEPT_SECONDS", "600", "", "seconds a job whose result was cut stays readable by status and output (>= 0)",
		func(c *config, v string) (err error) { c.keptDuration, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_CAPTURE", `{"on_success":"stdout","on_error":"stderr"}`, `{"on_success":"stdout","on_error":"all"}`, "execute's capture policy when a call gives none (JSON, as the capture argument)",
		func(c *config, v string) (err error) {
			if c.capture, err = parseCapturePolicy(json.RawMessage(v)); err == nil && c.capture.grepAt() != "" {
				err = fmt.Errorf("%s: %s", c.capture.grepAt(), captureGrepRefusal)
			}
			return
		}},
	{"MCP_EXEC_HIGHLIGHT", highlightOff, highlightFailures, "the lines a result cut to fit its reply budget names from the part it leaves out (highlights, at most 20): failures (lines holding error:, error[, Error:, ERROR, FAILED, fatal:, panic:, Traceback (most, Exception, npm ERR!, Segmentation fault, No such file or directory, command not found or undefined reference, or starting with FAIL: or FAIL followed by a space), an RE2 pattern, or off",
		func(c *config, v string) (err error) { c.highlight, err = parseHighlight(v); return }},
	{"MCP_EXEC_MASK", "off", "values,patterns", "secrets masked where output enters the server, before every view, file and log: values (the values of the variables a job gets whose names match MCP_EXEC_MASK_NAMES and that are at least 12 bytes, and MCP_EXEC_MASK_FILE's lines, raw and as base64, hex and percent-encoding), patterns (token formats: GitHub, GitLab, Slack, AWS key ids, OpenAI, Anthropic, Google, Stripe, npm, PyPI, JWTs, private key blocks), both (values,patterns), or off",
		func(c *config, v string) (err error) { c.mask.values, c.mask.patterns, err = parseMaskMode(v); return }},
	{"MCP_EXEC_MASK_NAMES", maskDefaultNames, "", "comma list of globs, matched without case: the variables whose values MCP_EXEC_MASK's values masks",
		func(c *config, v string) (err error) { c.mask.names, err = parseMaskNames(v); return }},
	{"MCP_EXEC_MASK_FILE", "", "", "a file of secrets to mask, one per line of at least 4 bytes, shown as [masked:file]; read at start",
		func(c *config, v string) (err error) { c.mask.file, err = readMaskFile(v); return }},
	{"MCP_EXEC_MASK_HOLD_MS", "250", "", "milliseconds output that could begin a secret is held back for the rest to come, at most (1..10000)",
		func(c *config, v string) (err error) {
			c.mask.hold, err = parseMillis(v, time.Millisecond, 10*time.Second)
			return
		}},
	{"MCP_EXEC_ALLOW", "", "", "comma list of the only programs jobs may start, spelled exactly as argv[0] (command needs the shell listed); unset: any",
		func(c *config, v string) (err error) { c.allow, err = parseList(v, "program"); return }},
	{"MCP_EXEC_ROOTS", "", "", "colon list of directories a job's cwd must resolve inside (default cwd: the first); unset: anywhere",
		func(c *config, v string) (err error) { c.roots, err = parseRoots(v); return }},
	{"MCP_EXEC_ENV_DENY", "", "", "comma list of variable names the env argument may not set",
		func(c *config, v string) error {
			names, err := parseList(v, "variable name")
			c.envDeny = map[string]bool{}
			for _, n := range names {
				c.envDeny[n] = true
			}
			return err
		}},
	{"MCP_EXEC_MAX_JOBS", "0", "", "running jobs per session; 0 = no limit (>= 0)",
		func(c *config, v string) (err error) { c.maxJobs, err = parseCount(v); return }},
	{"MCP_EXEC_JOB_TTL", "0", "", "seconds a finished, uncollected job is kept; 0 = until collected (>= 0)",
		func(c *config, v string) (err error) { c.jobTTL, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_FINISHED", "0", "", "finished, uncollected jobs kept per session, oldest forgotten first; 0 = no limit (>= 0)",
		func(c *config, v string) (err error) { c.maxFinished, err = parseCount(v); return }},
	{"MCP_EXEC_LAUNCHER", "", "", `JSON array of strings prefixed to every job's argv, e.g. ["nice","-n","10"]`,
		func(c *config, v string) (err error) { c.launcher, err = parseLauncher(v); return }},
	{"MCP_EXEC_SANDBOX", sandboxOff, "", "off, read-only (jobs write only to a private TMPDIR and /dev/null-like devices) or roots (also inside MCP_EXEC_ROOTS); kernel-enforced (Landlock)",
		func(c *config, v string) (err error) {
			c.sandbox, err = oneOf(v, sandboxOff, sandboxReadOnly, sandboxRoots)
			return
		}},
	{"MCP_EXEC_NETWORK", "on", "", "on, or off: jobs can open no IP socket (seccomp) and make no TCP connection (Landlock)",
		func(c *config, v string) error {
			network, err := oneOf(v, "on", "off")
			c.networkOff = network == "off"
			return err
		}},
	{"MCP_EXEC_RLIMITS", "", "", "comma list of resource limits set in every job, soft and hard, e.g. cpu=60,as=4G,nproc=512,fsize=1G,nofile=4096",
		func(c *config, v string) (err error) { c.rlimits, c.rlimitsText, err = parseRlimits(v); return }},
	{"MCP_EXEC_USAGE", "0", "", "1 adds usage (wall, user and system CPU ms, peak RSS) to terminal results; on by default when jobs are confined (sandbox, network off, rlimits), except under the agent profile",
		func(c *config, v string) (err error) { c.usage, err = parseSwitch(v); return }},
	{"MCP_EXEC_JOB_ENV_DEFAULTS", "off", "on", "on: jobs get NO_COLOR=1 (unless FORCE_COLOR is set), PAGER=cat, GIT_PAGER=cat and, on pipes, TERM=dumb where neither the server's environment nor the call's env sets them, and an empty value in env removes a variable; off: the environment as given",
		func(c *config, v string) error {
			on, err := oneOf(v, "on", "off")
			c.jobEnvDefaults = on == "on"
			return err
		}},
	{"MCP_EXEC_KEEP_CWD", "0", "1", "1: in a session, an execute without cwd starts in the directory where the previous blocking execute's shell ended (if it still exists, inside MCP_EXEC_ROOTS), and one with cwd sets it; nowait jobs do not move it; environment variables never carry over",
		func(c *config, v string) (err error) { c.keepCwd, err = parseSwitch(v); return }},
	{"MCP_EXEC_MEMORY_LIMIT", "auto", "", "bytes all output windows may hold together (e.g. 512MiB; K, M, G, KiB, MiB, GiB; 0 = no bound); auto: a quarter of the memory available (the cgroup's limit, else physical memory); past it the oldest bytes of the largest windows go first",
		func(c *config, v string) (err error) { c.memoryLimit, err = parseMemoryLimit(v); return }},
	{"MCP_EXEC_SPILL", spillOff, spillAuto, "auto, off or a directory: where the bytes that leave a stream's window go, so output reads every byte a job wrote; auto makes a private directory in the temporary directory (never inside MCP_EXEC_ROOTS); files have no name and go with their job",
		func(c *config, v string) (err error) { c.spill, err = parseSpill(v); return }},
	{"MCP_EXEC_SPILL_BYTES", "1GiB", "", "bytes of one stream kept on disk past its window (e.g. 256MiB; K, M, G, KiB, MiB, GiB; >= 1); past it the oldest spilled bytes go",
		func(c *config, v string) (err error) { c.spillBytes, err = parseSize(v, 1); return }},
	{"MCP_EXEC_SPILL_LIMIT", "auto", "", "bytes every job's spill keeps together (a size, or 0 = no bound); auto: a quarter of the free space where the spill directory is, read at start and as it fills; past it a stream gives up its oldest spilled bytes",
		func(c *config, v string) (err error) { c.spillLimit, err = parseMemoryLimit(v); return }},
	{"MCP_EXEC_CGROUP", cgroupAuto, "", "auto, off or a cgroup v2 directory: where each job gets a cgroup of its own, so kill, shutdown and usage reach every process it starts (setsid and daemons too); auto uses the server's own cgroup where it may write it, else jobs stay on process groups (said on stderr)",
		func(c *config, v string) (err error) { c.cgroup, err = parseCgroup(v); return }},
	{"MCP_EXEC_JOB_MEMORY", "0", "", "bytes of memory each job's cgroup may use (memory.max; e.g. 2GiB; 0 = no limit); refused at start where the memory controller is not delegated",
		func(c *config, v string) (err error) { c.jobLimits.memoryBytes, err = parseSize(v, 0); return }},
	{"MCP_EXEC_JOB_PIDS", "0", "", "processes each job's cgroup may hold at once (pids.max; 0 = no limit); refused at start where the pids controller is not delegated",
		func(c *config, v string) (err error) { c.jobLimits.pids, err = parseCount(v); return }},
	{"MCP_EXEC_JOB_CPU", "0", "", "cores of CPU time each job's cgroup may use (cpu.max; fractions allowed, e.g. 0.5; 0 = no limit); refused at start where the cpu controller is not delegated",
		func(c *config, v string) (err error) { c.jobLimits.cpuCores, err = parseCores(v); return }},
	{"MCP_EXEC_JOB_EVENTS", "0", "1", "1 sends notifications/job when a job starts and finishes (stdio, after initialize), so a client learns of a nowait job's end without polling",
		func(c *config, v string) (err error) { c.jobEvents, err = parseSwitch(v); return }},
	{"MCP_EXEC_JOB_LOG", "", "", "stderr, or the path of a file opened for appending: one JSON line when a job starts, ends or is refused by policy (who ran what, where, how it ended; never its output); unset: no job log",
		func(c *config, v string) (err error) { c.jobLog, err = parseJobLog(v); return }},
	{"MCP_EXEC_INPUT_WAIT_MS", "1000", "", "milliseconds a job's process must be blocked reading its stdin (or, with prompts, the job silent) before the job is reported waiting_for_input (10 to 60000)",
		func(c *config, v string) (err error) {
			c.inputWait, err = parseMillis(v, minInputWait, maxInputWait)
			return
		}},
	{"MCP_EXEC_LISTEN", "", "", "HOST:PORT to serve MCP over Streamable HTTP (/mcp) and /healthz, /metrics, /exec instead of stdio (also --listen); a non-loopback address needs a token",
		func(c *config, v string) error {
			if v == "" {
				return nil
			}
			if _, _, err := net.SplitHostPort(v); err != nil {
				return errors.New("must be HOST:PORT, e.g. 127.0.0.1:8080")
			}
			c.listen = v
			return nil
		}},
	{"MCP_EXEC_TOKEN", "", "", "the bearer token HTTP clients must send (Authorization: Bearer ...); prefer MCP_EXEC_TOKEN_FILE",
		setToken(func(c *config) *[]byte { return &c.token })},
	{"MCP_EXEC_TOKEN_FILE", "", "", "a file holding the bearer token (surrounding whitespace ignored)",
		setTokenFile(func(c *config) *[]byte { return &c.token }, "MCP_EXEC_TOKEN")},
	{"MCP_EXEC_METRICS_TOKEN", "", "", "a second bearer token that opens /metrics and nothing else, for a scraper shared by many servers; prefer MCP_EXEC_METRICS_TOKEN_FILE",
		setToken(func(c *config) *[]byte { return &c.metricsToken })},
	{"MCP_EXEC_METRICS_TOKEN_FILE", "", "", "a file holding the metrics token (surrounding whitespace ignored)",
		setTokenFile(func(c *config) *[]byte { return &c.metricsToken }, "MCP_EXEC_METRICS_TOKEN")},
	{"MCP_EXEC_ALLOWED_ORIGINS", "", "", "comma list of browser origins (scheme://host:port) allowed to call the HTTP endpoints; others get 403",
		func(c *config, v string) (err error) { c.allowedOrigins, err = parseList(v, "origin"); return }},
	{"MCP_EXEC_HTTP_AUTH", "token", "", "token: with no MCP_EXEC_TOKEN(_FILE), a loopback listener makes a random token and writes it to a file only this user can read (its path goes to stderr); none: no token, any local user can run commands as this server's user (loopback only)",
		func(c *config, v string) error {
			switch v {
			case "token", "none":
				c.httpAuthNone = v == "none"
				return nil
			}
			return errors.New("must be token or none")
		}},
	{"MCP_EXEC_HTTP_HOSTS", "", "", "comma list of Host names (name or name:port) served besides localhost, 127.0.0.1, [::1] and the listener's address, e.g. behind a proxy; checked on a loopback listener, and on any other once set; others get 421",
		func(c *config, v string) (err error) { c.httpHosts, err = parseHTTPHosts(v); return }},
	{"MCP_EXEC_TLS_CERT", "", "", "PEM certificate file: serve HTTPS (with MCP_EXEC_TLS_KEY)",
		func(c *config, v string) error { c.tlsCert = v; return nil }},
	{"MCP_EXEC_TLS_KEY", "", "", "PEM key file of MCP_EXEC_TLS_CERT",
		func(c *config, v string) error { c.tlsKey = v; return nil }},
	{"MCP_EXEC_MAX_SESSIONS", "0", "", "open HTTP sessions at most; 0 = no limit (>= 0)",
		func(c *config, v string) (err error) { c.maxSessions, err = parseCount(v); return }},
	{"MCP_EXEC_SESSION_IDLE", "3600", "", "seconds an HTTP session may sit idle before it ends with its jobs; 0 = never (>= 0)",
		func(c *config, v string) (err error) { c.sessionIdle, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_TIME_LIMIT", "0", "", "the longest time limit a call may ask for (time_limit, timeout_seconds, timeout), in seconds; longer is refused; 0 = any (>= 0)",
		func(c *config, v string) (err error) { c.maxTimeLimit, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_TOOLS", toolSetJobs, "", "the tool sets offered, a comma list of jobs (the seven job tools), exec (the exec-mcp gateway's exec tool) and shell (the Shell toolkit's six tools)",
		func(c *config, v string) (err error) { c.toolSets, err = parseToolSets(v); return }},
	{"MCP_EXEC_TOOL_PREFIX", "sh", "", "the shell set's tool names are PREFIX_run, PREFIX_start, ...: a letter, then letters, digits, - (at most 32)",
		func(c *config, v string) error {
			if !validToolPrefix(v) {
				return errors.New("must be a letter followed by letters, digits or -, at most 32 in all")
			}
			c.toolPrefix = v
			return nil
		}},
	{"MCP_EXEC_SHELL_MAX_OUTPUT_BYTES", "32768", "", "the shell set's output budget per stream: past it a result keeps the first quarter and the last three quarters (>= 1024)",
		func(c *config, v string) (err error) { c.shellOutputBytes, err = parseBytes(v, 1024); return }},
	{"MCP_EXEC_SHELL_MAX_OUTPUT_LINES", "1000", "", "the shell set's line budget per stream, applied with the byte budget (>= 10)",
		func(c *config, v string) (err error) {
			if c.shellOutputLines, err = strconv.Atoi(v); err != nil || c.shellOutputLines < 10 {
				return errors.New("must be a whole number of lines, at least 10")
			}
			return nil
		}},
	{"MCP_EXEC_DEBUG", "0", "", "1 serves the debug/stats method (goroutines, fds, RSS) for tests and soak runs",
		func(c *config, v string) (err error) { c.debug, err = parseSwitch(v); return }},
}

// readSettings is what a configuration is read from: the server's whole
// environment, and its MCP_EXEC_* variables that are set and not empty.
type readSettings struct {
	environ []string
	given   map[string]string
}

// explicit reports whether variable name was given: a rule then leaves
// what it set alone.
func (s readSettings) explicit(name string) bool {
	_, ok := s.given[name]
	return ok
}

// derivedDefault is a default that depends on other settings or on the
// server's environment. Rules apply in order, after every MCP_EXEC_*
// variable has been parsed and before the checks between settings.
type derivedDefault struct {
	setting   string // the variable, or what the server reads, whose default the rule decides
	def       string // its default when the rule changes nothing
	changedBy string // what changes it
	apply     func(c *config, s readSettings) error
}

// derivedDefaults is the one place where a setting's default follows from
// others, each rule saying what changes it. The profile (MCP_EXEC_PROFILE)
// is not a rule here: it picks each variable's default in configVars' agent
// column. An MCP_EXEC_* variable that is given always wins over its rule.
// Only loadConfig applies them: after it a config is read-only.
var derivedDefaults = []derivedDefault{
	{"MCP_EXEC_USAGE", "0", "1 when jobs are confined: MCP_EXEC_SANDBOX other than off, MCP_EXEC_NETWORK=off or MCP_EXEC_RLIMITS set, except under the agent profile",
		func(c *config, s readSettings) error {
			// A model pays for every byte it reads: under the agent profile
			// usage comes only from MCP_EXEC_USAGE=1.
			confined := c.sandbox != sandboxOff || c.networkOff || c.rlimits != nil
			if !s.explicit("MCP_EXEC_USAGE") && c.profile != profileAgent && confined {
				c.usage = true // whoever confines jobs wants to see what they use
			}
			return nil
		}},
	fromGateway("MAX_CONCURRENT_EXECS", "MCP_EXEC_MAX_JOBS", "0",
		func(c *config, v string) (err error) { c.maxJobs, err = parseCount(v); return }),
	fromGateway("MAX_TIMEOUT_SECONDS", "MCP_EXEC_MAX_TIME_LIMIT", "0",
		func(c *config, v string) (err error) { c.maxTimeLimit, err = parseSeconds(v, true); return }),
	fromGateway("DEFAULT_CWD", "", "the server's cwd, or the first of MCP_EXEC_ROOTS",
		func(c *config, v string) (err error) { c.execCwd, err = resolveDir(v); return }),
	// The shell set's jobs are never collected: they are polled, then
	// forgotten when old, as the toolkit forgets them.
	forShellSet("MCP_EXEC_JOB_TTL", "3600", func(c *config) { c.jobTTL = time.Hour }),
	forShellSet("MCP_EXEC_MAX_FINISHED", "100", func(c *config) { c.maxFinished = 100 }),
	// SHELL and PATH from environ, the environment the server was given,
	// as every other setting is read: not from the process's own.
	{"SHELL", "/bin/sh", "SHELL in the server's environment; a bare name is found on its PATH",
		func(c *config, s readSettings) error {
			c.shellSpelled = envValue(s.environ, "SHELL")
			if c.shellSpelled == "" {
				c.shellSpelled = "/bin/sh"
			}
			// A bare name is found on PATH as lookPath finds programs; a
			// shell not found is kept as spelled, and each job then fails to
			// start with a start_error that names it.
			c.shell = c.shellSpelled
			if path, err := lookPath(c.shellSpelled, s.environ); err == nil {
				c.shell = path
			}
			return nil
		}},
}

// fromGateway is the rule that reads the exec-mcp gateway's variable name
// when the exec set is offered and ours, the MCP_EXEC_* variable that
// stands for it ("" for none), is not given: so replacing the gateway
// takes one setting, not a rename of all.
func fromGateway(name, ours, def string, set func(c *config, value string) error) derivedDefault {
	setting := ours
	if setting == "" {
		setting = "the exec tool's cwd"
	}
	return derivedDefault{setting, def, name + " (the exec-mcp gateway's) when the exec set is offered",
		func(c *config, s readSettings) error {
			if !c.offers(toolSetExec) || s.explicit(ours) {
				return nil
			}
			if value := envValue(s.environ, name); value != "" {
				if err := set(c, value); err != nil {
					return fmt.Errorf("%s=%q (the exec-mcp gateway's setting, read for MCP_EXEC_TOOLS=exec): %w", name, value, err)
				}
			}
			return nil
		}}
}

// forShellSet is the rule that gives variable name the shell set's default,
// spelled shellDef, when that set is offered and name is not given.
func forShellSet(name, shellDef string, set func(c *config)) derivedDefault {
	return derivedDefault{name, "0", shellDef + " when the shell set is offered (MCP_EXEC_TOOLS names shell)",
		func(c *config, s readSettings) error {
			if c.offers(toolSetShell) && !s.explicit(name) {
				set(c)
			}
			return nil
		}}
}

// parseToolSets reads MCP_EXEC_TOOLS: a comma list of distinct set names.
func parseToolSets(v string) ([]string, error) {
	sets, err := parseList(v, "tool set")
	if err != nil {
		return nil, err
	}
	for i, name := range sets {
		if !slices.Contains(toolSetNames, name) {
			return nil, fmt.Errorf("unknown tool set %q (the sets are %s)", name, strings.Join(toolSetNames, ", "))
		}
		if slices.Contains(sets[:i], name) {
			return nil, fmt.Errorf("tool set %s is given twice", name)
		}
	}
	return sets, nil
}

// validToolPrefix accepts what keeps PREFIX_output a valid tool name.
func validToolPrefix(v string) bool {
	if v == "" || len(v) > 32 || !isLetter(v[0]) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; !isLetter(b) && !(b >= '0' && b <= '9') && b != '-' {
			return false
		}
	}
	return true
}

// isLetter says whether b is an ASCII letter.
func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// oneOf returns v if it is one of choices, which the error lists.
func oneOf(v string, choices ...string) (string, error) {
	if slices.Contains(choices, v) {
		return v, nil
	}
	last := len(choices) - 1
	return "", fmt.Errorf("must be %s or %s", strings.Join(choices[:last], ", "), choices[last])
}

// parseSwitch reads 0 or 1.
func parseSwitch(v string) (bool, error) {
	on, err := oneOf(v, "0", "1")
	return on == "1", err
}

// parseCount reads a whole number, 0 or more.
func parseCount(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("must be a whole number, 0 or more")
	}
	return n, nil
}

// parseList reads a comma list of non-empty items ("" is no list at all).
func parseList(v, what string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var items []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			return nil, fmt.Errorf("must be a comma list of %ss with no empty item", what)
		}
		items = append(items, item)
	}
	return slices.Clip(items), nil
}

// parseRoots reads a colon list of existing directories and resolves each,
// symlinks followed, to the absolute path cwds are checked against.
func parseRoots(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var roots []string
	for _, dir := range strings.Split(v, ":") {
		if dir == "" {
			return nil, errors.New("must be a colon list of directories with no empty item")
		}
		resolved, err := resolveDir(dir)
		if err != nil {
			return nil, err
		}
		roots = append(roots, resolved)
	}
	return slices.Clip(roots), nil
}

// insideAny is the first of roots that p is inside, or "".
func insideAny(p string, roots []string) string {
	for _, root := range roots {
		if within(p, root) {
			return root
		}
	}
	return ""
}

// within reports whether the clean absolute path p is root or below it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolveDir makes dir absolute with every symlink followed and checks it
// is a directory.
func resolveDir(dir string) (string, error) {
	// Not filepath.Abs: it cleans "link/.." to "." lexically, where the
	// kernel would go to the link target's parent. EvalSymlinks takes each
	// ".." after resolving what comes before it.
	abs := dir
	if !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("%q: %w", dir, err)
		}
		abs = wd + "/" + dir
	}
	abs, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%q: %w", dir, errors.Unwrap(err))
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", dir)
	}
	return abs, nil
}

// parseLauncher reads a JSON array of strings whose first names a program.
func parseLauncher(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var argv []string
	if json.Unmarshal([]byte(v), &argv) != nil || len(argv) == 0 || argv[0] == "" {
		return nil, errors.New(`must be a JSON array of strings naming a program first, e.g. ["nice","-n","10"]`)
	}
	if slices.ContainsFunc(argv, func(s string) bool { return strings.ContainsRune(s, 0) }) {
		return nil, errors.New("must not contain NUL bytes")
	}
	return slices.Clip(argv), nil
}

// jobLogStderr is MCP_EXEC_JOB_LOG's value that sends the job log to stderr.
const jobLogStderr = "stderr"

// parseJobLog reads MCP_EXEC_JOB_LOG: stderr, or a file's path. stdout is
// refused by name, as it carries JSON-RPC only; the file is opened at
// startup (openJobLog), where a path that cannot be opened stops the server.
func parseJobLog(v string) (string, error) {
	switch {
	case v == "" || v == jobLogStderr:
		return v, nil
	case v == "stdout" || v == "/dev/stdout" || v == "/dev/fd/1" || v == "/proc/self/fd/1":
		return "", errors.New("stdout carries JSON-RPC only; use stderr or a file's path")
	case strings.ContainsRune(v, 0):
		return "", errors.New("must not contain NUL bytes")
	}
	return v, nil
}

// parseBytes reads a whole number of bytes of at least least.
func parseBytes(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("must be a whole number of bytes, at least %d", least)
	}
	return n, nil
}

// The bounds of MCP_EXEC_INPUT_WAIT_MS. Below the least, a process that
// reads its stdin between bursts of work would be reported waiting; past
// the most, a prompt would hold a blocking call for longer than a client
// would wait for it.
const (
	minInputWait = 10 * time.Millisecond
	maxInputWait = time.Minute
)

// parseMillis reads a whole number of milliseconds from least to most.
func parseMillis(v string, least, most time.Duration) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least.Milliseconds() || n > most.Milliseconds() {
		return 0, fmt.Errorf("must be a whole number of milliseconds from %d to %d", least.Milliseconds(), most.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseSeconds reads a number of seconds; zero is allowed only if zeroOK.
func parseSeconds(v string, zeroOK bool) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errors.New("must be a number of seconds")
	case f < 0:
		return 0, errors.New("must not be negative")
	case f == 0 && !zeroOK:
		return 0, errors.New("must be greater than 0")
	}
	return secondsToDuration(f), nil
}

// loadConfig reads the configuration from environ. An unknown MCP_EXEC_*
// variable is an error: it is almost always a typo. The profile picks the
// defaults; a variable that is set wins over its profile's default and over
// any rule of derivedDefaults. The config returned is never changed again.
func loadConfig(environ []string) (*config, error) {
	c := &config{baseEnv: withoutOwnVariables(environ)}
	s := readSettings{environ: environ, given: map[string]string{}}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MCP_EXEC_") || name == treeMarkVariable {
			continue // a server run by a job sees the mark its job was given
		}
		if !slices.ContainsFunc(configVars, func(v configVar) bool { return v.name == name }) {
			// The list stays, as 1.0 printed it; the suggestion comes first.
			return nil, fmt.Errorf("unknown variable %s%s; the valid ones are %s", name, nearestSettings(name), strings.Join(configNames(), ", "))
		}
		if value != "" { // set but empty: keep the default
			s.given[name] = value
		}
	}
	for _, v := range configVars {
		value, explicit := s.given[v.name]
		if !explicit {
			value = v.def
			// c.profile is already set: MCP_EXEC_PROFILE is first in configVars.
			if c.profile == profileAgent && v.agentDef != "" {
				value = v.agentDef
			}
		}
		if err := v.set(c, value); err != nil {
			if !explicit {
				return nil, fmt.Errorf("default of %s: %w", v.name, err)
			}
			return nil, fmt.Errorf("%s=%q: %w", v.name, value, err)
		}
	}
	// Before the rules: a bad HTTP setting is reported ahead of a bad
	// gateway variable, and no rule changes what it checks.
	if err := checkListen(c); err != nil {
		return nil, err
	}
	for _, rule := range derivedDefaults {
		if err := rule.apply(c, s); err != nil {
			return nil, err
		}
	}
	if err := checkLimits(c); err != nil {
		return nil, err
	}
	return c, nil
}

// checkLimits refuses settings that contradict each other once every
// default is known.
func checkLimits(c *config) error {
	switch {
	case c.maxTimeLimit > 0 && c.timeLimit > c.maxTimeLimit:
		return fmt.Errorf("MCP_EXEC_TIME_LIMIT (%v s) is longer than MCP_EXEC_MAX_TIME_LIMIT (%v s) allows", c.timeLimit.Seconds(), c.maxTimeLimit.Seconds())
	case c.execCwd != "" && c.roots != nil && !slices.ContainsFunc(c.roots, func(root string) bool { return within(c.execCwd, root) }):
		return fmt.Errorf("DEFAULT_CWD %s is outside MCP_EXEC_ROOTS (%s)", c.execCwd, strings.Join(c.roots, ", "))
	case c.spill != spillOff && c.spill != spillAuto && insideAny(c.spill, c.roots) != "":
		return fmt.Errorf("MCP_EXEC_SPILL=%s is inside MCP_EXEC_ROOTS (%s), where jobs could read what others wrote; use a directory outside them, or auto", c.spill, insideAny(c.spill, c.roots))
	case c.sandbox == sandboxRoots && c.roots == nil:
		return errors.New("MCP_EXEC_SANDBOX=roots makes only MCP_EXEC_ROOTS writable, and MCP_EXEC_ROOTS is not set; set it, or use read-only")
	}
	return nil
}

// withUsage returns a copy of c, sharing its slices and maps, whose
// terminal results carry usage. A config keys the tool caches (toolTables,
// toolLists), so make each view once, where the transport that needs it
// starts: a view made per request would add cache entries without bound.
func (c *config) withUsage() *config {
	view := *c
	view.usage = true
	return &view
}

// withoutOwnVariables is environ without the server's MCP_EXEC_* settings:
// jobs do not see how the server is configured.
func withoutOwnVariables(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "MCP_EXEC_") {
			env = append(env, kv)
		}
	}
	return slices.Clip(env) // readers that append copy, not write into the shared array
}

// nearestSettings names, as " (did you mean A or B?)", the settings a
// mistyped name most likely meant (a typo or two away, at most two), or
// is "" when none is near.
func nearestSettings(given string) string {
	type near struct {
		name     string
		distance int
	}
	var found []near
	for _, v := range configVars {
		if d := editDistance(given, v.name); d <= max(2, len(given)/8) {
			found = append(found, near{v.name, d})
		}
	}
	if len(found) == 0 {
		return ""
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.distance - b.distance })
	names := []string{found[0].name}
	if len(found) > 1 && found[1].distance == found[0].distance {
		names = append(names, found[1].name)
	}
	return " (did you mean " + strings.Join(names, " or ") + "?)"
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// configNames lists the settings' names, sorted.
func configNames() []string {
	names := make([]string, len(configVars))
	for i, v := range configVars {
		names[i] = v.name
	}
	sort.Strings(names)
	return names
}

// secondsToDuration converts seconds, saturating instead of overflowing.
func secondsToDuration(s float64) time.Duration {
	if s*float64(time.Second) >= math.MaxInt64 {
		return math.MaxInt64
	}
	if s*float64(time.Second) <= math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(s * float64(time.Second))
}

// parseRlimits reads MCP_EXEC_RLIMITS: "cpu=60,as=4G,nofile=4096". A value
// is a whole number (byte-sized resources take a K, M, G or T suffix,
// powers of 1024) or "unlimited"; it becomes both the soft and the hard
// limit, so the job cannot raise it.
func parseRlimits(v string) (limits []rlimit, spelled string, err error) {
	items, err := parseList(v, "name=value item")
	if err != nil {
		return nil, "", err
	}
	seen := map[string]bool{}
	for _, item := range items {
		name, value, ok := strings.Cut(item, "=")
		res, known := rlimitResources[name]
		switch {
		case !ok:
			return nil, "", fmt.Errorf("%q is not name=value", item)
		case !known:
			return nil, "", fmt.Errorf("unknown resource %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(rlimitResources)), ", "))
		case seen[name]:
			return nil, "", fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		n, err := parseLimitValue(value, res.byteSized)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
		limits = append(limits, rlimit{res.resource, n})
	}
	return slices.Clip(limits), strings.Join(items, ","), nil
}

// parseLimitValue reads one rlimit value.
func parseLimitValue(v string, byteSized bool) (uint64, error) {
	if v == "unlimited" {
		return rlimInfinity, nil
	}
	shift := 0
	if byteSized && v != "" {
		if i := strings.IndexByte("KMGT", v[len(v)-1]); i >= 0 {
			shift, v = 10*(i+1), v[:len(v)-1]
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > rlimInfinity>>shift {
		if byteSized {
			return 0, fmt.Errorf("%q must be a whole number, optionally with K, M, G or T, or unlimited", v)
		}
		return 0, fmt.Errorf("%q must be a whole number or unlimited", v)
	}
	return n << shift, nil
}

// checkListen refuses HTTP settings that contradict each other, and a
// server anyone on the network could use without a token.
func checkListen(c *config) error {
	switch {
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("MCP_EXEC_TLS_CERT and MCP_EXEC_TLS_KEY go together; set both or neither")
	case c.listen == "":
		return nil
	case c.httpAuthNone && c.token != nil:
		return errors.New("MCP_EXEC_HTTP_AUTH=none and a token (MCP_EXEC_TOKEN or MCP_EXEC_TOKEN_FILE) contradict each other; give one of them")
	case c.token == nil && !isLoopback(c.listen):
		// MCP_EXEC_HTTP_AUTH=none does not open this either: off loopback
		// "no token" means anyone on the network runs commands.
		return fmt.Errorf("MCP_EXEC_LISTEN=%s is reachable from other machines and no MCP_EXEC_TOKEN or MCP_EXEC_TOKEN_FILE is set: anyone reaching it could run commands; set a token, or listen on 127.0.0.1", c.listen)
	}
	return nil
}

// parseHTTPHosts reads MCP_EXEC_HTTP_HOSTS: a comma list of Host header
// values, each a name or name:port as a client sends it, with no scheme
// or path.
func parseHTTPHosts(v string) ([]string, error) {
	hosts, err := parseList(v, "host name")
	for _, h := range hosts {
		if strings.ContainsAny(h, "/@ \t") {
			return nil, fmt.Errorf("%q is not a host name: give names as in a Host header (tools.example or tools.example:8443), no scheme or path", h)
		}
	}
	return hosts, err
}

// setToken is the setter of a token given as a value: the value itself,
// unset when empty.
func setToken(dst func(c *config) *[]byte) func(c *config, v string) error {
	return func(c *config, v string) error {
		if v != "" {
			*dst(c) = []byte(v)
		}
		return nil
	}
}

// setTokenFile is the setter of a token given as a file (surrounding
// whitespace ignored, an empty file refused). valueSetting, the setting
// that gives it as a value and comes first in configVars, must not be set
// too.
func setTokenFile(dst func(c *config) *[]byte, valueSetting string) func(c *config, v string) error {
	return func(c *config, v string) error {
		if v == "" {
			return nil
		}
		if *dst(c) != nil {
			return fmt.Errorf("%s is set too; give one of them", valueSetting)
		}
		b, err := os.ReadFile(v)
		if err != nil {
			return err
		}
		if *dst(c) = []byte(strings.TrimSpace(string(b))); len(*dst(c)) == 0 {
			return errors.New("the file is empty")
		}
		return nil
	}
}

// isLoopback reports whether a listen address reaches only this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// memoryLimitAuto is the memoryLimit of MCP_EXEC_MEMORY_LIMIT=auto.
const memoryLimitAuto = -1

// memoryBound is the bytes all output windows may hold together (0: no
// bound): MCP_EXEC_MEMORY_LIMIT, or with auto a quarter of the memory
// available, read once, on the first call.
func (c *config) memoryBound() int64 {
	if c.memoryLimit == memoryLimitAuto {
		return autoMemoryBound()
	}
	return c.memoryLimit
}

// autoMemoryBound is MCP_EXEC_MEMORY_LIMIT=auto's bound: a quarter of the
// memory available (the cgroup's limit, else physical memory).
var autoMemoryBound = sync.OnceValue(func() int64 { return availableMemory() / 4 })

// Spill modes (MCP_EXEC_SPILL) besides a directory.
const (
	spillOff  = "off"
	spillAuto = "auto"
)

// parseSpill reads MCP_EXEC_SPILL: auto, off, or an existing directory,
// resolved.
func parseSpill(v string) (string, error) {
	if v == spillOff || v == spillAuto {
		return v, nil
	}
	dir, err := resolveDir(v)
	if err != nil {
		return "", fmt.Errorf("must be auto, off or an existing directory: %w", err)
	}
	return dir, nil
}

// parseSize reads a size in bytes, at least least: a whole number with an
// optional K, M, G, KiB, MiB or GiB.
func parseSize(v string, least int64) (int64, error) {
	n, err := parseMemoryLimit(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("must be a size of at least %d bytes, e.g. 256MiB", least)
	}
	return n, nil
}

// parseMemoryLimit reads MCP_EXEC_MEMORY_LIMIT: auto, 0, or a size.
func parseMemoryLimit(v string) (int64, error) {
	if v == "auto" {
		return memoryLimitAuto, nil // read when a job first needs it: a life with no job never does
	}
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"", 0}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 || n > (1<<62)>>u.shift {
				break
			}
			return n << u.shift, nil
		}
	}
	return 0, errors.New("must be auto, 0 or a size in bytes, e.g. 512MiB")
}

// parseCgroup reads MCP_EXEC_CGROUP: auto, off, or an absolute directory.
func parseCgroup(v string) (string, error) {
	if v == cgroupAuto || v == cgroupOff {
		return v, nil
	}
	if !filepath.IsAbs(v) {
		return "", errors.New("must be auto, off or the absolute path of a cgroup v2 directory")
	}
	if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
		return "", errors.New("must be auto, off or an existing cgroup v2 directory")
	}
	return filepath.Clean(v), nil
}

// parseCores reads MCP_EXEC_JOB_CPU: 0, or a number of cores of at least
// a thousandth.
func parseCores(v string) (float64, error) {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || n > 0 && n < 0.001 || n > 1<<20 {
		return 0, errors.New("must be 0 or a number of cores, at least 0.001, e.g. 0.5 or 2")
	}
	return n, nil
}
