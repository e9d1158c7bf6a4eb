"""The one search dialect of Threadloom (contract D5) and its SQLite and PostgreSQL renderings.

Dialect: text inside double quotes is one phrase (an unterminated quote runs to the end);
outside quotes every whitespace-separated word (JavaScript whitespace, as the reference splits)
is its own term, and a word the tokenizer splits (``e-mail``, ``3.14``) is a phrase of its
pieces. A word outside quotes ending in ``*`` is a prefix (``lisb*``; its stem, as FTS5 stems a
prefix token, begins the indexed term; PostgreSQL's ``:*``), when it has at least
:data:`MIN_PREFIX_CHARS` characters. Every other character is literal: ``OR``, ``NOT``, ``NEAR``,
another ``*``, ``^``, ``-``, ``:`` and parentheses are plain text, which the tokenizer either keeps as words or drops as
separators. Terms and phrases are ANDed, and a repeated term or phrase counts once. A query
without tokens matches nothing, and so does one whose phrases hold more than
:data:`MAX_QUERY_TOKENS` tokens in all or one phrase more than :data:`MAX_PHRASE_TOKENS`:
the work of a phrase grows with its length times the places its words occur (a 1,020-token
phrase took 4.7-12 s on SQLite and blocked the local server) and PostgreSQL's tsquery parsing
grows quadratically. Nothing raises here; :func:`query_problem` says why the API refuses a
query (400) instead of answering nothing.

Both renderings are built from :mod:`threadloom.search.tokenizer`, which reproduces SQLite's
``porter unicode61`` tokenizer, so SQLite and PostgreSQL return the same rows:

* :func:`to_fts5_match` gives FTS5 the *unstemmed* folded words of each phrase as one
  double-quoted string; FTS5 re-tokenizes and stems them exactly as it did the documents
  (re-tokenizing folded words is the identity, and porter is not idempotent, so passing
  stems would be wrong). Words never contain ``"``, so the expression is always valid.
* :func:`to_tsquery_literal` and :func:`to_tsvector_literal` give PostgreSQL the final
  terms as literals for ``CAST(:q AS tsquery)`` / ``CAST(:v AS tsvector)`` (always bound
  parameters, never spliced into SQL); casts apply no dictionary, so terms are compared
  byte for byte as SQLite compares them.

PostgreSQL limits and how they are handled (none raises):

* A lexeme must be under 2048 bytes: terms over :data:`MAX_LEXEME_BYTES` bytes are replaced,
  in documents and queries alike, by a prefix, ``#`` and a 128-bit BLAKE2b digest. ``#`` never
  occurs in a term, so this cannot collide with a real term.
* Positions stop at 16383 and a lexeme keeps at most 256 of them. Positions up to
  :data:`MAX_EXACT_POSITION` (16381) are exact; every later token is put at 16383 so that it
  still matches as a single term, and, because 16382 is left empty, it can never complete a
  phrase spuriously. Phrase matches are therefore exact within a document's first 16381 tokens
  and within the first 256 occurrences of each term; beyond that PostgreSQL can miss a phrase
  hit that SQLite finds (never the reverse). Single terms are unaffected.
* A tsvector holds at most 1 MiB of lexemes and positions: distinct terms are added in order
  of first appearance while they fit in :data:`TSVECTOR_BUDGET_BYTES`; terms first appearing
  after that are not indexed in PostgreSQL (only documents with roughly 1 MB of *distinct*
  words are affected).
* A tsquery holds at most 1 MiB of lexemes; :data:`MAX_QUERY_TOKENS` keeps parsed queries far
  below that, and :func:`to_tsquery_literal` renders hand-built phrase lists that would exceed
  it as ``None`` (match nothing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from threadloom.jscompat import JS_WHITESPACE_RUN
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
    "to_fts5_match",
    "to_tsquery_literal",
    "to_tsvector_literal",
]

#: A parsed query with more tokens than this matches nothing (on both backends alike).
MAX_QUERY_TOKENS: Final = 64
#: A parsed query with a phrase longer than this matches nothing (on both backends alike).
MAX_PHRASE_TOKENS: Final = 32
#: A word ending in ``*`` is a prefix when it has at least this many characters (else it is the word itself).
MIN_PREFIX_CHARS: Final = 2
#: Terms longer than this (UTF-8 bytes) are hashed for PostgreSQL (its limit is 2047).
MAX_LEXEME_BYTES: Final = 255
_HASHED_PREFIX_BYTES: Final = 200
#: Last exact 1-based position; later tokens sit at :data:`_OVERFLOW_POSITION`.
MAX_EXACT_POSITION: Final = 16381
_OVERFLOW_POSITION: Final = 16383
#: PostgreSQL keeps at most this many positions per lexeme.
MAX_POSITIONS_PER_LEXEME: Final = 256
#: Bytes of lexemes plus positions one tsvector may hold (PostgreSQL's MAXSTRPOS is 1048575).
TSVECTOR_BUDGET_BYTES: Final = 1_048_575 - 1024
#: Bytes of lexemes (NUL-terminated) one tsquery may hold (the same MAXSTRPOS limit, with a margin).
_TSQUERY_BUDGET_BYTES: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Phrase:
    """One ANDed element of a query: tokens that must appear consecutively, in order.

    ``words`` are the folded ``unicode61`` tokens (what FTS5 is given), ``tokens`` the final
    stemmed terms (what the index holds and PostgreSQL is given); both have the same length.
    """

    words: tuple[str, ...]
    tokens: tuple[str, ...]
    prefix: bool = False
    """The last token matches every indexed term it begins (``lisb*``)."""


def parse_query(query: str) -> list[Phrase]:
    """Parse ``query`` in the D5 dialect; an empty list means "matches nothing"."""
    if not isinstance(query, str):
        return []
    phrases: list[Phrase] = []
    seen: set[tuple[tuple[str, ...], bool]] = set()
    count = 0
    # Even pieces are outside quotes, odd ones inside; an unmatched quote leaves an odd last piece.
    for index, piece in enumerate(query.split('"')):
        chunks = [piece] if index % 2 else JS_WHITESPACE_RUN.split(piece)
        for chunk in chunks:
            words = tuple(split_words(chunk))
            if not words:
                continue
            if len(words) > MAX_PHRASE_TOKENS:
                return []
            tokens = tuple(stem(word) for word in words)
            prefix = not index % 2 and chunk.endswith("*") and _prefix_allowed(words[-1], tokens[-1])
            if (tokens, prefix) not in seen:
                count += len(tokens)
                if count > MAX_QUERY_TOKENS:
                    return []
                seen.add((tokens, prefix))
                phrases.append(Phrase(words, tokens, prefix))
    return phrases


def _prefix_allowed(word: str, token: str) -> bool:
    """A prefix needs :data:`MIN_PREFIX_CHARS` characters (``a*`` would expand to most of the index)
    and a term PostgreSQL keeps as it is (a hashed long term has no prefixes)."""
    return len(word) >= MIN_PREFIX_CHARS and pg_lexeme(token) == token


def query_problem(query: str, max_chars: int) -> str | None:
    """Why ``query`` is refused (a message for a 400), or ``None`` when it may run.

    It bounds the work of one search on both backends before either sees it: the profile's
    ``max_query_chars``, then the tokens :func:`parse_query` would otherwise drop silently.
    """
    if len(query) > max_chars:
        return f"The search query has {len(query)} characters; at most {max_chars} are allowed"
    total = 0
    seen: set[tuple[str, ...]] = set()
    for index, piece in enumerate(query.split('"')):
        chunks = [piece] if index % 2 else JS_WHITESPACE_RUN.split(piece)
        for chunk in chunks:
            words = tuple(split_words(chunk))
            if len(words) > MAX_PHRASE_TOKENS:
                return f"A phrase of the search query has {len(words)} words; at most {MAX_PHRASE_TOKENS} are allowed"
            if words and words not in seen:
                seen.add(words)
                total += len(words)
    if total > MAX_QUERY_TOKENS:
        return f"The search query has {total} words; at most {MAX_QUERY_TOKENS} are allowed"
    return None


def to_fts5_match(phrases: Iterable[Phrase]) -> str | None:
    """An FTS5 MATCH expression ANDing the phrases, or ``None`` when there is nothing to match.

    Each phrase becomes a double-quoted FTS5 string; adjacent strings are an implicit AND.
    """
    rendered = ['"' + " ".join(phrase.words) + ('" *' if phrase.prefix else '"') for phrase in phrases if phrase.words]
    return " ".join(rendered) if rendered else None


def to_tsquery_literal(phrases: Iterable[Phrase]) -> str | None:
    """A tsquery literal ANDing the phrases (``<->`` inside one), or ``None`` to match nothing."""
    rendered: list[str] = []
    total = 0
    for phrase in phrases:
        if not phrase.tokens:
            continue
        lexemes = [pg_lexeme(token) for token in phrase.tokens]
        total += sum(len(lexeme.encode("utf-8")) + 1 for lexeme in lexemes)  # + its NUL terminator
        quoted = [_quote(lexeme) for lexeme in lexemes]
        if phrase.prefix:
            quoted[-1] += ":*"
        rendered.append(_balanced(quoted, "<->"))
    if not rendered or total > _TSQUERY_BUDGET_BYTES:
        return None
    return _balanced(rendered, "&")


def to_tsvector_literal(text: str) -> str:
    """A tsvector literal of ``text``'s terms with 1-based positions, within PostgreSQL's limits.

    See the module docstring for how positions past 16381, more than 256 occurrences of one
    term and more than 1 MiB of distinct terms are handled.
    """
    if isinstance(text, str) and len(text) <= MAX_EXACT_POSITION and text.isascii():
        fast = _short_ascii_tsvector(text)
        if fast is not None:
            return fast
    return _tsvector_literal(text)


def _tsvector_literal(text: str) -> str:
    """:func:`to_tsvector_literal` for any text."""
    positions: dict[str, list[int]] = {}
    for index, token in enumerate(tokenize(text) if isinstance(text, str) else (), start=1):
        position = index if index <= MAX_EXACT_POSITION else _OVERFLOW_POSITION
        found = positions.get(token)
        if found is None:
            positions[token] = [position]
        elif len(found) < MAX_POSITIONS_PER_LEXEME and found[-1] != position:
            found.append(position)
    entries: list[str] = []
    used = 0
    for token, where in positions.items():
        lexeme = pg_lexeme(token)
        size = len(lexeme) if lexeme.isascii() else len(lexeme.encode("utf-8"))
        # Lexeme bytes, padding to an even offset, a 2-byte count and 2 bytes per position.
        used += size + (size & 1) + 2 * (len(where) + 1)
        if used > TSVECTOR_BUDGET_BYTES:
            break
        entries.append(_quote(lexeme) + ":" + ",".join(map(str, where)))
    return " ".join(entries)


def _short_ascii_tsvector(text: str) -> str | None:
    """The common case of :func:`to_tsvector_literal`, short ASCII text, in a third of the time.

    Its terms are ``[0-9a-z]`` words, so none needs quoting; it has fewer terms than a lexeme may
    keep positions (nearly every message; the general path caps longer ones) and cannot reach
    the size budget. So every term is written with its position, in order, repeats included:
    PostgreSQL's tsvector input sorts the lexemes and merges a repeated one's positions, which
    gives the very value the general path's ``'term':1,3`` gives (``tests/unit/search/``
    compares them, and the search equivalence tests store both). Only a term longer than a
    lexeme may hold sends it to the general path (None).
    """
    terms = tokenize(text)
    if len(terms) > MAX_POSITIONS_PER_LEXEME:
        return None
    if terms and max(map(len, terms)) > MAX_LEXEME_BYTES:
        return None
    return " ".join(map(str.__add__, terms, _POSITION_SUFFIXES))


#: ``:1`` to ``:256``: a term's position suffix in :func:`_short_ascii_tsvector`.
_POSITION_SUFFIXES: Final = tuple(f":{position}" for position in range(1, MAX_POSITIONS_PER_LEXEME + 1))


def pg_lexeme(token: str) -> str:
    """The PostgreSQL lexeme standing for one term: the term itself unless it is too long."""
    if len(token) <= MAX_LEXEME_BYTES // 4:
        return token
    raw = token.encode("utf-8")
    if len(raw) <= MAX_LEXEME_BYTES:
        return token
    prefix = raw[:_HASHED_PREFIX_BYTES].decode("utf-8", "ignore")
    return prefix + "#" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def searchable_text(message: Mapping[str, Any]) -> str:
    """The indexed text of a message: every ``text`` part's string ``text``, joined with one space.

    Every append computes it: a plain loop, and the ``Mapping`` check (an ABC, slow) only for
    what is not a dict, make it three times faster than a generator over ``isinstance`` checks.
    """
    parts = message.get("parts") if type(message) is dict or isinstance(message, Mapping) else None
    if not isinstance(parts, list):
        return ""
    texts = []
    for part in parts:
        if (type(part) is dict or isinstance(part, Mapping)) and part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
    return " ".join(texts)


def _balanced(operands: list[str], operator: str) -> str:
    """Join operands with a binary operator as a balanced tree.

    PostgreSQL evaluates tsqueries recursively, and a flat chain of some 16,000 ``<->`` or
    100,000 ``&`` exceeds its stack; a balanced tree is only log2(n) deep. Both operators are
    associative here (``(a <-> b) <-> (c <-> d)`` is the four-word phrase), so the meaning is
    unchanged.
    """
    if len(operands) == 1:
        return operands[0]
    middle = len(operands) // 2
    return f"({_balanced(operands[:middle], operator)} {operator} {_balanced(operands[middle:], operator)})"


def _quote(lexeme: str) -> str:
    """Quote a lexeme for tsvector/tsquery input, where ``'`` doubles and ``\\`` escapes."""
    if "\\" in lexeme or "'" in lexeme:
        lexeme = lexeme.replace("\\", "\\\\").replace("'", "''")
    return "'" + lexeme + "'"
