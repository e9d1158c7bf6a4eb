"""The one clock every timestamp comes from, below every layer that stamps records.

Core stamps messages and storage stamps rows with the same text form, so the functions live
under both: :func:`utc_now` for now, :func:`timestamp_text` for any other moment.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_last_second: list[tuple[int, str]] = [(-1, "")]
"""The last whole second :func:`utc_now` formatted, with its text (formatting it was most of the cost).

One tuple, read and replaced whole, so threads can share it."""


def utc_now() -> str:
    """Timestamps are ISO-8601 UTC with milliseconds, identical on every backend."""
    now = time.time()
    second, text = _last_second[0]
    if second != int(now):
        second = int(now)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _last_second[0] = (second, text)
    return f"{text}.{int(now * 1000) % 1000:03d}Z"


def timestamp_text(moment: datetime) -> str:
    """``moment`` in the same text form (a naive one is taken as UTC).

    ``isoformat`` writes the year in four digits, where ``strftime``'s ``%Y`` writes "1" for the
    year 1 (glibc): such a text would not sort, compare or import as a timestamp.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
