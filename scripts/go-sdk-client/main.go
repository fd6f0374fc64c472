// Command go-sdk-client drives mcp-exec with the official MCP Go SDK client
// (v1.8.0). It connects once with the SDK's default, which probes
// server/discover and must settle on the modern era (2026-07-28), once asking
// for an unknown future revision (the server's -32022 must name 2026-07-28,
// which the SDK retries with), and once pinned to each legacy revision (ClientSessionOptions.ProtocolVersion: the
// SDK then skips the probe and sends initialize with that revision, which the
// server must echo). Each run lists the tools and drives all seven (execute
// blocking and nowait, status, list_jobs, input with close, wait, output,
// kill, and a tool error), printing one line per step; from 2025-06-18 on it
// checks each tool's title and outputSchema and that every successful
// result's structuredContent equals its text (wait: {"results": text}).
//
// With -http it drives the server's HTTP transport instead (http.go).
//
//	go run . /path/to/mcp-exec
//	go run . -http /path/to/mcp-exec
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	modern = "2026-07-28"
	future = "2099-01-01"
)

func main() {
	args := os.Args[1:]
	overHTTP := len(args) == 2 && args[0] == "-http"
	if overHTTP {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: go-sdk-client [-http] /path/to/mcp-exec")
		os.Exit(2)
	}
	if overHTTP {
		os.Exit(mainHTTP(args[0]))
	}
	failed := 0
	// "" is the SDK's default: its newest revision (2026-07-28), probed with
	// server/discover, falling back to initialize 2025-11-25 on an error.
	// future is a revision the server does not know: its discover must fail
	// with -32022 naming the supported versions, which the SDK retries with.
	for _, version := range []string{"", future, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		if err := check(label(version), version, stdioTransport(args[0])); err != nil {
			fmt.Printf("FAIL %s: %v\n", label(version), err)
			failed++
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// stdioTransport starts the server as a child speaking over stdio.
func stdioTransport(bin string) func() mcp.Transport {
	return func() mcp.Transport {
		cmd := exec.Command(bin)
		cmd.Stderr = os.Stderr
		// The server refuses MCP_EXEC_* names it does not know, and the test
		// scripts export MCP_EXEC_BIN; a client launching it passes neither.
		cmd.Env = envWithoutOurs()
		return &mcp.CommandTransport{Command: cmd}
	}
}

// envWithoutOurs is our environment without MCP_EXEC_* variables.
func envWithoutOurs() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_EXEC_") {
			env = append(env, kv)
		}
	}
	return env
}

// failure carries a check failure through panic to check's recover.
type failure struct{ err error }

func fail(format string, args ...any) {
	panic(failure{fmt.Errorf(format, args...)})
}

func label(version string) string {
	if version == "" {
		return "default"
	}
	return version
}

