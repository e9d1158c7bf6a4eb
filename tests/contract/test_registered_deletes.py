"""A manager's deletion of one message checks and stamps the session registry in its own transaction, on every backend.

``SessionManager.delete_message`` (so ``DELETE /sessions/{id}/messages/{messageId}``) used to read the
session, read the message, read the session again, delete it in a transaction of a statement a round trip,
read the estimate and stamp the session. Now the storage does the check, the deletion and the stamp in one
transaction: on PostgreSQL one call of ``threadloom_delete_message`` (migration 0028), unless a compaction
overlay starts or ends at or below the message (then the shared code removes what it breaks and measures
what is left, as before). Each deletion is checked against the shared code's own on an identical tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import SessionManager
from threadloom.errors import NotFoundError, SessionNotFoundError
from threadloom.tokens import estimate_message_tokens

from tests.support.messages import text_message

MESSAGES = ("m1", "m2", "m3", "m4", "b1", "b2")


def _manager(make_store: Callable[[], Any], namespace: str = "tenant") -> SessionManager:
    return SessionManager.create(make_store(), namespace=namespace)


def _tree(manager: SessionManager, name: str = "deleted") -> str:
    """m1 - m2 - m3 - m4, and a branch b1 - b2 under m2."""
    session_id = manager.create(name).id
    for index in range(1, 5):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index} " * index))
    manager.append_message(session_id, text_message("b1", "a branch"), "m2")
    manager.append_message(session_id, text_message("b2", "its next line"))
    return session_id


def _shape(manager: SessionManager, session_id: str) -> dict[str, Any]:
    """What a reader sees: each message's history and running estimate, the latest leaf and its history."""
    session = manager.get_session(session_id)
    storage: Any = session.storage
    shape: dict[str, Any] = {}
    for message_id in MESSAGES:
        if session.get_message(message_id) is None:
            continue
        history = session.get_history(message_id)
        shape[message_id] = (
            [message.get("id") for message in history],
            session.get_path_length(message_id),
            storage.get_token_estimate(message_id),
        )
        assert storage.get_token_estimate(message_id) == estimate_message_tokens(history), message_id
    leaf = session.get_latest_leaf()
    shape["leaf"] = leaf["id"] if leaf else None
    shape["history"] = [message.get("id") for message in session.get_history()]
    return shape


@pytest.mark.parametrize("deleted", ["m1", "m2", "m3", "m4", "b1", "b2"])
def test_a_deletion_leaves_what_the_shared_code_leaves(make_store: Callable[[], Any], deleted: str) -> None:
    """A root, a fork point, a middle, the latest leaf and a branch: the same tree as ``delete_messages`` leaves."""
    manager = _manager(make_store)
    fast, shared = _tree(manager, "fast"), _tree(manager, "shared")
    manager.delete_message(fast, deleted)
    manager.get_session(shared).delete_messages([deleted])
    assert manager.get_session(fast).get_message(deleted) is None
    assert _shape(manager, fast) == _shape(manager, shared)
    found = {hit.id for query in ("line", "branch") for hit in manager.get_session(fast).search(query)}
    assert found == set(MESSAGES) - {deleted}  # and its search vector went with it


