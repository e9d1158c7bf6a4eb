"""Contract D5: SQLite FTS5 and PostgreSQL return the same hits for the same data and query.

SQLite indexes with ``tokenize='porter unicode61'`` and is queried with :func:`to_fts5_match`;
PostgreSQL indexes :func:`to_tsvector_literal` in a GIN-indexed tsvector column and is queried
with ``@@ CAST(:q AS tsquery)`` from :func:`to_tsquery_literal`. Both must agree with each other
and with the dialect's plain meaning (every phrase occurs as consecutive terms), and no query
may raise on either.
"""

from __future__ import annotations

import os
import random
import sqlite3
import uuid
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import pg8000.native
import pytest
from threadloom.search import Phrase, parse_query, to_fts5_match, to_tsquery_literal, to_tsvector_literal, tokenize

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.postgres

DOCUMENTS: list[str] = [
    "The quick brown fox jumps over the lazy dog.",
    "Foxes are running quickly; the dogs ran after them.",
    "I agreed to the agreement, and we are in agreement.",
    "Please e-mail me the state-of-the-art report by Friday.",
    "Send an email to mail@example.com (not e mail).",
    "Use OR, AND and NOT as plain words: cats OR dogs.",
    "NEAR(alpha beta) is FTS5 syntax; here it is just text.",
    "Wildcards like run* and ^start and -minus and +plus are literal.",
    "key:value pairs, col:val and (parenthesised) groups.",
    'She said "hello world" and then "goodbye world".',
    "Don't stop believing; it's O'Reilly's book.",
    "Version 3.14 released on 2024-01-15 with 1,000 fixes.",
    "Café au lait, naïve résumé, CRÈME BRÛLÉE.",
    "Cafe au lait, naive resume, creme brulee.",
    "Straße und Strasse sind nicht gleich; ß ≠ ss.",
    "ﬁnance and finance: ligatures are their own letters.",
    "Σίσυφος ΟΔΥΣΣΕΥΣ σοφός",
    "Привет, мир! Ёлка и ёжик.",
    "東京都は日本の首都です。",
    "中文 分词 测试",
    "한국어 텍스트 검색",
    "Emoji: 🤖 robots 👍 thumbs 🔥 fire",
    "CamelCase HTTPServer iPhone XMLHttpRequest",
    "generalization generalizations generally general",
    "relational conditional rational",
    "hopping hoped hope hopes",
    "The cat sat on the mat. The mat sat on the cat.",
    "cat cat cat dog dog cat",
    "a\u0861ing and o\u09e7\u09e7ed break UTF-8 inside the stemmer",
    "x" * 300 + " very long token",
    "y" * 3000 + " even longer token",
    "\u6771" * 11000 + " truncated by FTS5",
    "tab\tseparated\nlines\r\nand\u00a0nbsp\u2009thin spaces",
    "zero\u200bwidth and soft\u00adhyphen and e\u0301 combining",
    "!!! ??? ... --- ***",
    "",
    "The the THE tHe",
    "\u0130stanbul \u0131iI\u0130 Turkish dotted",
    "\U00010400\U00010428 Deseret and \U0001d400\U0001d401\U0001d402 math bold",
    "backslash \\ and quote ' and double \" and colon : and ampersand & and bar | and bang !",
]

QUERIES: list[str] = [
    "fox",
    "foxes",
    "FOX dog",
    "running",
    '"quick brown"',
    '"brown quick"',
    '"lazy dog" fox',
    "agree",
    '"in agreement"',
    "e-mail",
    "email",
    '"e mail"',
    "mail",
    "OR",
    "cats OR dogs",
    "NOT",
    "NEAR(alpha beta)",
    "run*",
    "fo*",
    "agre*",
    "generaliz*",
    "e-ma*",
    '"quick" bro*',
    "caf*",
    "x*",
    "*",
    "^start",
    "-minus +plus",
    "col:val",
    "(parenthesised)",
    '"hello world',
    'hello "world',
    '""',
    '"',
    "",
    "   ",
    "!!! ...",
    "don't",
    "O'Reilly",
    "3.14",
    "2024-01-15",
    "café",
    "cafe naive",
    "BRÛLÉE",
    "straße",
    "strasse",
    "ﬁnance",
    "finance",
    "σίσυφος",
    "ΟΔΥΣΣΕΥΣ",
    "ёлка",
    "東京都は日本の首都です",
    "中文",
    "🤖",
    "👍",
    "httpserver",
    "general",
    "generalization",
    "hope",
    '"the cat sat"',
    '"cat dog"',
    '"dog cat"',
    '"cat cat cat"',
    "a\u0861ing",
    "x" * 300,
    "y" * 3000,
    "\u6771" * 11000,
    "nbsp",
    "e\u0301",
    "combining",
    "the",
    "istanbul",
    "\U00010428",
    "\U0001d400\U0001d401\U0001d402",
    "\\ ' \" : & | !",
    "backslash & ampersand",
    "' OR 1=1 --",
    "\x00",
    "\ud800",
]


