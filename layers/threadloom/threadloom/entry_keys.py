"""Keys for entries the model writes into keyed blocks (skills, search indexes).

The algorithm must match the reference exactly: a model that learned a key in one
process (or in the reference itself) has to hit the same entry everywhere else.
That is why lengths and hashing work on UTF-16 code units, as JavaScript does.
It sits below ``core`` and ``tools``, which both key entries with it.
"""

from __future__ import annotations

import re

from threadloom.jscompat import js_trim, utf16_code_units, utf16_slice

SLUG_MAX_UNITS = 60
"""Slugs look at this many UTF-16 code units of their source text, no more."""

_FNV_OFFSET_BASIS = 0x811C9DC5
_FNV_PRIME = 0x01000193
_UINT32_MASK = 0xFFFFFFFF
_BASE36_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_NON_SLUG_RUN = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """A lowercase ASCII slug: anything outside ``[a-z0-9]`` collapses to one ``-``, ends trimmed.

    Non-ASCII characters (accents, CJK, emoji) all become separators, so a text
    made only of them gives ``""``; callers fall back to a hash in that case.
    """
    lowered = utf16_slice(text, SLUG_MAX_UNITS).lower()
    slug = _NON_SLUG_RUN.sub("-", lowered)
    slug = slug.removeprefix("-")
    return slug.removesuffix("-")


def _to_base36(value: int) -> str:
    if value == 0:
        return "0"
    digits: list[str] = []
    while value:
        value, remainder = divmod(value, 36)
        digits.append(_BASE36_DIGITS[remainder])
    return "".join(reversed(digits))


def stable_hash(text: str) -> str:
    """32-bit FNV-1a over UTF-16 code units, in unpadded lowercase base 36.

    Short and deterministic across processes and languages (Python's ``hash`` is salted).
    """
    value = _FNV_OFFSET_BASIS
    for unit in utf16_code_units(text):
        value ^= unit
        value = (value * _FNV_PRIME) & _UINT32_MASK
    return _to_base36(value)


def context_entry_key(title: str | None, content: str) -> str:
    """The key under which a keyed write is stored.

    A non-blank title is the whole identity (no hash), so rewriting with the same
    title updates that entry in place. Without a title the key carries a hash of
    the content, so two different texts that share a 60-unit prefix never collide.
    """
    if title is not None and js_trim(title):
        return slugify(title) or f"entry-{stable_hash(title)}"
    slug = slugify(content) or "entry"
    return f"{slug}-{stable_hash(content)}"
