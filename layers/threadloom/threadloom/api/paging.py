"""Cursors and the byte budget every list response shares, so no page can pass the response cap.

Lambda refuses a response over 6 MB, so a page stops at whichever comes first: the page size the
caller asked for or ``Limits.max_response_bytes`` of serialized items. One message is at most
``Limits.max_message_bytes``, far below the cap, so a page always holds at least one item.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any, TypeVar

from threadloom.errors import ConflictError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from threadloom.limits import Limits

T = TypeVar("T")

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


def model_size(model: Any) -> int:
    """The JSON size of a response model as the client receives it (by alias)."""
    return json_size(model.model_dump(mode="json", by_alias=True))


def page_within(
    items: list[T], limits: Limits, limit: int | None, size_of: Callable[[Any], int] = json_size
) -> tuple[list[T], bool]:
    """The leading items within ``limit`` and the byte budget, and whether any are left after them."""
    window = items[: page_size(limit, limits)]
    count = count_within_bytes(window, item_budget(limits), size_of=size_of)
    return window[:count], count < len(items)


def anchor_cursor(scope: str, session_id: str, last_id: str) -> str:
    """A cursor that continues a list after ``last_id``, valid only for this list of this session."""
    return encode_cursor({"k": scope, "s": session_id, "a": last_id})


def cursor_anchor(cursor: str | None, scope: str, session_id: str) -> str | None:
    """The id of the last item the previous page returned (None: start at the beginning)."""
    if not cursor:
        return None
    state = decode_cursor(cursor)
    anchor = state.get("a")
    if state.get("k") != scope or state.get("s") != session_id or not isinstance(anchor, str):
        raise ValidationError("Invalid cursor: it belongs to another list")
    return anchor


def index_after(items: list[T], anchor: str | None, id_of: Callable[[T], Any], what: str) -> int:
    """Where the next page starts; a 409 when the anchor was deleted meanwhile, never a silent restart."""
    if anchor is None:
        return 0
    index = next((position for position, item in enumerate(items) if id_of(item) == anchor), None)
    if index is None:
        raise ConflictError(f"The {what} {anchor!r} this cursor continues from is gone; read the list again")
    return index + 1