// check connects through the transport newTransport makes, with version
// (see main), and drives all seven tools; name prefixes its lines.
func check(name, version string, newTransport func() mcp.Transport) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	log := func(format string, args ...any) {
		fmt.Printf("ok %s: %s\n", name, fmt.Sprintf(format, args...))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-check", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, newTransport(), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		fail("connect: %v", err)
	}
	defer session.Close()
	init := session.InitializeResult()
	if init.ServerInfo == nil || init.ServerInfo.Name != "mcp-exec" {
		fail("server info %+v", init.ServerInfo)
	}
	want := version
	if want == "" || want == future {
		want = modern // the server is dual-era: the probe must find it modern
	}
	if init.ProtocolVersion != want {
		fail("negotiated %q, want %q", init.ProtocolVersion, want)
	}
	switch version {
	case "":
		log("server/discover -> %s (modern era, no initialize), server %s %s", init.ProtocolVersion, init.ServerInfo.Name, init.ServerInfo.Version)
	case future:
		log("server/discover asking %s -> -32022 with supported versions, retried -> %s (modern era), server %s %s", future, init.ProtocolVersion, init.ServerInfo.Name, init.ServerInfo.Version)
	default:
		log("initialize %s -> echoed, server %s %s", version, init.ServerInfo.Name, init.ServerInfo.Version)
	}
	structured := init.ProtocolVersion >= "2025-06-18"

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		fail("tools/list: %v", err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
		schema, _ := t.OutputSchema.(map[string]any)
		switch {
		case structured && t.Title == "":
			fail("tools/list: %s has no title", t.Name)
		case structured && (schema == nil || schema["type"] != "object"):
			fail("tools/list: %s outputSchema %v, want root type object", t.Name, t.OutputSchema)
		case !structured && t.OutputSchema != nil:
			fail("tools/list: %s has an outputSchema before 2025-06-18", t.Name)
		}
	}
	slices.Sort(names)
	if !reflect.DeepEqual(names, []string{"execute", "input", "kill", "list_jobs", "output", "status", "wait"}) {
		fail("tools/list: tools %v", names)
	}
	what := "seven tools"
	if structured {
		what += ", each with a title and an object outputSchema"
	}
	if init.ProtocolVersion == modern {
		if tools.ResultType != "complete" || (tools.CacheScope != "public" && tools.CacheScope != "private") {
			fail("tools/list: resultType %q, cacheScope %q", tools.ResultType, tools.CacheScope)
		}
		what += fmt.Sprintf(", resultType complete, ttlMs %d, cacheScope %s", tools.TTLMs, tools.CacheScope)
	}
	log("tools/list -> %s", what)

	sc := ""
	if structured {
		sc = ", structuredContent == text"
	}
	// call runs a tool; a tool error comes back as {"error": text}.
	call := func(name string, args map[string]any) map[string]any {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			fail("%s: %v", name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			if res.StructuredContent != nil {
				fail("%s: an isError result carries structuredContent %v", name, res.StructuredContent)
			}
			return map[string]any{"error": text}
		}
		var out any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			fail("%s: result is not JSON: %q", name, text)
		}
		switch {
		case !structured && res.StructuredContent != nil:
			fail("%s: structuredContent before 2025-06-18", name)
		case structured && name == "wait" && !reflect.DeepEqual(res.StructuredContent, map[string]any{"results": out}):
			fail("%s: structuredContent %v, want {results: %s}", name, res.StructuredContent, text)
		case structured && name != "wait" && !reflect.DeepEqual(res.StructuredContent, out):
			fail("%s: structuredContent %v, want %s", name, res.StructuredContent, text)
		}
		if list, ok := out.([]any); ok {
			return list[0].(map[string]any)
		}
		return out.(map[string]any)
	}
	expect := func(what string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			fail("%s = %#v, want %#v", what, got, want)
		}
	}

	done := call("execute", map[string]any{"command": "echo hello"})
	expect("execute state", done["state"], "success")
	expect("execute exit_code", done["exit_code"], 0.0)
	expect("execute stdout", done["stdout"].(map[string]any)["data"], "hello\n")
	log(`execute {command:"echo hello"} -> success, exit_code 0, stdout "hello\n"%s`, sc)

	id := call("execute", map[string]any{"command": "cat", "nowait": true})["job_id"].(string)
	log(`execute {command:"cat", nowait:true} -> running job %s%s`, id, sc)
	expect("status", call("status", map[string]any{"job_id": id})["state"], "running")
	log(`status {job_id:%s} -> running%s`, id, sc)
	expect("list_jobs", call("list_jobs", map[string]any{})["jobs"], []any{map[string]any{"job_id": id, "state": "running"}})
	log(`list_jobs -> [{job_id:%s, state:running}]%s`, id, sc)
	expect("input", call("input", map[string]any{"job_id": id, "data": "ping\n", "close": true})["job_id"], id)
	log(`input {job_id:%s, data:"ping\n", close:true} -> ok%s`, id, sc)
	finished := call("wait", map[string]any{"job_ids": []any{id}, "timeout": 10})
	expect("wait state", finished["state"], "success")
	expect("wait stdout", finished["stdout"].(map[string]any)["data"], "ping\n")
	if structured {
		log(`wait {job_ids:[%s], timeout:10} -> [success, stdout "ping\n"], structuredContent == {results: text}`, id)
	} else {
		log(`wait {job_ids:[%s], timeout:10} -> [success, stdout "ping\n"]`, id)
	}

	sleeper := call("execute", map[string]any{"command": "sleep 30", "nowait": true})["job_id"].(string)
	expect("output", call("output", map[string]any{"job_id": sleeper, "stdout": "all"})["stdout"].(map[string]any)["total_bytes"], 0.0)
	log(`output {job_id:%s (sleep 30), stdout:"all"} -> 0 bytes%s`, sleeper, sc)
	killed := call("kill", map[string]any{"job_id": sleeper})
	expect("kill terminated", killed["terminated"], true)
	expect("kill signal", killed["result"].(map[string]any)["signal"], "terminated")
	log(`kill {job_id:%s} -> terminated by "terminated"%s`, sleeper, sc)
	if msg, _ := call("status", map[string]any{"job_id": sleeper})["error"].(string); !strings.Contains(msg, "unknown job_id") {
		fail("status of a delivered job: %q", msg)
	}
	log(`status {job_id:%s} after kill -> isError "unknown job_id", no structuredContent`, sleeper)
	return nil
}