def _connect() -> pg8000.native.Connection:
    url = os.environ.get("TEST_DATABASE_URL")
    if not url:
        return pg8000.native.Connection(user="postgres", host="127.0.0.1", database="test", timeout=10)
    parts = urlsplit(url)
    return pg8000.native.Connection(
        user=unquote(parts.username or "postgres"),
        password=unquote(parts.password) if parts.password else None,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=parts.path.lstrip("/") or "test",
        timeout=10,
    )


@pytest.fixture(scope="module")
def pg() -> Iterator[pg8000.native.Connection]:
    try:
        conn = _connect()
    except Exception as exc:  # any failure to reach the server: refused, DNS, auth, timeout
        if os.environ.get("THREADLOOM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required (THREADLOOM_REQUIRE_POSTGRES=1) but unreachable: {exc!r}")
        pytest.skip(f"PostgreSQL unreachable ({exc!r}); set TEST_DATABASE_URL or run one on 127.0.0.1:5432/test")
    try:
        yield conn
    finally:
        conn.close()


class Backends:
    """The same documents indexed in SQLite FTS5 and in a PostgreSQL temporary table."""

    def __init__(self, pg: pg8000.native.Connection, documents: list[str]) -> None:
        self.documents = documents
        self.pg = pg
        self.table = f"tl_search_eq_{uuid.uuid4().hex[:12]}"
        pg.run(f"CREATE TEMPORARY TABLE {self.table} (id integer PRIMARY KEY, tsv tsvector NOT NULL)")
        for doc_id, text in enumerate(documents, start=1):
            pg.run(
                f"INSERT INTO {self.table} (id, tsv) VALUES (:id, CAST(:v AS tsvector))",
                id=doc_id,
                v=to_tsvector_literal(text),
            )
        pg.run(f"CREATE INDEX {self.table}_gin ON {self.table} USING gin (tsv)")
        pg.run(f"ANALYZE {self.table}")
        self.sqlite = sqlite3.connect(":memory:")
        self.sqlite.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter unicode61')")
        self.sqlite.executemany(
            "INSERT INTO docs(rowid, content) VALUES (?, ?)", [(i, t) for i, t in enumerate(documents, start=1) if t]
        )

    def sqlite_hits(self, query: str) -> set[int]:
        match = to_fts5_match(parse_query(query))
        if match is None:
            return set()
        return {row[0] for row in self.sqlite.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (match,))}

    def pg_hits(self, query: str, *, use_index: bool) -> set[int]:
        literal = to_tsquery_literal(parse_query(query))
        if literal is None:
            return set()
        self.pg.run(f"SET enable_seqscan = {'off' if use_index else 'on'}")
        try:
            rows = self.pg.run(f"SELECT id FROM {self.table} WHERE tsv @@ CAST(:q AS tsquery)", q=literal)
        finally:
            self.pg.run("RESET enable_seqscan")
        return {row[0] for row in rows}

    def close(self) -> None:
        self.sqlite.close()
        self.pg.run(f"DROP TABLE IF EXISTS {self.table}")


def naive_hits(documents: list[str], phrases: list[Phrase]) -> set[int]:
    """The dialect's meaning: every phrase occurs as consecutive terms of the document."""
    if not phrases:
        return set()
    hits: set[int] = set()
    for doc_id, text in enumerate(documents, start=1):
        terms = tokenize(text)
        if all(_phrase_at_some_position(terms, p) for p in phrases):
            hits.add(doc_id)
    return hits


def _phrase_at_some_position(terms: list[str], phrase: Phrase) -> bool:
    """The phrase's terms consecutive in ``terms``; with ``prefix`` the last one only begins its term."""
    size = len(phrase.tokens)
    for i in range(len(terms) - size + 1):
        window = terms[i : i + size]
        if phrase.prefix:
            if tuple(window[:-1]) == phrase.tokens[:-1] and window[-1].startswith(phrase.tokens[-1]):
                return True
        elif tuple(window) == phrase.tokens:
            return True
    return False


@pytest.fixture(scope="module")
def corpus(pg: pg8000.native.Connection) -> Iterator[Backends]:
    backends = Backends(pg, DOCUMENTS)
    try:
        yield backends
    finally:
        backends.close()


@pytest.mark.parametrize("query", QUERIES, ids=[f"q{i:02d}" for i in range(len(QUERIES))])
def test_same_hits_on_both_backends(corpus: Backends, query: str) -> None:
    expected = naive_hits(corpus.documents, parse_query(query))
    assert corpus.sqlite_hits(query) == expected
    assert corpus.pg_hits(query, use_index=True) == expected
    assert corpus.pg_hits(query, use_index=False) == expected


