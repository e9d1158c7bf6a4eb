"""The SDK's client over Streamable HTTP against the MCP function, with events shaped as API Gateway sends them.

Stateless: every request is a fresh Lambda invocation of ``threadloom_mcp.lambda_handler``; the tenant is
the JWT's ``sub`` claim, as the authorizer passes it; what is not MCP is refused with the REST envelope.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from threadloom.api.runtime import set_runtime

from tests.support.api import call, gateway_event, seeded_runtime
from tests.support.mcp import json_of, lambda_client, message, remember_a_fact, text_of

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path) -> Any:
    runtime, _ = seeded_runtime(tmp_path)
    yield runtime
    set_runtime(None)


def test_an_agent_lists_the_tools_remembers_a_fact_and_finds_it_again() -> None:
    async def scenario() -> None:
        async with lambda_client("user-123") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names[:5] == ["list_sessions", "create_session", "append_message", "read_history", "search"]
            assert {"list_knowledge", "forget_knowledge", "set_context", "session_search"} <= set(names)
            session_id = await remember_a_fact(client)
        async with lambda_client("user-123") as client:  # a new connection: nothing was kept but the data
            found = json_of(await client.call_tool("search", {"query": "Miso"}))
            assert [hit["sessionId"] for hit in found["results"]] == [session_id]
            page = json_of(await client.call_tool("read_history", {"sessionId": session_id}))
            assert [item["id"] for item in page["messages"]] == ["m1"]
            blocks = await client.read_resource(f"threadloom://sessions/{session_id}/context")
            memory = next(b for b in json.loads(blocks.contents[0].text)["blocks"] if b["label"] == "memory")
            assert memory["content"] == "The user's cat is called Miso."

    anyio.run(scenario)
    status, listed = call("GET", "/sessions")  # the REST API sees what MCP wrote
    assert status == 200 and "Pets" in [item["name"] for item in listed["sessions"]]


def test_the_tool_schemas_are_the_rest_api_models() -> None:
    from threadloom.api.models import SessionCreate

    async def scenario() -> dict[str, Any]:
        async with lambda_client("user-123") as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    schemas = anyio.run(scenario)
    assert schemas["create_session"]["properties"] == SessionCreate.model_json_schema(by_alias=True)["properties"]
    assert schemas["append_message"]["$defs"]["MessageIn"]["required"] == ["id", "role", "parts"]
    assert schemas["set_context"]["required"][0] == "sessionId"  # no session bound: the call names it


def test_a_session_named_in_the_url_binds_the_context_tools() -> None:
    async def scenario() -> None:
        async with lambda_client("user-123", "/mcp?session=s-demo") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "sessionId" not in tools["set_context"].input_schema["required"]
            written = await client.call_tool("set_context", {"label": "memory", "content": "Likes doubloons"})
            assert text_of(written).startswith("Written to memory."), text_of(written)
            page = json_of(await client.call_tool("read_history", {}))
            assert page["total"] == 4

    anyio.run(scenario)
    status, block = call("GET", "/sessions/s-demo/context/memory")
    assert status == 200 and block["content"] == "Likes doubloons"


def test_refusals_are_tool_errors_the_model_can_read() -> None:
    async def scenario() -> None:
        async with lambda_client("user-123") as client:
            missing = await client.call_tool(
                "append_message", {"sessionId": "nope", "message": message("x", "user", "hello")}
            )
            assert missing.is_error and text_of(missing) == "Session 'nope' not found"
            # a message that breaks the rules is refused as such, before the session is looked up
            invalid = await client.call_tool("append_message", {"sessionId": "nope", "message": message("x", "u", "")})
            assert invalid.is_error and "role 'u'" in text_of(invalid)
            bad = await client.call_tool("append_message", {"sessionId": "s-demo", "message": {"role": "user"}})
            assert bad.is_error and "message.id: Field required" in text_of(bad)
            unbound = await client.call_tool("read_history", {})
            assert unbound.is_error and "Name the session" in text_of(unbound)
            block = await client.call_tool("set_context", {"sessionId": "s-demo", "label": "nope", "content": "x"})
            assert block.is_error and text_of(block) == 'Error: block "nope" not found'
            unknown = await client.call_tool("drop_tables", {})
            assert unknown.is_error and "Unknown tool 'drop_tables'" in text_of(unknown)
            query = await client.call_tool("search", {"query": ""})
            assert query.is_error and "query" in text_of(query)
            with pytest.raises(MCPError, match="not found"):
                await client.read_resource("threadloom://sessions/nope/history")
            with pytest.raises(MCPError, match="No resource"):
                await client.read_resource("file:///etc/passwd")
            # ...and the function still answers
            assert json_of(await client.call_tool("list_sessions", {}))["sessions"]

    anyio.run(scenario)


def test_what_is_not_mcp_gets_the_rest_error_envelope() -> None:
    body = json.dumps(INITIALIZE).encode()
    status, answer = invoke(gateway_event("POST", "/mcp", raw_body=body, headers=MCP_HEADERS, tenant=None))
    assert status == 401 and answer["error"]["code"] == "unauthorized", answer
    plain = {**MCP_HEADERS, "content-type": "text/plain"}
    status, answer = invoke(gateway_event("POST", "/mcp", raw_body=body, headers=plain))
    assert status == 415 and "application/json" in answer["error"]["message"]
    status, answer = invoke(gateway_event("POST", "/mcp", raw_body=b"{not json", headers=MCP_HEADERS))
    assert status == 400 and "not valid JSON" in answer["error"]["message"]
    status, answer = invoke(gateway_event("POST", "/mcp", raw_body=b"\xff\xfe", headers=MCP_HEADERS))
    assert status == 400 and "UTF-8" in answer["error"]["message"]
    huge = json.dumps({**INITIALIZE, "pad": "x" * (6 * 1024 * 1024)}).encode()
    status, answer = invoke(gateway_event("POST", "/mcp", raw_body=huge, headers=MCP_HEADERS))
    assert status == 413 and answer["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD", "PATCH"])
def test_only_post_is_served(method: str) -> None:
    """A GET would open the transport's event stream, which a stateless server never ends (it froze the
    local server, one request at a time, from any web page's navigation); every method but POST is a 405."""
    event = gateway_event(method, "/mcp", headers={"accept": "text/event-stream, */*"})
    response = _raw(event)
    assert response["statusCode"] == 405
    assert response["headers"]["Allow"] == "POST"
    answer = json.loads(response["body"])
    assert answer["error"]["code"] == "method_not_allowed" and method in answer["error"]["message"]
    # Control: POST on the same path is served
    initialize = gateway_event("POST", "/mcp", raw_body=json.dumps(INITIALIZE).encode(), headers=MCP_HEADERS)
    assert invoke(initialize)[0] == 200


