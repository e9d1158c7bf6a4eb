"""Threadloom's single search dialect (contract D5), identical on SQLite and PostgreSQL.

SQLite indexes with FTS5 ``tokenize='porter unicode61'``; PostgreSQL indexes tsvectors built by
:func:`tokenize`, a Python reproduction of that tokenizer, so both backends see the same terms.
"""

from __future__ import annotations

from threadloom.search.query import (
    MAX_EXACT_POSITION,
    MAX_LEXEME_BYTES,
    MAX_PHRASE_TOKENS,
    MAX_POSITIONS_PER_LEXEME,
    MAX_QUERY_TOKENS,
    MIN_PREFIX_CHARS,
    TSVECTOR_BUDGET_BYTES,
    Phrase,
    parse_query,
    pg_lexeme,
    query_problem,
    searchable_text,
    to_fts5_match,
    to_tsquery_literal,
    to_tsvector_literal,
)
from threadloom.search.tokenizer import split_words, stem, tokenize

__all__ = [
    "MAX_EXACT_POSITION",
    "MAX_LEXEME_BYTES",
    "MAX_POSITIONS_PER_LEXEME",
    "MAX_PHRASE_TOKENS",
    "MAX_QUERY_TOKENS",
    "MIN_PREFIX_CHARS",
    "TSVECTOR_BUDGET_BYTES",
    "Phrase",
    "parse_query",
    "query_problem",
    "pg_lexeme",
    "searchable_text",
    "split_words",
    "stem",
    "to_fts5_match",
    "to_tsquery_literal",
    "to_tsvector_literal",
    "tokenize",
]
