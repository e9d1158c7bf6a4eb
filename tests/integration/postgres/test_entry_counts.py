"""A searchable block's entry count is one row its triggers keep exact (0036), not a scan of the block's entries.

A search block renders "<n> entries indexed." into a session's first prompt, and a new key is
checked against ``max_entries_per_tenant`` (up to 1,000,000). Counting the block's rows made both
O(entries). These tests pin the count through every way an entry comes and goes, in parallel too,
and that reading it reads one row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from threadloom import Session
from threadloom.errors import QuotaExceededError
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.postgres import plan

pytestmark = pytest.mark.postgres


def counted(admin: Any) -> dict[tuple[str, str], int]:
    rows = admin.run("SELECT scope, label, entries FROM threadloom_entry_counts WHERE entries <> 0")
    return {(str(scope), str(label)): int(entries) for scope, label, entries in rows}


def stored(admin: Any) -> dict[tuple[str, str], int]:
    rows = admin.run("SELECT scope, label, count(*) FROM threadloom_search_entries GROUP BY scope, label")
    return {(str(scope), str(label)): int(entries) for scope, label, entries in rows}


def provider(store: Any, scope: str, label: str = "knowledge", max_entries: int | None = None) -> Any:
    entries = store.search_provider(scope=scope, max_entries=max_entries)
    entries.init(label)
    return entries


def test_the_count_follows_new_keys_rewrites_removals_and_bulk_deletes(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    alice, alice_notes, bob = provider(store, "alice"), provider(store, "alice", "notes"), provider(store, "bob")
    for key in ("a", "b", "c", "d"):
        alice.set(key, f"fact {key}")
    alice.set("a", "rewritten")  # the same key again: no new entry
    alice_notes.set("n", "a note")
    bob.set("a", "bob's")
    assert (
        counted(admin) == stored(admin) == {("alice", "knowledge"): 4, ("alice", "notes"): 1, ("bob", "knowledge"): 1}
    )
    assert alice.get() == "4 entries indexed." and alice_notes.get() == "1 entries indexed."
    assert alice.delete("b") and not alice.delete("b")
    admin.run("DELETE FROM threadloom_search_entries WHERE scope = 'alice' AND label = 'knowledge' AND key <> 'a'")
    assert (
        counted(admin) == stored(admin) == {("alice", "knowledge"): 1, ("alice", "notes"): 1, ("bob", "knowledge"): 1}
    )
    assert alice.get() == "1 entries indexed."
    assert provider(store, "nobody").get() is None  # a block never written reads 0, as before


def test_the_quota_counts_from_the_row_and_a_removal_frees_a_place(make_store: Callable[[], Any], admin: Any) -> None:
    entries = provider(make_store(), "tenant", max_entries=2)
    entries.set("one", "1")
    entries.set("two", "2")
    with pytest.raises(QuotaExceededError, match="already holds 2 entries"):
        entries.set("three", "3")
    entries.set("two", "rewritten")  # an existing key is not a new entry
    assert entries.delete("one")
    entries.set("three", "3")
    assert counted(admin) == stored(admin) == {("tenant", "knowledge"): 2}


def test_a_new_key_waits_for_a_writer_holding_the_labels_count(make_store: Callable[[], Any], admin: Any) -> None:
    """The quota is checked against the count row held until the commit: a writer that took the last place
    meanwhile is seen, where a plain read of the row (moved only at the other's commit) saw the place free."""
    entries = provider(make_store(), "tenant", max_entries=2)
    entries.set("one", "1")
    # Given another writer that has checked the count and written the label's last entry, not yet committed
    admin.run("START TRANSACTION")
    assert admin.run(PostgresSql.lock_entry_count, scope="tenant", label="knowledge") == [[1]]
    admin.run(
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
        "VALUES ('tenant', 'knowledge', 'two', '2', now(), now())"
    )
    # When a new key is set beside it
    outcome: list[BaseException | None] = []

    def set_third() -> None:
        try:
            provider(make_store(), "tenant", max_entries=2).set("three", "3")
            outcome.append(None)
        except BaseException as error:  # the thread's outcome is asserted below
            outcome.append(error)

    writer = threading.Thread(target=set_third)
    writer.start()
    writer.join(0.5)
    # Then it waits for the other writer, and once that commits it finds the block full
    assert writer.is_alive() and outcome == []
    admin.run("COMMIT")
    writer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], QuotaExceededError), outcome
    assert "already holds 2 entries" in str(outcome[0])
    assert counted(admin) == stored(admin) == {("tenant", "knowledge"): 2}


def test_parallel_writes_of_new_keys_in_one_block_are_each_counted(make_store: Callable[[], Any], admin: Any) -> None:
    def write_ten(worker: int) -> None:
        entries = provider(make_store(), "tenant")
        for index in range(10):
            entries.set(f"w{worker}-{index}", "text")

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(write_ten, range(6)))
    assert counted(admin) == stored(admin) == {("tenant", "knowledge"): 60}


def test_the_first_prompt_names_the_count_without_reading_the_entries(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    entries = provider(store, "tenant")
    entries.set("k1", "one fact")
    entries.set("k2", "another")
    session = Session.create(store).for_session("s").with_context("knowledge", description="KB", provider=entries)
    assert "2 entries indexed." in session.freeze_system_prompt()
    explained = plan(admin, PostgresSql.count_entries.replace(":scope", "'tenant'").replace(":label", "'knowledge'"))
    assert "threadloom_entry_counts" in explained and "threadloom_search_entries" not in explained


def test_an_entry_cannot_move_to_another_scope_or_label(make_store: Callable[[], Any], admin: Any) -> None:
    provider(make_store(), "alice").set("k", "mine")
    for change in ("scope = 'mallory'", "label = 'other'"):
        with pytest.raises(Exception, match="cannot move to another scope or label"):
            admin.run(f"UPDATE threadloom_search_entries SET {change} WHERE key = 'k'")
    assert counted(admin) == stored(admin) == {("alice", "knowledge"): 1}


def test_truncating_the_entries_empties_the_counts(make_store: Callable[[], Any], admin: Any) -> None:
    provider(make_store(), "alice").set("k", "mine")
    admin.run("TRUNCATE threadloom_search_entries")
    assert counted(admin) == stored(admin) == {}


def test_a_transaction_writing_many_entries_writes_their_count_row_once(
    make_store: Callable[[], Any], admin: Any
) -> None:
    provider(make_store(), "tenant").set("first", "one")
    admin.run("START TRANSACTION")
    try:
        admin.run(
            "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
            "SELECT 'tenant', 'knowledge', 'bulk-' || g, 'text', now(), now() FROM generate_series(1, 500) AS g"
        )
        admin.run("DELETE FROM threadloom_search_entries WHERE key = 'bulk-7'")
        admin.run("SET CONSTRAINTS ALL IMMEDIATE")
        rows = admin.run(
            "SELECT pg_stat_get_xact_tuples_inserted(CAST('threadloom_entry_counts' AS regclass)) "
            "+ pg_stat_get_xact_tuples_updated(CAST('threadloom_entry_counts' AS regclass))"
        )
    finally:
        admin.run("COMMIT")
    assert int(rows[0][0]) == 1
    assert counted(admin) == stored(admin) == {("tenant", "knowledge"): 500}
