"""Every timestamp Threadloom writes has one text form, whatever the moment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from threadloom.clock import timestamp_text, utc_now


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000Z"),  # strftime's %Y wrote "1-01-01..."
        (datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "0999-12-31T23:59:59.999Z"),
        (datetime(2026, 1, 31, 12, 0, 0, 123456, tzinfo=UTC), "2026-01-31T12:00:00.123Z"),  # cut, not rounded
        (datetime(2026, 1, 31, 12, 0), "2026-01-31T12:00:00.000Z"),  # a naive moment is UTC
        (datetime(2026, 1, 31, 14, 0, tzinfo=timezone(timedelta(hours=2))), "2026-01-31T12:00:00.000Z"),
    ],
)
def test_a_moment_is_written_in_the_one_form(moment: datetime, text: str) -> None:
    assert timestamp_text(moment) == text


def test_now_has_the_same_form() -> None:
    now = utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now)
    assert abs(datetime.fromisoformat(now) - datetime.now(UTC)) < timedelta(seconds=5)
