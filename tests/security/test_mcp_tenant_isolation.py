"""Through MCP, tenant B cannot reach tenant A's sessions by any tool or resource (Lambda path, JWT ``sub``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from threadloom.api.runtime import set_runtime

from tests.support.api import seeded_runtime
from tests.support.mcp import json_of, lambda_client, message, text_of

A_SESSION = "s-demo"  # user-123's, with four messages about pirate taxes


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path) -> Any:
    runtime, _ = seeded_runtime(tmp_path)
    yield runtime
    set_runtime(None)


def test_tenant_b_reaches_nothing_of_tenant_a(runtime: Any) -> None:
    async def scenario() -> None:
        async with lambda_client("tenant-b", f"/mcp?session={A_SESSION}") as client:
            assert json_of(await client.call_tool("list_sessions", {}))["sessions"] == []
            assert json_of(await client.call_tool("search", {"query": "pirates"}))["results"] == []
            assert "No results" in text_of(await client.call_tool("session_search", {"query": "pirates"}))
            calls = [
                ("read_history", {"sessionId": A_SESSION}),
                ("read_history", {}),  # the session named in the URL is checked the same way
                ("append_message", {"sessionId": A_SESSION, "message": message("b1", "user", "mine now")}),
                ("search", {"query": "pirates", "sessionId": A_SESSION}),
                ("set_context", {"sessionId": A_SESSION, "label": "memory", "content": "overwritten"}),
                ("search_context", {"sessionId": A_SESSION, "label": "knowledge", "query": "x"}),
                ("create_session", {"name": "child", "parentSessionId": A_SESSION}),
            ]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert result.is_error and text_of(result) == f"Session {A_SESSION!r} not found", (name, result)
            for tail in ("", "/history", "/context", "/system-prompt"):
                with pytest.raises(MCPError, match="not found"):
                    await client.read_resource(f"threadloom://sessions/{A_SESSION}{tail}")

    anyio.run(scenario)
    manager = runtime.manager("user-123")
    assert [item["id"] for item in manager.get_history(A_SESSION)] == ["m1", "m2", "m3", "m4"]
    block = manager.get_session(A_SESSION).get_context_block("memory")
    assert block is None or block.content != "overwritten"
