"""The byte budget shared by every list response."""

from __future__ import annotations

import pytest
from threadloom.api.paging import count_within_bytes, decode_cursor, encode_cursor, item_budget, json_size
from threadloom.errors import ValidationError
from threadloom.limits import Limits


def test_cursor_round_trips_and_rejects_garbage() -> None:
    assert decode_cursor(encode_cursor({"o": 3, "l": "leaf"})) == {"o": 3, "l": "leaf"}
    with pytest.raises(ValidationError, match="Invalid cursor"):
        decode_cursor("!!not-base64!!")
    with pytest.raises(ValidationError, match="Invalid cursor"):
        decode_cursor("W10")  # a JSON list, not an object


def test_items_stop_at_the_budget_but_never_below_one() -> None:
    items = [{"text": "x" * 100}] * 10
    one = json_size(items[0]) + 1
    assert count_within_bytes(items, one * 3) == 3
    assert count_within_bytes(items, one * 3 - 1) == 2
    assert count_within_bytes(items, 1) == 1
    assert count_within_bytes([], 100) == 0


def test_json_size_counts_utf8_bytes_not_characters() -> None:
    assert json_size("é") == len('"é"'.encode())


def test_the_item_budget_leaves_room_for_the_envelope() -> None:
    limits = Limits()
    assert 0 < item_budget(limits) < limits.max_response_bytes
