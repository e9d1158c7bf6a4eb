"""Where a compaction may cut: never between a tool call and its result, and never into the protected tail.

The head end is pushed forward past results of a call just before it, the tail
cut is pulled back to include the call of any result it would strand, and the
tail itself is sized by a token budget with a minimum message count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from threadloom.compaction.markers import is_assistant_with_tool_calls, is_tool_result_for, tool_call_ids
from threadloom.records import TokenCountInput
from threadloom.tokens import estimate_single_message_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from threadloom.records import Message

TokenCounter: TypeAlias = Callable[[TokenCountInput], float]
"""A token counter: receives one :class:`TokenCountInput`, returns a token count (the contract's single shape)."""


def align_boundary_forward(messages: Sequence[Mapping[str, Any]], idx: int) -> int:
    """Move a head boundary past the results of a tool call that sits just before it.

    Otherwise the call would stay in the protected head while its results were
    summarized away.
    """
    if idx <= 0 or idx >= len(messages):
        return idx
    previous = messages[idx - 1]
    if is_assistant_with_tool_calls(previous):
        call_ids = tool_call_ids(previous)
        while idx < len(messages) and is_tool_result_for(messages[idx], call_ids):
            idx += 1
    return idx


def align_boundary_backward(messages: Sequence[Mapping[str, Any]], idx: int) -> int:
    """Move a tail boundary back so results in the tail keep the call that produced them."""
    if idx <= 0 or idx >= len(messages):
        return idx
    while idx > 0:
        current = messages[idx]
        if is_assistant_with_tool_calls(current):
            break
        previous = messages[idx - 1]
        if is_assistant_with_tool_calls(previous) and is_tool_result_for(current, tool_call_ids(previous)):
            idx -= 1
            continue
        break
    return idx


def count_message_tokens(message: Message, token_counter: TokenCounter | None) -> float:
    """Tokens of one message: the counter on a one-message input when given, else the heuristic."""
    if token_counter is None:
        return estimate_single_message_tokens(message)
    return token_counter(TokenCountInput(messages=[message], system_prompt="", context_blocks=[]))


def find_tail_cut_by_tokens(
    messages: Sequence[Message],
    head_end: int,
    tail_token_budget: float = 20000,
    min_tail_messages: int = 2,
    token_counter: TokenCounter | None = None,
) -> int:
    """Index where the protected tail starts (everything from it on is kept verbatim).

    Walks back from the newest message while the tail fits ``tail_token_budget``;
    the newest message is always kept whatever its size, and at least
    ``min_tail_messages`` are kept when the head leaves room for them. The
    counter, when given, is called once per message with a one-message
    :class:`TokenCountInput` (empty system prompt, no blocks).
    """
    count = len(messages)
    accumulated: float = 0
    token_cut = count
    for i in range(count - 1, max(head_end, 0) - 1, -1):
        tokens = count_message_tokens(messages[i], token_counter)
        if accumulated + tokens > tail_token_budget and token_cut < count:
            break
        accumulated += tokens
        token_cut = i
    min_cut = count - min_tail_messages
    cut = min(token_cut, min_cut) if min_cut >= head_end else token_cut
    return align_boundary_backward(messages, cut)


__all__ = [
    "TokenCounter",
    "align_boundary_backward",
    "align_boundary_forward",
    "count_message_tokens",
    "find_tail_cut_by_tokens",
]
