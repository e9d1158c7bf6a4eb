"""A manager's append checks and stamps the session registry in the append's own transaction, on every backend.

``SessionManager.append_message`` (so every append through the HTTP API) used to read the session
first, append, then stamp its activity: three round trips on PostgreSQL, and a session deleted
between the check and the append still got its message. Now the storage does all three in one
transaction: the fast paths (PostgreSQL's ``threadloom_append_registered_message``, SQLite's memo
and its one read) and the shared path the rare append takes (an id that ends a compaction overlay).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import Session, SessionManager
from threadloom.errors import ConflictError, NotFoundError, SessionNotFoundError, ValidationError

from tests.support.messages import text_message


def _manager(make_store: Callable[[], Any], namespace: str = "tenant") -> SessionManager:
    return SessionManager.create(make_store(), namespace=namespace)


def _first_listed(manager: SessionManager) -> str:
    """The session with the latest activity (the listing's first)."""
    return manager.list()[0].id


def _ids(manager: SessionManager, session_id: str) -> list[str]:
    return [str(message["id"]) for message in manager.get_history(session_id)]


def test_an_append_stamps_the_session_and_moves_it_first_in_the_listing(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    first = manager.create("first").id
    second = manager.create("second").id
    assert _first_listed(manager) == second
    before = manager.get(first)
    result = manager.append_message(first, text_message("m1", "hello"))
    assert result.inserted and result.parent_id is None
    after = manager.get(first)
    assert before is not None and after is not None and after.updated_at >= before.updated_at
    assert _first_listed(manager) == first
    assert _ids(manager, first) == ["m1"]
    # consecutive appends (SQLite's memo path) keep stamping
    for index in range(2, 5):
        manager.append_message(first, text_message(f"m{index}", "more"))
        manager.append_message(second, text_message(f"s{index}", "other"))
    assert _ids(manager, first) == ["m1", "m2", "m3", "m4"]
    assert _first_listed(manager) == second


def test_another_namespace_cannot_append_and_nothing_is_written(make_store: Callable[[], Any]) -> None:
    owner = _manager(make_store)
    session_id = owner.create("mine").id
    owner.append_message(session_id, text_message("m1", "hello"))
    stamped = owner.get(session_id)
    intruder = _manager(make_store, "intruder")
    for parent in ({}, {"parent_id": "m1"}, {"parent_id": None}):
        with pytest.raises(SessionNotFoundError, match="not found"):
            intruder.append_message(session_id, text_message("x1", "planted"), **parent)
    with pytest.raises(NotFoundError):
        intruder.append(session_id, text_message("x2", "planted"))
    assert _ids(owner, session_id) == ["m1"]
    assert owner.get_session(session_id).get_message("x1") is None
    assert owner.get(session_id) == stamped  # no stamp from the refused appends
    assert intruder.list() == []


def test_a_session_deleted_elsewhere_gets_no_message(make_store: Callable[[], Any]) -> None:
    """The manager holding the session appends after another process deleted it: refused, nothing resurrected."""
    manager = _manager(make_store)
    session_id = manager.create("short-lived").id
    manager.append_message(session_id, text_message("m1", "hello"))
    manager.append_message(session_id, text_message("m2", "again"))  # the session is cached and warm
    assert _ids(manager, session_id) == ["m1", "m2"]
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.append_message(session_id, text_message("m3", "too late"))
    fresh = _manager(make_store)
    assert fresh.get(session_id) is None
    assert Session.create(make_store()).for_session(session_id).get_history() == []


def test_a_retry_is_a_no_op_that_still_stamps(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = manager.create("retried").id
    manager.append_message(session_id, text_message("m1", "hello"))
    manager.create("newer")
    again = manager.append_message(session_id, text_message("m1", "hello"))
    assert not again.inserted and again.id == "m1"
    assert _ids(manager, session_id) == ["m1"]
    assert _first_listed(manager) == session_id


def test_a_refused_append_leaves_the_stamp_as_it_was(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = manager.create("guarded").id
    manager.append_message(session_id, text_message("m1", "hello"))
    stamped = manager.get(session_id)
    with pytest.raises(ConflictError):
        manager.append_message(session_id, text_message("m2", "late"), expected_leaf_id="elsewhere")
    with pytest.raises(NotFoundError, match="Parent message"):
        manager.append_message(session_id, text_message("m3", "orphan"), "no-such-parent")
    assert manager.get(session_id) == stamped
    assert _ids(manager, session_id) == ["m1"]


def test_the_shared_path_checks_and_stamps_too(
    make_store: Callable[[], Any], backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id that ends a compaction overlay is appended by the shared code (its estimates are rebuilt)."""
    from threadloom.storage.tree import SqlSessionProvider

    shared = SqlSessionProvider.append_message
    taken: list[str | None] = []

    def counted(provider: Any, message: Any, parent_id: Any = None, **options: Any) -> Any:
        taken.append(options.get("registered_in"))
        return shared(provider, message, parent_id, **options)

    monkeypatch.setattr(SqlSessionProvider, "append_message", counted)
    manager = _manager(make_store)
    session_id = manager.create("overlaid").id
    for index in range(1, 4):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    manager.add_compaction(session_id, "a summary", "m1", "m3")
    manager.create("newer")
    intruder = _manager(make_store, "intruder")
    with pytest.raises(SessionNotFoundError):
        intruder.append_message(session_id, text_message("m3", "line 3"))
    stamped = manager.get(session_id)
    assert _first_listed(manager) != session_id
    result = manager.append_message(session_id, text_message("m3", "line 3"))  # a retry of the overlay's end
    assert not result.inserted
    after = manager.get(session_id)
    assert stamped is not None and after is not None and after.updated_at >= stamped.updated_at
    assert _first_listed(manager) == session_id
    assert manager.get_message_count(session_id) == 3
    if backend.startswith("postgres"):  # the function answered TL001: the shared code ran, with the check
        assert taken == ["tenant"], taken


class _WithoutRegistryCheck:
    """A session provider that hides the registry check, as a provider written elsewhere would lack it."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    def __getattr__(self, name: str) -> Any:
        if name == "stamp_registered":
            raise AttributeError(name)
        return getattr(self._provider, name)

    def append_message(self, message: Any, parent_id: Any = None, **options: Any) -> Any:
        assert "registered_in" not in options
        return self._provider.append_message(message, parent_id, **options)


class _StoreWithoutRegistryCheck:
    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def session_provider(self, session_id: str) -> Any:
        return _WithoutRegistryCheck(self._store.session_provider(session_id))


def test_a_storage_without_the_check_is_checked_first_and_stamped_after(make_store: Callable[[], Any]) -> None:
    manager = SessionManager.create(_StoreWithoutRegistryCheck(make_store()), namespace="tenant")
    session_id = manager.create("elsewhere").id
    assert not manager.get_session(session_id).checks_registry
    manager.create("newer")
    assert manager.append_message(session_id, text_message("m1", "hello")).inserted
    assert _first_listed(manager) == session_id
    intruder = SessionManager.create(_StoreWithoutRegistryCheck(make_store()), namespace="intruder")
    with pytest.raises(NotFoundError):
        intruder.append_message(session_id, text_message("x1", "planted"))
    assert _ids(manager, session_id) == ["m1"]
    # and a Session asked for the check over such a provider says it cannot
    with pytest.raises(ValidationError, match="cannot check the session registry"):
        manager.get_session(session_id).append_message(text_message("m2", "hello"), registered=True)


def test_a_storage_without_the_check_refuses_every_manager_write_and_read_and_caches_nothing(
    make_store: Callable[[], Any],
) -> None:
    """Over such a provider the registry is read first: another tenant's id is a SessionNotFoundError for a
    one-message deletion, an edit and a read alike, and no refused id stays in the manager's cache."""
    store = make_store()
    owner = SessionManager.create(_StoreWithoutRegistryCheck(store), namespace="tenant")
    session_id = owner.create("elsewhere").id
    owner.append_message(session_id, text_message("m1", "hello"))
    intruder = SessionManager.create(_StoreWithoutRegistryCheck(store), namespace="intruder")
    refused = [
        lambda target: intruder.delete_messages(target, ["m1"]),
        lambda target: intruder.delete_message(target, "m1"),
        lambda target: intruder.update_message(target, text_message("m1", "planted")),
        lambda target: intruder.get_message(target, "m1"),
        intruder.get_latest_leaf,
    ]
    for call in refused:
        for target in (session_id, "no-such-session"):
            with pytest.raises(SessionNotFoundError):
                call(target)
    assert not intruder._sessions
    assert owner.get_session(session_id).get_message("m1") == text_message("m1", "hello")
    owner.delete_messages(session_id, ["m1"])  # the owner's own deletion still goes through the read first
    assert _ids(owner, session_id) == []


@pytest.mark.parametrize("guarded", [False, True], ids=["chain", "guarded-chain"])
def test_a_chain_is_checked_and_stamped_in_its_transaction(make_store: Callable[[], Any], guarded: bool) -> None:
    """``append_chain`` and ``append_all``; a guarded chain (``expected_leaf_id``) takes the shared path."""
    manager = _manager(make_store)
    session_id = manager.create("chained").id
    manager.create("newer")
    guard = {"expected_leaf_id": None}
    results = manager.append_chain(session_id, [text_message("c1", "one"), text_message("c2", "two")], **guard)
    assert [result.id for result in results] == ["c1", "c2"] and all(result.inserted for result in results)
    assert _first_listed(manager) == session_id
    manager.create("newest")
    if guarded:
        guard = {"expected_leaf_id": "c2"}
    again = manager.append_chain(session_id, [text_message("c3", "three")], **guard)
    assert again[0].parent_id == "c2"
    assert _first_listed(manager) == session_id
    assert manager.append_all(session_id, [text_message("c4", "four")]) == "c4"
    assert _ids(manager, session_id) == ["c1", "c2", "c3", "c4"]
    stamped = manager.get(session_id)
    intruder = _manager(make_store, "intruder")
    for chain in ([text_message("x1", "planted"), text_message("x2", "planted")], []):
        with pytest.raises(SessionNotFoundError):
            intruder.append_chain(session_id, chain, **guard)
        with pytest.raises(SessionNotFoundError):
            intruder.append_all(session_id, chain)
    assert _ids(manager, session_id) == ["c1", "c2", "c3", "c4"]
    assert manager.get(session_id) == stamped
    assert manager.append_chain(session_id, []) == []  # an empty chain of one's own session: nothing, but found
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.append_chain(session_id, [text_message("c5", "late")])
    assert Session.create(make_store()).for_session(session_id).get_history() == []


def test_upsert_appends_with_the_check_and_rewrites_an_id_already_stored(make_store: Callable[[], Any]) -> None:
    """What an agent framework's session manager calls for every message it saves (the Strands adapter)."""
    manager = _manager(make_store)
    session_id = manager.create("saved message by message").id
    assert manager.upsert(session_id, text_message("u1", "first draft")) == "u1"
    assert manager.upsert(session_id, text_message("a1", "answer")) == "a1"
    manager.create("newer")
    assert manager.upsert(session_id, text_message("u1", "second draft")) == "u1"
    stored = manager.get_session(session_id).get_message("u1")
    assert stored is not None and stored["parts"][0]["text"] == "second draft"
    assert _ids(manager, session_id) == ["u1", "a1"]
    assert _first_listed(manager) == session_id
    with pytest.raises(SessionNotFoundError):
        _manager(make_store, "intruder").upsert(session_id, text_message("u1", "overwritten"))
    stored = manager.get_session(session_id).get_message("u1")
    assert stored is not None and stored["parts"][0]["text"] == "second draft"


def test_refused_ids_leave_nothing_cached_in_the_manager(make_store: Callable[[], Any]) -> None:
    """A manager builds a session object before its append checks the id: a refused one is dropped again."""
    manager = _manager(make_store)
    session_id = manager.create("kept").id
    manager.append_message(session_id, text_message("m1", "hello"))
    for refused, error in (("no-such-session", SessionNotFoundError), ("nul\x00id", ValidationError)):
        with pytest.raises(error):
            manager.append_message(refused, text_message("x1", "planted"))
        assert refused not in manager._sessions
    # an invalid message for a known session keeps it cached; a deleted session is dropped
    with pytest.raises(ValidationError):
        manager.append_message(session_id, {"id": "bad", "role": "nobody", "parts": []})
    assert session_id in manager._sessions
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.append_message(session_id, text_message("m2", "late"))
    assert session_id not in manager._sessions
