"""End-to-end tests of the MCP revisions the server speaks.

  legacy 2024-11-05, 2025-03-26   initialize; 1.0 shapes; batches under 2025-03-26 only
  legacy 2025-06-18, 2025-11-25   titles, outputSchema, structuredContent (wait wrapped)
  modern 2026-07-28               no initialize; per-request _meta; server/discover;
                                  resultType everywhere; no reply once cancelled

Run on every target: nothing here needs host files.
"""

import json
import subprocess
import time

import pytest

from tests.helpers import SLACK, Server, process_env, server_argv

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"}}


def modern(params=None):
    p = dict(params or {})
    p["_meta"] = META
    return p


@pytest.fixture(scope="module")
def bare():
    """A server nobody initialized: each request picks its era."""
    s = Server(initialize=False)
    yield s
    s.close()


def test_discover_says_what_the_server_is(bare):
    r = bare.result("server/discover", modern())
    assert r["resultType"] == "complete"
    assert r["supportedVersions"] == [MODERN]
    assert r["capabilities"] == {"tools": {}}
    assert r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-exec"
    assert isinstance(r["ttlMs"], int) and r["cacheScope"] in ("public", "private")
    assert "execute" in r["instructions"]


def test_discover_without_meta_is_not_a_method(bare):
    # A legacy client probing first must get an error at once, not silence.
    assert bare.error("server/discover")["code"] == -32601


def test_unsupported_revision_names_the_supported_ones(bare):
    e = bare.error("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}})
    assert e["code"] == -32022
    assert e["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


@pytest.mark.parametrize("meta", [
    {"io.modelcontextprotocol/protocolVersion": MODERN},
    {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": "all"},
    dict(META, **{"io.modelcontextprotocol/logLevel": "verbose"}),
    {"io.modelcontextprotocol/clientCapabilities": {}},
])
def test_malformed_modern_meta_is_invalid_params(bare, meta):
    assert bare.error("tools/list", {"_meta": meta})["code"] == -32602


def test_modern_results_carry_result_type(bare):
    lst = bare.result("tools/list", modern())
    assert lst["resultType"] == "complete" and lst["cacheScope"] and lst["ttlMs"] > 0
    assert all(t["title"] and t["outputSchema"]["type"] == "object" for t in lst["tools"])
    res = bare.result("tools/call", modern({"name": "execute", "arguments": {"command": "echo modern"}}))
    assert res["resultType"] == "complete"
    assert json.loads(res["content"][0]["text"]) == res["structuredContent"]
    assert res["structuredContent"]["stdout"]["data"] == "modern\n"
    err = bare.result("tools/call", modern({"name": "status", "arguments": {"job_id": "999"}}))
    assert err["resultType"] == "complete" and err["isError"] is True and "structuredContent" not in err


@pytest.mark.parametrize("method", ["ping", "initialize"])
def test_legacy_methods_are_not_modern(bare, method):
    assert bare.error(method, modern({"protocolVersion": "2025-11-25"} if method == "initialize" else {}))["code"] == -32601


def test_cancelled_modern_request_gets_no_reply(bare):
    rid = bare.start("tools/call", modern({"name": "execute", "arguments": {"command": "sleep 30"}}))
    time.sleep(0.2)  # let the job start; the assertion below has its own deadline
    bare.cancel(rid)
    # Everything sent before this ping has been read and handled ...
    bare.roundtrip()
    deadline = time.monotonic() + 1 + SLACK
    while time.monotonic() < deadline:  # ... and for a while after, still nothing
        assert not bare.has_response(rid), "a cancelled 2026-07-28 request was answered"
        time.sleep(0.05)


def test_cancelled_legacy_request_is_answered_cancelled():
    s = Server(version="2025-11-25")
    try:
        rid = s.tool_start("execute", {"command": "sleep 30"})
        time.sleep(0.2)
        s.cancel(rid)
        assert s.response(rid, timeout=10 + SLACK)["error"]["code"] == -32800
    finally:
        s.close()


@pytest.mark.parametrize("version,structured", [
    ("2024-11-05", False), ("2025-03-26", False), ("2025-06-18", True), ("2025-11-25", True)])
def test_structured_results_from_2025_06_18(version, structured):
    s = Server(version=version)
    try:
        tools = {t["name"]: t for t in s.result("tools/list")["tools"]}
        assert ("outputSchema" in tools["wait"]) == structured
        assert ("title" in tools["execute"]) == structured
        jid = s.tool("execute", {"command": "echo hi", "nowait": True})["job_id"]
        res = s.tool_raw("wait", {"job_ids": [jid], "timeout": 10})
        text = json.loads(res["content"][0]["text"])
        assert isinstance(text, list) and text[0]["state"] == "success"
        if structured:
            assert res["structuredContent"] == {"results": text}
        else:
            assert "structuredContent" not in res
        for name, args in (("list_jobs", {}), ("execute", {"command": "true"})):
            res = s.tool_raw(name, args)
            assert (res.get("structuredContent") == json.loads(res["content"][0]["text"])) == structured
    finally:
        s.close()


def test_annotations_say_what_each_tool_does():
    s = Server()
    try:
        a = {t["name"]: t["annotations"] for t in s.result("tools/list")["tools"]}
        assert a["wait"]["readOnlyHint"] is False  # it consumes results
        assert a["execute"]["openWorldHint"] is True and a["execute"]["destructiveHint"] is True
        for name in ("status", "output", "list_jobs"):
            assert a[name]["readOnlyHint"] is True and a[name]["openWorldHint"] is False
        assert a["kill"]["destructiveHint"] is True and a["kill"]["idempotentHint"] is True
    finally:
        s.close()


def raw_lines(lines, count, timeout=20):
    """Send lines to a fresh server; return the first `count` lines it answers."""
    proc = subprocess.Popen(server_argv({}), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=process_env({}))
    try:
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        got = []
        deadline = time.monotonic() + timeout + SLACK
        while len(got) < count and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            got.append(json.loads(line))
        return got
    finally:
        proc.stdin.close()
        proc.wait(timeout=10 + SLACK)


def req(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    return m


def test_batch_under_2025_03_26():
    init = req(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                 "clientInfo": {"name": "e2e", "version": "0"}})
    batch = [req(2, "ping"), req(3, "tools/call", {"name": "execute", "arguments": {"command": "echo b"}}),
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    got = raw_lines([json.dumps(init), json.dumps(batch), json.dumps(req(4, "ping"))], 3)
    assert got[0]["result"]["protocolVersion"] == "2025-03-26"
    # The batch answers when its slowest request does: the later ping may come first.
    arrays = [g for g in got if isinstance(g, list)]
    assert len(arrays) == 1 and sorted(r["id"] for r in arrays[0]) == [2, 3], got
    call = [r for r in arrays[0] if r["id"] == 3][0]
    assert json.loads(call["result"]["content"][0]["text"])["stdout"]["data"] == "b\n"
    assert {"jsonrpc": "2.0", "id": 4, "result": {}} in got


def test_batch_refused_under_other_revisions():
    init = req(1, "initialize", {"protocolVersion": "2025-11-25"})
    got = raw_lines([json.dumps(init), json.dumps([req(2, "ping")])], 2)
    assert got[1]["error"]["code"] == -32600 and got[1]["id"] is None
