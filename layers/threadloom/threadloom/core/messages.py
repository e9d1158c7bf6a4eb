"""Validation of incoming messages and parsing of stored ones.

Messages stay plain JSON dicts; we only insist on what every read path relies on
(a string ``id`` and ``role`` and a list of ``parts``), so bad input is refused with a
clear error instead of being stored and skipped later.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from threadloom.errors import ValidationError
from threadloom.jscompat import compact_json

if TYPE_CHECKING:
    from threadloom.records import Message

MAX_MESSAGE_ID_LENGTH = 256


def validate_message(message: Any) -> Message:
    """Return ``message`` if it has the shape storage needs; raise :class:`ValidationError` otherwise."""
    if not isinstance(message, dict):
        raise ValidationError(f"A message must be a JSON object, got {type(message).__name__}")
    message_id = message.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise ValidationError("A message needs a non-empty string 'id'")
    if len(message_id) > MAX_MESSAGE_ID_LENGTH:
        raise ValidationError(f"Message id is longer than {MAX_MESSAGE_ID_LENGTH} characters")
    if not isinstance(message.get("role"), str) or not message["role"]:
        raise ValidationError(f"Message {message_id!r} needs a non-empty string 'role'")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ValidationError(f"Message {message_id!r} needs a 'parts' list")
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ValidationError(f"Part {index} of message {message_id!r} must be an object with a string 'type'")
    return message


def serialize_message(message: Message) -> str:
    """Compact JSON, as the reference stores it; refuses values JSON cannot represent."""
    try:
        return compact_json(message)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"Message {message.get('id')!r} is not JSON-serializable: {error}") from error


def parse_stored_message(content: str) -> Message | None:
    """A stored row's message, or None when the row is corrupt (such rows are skipped, never fatal)."""
    try:
        parsed = json.loads(content)
    except (TypeError, ValueError):
        return None
    if (
        isinstance(parsed, dict)
        and isinstance(parsed.get("id"), str)
        and isinstance(parsed.get("role"), str)
        and isinstance(parsed.get("parts"), list)
    ):
        return parsed
    return None
