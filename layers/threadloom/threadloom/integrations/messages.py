"""How a framework's record becomes a Threadloom message and comes back unchanged.

The record is kept verbatim in ``metadata`` (``{"source": <framework>, "record": ...}``), so
reading it back returns it field for field. ``parts`` carry a readable projection (text,
tool calls and results, reasoning) so search, compaction summaries, token estimates and the
inspector see the conversation. A message without a record of this framework (a compaction
overlay, or a message another client wrote) is read back as plain text with its role.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from threadloom.records import Message

RECORD_KEY: Final = "record"
SOURCE_KEY: Final = "source"
ROLES: Final = frozenset({"user", "assistant", "system"})


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def reasoning_part(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text}


def tool_call_part(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An AI SDK tool part in ``input-available`` state (compaction keeps it with its result)."""
    return {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "toolName": name,
        "state": "input-available",
        "input": parse_json(arguments),
    }


def tool_result_part(call_id: str, output: Any, name: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "state": "output-available", "output": output}
    if name:
        part["toolName"] = name
    return part


def marker_part(source: str, kind: str) -> dict[str, Any]:
    """Stands in for a record with nothing readable (an image, a hosted-tool call): a message needs a part."""
    return {"type": f"data-{source}", "data": {"kind": kind}}


def parse_json(value: Any) -> Any:
    """Tool arguments arrive as JSON text; the projection shows them as an object when they parse."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def to_message(
    source: str, role: str, parts: list[dict[str, Any]], record: Any, message_id: str | None = None
) -> Message:
    """A Threadloom message holding ``record`` verbatim; a fresh id unless the framework numbers its records."""
    return {
        "id": message_id or str(uuid.uuid4()),
        "role": role if role in ROLES else ("system" if role == "developer" else "assistant"),
        "parts": parts or [marker_part(source, "empty")],
        "metadata": {SOURCE_KEY: source, RECORD_KEY: record},
    }


def stored_record(message: Message, source: str) -> Any | None:
    """The framework record a message holds, or None when another writer (or compaction) made it."""
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get(SOURCE_KEY) == source and RECORD_KEY in metadata:
        return metadata[RECORD_KEY]
    return None


def plain_text(message: Message) -> str:
    """The text parts of a message, joined by blank lines (a compaction summary is one text part)."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    return "\n\n".join(
        part["text"]
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


__all__ = [
    "marker_part",
    "parse_json",
    "plain_text",
    "reasoning_part",
    "stored_record",
    "text_part",
    "to_message",
    "tool_call_part",
    "tool_result_part",
]
