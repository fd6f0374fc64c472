package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// config is the server's configuration, read once from the environment.
type config struct {
	defaultTimeout   time.Duration // wait's timeout when none is given
	maxOutputBytes   int           // window size per stream per job
	progressInterval time.Duration // between progress notifications
	debug            bool          // serve debug/stats (tests and the soak script)
	shell            string        // the shell jobs run in
	baseEnv          []string      // the environment jobs start from
}

// configVar is one MCP_EXEC_* variable.
type configVar struct {
	name, def, doc string
	set            func(c *config, value string) error
}

var configVars = []configVar{
	{"MCP_EXEC_DEFAULT_TIMEOUT", "60", "seconds wait blocks when the call gives no timeout (>= 0, fractions allowed)",
		func(c *config, v string) (err error) { c.defaultTimeout, err = parseSeconds(v, true); return }},
	{"MCP_EXEC_MAX_OUTPUT_BYTES", "1048576", "bytes of output kept per stream per job; older bytes are dropped (>= 1)",
		func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New("must be a whole number of bytes, at least 1")
			}
			c.maxOutputBytes = n
			return nil
		}},
	{"MCP_EXEC_PROGRESS_INTERVAL", "10", "seconds between progress notifications of a blocking call (> 0)",
		func(c *config, v string) (err error) { c.progressInterval, err = parseSeconds(v, false); return }},
	{"MCP_EXEC_DEBUG", "0", "1 serves the debug/stats method (goroutines, fds, RSS) for tests and soak runs",
		func(c *config, v string) error {
			switch v {
			case "0", "1":
				c.debug = v == "1"
				return nil
			}
			return errors.New("must be 0 or 1")
		}},
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
// variable is an error: it is almost always a typo.
func loadConfig(environ []string) (*config, error) {
	c := &config{baseEnv: environ}
	known := map[string]configVar{}
	for _, v := range configVars {
		known[v.name] = v
		if err := v.set(c, v.def); err != nil {
			return nil, fmt.Errorf("default of %s: %w", v.name, err)
		}
	}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MCP_EXEC_") {
			continue
		}
		v, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("unknown variable %s; the valid ones are %s", name, strings.Join(configNames(), ", "))
		}
		if value == "" {
			continue // set but empty: keep the default
		}
		if err := v.set(c, value); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", name, value, err)
		}
	}
	c.shell = resolveShell(os.Getenv("SHELL"))
	return c, nil
}

// configNames lists the variable names in order.
func configNames() []string {
	names := make([]string, len(configVars))
	for i, v := range configVars {
		names[i] = v.name
	}
	sort.Strings(names)
	return names
}

// resolveShell picks $SHELL, or /bin/sh when it is unset, and finds it on
// PATH when it is a bare name. A shell that cannot be found is kept as is:
// each job then fails to start with a start_error that names it.
func resolveShell(shell string) string {
	if shell == "" {
		return "/bin/sh"
	}
	if !strings.Contains(shell, "/") {
		if path, err := exec.LookPath(shell); err == nil {
			return path
		}
	}
	return shell
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
