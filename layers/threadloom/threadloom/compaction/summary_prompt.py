"""The summarizer prompt: how big the summary may be, and the text that asks for it.

The rendering of the conversation (``[role]`` blocks, ``[Tool: ...]`` lines with
500-unit cuts, ``---`` separators) and the anchor lines are the reference's,
byte for byte, so summaries and offline parsers see the same shape. One
deliberate difference (contract D13): object and array tool outputs render as
compact JSON instead of JavaScript's ``[object Object]`` / comma join.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from threadloom.compaction.markers import is_tool_part, iter_parts, text_of
from threadloom.jscompat import compact_json, js_string, js_truthy, utf16_slice
from threadloom.tokens import estimate_message_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

MIN_SUMMARY_BUDGET: Final = 100
SUMMARY_BUDGET_RATIO: Final = 0.2
TOOL_FIELD_LIMIT: Final = 500
"""Input and output of a tool part are cut to this many UTF-16 code units."""

MESSAGE_SEPARATOR: Final = "\n\n---\n\n"

CONVERSATION_ANCHOR: Final = "CONVERSATION TO SUMMARIZE:"
PREVIOUS_SUMMARY_ANCHOR: Final = "PREVIOUS SUMMARY:"
NEW_TURNS_ANCHOR: Final = "NEW TURNS TO INCORPORATE:"
SECTION_HEADINGS: Final = ("## Topic", "## Key Points", "## Current State", "## Open Items")

_SECTIONS: Final = """## Topic
[The subject of the conversation]

## Key Points
[Facts, decisions and conclusions worth remembering]

## Current State
[What is finished and what is still under way]

## Open Items
[Unanswered questions, pending tasks and agreed next steps]"""

_CLOSING: Final = (
    "Target ~{budget} tokens. Stick to the facts: include only what the conversation states outright, "
    "never make up file paths, commands or other details, and reply with the summary body alone."
)

_FRESH_TEMPLATE: Final = (
    "Write a compact summary of the conversation below that keeps everything a later turn would need "
    "to carry on.\n\n"
    f"{CONVERSATION_ANCHOR}\n{{content}}\n\n"
    "Organise it under these headings:\n\n"
    f"{_SECTIONS}\n\n{_CLOSING}"
)

_UPDATE_TEMPLATE: Final = (
    "You are revising an existing conversation summary so that it also covers the turns that happened "
    "after it was written.\n\n"
    f"{PREVIOUS_SUMMARY_ANCHOR}\n{{previous}}\n\n"
    f"{NEW_TURNS_ANCHOR}\n{{content}}\n\n"
    "Revise the summary: KEEP earlier information that still holds, ADD what the new turns contribute, "
    "and DROP only what is clearly out of date.\n\n"
    f"{_SECTIONS}\n\n{_CLOSING}"
)


def compute_summary_budget(messages: Sequence[Mapping[str, Any]]) -> int:
    """Summary size in tokens: a fifth of what it replaces, at least 100 (no upper bound, as in the reference)."""
    return max(MIN_SUMMARY_BUDGET, math.floor(estimate_message_tokens(messages) * SUMMARY_BUDGET_RATIO))


def _json_or_string(value: Any) -> str:
    try:
        return compact_json(value)
    except (TypeError, ValueError):
        return js_string(value)


def _render_output(value: Any) -> str:
    # D13: structured outputs keep their content (compact JSON) instead of "[object Object]".
    if isinstance(value, (Mapping, list, tuple)):
        return _json_or_string(value)
    return js_string(value)


def render_tool_part(part: Mapping[str, Any]) -> str:
    """``[Tool: name]`` plus ``Input:``/``Output:`` lines for truthy values, each cut to 500 UTF-16 units."""
    name = part.get("toolName")
    lines = [f"[Tool: {'unknown' if name is None else js_string(name)}]"]
    tool_input = part.get("input")
    if js_truthy(tool_input):
        lines.append(f"Input: {utf16_slice(_json_or_string(tool_input), TOOL_FIELD_LIMIT)}")
    tool_output = part.get("output")
    if js_truthy(tool_output):
        lines.append(f"Output: {utf16_slice(_render_output(tool_output), TOOL_FIELD_LIMIT)}")
    return "\n".join(lines)


def render_message(message: Mapping[str, Any]) -> str:
    """One ``[role]`` block: the text parts, then the tool parts."""
    role = js_string(message["role"]) if "role" in message else "undefined"
    tools = "\n".join(render_tool_part(part) for part in iter_parts(message) if is_tool_part(part))
    return f"[{role}]\n{text_of(message)}" + (f"\n{tools}" if tools else "")


def render_conversation(messages: Sequence[Mapping[str, Any]]) -> str:
    """All messages rendered and joined with the ``---`` separator."""
    return MESSAGE_SEPARATOR.join(render_message(message) for message in messages)


def build_summary_prompt(messages: Sequence[Mapping[str, Any]], previous_summary: str | None, budget: int) -> str:
    """The summarizer prompt: a fresh summary, or an update of ``previous_summary`` when that is non-empty."""
    content = render_conversation(messages)
    target = js_string(budget)
    if previous_summary:
        return _UPDATE_TEMPLATE.format(previous=previous_summary, content=content, budget=target)
    return _FRESH_TEMPLATE.format(content=content, budget=target)


__all__ = [
    "CONVERSATION_ANCHOR",
    "MESSAGE_SEPARATOR",
    "NEW_TURNS_ANCHOR",
    "PREVIOUS_SUMMARY_ANCHOR",
    "SECTION_HEADINGS",
    "build_summary_prompt",
    "compute_summary_budget",
    "render_conversation",
    "render_message",
    "render_tool_part",
]
