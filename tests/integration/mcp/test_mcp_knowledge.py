"""An agent over MCP lists and forgets the knowledge entries it stored (Lambda path, JWT tenant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from threadloom.api.runtime import set_runtime

from tests.support.api import seeded_runtime
from tests.support.mcp import json_of, lambda_client, text_of

A_SESSION = "s-demo"  # user-123's


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path) -> Any:
    runtime, _ = seeded_runtime(tmp_path)
    yield runtime
    set_runtime(None)


def test_an_agent_lists_its_knowledge_page_by_page_and_forgets_a_wrong_fact(runtime: Any) -> None:
    async def scenario() -> None:
        async with lambda_client("user-123", f"/mcp?session={A_SESSION}") as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert listed["list_knowledge"].annotations.read_only_hint is True
            assert listed["forget_knowledge"].annotations.read_only_hint is False
            assert listed["forget_knowledge"].input_schema["required"] == ["label", "key"]
            # Given three facts the agent stored under the searchable block, one of them wrong
            for key, fact in (("cat", "The cat is Miso"), ("dog", "The dog is Rex"), ("fish", "The fish is Blue")):
                stored = await client.call_tool(
                    "set_context", {"label": "knowledge", "metadata": {"title": key}, "content": fact}
                )
                assert text_of(stored) == f'Indexed "{key}" in knowledge.', text_of(stored)
            # When it lists them two at a time
            first = json_of(await client.call_tool("list_knowledge", {"label": "knowledge", "limit": 2}))
            second = json_of(
                await client.call_tool("list_knowledge", {"label": "knowledge", "cursor": first["nextCursor"]})
            )
            assert [entry["key"] for entry in first["entries"]] == ["cat", "dog"]
            assert [(entry["key"], entry["content"]) for entry in second["entries"]] == [("fish", "The fish is Blue")]
            assert second["nextCursor"] is None
            # And forgets the wrong one
            assert json_of(await client.call_tool("forget_knowledge", {"label": "knowledge", "key": "dog"})) == {
                "deleted": True
            }
            # Then it is gone from the list and from search, and the others stay
            after = json_of(await client.call_tool("list_knowledge", {"label": "knowledge"}))
            assert [entry["key"] for entry in after["entries"]] == ["cat", "fish"]
            found = await client.call_tool("search_context", {"label": "knowledge", "query": "Rex"})
            assert "Rex" not in text_of(found)
            assert "Miso" in text_of(await client.call_tool("search_context", {"label": "knowledge", "query": "Miso"}))
            # And what it cannot do is refused with a text the model can act on, the server going on
            refusals = [
                ({"label": "knowledge", "key": "dog"}, "No entry 'dog' in block 'knowledge'"),
                ({"label": "memory", "key": "cat"}, "No searchable block 'memory' in this namespace"),
                ({"label": "knowledge"}, "Invalid arguments for forget_knowledge: key: Field required"),
                ({"label": "knowledge", "key": ""}, "Invalid arguments for forget_knowledge: key: String should"),
            ]
            for arguments, text in refusals:
                result = await client.call_tool("forget_knowledge", arguments)
                assert result.is_error and text in text_of(result), (arguments, text_of(result))
            with pytest.raises(MCPError):  # a NUL is refused at the HTTP edge, before the protocol (400)
                await client.call_tool("forget_knowledge", {"label": "knowledge", "key": "a\x00b"})
            bad_cursor = await client.call_tool("list_knowledge", {"label": "knowledge", "cursor": "nonsense"})
            assert bad_cursor.is_error, text_of(bad_cursor)
            assert [
                entry["key"]
                for entry in json_of(await client.call_tool("list_knowledge", {"label": "knowledge"}))["entries"]
            ] == ["cat", "fish"]

    anyio.run(scenario)


def test_another_tenant_neither_sees_nor_forgets_the_knowledge(runtime: Any) -> None:
    async def store_a_fact() -> None:
        async with lambda_client("user-123", f"/mcp?session={A_SESSION}") as client:
            stored = await client.call_tool(
                "set_context", {"label": "knowledge", "metadata": {"title": "cat"}, "content": "Miso"}
            )
            assert text_of(stored) == 'Indexed "cat" in knowledge.', text_of(stored)

    async def tenant_b() -> None:
        async with lambda_client("tenant-b") as client:
            assert json_of(await client.call_tool("list_knowledge", {"label": "knowledge"}))["entries"] == []
            result = await client.call_tool("forget_knowledge", {"label": "knowledge", "key": "cat"})
            assert result.is_error and text_of(result) == "No entry 'cat' in block 'knowledge'"

    anyio.run(store_a_fact)
    anyio.run(tenant_b)
    entries = runtime.manager("user-123").search_entries("knowledge").entries(after="", limit=10)
    assert [(entry.key, entry.content) for entry in entries] == [("cat", "Miso")]