def test_a_request_the_transport_does_not_answer_in_time_is_a_504(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    async def never_answers(self: Any, scope: Any, receive: Any, send: Any) -> None:
        await anyio.sleep_forever()

    monkeypatch.setattr(StreamableHTTPSessionManager, "handle_request", never_answers)
    monkeypatch.setattr("threadloom.mcp.http.REQUEST_SECONDS", 0.2)
    initialize = gateway_event("POST", "/mcp", raw_body=json.dumps(INITIALIZE).encode(), headers=MCP_HEADERS)
    status, answer = invoke(initialize)
    assert status == 504 and answer["error"]["code"] == "mcp_timeout"
    assert "0.2 s" in answer["error"]["message"]


def test_the_protocol_answers_plain_json_statelessly() -> None:
    body = json.dumps(INITIALIZE).encode()
    response = _raw(gateway_event("POST", "/mcp", raw_body=body, headers=MCP_HEADERS))
    assert response["statusCode"] == 200
    headers = {key.lower(): value for key, value in response["headers"].items()}
    assert headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in headers  # stateless: nothing to come back to
    assert headers["strict-transport-security"].startswith("max-age=")
    answer = json.loads(response["body"])
    assert answer["result"]["serverInfo"]["name"] == "threadloom"
    not_rpc = _raw(gateway_event("POST", "/mcp", raw_body=b'{"hello": 1}', headers=MCP_HEADERS))
    assert 400 <= not_rpc["statusCode"] < 500


def invoke(event: dict[str, Any]) -> tuple[int, Any]:
    """Status and JSON body of the MCP function's answer."""
    response = _raw(event)
    return int(response["statusCode"]), json.loads(response["body"]) if response.get("body") else None


def _raw(event: dict[str, Any]) -> dict[str, Any]:
    from threadloom_mcp import lambda_handler

    from tests.support.api import FakeLambdaContext

    return lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]


MCP_LAMBDA_SCRIPT = """
import json, sys
sys.path[:0] = ["functions/mcp", "."]
from tests.support.api import FakeLambdaContext, gateway_event
import threadloom_mcp
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
event = gateway_event("POST", "/mcp", raw_body=body, headers=headers)
response = threadloom_mcp.lambda_handler(event, FakeLambdaContext())
print("RESPONSE " + json.dumps({"status": response["statusCode"], "body": json.loads(response["body"])}))
"""


@pytest.mark.parametrize(("profile", "status"), [("compaction:\n  treshold: 10\n", 500), ("name: fine\n", 200)])
def test_the_mcp_function_checks_the_profile_at_init_as_the_api_function_does(
    tmp_path: Path, profile: str, status: int
) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "profile.yaml").write_text(profile, encoding="utf-8")
    environment = {
        **os.environ,
        "THREADLOOM_SQLITE_PATH": str(tmp_path / "lambda.db"),
        "THREADLOOM_PROFILE": str(tmp_path / "profile.yaml"),
        "POWERTOOLS_SERVICE_NAME": "threadloom-mcp",
        "POWERTOOLS_METRICS_DISABLED": "1",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    root = Path(__file__).resolve().parents[3]
    command = [sys.executable, "-c", MCP_LAMBDA_SCRIPT]
    finished = subprocess.run(
        command, cwd=root, env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    assert finished.returncode == 0, finished.stderr
    (answer,) = [json.loads(line[9:]) for line in finished.stdout.splitlines() if line.startswith("RESPONSE ")]
    assert answer["status"] == status
    if status == 500:
        assert answer["body"]["error"]["code"] == "invalid_profile"
        assert sum("unknown key" in line for line in finished.stdout.splitlines()) == 1  # logged once, at init
    else:
        assert answer["body"]["result"] == {}  # ping answered
