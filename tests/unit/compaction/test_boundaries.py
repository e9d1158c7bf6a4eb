"""Boundary helpers: head/tail alignment around tool pairs and the token-budgeted tail cut (§6.4, §6.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.compaction import align_boundary_backward, align_boundary_forward, find_tail_cut_by_tokens
from threadloom.tokens import estimate_message_tokens

if TYPE_CHECKING:
    from threadloom.records import Message, TokenCountInput


def text(mid: str, role: str, body: str = "hi") -> Message:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def call(mid: str, *call_ids: str) -> Message:
    parts: list[dict[str, Any]] = [
        {"type": "dynamic-tool", "toolName": "read", "toolCallId": cid, "state": "input-available", "input": {}}
        for cid in call_ids
    ]
    return {"id": mid, "role": "assistant", "parts": parts}


def result(mid: str, call_id: str, role: str = "user") -> Message:
    part = {"type": "tool-read", "toolCallId": call_id, "state": "output-available", "output": "ok"}
    return {"id": mid, "role": role, "parts": [part]}


def worked_example() -> list[Message]:
    return [
        text(f"m{i}", "user" if i % 2 == 0 else "assistant", f"message {i} with enough content to have tokens")
        for i in range(20)
    ]


def test_worked_example_per_message_estimates() -> None:
    # Given the §6.4 worked-example history
    messages = worked_example()
    # When each message is estimated alone
    estimates = [estimate_message_tokens([m]) for m in messages]
    # Then messages 0-9 cost 15 tokens and 10-19 cost 16
    assert estimates == [15] * 10 + [16] * 10


def test_worked_example_tail_cut_is_min_tail() -> None:
    # Given the worked example, a head ending at 1, a 10-token tail budget and two tail messages minimum
    messages = worked_example()
    # When the tail cut is computed
    cut = find_tail_cut_by_tokens(messages, 1, 10, 2)
    # Then the token cut (19) is widened to the two-message minimum (18)
    assert cut == 18


def test_tail_cut_always_keeps_the_last_message_even_when_it_exceeds_the_budget() -> None:
    # Given a history whose last message alone is far over budget and no minimum tail
    messages = [text("a", "user"), text("b", "assistant"), text("c", "user", "word " * 200)]
    # When the tail cut is computed with a 1-token budget
    cut = find_tail_cut_by_tokens(messages, 0, 1, 0)
    # Then the last message is still protected
    assert cut == 2


def test_tail_cut_ignores_min_tail_when_it_would_reach_into_the_head() -> None:
    # Given 4 messages, a head ending at 3 and a demand for 2 tail messages
    messages = [text(f"m{i}", "user") for i in range(4)]
    # When the tail cut is computed with a small budget
    cut = find_tail_cut_by_tokens(messages, 3, 1, 2)
    # Then min_cut (2) lies inside the head and the token cut (3) stands
    assert cut == 3


def test_tail_cut_whole_history_fits_budget() -> None:
    # Given a short history and the default budget
    messages = [text(f"m{i}", "user") for i in range(5)]
    # When the tail cut is computed from head end 2
    cut = find_tail_cut_by_tokens(messages, 2)
    # Then everything from the head end is tail
    assert cut == 2


def test_tail_cut_uses_the_counter_once_per_message() -> None:
    # Given a counter that records its inputs and charges 10 per message
    seen: list[TokenCountInput] = []

    def counter(data: TokenCountInput) -> float:
        seen.append(data)
        return 10

    messages = [text(f"m{i}", "user") for i in range(6)]
    # When the tail cut uses a 25-token budget and no minimum tail
    cut = find_tail_cut_by_tokens(messages, 0, 25, 0, token_counter=counter)
    # Then two messages fit, the third stops the walk, and each call saw one message with no prompt or blocks
    assert cut == 4
    assert [d.messages[0]["id"] for d in seen] == ["m5", "m4", "m3"]
    assert all(len(d.messages) == 1 and d.system_prompt == "" and d.context_blocks == [] for d in seen)


def test_align_forward_moves_past_results_of_the_call_before_the_boundary() -> None:
    # Given a call at index 1 followed by two result messages
    messages = [text("u", "user"), call("a", "c1", "c2"), result("r1", "c1"), result("r2", "c2"), text("u2", "user")]
    # When a head boundary at 2 is aligned forward
    # Then it moves past both results
    assert align_boundary_forward(messages, 2) == 4


def test_align_forward_leaves_boundaries_without_a_preceding_call() -> None:
    # Given a plain history
    messages = [text("a", "user"), text("b", "assistant"), result("r", "c9")]
    # When boundaries are aligned forward
    # Then nothing moves (also at the edges 0 and len)
    assert align_boundary_forward(messages, 2) == 2
    assert align_boundary_forward(messages, 0) == 0
    assert align_boundary_forward(messages, 3) == 3
    assert align_boundary_forward(messages, -1) == -1


def test_align_forward_ignores_calls_from_user_messages() -> None:
    # Given a tool part carried by a user message
    user_call = {**call("a", "c1"), "role": "user"}
    messages = [text("u", "user"), user_call, result("r1", "c1")]
    # When the boundary after it is aligned
    # Then it does not move (only assistant messages make calls)
    assert align_boundary_forward(messages, 2) == 2


def test_align_backward_pulls_results_back_to_their_call() -> None:
    # Given a call at 1 followed by its results at 2 and 3
    messages = [text("u", "user"), call("a", "c1", "c2"), result("r1", "c1"), result("r2", "c2", "assistant")]
    # When a tail boundary at 2 is aligned backward
    # Then it includes the call message
    assert align_boundary_backward(messages, 2) == 1


def test_align_backward_stops_at_a_call_message_and_at_unrelated_messages() -> None:
    # Given a call at index 1 and an unrelated result at index 3
    messages = [text("u", "user"), call("a", "c1"), text("t", "user"), result("r", "c1"), text("z", "user")]
    # When boundaries are aligned backward
    # Then a call message stays in the tail, and a result not directly after its call does not move
    assert align_boundary_backward(messages, 1) == 1
    assert align_boundary_backward(messages, 3) == 3
    assert align_boundary_backward(messages, 0) == 0
    assert align_boundary_backward(messages, 5) == 5


def test_tail_cut_is_aligned_backward() -> None:
    # Given a history ending with a call and its result
    messages = [text(f"m{i}", "user") for i in range(4)] + [call("a", "c1"), result("r", "c1")]
    # When only one tail message is required and the budget fits just one
    cut = find_tail_cut_by_tokens(messages, 1, 1, 1)
    # Then the cut moves from the result back to its call
    assert cut == 4
