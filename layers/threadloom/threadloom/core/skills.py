"""Rewriting a loaded skill's tool result when the skill is unloaded (reference §5.3, contract D7)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from threadloom.records import Message

LOAD_TOOL = "load_context"


def unloaded_marker(key: str) -> str:
    return f"[skill unloaded: {key}]"


def is_skill_load_part(part: Mapping[str, Any], label: str, key: str) -> bool:
    """A finished ``load_context`` call for (label, key): a dynamic part by ``toolName`` or a static part by type."""
    is_load = part.get("toolName") == LOAD_TOOL or part.get("type") == f"tool-{LOAD_TOOL}"
    if not is_load or part.get("state") != "output-available":
        return False
    tool_input = part.get("input")
    return isinstance(tool_input, dict) and tool_input.get("label") == label and tool_input.get("key") == key


def reclaim_loaded_skill(history: list[Message], label: str, key: str) -> Message | None:
    """The newest assistant message holding the skill's output, rewritten with the unload marker; None if none."""
    for message in reversed(history):
        if message.get("role") != "assistant":
            continue
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        matching = [
            i for i, part in enumerate(parts) if isinstance(part, dict) and is_skill_load_part(part, label, key)
        ]
        if not matching:
            continue
        rewritten = copy.deepcopy(message)
        for index in matching:
            rewritten["parts"][index]["output"] = unloaded_marker(key)
        return rewritten
    return None
