"""Golden vectors of the token heuristic (reference §7) and the JavaScript helpers behind them."""

from __future__ import annotations

import pytest
from threadloom.jscompat import js_round, js_string, utf16_length, utf16_slice
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
