"""to_converse_messages / to_converse_system: Converse's rules hold for any history, including random ones."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadloom.compaction import STUB_RESULT_TEXT, apply_compactions, sanitize_tool_pairs
from threadloom.records import Message, StoredCompaction
from threadloom.tools.formats import EMPTY_RESULT_TEXT, to_converse_messages, to_converse_system

ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def assert_valid_converse(turns: list[dict[str, Any]]) -> None:
    """Every rule Converse (and Anthropic behind it) enforces on the messages list."""
    json.dumps(turns)
    seen_uses: set[str] = set()
    for index, turn in enumerate(turns):
        assert turn["role"] in ("user", "assistant")
        assert turn["content"], "no empty turns"
        if index:
            assert turn["role"] != turns[index - 1]["role"], "roles alternate"
        for block in turn["content"]:
            assert len(block) == 1
            if "text" in block:
                assert block["text"].strip(), "no blank text"
        uses = [b["toolUse"]["toolUseId"] for b in turn["content"] if "toolUse" in b]
        results = [b["toolResult"]["toolUseId"] for b in turn["content"] if "toolResult" in b]
        if uses:
            assert turn["role"] == "assistant"
            assert all(ID_PATTERN.match(u) for u in uses)
            assert all(ID_PATTERN.match(b["toolUse"]["name"]) for b in turn["content"] if "toolUse" in b)
            assert all(isinstance(b["toolUse"]["input"], dict) for b in turn["content"] if "toolUse" in b)
            assert not seen_uses & set(uses), "toolUse ids are unique"
            seen_uses.update(uses)
            following = turns[index + 1] if index + 1 < len(turns) else None
            assert following is not None and following["role"] == "user", "a toolUse is answered in the next turn"
            answered = [b["toolResult"]["toolUseId"] for b in following["content"] if "toolResult" in b]
            assert sorted(answered) == sorted(uses), "each toolUse has exactly one toolResult"
            leading = following["content"][: len(answered)]
            assert all("toolResult" in b for b in leading), "toolResults come first"
        if results:
            assert turn["role"] == "user"
            previous = turns[index - 1] if index else None
            assert previous is not None
            called = {b["toolUse"]["toolUseId"] for b in previous["content"] if "toolUse" in b}
            assert set(results) <= called, "no toolResult without its toolUse"
            for block in turn["content"]:
                if "toolResult" in block:
                    assert block["toolResult"]["content"]


def text(mid: str, role: str, body: str) -> Message:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def test_ai_sdk_tool_part_becomes_use_and_result() -> None:
    # Given an AI SDK assistant message with text, a completed tool part, and more text
    history: list[Message] = [
        text("u1", "user", "What's in a.txt?"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool-read",
                    "toolCallId": "call_1",
                    "state": "output-available",
                    "input": {"path": "a.txt"},
                    "output": "hello",
                },
                {"type": "text", "text": "It says hello."},
            ],
        },
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then the call splits the assistant message into use, result, and continuation
    assert turns == [
        {"role": "user", "content": [{"text": "What's in a.txt?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Reading."},
                {"toolUse": {"toolUseId": "call_1", "name": "read", "input": {"path": "a.txt"}}},
            ],
        },
        {"role": "user", "content": [{"toolResult": {"toolUseId": "call_1", "content": [{"text": "hello"}]}}]},
        {"role": "assistant", "content": [{"text": "It says hello."}]},
    ]
    assert_valid_converse(turns)


def test_parallel_calls_share_one_turn_and_results_precede_user_text() -> None:
    # Given two dynamic tool calls (one failed, one with JSON output) followed by a user message
    history: list[Message] = [
        text("u1", "user", "go"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {
                    "type": "dynamic-tool",
                    "toolName": "ls",
                    "toolCallId": "x",
                    "state": "output-available",
                    "input": {},
                    "output": {"files": ["a"]},
                },
                {
                    "type": "dynamic-tool",
                    "toolName": "rm",
                    "toolCallId": "y",
                    "state": "output-error",
                    "input": {},
                    "errorText": "denied by policy",
                },
            ],
        },
        text("u2", "user", "thanks"),
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then both uses sit in one assistant turn; their results lead the user turn, the error flagged
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[2]["content"] == [
        {"toolResult": {"toolUseId": "x", "content": [{"json": {"files": ["a"]}}]}},
        {"toolResult": {"toolUseId": "y", "content": [{"text": "denied by policy"}], "status": "error"}},
        {"text": "thanks"},
    ]
    assert_valid_converse(turns)


def test_call_without_result_gets_the_stub() -> None:
    # Given an interrupted call (input available, never answered)
    history: list[Message] = [
        text("u", "user", "run it"),
        {
            "id": "a",
            "role": "assistant",
            "parts": [{"type": "tool-run", "toolCallId": "c", "state": "input-available", "input": None}],
        },
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then a stub result answers it and the missing input is an empty object
    assert turns[1]["content"] == [{"toolUse": {"toolUseId": "c", "name": "run", "input": {}}}]
    assert turns[2] == {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "c", "content": [{"text": STUB_RESULT_TEXT}]}}],
    }
    assert_valid_converse(turns)


def test_result_in_a_separate_message_is_paired_with_its_call() -> None:
    # Given a call and its result stored in a later message, with a user message in between
    history: list[Message] = [
        {"id": "a", "role": "assistant", "parts": [{"type": "tool-read", "toolCallId": "c", "input": {"p": 1}}]},
        text("u", "user", "meanwhile"),
        {"id": "r", "role": "tool", "parts": [{"type": "tool-read", "toolCallId": "c", "output": "found"}]},
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then the result moves up to answer the call directly, and nothing is repeated
    assert turns == [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "c", "name": "read", "input": {"p": 1}}}]},
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "c", "content": [{"text": "found"}]}}, {"text": "meanwhile"}],
        },
    ]
    assert_valid_converse(turns)


def test_orphan_results_are_dropped() -> None:
    # Given a stub result and a result part whose calls are not in this history (e.g. after a branch switch)
    history: list[Message] = [
        text("u", "user", "hi"),
        {
            "id": "stub-z",
            "role": "assistant",
            "parts": [{"type": "tool-result", "toolCallId": "z", "toolName": "t", "result": "x"}],
        },
        text("a", "assistant", "hello"),
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then only the texts remain
    assert turns == [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": "hello"}]},
    ]


def test_sanitize_stub_answers_its_call() -> None:
    # Given a call whose result was compacted away, repaired by sanitize_tool_pairs
    history = sanitize_tool_pairs(
        [
            text("u", "user", "q"),
            {
                "id": "a",
                "role": "assistant",
                "parts": [{"type": "dynamic-tool", "toolName": "t", "toolCallId": "c", "input": {}}],
            },
        ],
        now=lambda: "2026-01-01T00:00:00.000Z",
    )
    # When converted
    turns = to_converse_messages(history)
    # Then the stub's result text answers the call
    assert turns[2]["content"][0]["toolResult"]["content"] == [{"text": STUB_RESULT_TEXT}]
    assert_valid_converse(turns)


def test_compaction_message_becomes_assistant_text_and_system_is_separate() -> None:
    # Given a system message, a compaction overlay and consecutive user messages
    history: list[Message] = [
        text("s", "system", "Be brief."),
        {"id": "compaction_1", "role": "assistant", "parts": [{"type": "text", "text": "## Topic\nEarlier"}]},
        text("u1", "user", "one"),
        text("u2", "user", "two"),
        text("blank", "assistant", "   "),
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then the system text is excluded (and available separately), the summary is assistant text,
    # consecutive user messages merge, and blank text disappears
    assert turns == [
        {"role": "assistant", "content": [{"text": "## Topic\nEarlier"}]},
        {"role": "user", "content": [{"text": "one"}, {"text": "two"}]},
    ]
    assert to_converse_system(history) == [{"text": "Be brief."}]


def test_odd_ids_names_and_values_are_made_acceptable() -> None:
    # Given a call id and tool name Converse would reject, a list input, and a blank and a numeric output
    history: list[Message] = [
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "tool-my.tool", "toolCallId": "call:1/x", "input": [1, 2], "output": ""},
                {"type": "dynamic-tool", "toolName": "", "toolCallId": 7, "input": "raw", "output": 42},
                {"type": "tool-read", "input": {}, "output": "no id"},
            ],
        }
    ]
    # When converted
    turns = to_converse_messages(history)
    # Then ids and names match Converse's pattern, inputs are objects, and values become text
    uses = [b["toolUse"] for b in turns[0]["content"]]
    results = [b["toolResult"] for b in turns[1]["content"]]
    assert uses[0]["name"] == "my_tool"
    assert uses[0]["input"] == {"input": [1, 2]}
    assert uses[1]["toolUseId"] == "7"
    assert uses[1]["name"] == "unknown"
    assert results[0]["content"] == [{"text": EMPTY_RESULT_TEXT}]
    assert results[1]["content"] == [{"text": "42"}]
    assert results[2]["content"] == [{"text": "no id"}]
    assert len({u["toolUseId"] for u in uses}) == 3
    assert_valid_converse(turns)


def test_input_is_not_mutated_and_output_is_independent() -> None:
    # Given a history with a JSON output
    history: list[Message] = [
        {
            "id": "a",
            "role": "assistant",
            "parts": [{"type": "tool-t", "toolCallId": "c", "input": {"k": [1]}, "output": {"v": [2]}}],
        }
    ]
    snapshot = json.dumps(history)
    # When converted and the result is modified
    turns = to_converse_messages(history)
    turns[0]["content"][0]["toolUse"]["input"]["k"].append(9)
    turns[1]["content"][0]["toolResult"]["content"][0]["json"]["v"].append(9)
    # Then the history is untouched
    assert json.dumps(history) == snapshot


def test_botocore_accepts_the_request() -> None:
    # Given a converted history with every kind of block
    history: list[Message] = [
        text("u", "user", "hi"),
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "tool-t", "toolCallId": "c1", "input": {"q": 1}, "output": {"ok": True}},
                {"type": "tool-t", "toolCallId": "c2", "state": "output-error", "input": {}, "errorText": "bad"},
            ],
        },
    ]
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    response = {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    # When it is sent through a stubbed client (botocore validates parameters against the API model)
    with Stubber(client) as stubber:
        stubber.add_response("converse", response)
        answer = client.converse(
            modelId="m",
            messages=to_converse_messages(history),  # type: ignore[arg-type]
            toolConfig={"tools": [{"toolSpec": {"name": "t", "inputSchema": {"json": {"type": "object"}}}}]},
        )
    # Then botocore raised no validation error
    assert answer["stopReason"] == "end_turn"


# ── property: no history, however mangled, yields an orphaned pair ─────────

CALL_IDS = st.sampled_from(["c1", "c2", "c3", "bad id!", 5])
OUTPUTS = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
)


@st.composite
def tool_parts(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {"type": draw(st.sampled_from(["tool-read", "dynamic-tool", "tool-result", "tool-we ird"]))}
    if draw(st.booleans()):
        part["toolName"] = draw(st.sampled_from(["read", "", "x.y"]))
    if draw(st.integers(0, 5)):
        part["toolCallId"] = draw(CALL_IDS)
    state = draw(
        st.sampled_from(
            [None, "input-streaming", "input-available", "output-available", "output-error", "output-denied"]
        )
    )
    if state is not None:
        part["state"] = state
    if draw(st.booleans()):
        part["input"] = draw(
            st.one_of(st.none(), st.dictionaries(st.sampled_from(["p"]), st.integers(), max_size=1), st.integers())
        )
    if draw(st.booleans()):
        part["output"] = draw(OUTPUTS)
    if draw(st.integers(0, 3)) == 0:
        part["result"] = draw(OUTPUTS)
    if draw(st.integers(0, 3)) == 0:
        part["errorText"] = draw(st.sampled_from(["", "boom"]))
    return part


PARTS = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.sampled_from(["", "  ", "hello", "bye"])),
    st.just({"type": "reasoning", "text": "hmm"}),
    st.just({"type": "step-start"}),
    tool_parts(),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    count = draw(st.integers(0, 8))
    messages: list[Message] = []
    for index in range(count):
        role = draw(st.sampled_from(["user", "assistant", "assistant", "system", "tool"]))
        mid = draw(st.sampled_from([f"m{index}", f"compaction_{index}"])) if role == "assistant" else f"m{index}"
        messages.append({"id": mid, "role": role, "parts": draw(st.lists(PARTS, max_size=4))})
    return messages


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data())
def test_property_no_orphaned_pairs(history: list[Message], data: st.DataObject) -> None:
    # Given a random history, optionally compacted by a random overlay and/or repaired by sanitize_tool_pairs
    if len(history) > 0 and data.draw(st.booleans()):
        start = data.draw(st.integers(0, len(history) - 1))
        end = data.draw(st.integers(start, len(history) - 1))
        overlay = StoredCompaction("o", "## Topic\nsummary", history[start]["id"], history[end]["id"], "t")
        history = apply_compactions(history, [overlay], now=lambda: "2026-01-01T00:00:00.000Z")
    if data.draw(st.booleans()):
        history = sanitize_tool_pairs(history, now=lambda: "2026-01-01T00:00:00.000Z")
    if len(history) > 0 and data.draw(st.booleans()):
        # a branch switch: only a suffix of the path is kept
        history = history[data.draw(st.integers(0, len(history) - 1)) :]
    # When converted
    turns = to_converse_messages(history)
    # Then every Converse rule holds
    assert_valid_converse(turns)