def test_children_move_to_the_parent_and_the_leaf_is_found_again(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    manager.delete_message(session_id, "m2")
    session = manager.get_session(session_id)
    assert [message["id"] for message in session.get_history("m4")] == ["m1", "m3", "m4"]
    assert [message["id"] for message in session.get_history("b2")] == ["m1", "b1", "b2"]
    assert session.get_path_length("b2") == 3
    manager.delete_message(session_id, "b2")  # the latest leaf: the latest message left without children
    assert session.get_latest_leaf() == text_message("b1", "a branch")
    manager.delete_message(session_id, "m1")  # a root: its children become roots
    assert [message["id"] for message in session.get_history("m4")] == ["m3", "m4"]
    assert [message["id"] for message in session.get_history("b1")] == ["b1"]
    for message_id in ("m3", "m4", "b1"):
        manager.delete_message(session_id, message_id)
    assert session.get_latest_leaf() is None and session.get_history() == []


def test_a_managers_delete_messages_of_one_id_is_that_deletion_and_skips_an_id_not_stored(
    make_store: Callable[[], Any],
) -> None:
    """What an agent framework's "remove the last item" sends: one id, through the one-message deletion."""
    manager = _manager(make_store)
    fast, shared = _tree(manager, "fast"), _tree(manager, "shared")
    manager.delete_messages(fast, ["m2"])
    manager.get_session(shared).delete_messages(["m2"])
    assert _shape(manager, fast) == _shape(manager, shared)
    assert manager.list()[0].id == fast  # stamped
    newer = manager.create("newer").id
    manager.delete_messages(fast, ["m2"])  # no longer stored: skipped, and nothing stamped
    assert manager.list()[0].id == newer
    with pytest.raises(SessionNotFoundError):
        _manager(make_store, "intruder").delete_messages(fast, ["m3"])
    with pytest.raises(NotFoundError, match="Session 'no-such-session' not found"):
        manager.delete_messages("no-such-session", ["m3"])
    assert manager.get_session(fast).get_message("m3") is not None


def test_a_deletion_stamps_the_session(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    newer = manager.create("newer").id
    assert manager.list()[0].id == newer
    manager.delete_message(session_id, "m4")
    assert manager.list()[0].id == session_id


def test_another_namespace_cannot_delete_and_nothing_is_written(make_store: Callable[[], Any]) -> None:
    owner = _manager(make_store)
    session_id = _tree(owner)
    newer = owner.create("newer").id
    intruder = _manager(make_store, "intruder")
    with pytest.raises(SessionNotFoundError):
        intruder.delete_message(session_id, "m2")
    assert session_id not in intruder._sessions
    assert owner.get_session(session_id).get_message("m2") == text_message("m2", "line 2 " * 2)
    assert owner.list()[0].id == newer  # not stamped either
    with pytest.raises(SessionNotFoundError):
        owner.delete_message("no-such-session", "m1")
    assert "no-such-session" not in owner._sessions


def test_an_unknown_message_is_not_found_names_the_message_and_stamps_nothing(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    newer = manager.create("newer").id
    stamped = manager.get(session_id)
    for unknown in ("nope", 7):
        with pytest.raises(NotFoundError, match="not found in session") as refused:
            manager.delete_message(session_id, unknown)  # type: ignore[arg-type]
        assert not isinstance(refused.value, SessionNotFoundError)
    assert manager.get(session_id) == stamped and manager.list()[0].id == newer
    assert session_id in manager._sessions  # the session itself was found
    assert len(manager.get_history(session_id)) == 4


def test_a_session_deleted_elsewhere_cannot_lose_a_message(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    manager.get_session(session_id)  # cached in this manager
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.delete_message(session_id, "m1")
    assert session_id not in manager._sessions


def test_the_status_event_reports_the_new_leafs_estimate(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    events: list[dict[str, Any]] = []
    session = manager.get_session(session_id).on_event(events.append)
    manager.delete_message(session_id, "b2")
    [status] = [event for event in events if event.get("type") == "session_status"]
    assert status["tokenEstimate"] == session.estimate_tokens() > 0


@pytest.mark.parametrize("deleted", ["m1", "m2", "m3", "m5"], ids=["above", "overlay-start", "overlay-end", "below"])
def test_a_deletion_around_a_compaction_overlay_keeps_every_estimate_right(
    make_store: Callable[[], Any], backend: str, monkeypatch: pytest.MonkeyPatch, deleted: str
) -> None:
    """An overlay's end is measured from its compacted history, and one the deletion breaks goes: the shared code."""
    from threadloom.storage.tree import SqlSessionProvider

    shared = SqlSessionProvider.delete_message
    taken: list[str | None] = []

    def counted(provider: Any, message_id: str, **options: Any) -> Any:
        taken.append(options.get("registered_in"))
        return shared(provider, message_id, **options)

    monkeypatch.setattr(SqlSessionProvider, "delete_message", counted)
    manager = _manager(make_store)
    session_id = manager.create("overlaid").id
    for index in range(1, 7):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    manager.add_compaction(session_id, "a summary of lines two and three", "m2", "m3")
    manager.delete_message(session_id, deleted)
    session = manager.get_session(session_id)
    for leaf in {"m1", "m2", "m3", "m4", "m5", "m6"} - {deleted}:
        assert session.storage.get_token_estimate(leaf) == estimate_message_tokens(session.get_history(leaf)), leaf
    ids = [message["id"] for message in session.get_history()]
    overlay_kept = deleted in ("m1", "m5")
    assert (len(session.get_compactions()) == 1) is overlay_kept
    assert ids[-2:] == (["m4", "m6"] if deleted == "m5" else ["m5", "m6"])
    if backend.startswith("postgres"):  # the function wrote nothing and answered 'overlay' only at or above m3
        assert taken == (["tenant"] if deleted != "m5" else []), taken


@pytest.mark.parametrize("write", ["delete several", "clear"])
def test_a_managers_deletion_of_several_and_clear_check_and_stamp_in_their_transaction(
    make_store: Callable[[], Any], write: str
) -> None:
    """The session's check and stamp go first in the write's own transaction, so another tenant's call, or one
    for a session deleted by another process meanwhile, writes nothing (not even the session's head row)."""

    def run(manager: SessionManager, session_id: str) -> None:
        if write == "clear":
            manager.clear_messages(session_id)
        else:
            manager.delete_messages(session_id, ["m3", "b2", "not-stored"])

    manager = _manager(make_store)
    session_id = _tree(manager)
    newer = manager.create("newer").id
    with pytest.raises(SessionNotFoundError):
        run(_manager(make_store, "intruder"), session_id)
    assert len(manager.get_history(session_id)) == 4 and manager.list()[0].id == newer
    run(manager, session_id)
    assert manager.list()[0].id == session_id  # stamped
    expected = [] if write == "clear" else ["m1", "m2", "b1"]
    assert [message["id"] for message in manager.get_history(session_id)] == expected
    # a session deleted by another process after this manager cached it: refused, nothing of it comes back
    empty = manager.create("emptied").id
    manager.get_session(empty)
    assert _manager(make_store).delete(empty)
    with pytest.raises(SessionNotFoundError):
        run(manager, empty)
    assert empty not in manager._sessions
    storage: Any = manager.get_session(session_id).storage
    rows = storage._database.query_once(
        "SELECT count(*) FROM threadloom_session_heads WHERE session_id = :sid", {"sid": empty}
    )
    assert [list(row) for row in rows] == [[0]]
