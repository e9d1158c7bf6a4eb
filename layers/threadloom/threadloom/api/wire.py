"""A history page's JSON body written from the stored texts, byte for byte what pydantic writes for the parsed page.

Parsing every stored message only to serialize it again was a third of a page request. Storage
hands on the text of each row it checked is a well-formed message (:attr:`threadloom.records.HistoryEntry.text`);
that text is already the wire form whenever the serializer would write the parsed value back the
same way. Rows the library writes are compact JSON (``threadloom.jscompat.compact_json``), which
pydantic reproduces exactly except for floats with an exponent (``1e+16``, pydantic
``10000000000000000.0``). A ``\\u`` escape (the library writes one only for a control character,
as pydantic does) or a ``\\/`` is set aside too, to be safe. A text holding either, and every
entry without a text (summaries, PostgreSQL's parsed pages), goes through the serializer as before.
A row rewritten outside the library into valid but not compact JSON (spaces between tokens) would
be sent as stored: the same message, other bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_core import to_json

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.api.models import HistoryPage
    from threadloom.records import HistoryEntry

_MESSAGES = '{"messages":['


def is_wire_form(text: str) -> bool:
    """Whether pydantic writes the message parsed from ``text`` (checked well-formed, compact) back as ``text``.

    One-character tests first (``memchr`` fast): the two-character searches run only on texts that
    hold a backslash, a ``+`` or a ``-``. An exponent is a digit, ``e``, a sign and a digit, the only
    way the library (and ``JSON.stringify``) write one.
    """
    if "\\" in text and ("\\u" in text or "\\/" in text):
        return False
    return not (("+" in text and _has_exponent(text, "e+")) or ("-" in text and _has_exponent(text, "e-")))


def _has_exponent(text: str, mark: str) -> bool:
    """Whether ``mark`` (``e+`` or ``e-``) occurs between two digits (or text that looks like a number)."""
    at = text.find(mark)
    while at != -1:
        if at > 0 and text[at - 1].isdigit() and text[at + 2 : at + 3].isdigit():
            return True
        at = text.find(mark, at + 2)
    return False


def message_json(entry: HistoryEntry) -> str:
    """The entry's message as the response carries it."""
    text = entry.text
    if text is not None and is_wire_form(text):
        return text
    return to_json(entry.message).decode("utf-8")


def messages_json(entries: Sequence[HistoryEntry]) -> str:
    """The entries' messages joined with commas, as the page's ``messages`` array holds them.

    The texts are checked once, joined (a page is one string to scan, not 200): commas cannot make
    an escape or an exponent across two texts. Only a page where the check finds one checks each.
    A page without texts (PostgreSQL's) is serialized in one call, as the whole page was before.
    """
    if all(entry.text is None for entry in entries):
        return to_json([entry.message for entry in entries]).decode("utf-8")[1:-1]
    joined = ",".join([entry.text if entry.text is not None else message_json(entry) for entry in entries])
    if is_wire_form(joined):
        return joined
    return ",".join([message_json(entry) for entry in entries])


def history_page_json(envelope: HistoryPage, entries: Sequence[HistoryEntry]) -> str:
    """``HistoryPage`` JSON (by alias) whose ``messages`` are ``entries``: ``envelope`` holds no messages."""
    body = envelope.model_dump_json(by_alias=True)
    if not body.startswith(_MESSAGES + "]"):  # the model's first field is the page's messages
        raise ValueError("A history page envelope must hold no messages")
    return _MESSAGES + messages_json(entries) + body[len(_MESSAGES) :]
