"""A namespace's session count is one row its triggers keep exact (0034), not a scan of the namespace.

The searchable-history block renders "<n> sessions available for search." into a session's first
prompt. Counting the namespace's rows made every new session's open O(sessions the tenant holds);
``bench/session_count_at_scale.py`` measures that. These tests pin the count through every way a
session comes and goes, in parallel too, and that reading it reads one row.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from threadloom.core.manager import SessionManager
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message
from tests.support.postgres import plan

pytestmark = pytest.mark.postgres


def counted(admin: Any) -> dict[str, int]:
    return {
        str(namespace): int(sessions)
        for namespace, sessions in admin.run(
            "SELECT namespace, sessions FROM threadloom_namespace_sessions WHERE sessions <> 0"
        )
    }


def stored(admin: Any) -> dict[str, int]:
    return {
        str(namespace): int(sessions)
        for namespace, sessions in admin.run("SELECT namespace, count(*) FROM threadloom_sessions GROUP BY namespace")
    }


def test_the_count_follows_creations_forks_deletions_and_bulk_deletes(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    alice, bob = SessionManager(store, namespace="alice"), SessionManager(store, namespace="bob")
    ids = [alice.create(f"a{index}").id for index in range(5)]
    bob.create("b0")
    alice.append(ids[0], text_message("m1", "hello"))
    alice.fork(ids[0], "m1", "a fork")
    assert counted(admin) == stored(admin) == {"alice": 6, "bob": 1}
    assert alice.count() == len(alice.list()) == 6 and bob.count() == 1
    # A deletion, and one statement deleting several sessions (as a retention sweep does)
    assert alice.delete(ids[1])
    admin.run("DELETE FROM threadloom_sessions WHERE namespace = 'alice' AND id = ANY(:ids)", ids=ids[2:4])
    assert counted(admin) == stored(admin) == {"alice": 3, "bob": 1}
    assert alice.count() == 3
    # A namespace emptied reads 0, and one never used reads 0 too
    admin.run("DELETE FROM threadloom_sessions WHERE namespace = 'bob'")
    assert bob.count() == 0 and SessionManager(store, namespace="nobody").count() == 0


def test_parallel_creations_in_one_namespace_are_each_counted(make_store: Callable[[], Any], admin: Any) -> None:
    def create_ten(worker: int) -> None:
        manager = SessionManager(make_store(), namespace="tenant")
        for index in range(10):
            manager.create(f"w{worker}-{index}")

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(create_ten, range(6)))
    assert counted(admin) == stored(admin) == {"tenant": 60}


def test_the_first_prompt_names_the_count_without_reading_the_namespace(
    make_store: Callable[[], Any], admin: Any
) -> None:
    # Given sessions stored straight into the table (as an import or another process stores them)
    store = make_store()
    manager = SessionManager(store, namespace="tenant").with_searchable_history("history")
    session_id = manager.create("watched").id
    now = datetime.now(UTC)
    for index in range(3):
        admin.run(
            "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
            "VALUES (:id, 'tenant', 'bulk', :now, :now, :seq)",
            id=f"bulk-{index}",
            now=now,
            seq=100 + index,
        )
    # Then a new session's first prompt counts them, and the count reads one row, not the namespace's
    prompt = manager.get_session(session_id).freeze_system_prompt()
    assert "4 sessions available for search." in prompt
    explained = plan(admin, PostgresSql.count_sessions.replace(":namespace", "'tenant'"))
    assert "threadloom_namespace_sessions" in explained and "threadloom_sessions " not in explained + " "


def test_a_session_cannot_move_to_another_namespace(make_store: Callable[[], Any], admin: Any) -> None:
    session_id = SessionManager(make_store(), namespace="alice").create("mine").id
    with pytest.raises(Exception, match="cannot move to another namespace"):
        admin.run("UPDATE threadloom_sessions SET namespace = 'mallory' WHERE id = :id", id=session_id)
    assert counted(admin) == stored(admin) == {"alice": 1}


def test_a_long_transaction_that_created_a_session_holds_back_no_other_creation(
    make_store: Callable[[], Any], admin: Any
) -> None:
    # Given a transaction that created a session in the namespace and is still at work (as an import is)
    SessionManager(make_store(), namespace="tenant").create("first")
    admin.run("START TRANSACTION")
    try:
        admin.run(
            "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
            "VALUES ('importing', 'tenant', 'import', now(), now(), 1000)"
        )
        # When another process creates a session in the same namespace, Then it does not wait for it
        started = time.monotonic()
        SessionManager(make_store(), namespace="tenant").create("meanwhile")
        waited = time.monotonic() - started
    finally:
        admin.run("COMMIT")
    assert waited < 1.0
    assert counted(admin) == stored(admin) == {"tenant": 3}


def count_row_writes(admin: Any, table: str) -> int:
    """Rows of ``table`` this transaction inserted or updated so far."""
    rows = admin.run(
        "SELECT pg_stat_get_xact_tuples_inserted(CAST(:t AS regclass)) "
        "+ pg_stat_get_xact_tuples_updated(CAST(:t AS regclass))",
        t=table,
    )
    return int(rows[0][0])


def test_a_transaction_creating_many_sessions_writes_the_count_row_once(
    make_store: Callable[[], Any], admin: Any
) -> None:
    # Given a namespace that already holds a session
    SessionManager(make_store(), namespace="tenant").create("first")
    # When one transaction creates 600 (one statement of 500, then 100 one by one, as an import does) and
    # deletes one of them
    admin.run("START TRANSACTION")
    try:
        insert = (
            "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
            "SELECT 'bulk-' || g, 'tenant', 'bulk', now(), now(), 1000 + g FROM generate_series(1, :n) AS g"
        )
        admin.run(insert, n=500)
        for index in range(100):
            admin.run(
                "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
                "VALUES (:id, 'tenant', 'one', now(), now(), :seq)",
                id=f"one-{index}",
                seq=5000 + index,
            )
        admin.run("DELETE FROM threadloom_sessions WHERE id = 'bulk-1'")
        admin.run("SET CONSTRAINTS ALL IMMEDIATE")  # the deferred triggers run now, as at the commit
        # Then the count row was written once for the transaction (0034 wrote it 601 times, each finding the
        # row again through every earlier version: a commit that grew with the square of the sessions)
        writes = count_row_writes(admin, "threadloom_namespace_sessions")
    finally:
        admin.run("COMMIT")
    assert writes == 1
    assert counted(admin) == stored(admin) == {"tenant": 600}


def test_a_rolled_back_savepoint_takes_its_sessions_out_of_the_count(make_store: Callable[[], Any], admin: Any) -> None:
    insert = (
        "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
        "VALUES (:id, 'tenant', 'n', now(), now(), :seq)"
    )
    admin.run("START TRANSACTION")
    try:
        admin.run(insert, id="kept", seq=1)
        admin.run("SAVEPOINT before_more")
        admin.run(insert, id="undone-1", seq=2)
        admin.run(insert, id="undone-2", seq=3)
        admin.run("ROLLBACK TO SAVEPOINT before_more")
        admin.run(insert, id="created-and-deleted", seq=4)
        admin.run("DELETE FROM threadloom_sessions WHERE id = 'created-and-deleted'")
    finally:
        admin.run("COMMIT")
    assert counted(admin) == stored(admin) == {"tenant": 1}


def test_a_row_whose_change_was_never_noted_is_still_counted(make_store: Callable[[], Any], admin: Any) -> None:
    # A transaction that began before migration 0036 runs 0034's triggers only: nothing is noted for it
    admin.run("ALTER TABLE threadloom_sessions DISABLE TRIGGER threadloom_sessions_noted")
    try:
        manager = SessionManager(make_store(), namespace="tenant")
        ids = [manager.create(f"s{index}").id for index in range(3)]
        manager.delete(ids[0])
    finally:
        admin.run("ALTER TABLE threadloom_sessions ENABLE TRIGGER threadloom_sessions_noted")
    assert counted(admin) == stored(admin) == {"tenant": 2}
