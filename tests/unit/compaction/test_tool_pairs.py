"""sanitize_tool_pairs (§6.5): orphan removal, stub insertion, empty-message drop, no mutation."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from threadloom.compaction import STUB_RESULT_TEXT, sanitize_tool_pairs

if TYPE_CHECKING:
    from threadloom.records import Message

NOW = "2026-01-02T03:04:05.678Z"


def now() -> str:
    return NOW


def tool(call_id: str, *, output: Any = None, with_output: bool = False, name: str | None = "read") -> dict[str, Any]:
    part: dict[str, Any] = {"type": "dynamic-tool", "toolCallId": call_id, "input": {"path": "/x"}}
    if name is not None:
        part["toolName"] = name
    if with_output:
        part["output"] = output
    return part


def test_stub_text_is_exact() -> None:
    # Given / When the stub constant is read
    # Then it is the reference's text with an em dash (U+2014)
    assert STUB_RESULT_TEXT == "[Result from earlier conversation \u2014 see context summary above]"


def test_complete_pairs_are_left_alone() -> None:
    # Given an assistant call that carries its own output (the AI SDK shape)
    messages: list[Message] = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]},
        {"id": "a", "role": "assistant", "parts": [tool("c1", output="done", with_output=True)]},
    ]
    # When sanitized
    result = sanitize_tool_pairs(messages, now=now)
    # Then nothing changes and the very same message objects are returned
    assert result == messages
    assert all(x is y for x, y in zip(result, messages, strict=True))


def test_call_without_result_gets_a_stub_right_after_it() -> None:
    # Given an assistant call whose result was cut away
    messages: list[Message] = [
        {"id": "a", "role": "assistant", "parts": [tool("c1"), tool("c2", name=None)]},
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "next"}]},
    ]
    # When sanitized
    result = sanitize_tool_pairs(messages, now=now)
    # Then one stub per missing call follows the call message, in part order
    assert [m["id"] for m in result] == ["a", "stub-c1", "stub-c2", "u"]
    assert result[1] == {
        "id": "stub-c1",
        "role": "assistant",
        "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "read", "result": STUB_RESULT_TEXT}],
        "createdAt": NOW,
    }
    assert result[2]["parts"][0]["toolName"] == "unknown"


def test_orphan_result_is_removed_and_the_emptied_message_dropped() -> None:
    # Given a user message holding the result of a call that no longer exists
    messages: list[Message] = [
        {"id": "u", "role": "user", "parts": [tool("gone", output="x", with_output=True)]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "keep"}, tool("gone", with_output=True)]},
    ]
    original = copy.deepcopy(messages)
    # When sanitized
    result = sanitize_tool_pairs(messages, now=now)
    # Then the orphaned parts are gone, the emptied message is dropped, and the input is untouched
    assert result == [{"id": "u2", "role": "user", "parts": [{"type": "text", "text": "keep"}]}]
    assert messages == original


def test_output_key_counts_even_when_none() -> None:
    # Given an assistant call whose output key is present but None
    messages: list[Message] = [{"id": "a", "role": "assistant", "parts": [tool("c1", output=None, with_output=True)]}]
    # When sanitized
    result = sanitize_tool_pairs(messages, now=now)
    # Then it counts as answered: no stub
    assert [m["id"] for m in result] == ["a"]


def test_messages_that_already_had_no_parts_are_dropped() -> None:
    # Given a history with an empty message and no tool parts at all
    messages: list[Message] = [
        {"id": "e", "role": "assistant", "parts": []},
        {"id": "t", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
    ]
    # When sanitized
    # Then the empty message disappears anyway (reference quirk 18)
    assert [m["id"] for m in sanitize_tool_pairs(messages, now=now)] == ["t"]


def test_stubs_are_not_deduplicated() -> None:
    # Given the same unanswered call id in two assistant messages
    messages: list[Message] = [
        {"id": "a1", "role": "assistant", "parts": [tool("c1")]},
        {"id": "a2", "role": "assistant", "parts": [tool("c1")]},
    ]
    # When sanitized
    result = sanitize_tool_pairs(messages, now=now)
    # Then each gets its own stub
    assert [m["id"] for m in result] == ["a1", "stub-c1", "a2", "stub-c1"]


def test_default_clock_writes_iso_utc() -> None:
    # Given an unanswered call and no injected clock
    messages: list[Message] = [{"id": "a", "role": "assistant", "parts": [tool("c1")]}]
    # When sanitized
    stub = sanitize_tool_pairs(messages)[1]
    # Then createdAt looks like JavaScript's toISOString()
    assert stub["createdAt"].endswith("Z")
    assert len(stub["createdAt"]) == len("2026-01-02T03:04:05.678Z")
