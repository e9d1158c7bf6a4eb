"""Validation of incoming messages and parsing of stored ones.

Messages stay plain JSON dicts; we only insist on what every read path relies on
(a string ``id`` and ``role`` and a list of ``parts``), so bad input is refused with a
clear error instead of being stored and skipped later.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, cast

from threadloom.errors import ValidationError
from threadloom.jscompat import compact_json_tree
from threadloom.limits import HARD_LIMITS, Limits, take_just_checked

if TYPE_CHECKING:
    from threadloom.records import Message

MAX_MESSAGE_ID_LENGTH = HARD_LIMITS.max_id_chars


def validate_message(message: Any, limits: Limits = HARD_LIMITS) -> Message:
    """Return ``message`` if it satisfies the limits table's message rule; raise :class:`ValidationError` otherwise.

    Storage calls it with ``HARD_LIMITS`` (nothing untextable ever reaches a database);
    sessions call it first with their configured, usually tighter, limits.
    """
    if limits is HARD_LIMITS and take_just_checked(message):
        return cast("Message", message)  # checked just now against limits no looser than these
    return limits.check_message(message)


def message_digest(message: Message) -> str:
    """A digest of the message's content, the same for the message read back from its stored row."""
    text = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def serialize_message(message: Message) -> str:
    """Compact JSON, as the reference stores it; refuses values JSON cannot represent.

    Messages reach it validated (:func:`validate_message` refuses any nesting deeper than the
    limit, so none contains itself): it skips the encoder's cycle check, a quarter of the cost.
    """
    try:
        return compact_json_tree(message)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"Message {message.get('id')!r} is not JSON-serializable: {error}") from error
    except RecursionError:
        raise ValidationError(f"Message {message.get('id')!r} is nested too deeply or contains itself") from None


def parse_stored_message(content: str) -> Message | None:
    """A stored row's message, or None when the row is corrupt (such rows are skipped, never fatal)."""
    try:
        parsed = json.loads(content)
    except (TypeError, ValueError):
        return None
    return stored_message(parsed)


def stored_message(value: Any) -> Message | None:
    """A stored row's message already parsed from JSON, or None when it is not message-shaped (corrupt)."""
    if (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("role"), str)
        and isinstance(value.get("parts"), list)
    ):
        return value
    return None
