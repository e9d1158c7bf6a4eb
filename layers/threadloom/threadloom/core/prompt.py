"""Rendering context blocks into the system prompt text.

The output is compared byte for byte with the reference (prefix caches and golden
tests depend on it), so every separator, tag and rounding rule here is deliberate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.tokens import usage_percent

if TYPE_CHECKING:
    from collections.abc import Iterable

    from threadloom.records import ContextBlock

SEPARATOR = "\u2550" * 46
"""The rule drawn above and below every block header (46 box-drawing double lines)."""

BLOCK_JOINER = "\n\n"


def _kind_tag(block: ContextBlock) -> str:
    # Exactly one tag; searchable wins over loadable, which wins over readonly.
    if block.is_searchable:
        return " [searchable]"
    if block.is_skill:
        return " [loadable]"
    if not block.writable:
        return " [readonly]"
    return " [writable]"


def render_header(block: ContextBlock) -> str:
    """The header line: label, optional description and budget, then the kind tag."""
    header = block.label.upper()
    if block.description:
        header += f" ({block.description})"
    if block.max_tokens:  # a budget of 0 is enforced on writes but never shown
        pct = usage_percent(block.tokens, block.max_tokens)
        header += f" [{pct}% \u2014 {block.tokens}/{block.max_tokens} tokens]"
    return header + _kind_tag(block)


def is_rendered(block: ContextBlock) -> bool:
    """Empty read-only blocks carry no information and are left out.

    Blocks the model can act on (write, load, search) are kept even when empty,
    so the model knows they exist.
    """
    return bool(block.content) or block.writable or block.is_searchable or block.is_skill


def render_block(block: ContextBlock) -> str:
    """One block: rule, header, rule, then the content verbatim."""
    return f"{SEPARATOR}\n{render_header(block)}\n{SEPARATOR}\n{block.content}"


def render_prompt(blocks: Iterable[ContextBlock]) -> str:
    """The system prompt for ``blocks`` in the given order (``""`` when nothing renders)."""
    return BLOCK_JOINER.join(render_block(block) for block in blocks if is_rendered(block))


__all__ = [
    "BLOCK_JOINER",
    "SEPARATOR",
    "is_rendered",
    "render_block",
    "render_header",
    "render_prompt",
    "usage_percent",
]
