"""apply_compactions (§3.4): the read-time overlay, superseding, branch-locality and consumed ranges."""

from __future__ import annotations

from threadloom.compaction import apply_compactions, is_compaction_message
from threadloom.records import Message, StoredCompaction

NOW = "2026-05-06T07:08:09.010Z"


def path(*ids: str) -> list[Message]:
    return [{"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]} for mid in ids]


def overlay(cid: str, start: str, end: str, summary: str | None = None) -> StoredCompaction:
    return StoredCompaction(
        id=cid, summary=summary or f"summary {cid}", from_message_id=start, to_message_id=end, created_at="x"
    )


def ids(messages: list[Message]) -> list[str]:
    return [m["id"] for m in messages]


def test_no_compactions_returns_an_equal_new_list() -> None:
    # Given a path and no overlays
    messages = path("a", "b")
    # When overlays are applied
    result = apply_compactions(messages, [])
    # Then the messages come back unchanged in a new list
    assert result == messages
    assert result is not messages


def test_range_is_replaced_by_one_synthetic_message_at_from() -> None:
    # Given an overlay from b to d
    messages = path("a", "b", "c", "d", "e")
    # When applied
    result = apply_compactions(messages, [overlay("c1", "b", "d", "The summary")], now=lambda: NOW)
    # Then b..d become one assistant message with exactly one text part and the read time
    assert ids(result) == ["a", "compaction_c1", "e"]
    assert result[1] == {
        "id": "compaction_c1",
        "role": "assistant",
        "parts": [{"type": "text", "text": "The summary"}],
        "createdAt": NOW,
    }
    assert is_compaction_message(result[1])
    assert result[0] is messages[0]


def test_single_message_range() -> None:
    # Given an overlay whose from and to are the same message
    # When applied
    result = apply_compactions(path("a", "b", "c"), [overlay("c1", "b", "b")], now=lambda: NOW)
    # Then just that message is replaced
    assert ids(result) == ["a", "compaction_c1", "c"]


def test_last_matching_overlay_supersedes_earlier_ones() -> None:
    # Given two overlays with the same from; the later one reaches farther
    messages = path("a", "b", "c", "d", "e", "f")
    compactions = [overlay("old", "b", "c"), overlay("new", "b", "e")]
    # When applied
    result = apply_compactions(messages, compactions, now=lambda: NOW)
    # Then the later one wins
    assert ids(result) == ["a", "compaction_new", "f"]


def test_later_overlay_wins_even_with_a_shorter_range() -> None:
    # Given a later overlay with the same from but a nearer to
    compactions = [overlay("wide", "b", "e"), overlay("narrow", "b", "c")]
    # When applied
    result = apply_compactions(path("a", "b", "c", "d", "e", "f"), compactions, now=lambda: NOW)
    # Then provider order decides (the last one), not the range size
    assert ids(result) == ["a", "compaction_narrow", "d", "e", "f"]


def test_overlay_starting_inside_a_consumed_range_is_ignored() -> None:
    # Given an overlay b..d and another c..e that starts inside it
    compactions = [overlay("first", "b", "d"), overlay("inner", "c", "e")]
    # When applied
    result = apply_compactions(path("a", "b", "c", "d", "e", "f"), compactions, now=lambda: NOW)
    # Then only the first applies
    assert ids(result) == ["a", "compaction_first", "e", "f"]


def test_overlays_are_branch_local() -> None:
    # Given two branches sharing a..b, and an overlay whose `to` lives only on the other branch
    branch_one = path("a", "b", "c1", "d1")
    branch_two = path("a", "b", "c2", "d2")
    compactions = [overlay("on-one", "b", "c1"), overlay("on-two", "b", "c2")]
    # When each branch is read
    one = apply_compactions(branch_one, compactions, now=lambda: NOW)
    two = apply_compactions(branch_two, compactions, now=lambda: NOW)
    # Then each branch shows only its own overlay even though the later one shares the from
    assert ids(one) == ["a", "compaction_on-one", "d1"]
    assert ids(two) == ["a", "compaction_on-two", "d2"]


def test_overlay_whose_to_lies_before_from_is_ignored() -> None:
    # Given an overlay with its ends reversed on this path
    # When applied
    result = apply_compactions(path("a", "b", "c"), [overlay("bad", "c", "a")], now=lambda: NOW)
    # Then it is ignored
    assert ids(result) == ["a", "b", "c"]


def test_overlay_with_a_missing_boundary_is_ignored() -> None:
    # Given overlays whose from or to is not on the path (for example deleted)
    compactions = [overlay("x", "zz", "b"), overlay("y", "a", "zz")]
    # When applied
    result = apply_compactions(path("a", "b", "c"), compactions, now=lambda: NOW)
    # Then nothing changes
    assert ids(result) == ["a", "b", "c"]


def test_consecutive_overlays_both_apply() -> None:
    # Given two non-overlapping overlays
    compactions = [overlay("one", "a", "b"), overlay("two", "c", "d")]
    # When applied
    result = apply_compactions(path("a", "b", "c", "d", "e"), compactions, now=lambda: NOW)
    # Then both ranges are replaced in order
    assert ids(result) == ["compaction_one", "compaction_two", "e"]


def test_clock_is_read_once_and_only_when_needed() -> None:
    # Given a counting clock
    reads: list[int] = []

    def clock() -> str:
        reads.append(1)
        return NOW

    # When overlays that do not match are applied, and then two that do
    apply_compactions(path("a"), [overlay("x", "q", "r")], now=clock)
    apply_compactions(path("a", "b", "c"), [overlay("one", "a", "a"), overlay("two", "b", "c")], now=clock)
    # Then the clock was read once, for the call that emitted synthetic messages
    assert len(reads) == 1


def test_default_created_at_is_iso_utc() -> None:
    # Given no injected clock
    # When an overlay applies
    message = apply_compactions(path("a"), [overlay("x", "a", "a")])[0]
    # Then createdAt is an ISO-8601 UTC timestamp with milliseconds
    assert message["createdAt"].endswith("Z")
    assert message["createdAt"][10] == "T"
