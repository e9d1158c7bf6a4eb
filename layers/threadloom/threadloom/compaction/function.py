"""The reference compaction function: summarize the middle, keep a protected head and a token-budgeted tail.

Each run summarizes what lies between the first ``protect_head`` messages and
the tail, folding in the summary of an earlier overlay so the one effective
overlay keeps growing ("supersede, not stack").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from threadloom.compaction.boundaries import TokenCounter, align_boundary_forward, find_tail_cut_by_tokens
from threadloom.compaction.markers import is_compaction_message, text_of
from threadloom.compaction.summary_prompt import build_summary_prompt, compute_summary_budget
from threadloom.errors import CompactionError, ValidationError
from threadloom.jscompat import js_trim
from threadloom.records import CompactResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.records import Message


@dataclass(frozen=True, slots=True)
class CompactContext:
    """What a Session hands to a compaction function besides the history.

    ``token_counter`` is the session's counter (``compact_after(..., token_counter=...)``),
    passed through so one counter decides both *when* and *what* to compact.
    """

    token_counter: TokenCounter | None = None


class CompactFunction(Protocol):
    """What a Session accepts: the branch's history (overlays applied) and a context in, a range to overlay out.

    ``None`` means there is nothing to compact. The Session always passes both
    arguments, so any function taking two positional parameters qualifies.
    """

    def __call__(self, messages: list[Message], context: CompactContext | None, /) -> CompactResult | None: ...


class ReferenceCompactFunction(Protocol):
    """The function :func:`create_compact_function` returns; ``context`` may be left out when calling it directly."""

    def __call__(self, messages: list[Message], context: CompactContext | None = None) -> CompactResult | None: ...


def _non_negative(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def create_compact_function(
    summarize: Callable[[str], str],
    *,
    protect_head: int = 3,
    tail_token_budget: float = 20000,
    min_tail_messages: int = 2,
    token_counter: TokenCounter | None = None,
) -> ReferenceCompactFunction:
    """Build the reference compaction function around ``summarize(prompt) -> summary``.

    The returned function gives ``None`` (nothing to do) when the history is no
    longer than head plus minimum tail, when the whole remainder fits the tail
    budget, when only overlay messages lie in between, or when the summary is
    blank. ``token_counter`` (called once per message with a one-message
    :class:`~threadloom.records.TokenCountInput`) sizes the tail; without it the
    session counter from :class:`CompactContext` is used the same way, and
    without either the built-in heuristic. Exceptions from ``summarize`` and
    the counter propagate unchanged so the caller can report their message.
    """
    if not callable(summarize):
        raise ValidationError("summarize must be callable")
    _non_negative("protect_head", protect_head)
    _non_negative("min_tail_messages", min_tail_messages)
    if isinstance(tail_token_budget, bool) or not isinstance(tail_token_budget, (int, float)) or tail_token_budget < 0:
        raise ValidationError(f"tail_token_budget must be a non-negative number, got {tail_token_budget!r}")

    def compact(messages: list[Message], context: CompactContext | None = None) -> CompactResult | None:
        if len(messages) <= protect_head + min_tail_messages:
            return None
        counter = token_counter if token_counter is not None else (context.token_counter if context else None)

        compress_start = align_boundary_forward(messages, protect_head)
        compress_end = find_tail_cut_by_tokens(
            messages, compress_start, tail_token_budget, min_tail_messages, token_counter=counter
        )
        if compress_end <= compress_start:
            return None
        middle = [message for message in messages[compress_start:compress_end] if not is_compaction_message(message)]
        if not middle:
            return None

        earlier = next((message for message in messages if is_compaction_message(message)), None)
        previous_summary = text_of(earlier) if earlier is not None else None
        prompt = build_summary_prompt(middle, previous_summary, compute_summary_budget(middle))
        summary = summarize(prompt)
        if not isinstance(summary, str):
            raise CompactionError(f"The summarizer returned {type(summary).__name__}, expected str")
        if not js_trim(summary):
            return None
        return CompactResult(from_message_id=middle[0]["id"], to_message_id=middle[-1]["id"], summary=summary)

    return compact


__all__ = ["CompactContext", "CompactFunction", "ReferenceCompactFunction", "create_compact_function"]
