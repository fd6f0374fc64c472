package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// tasks.go: MCP tasks in the 2025-11-25 and 2026-07-28 forms.

// legacyTaskInit initializes cl as a 2025-11-25 client that declares
// capabilities.tasks, and returns the initialize result.
func legacyTaskInit(t *testing.T, cl *rpcClient) map[string]any {
	t.Helper()
	r := cl.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{}}}}`)
	return r["result"].(map[string]any)
}

// modernTaskMeta is the _meta of a 2026-07-28 request, declaring the tasks
// extension when declared.
func modernTaskMeta(declared bool) string {
	caps := `{}`
	if declared {
		caps = `{"extensions":{"` + extTasks + `":{}}}`
	}
	return `"_meta":{"` + metaProtocolVersion + `":"2026-07-28","` + metaClientCaps + `":` + caps + `}`
}

// taskOf is the task object of a reply: CreateTaskResult's task, or the
// flat result.
func taskOf(t *testing.T, reply map[string]any) map[string]any {
	t.Helper()
	res, ok := reply["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", reply)
	}
	if task, ok := res["task"].(map[string]any); ok {
		return task
	}
	return res
}

// taskJob is the job a task runs, as the board knows it.
func taskJob(t *testing.T, cl *rpcClient, id string) *job {
	t.Helper()
	cl.c.tasks.mu.Lock()
	task := cl.c.tasks.tasks[id]
	cl.c.tasks.mu.Unlock()
	if task == nil {
		t.Fatalf("no task %s", id)
	}
	task.mu.Lock()
	defer task.mu.Unlock()
	return task.job
}

func TestLegacyTaskAnswersAtOnceAndTasksResultIsTheCallsResult(t *testing.T) {
	cl := newRPCClient(t, testConfig())
	init := legacyTaskInit(t, cl)
	caps := init["capabilities"].(map[string]any)
	if _, ok := caps["tasks"].(map[string]any)["list"]; !ok {
		t.Fatalf("stdio offers tasks/list: %v", caps)
	}
	// cat runs until its stdin closes: the call must answer before that.
	task := taskOf(t, cl.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"cat"},"task":{"ttl":5000}}}`))
	id := task["taskId"].(string)
	if task["status"] != "working" || len(id) != 32 || fmt.Sprint(task["ttl"]) != "5000" {
		t.Fatalf("task = %v", task)
	}
	j := taskJob(t, cl, id)
	got := taskOf(t, cl.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"`+id+`"}}`))
	if got["status"] != "working" || !strings.Contains(got["statusMessage"].(string), "job "+j.id) {
		t.Fatalf("tasks/get = %v", got)
	}
	list := cl.call(`{"jsonrpc":"2.0","id":4,"method":"tasks/list"}`)["result"].(map[string]any)["tasks"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["taskId"] != id {
		t.Fatalf("tasks/list = %v", list)
	}
	cl.send(`{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	cl.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"input","arguments":{"job_id":"` + j.id + `","data":"hi\n","close":true}}}`)
	// The job ends as its input arrives, so the two replies come in either
	// order.
	replies := map[string]map[string]any{}
	for range 2 {
		r := decodeReply(t, cl.next(jobDeadline))
		replies[fmt.Sprint(r["id"])] = r
	}
	if in, ok := replies["6"]["result"].(map[string]any); !ok || in["isError"] == true {
		t.Fatalf("input failed: %v", replies["6"])
	}
	res := replies["5"]["result"].(map[string]any)
	related := res["_meta"].(map[string]any)[metaRelatedTask].(map[string]any)
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	if related["taskId"] != id || !strings.Contains(text, `"data":"hi\n"`) || res["structuredContent"] == nil {
		t.Fatalf("tasks/result = %v", res)
	}
	// One delivery: the task collected the job, so wait finds it delivered.
	if _, text, isErr := cl.tool(7, "wait", `{"job_ids":["`+j.id+`"],"timeout":0}`); !isErr || !strings.Contains(text, "delivered") {
		t.Fatalf("wait after tasks/result = %s", text)
	}
}

func TestLegacyTaskIsErrorIsFailed(t *testing.T) {
	cl := newRPCClient(t, testConfig())
	legacyTaskInit(t, cl)
	task := taskOf(t, cl.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"true","time_limit":-1},"task":{}}}`))
	if task["status"] != "failed" || fmt.Sprint(task["ttl"]) != fmt.Sprint(taskTTLDefault.Milliseconds()) {
		t.Fatalf("task = %v", task)
	}
	res := cl.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + task["taskId"].(string) + `"}}`)["result"].(map[string]any)
	if res["isError"] != true {
		t.Fatalf("tasks/result = %v", res)
	}
}

