"""End-to-end tests of MCP tasks in both revisions' forms.

  2025-11-25  any client of a session of this revision (capabilities.tasks
              is offered whatever the client declared) sends
              tools/call with params.task: the task comes back at once;
              tasks/get, tasks/result (the call's own result), tasks/list,
              tasks/cancel (kills the job's tree); isError results are failed
  2026-07-28  a client that declares the io.modelcontextprotocol/tasks
              extension gets resultType "task" for an execute that would
              yield; tasks/get carries the result (isError results are
              completed); tasks/cancel acknowledges; no tasks/result, tasks/list

A client of an older revision, or a 2026-07-28 client without the extension,
sees exactly what it always did. Run on every
target: nothing here needs host files.
"""

import pytest

from tests.helpers import Server, wait_until

MODERN = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"


def meta(declared=True):
    caps = {"extensions": {EXT: {}}} if declared else {}
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"}}


def modern(params=None, declared=True):
    p = dict(params or {})
    p["_meta"] = meta(declared)
    return p


@pytest.fixture
def legacy(make_server):
    """A 2025-11-25 session whose client declared capabilities.tasks."""
    s = make_server(initialize=False)
    s.init_result = s.result("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {"tasks": {}},
        "clientInfo": {"name": "e2e", "version": "0"}})
    s.notify("notifications/initialized")
    return s


@pytest.fixture
def bare(make_server):
    """A server nobody initialized: modern requests pick their era."""
    return make_server(initialize=False)


def job_of(task):
    """The job id a running task's statusMessage names."""
    words = task["statusMessage"].split()
    assert words[0] == "job", task
    return words[1]


def start_task(s, args, ttl=60000):
    r = s.result("tools/call", {"name": "execute", "arguments": args, "task": {"ttl": ttl}})
    return r["task"]


def test_legacy_capability_and_tool_say_tasks(legacy):
    caps = legacy.init_result["capabilities"]
    assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert "MCP task" in legacy.init_result["instructions"]
    tools = {t["name"]: t for t in legacy.result("tools/list")["tools"]}
    assert tools["execute"]["execution"] == {"taskSupport": "optional"}
    assert "MCP task" in tools["execute"]["description"]
    assert all("execution" not in t for n, t in tools.items() if n != "execute")


def test_legacy_task_comes_at_once_and_result_is_the_calls(legacy):
    # cat runs until its stdin closes: the task answers while it runs.
    t = start_task(legacy, {"command": "cat"})
    assert t["status"] == "working" and len(t["taskId"]) == 32, t
    assert t["ttl"] == 60000 and t["pollInterval"] > 0 and t["createdAt"] and t["lastUpdatedAt"]
    job = job_of(t)
    got = legacy.result("tasks/get", {"taskId": t["taskId"]})
    assert got["status"] == "working" and got["taskId"] == t["taskId"]
    listed = legacy.result("tasks/list")["tasks"]
    assert [x["taskId"] for x in listed] == [t["taskId"]]
    pending = legacy.start("tasks/result", {"taskId": t["taskId"]})  # blocks until the job ends
    legacy.tool("input", {"job_id": job, "data": "hello\n", "close": True})
    msg = legacy.response(pending)
    res = msg["result"]
    assert res["_meta"][RELATED] == {"taskId": t["taskId"]}
    out = Server.decode(res)
    assert out["job_id"] == job and out["state"] == "success" and out["stdout"]["data"] == "hello\n"
    assert res["structuredContent"] == out
    assert legacy.result("tasks/get", {"taskId": t["taskId"]})["status"] == "completed"


def test_legacy_result_delivered_once_across_task_and_wait(legacy):
    t = start_task(legacy, {"command": "echo once"})
    res = legacy.result("tasks/result", {"taskId": t["taskId"]})
    job = Server.decode(res)["job_id"]
    # The task collected the job: wait finds it delivered, tasks/result still answers.
    assert "delivered" in legacy.tool_err("wait", {"job_ids": [job], "timeout": 0})
    again = legacy.result("tasks/result", {"taskId": t["taskId"]})
    assert Server.decode(again) == Server.decode(res)


