"""Long middles are summarized in bounded chunks, each summary feeding the next; a run stops within its budget."""

from __future__ import annotations

import time
from typing import Any

import pytest
from threadloom import Session, SqliteStore
from threadloom.compaction import create_compact_function
from threadloom.compaction.summarizers import ExtractiveSummarizer
from threadloom.compaction.summarizers.offline import parse_summary_prompt
from threadloom.compaction.summary_prompt import render_conversation
from threadloom.tokens import estimate_string_tokens

from tests.support.messages import text_message


def history(count: int) -> list[dict[str, Any]]:
    return [text_message(f"m{i}", f"Turn {i} says something worth keeping about topic {i}.") for i in range(count)]


class Recording:
    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._summarize = ExtractiveSummarizer()

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self._summarize(prompt)


def test_each_prompt_holds_at_most_one_chunk_and_the_previous_summary_flows_on() -> None:
    recording = Recording()
    compact = create_compact_function(recording, tail_token_budget=50, chunk_tokens=300)
    result = compact(history(200))
    assert result is not None
    assert len(recording.prompts) > 5
    for index, prompt in enumerate(recording.prompts):
        parsed = parse_summary_prompt(prompt)
        turns_text = render_conversation([text_message("x", turn.text, turn.role) for turn in parsed.turns])
        assert estimate_string_tokens(turns_text) <= 300 + 20
        if index:
            # the summary written for the previous chunk is the previous summary of this one
            assert parsed.previous_summary == recording._summarize(recording.prompts[index - 1])
    # every chunk was covered, in order, and the overlay spans them all
    covered = [turn.text for prompt in recording.prompts for turn in parse_summary_prompt(prompt).turns]
    assert covered[0].startswith("Turn 3 ") and len(covered) == len(set(covered))
    assert (result.from_message_id, result.to_message_id) == ("m3", f"m{2 + len(covered)}")


def test_a_run_stops_after_its_chunk_budget_and_the_next_run_continues() -> None:
    store = SqliteStore()
    recording = Recording()
    session = (
        Session.create(store)
        .for_session("s")
        .on_compaction(create_compact_function(recording, tail_token_budget=50, chunk_tokens=300, max_chunks_per_run=2))
    )
    session.append_messages(history(200))
    first = session.compact()
    assert first is not None and len(recording.prompts) == 2
    second = session.compact()
    assert second is not None and len(recording.prompts) == 4
    # the second run folded the first overlay's summary in and extended the same overlay
    assert second.from_message_id == first.from_message_id == "m3"
    assert int(second.to_message_id[1:]) > int(first.to_message_id[1:])
    assert parse_summary_prompt(recording.prompts[2]).previous_summary == first.summary
    ids = [message["id"] for message in session.get_history()]
    assert ids[:3] == ["m0", "m1", "m2"] and ids[4] == f"m{int(second.to_message_id[1:]) + 1}"


def test_a_run_starts_no_chunk_after_its_time_budget() -> None:
    calls: list[float] = []

    def slow(prompt: str) -> str:
        calls.append(time.monotonic())
        time.sleep(0.05)
        return "## Topic\\nx"

    compact = create_compact_function(slow, tail_token_budget=50, chunk_tokens=200, run_budget_seconds=0.12)
    assert compact(history(400)) is not None
    assert 2 <= len(calls) <= 4


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_chunk_tokens_must_be_a_positive_integer(value: Any) -> None:
    with pytest.raises(ValueError, match="chunk_tokens"):
        create_compact_function(ExtractiveSummarizer(), chunk_tokens=value)


def test_ten_thousand_messages_compact_offline_in_one_bounded_run() -> None:
    # Not a speed assertion (bench/ prints the figures): the work must be linear, so this stays quick.
    started = time.monotonic()
    result = create_compact_function(ExtractiveSummarizer(), run_budget_seconds=None)(history(10_000))
    assert result is not None and result.from_message_id == "m3"
    assert 8_000 < int(result.to_message_id[1:]) < 9_998  # all but the 20,000-token tail
    assert time.monotonic() - started < 60
