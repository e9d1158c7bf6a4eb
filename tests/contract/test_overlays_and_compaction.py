"""Compaction overlays (branch-local, superseding, fenced) and compaction on a live store."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from threadloom import CompactionError, CompactResult, ConflictError, Session
from threadloom.compaction import create_compact_function
from threadloom.records import CompactionFence
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens

from tests.support.messages import text_message


def chain(session: Session, count: int, prefix: str = "m", words: int = 30) -> None:
    session.append_messages(
        [text_message(f"{prefix}{index}", " ".join(["word"] * words) + f" {index}") for index in range(count)]
    )


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [message["id"] for message in messages]


def test_overlay_replaces_its_range_and_later_overlays_supersede(store: Any) -> None:
    session = Session.create(store).for_session("s")
    chain(session, 6)
    first = session.add_compaction("sum A", "m1", "m2")
    assert ids(session.get_history()) == ["m0", f"compaction_{first.id}", "m3", "m4", "m5"]
    second = session.add_compaction("sum B", "m1", "m4")
    history = session.get_history()
    assert ids(history) == ["m0", f"compaction_{second.id}", "m5"]
    assert history[1]["role"] == "assistant" and history[1]["parts"] == [{"type": "text", "text": "sum B"}]
    # originals stay stored and every overlay row is still listed
    assert session.get_message("m2") is not None
    assert [c.id for c in session.get_compactions()] == [first.id, second.id]
    assert session.get_path_length() == 6


def test_overlays_are_branch_local(store: Any) -> None:
    session = Session.create(store).for_session("s")
    chain(session, 4)
    session.append_message(text_message("b2"), "m1")
    session.add_compaction("main branch summary", "m1", "m3")
    assert ids(session.get_history("b2")) == ["m0", "m1", "b2"]
    assert len(session.get_history("m3")) == 2


def test_incremental_estimate_matches_a_full_recount(store: Any) -> None:
    # D9: the O(1) estimate equals the heuristic over the history, through overlays, updates and deletes
    session = Session.create(store).for_session("s")
    chain(session, 12)
    session.append_message(text_message("branch", "a branch message"), "m5")

    def full(leaf: str | None = None) -> int:
        return estimate_message_tokens(session.get_history(leaf))

    provider = session.storage
    assert provider.get_token_estimate() == full()  # type: ignore[attr-defined]
    session.add_compaction("a short summary", "m2", "m8")
    session.append_message(text_message("m12", "after the overlay"), "m11")
    assert provider.get_token_estimate() == full()  # type: ignore[attr-defined]
    assert provider.get_token_estimate("branch") == full("branch")  # type: ignore[attr-defined]
    session.update_message(text_message("m10", "a much longer replacement text " * 5))
    session.delete_messages(["m11", "m3"])
    assert provider.get_token_estimate() == full()  # type: ignore[attr-defined]
    session.delete_messages(["m8"])  # the overlay's end is gone, so the overlay goes too (D4)
    assert session.get_compactions() == []
    assert provider.get_token_estimate() == full()  # type: ignore[attr-defined]


def summarizer(prompt: str) -> str:
    return "SUMMARY of " + str(prompt.count("[user]")) + " messages"


def test_compact_summarizes_the_middle_and_keeps_head_and_tail(store: Any) -> None:
    session = (
        Session.create(store)
        .for_session("s")
        .on_compaction(create_compact_function(summarizer, protect_head=2, tail_token_budget=100))
    )
    chain(session, 20)
    result = session.compact()
    assert isinstance(result, CompactResult)
    history = session.get_history()
    assert ids(history)[:2] == ["m0", "m1"]
    assert history[2]["id"].startswith("compaction_")
    assert history[2]["parts"][0]["text"].startswith("SUMMARY of")
    assert ids(history)[-1] == "m19"
    assert len(history) < 20


def test_iterative_compaction_extends_the_existing_overlay(store: Any) -> None:
    prompts: list[str] = []

    def remember(prompt: str) -> str:
        prompts.append(prompt)
        return f"summary {len(prompts)}"

    session = (
        Session.create(store)
        .for_session("s")
        .on_compaction(create_compact_function(remember, protect_head=1, tail_token_budget=60, min_tail_messages=2))
    )
    chain(session, 10)
    first = session.compact()
    chain(session, 10, prefix="n")
    second = session.compact()
    assert first is not None and second is not None
    assert second.from_message_id == first.from_message_id == "m1"
    assert "PREVIOUS SUMMARY:" in prompts[1] and "summary 1" in prompts[1]
    overlays = [m for m in session.get_history() if m["id"].startswith("compaction_")]
    assert len(overlays) == 1 and overlays[0]["parts"][0]["text"] == "summary 2"


def test_manual_compact_raises_on_function_failure_and_reports_event(store: Any) -> None:
    # D8: manual compact() raises CompactionError; the error event is broadcast
    events: list[dict[str, Any]] = []

    def broken(_messages: list[dict[str, Any]], _context: Any = None) -> CompactResult | None:
        raise RuntimeError("model down")

    session = Session.create(store).for_session("s").on_compaction(broken).on_event(events.append)
    chain(session, 3)
    with pytest.raises(CompactionError, match="model down"):
        session.compact()
    assert {"type": "session_error", "error": "model down"} in events


def test_compact_without_function_raises_reference_message(store: Any) -> None:
    session = Session.create(store).for_session("s")
    with pytest.raises(CompactionError, match=r"No compaction function registered\. Call onCompaction\(\) first\."):
        session.compact()


def test_auto_compaction_fires_only_when_threshold_strictly_exceeded(store: Any) -> None:
    calls: list[int] = []

    def counting(messages: list[dict[str, Any]], _context: Any = None) -> CompactResult | None:
        calls.append(len(messages))
        return None

    session = Session.create(store).for_session("s").on_compaction(counting)
    session.append_message(text_message("m0", "x" * 40))
    exact = session.estimate_tokens()
    session.compact_after(exact + estimate_message_tokens([text_message("m1", "x" * 40)]))
    session.append_message(text_message("m1", "x" * 40))  # estimate == threshold: no compaction
    assert calls == []
    session.append_message(text_message("m2", "x" * 40))
    assert calls == [3]
    session.append_message(text_message("m2", "x" * 40))  # duplicate: never triggers
    assert calls == [3]


def test_auto_compaction_failure_never_fails_the_append(store: Any) -> None:
    # D8: every automatic failure reaches on_compaction_error and a session_error event
    seen: list[BaseException] = []
    events: list[dict[str, Any]] = []

    def broken(_messages: list[dict[str, Any]], _context: Any = None) -> CompactResult | None:
        raise RuntimeError("summarizer exploded")

    session = (
        Session.create(store)
        .for_session("s")
        .on_compaction(broken)
        .compact_after(0)
        .on_compaction_error(seen.append)
        .on_event(events.append)
    )
    result = session.append_message(text_message("m0"))
    assert result.inserted and session.get_message("m0") is not None
    assert len(seen) == 1 and isinstance(seen[0], CompactionError)
    assert any(e["type"] == "session_error" for e in events)


def test_status_events_carry_estimate_and_threshold(store: Any) -> None:
    events: list[dict[str, Any]] = []
    session = (
        Session.create(store)
        .for_session("s")
        .on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=10))
        .compact_after(10_000)
        .on_event(events.append)
    )
    session.append_message(text_message("m0", "hello world"))
    assert events[-1] == {
        "type": "session_status",
        "phase": "idle",
        "tokenEstimate": estimate_message_tokens([text_message("m0", "hello world")]),
        "tokenThreshold": 10_000,
    }
    chain(session, 8, prefix="n")
    events.clear()
    session.compact()
    assert [e.get("phase") for e in events] == ["compacting", "idle"]
    assert events[-1]["compacted"] == {"tokensBefore": events[0]["tokenEstimate"]}


def test_custom_token_counter_receives_messages_prompt_and_blocks(store: Any) -> None:
    seen: list[Any] = []

    def counter(counted: Any) -> float:
        seen.append(counted)
        return math.inf

    session = (
        Session.create(store)
        .for_session("s")
        .with_context("memory", max_tokens=100)
        .on_compaction(create_compact_function(summarizer))
        .compact_after(5, token_counter=counter)
    )
    session.append_message(text_message("m0"))
    assert session.estimate_tokens() == 0  # a non-finite count is treated as 0, as in the reference
    assert [m["id"] for m in seen[-1].messages] == ["m0"]
    assert [b.label for b in seen[-1].context_blocks] == ["memory"]


def test_estimate_includes_the_system_prompt(store: Any) -> None:
    session = Session.create(store).for_session("s").with_context("memory").with_cached_prompt()
    session.replace_context_block("memory", "User likes coffee.")
    prompt = session.freeze_system_prompt()
    session.append_message(text_message("m0", "hi"))
    assert session.estimate_tokens() == estimate_message_tokens([text_message("m0", "hi")]) + estimate_string_tokens(
        prompt
    )


def test_fenced_commit_refuses_a_stale_snapshot(store: Any, make_store: Callable[[], Any]) -> None:
    # a compaction computed from a branch that changed underneath must not commit
    session = Session.create(store).for_session("s")
    chain(session, 6)
    provider = session.storage
    fence = CompactionFence("m5", provider.get_latest_compaction_id())  # type: ignore[attr-defined]
    other = Session.create(make_store()).for_session("s")
    other.add_compaction("concurrent", "m1", "m2")
    with pytest.raises(ConflictError):
        provider.add_compaction("stale", "m1", "m4", fence=fence)  # type: ignore[call-arg]
    fresh = CompactionFence("m5", provider.get_latest_compaction_id())  # type: ignore[attr-defined]
    session.append_message(text_message("b1"), "m2")
    with pytest.raises(ConflictError):
        provider.add_compaction("off branch", "m1", "m4", fence=CompactionFence("b1", fresh.latest_compaction_id))  # type: ignore[call-arg]


def test_request_key_makes_redelivery_a_no_op(store: Any) -> None:
    session = Session.create(store).for_session("s")
    chain(session, 6)
    provider = session.storage
    first = provider.add_compaction("once", "m1", "m3", request_key="req-1")  # type: ignore[call-arg]
    again = provider.add_compaction("twice", "m1", "m4", request_key="req-1")  # type: ignore[call-arg]
    assert again.id == first.id
    assert len(session.get_compactions()) == 1


def test_messages_appended_after_the_snapshot_survive_compaction(store: Any) -> None:
    # the compaction function sees a snapshot; an append lands before the overlay commits
    session_store = store

    def slow_compaction(messages: list[dict[str, Any]], _context: Any = None) -> CompactResult | None:
        Session.create(session_store).for_session("s").append_message(text_message("late", "arrived during compaction"))
        return CompactResult(from_message_id=messages[1]["id"], to_message_id=messages[-2]["id"], summary="sum")

    session = Session.create(store).for_session("s").on_compaction(slow_compaction)
    chain(session, 6)
    assert session.compact() is not None
    history = ids(session.get_history())
    assert history[-2:] == ["m5", "late"]
