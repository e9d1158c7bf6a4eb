"""Fork copies the history inside the database (``copy_history``) with exactly the semantics of the old fork,
which read the history and appended copies through the session (``SessionManager.fork_by_appending``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from threadloom import NotFoundError, SessionManager
from threadloom.compaction.markers import COMPACTION_PREFIX
from threadloom.compaction.overlays import apply_compactions, overlay_ranges
from threadloom.errors import PayloadTooLargeError
from threadloom.jscompat import compact_json
from threadloom.records import StoredCompaction

from tests.support.messages import text_message


def odd_message(message_id: str, role: str = "assistant") -> dict[str, Any]:
    """Keys not in the usual order, nested ids, non-ASCII, escapes, floats and big integers: all kept as stored."""
    return {
        "role": role,
        "metadata": {"id": message_id, "score": 1.5, "big": 2**62, "zero": 0.0, "neg": -1e-7},
        "parts": [
            {"type": "text", "text": f'héllo «{message_id}» "quoted" \\ back\nline\ttab \u0001 😀'},
            {"type": "tool-search", "toolCallId": "c1", "input": {"q": "x"}, "output": [1, None, True]},
        ],
        "id": message_id,
        "createdAt": "2026-01-01T00:00:00.000Z",
    }


def build(manager: SessionManager) -> str:
    """A session with branches and overlays of every kind apply_compactions distinguishes."""
    session_id = manager.create("source").id
    manager.append_all(session_id, [text_message("m0", "hello lighthouse")])
    for index in range(1, 12):
        manager.append(session_id, odd_message(f"m{index}") if index % 3 else text_message(f"m{index}"))
    manager.append(session_id, text_message("side", "sibling branch"), "m4")
    manager.add_compaction(session_id, "first summary of m2..m4", "m2", "m4")
    manager.add_compaction(session_id, "later summary of m2..m3 (wins for m2)", "m2", "m3")
    manager.add_compaction(session_id, "starts inside a replaced range: ignored", "m3", "m5")
    manager.add_compaction(session_id, "summary of m6..m7", "m6", "m7")
    manager.add_compaction(session_id, "adjacent summary m8..m8", "m8", "m8")
    manager.add_compaction(session_id, "on the sibling branch: ignored", "m4", "side")
    manager.add_compaction(session_id, "ends beyond the fork point: ignored", "m9", "m11")
    return session_id


def comparable(message: dict[str, Any], *, summary: bool) -> tuple[list[str], dict[str, Any]]:
    """Key order and content without the id (and the read-time createdAt of an overlay summary)."""
    dropped = {"id", "createdAt"} if summary else {"id"}
    return list(message), {key: value for key, value in message.items() if key not in dropped}


@pytest.mark.parametrize("at", ["m10", "m0", "m3", "m8", "side"])
def test_fork_copies_what_the_old_fork_appended(store: Any, at: str) -> None:
    manager = SessionManager.create(store, namespace="fork")
    source = build(manager)
    reference = manager.get_history(source, at)

    new = manager.fork(source, at, "server side")
    old = manager.fork_by_appending(source, at, "through the client")

    new_history, old_history = manager.get_history(new.id), manager.get_history(old.id)
    assert len(new_history) == len(old_history) == len(reference)
    for copied, appended, original in zip(new_history, old_history, reference, strict=True):
        summary = original["id"].startswith(COMPACTION_PREFIX)
        assert (
            comparable(copied, summary=summary)
            == comparable(appended, summary=summary)
            == comparable(original, summary=summary)
        )
    ids = [message["id"] for message in new_history]
    assert len(set(ids)) == len(ids) and not set(ids) & {message["id"] for message in reference}
    # One chain from a new root, the last copy the latest leaf; depth, estimates and paging as appends built them.
    fork = manager.get_session(new.id)
    assert [message["id"] for message in fork.get_history(ids[-1])] == ids
    assert fork.get_latest_leaf() == new_history[-1]
    assert fork.get_message(ids[0]) == new_history[0]
    assert fork.get_path_length() == manager.get_session(old.id).get_path_length() == len(ids)
    assert fork.storage.get_token_estimate() == manager.get_session(old.id).storage.get_token_estimate()
    for index, message_id in enumerate(ids[:-1]):
        assert [child["id"] for child in fork.get_branches(message_id)] == [ids[index + 1]]
    assert fork.get_branches(ids[-1]) == []
    assert manager.get_compactions(new.id) == []
    assert derived_columns(store, new.id) == derived_columns(store, old.id)
    assert new.parent_session_id == source and manager.get(new.id) is not None
    # The copies are indexed as appended ones are, in the fork and across the namespace.
    assert [hit.id for hit in fork.search("lighthouse")] == [ids[0]]
    assert [hit.id for hit in manager.get_session(old.id).search("lighthouse")] == [
        manager.get_history(old.id)[0]["id"]
    ]
    assert {hit.session_id for hit in manager.search("lighthouse")} == {source, new.id, old.id}
    # The fork is a session like any other: appending continues the chain.
    manager.append(new.id, text_message("next"))
    assert manager.get_history(new.id)[-2:] == [new_history[-1], text_message("next")]


def derived_columns(store: Any, session_id: str) -> list[tuple[Any, ...]]:
    """What appends compute per row besides the content: order, depth, estimates and the history jump."""
    with store.database.read() as tx:
        rows = tx.query(
            "SELECT seq, depth, tokens, path_tokens, jump, role FROM threadloom_messages "
            "WHERE session_id = :sid ORDER BY seq",
            {"sid": session_id},
        )
    return [tuple(row) for row in rows]


def test_a_long_fork_fills_the_history_jumps_as_appends_do(store: Any) -> None:
    manager = SessionManager.create(store, namespace="long")
    source = manager.create("long").id
    manager.append_all(source, [text_message(f"l{index}") for index in range(300)])
    manager.add_compaction(source, "summary of l10..l99", "l10", "l99")
    new = manager.fork(source, "l299", "new")
    old = manager.fork_by_appending(source, "l299", "old")
    assert derived_columns(store, new.id) == derived_columns(store, old.id)
    assert len(derived_columns(store, new.id)) == 300 - 89
    assert [m["parts"] for m in manager.get_history(new.id)] == [m["parts"] for m in manager.get_history(old.id)]


def stored_text(store: Any, session_id: str, message_id: str) -> str:
    with store.database.read() as tx:
        return str(tx.query(store.sql.get_message, {"sid": session_id, "id": message_id})[0][0])


def test_fork_keeps_every_stored_byte_but_the_id(store: Any) -> None:
    manager = SessionManager.create(store, namespace="bytes")
    source = build(manager)
    new = manager.fork(source, "m2", "bytes")
    copies = manager.get_history(new.id)
    for original_id, copy in zip(["m0", "m1", "m2"], copies, strict=True):
        original = stored_text(store, source, original_id)
        # What the old fork stored: the compact JSON of the message with only its own id replaced.
        assert stored_text(store, new.id, copy["id"]) == compact_json({**json.loads(original), "id": copy["id"]})
    assert copies[1]["metadata"]["id"] == "m1"  # an id nested inside the message is content: it stays


def test_fork_over_the_limit_is_refused_and_leaves_nothing(store: Any) -> None:
    manager = SessionManager.create(store, namespace="limit")
    source = build(manager)
    manager.with_limits(manager.limits.with_overrides({"max_fork_messages": 6}))
    before = manager.count()
    with pytest.raises(PayloadTooLargeError, match="at most 6"):
        manager.fork(source, "m11", "too long")
    with pytest.raises(PayloadTooLargeError, match="at most 6"):
        manager.fork_by_appending(source, "m11", "too long")
    assert manager.count() == before
    # An overlay counts as one message: m0..m7 with two overlays applied is 6 messages.
    fits = manager.fork(source, "m7", "fits")
    assert len(manager.get_history(fits.id)) == 6
    with pytest.raises(NotFoundError):
        manager.fork(source, "missing", "nothing")
    assert manager.count() == before + 1


def test_overlay_ranges_choose_what_apply_compactions_applies() -> None:
    path = [text_message(f"p{index}") for index in range(12)]
    positions = {message["id"]: index for index, message in enumerate(path)}
    overlays = [
        StoredCompaction(f"c{n}", f"s{n}", f"p{a}", f"p{b}", "t")
        for n, (a, b) in enumerate([(2, 4), (2, 3), (3, 5), (6, 7), (8, 8), (9, 1), (10, 99), (0, 0), (11, 11)])
    ]
    overlays.append(StoredCompaction("c-off", "s", "p4", "elsewhere", "t"))
    ranges = overlay_ranges(positions, overlays)
    applied = apply_compactions(path, overlays, now=lambda: "t")
    expected: list[str] = []
    next_free = 0
    for first, end, overlay in ranges:
        expected += [message["id"] for message in path[next_free:first]] + [COMPACTION_PREFIX + overlay.id]
        next_free = end + 1
    expected += [message["id"] for message in path[next_free:]]
    assert [message["id"] for message in applied] == expected
    assert [(first, end) for first, end, _ in ranges] == [(0, 0), (2, 3), (6, 7), (8, 8), (11, 11)]
