"""Golden vectors of the token heuristic (reference §7) and the JavaScript helpers behind them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis.strategies import sampled_from, text
from threadloom.jscompat import JS_WHITESPACE_RUN, js_round, js_string, utf16_length, utf16_slice
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello world", 3),
        ("hello", 2),
        ("a b c", 4),
        ("You are helpful.", 4),
        ("x" * 400, 100),
        ("word " * 50, 65),
        ("  lead and trail  ", 5),
        ("😀😀😀😀", 2),
        ("User likes coffee.\nUser prefers dark roast.", 11),
        ("", 0),
        (None, 0),
    ],
)
def test_string_vectors(text: str | None, tokens: int) -> None:
    assert estimate_string_tokens(text) == tokens


def test_javascript_whitespace_rules() -> None:
    # U+FEFF splits words in JS but not in str.split(); \x1c does the opposite
    assert estimate_string_tokens("a\ufeffb\ufeffc") == 4
    assert estimate_string_tokens("a\x1cb\x1cc") == 2
    for separator in "\x1c\x1d\x1e\x1f":  # every ASCII character str.split() alone takes for a space
        assert estimate_string_tokens(f"one{separator}two{separator}three{separator}four") == 5
    assert estimate_string_tokens("one\x1btwo\x1bthree\x1bfour four") == 6  # ESC is no space anywhere


def test_message_vector_with_tool_part() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "parts": [{"type": "tool-x", "input": {"a": 1}, "output": {"b": "hello"}}],
    }
    assert estimate_message_tokens([message]) == 10


def test_part_fallbacks() -> None:
    messages = [
        {"id": "1", "role": "user", "parts": [{"type": "reasoning", "reasoning": "hello"}]},
        {"id": "2", "role": "user", "parts": [{"type": "tool-x", "input": None, "result": "hello"}]},
        {"id": "3", "role": "user", "parts": [{"type": "custom", "result": "hello"}]},
        {"id": "4", "role": "user", "parts": [{"type": "step-start"}]},
    ]
    assert [estimate_message_tokens([m]) for m in messages] == [6, 6, 6, 4]


def test_js_helpers() -> None:
    assert utf16_length("😀a") == 3
    assert utf16_slice("abc😀", 3) == "abc"
    assert [js_round(x) for x in (2.5, 0.5, 0.45, -2.5)] == [3, 1, 0, -2]
    assert js_string({"a": 1}) == "[object Object]"
    assert js_string([1, None, "x"]) == "1,,x"
    assert js_string(3.0) == "3"


def test_non_ascii_text_counts_javascript_words_on_the_fast_path_too() -> None:
    # U+0085 splits words in str.split() only, U+FEFF in JS only; box drawing and astral characters are words
    assert estimate_string_tokens("══ a\x85b\x85c\x85d\x85e") == 3  # 2 words: 12 units / 4
    assert estimate_string_tokens("══ a b c d e") == 8  # 6 words * 1.3
    assert estimate_string_tokens("══ a b c d e f\ufeffg") == estimate_string_tokens("══ a b c d e f g") == 11


@settings(max_examples=300, deadline=None)
@given(text(alphabet=sampled_from(list("ab═😀\x85\ufeff\x1c \t\n\u00a0\u2003\u3000")), max_size=60))
def test_the_word_count_is_javascripts_whatever_the_whitespace(sample: str) -> None:
    # The reference: max(UTF-16 units / 4, words split on JavaScript's \s * 1.3), rounded up
    words = sum(1 for piece in JS_WHITESPACE_RUN.split(sample) if piece)
    expected = math.ceil(max(utf16_length(sample) / 4, words * 1.3)) if sample else 0
    assert estimate_string_tokens(sample) == expected
