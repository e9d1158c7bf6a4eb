"""create_compact_function (§6.3, §6.4): the worked example, every None case, iteration, counter flow-through."""

from __future__ import annotations

import pytest
from threadloom.compaction import CompactContext, create_compact_function
from threadloom.errors import CompactionError, ValidationError
from threadloom.records import CompactResult, Message, TokenCountInput


def text(mid: str, role: str, body: str) -> Message:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def history(count: int, prefix: str = "m") -> list[Message]:
    return [
        text(f"{prefix}{i}", "user" if i % 2 == 0 else "assistant", f"message {i} with enough content to have tokens")
        for i in range(count)
    ]


class Recorder:
    """A summarizer that records prompts and answers with a fixed text."""

    def __init__(self, answer: str = "## Topic\nSummary") -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answer


def test_worked_example_compacts_m1_to_m17() -> None:
    # Given the §6.4 worked example
    summarize = Recorder()
    compact = create_compact_function(summarize, protect_head=1, min_tail_messages=2, tail_token_budget=10)
    # When it runs
    result = compact(history(20))
    # Then it summarizes m1..m17 and returns the summary verbatim
    assert result == CompactResult(from_message_id="m1", to_message_id="m17", summary="## Topic\nSummary")
    assert len(summarize.prompts) == 1
    assert "[assistant]\nmessage 1 with" in summarize.prompts[0]
    assert "message 17 with" in summarize.prompts[0]
    assert "message 18 with" not in summarize.prompts[0]
    assert "message 0 with" not in summarize.prompts[0]


def test_worked_example_budget_in_prompt() -> None:
    # Given the worked example: the middle m1..m17 estimates 9*15 + 8*16 = 263 tokens
    summarize = Recorder()
    compact = create_compact_function(summarize, protect_head=1, min_tail_messages=2, tail_token_budget=10)
    # When it runs
    compact(history(20))
    # Then the target is the 100-token floor (floor(263 * 0.2) = 52)
    assert "Target ~100 tokens." in summarize.prompts[0]


def test_none_when_history_is_no_longer_than_head_plus_min_tail() -> None:
    # Given 5 messages with the defaults (3 + 2)
    summarize = Recorder()
    compact = create_compact_function(summarize)
    # When it runs
    # Then there is nothing to do and the summarizer is never called
    assert compact(history(5)) is None
    assert summarize.prompts == []


def test_none_when_the_whole_remainder_fits_the_tail_budget() -> None:
    # Given 10 short messages and the default 20,000-token tail budget
    summarize = Recorder()
    compact = create_compact_function(summarize)
    # When it runs
    # Then the tail swallows everything after the head
    assert compact(history(10)) is None
    assert summarize.prompts == []


def test_none_when_the_middle_is_only_an_overlay() -> None:
    # Given a head of 1, an overlay message in the middle, and a 2-message tail that fills the budget
    messages = [text("m0", "user", "hi"), text("compaction_x", "assistant", "old summary"), *history(2, "t")]
    summarize = Recorder()
    compact = create_compact_function(summarize, protect_head=1, tail_token_budget=1)
    # When it runs
    # Then the only middle message is the overlay, which is excluded, so nothing is summarized
    assert compact(messages) is None
    assert summarize.prompts == []


def test_none_when_the_summary_is_blank() -> None:
    # Given a summarizer that answers with JavaScript whitespace only
    compact = create_compact_function(Recorder(" \n\u00a0\ufeff"), protect_head=1, tail_token_budget=10)
    # When it runs
    # Then no overlay is proposed
    assert compact(history(20)) is None


def test_non_string_summary_raises_compaction_error() -> None:
    # Given a summarizer that returns something other than a string
    def broken(prompt: str) -> str:
        return None  # type: ignore[return-value]

    compact = create_compact_function(broken, protect_head=1, tail_token_budget=10)
    # When it runs
    # Then a CompactionError says what was wrong
    with pytest.raises(CompactionError, match="NoneType"):
        compact(history(20))


def test_summarizer_exceptions_propagate_unchanged() -> None:
    # Given a summarizer that fails
    def failing(prompt: str) -> str:
        raise RuntimeError("model down")

    compact = create_compact_function(failing, protect_head=1, tail_token_budget=10)
    # When it runs
    # Then the original error reaches the caller (the Session reports its message)
    with pytest.raises(RuntimeError, match="model down"):
        compact(history(20))


