"""The D5 query dialect, its FTS5 and PostgreSQL renderings, and the indexed text of a message."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadloom.search import (
    MAX_EXACT_POSITION,
    MAX_LEXEME_BYTES,
    MAX_POSITIONS_PER_LEXEME,
    MAX_QUERY_TOKENS,
    TSVECTOR_BUDGET_BYTES,
    Phrase,
    parse_query,
    pg_lexeme,
    searchable_text,
    to_fts5_match,
    to_tsquery_literal,
    to_tsvector_literal,
    tokenize,
)


def tokens_of(query: str) -> list[tuple[str, ...]]:
    return [phrase.tokens for phrase in parse_query(query)]


# --- parse_query --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query", ["", "   ", "\t\n", '""', '" "', '"', "!!! ... ???", "-- ** ^^ ::", "\u2014 \u00b7", "\ud800"]
)
def test_queries_without_tokens_parse_to_nothing(query: str) -> None:
    assert parse_query(query) == []
    assert to_fts5_match(parse_query(query)) is None
    assert to_tsquery_literal(parse_query(query)) is None


def test_words_are_separate_terms_and_are_stemmed() -> None:
    assert tokens_of("Running dogs") == [("run",), ("dog",)]


def test_quoted_text_is_one_phrase() -> None:
    assert tokens_of('"running dogs" cats') == [("run", "dog"), ("cat",)]
    assert parse_query('"Running Dogs"') == [Phrase(words=("running", "dogs"), tokens=("run", "dog"))]


def test_unterminated_quote_runs_to_the_end() -> None:
    assert tokens_of('cats "running dogs') == [("cat",), ("run", "dog")]
    assert tokens_of('a "b c" "d e') == [("a",), ("b", "c"), ("d", "e")]


def test_quotes_bound_words() -> None:
    assert tokens_of('foo"bar baz"qux') == [("foo",), ("bar", "baz"), ("qux",)]


def test_a_word_split_by_the_tokenizer_is_a_phrase() -> None:
    assert tokens_of("e-mail 3.14 don't") == [("e", "mail"), ("3", "14"), ("don", "t")]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("cats OR dogs", [("cat",), ("or",), ("dog",)]),
        ("NOT cats", [("not",), ("cat",)]),
        ("NEAR(cats dogs)", [("near", "cat"), ("dog",)]),
        ("cat*", [("cat",)]),
        ("^cat", [("cat",)]),
        ("-cat +dog", [("cat",), ("dog",)]),
        ("content:cat", [("content", "cat")]),
        ("(cat)", [("cat",)]),
        ("AND", [("and",)]),
    ],
)
def test_operators_are_literal_text(query: str, expected: list[tuple[str, ...]]) -> None:
    assert tokens_of(query) == expected


def test_javascript_whitespace_separates_words() -> None:
    assert tokens_of("cats\u00a0dogs\u3000birds\ufeffants") == [("cat",), ("dog",), ("bird",), ("ant",)]
    # U+200B is no whitespace: the word stays one, split by the tokenizer into a phrase.
    assert tokens_of("cats\u200bdogs") == [("cat", "dog")]


def test_duplicate_terms_collapse() -> None:
    assert tokens_of('cat cats "cat" CAT') == [("cat",)]


def test_non_string_query_matches_nothing() -> None:
    assert parse_query(None) == []  # type: ignore[arg-type]


# --- to_fts5_match ------------------------------------------------------------------------------


def test_fts5_match_quotes_unstemmed_words() -> None:
    # Porter is not idempotent ("agreed" -> "agre" -> "agr"), so FTS5 gets the words, not the stems.
    assert to_fts5_match(parse_query('agreed "Running dogs" e-mail')) == '"agreed" "running dogs" "e mail"'


def _fts5_db(docs: list[str]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter unicode61')")
    db.executemany("INSERT INTO docs(rowid, content) VALUES (?, ?)", list(enumerate(docs, start=1)))
    return db


def naive_hits(docs: list[str], phrases: list[Phrase]) -> set[int]:
    """The dialect's meaning, spelled out: every phrase occurs as consecutive terms of the doc."""

    def contains(terms: list[str], phrase: tuple[str, ...]) -> bool:
        n = len(phrase)
        return any(tuple(terms[i : i + n]) == phrase for i in range(len(terms) - n + 1))

    if not phrases:
        return set()
    return {
        i for i, doc in enumerate(docs, start=1) if all(contains(tokenize(doc), phrase.tokens) for phrase in phrases)
    }


