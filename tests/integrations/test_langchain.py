"""``ThreadloomChatMessageHistory`` used the LangChain way, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from threadloom.core.manager import SessionManager
from threadloom.integrations.langchain import ThreadloomChatMessageHistory

from examples.langchain_chat import ScriptedChatModel, chat_turn
from tests.integrations import driver
from tests.integrations.conftest import Target


def catalogue() -> list[Any]:
    """One message of every class, with the optional fields set."""
    return [
        SystemMessage(content="Be brief.", id="s1"),
        HumanMessage(
            content=[{"type": "text", "text": "Chart?"}, {"type": "image_url", "image_url": {"url": "data:,"}}],
            additional_kwargs={"lang": "en"},
            name="ana",
        ),
        AIMessage(
            content="",
            id="run-1",
            tool_calls=[
                {"name": "describe", "args": {"detail": ["axes", 2, None, True]}, "id": "c1", "type": "tool_call"}
            ],
            invalid_tool_calls=[
                {"name": "bad", "args": "{oops", "id": "c2", "error": "not JSON", "type": "invalid_tool_call"}
            ],
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            response_metadata={"model_name": "scripted", "stop_reason": "tool_use"},
        ),
        ToolMessage(content="A bar chart", tool_call_id="c1", name="describe", artifact={"bars": 3}, status="success"),
        ToolMessage(content="failed", tool_call_id="c2", status="error"),
        AIMessage(content="It is a bar chart.", additional_kwargs={"refusal": None}),
        ChatMessage(content="Looks right.", role="critic"),
        FunctionMessage(content="42", name="legacy_fn"),
    ]


def test_every_message_class_round_trips_field_for_field(backend: Any, unique_key: str) -> None:
    history = ThreadloomChatMessageHistory(unique_key, backend)
    assert history.messages == []
    history.add_messages(catalogue()[:3])
    history.add_user_message("And now?")
    history.add_messages(catalogue()[3:])
    expected = [*catalogue()[:3], HumanMessage(content="And now?"), *catalogue()[3:]]
    assert [message_to_dict(m) for m in history.messages] == [message_to_dict(m) for m in expected]
    assert history.messages == expected
    history.clear()
    assert history.messages == []


def test_the_history_is_a_readable_threadloom_session(backend: Any, unique_key: str) -> None:
    history = ThreadloomChatMessageHistory(unique_key, backend)
    history.add_messages(catalogue())
    stored = backend.get_history(history.threadloom_session_id)
    assert [m["role"] for m in stored] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
    ]
    assert stored[2]["parts"][0]["toolCallId"] == "c1" and stored[3]["parts"][0]["output"] == "A bar chart"
    hits = backend.get_session(history.threadloom_session_id).search("bar chart")
    assert [hit.id for hit in hits] == [stored[5]["id"]]  # text parts are indexed; tool output is not text


@pytest.mark.parametrize("target", ["sqlite", "postgres"], indirect=True)
def test_a_compaction_overlay_reads_as_one_ai_message(backend: SessionManager, unique_key: str) -> None:
    history = ThreadloomChatMessageHistory(unique_key, backend)
    turns = [HumanMessage(content=f"turn {i}") if i % 2 == 0 else AIMessage(content=f"turn {i}") for i in range(6)]
    history.add_messages(turns)
    stored = backend.get_history(history.threadloom_session_id)
    backend.add_compaction(history.threadloom_session_id, "Turns 1 to 3 happened.", stored[1]["id"], stored[3]["id"])
    assert history.messages == [turns[0], AIMessage(content="Turns 1 to 3 happened."), turns[4], turns[5]]


def test_chat_turns_with_tool_calls_resume_in_a_new_process(target: Target, unique_key: str) -> None:
    first = driver.run(
        "langchain", target.spec, unique_key, ["Remember that the launch is on Friday", "Remember that Ana leads QA"]
    )
    assert first["answers"] == ["Noted. I now remember 1 thing(s).", "Noted. I now remember 2 thing(s)."]
    second = driver.in_new_process("langchain", target.spec, unique_key, ["What do you remember?"])
    assert second["restored"] == first["final"]
    assert second["answers"] == ["I remember: the launch is on Friday; Ana leads QA."]
    assert [m["type"] for m in second["final"]].count("tool") == 2


def test_async_api(backend: Any, unique_key: str) -> None:
    import asyncio

    history = ThreadloomChatMessageHistory(unique_key, backend)
    asyncio.run(history.aadd_messages([HumanMessage(content="hi"), AIMessage(content="hello")]))
    assert asyncio.run(history.aget_messages()) == [HumanMessage(content="hi"), AIMessage(content="hello")]
    assert chat_turn(history, ScriptedChatModel(), "What do you remember?") == "I remember: nothing yet."
    asyncio.run(history.aclear())
    assert history.messages == []


def test_a_history_that_outlives_its_conversation_starts_it_afresh(backend: Any, unique_key: str) -> None:
    # Given a history object kept for the process's life, whose conversation retention then deletes
    history = ThreadloomChatMessageHistory(unique_key, backend)
    history.add_messages([HumanMessage(content="hi"), AIMessage(content="hello")])
    assert backend.delete(history.threadloom_session_id)
    # When it is used again, it finds the conversation new, not an error, and writes under the same key
    assert history.messages == []
    history.add_messages([HumanMessage(content="again")])
    assert ThreadloomChatMessageHistory(unique_key, backend).messages == [HumanMessage(content="again")]
    backend.delete(history.threadloom_session_id)
    history.clear()
    history.add_messages([AIMessage(content="after a clear")])
    assert history.messages == [AIMessage(content="after a clear")]
