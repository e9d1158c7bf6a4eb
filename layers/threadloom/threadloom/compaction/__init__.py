"""Compaction: summarize the middle of a long history into an overlay that is applied at read time.

The helpers reproduce the reference's ``compaction-helpers`` exactly (boundaries,
tool-pair repair, summary budget and prompt); :func:`apply_compactions` is the
read-time overlay used by every storage backend. Summarizers live in
:mod:`threadloom.compaction.summarizers`.
"""

from __future__ import annotations

from threadloom.compaction.boundaries import (
    TokenCounter,
    align_boundary_backward,
    align_boundary_forward,
    find_tail_cut_by_tokens,
)
from threadloom.compaction.function import (
    CompactContext,
    CompactFunction,
    ReferenceCompactFunction,
    create_compact_function,
)
from threadloom.compaction.markers import COMPACTION_PREFIX, STUB_RESULT_TEXT, is_compaction_message
from threadloom.compaction.overlays import apply_compactions
from threadloom.compaction.summarizers.base import Summarizer
from threadloom.compaction.summary_prompt import build_summary_prompt, compute_summary_budget
from threadloom.compaction.tool_pairs import sanitize_tool_pairs

__all__ = [
    "COMPACTION_PREFIX",
    "STUB_RESULT_TEXT",
    "CompactContext",
    "CompactFunction",
    "ReferenceCompactFunction",
    "Summarizer",
    "TokenCounter",
    "align_boundary_backward",
    "align_boundary_forward",
    "apply_compactions",
    "build_summary_prompt",
    "compute_summary_budget",
    "create_compact_function",
    "find_tail_cut_by_tokens",
    "is_compaction_message",
    "sanitize_tool_pairs",
]
