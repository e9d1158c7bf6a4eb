"""The pieces of the spliced history body: lazy entries, the wire-form check, the envelope splice."""

from __future__ import annotations

import pytest
from pydantic_core import to_json
from threadloom.api.models import HistoryPage
from threadloom.api.wire import history_page_json, is_wire_form, messages_json
from threadloom.jscompat import compact_json
from threadloom.records import HistoryEntry

MESSAGE = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": 'é 😀 "q" \\ e-mail'}]}


def test_an_entry_from_a_stored_text_parses_it_only_when_asked_and_compares_by_value() -> None:
    text = compact_json(MESSAGE)
    lazy = HistoryEntry(None, len(text.encode()), "m1", 1, text=text)
    assert lazy._message is None  # nothing parsed yet
    assert lazy == HistoryEntry(MESSAGE, len(text.encode()), "m1", 1)
    assert lazy.message == MESSAGE and lazy._message is not None
    assert "HistoryEntry(message=" in repr(lazy)
    with pytest.raises(ValueError, match="needs its message or its stored text"):
        HistoryEntry(None, 1, "m1", 1)


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ('{"a":"e-mail, re-run, e+1, 1e, e-"}', True),
        ('{"a":1e+16}', False),
        ('{"a":1e-05}', False),
        ('{"a":[2.5e-7]}', False),
        ('{"a":"x1e-5"}', False),  # looks like a number: the serializer decides (same bytes, slower)
        ('{"a":"\\u0001"}', False),
        ('{"a":"a\\/b"}', False),
        ('{"a":"a\\nb\\"c\\\\"}', True),
    ],
)
def test_wire_form(text: str, wire: bool) -> None:
    assert is_wire_form(text) is wire


def test_the_page_body_is_the_models_json() -> None:
    unsafe = {"id": "m2", "role": "user", "parts": [], "metadata": {"x": 1e16}}
    entries = [
        HistoryEntry(None, 1, "m1", 1, text=compact_json(MESSAGE)),
        HistoryEntry(None, 1, "m2", 2, text=compact_json(unsafe)),  # written differently by pydantic
        HistoryEntry({"id": "c", "role": "assistant", "parts": []}, 1, "m3", 4),  # a summary: no text
    ]
    envelope = HistoryPage.model_construct(messages=[], leaf_id="m9", total=9, next_cursor="abc")
    expected = HistoryPage.model_construct(
        messages=[entry.message for entry in entries], leaf_id="m9", total=9, next_cursor="abc"
    ).model_dump_json(by_alias=True)
    assert history_page_json(envelope, entries) == expected
    assert messages_json(entries[2:]) == to_json([entries[2].message]).decode()[1:-1]
    assert history_page_json(envelope, []) == envelope.model_dump_json(by_alias=True)
    with pytest.raises(ValueError, match="must hold no messages"):
        history_page_json(HistoryPage.model_construct(messages=[MESSAGE], leaf_id="m9", total=9), entries)
