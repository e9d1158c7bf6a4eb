"""A history page's JSON body written from the stored texts, byte for byte what pydantic writes for the parsed page.

Parsing every stored message only to serialize it again was a third of a page request. Storage
hands on the text of each row it checked is a well-formed, whitespace-free message
(:attr:`threadloom.records.HistoryEntry.text`); that text is already the wire form whenever the
serializer would write the parsed value back the same way. Rows the library writes are compact
JSON (``threadloom.jscompat.compact_json``), which pydantic reproduces exactly except for floats
with an exponent (``1e+16``, pydantic ``10000000000000000.0``); a ``\\u`` or ``\\/`` escape (never
written by the library, which writes characters raw) is written differently too. A text holding
either, and every entry without a text (summaries, PostgreSQL's parsed pages), goes through the
serializer as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic_core import to_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from threadloom.api.models import HistoryPage
    from threadloom.records import HistoryEntry

_EXPONENT = re.compile(r"[0-9][eE][-+]?[0-9]")
"""A number with an exponent, or text that looks like one (then the serializer decides: slower, same bytes)."""

_MESSAGES = '{"messages":['


def is_wire_form(text: str) -> bool:
    """Whether pydantic writes the message parsed from ``text`` (checked well-formed, compact) back as ``text``.

    Substring tests first (each a fast scan): the regular expression runs only on texts that hold
    ``e+`` or ``e-``, the only ways the library (and ``JSON.stringify``) write an exponent.
    """
    if "\\u" in text or "\\/" in text:
        return False
    return not (("e+" in text or "e-" in text) and _EXPONENT.search(text))


def message_json(entry: HistoryEntry) -> str:
    """The entry's message as the response carries it."""
    text = entry.text
    if text is not None and is_wire_form(text):
        return text
    return to_json(entry.message).decode("utf-8")


def history_page_json(envelope: HistoryPage, entries: Iterable[HistoryEntry]) -> str:
    """``HistoryPage`` JSON (by alias) whose ``messages`` are ``entries``: ``envelope`` holds no messages."""
    body = envelope.model_dump_json(by_alias=True)
    if not body.startswith(_MESSAGES + "]"):  # the model's first field is the page's messages
        raise ValueError("A history page envelope must hold no messages")
    return _MESSAGES + ",".join([message_json(entry) for entry in entries]) + body[len(_MESSAGES) :]
