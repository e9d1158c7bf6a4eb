"""Message builders for tests: small AI-SDK-shaped dicts."""

from __future__ import annotations

from typing import Any


def text_message(message_id: str, text: str = "", role: str = "user") -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text or f"text of {message_id}"}]}


def load_part(label: str, key: str, output: Any, *, static: bool = False) -> dict[str, Any]:
    """A finished load_context tool call, as a dynamic part (toolName) or a static ``tool-load_context`` part."""
    part: dict[str, Any] = {
        "toolCallId": f"call-{label}-{key}",
        "state": "output-available",
        "input": {"label": label, "key": key},
        "output": output,
    }
    if static:
        part["type"] = "tool-load_context"
    else:
        part["type"] = "dynamic-tool"
        part["toolName"] = "load_context"
    return part
