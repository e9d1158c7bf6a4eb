"""Every change of a writable block is a version with its provenance, bounded, on every backend.

Read a page (by count and by bytes), read one version, revert to one (a new version); the
history of each block keeps the last N versions or D days; migrations 0020-0022 keep the data
of the schema before each of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.clock import utc_now
from threadloom.core.manager import SessionManager
from threadloom.errors import NotFoundError, ValidationError
from threadloom.records import BlockChange, HistoryPolicy

from tests.support.schema_versions import store_before

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


def _manager(store: Any, policy: HistoryPolicy | None = None) -> SessionManager:
    manager = (
        SessionManager(store, namespace="tenant-a")
        .with_context("memory", scope="subject")
        .with_context("notes")
        .with_context("soul", provider=_Static("You are kind."))
    )
    return manager.with_block_history(policy) if policy is not None else manager


class _Static:
    def __init__(self, text: str) -> None:
        self.text = text

    def get(self) -> str:
        return self.text


def test_each_change_is_a_version_that_says_who_made_it(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store())
    session = manager.get_session(manager.create_session("one", subject_id="alice").id)
    session.append_message({"id": "m1", "role": "user", "parts": [{"type": "text", "text": "I'm Alice"}]})
    session.tools()["set_context"].execute({"label": "memory", "content": "Name: Alice", "action": "append"})
    session.replace_context_block("memory", "Name: Alice B.", change=BlockChange(source="http", request_id="r-1"))
    session.append_context_block("notes", "a session block has history too")
    history, more = session.context_history("memory")
    assert not more
    assert [(v.version, v.content, v.size_bytes) for v in history] == [
        (2, "Name: Alice B.", 14),
        (1, "Name: Alice", 11),
    ]
    assert history[1].change == BlockChange(source="tool", session_id=session.session_id, message_ids=("m1",))
    assert history[0].change == BlockChange(source="http", request_id="r-1")
    assert history[0].created_at >= history[1].created_at and history[0].created_at.endswith("Z")
    assert [v.content for v in session.context_history("notes")[0]] == ["a session block has history too"]
    with pytest.raises(ValidationError, match="keeps no history"):
        session.context_history("soul")


def test_history_pages_by_count_and_by_bytes(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store())
    session = manager.get_session(manager.create_session("one", subject_id="alice").id)
    for index in range(1, 8):
        session.replace_context_block("memory", str(index) * (index * 10))
    page, more = session.context_history("memory", limit=3)
    assert [v.version for v in page] == [7, 6, 5] and more
    page, more = session.context_history("memory", before=5, limit=3)
    assert [v.version for v in page] == [4, 3, 2] and more
    page, more = session.context_history("memory", before=2, limit=3)
    assert [v.version for v in page] == [1] and not more
    # 70 + 60 bytes fit in 135, the third would not: the page stops there, and says more remain
    page, more = session.context_history("memory", limit=10, max_bytes=135)
    assert [v.version for v in page] == [7, 6] and more
    page, more = session.context_history("memory", limit=10, max_bytes=1)
    assert [v.version for v in page] == [7] and more  # never empty


def test_read_one_version_and_revert_to_it(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store())
    session = manager.get_session(manager.create_session("one", subject_id="alice").id)
    session.replace_context_block("memory", "Name: Alice")
    session.replace_context_block("memory", "Name: Alice\nWrong fact")
    assert session.context_version("memory", 1).content == "Name: Alice"
    reverted = session.revert_context("memory", 1, change=BlockChange(source="operator", note="undo"))
    assert (reverted.content, reverted.version) == ("Name: Alice", 3)
    history, _ = session.context_history("memory")
    assert [(v.version, v.change.source) for v in history] == [(3, "operator"), (2, "library"), (1, "library")]
    with pytest.raises(NotFoundError, match="has no stored version 9"):
        session.context_version("memory", 9)


def test_history_is_bounded_by_count_and_by_age(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = _manager(store, HistoryPolicy(keep_versions=3))
    session = manager.get_session(manager.create_session("one", subject_id="alice").id)
    for index in range(1, 7):
        session.replace_context_block("memory", f"v{index}")
    assert [v.version for v in session.context_history("memory")[0]] == [6, 5, 4]
    # With a window of days, versions older than it go (the current one always stays)
    by_age = _manager(store, HistoryPolicy(keep_versions=100, keep_days=1))
    aged = by_age.get_session(by_age.create_session("two", subject_id="bob").id)
    aged.replace_context_block("memory", "old")
    aged.replace_context_block("memory", "older still current")
    with store.database.write() as tx:
        tx.execute(
            "UPDATE threadloom_block_versions SET created_at = :then WHERE owner_id = 'bob'",
            {"then": "2020-01-01T00:00:00.000Z"},
        )
    aged.replace_context_block("memory", "new")
    assert [v.version for v in aged.context_history("memory")[0]] == [3]
    aged.replace_context_block("memory", "newer")
    assert [v.version for v in aged.context_history("memory")[0]] == [4, 3]


@pytest.fixture
def store_at_19(backend: str, tmp_path: Path) -> Iterator[Any]:
    yield from store_before(20, backend, tmp_path)


@pytest.fixture
def store_at_20(backend: str, tmp_path: Path) -> Iterator[Any]:
    yield from store_before(21, backend, tmp_path)


@pytest.fixture
def store_at_21(backend: str, tmp_path: Path) -> Iterator[Any]:
    yield from store_before(22, backend, tmp_path)


def _session_row(store: Any, session_id: str, subject: str | None) -> None:
    with store.database.write() as tx:
        tx.execute(
            "INSERT INTO threadloom_sessions (id, namespace, name, subject_id, created_at, updated_at, activity_seq) "
            "VALUES (:id, 'tenant-a', 'n', :subject, :now, :now, 1)",
            {"id": session_id, "subject": subject, "now": utc_now()},
        )


def test_migrations_20_to_22_keep_blocks_written_by_the_schema_before(store_at_19: Any) -> None:
    # Given a session block and a frozen prompt written by version 19
    store = store_at_19
    _session_row(store, "s1", "alice")
    with store.database.write() as tx:
        for key, content in (("notes_s1", "from before"), ("_system_prompt_s1", "frozen before")):
            tx.execute(
                "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
                "VALUES ('tenant-a', 's1', :key, :content, :now)",
                {"key": key, "content": content, "now": utc_now()},
            )
    # When the store migrates
    assert {20, 21, 22} <= set(store.migrate())
    # Then the block reads as before, at version 0 with no history, and its next change is version 1
    session = _manager(store).with_cached_prompt().get_session("s1")
    assert session.freeze_system_prompt() == "frozen before"
    notes = session.read_context_block("notes")
    assert notes is not None and (notes.content, notes.version) == ("from before", 0)
    assert session.context_history("notes") == ([], False)
    assert session.replace_context_block("notes", "after", based_on_version=0).version == 1
    assert [v.content for v in session.context_history("notes")[0]] == ["after"]


def test_migration_21_keeps_shared_blocks_written_by_version_20(store_at_20: Any) -> None:
    store = store_at_20
    _session_row(store, "s1", "alice")
    with store.database.write() as tx:
        tx.execute(
            "INSERT INTO threadloom_shared_blocks (namespace, scope, subject_id, key, content, version, updated_at) "
            "VALUES ('tenant-a', 'subject', 'alice', 'memory', 'Name: Alice', 4, :now)",
            {"now": utc_now()},
        )
    assert 21 in store.migrate()
    session = _manager(store).get_session("s1")
    memory = session.get_context_block("memory")
    assert memory is not None and (memory.content, memory.version) == ("Name: Alice", 4)
    assert session.replace_context_block("memory", "Name: Alice B", based_on_version=4).version == 5


def test_migration_22_keeps_versions_written_by_version_21(store_at_21: Any) -> None:
    store = store_at_21
    _session_row(store, "s1", "alice")
    with store.database.write() as tx:  # what version 21 stored for a tool call of s1 after m1
        tx.execute(
            "INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, size_bytes, "
            "source, session_id, message_ids, created_at) VALUES ('tenant-a', 'subject', 'alice', 'memory', 1, "
            "'Name: Alice', 11, 'tool', 's1', '[\"m1\"]', :now)",
            {"now": utc_now()},
        )
    assert 22 in store.migrate()
    [kept] = _manager(store).get_session("s1").context_history("memory")[0]
    assert (kept.content, kept.change.session_id, kept.change.message_ids) == ("Name: Alice", "s1", ("m1",))
