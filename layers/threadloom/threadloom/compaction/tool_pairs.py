"""Repair tool call/result pairing after messages were cut out of a history.

A provider rejects a result whose call is gone and (for most models) a call
without a result, so this removes the first kind and answers the second with a
stub. It follows the reference exactly, including its quirks: stubs are not
de-duplicated, and every message left without parts is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.compaction.markers import (
    STUB_ID_PREFIX,
    STUB_RESULT_TEXT,
    call_key,
    is_tool_part,
    iter_parts,
    now_iso,
    tool_call_ids,
)
from threadloom.jscompat import js_string

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from threadloom.records import Message


def _is_result_part(part: Mapping[str, Any]) -> bool:
    return is_tool_part(part) and "toolCallId" in part and "output" in part


def _tool_name_for(message: Mapping[str, Any], key: Hashable) -> Any:
    """``toolName`` of the first part of ``message`` with this call id, else ``"unknown"``."""
    for part in iter_parts(message):
        if "toolCallId" in part and call_key(part["toolCallId"]) == key:
            name = part.get("toolName")
            return "unknown" if name is None else name
    return "unknown"


def _stub(call_id: Any, tool_name: Any, created_at: str) -> Message:
    return {
        "id": f"{STUB_ID_PREFIX}{js_string(call_id)}",
        "role": "assistant",
        "parts": [{"type": "tool-result", "toolCallId": call_id, "toolName": tool_name, "result": STUB_RESULT_TEXT}],
        "createdAt": created_at,
    }


def _parts_count(message: Mapping[str, Any]) -> int:
    parts = message.get("parts")
    return len(parts) if isinstance(parts, list) else 0


def sanitize_tool_pairs(messages: Sequence[Message], *, now: Callable[[], str] | None = None) -> list[Message]:
    """Drop results whose call is gone, add a stub after each call whose result is gone, drop empty messages.

    The input is not mutated; changed messages are shallow copies with a new
    ``parts`` list. ``now`` supplies the stubs' ``createdAt`` (ISO-8601 UTC).
    """
    surviving: dict[Hashable, Any] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for part in iter_parts(message):
                if is_tool_part(part) and "toolCallId" in part:
                    surviving.setdefault(call_key(part["toolCallId"]), part["toolCallId"])
    results: set[Hashable] = set()
    for message in messages:
        results.update(call_key(part["toolCallId"]) for part in iter_parts(message) if _is_result_part(part))

    orphaned = results - surviving.keys()
    cleaned: list[Message] = list(messages)
    if orphaned:
        cleaned = []
        for message in messages:
            parts = message.get("parts")
            if not isinstance(parts, list):
                cleaned.append(message)
                continue
            kept = [
                part
                for part in parts
                if not (
                    isinstance(part, Mapping) and _is_result_part(part) and call_key(part["toolCallId"]) in orphaned
                )
            ]
            cleaned.append({**message, "parts": kept} if len(kept) != len(parts) else message)

    missing = surviving.keys() - results - orphaned
    if missing:
        created_at = (now or now_iso)()
        patched: list[Message] = []
        for message in cleaned:
            patched.append(message)
            if message.get("role") != "assistant":
                continue
            for key in tool_call_ids(message):
                if key in missing:
                    patched.append(_stub(surviving[key], _tool_name_for(message, key), created_at))
        cleaned = patched

    return [message for message in cleaned if _parts_count(message) > 0]


__all__ = ["sanitize_tool_pairs"]
