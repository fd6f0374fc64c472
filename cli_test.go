package main

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// cli.go: the command line.

// TestParseArgsAcceptsBothFormsAndNamesWhatIsWrong: every option taking a
// value is read as --name=VALUE and --name VALUE; a missing value, an
// unknown argument, a value on a flag or a repeated option is a usage
// error naming it.
func TestParseArgsAcceptsBothFormsAndNamesWhatIsWrong(t *testing.T) {
	listen := []string{"MCP_EXEC_LISTEN=127.0.0.1:8080"}
	cases := []struct {
		args     []string
		act      cliAction
		settings []string
		err      string // a usage error's text contains it; "" for none
	}{
		{args: nil, act: actServe},
		{args: []string{"--listen", "127.0.0.1:8080"}, settings: listen},
		{args: []string{"--listen=127.0.0.1:8080"}, settings: listen},
		{args: []string{"--listen=[::1]:0"}, settings: []string{"MCP_EXEC_LISTEN=[::1]:0"}},
		{args: []string{"--listen"}, err: "--listen needs an address, e.g. --listen 127.0.0.1:8080"},
		{args: []string{"--listen="}, err: "--listen needs an address"},
		{args: []string{"--listen", "--help"}, err: "--listen needs an address"},
		{args: []string{"--listen", "a:1", "--listen=b:2"}, err: "--listen is given twice"},
		{args: []string{"--listen", "a:1", "extra"}, err: `unknown argument "extra"`},
		{args: []string{"--bogus"}, err: `unknown argument "--bogus"`},
		{args: []string{"-listen", "a:1"}, err: `unknown argument "-listen"`},
		{args: []string{"--help=yes"}, err: "--help takes no value"},
		{args: []string{"--help"}, act: actHelp},
		{args: []string{"-h"}, act: actHelp},
		{args: []string{"--version"}, act: actVersion},
		{args: []string{"-v"}, act: actVersion},
		{args: []string{"--listen", "a:1", "--version"}, act: actVersion},
	}
	for _, tc := range cases {
		act, settings, err := parseArgs(tc.args)
		if tc.err != "" {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseArgs(%q) error = %v, want a usage error containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || act != tc.act || !reflect.DeepEqual(settings, tc.settings) {
			t.Errorf("parseArgs(%q) = %v, %q, %v; want %v, %q", tc.args, act, settings, err, tc.act, tc.settings)
		}
	}
}

// TestHelpEndsWithExamplesAndWhereTheDocsAre: --help's last lines show two
// examples and the documentation's places, in the repository and as the
// Debian package installs it.
func TestHelpEndsWithExamplesAndWhereTheDocsAre(t *testing.T) {
	help := usage()
	examples := strings.LastIndex(help, "\nExamples:\n")
	if examples < 0 {
		t.Fatalf("no Examples section in --help:\n%s", help)
	}
	tail := help[examples:]
	for _, want := range []string{tryExample, "mcp-exec --listen 127.0.0.1:8080", "docs/", "/usr/share/doc/mcp-exec"} {
		if !strings.Contains(tail, want) {
			t.Errorf("--help's end lacks %q:\n%s", want, tail)
		}
	}
	if strings.Contains(tail, "MCP_EXEC_") {
		t.Errorf("the examples come after the environment, not before:\n%s", tail)
	}
}

// TestEverySettingIsListedEverywhere: --help and docs/configuration.md
// list every setting of the table, and --help shows no empty default.
func TestEverySettingIsListedEverywhere(t *testing.T) {
	help := usage()
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range configVars {
		if !strings.Contains(help, "  "+v.name+"\n") {
			t.Errorf("--help does not list %s", v.name)
		}
		if !strings.Contains(string(doc), "| `"+v.name+"` |") {
			t.Errorf("docs/configuration.md has no row for %s", v.name)
		}
	}
	if strings.Contains(help, "; default \n") || strings.Contains(help, "; default (") {
		t.Error("--help shows an empty default")
	}
}

// TestTokenFileFlagReadsTheListenAddress: --token-file goes with --listen
// in either order, and the address is the setting it reads.
func TestTokenFileFlagReadsTheListenAddress(t *testing.T) {
	for _, args := range [][]string{{"--token-file", "--listen", "127.0.0.1:8080"}, {"--listen=127.0.0.1:8080", "--token-file"}} {
		act, settings, err := parseArgs(args)
		if err != nil || act != actTokenFile || len(settings) != 1 || settings[0] != "MCP_EXEC_LISTEN=127.0.0.1:8080" {
			t.Errorf("%q: %v %q %v", args, act, settings, err)
		}
	}
	if _, _, err := parseArgs([]string{"--token-file=x"}); err == nil {
		t.Error("--token-file took a value")
	}
}
