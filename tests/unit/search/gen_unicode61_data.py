"""Regenerate ``threadloom/search/_unicode61_data.py`` by probing the local SQLite.

Why probing rather than transcribing ``fts5_unicode2.c``: the probe records exactly what the
compiled tokenizer does (category table, case folding, ``remove_diacritics=1``, the UTF-8
decoder's U+FFFE/U+FFFF quirk) for every code point, with no room for transcription errors.

Usage (from the repository root)::

    .venv/bin/python tests/unit/search/gen_unicode61_data.py > layers/threadloom/threadloom/search/_unicode61_data.py
    .venv/bin/ruff format layers/threadloom/threadloom/search/_unicode61_data.py
"""

from __future__ import annotations

import sqlite3
import sys

SURROGATES = range(0xD800, 0xE000)


def probe() -> tuple[list[int], list[int], dict[int, int]]:
    """Classify every code point: separator, diacritic (continues but never starts a token), or token char.

    Each code point ``c`` is indexed as ``"q{c}q {c}"`` with the bare ``unicode61`` tokenizer:
    a separator yields ``q, q``; a diacritic yields one token (it cannot start the second);
    a token character yields two. The first token, minus its ``q`` brackets, is ``fold(c)``.
    """
    db = sqlite3.connect(":memory:")
    db.text_factory = bytes
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    rows = [(c, f"q{chr(c)}q {chr(c)}") for c in range(0x110000) if c not in SURROGATES]
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", rows)
    terms: dict[int, list[bytes]] = {}
    for term, doc, _offset in db.execute("SELECT term, doc, offset FROM v ORDER BY doc, offset"):
        terms.setdefault(doc, []).append(term)
    separators: list[int] = []
    diacritics: list[int] = []
    fold: dict[int, int] = {}
    for c, found in sorted(terms.items()):
        if found == [b"q", b"q"]:
            separators.append(c)
            continue
        folded = found[0][1:-1].decode("utf-8")
        if len(found) == 1:
            diacritics.append(c)
        elif found[1] != found[0][1:-1]:
            raise AssertionError(f"unexpected terms for U+{c:04X}: {found!r}")
        if len(folded) > 1:
            raise AssertionError(f"multi-character fold for U+{c:04X}")
        mapped = ord(folded) if folded else 0
        if mapped != c:
            fold[c] = mapped
    return separators, diacritics, fold


def ranges(points: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in points:
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def fold_runs(fold: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """Compress the fold map into ``(first, count, stride, delta)`` runs."""
    runs: list[tuple[int, int, int, int]] = []
    for c in sorted(fold):
        delta = fold[c] - c if fold[c] else 0
        if runs:
            first, count, stride, rdelta = runs[-1]
            last = first + (count - 1) * stride
            if rdelta == delta and fold[c] != 0 and count == 1 and c - last in (1, 2):
                runs[-1] = (first, 2, c - last, delta)
                continue
            if rdelta == delta and fold[c] != 0 and count > 1 and c - last == stride:
                runs[-1] = (first, count + 1, stride, delta)
                continue
        runs.append((c, 1, 1, delta))
    return runs


def main() -> None:
    separators, diacritics, fold = probe()
    deleted = sorted(c for c, m in fold.items() if m == 0)
    if deleted != diacritics:
        raise AssertionError("expected exactly the diacritic-only code points to fold to nothing")
    mapped = {c: m for c, m in fold.items() if m}
    w = sys.stdout.write
    w('"""Unicode tables of SQLite FTS5\'s ``unicode61`` tokenizer (default options), generated; do not edit.\n\n')
    w(f"Probed from SQLite {sqlite3.sqlite_version} by ``tests/unit/search/gen_unicode61_data.py``, which\n")
    w("documents the method. ``tests/unit/search/test_tokenizer_sqlite.py`` re-checks every code point.\n")
    w('"""\n\nfrom __future__ import annotations\n\nfrom typing import Final\n\n')
    w(f'SQLITE_VERSION: Final = "{sqlite3.sqlite_version}"\n\n')
    w("#: Inclusive code point ranges that separate tokens (surrogates are not listed: SQLite never sees them).\n")
    w("SEPARATOR_RANGES: Final[tuple[tuple[int, int], ...]] = (\n")
    for a, b in ranges(separators):
        w(f"    (0x{a:04X}, 0x{b:04X}),\n")
    w(")\n\n")
    w("#: Combining marks that continue a token but cannot start one; folding deletes them.\n")
    w("DIACRITICS: Final[tuple[int, ...]] = (\n")
    for c in diacritics:
        w(f"    0x{c:04X},\n")
    w(")\n\n")
    w("#: Case folding and diacritic removal as ``(first, count, stride, delta)``: code points\n")
    w("#: ``first + k * stride`` (``k < count``) fold to themselves plus ``delta``.\n")
    w("FOLD_RUNS: Final[tuple[tuple[int, int, int, int], ...]] = (\n")
    for first, count, stride, delta in fold_runs(mapped):
        w(f"    (0x{first:04X}, {count}, {stride}, {delta}),\n")
    w(")\n")


if __name__ == "__main__":
    main()
