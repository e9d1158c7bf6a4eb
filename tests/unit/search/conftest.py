"""An oracle for the tokenizer tests: the terms SQLite FTS5 itself indexes for a text."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


class Fts5Oracle:
    """Index texts with ``tokenize='porter unicode61'`` and read the terms back via ``fts5vocab``.

    Terms are read as bytes and decoded with ``backslashreplace``, the representation
    :func:`threadloom.search.tokenize` promises for the rare invalid UTF-8 SQLite produces.
    """

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.text_factory = bytes
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
        self.db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")

    def terms_many(self, texts: Sequence[str]) -> list[list[str]]:
        self.db.execute("DELETE FROM t")
        self.db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(texts, start=1)))
        found: list[list[str]] = [[] for _ in texts]
        rows = self.db.execute('SELECT term, doc, "offset" FROM v ORDER BY doc, "offset"')
        for term, doc, _offset in rows:
            found[doc - 1].append(term.decode("utf-8", "backslashreplace"))
        return found

    def terms(self, text: str) -> list[str]:
        return self.terms_many([text])[0]

    def close(self) -> None:
        self.db.close()


@pytest.fixture(scope="session")
def fts5() -> Iterator[Fts5Oracle]:
    oracle = Fts5Oracle()
    yield oracle
    oracle.close()