func TestTaskCancelKillsTheJobsTree(t *testing.T) {
	onLinux(t)
	for _, modern := range []bool{false, true} {
		t.Run(fmt.Sprintf("modern=%v", modern), func(t *testing.T) {
			cl := newRPCClient(t, testConfig())
			var reply map[string]any
			meta := ""
			if modern {
				meta = "," + modernTaskMeta(true)
				reply = cl.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 300 & sleep 300; wait","yield_after":0.2}` + meta + `}}`)
			} else {
				legacyTaskInit(t, cl)
				reply = cl.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 300 & sleep 300; wait"},"task":{}}}`)
			}
			id := taskOf(t, reply)["taskId"].(string)
			j := taskJob(t, cl, id)
			eventually(t, jobDeadline, "both sleeps", func() bool { return countComm(inGroup(j.pid), "sleep") == 2 })
			got := cl.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"` + id + `"` + meta + `}}`)
			if got["error"] != nil {
				t.Fatalf("tasks/cancel = %v", got)
			}
			if left := inGroup(j.pid); len(left) > 0 {
				t.Fatalf("tasks/cancel answered with the tree alive: %v", left)
			}
			status := taskOf(t, cl.call(`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"`+id+`"`+meta+`}}`))["status"]
			if status != "cancelled" {
				t.Fatalf("status after cancel = %v", status)
			}
		})
	}
}

func TestModernYieldBecomesATaskCarryingItsResult(t *testing.T) {
	cl := newRPCClient(t, testConfig())
	meta := modernTaskMeta(true)
	reply := cl.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"cat; exit 3","yield_after":0.2},` + meta + `}}`)
	task := taskOf(t, reply)
	if task["resultType"] != "task" || task["status"] != "working" || task["ttlMs"] == nil || task["pollIntervalMs"] == nil {
		t.Fatalf("answer = %v", task)
	}
	id := task["taskId"].(string)
	j := taskJob(t, cl, id)
	if _, _, isErr := cl.tool(2, "input", `{"job_id":"`+j.id+`","close":true}`); isErr {
		t.Fatal("input failed")
	}
	var got map[string]any
	eventually(t, jobDeadline, "the task to complete", func() bool {
		got = taskOf(t, cl.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"`+id+`",`+meta+`}}`))
		return got["status"] != "working"
	})
	// An error of the job (exit 3) is a completed task in this revision.
	if got["status"] != "completed" || got["resultType"] != "complete" {
		t.Fatalf("tasks/get = %v", got)
	}
	res := got["result"].(map[string]any)
	if sc := res["structuredContent"].(map[string]any); fmt.Sprint(sc["exit_code"]) != "3" {
		t.Fatalf("result = %v", res)
	}
}

func TestTaskUnknownIDsAreInvalidParams(t *testing.T) {
	cl := newRPCClient(t, testConfig())
	legacyTaskInit(t, cl)
	for i, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, params := range []string{`{"taskId":"nope"}`, `{}`, `{"taskId":7}`} {
			r := cl.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, 10+i, method, params))
			if code := r["error"].(map[string]any)["code"]; fmt.Sprint(code) != "-32602" {
				t.Fatalf("%s %s = %v", method, params, r)
			}
		}
	}
	r := cl.call(`{"jsonrpc":"2.0","id":20,"method":"tasks/get","params":{"taskId":"nope",` + modernTaskMeta(true) + `}}`)
	if code := r["error"].(map[string]any)["code"]; fmt.Sprint(code) != "-32602" {
		t.Fatalf("modern tasks/get = %v", r)
	}
}

// TestTasksAreOfferedToA2025_11_25ClientThatDeclaredNoCapabilities: the
// server's capabilities.tasks and the tools' execution.taskSupport do not
// hang on the client's own capabilities, and such a client's
// task-augmented call runs as a task.
func TestTasksAreOfferedToA2025_11_25ClientThatDeclaredNoCapabilities(t *testing.T) {
	cfg := testConfig()
	cl := newRPCClient(t, cfg)
	init := cl.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)["result"].(map[string]any)
	want := map[string]any{"tools": map[string]any{}, "tasks": toJSONValue(t, legacyTaskCapability(true))}
	if !reflect.DeepEqual(init["capabilities"], want) {
		t.Fatalf("initialize capabilities = %v, want %v", init["capabilities"], want)
	}
	tools := cl.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)["result"].(map[string]any)["tools"].([]any)
	for _, tool := range tools {
		tool := tool.(map[string]any)
		if tool["name"] != "execute" {
			continue
		}
		if exec, _ := tool["execution"].(map[string]any); exec["taskSupport"] != "optional" {
			t.Fatalf("execute's execution = %v", tool["execution"])
		}
	}
	task := taskOf(t, cl.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo tasked"},"task":{}}}`))
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("task-augmented call = %v", task)
	}
	res := cl.call(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)["result"].(map[string]any)
	if text := res["content"].([]any)[0].(map[string]any)["text"].(string); !strings.Contains(text, `tasked\n`) {
		t.Fatalf("tasks/result = %v", res)
	}
}

