"""The Python tokenizer must yield exactly the terms SQLite FTS5 ``porter unicode61`` indexes."""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadloom.search import _unicode61_data as data
from threadloom.search import split_words, stem, tokenize

if TYPE_CHECKING:
    from conftest import Fts5Oracle

CORPUS: dict[str, str] = {
    "plain": "The quick brown foxes jumped over the lazy dogs",
    "inflections": "running runs ran runner caresses ponies ties caress cats feed agreed plastered bled motoring sing",
    "step1b": "conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky",
    "step2": (
        "relational conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli "
        "analogousli vietnamization predication operator feudalism decisiveness hopefulness callousness "
        "formaliti sensitiviti sensibiliti"
    ),
    "step3": "triplicate formative formalize electriciti electrical hopeful goodness",
    "step4": (
        "revival allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
        "dependent adoption homologou communism activate angulariti homologous effective bowdlerize"
    ),
    "step5": "probate rate cease controll roll generalizations oscillators",
    "short": "a an as is be by ox yy ies sses eed ing ed s es",
    "y": "yellow say yay syzygy yyyy ayyy spying dying toying",
    "punctuation": (
        "Hello, world! (foo) [bar] {baz} <qux> a.b.c a_b a/b a\\b a|b a@b.com #tag $100 50% x^2 a*b a+b=c "
        "~tilde `code` \"quoted\" 'single' semi;colon"
    ),
    "hyphens": (
        "e-mail state-of-the-art well\u2014known en\u2013dash co\u2011operate soft\u00adhyphen -leading trailing-"
    ),
    "apostrophes": "don't can't it's O'Reilly rock\u2019n\u2019roll students' \u2018quoted\u2019",
    "digits": (
        "3.14 1,000,000 2024-01-15 v2.0.1 0x1F 42nd \u0663\u0664\u0665 \u0967\u0968 \u2460\u2461 \u00bd "
        "\u00b2\u00b3 \u216b"
    ),
    "accents": (
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u00d8resund Dvo\u0159\u00e1k \u0141\u00f3d\u017a "
        "cr\u00e8me br\u00fbl\u00e9e \u01d5\u01d8 \u01d6 \u0218\u021a \u0219\u021b \u1e9e \u00df "
        "CAF\u00c9S na\u00efvet\u00e9s"
    ),
    "combining": "e\u0301 cafe\u0301 \u0301start a\u0300\u0301\u0302 x\u036f n\u0303o \u0300 \u0300\u0301 a\u20dd",
    "cjk": (
        "\u6771\u4eac\u90fd\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002 \u4e2d\u6587\u5206\u8bcd "
        "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \uff76\uff80\uff76\uff85 \uff26\uff35\uff2c\uff2c"
    ),
    "emoji": (
        "I \u2764\ufe0f Python \U0001f40d\U0001f525 \U0001f44d\U0001f3fd "
        "\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f916 robots \U0001f1eb\U0001f1f7 #\ufe0f\u20e3 "
        "\U0001f600\U0001f916ing"
    ),
    "mixed_case": "CamelCase camelCase HTTPServer iPhone XMLHttpRequest ALLCAPS MiXeD",
    "greek_cyrillic": (
        "\u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2 \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03c2 \u03c3 "
        "\u03a3 \u038a \u041f\u0440\u0438\u0432\u0435\u0442, \u041c\u0418\u0420! \u0401\u043b\u043a\u0430 "
        "\u0451\u0436\u0438\u043a \u0423\u043a\u0440\u0430\u0457\u043d\u0430 \u0490 \u0491"
    ),
    "ligatures": (
        "\ufb01nance \ufb02ow \ufb00 \ufb03 \u0152uvre \u0153uvre \u00c6sir \u00e6 \u0132ssel \u0133 "
        "\u01c5 \u01c6 \u01c8"
    ),
    "scripts": (
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 "
        "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd "
        "\u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0130stanbul \u0131iI\u0130 "
        "\U00010400\U00010428 \U0001e900\U0001e922 \U0001d400\U0001d401 \ue000\U000f0000 \u13a0\uab70"
    ),
    "whitespace_controls": (
        "tab\tnew\nline\r\nnbsp\u00a0thin\u2009zero\u200bwidth\u200djoiner nul\x00byte \ufeffbom \x1funit sep"
    ),
    "specials": "\ufffe\uffff\ufffd x\ufffey \U0010ffff \U000e0041 a\U000e0041b",
    "fts_operators": 'OR AND NOT NEAR(a b) a* ^start col:val -neg +plus "phrase" (group)',
    "empty": "",
    "blank": " \t\n ",
    "punctuation_only": "!!! ??? ... --- *** ^^^",
    "porter_non_ascii": "a\u0861ing o\u09e7\u09e7ed \u0430\u0431\u0432ing \u00e9\u00e9ness \u00fcberation",
    "long_ascii": "a" * 100 + " " + "supercalifragilisticexpialidocious" * 3 + " " + "x" * 40000 + " tail",
    "long_multibyte": "\u0436" * 20000 + " ab" + "\u6771" * 11000 + " a" + "\u0436" * 16384 + " end",
    "porter_boundary": "a" * 61 + "ing " + "a" * 62 + "ing " + "\u0436" * 30 + "sing " + "\u0436" * 31 + "sing",
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_curated_corpus_matches_sqlite(name: str, fts5: Fts5Oracle) -> None:
    text = CORPUS[name]
    assert tokenize(text) == fts5.terms(text)


def test_known_stems() -> None:
    """A few stems spelled out, so a reader sees what the dialect does without running SQLite."""
    assert tokenize("Running RUNS runner") == ["run", "run", "runner"]
    assert tokenize("generalizations caresses ponies agreed") == ["gener", "caress", "poni", "agre"]
    assert tokenize("Café CAFÉS naïve") == ["cafe", "cafe", "naiv"]
    assert tokenize("e-mail don't 3.14") == ["e", "mail", "don", "t", "3", "14"]
    assert tokenize("ﬁsh Straße ΣΟΦΟΣ") == ["ﬁsh", "straß", "σοφοσ"]
    assert tokenize("👍 🤖") == ["🤖"]  # SQLite's Unicode 6.1 tables: U+1F916 was unassigned, so a letter


def test_invalid_utf8_from_sqlite_is_backslash_escaped(fts5: Fts5Oracle) -> None:
    # U+0861 is e0 a1 a1: porter's double-consonant rule drops the final byte after removing "ing".
    assert tokenize("a\u0861ing") == ["a\\xe0\\xa1"] == fts5.terms("a\u0861ing")
    # FTS5 truncates terms to 32768 bytes, here inside a three-byte character.
    text = "\u6771" * 11000
    assert tokenize(text) == fts5.terms(text)
    assert tokenize(text)[0].endswith("\u6771\\xe6\\x9d")


def test_lone_surrogates_are_separators() -> None:
    assert tokenize("ab\ud800cd\udfffef") == ["ab", "cd", "ef"]
    assert split_words("\ud83d") == []


def test_tables_were_probed_from_this_sqlite_major() -> None:
    """The tables are SQLite's; a different SQLite may differ (the exhaustive test would tell)."""
    assert data.SQLITE_VERSION.split(".")[0] == sqlite3.sqlite_version.split(".")[0]


def test_every_code_point_matches_unicode61() -> None:
    """Classification and folding of all 1,112,064 scalar values, against bare ``unicode61`` (~3 s).

    Each code point ``c`` appears as ``<c>q<c>q``, which tells all three classes apart: a
    separator gives ``q, q``, a diacritic that cannot start a token gives ``qq``, a token
    character gives ``<fold(c)>q<fold(c)>q``. The porter step is covered by the other tests.
    """
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    block = 4096
    texts = [
        " ".join(f"{ch}q{ch}q" for ch in map(chr, range(start, start + block)) if not "\ud800" <= ch <= "\udfff")
        for start in range(0, 0x110000, block)
    ]
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(texts, start=1)))
    expected: list[list[str]] = [[] for _ in texts]
    for term, doc in db.execute('SELECT term, doc FROM v ORDER BY doc, "offset"'):
        expected[doc - 1].append(term)
    db.close()
    mismatched = [i for i, text in enumerate(texts) if split_words(text) != expected[i]]
    assert mismatched == [], f"first mismatching block starts at U+{mismatched[0] * block:04X}"


