"""The reference's token heuristic: cheap, deterministic, and the same in every process.

It deliberately is not a real tokenizer; it must agree with the reference exactly
(``max(chars / 4, words * 1.3)`` plus 4 tokens of overhead per message).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from threadloom.jscompat import JS_WHITESPACE_RUN, compact_json, js_round, js_string, utf16_length

CHARS_PER_TOKEN = 4
WORDS_TOKEN_MULTIPLIER = 1.3
TOKENS_PER_MESSAGE = 4


def estimate_string_tokens(text: str | None) -> int:
    """Estimate the tokens of one string (0 for empty or ``None``)."""
    if not text:
        return 0
    chars = (len(text) if text.isascii() else utf16_length(text)) / CHARS_PER_TOKEN
    # str.split() splits on JavaScript's \s plus U+001C..U+001F and U+0085, and not on U+FEFF (which
    # \s matches). Without those six it counts the same words, several times faster than the regex:
    # every append, and the first estimate of a frozen prompt (box-drawing rules, so not ASCII), runs this.
    if (
        "\x1c" not in text
        and "\x1d" not in text
        and "\x1e" not in text
        and "\x1f" not in text
        and (text.isascii() or ("\x85" not in text and "\ufeff" not in text))
    ):
        words = len(text.split())
    else:
        words = sum(1 for piece in JS_WHITESPACE_RUN.split(text) if piece)
    return math.ceil(max(chars, words * WORDS_TOKEN_MULTIPLIER))


def _estimate_unknown(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return estimate_string_tokens(value)
    try:
        return estimate_string_tokens(compact_json(value))
    except (TypeError, ValueError):
        return estimate_string_tokens(js_string(value))


def is_tool_part_type(part_type: Any) -> bool:
    """Tool parts are ``tool-*`` (static tools) or ``dynamic-tool``."""
    return isinstance(part_type, str) and (part_type.startswith("tool-") or part_type == "dynamic-tool")


def estimate_part_tokens(part: Mapping[str, Any]) -> int:
    """Tokens contributed by one message part, following the reference's fallbacks."""
    part_type = part.get("type")
    if part_type in ("text", "reasoning"):
        text = part.get("text")
        return _estimate_unknown(part.get("reasoning") if text is None else text)
    if is_tool_part_type(part_type):
        output = part.get("output")
        return _estimate_unknown(part.get("input")) + _estimate_unknown(
            part.get("result") if output is None else output
        )
    if "text" in part:
        return _estimate_unknown(part["text"])
    if "result" in part:
        return _estimate_unknown(part["result"])
    return 0


def estimate_single_message_tokens(message: Mapping[str, Any]) -> int:
    """Tokens of one message including the per-message overhead."""
    parts = message.get("parts")
    total = TOKENS_PER_MESSAGE
    if isinstance(parts, list):
        for part in parts:
            if type(part) is dict or isinstance(part, Mapping):  # the ABC check only for other mappings
                total += estimate_part_tokens(part)
    return total


def estimate_message_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Sum of :func:`estimate_single_message_tokens` over ``messages``."""
    return sum(estimate_single_message_tokens(message) for message in messages)


__all__ = [
    "CHARS_PER_TOKEN",
    "TOKENS_PER_MESSAGE",
    "WORDS_TOKEN_MULTIPLIER",
    "estimate_message_tokens",
    "estimate_part_tokens",
    "estimate_single_message_tokens",
    "estimate_string_tokens",
    "is_tool_part_type",
]


def usage_percent(tokens: int, max_tokens: int) -> int:
    """Share of the budget in use, rounded half up like ``Math.round`` (0.5% shows as 1%)."""
    return js_round(tokens / max_tokens * 100)