def test_the_corpus_exercises_real_matches(corpus: Backends) -> None:
    """Guard against a vacuous pass: most queries hit something, some hit nothing."""
    hit_counts = [len(corpus.sqlite_hits(query)) for query in QUERIES]
    assert sum(1 for count in hit_counts if count) >= len(QUERIES) * 2 // 3
    assert 0 in hit_counts


def test_random_documents_and_queries_agree(pg: pg8000.native.Connection) -> None:
    rng = random.Random(20240515)
    vocabulary = [
        "cat", "cats", "dog", "dogs", "run", "running", "ran", "agree", "agreed", "e-mail", "mail", "OR", "NOT",
        "the", "a", "café", "cafe", "東京", "🤖", "don't", "3.14", "x*", "(y)", "ß", "ss", "ﬁ", "fi", "Σ", "ς",
        "ca*", "do*", "runn*", "agr*", "e-m*",
    ]  # fmt: skip
    documents = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12))) for _ in range(60)]
    backends = Backends(pg, documents)
    try:
        for _ in range(250):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 4))]
            if words and rng.random() < 0.4:
                start = rng.randrange(len(words))
                words[start] = '"' + words[start]
                if rng.random() < 0.7:
                    words[-1] += '"'
            query = " ".join(words)
            expected = naive_hits(documents, parse_query(query))
            assert backends.sqlite_hits(query) == expected, query
            assert backends.pg_hits(query, use_index=True) == expected, query
    finally:
        backends.close()


def test_the_short_ascii_tsvector_is_the_same_value_on_the_server(pg: pg8000.native.Connection) -> None:
    """The short ASCII path writes repeated terms once per position; PostgreSQL must merge them into
    exactly the tsvector the general path's grouped literal gives (same value, same bytes)."""
    from threadloom.search.query import _tsvector_literal

    rng = random.Random(20261204)
    vocabulary = ["the", "fox", "jumps", "jumped", "caresses", "a", "42", "Over", "don't", "e-mail", "B2B"]
    texts = ["", "Cats chase cats, dogs chase cats", "again " * 256, "again " * 255 + "fox", "fox " + "x" * 300]
    texts += [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 60))) for _ in range(200)]
    fast_literals = [to_tsvector_literal(text) for text in texts]
    assert sum(bool(literal) and "'" not in literal for literal in fast_literals) > 190  # the short path ran
    rows = pg.run(
        "SELECT bool_and(CAST(fast AS tsvector) = CAST(general AS tsvector)), "
        "bool_and(tsvectorsend(CAST(fast AS tsvector)) = tsvectorsend(CAST(general AS tsvector))), "
        "bool_and(CAST(CAST(fast AS tsvector) AS text) = CAST(CAST(general AS tsvector) AS text)), count(*) "
        "FROM unnest(CAST(:fast AS text[]), CAST(:general AS text[])) AS pairs(fast, general)",
        fast=fast_literals,
        general=[_tsvector_literal(text) for text in texts],
    )
    assert rows == [[True, True, True, len(texts)]]


def test_postgres_limits_never_raise_and_never_add_hits(pg: pg8000.native.Connection) -> None:
    """Past PostgreSQL's position limit a phrase may be missed, but single terms are found and no
    phrase is found that SQLite would not find."""
    long_doc = " ".join(f"w{i}" for i in range(20_000))
    huge_doc = " ".join(f"{i:0200d}" for i in range(8_000))  # ~1.6 MB of distinct terms
    repeated = "cat dog " * 1_000 + "cat bird"
    backends = Backends(pg, [long_doc, huge_doc, repeated])
    try:
        for query in ["w0", "w19999", '"w100 w101"', '"w16379 w16380"', f"{0:0200d}"]:
            assert backends.pg_hits(query, use_index=True) == backends.sqlite_hits(query), query
        # Tokens 16382 and 16383 are past the exact range: SQLite finds the phrase, PostgreSQL does not.
        assert backends.sqlite_hits('"w16381 w16382"') == {1}
        assert backends.pg_hits('"w16381 w16382"', use_index=True) == set()
        # Token 16381 is exact, token 20000 is clamped: no spurious adjacency.
        assert backends.sqlite_hits('"w16380 w19999"') == set() == backends.pg_hits('"w16380 w19999"', use_index=True)
        # The 1,001st "cat" is past the 256 positions PostgreSQL keeps per lexeme.
        assert backends.sqlite_hits('"cat bird"') == {3}
        assert backends.pg_hits('"cat bird"', use_index=True) == set()
        assert backends.pg_hits("cat bird", use_index=True) == {3}
        # Terms beyond the 1 MiB budget of one tsvector are not indexed in PostgreSQL.
        assert backends.sqlite_hits(f"{7_999:0200d}") == {2}
        assert backends.pg_hits(f"{7_999:0200d}", use_index=True) == set()
    finally:
        backends.close()