_DOC_WORDS = st.sampled_from(
    ["cat", "cats", "dog", "dogs", "running", "run", "agreed", "agree", "e-mail", "mail", "OR", "NOT", "a", "the",
     "café", "CAFE", "naïve", "東京", "🤖", "don't", "3.14", "x*", "NEAR", "ß", "ss", "\u0861ing", "a\u0861"]
)  # fmt: skip
_QUERY_CHARS = st.sampled_from([*" \"*^-+:()'.,\u00a0", "OR", "NOT", "NEAR", "AND"])
_QUERY = st.lists(st.one_of(_DOC_WORDS, _QUERY_CHARS, st.characters(blacklist_categories=("Cs",))), max_size=8).map(
    "".join
)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(st.lists(_DOC_WORDS, max_size=8).map(" ".join), min_size=1, max_size=6),
    query=_QUERY,
)
def test_property_fts5_match_never_fails_and_means_the_dialect(docs: list[str], query: str) -> None:
    phrases = parse_query(query)
    match = to_fts5_match(phrases)
    db = _fts5_db(docs)
    try:
        hits = (
            set()
            if match is None
            else {row[0] for row in db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (match,))}
        )
    finally:
        db.close()
    assert hits == naive_hits(docs, phrases)


@settings(max_examples=300, deadline=None)
@given(query=st.text())
def test_property_no_query_breaks_fts5(query: str) -> None:
    match = to_fts5_match(parse_query(query))
    if match is not None:
        db = _fts5_db(["anything at all"])
        try:
            db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (match,)).fetchall()
        finally:
            db.close()


# --- to_tsquery_literal -------------------------------------------------------------------------


def test_tsquery_literal_shapes() -> None:
    assert to_tsquery_literal(parse_query("cats")) == "'cat'"
    assert to_tsquery_literal(parse_query("cats dogs")) == "('cat' & 'dog')"
    assert to_tsquery_literal(parse_query('"running dogs" cats')) == "(('run' <-> 'dog') & 'cat')"


def test_tsquery_literal_is_a_balanced_tree() -> None:
    literal = to_tsquery_literal([Phrase((f"w{i}",), (f"w{i}",)) for i in range(1024)])
    assert literal is not None
    depth = max_depth = 0
    for char in literal:
        depth += {"(": 1, ")": -1}.get(char, 0)
        max_depth = max(max_depth, depth)
    assert max_depth == 10


def test_tsquery_literal_escapes_backslashes() -> None:
    # "a\u0861ing" stems to invalid UTF-8, rendered a\xe0\xa1; PostgreSQL needs the backslashes doubled.
    assert to_tsquery_literal(parse_query("a\u0861ing")) == "'a\\\\xe0\\\\xa1'"


def test_queries_over_the_token_limit_match_nothing() -> None:
    at_limit = " ".join(f"w{i}" for i in range(MAX_QUERY_TOKENS))
    assert len(parse_query(at_limit)) == MAX_QUERY_TOKENS
    assert parse_query(at_limit + " one-more") == []
    assert parse_query('"' + "a " * (MAX_QUERY_TOKENS + 1)) == []
    # Repeats count once.
    assert tokens_of("cat " * 5000) == [("cat",)]


def test_hand_built_phrases_beyond_the_tsquery_size_match_nothing() -> None:
    phrases = [Phrase((f"{i:0250d}",), (f"{i:0250d}",)) for i in range(5_000)]  # 1.25 MB of lexemes
    assert to_tsquery_literal(phrases) is None
    assert to_tsquery_literal(phrases[:100]) is not None


# --- to_tsvector_literal and pg_lexeme ----------------------------------------------------------


def tsvector_entries(literal: str) -> dict[str, list[int]]:
    """What PostgreSQL's tsvector input makes of a literal: each lexeme's positions, repeats merged and sorted.

    Terms never hold a space, a quote or a backslash (all separators), so an entry is the
    lexeme, quoted or not, a colon and its comma-separated positions.
    """
    entries: dict[str, list[int]] = {}
    for entry in literal.split():
        lexeme, _, positions = entry.rpartition(":")
        entries.setdefault(lexeme.removeprefix("'").removesuffix("'"), []).extend(map(int, positions.split(",")))
    return {lexeme: sorted(set(positions)) for lexeme, positions in entries.items()}


def test_tsvector_literal_positions_are_one_based_and_grouped() -> None:
    from threadloom.search.query import _tsvector_literal

    text = "Cats chase cats, dogs chase cats"
    assert _tsvector_literal(text) == "'cat':1,3,6 'chase':2,5 'dog':4"
    # The short ASCII path writes each term at its position, repeats included; the server merges them.
    assert to_tsvector_literal(text) == "cat:1 chase:2 cat:3 dog:4 chase:5 cat:6"
    assert tsvector_entries(to_tsvector_literal(text)) == {"cat": [1, 3, 6], "chase": [2, 5], "dog": [4]}
    assert to_tsvector_literal("") == ""
    assert to_tsvector_literal("!!! ...") == ""


