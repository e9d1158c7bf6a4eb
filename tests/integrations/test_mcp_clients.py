"""Unmodified MCP clients against Threadloom: the SDK's own over a real port, the OpenAI Agents SDK's and Strands'.

No model is called: the tools are listed and called through each client object, as an agent loop would.
The local server runs in a subprocess on a free port (``/mcp`` beside the REST API); stdio runs ``threadloom mcp``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.local_server import local_server
from tests.support.mcp import THREADLOOM, json_of, remember_a_fact, url_client

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("mcp-server") / "d", tenant="alice") as server:
        yield f"{server.url}/mcp"


def test_the_sdk_client_over_the_local_server(mcp_url: str) -> None:
    async def scenario() -> None:
        async with url_client(mcp_url) as client:
            assert "append_message" in [tool.name for tool in (await client.list_tools()).tools]
            session_id = await remember_a_fact(client)
            found = json_of(await client.call_tool("search", {"query": "Miso"}))
            assert [hit["sessionId"] for hit in found["results"]] == [session_id]

    anyio.run(scenario)


def test_the_openai_agents_sdk_clients(mcp_url: str, tmp_path: Path) -> None:
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

    async def use(server: MCPServerStdio | MCPServerStreamableHttp) -> None:
        async with server:
            names = [tool.name for tool in await server.list_tools()]
            assert {"create_session", "append_message", "search", "set_context"} <= set(names)
            created = await server.call_tool("create_session", {"name": "Agents SDK"})
            session_id = json.loads(created.content[0].text)["id"]
            written = await server.call_tool(
                "set_context", {"sessionId": session_id, "label": "memory", "content": "Prefers tea"}
            )
            assert not written.is_error and written.content[0].text.startswith("Written to memory.")
            refused = await server.call_tool("read_history", {"sessionId": "nope"})
            assert refused.is_error and refused.content[0].text == "Session 'nope' not found"

    database = tmp_path / "agents.db"
    stdio = MCPServerStdio(
        {"command": THREADLOOM, "args": ["--database", str(database), "--create", "-n", "alice", "mcp"]},
        client_session_timeout_seconds=30,
    )
    anyio.run(use, stdio)
    anyio.run(use, MCPServerStreamableHttp({"url": mcp_url}, client_session_timeout_seconds=30))


def test_the_strands_client(mcp_url: str) -> None:
    from strands.tools.mcp import MCPClient

    client = MCPClient(url=mcp_url)
    with client:
        names = [tool.tool_name for tool in client.list_tools_sync()]
        assert {"create_session", "search", "session_search"} <= set(names)
        created = client.call_tool_sync("call-1", "create_session", {"name": "Strands"})
        assert created["status"] == "success"
        session_id = json.loads(created["content"][0]["text"])["id"]
        refused = client.call_tool_sync("call-2", "append_message", {"sessionId": session_id, "message": {}})
        assert refused["status"] == "error" and "message.id: Field required" in refused["content"][0]["text"]
