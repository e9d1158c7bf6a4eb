"""A manager's edit checks the session registry in the edit's own transaction, on every backend.

``SessionManager.update_message`` (so ``PUT /sessions/{id}/messages/{messageId}``) used to read the
session, read the message, then edit it in a transaction of a statement a round trip. Now the storage
checks the tenant's session inside the edit: on PostgreSQL one call of ``threadloom_update_message``
(migration 0027), which also moves the running estimates below the message in one statement, unless a
compaction overlay ends at or below it (then the shared code rebuilds them, as before).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import SessionManager
from threadloom.errors import NotFoundError, SessionNotFoundError, ValidationError
from threadloom.tokens import estimate_message_tokens

from tests.support.messages import text_message


def _manager(make_store: Callable[[], Any], namespace: str = "tenant") -> SessionManager:
    return SessionManager.create(make_store(), namespace=namespace)


def _estimate_matches_history(manager: SessionManager, session_id: str, leaf_id: str) -> None:
    """The stored running estimate of ``leaf_id`` is what measuring its history gives."""
    session = manager.get_session(session_id)
    expected = estimate_message_tokens(session.get_history(leaf_id))
    assert session.storage.get_token_estimate(leaf_id) == expected, leaf_id


def _tree(manager: SessionManager) -> str:
    """m1 - m2 - m3 - m4, and a branch b1 - b2 under m2."""
    session_id = manager.create("edited").id
    for index in range(1, 5):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    manager.append_message(session_id, text_message("b1", "a branch"), "m2")
    manager.append_message(session_id, text_message("b2", "its next line"))
    return session_id


def test_an_edit_rewrites_the_message_and_moves_every_estimate_below_it(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    before = manager.get_session(session_id).storage.get_token_estimate("m4")
    longer = text_message("m2", "line 2, now a good deal longer than it was, " * 8)
    manager.update_message(session_id, longer)
    session = manager.get_session(session_id)
    assert session.get_message("m2") == longer
    assert session.storage.get_token_estimate("m4") > before
    for leaf in ("m1", "m2", "m3", "m4", "b1", "b2"):
        _estimate_matches_history(manager, session_id, leaf)
    assert [hit.id for hit in session.search("deal")] == ["m2"]  # the search vector was rewritten too
    assert session.search("line 2") and not session.search("nothing")
    # back to a shorter text: the estimates move down again
    manager.update_message(session_id, text_message("m2", "short"))
    for leaf in ("m3", "m4", "b1", "b2"):
        _estimate_matches_history(manager, session_id, leaf)
    assert not session.search("deal")


def test_an_edit_of_the_same_size_changes_no_other_row(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    storage = manager.get_session(session_id).storage
    estimates = {leaf: storage.get_token_estimate(leaf) for leaf in ("m2", "m3", "m4", "b2")}
    manager.update_message(session_id, text_message("m2", "LINE 2"))
    assert {leaf: storage.get_token_estimate(leaf) for leaf in estimates} == estimates
    assert manager.get_session(session_id).get_message("m2") == text_message("m2", "LINE 2")


def test_an_edit_does_not_stamp_the_session(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    newer = manager.create("newer").id
    stamped = manager.get(session_id)
    manager.update_message(session_id, text_message("m1", "edited"))
    assert manager.get(session_id) == stamped
    assert manager.list()[0].id == newer


def test_another_namespace_cannot_edit_and_nothing_is_written(make_store: Callable[[], Any]) -> None:
    owner = _manager(make_store)
    session_id = _tree(owner)
    intruder = _manager(make_store, "intruder")
    with pytest.raises(SessionNotFoundError):
        intruder.update_message(session_id, text_message("m1", "planted"))
    assert session_id not in intruder._sessions
    assert owner.get_session(session_id).get_message("m1") == text_message("m1", "line 1")
    with pytest.raises(SessionNotFoundError):
        owner.update_message("no-such-session", text_message("m1", "planted"))
    assert "no-such-session" not in owner._sessions


def test_an_unknown_message_is_not_found_and_names_the_message(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    with pytest.raises(NotFoundError, match="Message 'nope' not found") as refused:
        manager.update_message(session_id, text_message("nope", "planted"))
    assert not isinstance(refused.value, SessionNotFoundError)
    assert manager.get_session(session_id).get_message("nope") is None
    assert session_id in manager._sessions  # the session itself was found
    with pytest.raises(ValidationError):
        manager.update_message(session_id, {"id": "m1", "role": "nobody", "parts": []})
    assert manager.get_session(session_id).get_message("m1") == text_message("m1", "line 1")


def test_a_session_deleted_elsewhere_cannot_be_edited(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = _tree(manager)
    manager.get_session(session_id)  # cached in this manager
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.update_message(session_id, text_message("m1", "late"))
    assert session_id not in manager._sessions


@pytest.mark.parametrize("edited", ["m1", "m2", "m3", "m5"], ids=["above", "overlay-start", "overlay-end", "below"])
def test_an_edit_around_a_compaction_overlay_keeps_every_estimate_right(
    make_store: Callable[[], Any], backend: str, monkeypatch: pytest.MonkeyPatch, edited: str
) -> None:
    """An overlay's end is measured from its compacted history: an edit at or above it takes the shared code."""
    from threadloom.storage.tree import SqlSessionProvider

    shared = SqlSessionProvider.update_message
    taken: list[str | None] = []

    def counted(provider: Any, message: Any, **options: Any) -> Any:
        taken.append(options.get("registered_in"))
        return shared(provider, message, **options)

    monkeypatch.setattr(SqlSessionProvider, "update_message", counted)
    manager = _manager(make_store)
    session_id = manager.create("overlaid").id
    for index in range(1, 7):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    manager.add_compaction(session_id, "a summary of lines two and three", "m2", "m3")
    manager.update_message(session_id, text_message(edited, f"{edited} rewritten at length, " * 6))
    for leaf in ("m1", "m3", "m4", "m6"):
        _estimate_matches_history(manager, session_id, leaf)
    history = manager.get_history(session_id)
    assert [message["id"] for message in history][-3:] == ["m4", "m5", "m6"]
    if backend.startswith("postgres"):  # the function wrote nothing and answered 'overlay' only at or above m3
        assert taken == (["tenant"] if edited != "m5" else []), taken
