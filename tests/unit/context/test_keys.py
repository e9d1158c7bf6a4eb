"""Keyed-entry key generation: the reference's golden vectors, exactly."""

from __future__ import annotations

import pytest
from threadloom.entry_keys import context_entry_key, slugify, stable_hash

DEPLOY = "The deployment process for production requires approval from "


@pytest.mark.parametrize(
    ("title", "content", "expected"),
    [
        (None, "no key", "no-key-1nprufp"),
        (None, "Just content, no desc", "just-content-no-desc-cgko96"),
        (None, "用户喜欢咖啡", "entry-2mzjev"),
        ("用户", "anything", "entry-1in002o"),
        ("Pirate style", "Arr, matey", "pirate-style"),
        ("Greeting instructions", "Say hi", "greeting-instructions"),
        ("   ", "hello world", "hello-world-1n91413"),
        (None, "😀 emoji", "emoji-vhhzna"),
        (None, "", "entry-ztntfp"),
        (None, DEPLOY + "security team", "the-deployment-process-for-production-requires-approval-from-qz646"),
        (None, DEPLOY + "management", "the-deployment-process-for-production-requires-approval-from-1a3vzxs"),
        ("A" * 70, "ignored", "a" * 60),
    ],
)
def test_context_entry_key_golden_vectors(title: str | None, content: str, expected: str) -> None:
    # Given a title (or none) and a content
    # When the key is generated
    key = context_entry_key(title, content)
    # Then it is exactly the reference's key
    assert key == expected


@pytest.mark.parametrize(("text", "expected"), [("", "ztntfp"), ("a", "1r9wi7g"), ("hello", "m3bicr")])
def test_stable_hash_golden_vectors(text: str, expected: str) -> None:
    # Given a text / When hashed / Then the base-36 FNV-1a matches the reference
    assert stable_hash(text) == expected


def test_stable_hash_counts_astral_characters_as_two_code_units() -> None:
    # Given the FNV-1a of the two surrogate code units of U+1F600, computed by hand
    value = 0x811C9DC5
    for unit in (0xD83D, 0xDE00):
        value = ((value ^ unit) * 0x01000193) & 0xFFFFFFFF
    # When the emoji is hashed
    result = stable_hash("😀")
    # Then the hash is over the surrogate pair, rendered in base 36
    assert int(result, 36) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "hello-world"),
        ("--already--slugged--", "already-slugged"),
        ("Café au lait", "caf-au-lait"),
        ("用户", ""),
        ("x" * 59 + "YZ", "x" * 59 + "y"),
    ],
)
def test_slugify(text: str, expected: str) -> None:
    # Given text with punctuation, non-ASCII letters or more than 60 code units
    # When slugified
    # Then runs of other characters become one dash, ends are trimmed, and only 60 units count
    assert slugify(text) == expected


def test_slug_limit_is_counted_in_utf16_code_units() -> None:
    # Given 30 emoji (60 UTF-16 code units) followed by ASCII text
    text = "😀" * 30 + "tail"
    # When slugified
    slug = slugify(text)
    # Then the ASCII tail lies beyond the 60-unit cut and is dropped
    assert slug == ""


def test_title_wins_over_content_and_has_no_hash() -> None:
    # Given two different contents written with the same title
    first = context_entry_key("Tax rules", "version one")
    second = context_entry_key("Tax rules", "version two")
    # Then both map to the same key, so the second write updates the first entry
    assert first == second == "tax-rules"


def test_title_of_only_js_whitespace_counts_as_missing() -> None:
    # Given a title made of an ideographic space and a no-break space (JS trim removes both)
    key = context_entry_key("\u3000\u00a0", "hello world")
    # Then the key comes from the content, with its hash
    assert key == "hello-world-1n91413"
