"""Block rows belong to one owner, (namespace, session id), and keyed session ids are secret, on every backend.

A row is read, written and deleted only through its owner, so the same key in two namespaces or two
sessions is two rows; migration 0015 gives every row stored by version 14 its owner without loss.
Keyed ids are derived with the database's secret (migration 0016); sessions opened before keep theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.clock import utc_now
from threadloom.core.keys import legacy_keyed_session_id
from threadloom.core.manager import SessionManager
from threadloom.storage.registry import SqlSessionRegistry

from tests.support.schema_versions import store_before

BEFORE_OWNERS = 15
BEFORE_SECRET = 16


@pytest.fixture
def store_at_version_14(backend: str, tmp_path: Path) -> Iterator[Any]:
    """A store whose schema stops before block owners (migration 0015 not applied yet)."""
    yield from store_before(BEFORE_OWNERS, backend, tmp_path)


@pytest.fixture
def store_at_version_15(backend: str, tmp_path: Path) -> Iterator[Any]:
    """A store whose schema stops before the keyed session secret (migration 0016 not applied yet)."""
    yield from store_before(BEFORE_SECRET, backend, tmp_path)


def test_the_migration_gives_every_stored_block_its_owner_without_loss(store_at_version_14: Any) -> None:
    # Given rows written by version 14: two tenants' sessions, a frozen prompt, a block of no session
    store = store_at_version_14
    now = utc_now()
    rows = [
        ("memory_a1", "a1", "A's memory"),
        ("_system_prompt_a1", "a1", "A's prompt"),
        ("memory_b1", "b1", "B's memory"),
        ("memory_gone", "gone", "a session no registry row names"),
        ("shared-notes", None, "a library block of no session"),
    ]
    with store.database.write() as tx:
        for session_id, namespace in (("a1", "tenant-a"), ("b1", "tenant-b")):
            tx.execute(
                "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
                "VALUES (:id, :namespace, 'n', :now, :now, 1)",
                {"id": session_id, "namespace": namespace, "now": now},
            )
        for key, session_id, content in rows:
            tx.execute(
                "INSERT INTO threadloom_context_blocks (key, session_id, content, updated_at) "
                "VALUES (:key, :sid, :content, :now)",
                {"key": key, "sid": session_id, "content": content, "now": now},
            )
    # When the store migrates
    assert BEFORE_OWNERS in store.migrate()
    # Then every row is still there, owned by its session's namespace and session
    stored = store.database.query_once(
        "SELECT namespace, session_id, key, content FROM threadloom_context_blocks ORDER BY key", {}
    )
    assert sorted(tuple(row) for row in stored) == sorted(
        [
            ("tenant-a", "a1", "memory_a1", "A's memory"),
            ("tenant-a", "a1", "_system_prompt_a1", "A's prompt"),
            ("tenant-b", "b1", "memory_b1", "B's memory"),
            ("", "gone", "memory_gone", "a session no registry row names"),
            ("", "", "shared-notes", "a library block of no session"),
        ]
    )
    # and the sessions read them through their owners, as before
    tenant_a = SessionManager(store, namespace="tenant-a").with_context("memory").with_cached_prompt()
    assert tenant_a.get_session("a1").get_context_block("memory").content == "A's memory"  # type: ignore[union-attr]
    assert tenant_a.get_session("a1").freeze_system_prompt() == "A's prompt"
    assert store.context_provider("shared-notes").get() == "a library block of no session"
    assert store.context_provider("memory_gone", session_id="gone").get() == "a session no registry row names"


def test_the_same_key_under_two_owners_is_two_rows(make_store: Any) -> None:
    store = make_store()
    one = store.context_provider("memory_s", session_id="s", namespace="tenant-a")
    other_namespace = store.context_provider("memory_s", session_id="s", namespace="tenant-b")
    other_session = store.context_provider("memory_s", session_id="t", namespace="tenant-a")
    one.set("A's")
    other_namespace.set("B's")
    assert (one.get(), other_namespace.get(), other_session.get()) == ("A's", "B's", None)
    prompt_a = store.prompt_store("s", namespace="tenant-a")
    prompt_b = store.prompt_store("s", namespace="tenant-b")
    assert prompt_a.set_if_absent("A frozen") == "A frozen"
    assert prompt_b.set_if_absent("B frozen") == "B frozen"  # not A's row: its own freeze wins
    prompt_b.delete()
    assert (prompt_a.get(), prompt_b.get()) == ("A frozen", None)


def test_sessions_opened_before_the_secret_keep_their_ids_in_their_own_namespace_only(
    store_at_version_15: Any,
) -> None:
    # Given, at version 15: A opened "user-42" (its public id), and B registered A's public id for "user-7"
    store = store_at_version_15
    kept = legacy_keyed_session_id("tenant-a", "user-42")
    squatted = legacy_keyed_session_id("tenant-a", "user-7")
    SqlSessionRegistry(store.database, store.sql, "tenant-a").create("user-42", session_id=kept)
    SqlSessionRegistry(store.database, store.sql, "tenant-b").create("squatter", session_id=squatted)
    # When the store migrates
    assert BEFORE_SECRET in store.migrate()
    # Then A's key still opens A's session, and A's other key a new one that is not B's
    tenant_a = SessionManager(store, namespace="tenant-a")
    assert tenant_a.open_session("user-42").id == kept
    assert tenant_a.session_id_for("user-42") == kept
    fresh = tenant_a.open_session("user-7")
    assert fresh.id != squatted and fresh.name == "user-7"
    assert tenant_a.open_session("user-7").id == fresh.id
    # and a key first opened now gets an id no one computes from the namespace and key alone
    assert tenant_a.open_session("user-99").id != legacy_keyed_session_id("tenant-a", "user-99")