// TestClientsOfOtherRevisionsSeeNoTasks: tasks came in 2025-11-25, and a
// 2026-07-28 client sees them only through the extension it declares.
func TestClientsOfOtherRevisionsSeeNoTasks(t *testing.T) {
	cfg := testConfig()
	cl := newRPCClient(t, cfg)
	init := cl.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`)["result"].(map[string]any)
	if !reflect.DeepEqual(init["capabilities"], map[string]any{"tools": map[string]any{}}) || init["instructions"] != instructionsFor(cfg) {
		t.Fatalf("initialize = %v", init)
	}
	cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	want, err := marshal(toolListFor(cfg, true, false))
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.next(jobDeadline); !strings.Contains(string(got), string(want)) {
		t.Fatalf("tools/list changed:\n%s\nwant the result\n%s", got, want)
	}
	if r := cl.call(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"x"}}`); fmt.Sprint(r["error"].(map[string]any)["code"]) != "-32601" {
		t.Fatalf("tasks/get = %v", r)
	}
	// A 2025-06-18 client that declares tasks gets none: tasks came in 2025-11-25.
	old := newRPCClient(t, cfg)
	init = old.call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"tasks":{}}}}`)["result"].(map[string]any)
	if _, ok := init["capabilities"].(map[string]any)["tasks"]; ok {
		t.Fatalf("2025-06-18 initialize = %v", init)
	}
	// A modern client without the extension: a yield stays a yield.
	_, text, _ := cl.tool(4, "execute", `{"command":"cat","yield_after":0.1}`)
	modern := newRPCClient(t, cfg)
	r := modern.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"command":"cat","yield_after":0.1},` + modernTaskMeta(false) + `}}`)
	res := r["result"].(map[string]any)
	if res["resultType"] != "complete" || res["structuredContent"].(map[string]any)["yielded"] != true || !strings.Contains(text, `"yielded":true`) {
		t.Fatalf("modern yield = %v", res)
	}
	if r := modern.call(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"x",` + modernTaskMeta(false) + `}}`); fmt.Sprint(r["error"].(map[string]any)["code"]) != "-32021" {
		t.Fatalf("modern tasks/get = %v", r)
	}
}

func TestTaskTTLIsKeptWithinBounds(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		`{}`: taskTTLDefault, `{"ttl":null}`: taskTTLDefault, `{"ttl":60000}`: time.Minute,
		`{"ttl":1}`: taskTTLLeast, `{"ttl":1e12}`: taskTTLMost,
	} {
		if got, err := taskTTLOf(json.RawMessage(raw)); err != nil || got != want {
			t.Errorf("taskTTLOf(%s) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`[]`, `{"ttl":-1}`, `{"ttl":"1"}`} {
		if _, err := taskTTLOf(json.RawMessage(raw)); err == nil || err.Code != codeInvalidParams {
			t.Errorf("taskTTLOf(%s) = %v, want -32602", raw, err)
		}
	}
}

func TestFinishedTaskIsForgottenAfterItsTTL(t *testing.T) {
	var running sync.WaitGroup
	b := newTaskBoard(newRegistry(testConfig()), &running)
	task := b.open(50 * time.Millisecond)
	b.settle(task, textResult("done"), nil)
	params := json.RawMessage(`{"taskId":"` + task.id + `"}`)
	if _, err := b.find(params); err != nil {
		t.Fatalf("a settled task is found until its ttl: %v", err)
	}
	eventually(t, 5*time.Second, "the task to be forgotten", func() bool { _, err := b.find(params); return err != nil })
}

func TestCallToolResultIsWhatTheReplyCarries(t *testing.T) {
	for _, text := range []string{`{"job_id":"1","state":"success"}`, `[{"job_id":"1"}]`} {
		line := textReply(json.RawMessage("1"), replyShape{structured: true}, []byte(text))
		want := decodeReply(t, line)["result"]
		b, err := marshal(toolText(text).callResult(true))
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeReply(t, b); !reflect.DeepEqual(got, want) {
			t.Errorf("callResult(%s) = %v, the reply carries %v", text, got, want)
		}
	}
}

func TestFinishedTasksPastTheBoundForgetTheOldest(t *testing.T) {
	b := newTaskBoard(nil, &sync.WaitGroup{})
	first := b.open(time.Hour)
	b.settle(first, toolText(json.RawMessage(`"x"`)), nil)
	running := b.open(time.Hour) // never settled: kept whatever the count
	for len(b.tasks) < maxKeptTasks {
		b.settle(b.open(time.Hour), toolText(json.RawMessage(`"x"`)), nil)
	}
	b.open(time.Hour)
	if len(b.tasks) != maxKeptTasks {
		t.Fatalf("%d tasks kept, want at most %d", len(b.tasks), maxKeptTasks)
	}
	if b.tasks[first.id] != nil {
		t.Errorf("the oldest finished task is still kept")
	}
	if b.tasks[running.id] == nil {
		t.Errorf("a running task was forgotten")
	}
}

// toJSONValue is v as it decodes after a trip through JSON.
func toJSONValue(t *testing.T, v any) any {
	t.Helper()
	b, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jsonValue(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
