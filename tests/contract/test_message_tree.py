"""The message tree: parent rule, idempotency, latest leaf, branches, paths, updates and deletes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from threadloom import ConflictError, NotFoundError, Session, ValidationError

from tests.support.messages import text_message


def new_session(store: Any, session_id: str = "s1") -> Session:
    return Session.create(store).for_session(session_id)


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [message["id"] for message in messages]


def test_omitted_parent_attaches_to_latest_leaf_and_none_starts_a_root(store: Any) -> None:
    # Given a session with one message
    session = new_session(store)
    session.append_message(text_message("m1"))
    # When appending without a parent, then with an explicit None
    second = session.append_message(text_message("m2"))
    root = session.append_message(text_message("r2"), None)
    # Then the first chains under m1 and the second is a new root and the new latest leaf
    assert second.parent_id == "m1" and second.inserted
    assert root.parent_id is None
    assert ids(session.get_history()) == ["r2"]
    assert ids(session.get_history("m2")) == ["m1", "m2"]


def test_explicit_parent_creates_a_branch_that_becomes_active(store: Any) -> None:
    session = new_session(store)
    for message_id in ("u1", "a1"):
        session.append_message(text_message(message_id))
    # When regenerating the answer under u1
    session.append_message(text_message("a1b", role="assistant"), "u1")
    # Then both answers are branches of u1 in insertion order and the new one is active
    assert ids(session.get_branches("u1")) == ["a1", "a1b"]
    assert ids(session.get_history()) == ["u1", "a1b"]
    assert session.get_latest_leaf() == text_message("a1b", role="assistant")


def test_branch_pages_follow_the_keyset_in_insertion_order(store: Any) -> None:
    # Given a message with seven children, one of them re-parented there by a delete
    session = new_session(store)
    session.append_message(text_message("root"))
    session.append_message(text_message("mid"), "root")
    session.append_message(text_message("under-mid"), "mid")
    for index in range(5):
        session.append_message(text_message(f"c{index}"), "root")
    session.append_message(text_message("grandchild"), "c0")
    session.delete_messages(["mid"])
    # When reading pages of three, each resuming after the last seq returned
    pages: list[list[str]] = []
    after = 0
    while page := session.get_branch_page("root", after_seq=after, limit=3):
        pages.append([message["id"] for _, message in page])
        seqs = [seq for seq, _ in page]
        assert seqs == sorted(seqs) and seqs[0] > after
        after = seqs[-1]
    # Then every child comes once, in the order of get_branches, and nothing else does
    assert pages == [["under-mid", "c0", "c1"], ["c2", "c3", "c4"]]
    assert [child for page in pages for child in page] == ids(session.get_branches("root"))
    assert session.get_branch_page("c4", after_seq=0, limit=3) == []


def test_a_branch_page_reads_contents_only_within_its_byte_budget(store: Any) -> None:
    # Given five children of about 10 KB each
    session = new_session(store)
    session.append_message(text_message("root"))
    for index in range(5):
        session.append_message(text_message(f"c{index}", "x" * 10_000), "root")
    size = len(json.dumps(text_message("c0", "x" * 10_000), separators=(",", ":")))
    # When a page may hold 2.5 of them, then a budget below even one
    page = session.get_branch_page("root", after_seq=0, limit=10, max_bytes=size * 5 // 2)
    tiny = session.get_branch_page("root", after_seq=0, limit=10, max_bytes=10)
    # Then the first two come with their messages and the rest only as keys, the first always
    assert [(message or {}).get("id") for _, message in page] == ["c0", "c1", None, None, None]
    assert [seq for seq, _ in page] == sorted(seq for seq, _ in page)
    assert [(message or {}).get("id") for _, message in tiny] == ["c0", None, None, None, None]


def test_unknown_parent_is_refused(store: Any) -> None:
    session = new_session(store)
    with pytest.raises(NotFoundError, match="nope"):
        session.append_message(text_message("m1"), "nope")
    assert session.get_history() == []


def test_resending_an_id_is_a_no_op_and_the_first_write_wins(store: Any) -> None:
    session = new_session(store)
    first = session.append_message(text_message("m1", "original"))
    again = session.append_message(text_message("m1", "changed"))
    assert first.inserted and not again.inserted
    assert session.get_message("m1") == text_message("m1", "original")
    assert session.get_path_length() == 1


def test_message_ids_are_scoped_per_session(store: Any) -> None:
    # D1: the same id may exist in two sessions
    one, two = new_session(store, "a"), new_session(store, "b")
    one.append_message(text_message("m1", "in a"))
    result = two.append_message(text_message("m1", "in b"))
    assert result.inserted
    assert one.get_message("m1") == text_message("m1", "in a")
    assert two.get_message("m1") == text_message("m1", "in b")


def test_messages_round_trip_unchanged(store: Any) -> None:
    message = {
        "id": "m1",
        "role": "assistant",
        "createdAt": "2026-01-02T03:04:05.000Z",
        "metadata": {"usage": {"inputTokens": 3}, "ünïcode": "✓"},
        "parts": [
            {"type": "text", "text": "héllo 😀"},
            {
                "type": "dynamic-tool",
                "toolName": "x",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"a": [1, 2.5, None]},
                "output": {"b": True},
            },
        ],
    }
    session = new_session(store)
    session.append_message(message)
    assert new_session(store).get_message("m1") == message


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "text",
        {"role": "user", "parts": []},
        {"id": "", "role": "user", "parts": []},
        {"id": "m", "role": "user"},
        {"id": "m", "role": "user", "parts": [{"text": "no type"}]},
        {"id": "m", "role": 3, "parts": []},
    ],
)
def test_malformed_messages_are_refused_and_nothing_is_stored(store: Any, bad: Any) -> None:
    session = new_session(store)
    with pytest.raises(ValidationError):
        session.append_message(bad)
    assert session.get_path_length() == 0


def test_latest_leaf_is_the_most_recently_inserted_childless_message(store: Any, make_store: Callable[[], Any]) -> None:
    # D2: deterministic even for appends in the same millisecond, and across store instances
    session = new_session(store)
    session.append_message(text_message("root"))
    for index in range(5):
        session.append_message(text_message(f"leaf{index}"), "root")
    assert new_session(make_store()).get_latest_leaf() == text_message("leaf4")


def test_expected_leaf_precondition(store: Any) -> None:
    session = new_session(store)
    session.append_message(text_message("m1"))
    session.append_message(text_message("m2"), expected_leaf_id="m1")
    with pytest.raises(ConflictError):
        session.append_message(text_message("m3"), expected_leaf_id="m1")
    assert session.get_message("m3") is None
    # a retry of an already stored message is still a harmless no-op
    assert not session.append_message(text_message("m2"), expected_leaf_id="m1").inserted


def test_path_length_and_unknown_leaf(store: Any) -> None:
    session = new_session(store)
    assert session.get_path_length() == 0
    for index in range(4):
        session.append_message(text_message(f"m{index}"))
    assert session.get_path_length() == 4
    assert session.get_path_length("m1") == 2
    assert session.get_path_length("missing") == 0
    assert session.get_history("missing") == []


def test_deep_paths_are_returned_whole(store: Any) -> None:
    # D3: no 10,000-ancestor cap
    session = new_session(store)
    chain = [text_message(f"m{index}") for index in range(10_050)]
    session.append_messages(chain)
    history = session.get_history()
    assert len(history) == 10_050
    assert history[0]["id"] == "m0" and history[-1]["id"] == "m10049"
    assert session.get_path_length() == 10_050


def test_update_replaces_content_and_unknown_id_is_not_found(store: Any) -> None:
    session = new_session(store)
    session.append_message(text_message("m1", "before"))
    session.update_message(text_message("m1", "after"))
    assert session.get_message("m1") == text_message("m1", "after")
    with pytest.raises(NotFoundError):
        session.update_message(text_message("ghost"))


def test_delete_reattaches_children_to_nearest_surviving_ancestor(store: Any) -> None:
    # D4: deleting middle messages keeps the rest of the branch reachable
    session = new_session(store)
    for message_id in ("m0", "m1", "m2", "m3"):
        session.append_message(text_message(message_id))
    session.delete_messages(["m1", "m2"])
    assert ids(session.get_history()) == ["m0", "m3"]
    assert session.get_path_length() == 2
    assert ids(session.get_branches("m0")) == ["m3"]


def test_deleting_the_leaf_moves_the_latest_leaf(store: Any) -> None:
    session = new_session(store)
    for message_id in ("m0", "m1"):
        session.append_message(text_message(message_id))
    session.append_message(text_message("b1"), "m0")
    session.delete_messages(["b1"])
    assert session.get_latest_leaf() == text_message("m1")
    session.delete_messages(["m1", "m0"])
    assert session.get_latest_leaf() is None and session.get_history() == []


def test_clear_removes_messages_but_keeps_ids_reusable(store: Any) -> None:
    session = new_session(store)
    session.append_message(text_message("m1"))
    session.add_compaction("summary", "m1", "m1")
    session.clear_messages()
    assert session.get_history() == [] and session.get_compactions() == []
    assert session.append_message(text_message("m1")).inserted


def test_append_messages_chains_after_latest_leaf_and_is_atomic(store: Any) -> None:
    # D10: omitted parent attaches to the latest leaf; None starts a new root
    session = new_session(store)
    session.append_message(text_message("m0"))
    last = session.append_messages([text_message("m1"), text_message("m2")])
    assert last == "m2"
    assert ids(session.get_history()) == ["m0", "m1", "m2"]
    with pytest.raises(ValidationError):
        session.append_messages([text_message("m3"), {"id": "bad"}])
    assert session.get_message("m3") is None
