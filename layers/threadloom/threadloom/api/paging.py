"""Cursors and the byte budget every list response shares, so no page can pass the response cap.

Lambda refuses a response over 6 MB, so a page stops at whichever comes first: the page size the
caller asked for or ``Limits.max_response_bytes`` of serialized items. One message is at most
``Limits.max_message_bytes``, far below the cap, so a page always holds at least one item.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from threadloom.core.limits import Limits

ENVELOPE_BYTES = 64 * 1024
"""Room kept for everything in a page besides its items (leaf id, totals, the cursor)."""


def encode_cursor(data: dict[str, Any]) -> str:
    """An opaque, URL-safe cursor."""
    raw = json.dumps(data, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise ValidationError("Invalid cursor") from exc
    if not isinstance(data, dict):
        raise ValidationError("Invalid cursor")
    return data


def page_size(limit: int | None, limits: Limits) -> int:
    return limits.page_size(limit)


def item_budget(limits: Limits) -> int:
    """Bytes the items of one page may take."""
    return max(limits.max_response_bytes - ENVELOPE_BYTES, 1)


def json_size(value: Any) -> int:
    """Bytes ``value`` takes in a JSON response (compact, UTF-8), as the API serializes it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8"))


def count_within_bytes(items: Iterable[Any], budget: int, size_of: Callable[[Any], int] = json_size) -> int:
    """How many leading ``items`` fit in ``budget`` bytes (with their separators); never fewer than one."""
    used = 0
    count = 0
    for item in items:
        used += size_of(item) + 1
        if used > budget and count > 0:
            break
        count += 1
    return count
