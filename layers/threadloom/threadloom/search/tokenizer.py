"""SQLite FTS5's ``porter unicode61`` tokenizer, reproduced in Python.

Why: contract D5 requires SQLite and PostgreSQL to return the same hits. SQLite tokenizes with
FTS5 ``tokenize='porter unicode61'``; PostgreSQL has no such parser, so the Postgres backend
stores tsvectors and tsqueries built from :func:`tokenize`, which must yield exactly the terms
SQLite 3.40.1 puts in its index (checked code point by code point and by property tests in
``tests/unit/search/``).

What FTS5 does, and therefore what this module does:

1. ``unicode61`` with its defaults (``remove_diacritics=1``, ``categories='L* N* Co'``, no
   ``tokenchars``/``separators``): a token starts at a token character and runs over token
   characters and the 25 combining diacritics of :data:`_unicode61_data.DIACRITICS` (which
   continue a token but never start one). SQLite's category table is its own (Unicode 6.1 era):
   code points unassigned back then, including most newer emoji such as U+1F916, count as
   token characters; ASCII token characters are exactly ``[0-9A-Za-z]``. The tables are
   probed from SQLite, not derived from :mod:`unicodedata`.
2. Each character is folded on its own (no multi-character folds): ASCII ``A-Z`` to lower
   case; BMP characters by SQLite's simple case-folding table and then its *simple* diacritic
   removal (``é`` -> ``e``, but e.g. ``ǖ`` keeps a diacritic); the 25 diacritics vanish; of the
   supplementary planes only Deseret (U+10400-U+10427) is folded. ``ß``, ligatures such as
   ``ﬁ`` (U+FB01) and final sigma (U+03C2) stay distinct from ``ss``, ``fi`` and U+03C3.
3. ``porter`` stems tokens of 3 to 64 UTF-8 *bytes*; shorter or longer tokens pass through.
   The stemmer works on bytes, so non-ASCII bytes count as consonants and it still strips
   English suffixes around them (``naïvetés`` -> ``naivet``). Its "double consonant" rule can
   cut the last byte of a character whose last two UTF-8 bytes are equal: ``a\u0861ing``
   (U+0861 is ``e0 a1 a1``) is indexed as the bytes ``61 e0 a1``, which is invalid UTF-8.
4. FTS5 truncates every term to 32768 bytes (``FTS5_MAX_TOKEN_SIZE``), possibly inside a
   character.

Invalid UTF-8 (only ever produced by steps 3 and 4) is returned as Python's
``backslashreplace`` form (``\\xb8``). That mapping is injective because ``\\`` is never part
of a token, so equal SQLite terms stay equal and different ones stay different.

Input SQLite can never see is treated as follows (no input raises): lone surrogates, which
Python strings may hold but SQLite cannot store, are separators; NUL is a separator, as in
SQLite.

Speed: the tables are compiled once at import into one ``str.translate`` table; ASCII text
takes a ``bytes.translate`` fast path; stems of short tokens are memoised in a bounded LRU cache. A typical
200-character English message takes about 8 µs (about 12 µs for mixed Cyrillic/CJK text, and
about 60 µs when none of its words has been seen before); see
``tests/unit/search/test_tokenizer_sqlite.py``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Final, TypeAlias

from threadloom.search import _unicode61_data as _data

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_TOKEN_BYTES", "PORTER_MAX_BYTES", "PORTER_MIN_BYTES", "split_words", "stem", "tokenize"]

#: FTS5 truncates every indexed or queried term to this many bytes.
MAX_TOKEN_BYTES: Final = 32768
#: The porter step only touches tokens of this many UTF-8 bytes (inclusive).
PORTER_MIN_BYTES: Final = 3
PORTER_MAX_BYTES: Final = 64


def _build_table() -> dict[int, str | None]:
    """One ``str.translate`` table doing all of ``unicode61``'s per-character work.

    Separators become a space, diacritics vanish, token characters fold. Afterwards a token is
    a maximal run of non-spaces: a diacritic can neither start a token (it was a separator for
    that purpose) nor end one (it is gone), every folded character is itself a token character,
    and every character :meth:`str.split` treats as whitespace is a separator in SQLite too.
    """
    table: dict[int, str | None] = {}
    for first, last in _data.SEPARATOR_RANGES:
        for cp in range(first, last + 1):
            if not chr(cp).isspace():
                table[cp] = " "
    for cp in range(0xD800, 0xE000):  # lone surrogates: SQLite never sees them; split there
        table[cp] = " "
    for first, count, stride, delta in _data.FOLD_RUNS:
        for k in range(count):
            cp = first + k * stride
            table[cp] = chr(cp + delta)
    for cp in _data.DIACRITICS:
        table[cp] = None
    return table


def _build_ascii_table() -> bytes:
    """``unicode61`` on ASCII as a ``bytes.translate`` table: ``A-Z`` folds, ``[0-9a-z]`` stays, the rest splits."""
    kept = {*range(ord("0"), ord("9") + 1), *range(ord("a"), ord("z") + 1)}
    return bytes(
        code + 32 if ord("A") <= code <= ord("Z") else code if code in kept else ord(" ") for code in range(256)
    )


_TABLE: Final = _build_table()
_ASCII_TABLE: Final = _build_ascii_table()
_CACHE_SIZE: Final = 1 << 16


def split_words(text: str) -> list[str]:
    """The ``unicode61`` tokens of ``text``: folded, not stemmed, not truncated.

    ASCII text goes through ``bytes.translate`` (a table lookup in C per byte), two and a half
    times faster than a regex over the lower-cased text.
    """
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split()
    return text.translate(_TABLE).split()


def tokenize(text: str) -> list[str]:
    """The terms SQLite FTS5 ``porter unicode61`` indexes for ``text``, in order."""
    words = split_words(text)
    if not words:
        return words
    if max(map(len, words)) <= PORTER_MAX_BYTES:  # nearly always: one C-level map, no per-word test
        return list(map(_short_term, words))
    short = _short_term
    return [short(word) if len(word) <= PORTER_MAX_BYTES else _long_term(word) for word in words]


def stem(word: str) -> str:
    """Apply FTS5's porter step and term truncation to one ``unicode61`` token."""
    return _short_term(word) if len(word) <= PORTER_MAX_BYTES else _long_term(word)