def test_legacy_is_error_result_is_failed(legacy):
    t = start_task(legacy, {"command": "true", "time_limit": -1})
    assert t["status"] == "failed" and "time_limit" in t["statusMessage"], t
    res = legacy.result("tasks/result", {"taskId": t["taskId"]})
    assert res["isError"] is True and "time_limit" in res["content"][0]["text"]
    assert res["_meta"][RELATED] == {"taskId": t["taskId"]}


def test_legacy_exit_code_is_completed(legacy):
    t = start_task(legacy, {"command": "exit 3"})
    res = legacy.result("tasks/result", {"taskId": t["taskId"]})
    assert Server.decode(res)["exit_code"] == 3
    assert legacy.result("tasks/get", {"taskId": t["taskId"]})["status"] == "completed"


def test_legacy_cancel_kills_the_tree(legacy):
    t = start_task(legacy, {"command": "sleep 300 & echo $!; wait"})
    job = job_of(t)
    out = legacy.poll_output(job, lambda d: d.strip().isdigit())
    child = int(out["stdout"]["data"].strip())
    c = legacy.result("tasks/cancel", {"taskId": t["taskId"]})
    assert c["status"] == "cancelled" and c["taskId"] == t["taskId"]
    legacy.wait_proc_gone(child)
    assert legacy.result("tasks/get", {"taskId": t["taskId"]})["status"] == "cancelled"
    # An ended task cannot be cancelled again.
    assert legacy.error("tasks/cancel", {"taskId": t["taskId"]})["code"] == -32602


def test_legacy_unknown_ids_and_tools(legacy):
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert legacy.error(method, {"taskId": "0" * 32})["code"] == -32602
        assert legacy.error(method, {})["code"] == -32602
    err = legacy.error("tools/call", {"name": "status", "arguments": {"job_id": "1"}, "task": {}})
    assert err["code"] == -32601