def test_tsvector_positions_past_the_limit_collapse_to_16383() -> None:
    words = [f"w{i}" for i in range(MAX_EXACT_POSITION + 10)]
    entries = dict(entry.split(":") for entry in to_tsvector_literal(" ".join(words)).split(" "))
    assert entries["'w0'"] == "1"
    assert entries[f"'w{MAX_EXACT_POSITION - 1}'"] == str(MAX_EXACT_POSITION)
    assert entries[f"'w{MAX_EXACT_POSITION}'"] == "16383"  # 16382 stays empty: no spurious phrase
    assert entries[f"'w{MAX_EXACT_POSITION + 9}'"] == "16383"
    assert "16382" not in entries.values()


def test_tsvector_keeps_256_positions_per_lexeme() -> None:
    literal = to_tsvector_literal("cat " * 1000)
    positions = literal.removeprefix("'cat':").split(",")
    assert len(positions) == MAX_POSITIONS_PER_LEXEME
    assert positions[-1] == "256"


def test_tsvector_stops_adding_terms_at_the_size_budget() -> None:
    words = [f"{i:0250d}" for i in range(10_000)]  # 10,000 distinct 250-byte terms: ~2.5 MB
    literal = to_tsvector_literal(" ".join(words))
    entries = literal.split(" ")
    used = sum(len(w) + (len(w) & 1) + 4 for w in words[: len(entries)])
    assert 0 < len(entries) < len(words)
    assert used <= TSVECTOR_BUDGET_BYTES
    assert entries[0].startswith(f"'{words[0]}':1")


def test_long_terms_are_hashed_consistently() -> None:
    long_word = "x" * 5000
    lexeme = pg_lexeme(long_word)
    assert len(lexeme.encode()) <= MAX_LEXEME_BYTES
    assert re.fullmatch(r"x{200}#[0-9a-f]{32}", lexeme)
    assert pg_lexeme("x" * 4999 + "y") != lexeme
    assert pg_lexeme("short") == "short"
    assert to_tsvector_literal(long_word) == f"'{lexeme}':1"
    assert to_tsquery_literal(parse_query(long_word)) == f"'{lexeme}'"


def test_hashed_prefix_never_splits_a_character() -> None:
    lexeme = pg_lexeme("\u6771" * 200)
    lexeme.encode("utf-8")
    assert lexeme.startswith("\u6771" * 66 + "#")


# --- searchable_text ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"id": "m", "role": "user", "parts": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}]},
         "hello world"),
        ({"parts": [{"type": "text", "text": "a"}, {"type": "reasoning", "text": "hidden"},
                    {"type": "tool-search", "input": {"q": "x"}, "output": "y"}, {"type": "text", "text": "b"}]},
         "a b"),
        ({"parts": [{"type": "text", "text": ""}, {"type": "text", "text": "x"}]}, " x"),
        ({"parts": [{"type": "text"}, {"type": "text", "text": 5}, "junk", None, {"type": "text", "text": "ok"}]},
         "ok"),
        ({"parts": "not a list"}, ""),
        ({}, ""),
        ({"parts": []}, ""),
    ],
)  # fmt: skip
def test_searchable_text(message: dict[str, Any], expected: str) -> None:
    assert searchable_text(message) == expected


def test_searchable_text_of_a_non_mapping_is_empty() -> None:
    assert searchable_text("nope") == ""  # type: ignore[arg-type]


_ASCII_WORDS = st.sampled_from(["the", "fox", "jumped", "caresses", "a", "x" * 300, "42", "Über", "don't", "\\'"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_ASCII_WORDS, st.text(alphabet=st.characters(max_codepoint=127), max_size=12)), max_size=80))
def test_the_short_ascii_shortcut_builds_the_same_tsvector_as_the_general_path(words: list[str]) -> None:
    from threadloom.search.query import _tsvector_literal

    text = " ".join(words)
    assert tsvector_entries(to_tsvector_literal(text)) == tsvector_entries(_tsvector_literal(text))


def test_the_short_ascii_shortcut_keeps_at_most_256_positions_per_term() -> None:
    from threadloom.search.query import _tsvector_literal

    text = "again " * 300
    assert to_tsvector_literal(text) == _tsvector_literal(text)  # past the cap: the general path itself
    assert to_tsvector_literal(text).count(",") == 255


@pytest.mark.parametrize("count", [255, 256, 257])
def test_the_short_ascii_shortcut_is_exact_on_both_sides_of_the_position_cap(count: int) -> None:
    """Up to 256 terms positions are rendered as they come; past it the capped path keeps the first 256."""
    from threadloom.search.query import _tsvector_literal

    text = "again " * (count - 1) + "fox"
    assert tsvector_entries(to_tsvector_literal(text)) == tsvector_entries(_tsvector_literal(text))
    assert tsvector_entries(to_tsvector_literal(text))["fox"] == [count]
    assert tsvector_entries(to_tsvector_literal(text))["again"] == list(range(1, min(count, 257)))