# --- property tests -----------------------------------------------------------------------------

_WORDS = st.sampled_from(
    [
        "run", "running", "caresses", "ponies", "agreed", "hopping", "generalization", "relational",
        "formality", "effective", "adjustable", "sky", "happy", "controll", "roll", "yes", "ies", "eed",
        "ing", "ed", "s", "y", "ational", "iveness", "alize", "ement", "ousli", "bli", "logi", "at", "bl", "iz",
    ]
)  # fmt: skip
_INTERESTING = st.sampled_from(
    list(" \t\n-'\".,;:!?()*^+_/\\@#\u00a0\u2019\u2014\u00ad\u200b\u200d\ufe0f\ufffe\uffff\x00")
    + list("\u0300\u0301\u0308\u0327\u0331\u036f\u20dd")  # diacritics (some only continue a token)
    + list("\u00e9\u00c9\u00df\u0130\u0131\u03a3\u03c2\u0416\u01c5\ufb01\u1e9e\u0861\u09e7\u6771\U00010400")
    + ["\U0001f916", "\U0001f600", "\U000f0000", "\ue000"]
)
_ANY_CHAR = st.characters(blacklist_categories=("Cs",))
_FRAGMENT = st.one_of(
    _WORDS, _WORDS.map(str.upper), _WORDS.map(str.title), _INTERESTING, _ANY_CHAR, st.text(_ANY_CHAR, max_size=4)
)
_TEXT = st.lists(_FRAGMENT, max_size=40).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(_TEXT, min_size=1, max_size=8))
def test_property_tokenize_matches_sqlite(texts: list[str], fts5: Fts5Oracle) -> None:
    assert [tokenize(text) for text in texts] == fts5.terms_many(texts)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT)