def _long_term(word: str) -> str:
    """A token of more than 64 characters, hence bytes: porter passes it through; FTS5 truncates it."""
    if len(word) <= MAX_TOKEN_BYTES // 4:
        return word
    raw = word.encode("utf-8")
    if len(raw) <= MAX_TOKEN_BYTES:
        return word
    return raw[:MAX_TOKEN_BYTES].decode("utf-8", "backslashreplace")


@lru_cache(maxsize=_CACHE_SIZE)
def _short_term(word: str) -> str:
    """Stem a token of at most 64 characters (cached: vocabulary repeats, and keys stay small)."""
    if word.isascii():
        return _porter(word) if len(word) >= PORTER_MIN_BYTES else word
    raw = word.encode("utf-8")
    if len(raw) > PORTER_MAX_BYTES:
        return word
    # One str character per byte, so the stemmer sees exactly the bytes SQLite sees.
    return _porter(raw.decode("latin-1")).encode("latin-1").decode("utf-8", "backslashreplace")


# --- porter stemmer: a line-by-line transcription of ext/fts5/fts5_tokenize.c -------------


def _is_vowel(c: str, y_is_vowel: bool) -> bool:
    return c in "aeiou" or (y_is_vowel and c == "y")


def _gobble_vc(s: str, prev_cons: bool) -> int:
    """Length of the leading ``C*V+C`` run of ``s`` (0 if there is none)."""
    cons = prev_cons
    n = len(s)
    i = 0
    while i < n:
        cons = not _is_vowel(s[i], cons)
        if not cons:
            break
        i += 1
    i += 1
    while i < n:
        cons = not _is_vowel(s[i], cons)
        if cons:
            return i + 1
        i += 1
    return 0


def _m_gt0(s: str) -> bool:
    return _gobble_vc(s, False) != 0


def _m_gt1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return n != 0 and _gobble_vc(s[n:], True) != 0


def _m_eq1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return n != 0 and _gobble_vc(s[n:], True) == 0


def _ostar(s: str) -> bool:
    if s[-1] in "wxy":
        return False
    mask = 0
    cons = False
    for c in s:
        cons = not _is_vowel(c, cons)
        mask = (mask << 1) + cons
    return (mask & 7) == 5


def _m_gt1_and_s_or_t(s: str) -> bool:
    return s[-1] in "st" and _m_gt1(s)


def _has_vowel(s: str) -> bool:
    return any(_is_vowel(c, i > 0) for i, c in enumerate(s))


_Rules: TypeAlias = "tuple[tuple[str, Callable[[str], bool], str], ...]"


