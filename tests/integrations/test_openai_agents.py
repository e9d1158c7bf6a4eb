"""``ThreadloomSession`` under the OpenAI Agents SDK's own ``Runner``, on SQLite, PostgreSQL and over HTTP."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from agents import set_tracing_disabled
from agents.memory import SessionSettings, SQLiteSession
from threadloom.client import AsyncThreadloomClient, ThreadloomClient
from threadloom.core.manager import SessionManager
from threadloom.integrations.openai_agents import ThreadloomSession, message_to_item

from examples.openai_agents_chat import chat
from tests.integrations import driver
from tests.integrations.conftest import Target

# One of every item kind the SDK stores, as the SDK stores them (plain JSON dicts).
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Plan the launch"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "See the chart"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
        ],
    },
    {"role": "developer", "content": "Be brief."},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Check the calendar."}],
        "encrypted_content": "gAAAAB...",
        "content": None,
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "calendar",
        "arguments": '{"day": "Friday", "slots": [1, 2.5, null, true]}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "Friday is free"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "list output"}]},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "Friday works.",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url": "https://example.com",
                        "title": "Cal",
                        "start_index": 0,
                        "end_index": 6,
                    }
                ],
                "logprobs": [],
            },
            {"type": "refusal", "refusal": "I cannot book rooms."},
        ],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "launch venues"},
    },
    {"type": "file_search_call", "id": "fs_1", "queries": ["venue"], "status": "completed", "results": None},
    {
        "type": "computer_call",
        "id": "cc_1",
        "call_id": "ccall_1",
        "action": {"type": "click", "button": "left", "x": 1, "y": 2},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "ccall_1",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"},
    },
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "aGVsbG8="},
    {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "code": "print(1)",
        "container_id": "c1",
        "outputs": [{"type": "logs", "logs": "1\n"}],
        "status": "completed",
    },
    {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "lookup", "arguments": "{}", "output": "ok"},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "a_kind_from_a_future_sdk", "id": "x_1", "payload": {"nested": ["é", "✓", 1e-9]}},
]


@pytest.fixture
def items() -> list[dict[str, Any]]:
    return copy.deepcopy(ITEMS)


def test_every_item_kind_round_trips_field_for_field(
    backend: Any, unique_key: str, items: list[dict[str, Any]]
) -> None:
    session = ThreadloomSession(unique_key, backend)

    async def scenario() -> None:
        assert await session.get_items() == []
        await session.add_items(items[:5])
        await session.add_items(items[5:])
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=3) == ITEMS[-3:]
        assert await session.get_items(limit=0) == []
        limited = ThreadloomSession(unique_key, backend, session_settings=SessionSettings(limit=2))
        assert await limited.get_items() == ITEMS[-2:]
        assert await session.pop_item() == ITEMS[-1]
        assert await session.get_items() == ITEMS[:-1]
        await session.clear_session()
        assert await session.get_items() == [] and await session.pop_item() is None

    asyncio.run(scenario())


def test_stored_items_are_a_readable_threadloom_conversation(backend: Any, unique_key: str, items: list[Any]) -> None:
    session = ThreadloomSession(unique_key, backend)
    asyncio.run(session.add_items(items))
    history = backend.get_history(session.threadloom_session_id)
    assert [m["role"] for m in history[:4]] == ["user", "user", "system", "assistant"]
    assert history[0]["parts"] == [{"type": "text", "text": "Plan the launch"}]
    assert history[3]["parts"] == [{"type": "reasoning", "text": "Check the calendar."}]
    call, output = history[4]["parts"][0], history[5]["parts"][0]
    assert (call["type"], call["toolCallId"], call["input"]) == (
        "tool-calendar",
        "call_1",
        {"day": "Friday", "slots": [1, 2.5, None, True]},
    )
    assert (output["toolCallId"], output["output"]) == ("call_1", "Friday is free")
    assert [hit.id for hit in backend.get_session(session.threadloom_session_id).search("Friday")] == [history[7]["id"]]


@pytest.mark.parametrize("target", ["sqlite", "postgres"], indirect=True)
def test_a_compaction_overlay_reads_as_one_assistant_item(backend: SessionManager, unique_key: str) -> None:
    session = ThreadloomSession(unique_key, backend)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(6)]
    asyncio.run(session.add_items(turns))
    history = backend.get_history(session.threadloom_session_id)
    backend.add_compaction(
        session.threadloom_session_id, "They talked about turns 1-3.", history[1]["id"], history[3]["id"]
    )
    assert asyncio.run(session.get_items()) == [
        turns[0],
        {"role": "assistant", "content": "They talked about turns 1-3."},
        turns[4],
        turns[5],
    ]
    assert asyncio.run(session.get_items(limit=2)) == turns[4:]


def test_runner_turns_with_tool_calls_resume_in_a_new_process(target: Target, unique_key: str) -> None:
    # Given two turns of the SDK's Runner with tool calls, in this process
    first = driver.run(
        "openai-agents",
        target.spec,
        unique_key,
        ["Remember that the launch is on Friday", "Remember that Ana leads QA"],
    )
    assert first["answers"] == ["Noted. I now remember 1 thing(s).", "Noted. I now remember 2 thing(s)."]

    # When another process opens the same session id and continues
    second = driver.in_new_process("openai-agents", target.spec, unique_key, ["What do you remember?"])

    # Then it starts from exactly the items the first stored, and the model sees them
    assert second["restored"] == first["final"]
    assert second["answers"] == ["I remember: the launch is on Friday; Ana leads QA."]
    kinds = [item.get("type", "message") for item in second["final"]]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2 and "reasoning" in kinds

    # And the SDK's own SQLite session, through the same three turns, holds the same items
    native = SQLiteSession(unique_key)
    asyncio.run(
        chat(native, ["Remember that the launch is on Friday", "Remember that Ana leads QA", "What do you remember?"])
    )
    assert asyncio.run(native.get_items()) == second["final"]


def test_an_async_client_is_awaited_on_the_sdk_event_loop(
    integration_server: str, unique_key: str, items: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a session over AsyncThreadloomClient, and no worker threads allowed
    def no_threads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an async client needs no worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)
    set_tracing_disabled(True)

    async def scenario() -> list[Any]:
        async with AsyncThreadloomClient(integration_server) as client:
            session = ThreadloomSession(unique_key, client)
            with pytest.raises(RuntimeError, match="open"):
                _ = session.threadloom_session_id

            # Then every item kind round-trips, pop and clear work, and Runner turns run on it
            await session.add_items(items)
            assert await session.get_items() == ITEMS and await session.get_items(limit=2) == ITEMS[-2:]
            assert await session.pop_item() == ITEMS[-1]
            await session.clear_session()
            answers = await chat(session, ["Remember that the launch is on Friday", "What do you remember?"])
            assert answers == ["Noted. I now remember 1 thing(s).", "I remember: the launch is on Friday."]
            assert session.threadloom_session_id == (await client.open_session(unique_key)).id
            return await session.get_items()

    stored = asyncio.run(scenario())

    # And the synchronous client reads the same items
    with ThreadloomClient(integration_server) as sync:
        assert [message_to_item(m) for m in sync.get_history(sync.open_session(unique_key).id)] == stored


def test_a_session_that_outlives_its_conversation_starts_it_afresh(backend: Any, unique_key: str) -> None:
    user = {"role": "user", "content": "hi"}

    async def scenario() -> None:
        # Given a session object kept for the process's life, whose conversation retention then deletes
        session = ThreadloomSession(unique_key, backend)
        await session.add_items([user])
        assert backend.delete(await session.open())
        # When it is used again, it finds the conversation new, not an error, and writes under the same key
        assert await session.get_items() == []
        await session.add_items([user])
        assert await ThreadloomSession(unique_key, backend).get_items() == [user]
        backend.delete(await session.open())
        assert await session.pop_item() is None
        backend.delete(await session.open())
        await session.clear_session()
        assert await session.get_items() == []

    asyncio.run(scenario())