def test_property_words_retokenize_to_themselves(text: str) -> None:
    """``to_fts5_match`` hands FTS5 the folded words; FTS5 must re-tokenize them unchanged."""
    words = split_words(text)
    assert split_words(" ".join(words)) == words
    assert tokenize(text) == [stem(word) for word in words]


@settings(max_examples=200, deadline=None)
@given(length=st.integers(min_value=60, max_value=70), char=st.sampled_from(["a", "\u00e9", "\u0436", "\u6771"]))
def test_property_porter_length_boundary(length: int, char: str, fts5: Fts5Oracle) -> None:
    text = "x" + char * length + "ing"
    assert tokenize(text) == fts5.terms(text)


# --- speed --------------------------------------------------------------------------------------

TYPICAL_MESSAGE = (
    "Sure! I've updated the deployment script so it retries failed uploads three times, then logs the "
    "error and continues with the remaining files. Let me know if you'd like tests for the retry logic."
)[:200]


def test_tokenizer_speed_for_a_typical_message() -> None:
    """Runs on every append in the Postgres backend; a generous bound catches pathological slowdowns."""
    tokenize(TYPICAL_MESSAGE)
    rounds = 2000
    started = time.perf_counter()
    for _ in range(rounds):
        tokenize(TYPICAL_MESSAGE)
    per_call_us = (time.perf_counter() - started) / rounds * 1e6
    print(f"tokenize: {per_call_us:.1f} us per 200-character message")
    assert per_call_us < 500
