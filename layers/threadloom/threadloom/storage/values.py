"""The storage boundary: values no backend can store are refused before a statement is sent.

Why here and not only at the HTTP edge: a lone surrogate fails while pg8000 encodes a
message that is already half written to the socket, and a NUL is refused by PostgreSQL
but silently truncates or passes on SQLite. Checking every bound value in one shared
place keeps a shared connection clean whatever a caller skipped, and makes both
backends refuse the same inputs with the same message.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (a NUL or a lone surrogate), or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (U+0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            return f"contains a lone surrogate (U+{ord(text[error.start]):04X}), which is not valid Unicode text"
    return None


def check_storable(params: Mapping[str, Any] | None) -> None:
    """Raise :class:`ValidationError` naming the first bound value that cannot be stored."""
    if not params:
        return
    for value in params.values():
        # ASCII text without a NUL and None are nearly every value: no call for them.
        if value is None or (value.__class__ is str and value.isascii() and "\x00" not in value):
            continue
        _check_value(value)


def check_storable_values(values: Iterable[Any]) -> None:
    """:func:`check_storable` for values bound by position."""
    for value in values:
        _check_value(value)


def _check_value(value: Any) -> None:
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            raise ValidationError(f"Cannot store text that {problem}")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValidationError(f"Cannot store the number {value}: it is outside the 64-bit integer range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"Cannot store the number {value}: it is not finite")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_value(item)
