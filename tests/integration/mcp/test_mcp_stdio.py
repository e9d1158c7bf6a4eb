"""``threadloom mcp`` in a real subprocess, driven by the ``mcp`` SDK's client over stdio (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from threadloom.cli.output import ExitCode

from tests.support.mcp import THREADLOOM, json_of, message, remember_a_fact, stdio_parameters, text_of


def test_over_stdio_an_agent_remembers_and_is_told_of_changes(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def on_message(item: Any) -> None:
        seen.append(item)

    async def scenario() -> None:
        # The initialize handshake (as desktop apps, the Agents SDK and Strands connect): there a client
        # subscribes to a resource and hears of its change (the 2026-07-28 era's subscriptions/listen is not served).
        parameters = stdio_parameters(tmp_path / "a.db", "alice")
        async with Client(parameters, message_handler=on_message, mode="legacy") as client:
            assert client.server_capabilities is not None
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe
            session_id = await remember_a_fact(client)
            history_uri = f"threadloom://sessions/{session_id}/history"
            await client.subscribe_resource(history_uri)
            json_of(
                await client.call_tool(
                    "append_message", {"sessionId": session_id, "message": message("m2", "assistant", "Noted.")}
                )
            )
            with anyio.fail_after(10):
                while not any(history_uri in str(item) for item in seen):
                    await anyio.sleep(0.05)
            page = json.loads((await client.read_resource(history_uri)).contents[0].text)
            assert [item["id"] for item in page["messages"]] == ["m1", "m2"]
            prompt = json.loads(
                (await client.read_resource(f"{history_uri[: -len('/history')]}/system-prompt")).contents[0].text
            )
            assert "Miso" in prompt["systemPrompt"]
            found = await client.call_tool("session_search", {"query": "Miso"})
            assert "[user] My cat is called Miso" in text_of(found)

    anyio.run(scenario)
    assert any("resources/list_changed" in str(item) or "ResourceListChanged" in str(item) for item in seen)


def test_bad_input_never_stops_the_stdio_server(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Client(stdio_parameters(tmp_path / "b.db", "bob")) as client:
            for arguments in ({"message": 3}, {"sessionId": "", "message": {}}, {"messages": []}, {"x" * 10_000: 1}):
                result = await client.call_tool("append_message", arguments)
                assert result.is_error, arguments
            deep: Any = "x"
            for _ in range(100):
                deep = {"a": deep}
            result = await client.call_tool("create_session", {"name": "n", "model": deep})
            assert result.is_error and "model: Input should be a valid string" in text_of(result)
            nul = await client.call_tool("create_session", {"name": "bad\x00name"})
            assert nul.is_error, text_of(nul)
            for key, refusal in (
                ("a\x00b", "NUL character"),
                ("k" * 100_000, "No entry 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk…"),
            ):
                forgotten = await client.call_tool("forget_knowledge", {"label": "knowledge", "key": key})
                assert forgotten.is_error and refusal in text_of(forgotten), text_of(forgotten)[:200]
            assert json_of(await client.call_tool("list_sessions", {}))["sessions"] == []

    anyio.run(scenario)


def test_a_session_named_at_start_binds_the_tools_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    database = tmp_path / "c.db"

    async def create() -> str:
        async with Client(stdio_parameters(database, "carol")) as client:
            return str(json_of(await client.call_tool("create_session", {"name": "Bound"}))["id"])

    session_id = anyio.run(create)

    async def bound() -> None:
        async with Client(stdio_parameters(database, "carol", "--session", session_id)) as client:
            listed = [resource.uri for resource in (await client.list_resources()).resources]
            assert f"threadloom://sessions/{session_id}/history" in [str(uri) for uri in listed]
            written = await client.call_tool("set_context", {"label": "memory", "content": "Bound fact"})
            assert text_of(written).startswith("Written to memory.")

    anyio.run(bound)

    command = [THREADLOOM, "--database", str(database), "-n", "carol", "mcp", "--session", "nope"]
    refused = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert refused.returncode == int(ExitCode.NOT_FOUND), refused.stderr
    assert "Session 'nope' not found in namespace 'carol'" in refused.stderr


@pytest.mark.postgres
def test_over_stdio_on_postgresql(postgres_store_factory: Any, request: pytest.FixtureRequest) -> None:
    from tests.support.postgres import url_for, worker_database

    url = url_for(worker_database(request))  # the worker's database, emptied by the fixture

    async def scenario() -> None:
        async with Client(stdio_parameters(url, "dave")) as client:
            session_id = await remember_a_fact(client)
            found = json_of(await client.call_tool("search", {"query": "Miso", "sessionId": session_id}))
            assert [hit["id"] for hit in found["results"]] == ["m1"]

    anyio.run(scenario)