# (suffix, condition on the stem, replacement). Within a step the first suffix that matches
# with a non-empty stem decides: if its condition fails, no later rule is tried (the C code is a
# switch on the penultimate letter followed by an if/else-if chain on the suffix).
_STEP2: Final[_Rules] = (
    ("ational", _m_gt0, "ate"),
    ("tional", _m_gt0, "tion"),
    ("enci", _m_gt0, "ence"),
    ("anci", _m_gt0, "ance"),
    ("izer", _m_gt0, "ize"),
    ("logi", _m_gt0, "log"),
    ("bli", _m_gt0, "ble"),
    ("alli", _m_gt0, "al"),
    ("entli", _m_gt0, "ent"),
    ("eli", _m_gt0, "e"),
    ("ousli", _m_gt0, "ous"),
    ("ization", _m_gt0, "ize"),
    ("ation", _m_gt0, "ate"),
    ("ator", _m_gt0, "ate"),
    ("alism", _m_gt0, "al"),
    ("iveness", _m_gt0, "ive"),
    ("fulness", _m_gt0, "ful"),
    ("ousness", _m_gt0, "ous"),
    ("aliti", _m_gt0, "al"),
    ("iviti", _m_gt0, "ive"),
    ("biliti", _m_gt0, "ble"),
)
_STEP3: Final[_Rules] = (
    ("ical", _m_gt0, "ic"),
    ("ness", _m_gt0, ""),
    ("icate", _m_gt0, "ic"),
    ("iciti", _m_gt0, "ic"),
    ("ful", _m_gt0, ""),
    ("ative", _m_gt0, ""),
    ("alize", _m_gt0, "al"),
)
_STEP4: Final[_Rules] = (
    ("al", _m_gt1, ""),
    ("ance", _m_gt1, ""),
    ("ence", _m_gt1, ""),
    ("er", _m_gt1, ""),
    ("ic", _m_gt1, ""),
    ("able", _m_gt1, ""),
    ("ible", _m_gt1, ""),
    ("ant", _m_gt1, ""),
    ("ement", _m_gt1, ""),
    ("ment", _m_gt1, ""),
    ("ent", _m_gt1, ""),
    ("ion", _m_gt1_and_s_or_t, ""),
    ("ou", _m_gt1, ""),
    ("ism", _m_gt1, ""),
    ("ate", _m_gt1, ""),
    ("iti", _m_gt1, ""),
    ("ous", _m_gt1, ""),
    ("ive", _m_gt1, ""),
    ("ize", _m_gt1, ""),
)


def _by_penultimate(rules: _Rules) -> dict[str, _Rules]:
    """Group rules by their suffix's penultimate letter, as the C ``switch`` does."""
    grouped: dict[str, _Rules] = {}
    for rule in rules:
        grouped[rule[0][-2]] = (*grouped.get(rule[0][-2], ()), rule)
    return grouped


_STEP2_BY: Final = _by_penultimate(_STEP2)
_STEP3_BY: Final = _by_penultimate(_STEP3)
_STEP4_BY: Final = _by_penultimate(_STEP4)


def _apply(s: str, rules: dict[str, _Rules]) -> str:
    n = len(s)
    if n < 2:
        return s
    for suffix, cond, replacement in rules.get(s[-2], ()):
        if n > len(suffix) and s.endswith(suffix):
            base = s[: n - len(suffix)]
            return base + replacement if cond(base) else s
    return s


def _step1a(s: str) -> str:
    n = len(s)
    if s[-1] == "s":
        if s[-2] == "e":
            if (n > 4 and s[-4] == "s" and s[-3] == "s") or (n > 3 and s[-3] == "i"):
                return s[:-2]
            return s[:-1]
        if s[-2] != "s":
            return s[:-1]
    return s


def _step1b(s: str) -> tuple[str, bool]:
    n = len(s)
    if n > 3 and s.endswith("eed"):
        return (s[:-1], False) if _m_gt0(s[:-3]) else (s, False)
    if n > 2 and s.endswith("ed"):
        return (s[:-2], True) if _has_vowel(s[:-2]) else (s, False)
    if n > 3 and s.endswith("ing"):
        return (s[:-3], True) if _has_vowel(s[:-3]) else (s, False)
    return s, False


def _porter(s: str) -> str:
    """FTS5's porter step on a token given as one character per UTF-8 byte (3..64 of them)."""
    s = _step1a(s)
    s, cut = _step1b(s)
    if cut:
        if len(s) > 2 and s[-2:] in ("at", "bl", "iz"):
            s += "e"
        else:
            c = s[-1]
            # len(s) >= 2 here unless s is a single vowel, which the first test rejects.
            if not _is_vowel(c, False) and c not in "lsz" and c == s[-2]:
                s = s[:-1]
            elif _m_eq1(s) and _ostar(s):
                s += "e"
    if s[-1] == "y" and _has_vowel(s[:-1]):
        s = s[:-1] + "i"
    s = _apply(s, _STEP2_BY)
    s = _apply(s, _STEP3_BY)
    s = _apply(s, _STEP4_BY)
    if s[-1] == "e":
        head = s[:-1]
        if _m_gt1(head) or (_m_eq1(head) and not _ostar(head)):
            s = head
    if len(s) > 1 and s[-1] == "l" and s[-2] == "l" and _m_gt1(s[:-1]):
        s = s[:-1]
    return s
