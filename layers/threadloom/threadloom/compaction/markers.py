"""Message-shape helpers shared by the compaction modules and the provider formats.

They read messages the way the reference does: a tool part is any ``tool-*`` or
``dynamic-tool`` part, and a part "has" a ``toolCallId``/``output`` when the key is
present, even with a ``None`` value (JavaScript's ``"key" in part``). Malformed
shapes (``parts`` that is not a list, parts that are not objects) are read as
empty instead of raising, because compaction must never crash on a stored row.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from threadloom.jscompat import compact_json, js_string
from threadloom.tokens import is_tool_part_type

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

COMPACTION_PREFIX: Final = "compaction_"
"""Id prefix of the synthetic overlay message (``compaction_<stored id>``)."""

STUB_RESULT_TEXT: Final = "[Result from earlier conversation \u2014 see context summary above]"
"""Result text of a stub inserted for a tool call whose result is gone (note the U+2014 dash)."""

STUB_ID_PREFIX: Final = "stub-"
"""Id prefix of a stub tool-result message (``stub-<toolCallId>``)."""


def now_iso() -> str:
    """Current UTC time as JavaScript's ``new Date().toISOString()`` writes it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_compaction_message(message: Mapping[str, Any]) -> bool:
    """True for the synthetic overlay messages that ``apply_compactions`` emits."""
    message_id = message.get("id")
    return isinstance(message_id, str) and message_id.startswith(COMPACTION_PREFIX)


def iter_parts(message: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The message's parts that are objects, in order."""
    parts = message.get("parts")
    if isinstance(parts, list):
        for part in parts:
            if isinstance(part, Mapping):
                yield part


def is_tool_part(part: Mapping[str, Any]) -> bool:
    """A ``tool-*`` or ``dynamic-tool`` part."""
    return is_tool_part_type(part.get("type"))


def has_tool_calls(message: Mapping[str, Any]) -> bool:
    """The message carries at least one tool part."""
    return any(is_tool_part(part) for part in iter_parts(message))


def call_key(value: Any) -> Hashable:
    """A set-friendly key for a ``toolCallId`` value (ids are strings in practice; odd JSON values still compare)."""
    if isinstance(value, str):
        return value
    try:
        hash(value)
    except TypeError:
        return ("json", compact_json(value))
    return ("value", type(value).__name__, value)


def tool_call_ids(message: Mapping[str, Any]) -> list[Hashable]:
    """Keys of the ``toolCallId`` of every tool part that has the key, in first-occurrence order, no repeats."""
    ids: list[Hashable] = []
    for part in iter_parts(message):
        if is_tool_part(part) and "toolCallId" in part:
            key = call_key(part["toolCallId"])
            if key not in ids:
                ids.append(key)
    return ids


def is_tool_result_for(message: Mapping[str, Any], call_ids: Collection[Hashable]) -> bool:
    """Some tool part of ``message`` (any role) names one of ``call_ids`` (keys from :func:`tool_call_ids`)."""
    return any(
        is_tool_part(part) and "toolCallId" in part and call_key(part["toolCallId"]) in call_ids
        for part in iter_parts(message)
    )


def is_assistant_with_tool_calls(message: Mapping[str, Any]) -> bool:
    """An assistant message that carries tool parts (the "call" side of a pair)."""
    return message.get("role") == "assistant" and has_tool_calls(message)


def text_of(message: Mapping[str, Any]) -> str:
    """The message's ``text`` parts joined with newlines (a missing text counts as empty, as in JS ``join``)."""
    return "\n".join(_join_piece(part.get("text")) for part in iter_parts(message) if part.get("type") == "text")


def _join_piece(value: Any) -> str:
    return "" if value is None else js_string(value)


__all__ = [
    "COMPACTION_PREFIX",
    "STUB_ID_PREFIX",
    "STUB_RESULT_TEXT",
    "call_key",
    "has_tool_calls",
    "is_assistant_with_tool_calls",
    "is_compaction_message",
    "is_tool_part",
    "is_tool_result_for",
    "iter_parts",
    "now_iso",
    "text_of",
    "tool_call_ids",
]
