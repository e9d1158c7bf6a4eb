"""The reference compaction function: summarize the middle, keep a protected head and a token-budgeted tail.

Each run summarizes what lies between the first ``protect_head`` messages and
the tail, folding in the summary of an earlier overlay so the one effective
overlay keeps growing ("supersede, not stack").

A long middle is summarized in chunks of at most ``chunk_tokens``, each chunk's
summary fed into the next as the previous summary (the reference's iterative
update), so every summarizer call has a bounded prompt and the total work is
linear in what is summarized. A run stops starting new chunks once its time or
chunk budget is spent and stores what it covered; the next run continues from
there, so one run always fits the function's timeout, whatever the summarizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from threadloom.compaction.boundaries import (
    TokenCounter,
    align_boundary_backward,
    align_boundary_forward,
    find_tail_cut_by_tokens,
)
from threadloom.compaction.markers import is_compaction_message, text_of
from threadloom.compaction.summary_prompt import build_summary_prompt, compute_summary_budget
from threadloom.errors import CompactionError, ValidationError
from threadloom.jscompat import js_trim
from threadloom.records import CompactResult
from threadloom.tokens import estimate_single_message_tokens

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from threadloom.records import Message


#: Conversation tokens per summarizer call: a prompt a model answers well inside a minute.
DEFAULT_CHUNK_TOKENS: Final = 16_000
#: Seconds after which a run starts no further chunk (the compaction function's timeout is 60 s).
DEFAULT_RUN_BUDGET_S: Final = 20.0


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
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    max_chunks_per_run: int | None = None,
    run_budget_seconds: float | None = DEFAULT_RUN_BUDGET_S,
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
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise ValidationError(f"chunk_tokens must be a positive integer, got {chunk_tokens!r}")
    if max_chunks_per_run is not None and (not isinstance(max_chunks_per_run, int) or max_chunks_per_run < 1):
        raise ValidationError(f"max_chunks_per_run must be a positive integer, got {max_chunks_per_run!r}")

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
        if not any(not is_compaction_message(message) for message in messages[compress_start:compress_end]):
            return None

        earlier = next((message for message in messages if is_compaction_message(message)), None)
        summary = text_of(earlier) if earlier is not None else None
        started = time.monotonic()
        first_id: str | None = None
        last_id: str | None = None
        for index, chunk in enumerate(_chunks(messages, compress_start, compress_end, chunk_tokens)):
            if index and (
                (max_chunks_per_run is not None and index >= max_chunks_per_run)
                or (run_budget_seconds is not None and time.monotonic() - started >= run_budget_seconds)
            ):
                break
            prompt = build_summary_prompt(chunk, summary, compute_summary_budget(chunk))
            written = summarize(prompt)
            if not isinstance(written, str):
                raise CompactionError(f"The summarizer returned {type(written).__name__}, expected str")
            if not js_trim(written):
                break  # keep what the earlier chunks produced; a blank first chunk means nothing to store
            summary = written
            first_id = first_id or chunk[0]["id"]
            last_id = chunk[-1]["id"]
        if first_id is None or last_id is None or summary is None:
            return None
        return CompactResult(from_message_id=first_id, to_message_id=last_id, summary=summary)

    return compact


def _chunks(messages: list[Message], start: int, end: int, chunk_tokens: int) -> Iterator[list[Message]]:
    """Consecutive slices of ``messages[start:end]`` of at most ``chunk_tokens`` (a bigger message is a chunk alone).

    Sized with the built-in heuristic (it bounds a prompt; a model tokenizer would be a
    call per message). A cut never falls between a tool call and its result, so a run
    that stops after any chunk leaves a valid boundary. Overlay messages are left out.
    """
    position = start
    while position < end:
        total: float = 0
        cut = position
        while cut < end:
            tokens = estimate_single_message_tokens(messages[cut])
            if cut > position and total + tokens > chunk_tokens:
                break
            total += tokens
            cut += 1
        if cut < end:
            aligned = align_boundary_backward(messages, cut)
            cut = aligned if aligned > position else align_boundary_forward(messages, cut)
        chunk = [message for message in messages[position:cut] if not is_compaction_message(message)]
        if chunk:
            yield chunk
        position = cut


__all__ = ["CompactContext", "CompactFunction", "ReferenceCompactFunction", "create_compact_function"]
