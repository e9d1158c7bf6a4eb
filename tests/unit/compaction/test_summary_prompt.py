"""Summary budget and prompt (§6.5, §14 anchors, contract D13)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.compaction import build_summary_prompt, compute_summary_budget
from threadloom.tokens import estimate_message_tokens

if TYPE_CHECKING:
    from threadloom.records import Message

ANCHORS = (
    "## Topic\n[",
    "## Key Points\n[",
    "## Current State\n[",
    "## Open Items\n[",
)


def msg(mid: str, role: str, *parts: dict[str, Any]) -> Message:
    return {"id": mid, "role": role, "parts": list(parts)}


def txt(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_tool_part_token_vector() -> None:
    # Given the §7 tool-part example (input {"a":1}, output {"b":"hello"})
    message = msg("t", "assistant", {"type": "tool-x", "toolCallId": "c", "input": {"a": 1}, "output": {"b": "hello"}})
    # When estimated
    # Then the message totals 4 + 2 + 4 = 10 tokens
    assert estimate_message_tokens([message]) == 10


def test_summary_budget_has_a_floor_of_100() -> None:
    # Given a tiny history
    # When the budget is computed
    # Then it is the 100-token floor
    assert compute_summary_budget([msg("a", "user", txt("hi"))]) == 100
    assert compute_summary_budget([]) == 100


def test_summary_budget_is_a_fifth_floored_with_no_cap() -> None:
    # Given a history estimated at 100,005 tokens (400,000 x's = 100,000 plus 4 overhead, plus 1 more message)
    messages = [msg("a", "user", txt("x" * 400_000)), msg("b", "user")]
    total = estimate_message_tokens(messages)
    # When the budget is computed
    # Then it is floor(total * 0.2), far above the stale "8K" doc cap
    assert total == 100_008
    assert compute_summary_budget(messages) == 20_001


def test_fresh_prompt_layout_and_anchors() -> None:
    # Given two plain messages
    messages = [msg("a", "user", txt("Hello"), txt("there")), msg("b", "assistant", txt("Hi!"))]
    # When a prompt without previous summary is built
    prompt = build_summary_prompt(messages, None, 123)
    # Then the conversation follows its anchor, rendered exactly, and every section anchor is present
    assert "\n\nCONVERSATION TO SUMMARIZE:\n[user]\nHello\nthere\n\n---\n\n[assistant]\nHi!\n\n" in prompt
    assert "PREVIOUS SUMMARY:" not in prompt
    assert "NEW TURNS TO INCORPORATE:" not in prompt
    positions = [prompt.index(anchor) for anchor in ANCHORS]
    assert positions == sorted(positions)
    assert "\nTarget ~123 tokens." in prompt
    assert prompt.index("Target ~123 tokens.") > positions[-1]


def test_update_prompt_carries_the_previous_summary() -> None:
    # Given a previous summary
    messages = [msg("a", "user", txt("More"))]
    # When the update prompt is built
    prompt = build_summary_prompt(messages, "## Topic\nOld stuff", 200)
    # Then it holds the previous summary, then the new turns, then the sections and the target
    assert "\n\nPREVIOUS SUMMARY:\n## Topic\nOld stuff\n\nNEW TURNS TO INCORPORATE:\n[user]\nMore\n\n" in prompt
    assert "CONVERSATION TO SUMMARIZE:" not in prompt
    assert all(anchor in prompt for anchor in ANCHORS)
    assert "Target ~200 tokens." in prompt


def test_empty_previous_summary_uses_the_fresh_template() -> None:
    # Given an empty previous summary (falsy in the reference)
    # When the prompt is built
    prompt = build_summary_prompt([msg("a", "user", txt("x"))], "", 100)
    # Then it is the fresh template
    assert "CONVERSATION TO SUMMARIZE:" in prompt
    assert "PREVIOUS SUMMARY:" not in prompt


def test_tool_rendering_with_compact_json_outputs_d13() -> None:
    # Given tool parts with object, array, string and falsy values
    message = msg(
        "a",
        "assistant",
        txt("Looking"),
        {"type": "tool-read", "toolName": "read", "toolCallId": "1", "input": {"path": "é/x"}, "output": {"ok": True}},
        {"type": "dynamic-tool", "toolName": "ls", "toolCallId": "2", "input": ["a", 1], "output": [1, {"b": None}]},
        {"type": "tool-x", "toolCallId": "3", "input": {}, "output": "plain text"},
        {"type": "tool-y", "toolName": "z", "toolCallId": "4", "input": 0, "output": ""},
    )
    # When rendered in a prompt
    prompt = build_summary_prompt([message], None, 100)
    # Then objects and arrays are compact JSON (non-ASCII kept), strings raw, falsy values omitted,
    # and a missing toolName reads "unknown"
    expected = (
        "[assistant]\nLooking\n"
        '[Tool: read]\nInput: {"path":"é/x"}\nOutput: {"ok":true}\n'
        '[Tool: ls]\nInput: ["a",1]\nOutput: [1,{"b":null}]\n'
        "[Tool: unknown]\nInput: {}\nOutput: plain text\n"
        "[Tool: z]"
    )
    assert f"CONVERSATION TO SUMMARIZE:\n{expected}\n\n" in prompt
    assert "[object Object]" not in prompt


def test_tool_fields_are_cut_to_500_utf16_units() -> None:
    # Given an input and an output longer than 500 UTF-16 units (emoji count 2 units each)
    long_output = "😀" * 300
    message = msg(
        "a", "assistant", {"type": "tool-x", "toolName": "t", "input": {"q": "x" * 600}, "output": long_output}
    )
    # When rendered
    prompt = build_summary_prompt([message], None, 100)
    # Then each is cut at exactly 500 units
    input_line = next(line for line in prompt.split("\n") if line.startswith("Input: "))
    output_line = next(line for line in prompt.split("\n") if line.startswith("Output: "))
    assert input_line == "Input: " + ('{"q":"' + "x" * 600)[:500]
    assert output_line == "Output: " + "😀" * 250


def test_message_without_text_parts_renders_an_empty_line() -> None:
    # Given a message with only a non-text part
    message = msg("a", "user", {"type": "step-start"})
    # When rendered
    prompt = build_summary_prompt([message], None, 100)
    # Then the role line is followed by an empty text line and nothing else
    assert "CONVERSATION TO SUMMARIZE:\n[user]\n\n\n" in prompt
