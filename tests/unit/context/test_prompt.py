"""System-prompt rendering: the §4.6 golden vector and every header rule."""

from __future__ import annotations

import pytest
from threadloom.core.prompt import SEPARATOR, render_header, render_prompt
from threadloom.records import ContextBlock

SEP = "═" * 46


def block(
    label: str,
    content: str = "",
    *,
    description: str | None = None,
    tokens: int = 0,
    max_tokens: int | None = None,
    writable: bool = False,
    is_skill: bool = False,
    is_searchable: bool = False,
) -> ContextBlock:
    return ContextBlock(label, description, content, tokens, max_tokens, writable, is_skill, is_searchable)


GOLDEN_BLOCKS = [
    block("soul", "You are helpful.", description="Identity", tokens=4),
    block("empty"),
    block("memory", "User likes coffee.", description="Learned facts", tokens=5, max_tokens=1100, writable=True),
    block("notes", max_tokens=500, writable=True),
    block("skills", "- pirate: Talk like a pirate\n- tax", tokens=8, is_skill=True),
    block("knowledge", description="Searchable knowledge base", is_searchable=True),
]

GOLDEN_PROMPT = (
    f"{SEP}\nSOUL (Identity) [readonly]\n{SEP}\nYou are helpful."
    "\n\n"
    f"{SEP}\nMEMORY (Learned facts) [0% \u2014 5/1100 tokens] [writable]\n{SEP}\nUser likes coffee."
    "\n\n"
    f"{SEP}\nNOTES [0% \u2014 0/500 tokens] [writable]\n{SEP}\n"
    "\n\n"
    f"{SEP}\nSKILLS [loadable]\n{SEP}\n- pirate: Talk like a pirate\n- tax"
    "\n\n"
    f"{SEP}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{SEP}\n"
)


def test_golden_vector() -> None:
    # Given the reference's example blocks (one empty read-only block among them)
    # When rendered
    prompt = render_prompt(GOLDEN_BLOCKS)
    # Then the text is byte for byte the reference's
    assert prompt == GOLDEN_PROMPT
    assert prompt.endswith(f"[searchable]\n{SEP}\n")


def test_separator_is_46_double_lines() -> None:
    # Then the separator is U+2550 repeated 46 times
    assert SEPARATOR == "\u2550" * 46
    assert len(SEPARATOR) == 46


def test_no_blocks_render_empty_string() -> None:
    # Given no blocks, or only empty read-only ones / Then nothing is rendered
    assert render_prompt([]) == ""
    assert render_prompt([block("a"), block("b")]) == ""


@pytest.mark.parametrize(
    ("empty_block", "tag"),
    [
        (block("w", writable=True), "W [writable]"),
        (block("s", is_skill=True), "S [loadable]"),
        (block("q", is_searchable=True), "Q [searchable]"),
    ],
)
def test_empty_actionable_blocks_are_rendered(empty_block: ContextBlock, tag: str) -> None:
    # Given an empty block the model can act on
    # When rendered
    prompt = render_prompt([empty_block])
    # Then it appears with an empty body
    assert prompt == f"{SEP}\n{tag}\n{SEP}\n"


@pytest.mark.parametrize(
    ("tokens", "max_tokens", "expected"),
    [
        (1, 200, "[1% \u2014 1/200 tokens]"),  # 0.5 rounds up
        (5, 200, "[3% \u2014 5/200 tokens]"),  # 2.5 rounds up (banker's rounding would give 2)
        (495, 1100, "[45% \u2014 495/1100 tokens]"),
        (1200, 1000, "[120% \u2014 1200/1000 tokens]"),  # loaded content may exceed the budget
    ],
)
def test_usage_percentage_rounds_half_up(tokens: int, max_tokens: int, expected: str) -> None:
    # Given a block with a budget
    header = render_header(block("m", "x", tokens=tokens, max_tokens=max_tokens, writable=True))
    # Then the usage tag is rounded like Math.round
    assert header == f"M {expected} [writable]"


def test_zero_budget_shows_no_usage_tag() -> None:
    # Given maxTokens 0 (falsy in JS)
    header = render_header(block("scratch", max_tokens=0, writable=True))
    # Then no usage tag is rendered
    assert header == "SCRATCH [writable]"


def test_empty_description_is_omitted() -> None:
    # Given an empty description / Then no parentheses are rendered
    assert render_header(block("soul", "x", description="")) == "SOUL [readonly]"


@pytest.mark.parametrize(
    ("flags", "tag"),
    [
        ({"is_searchable": True, "is_skill": True, "writable": True}, "[searchable]"),
        ({"is_skill": True, "writable": True}, "[loadable]"),
        ({"writable": False}, "[readonly]"),
        ({"writable": True}, "[writable]"),
    ],
)
def test_exactly_one_kind_tag_in_priority_order(flags: dict[str, bool], tag: str) -> None:
    # Given a block with several capabilities
    header = render_header(block("b", "x", **flags))
    # Then only the highest-priority tag appears
    assert header == f"B {tag}"


def test_label_is_upper_cased() -> None:
    # Given a lowercase label with punctuation / Then the header upper-cases it
    assert render_header(block("user-prefs_v2", "x")) == "USER-PREFS_V2 [readonly]"
