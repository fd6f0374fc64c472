// Command go-sdk-client drives mcp-exec with the official MCP Go SDK client:
// with its default (2026-07-28, which probes server/discover first and falls
// back to initialize) and asking for each legacy revision, it connects, lists
// the tools and runs every tool.
//
//	go run . /path/to/mcp-exec
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

func main() {
	if len(os.Args) != 2 {
		fail("usage: go-sdk-client /path/to/mcp-exec")
	}
	// "" is the SDK's default: its newest revision, negotiated down.
	for _, version := range []string{"", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		check(os.Args[1], version)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go-sdk-client: "+format+"\n", args...)
	os.Exit(1)
}

func check(bin, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	// The server refuses MCP_EXEC_* names it does not know, and the test
	// scripts export MCP_EXEC_BIN; a client launching it passes neither.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCP_EXEC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-check", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		fail("%s: connect: %v", label(version), err)
	}
	defer session.Close()
	init := session.InitializeResult()
	if init.ServerInfo == nil || init.ServerInfo.Name != "mcp-exec" {
		fail("%s: server info %+v", label(version), init.ServerInfo)
	}
	want := version
	if want == "" {
		want = "2025-11-25" // the newest legacy revision the server speaks
	}
	if init.ProtocolVersion != want {
		fail("%s: negotiated %q, want %q", label(version), init.ProtocolVersion, want)
	}

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		fail("%s: tools/list: %v", label(version), err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	if !reflect.DeepEqual(names, []string{"execute", "input", "kill", "list_jobs", "output", "status", "wait"}) {
		fail("%s: tools %v", label(version), names)
	}

	call := func(name string, args map[string]any) map[string]any {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			fail("%s: %s: %v", label(version), name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			return map[string]any{"error": text}
		}
		var out any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			fail("%s: %s: result is not JSON: %q", label(version), name, text)
		}
		if list, ok := out.([]any); ok {
			return list[0].(map[string]any)
		}
		return out.(map[string]any)
	}
	expect := func(what string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			fail("%s: %s = %#v, want %#v", label(version), what, got, want)
		}
	}

	done := call("execute", map[string]any{"command": "echo hello"})
	expect("execute state", done["state"], "success")
	expect("execute stdout", done["stdout"].(map[string]any)["data"], "hello\n")

	id := call("execute", map[string]any{"command": "cat", "nowait": true})["job_id"].(string)
	expect("status", call("status", map[string]any{"job_id": id})["state"], "running")
	expect("list_jobs", call("list_jobs", map[string]any{})["jobs"], []any{map[string]any{"job_id": id, "state": "running"}})
	expect("input", call("input", map[string]any{"job_id": id, "data": "ping\n", "close": true})["job_id"], id)
	finished := call("wait", map[string]any{"job_ids": []any{id}, "timeout": 10})
	expect("wait state", finished["state"], "success")
	expect("wait stdout", finished["stdout"].(map[string]any)["data"], "ping\n")

	sleeper := call("execute", map[string]any{"command": "sleep 30", "nowait": true})["job_id"].(string)
	expect("output", call("output", map[string]any{"job_id": sleeper, "stdout": "all"})["stdout"].(map[string]any)["total_bytes"], 0.0)
	killed := call("kill", map[string]any{"job_id": sleeper})
	expect("kill terminated", killed["terminated"], true)
	expect("kill signal", killed["result"].(map[string]any)["signal"], "terminated")
	if msg, _ := call("status", map[string]any{"job_id": sleeper})["error"].(string); !strings.Contains(msg, "unknown job_id") {
		fail("%s: status of a delivered job: %q", label(version), msg)
	}
	fmt.Printf("ok %s: connect, tools/list and all seven tools\n", label(version))
}

func label(version string) string {
	if version == "" {
		return "default (server/discover probe, then initialize)"
	}
	return version
}