def test_legacy_client_declaring_no_capabilities_is_offered_tasks(make_server):
    # The server declares its own capabilities: a 2025-11-25 client that
    # declared none still learns of tasks and may use them.
    s = make_server(version="2025-11-25")
    assert s.init_result["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in s.result("tools/list")["tools"]}
    assert tools["execute"]["execution"] == {"taskSupport": "optional"}
    t = start_task(s, {"command": "echo tasked"})
    res = s.result("tasks/result", {"taskId": t["taskId"]})
    assert Server.decode(res)["stdout"]["data"] == "tasked\n" and res["_meta"][RELATED] == {"taskId": t["taskId"]}


def test_client_of_an_older_revision_is_unaffected(make_server):
    s = make_server(version="2025-06-18")
    assert s.init_result["capabilities"] == {"tools": {}}
    assert "task" not in s.init_result["instructions"]
    assert all("execution" not in t and "MCP task" not in t["description"] for t in s.result("tools/list")["tools"])
    # params.task is ignored: the call blocks and answers as always.
    res = s.result("tools/call", {"name": "execute", "arguments": {"command": "echo plain"}, "task": {}})
    assert Server.decode(res)["stdout"]["data"] == "plain\n" and "_meta" not in res
    assert s.error("tasks/get", {"taskId": "x"})["code"] == -32601
    assert s.error("tasks/list")["code"] == -32601


def test_modern_discover_lists_the_extension_only_when_declared(bare):
    r = bare.result("server/discover", modern())
    assert r["capabilities"]["extensions"] == {EXT: {}}
    assert "task" in r["instructions"]
    plain = bare.result("server/discover", modern(declared=False))
    assert plain["capabilities"] == {"tools": {}} and "task" not in plain["instructions"]


def test_modern_yield_becomes_a_task_with_its_result(bare):
    r = bare.result("tools/call", modern({"name": "execute", "arguments": {"command": "cat; exit 3", "yield_after": 0.3, "capture": {"on_success": "all", "on_error": "all"}}}))
    assert r["resultType"] == "task" and r["status"] == "working", r
    assert r["ttlMs"] > 0 and r["pollIntervalMs"] > 0 and "ttl" not in r
    job = job_of(r)
    got = bare.result("tasks/get", modern({"taskId": r["taskId"]}))
    assert got["resultType"] == "complete" and got["status"] == "working" and "result" not in got
    bare.result("tools/call", modern({"name": "input", "arguments": {"job_id": job, "data": "x\n", "close": True}}))

    def done():
        return bare.result("tasks/get", modern({"taskId": r["taskId"]}))["status"] != "working"
    wait_until(done, timeout=20, what="the task to end")
    got = bare.result("tasks/get", modern({"taskId": r["taskId"]}))
    # A non-zero exit, an error of the job, is a completed task here.
    assert got["status"] == "completed", got
    out = Server.decode(got["result"])
    assert out["job_id"] == job and out["exit_code"] == 3 and out["stdout"]["data"] == "x\n"
    # Delivered once: the task holds it, a wait finds the job delivered.
    w = bare.result("tools/call", modern({"name": "wait", "arguments": {"job_ids": [job], "timeout": 0}}))
    assert w["isError"] is True and "delivered" in w["content"][0]["text"]


def test_modern_is_error_result_is_completed(bare):
    # Only an execute that would yield becomes a task, and such a result is
    # never isError; what stays a plain call answers as always.
    r = bare.result("tools/call", modern({"name": "execute", "arguments": {"command": "true", "time_limit": -1}}))
    assert r["resultType"] == "complete" and r["isError"] is True


def test_modern_cancel_kills_and_acks(bare):
    r = bare.result("tools/call", modern({"name": "execute", "arguments": {"command": "sleep 300 & echo $!; wait", "yield_after": 0.3}}))
    assert r["resultType"] == "task", r
    job = job_of(r)

    def child_pid():
        o = bare.result("tools/call", modern({"name": "output", "arguments": {"job_id": job, "stdout": "all"}}))
        data = Server.decode(o)["stdout"]["data"].strip()
        return int(data) if data.isdigit() else None
    wait_until(lambda: child_pid() is not None, timeout=20, what="the child's pid")
    child = child_pid()
    ack = bare.result("tasks/cancel", modern({"taskId": r["taskId"]}))
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
    assert bare.result("tasks/get", modern({"taskId": r["taskId"]}))["status"] == "cancelled"
    gone = bare.result("tools/call", modern({"name": "execute", "arguments": {
        "command": "[ -e /proc/%d ] && cut -d' ' -f3 /proc/%d/stat || echo gone" % (child, child)}}))
    assert Server.decode(gone)["stdout"]["data"].strip() in ("gone", "Z")


def test_modern_unknown_ids_and_removed_methods(bare):
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        assert bare.error(method, modern({"taskId": "0" * 32}))["code"] == -32602
    for method in ("tasks/result", "tasks/list"):
        assert bare.error(method, modern({"taskId": "0" * 32}))["code"] == -32601


def test_modern_client_without_the_extension_is_unaffected(bare):
    r = bare.result("tools/call", modern({"name": "execute", "arguments": {"command": "cat", "yield_after": 0.2}}, declared=False))
    assert r["resultType"] == "complete"
    out = Server.decode(r)
    assert out["state"] == "running" and out["yielded"] is True
    err = bare.error("tasks/get", modern({"taskId": "x"}, declared=False))
    assert err["code"] == -32021 and EXT in err["data"]["requiredCapabilities"]["extensions"]
    tools = bare.result("tools/list", modern(declared=False))["tools"]
    assert all("task" not in t["description"] for t in tools)
    bare.result("tools/call", modern({"name": "kill", "arguments": {"job_id": out["job_id"], "signal": "KILL"}}, declared=False))