def test_previous_summary_is_iterated_and_overlay_excluded_from_range() -> None:
    # Given a history where an overlay sits right after the protected head
    overlay: Message = {
        "id": "compaction_c1",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "first"},
            {"type": "reasoning", "text": "no"},
            {"type": "text", "text": "second"},
        ],
    }
    messages = [text("h0", "user", "head"), overlay, *history(12)]
    summarize = Recorder()
    compact = create_compact_function(summarize, protect_head=1, tail_token_budget=10)
    # When it runs
    result = compact(messages)
    # Then the previous summary (text parts joined by newlines) is carried into the update prompt,
    # and the range starts at the first real message after the overlay
    assert result is not None
    assert result.from_message_id == "m0"
    assert result.to_message_id == "m9"
    prompt = summarize.prompts[0]
    assert "PREVIOUS SUMMARY:\nfirst\nsecond\n\nNEW TURNS TO INCORPORATE:\n[user]\nmessage 0 with" in prompt
    assert "compaction_c1" not in prompt


def test_session_counter_flows_through_per_message() -> None:
    # Given a session counter that charges 1,000 tokens per message, and no explicit counter
    calls: list[TokenCountInput] = []

    def session_counter(data: TokenCountInput) -> float:
        calls.append(data)
        return 1000.0 * len(data.messages)

    summarize = Recorder()
    compact = create_compact_function(summarize, protect_head=1, tail_token_budget=2500, min_tail_messages=0)
    # When it runs with the counter in its context
    result = compact(history(10), CompactContext(token_counter=session_counter))
    # Then the tail holds the two newest messages (2,000 <= 2,500) and each call saw one message, no prompt, no blocks
    assert result is not None
    assert (result.from_message_id, result.to_message_id) == ("m1", "m7")
    assert all(len(c.messages) == 1 and c.system_prompt == "" and c.context_blocks == [] for c in calls)
    assert [c.messages[0]["id"] for c in calls] == ["m9", "m8", "m7"]


def test_heuristic_keeps_everything_that_the_session_counter_would_cut() -> None:
    # Given the same setup without any counter (each message ~15 tokens)
    compact = create_compact_function(Recorder(), protect_head=1, tail_token_budget=2500, min_tail_messages=0)
    # When it runs
    # Then the heuristic fits the whole remainder into the tail: nothing to do (issue #1593's symptom)
    assert compact(history(10)) is None


def test_explicit_counter_wins_over_the_session_counter() -> None:
    # Given an explicit counter and a session counter that would disagree
    def explicit(data: TokenCountInput) -> float:
        return 1000.0

    def session_counter(data: TokenCountInput) -> float:
        raise AssertionError("the session counter must not be used")

    compact = create_compact_function(
        Recorder(), protect_head=1, tail_token_budget=1500, min_tail_messages=0, token_counter=explicit
    )
    # When it runs with both
    result = compact(history(10), CompactContext(token_counter=session_counter))
    # Then only the explicit counter was consulted: one tail message
    assert result is not None
    assert result.to_message_id == "m8"


def test_fixed_total_counter_degrades_to_min_tail_messages() -> None:
    # Given a usage-style counter returning a whole-prompt total whatever it is given
    compact = create_compact_function(Recorder(), protect_head=1, min_tail_messages=3)
    # When it runs with that counter in the context
    result = compact(history(12), CompactContext(token_counter=lambda _: 50_000))
    # Then the tail falls back to min_tail_messages (documented caveat)
    assert result is not None
    assert result.to_message_id == "m8"


def test_head_boundary_is_aligned_past_tool_results() -> None:
    # Given a protected head that ends right after a tool call whose results follow
    call: Message = {
        "id": "a1",
        "role": "assistant",
        "parts": [{"type": "dynamic-tool", "toolName": "t", "toolCallId": "c1", "input": {}}],
    }
    res: Message = {
        "id": "r1",
        "role": "user",
        "parts": [{"type": "tool-t", "toolCallId": "c1", "output": "ok"}],
    }
    messages = [text("u0", "user", "start"), call, res, *history(10)]
    compact = create_compact_function(Recorder(), protect_head=2, tail_token_budget=10)
    # When it runs
    result = compact(messages)
    # Then the result r1 stays with its call in the head and the range starts after it
    assert result is not None
    assert result.from_message_id == "m0"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"protect_head": -1}, "protect_head"),
        ({"min_tail_messages": -2}, "min_tail_messages"),
        ({"tail_token_budget": -5}, "tail_token_budget"),
        ({"protect_head": True}, "protect_head"),
    ],
)
def test_invalid_options_are_rejected(kwargs: dict[str, int], needle: str) -> None:
    # Given a nonsensical option
    # When the function is created
    # Then a ValidationError names the option
    with pytest.raises(ValidationError, match=needle):
        create_compact_function(Recorder(), **kwargs)  # type: ignore[arg-type]


def test_default_options_follow_the_code_not_the_doc_comment() -> None:
    # Given default options (protect_head=3, min tail 2) and a 6-message history
    summarize = Recorder()
    compact = create_compact_function(summarize, tail_token_budget=1)
    # When it runs
    result = compact(history(6))
    # Then m3 alone is summarized (head m0..m2, tail m4..m5)
    assert result is not None
    assert (result.from_message_id, result.to_message_id) == ("m3", "m3")
