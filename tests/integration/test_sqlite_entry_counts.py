"""SQLite keeps a searchable block's entry count in one row its triggers keep exact (migration 0025).

A search block renders "<n> entries indexed." into a session's first prompt, and a new key is checked
against ``max_entries_per_tenant`` (up to 1,000,000). Counting the block's rows made both grow with the
block (12 ms beside 100,000 entries). These tests pin the count through every way an entry comes and
goes, that an upgrade counts the entries already stored, and that reading it reads one row.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
from threadloom import SqliteStore
from threadloom.errors import QuotaExceededError
from threadloom.storage.sqlite.sql import SqliteSql

from tests.support.schema_versions import store_before

if TYPE_CHECKING:
    from pathlib import Path


def counted(store: SqliteStore) -> dict[tuple[str, str], int]:
    rows = store.database.connection.execute(
        "SELECT scope, label, entries FROM threadloom_entry_counts WHERE entries <> 0"
    ).fetchall()
    return {(scope, label): entries for scope, label, entries in rows}


def stored(store: SqliteStore) -> dict[tuple[str, str], int]:
    rows = store.database.connection.execute(
        "SELECT scope, label, count(*) FROM threadloom_search_entries GROUP BY scope, label"
    ).fetchall()
    return {(scope, label): entries for scope, label, entries in rows}


def provider(store: SqliteStore, scope: str, label: str = "knowledge", max_entries: int | None = None) -> Any:
    entries = store.search_provider(scope=scope, max_entries=max_entries)
    entries.init(label)
    return entries


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = SqliteStore(str(tmp_path / "counts.db"))
    yield opened
    opened.close()


def test_the_count_follows_new_keys_rewrites_removals_and_bulk_deletes(store: SqliteStore) -> None:
    alice, alice_notes, bob = provider(store, "alice"), provider(store, "alice", "notes"), provider(store, "bob")
    for key in ("a", "b", "c", "d"):
        alice.set(key, f"fact {key}")
    alice.set("a", "rewritten")  # the same key again (the upsert's update): no new entry
    alice_notes.set("n", "a note")
    bob.set("a", "bob's")
    expected = {("alice", "knowledge"): 4, ("alice", "notes"): 1, ("bob", "knowledge"): 1}
    assert counted(store) == stored(store) == expected
    assert alice.get() == "4 entries indexed." and alice_notes.get() == "1 entries indexed."
    assert alice.delete("b") and not alice.delete("b")
    connection = store.database.connection
    connection.execute(
        "DELETE FROM threadloom_search_entries WHERE scope = 'alice' AND label = 'knowledge' AND key <> 'a'"
    )
    assert counted(store) == stored(store) == {**expected, ("alice", "knowledge"): 1}
    assert alice.get() == "1 entries indexed." and bob.get() == "1 entries indexed."


def test_a_rolled_back_write_leaves_the_count_as_it_was(store: SqliteStore) -> None:
    entries = provider(store, "tenant")
    entries.set("kept", "one fact")
    with pytest.raises(RuntimeError), store.database.write() as tx:
        tx.execute(
            SqliteSql.upsert_entry, {"scope": "tenant", "label": "knowledge", "key": "gone", "content": "x", "now": "t"}
        )
        raise RuntimeError("the caller gives up")
    assert counted(store) == stored(store) == {("tenant", "knowledge"): 1}


def test_the_quota_reads_the_count_and_a_full_block_still_takes_a_known_key(store: SqliteStore) -> None:
    entries = provider(store, "tenant", max_entries=2)
    entries.set("a", "first")
    entries.set("b", "second")
    with pytest.raises(QuotaExceededError):
        entries.set("c", "third")
    entries.set("a", "first, rewritten")  # a key already stored is not a new entry
    assert counted(store) == stored(store) == {("tenant", "knowledge"): 2}


def test_an_entry_cannot_move_to_another_block(store: SqliteStore) -> None:
    provider(store, "tenant").set("a", "fact")
    with pytest.raises(sqlite3.IntegrityError, match="stays in its block"):
        store.database.connection.execute("UPDATE threadloom_search_entries SET label = 'other' WHERE key = 'a'")
    store.database.connection.execute("UPDATE threadloom_search_entries SET content = 'same block' WHERE key = 'a'")
    assert counted(store) == stored(store) == {("tenant", "knowledge"): 1}


def test_reading_the_count_reads_one_row_not_the_block(store: SqliteStore) -> None:
    provider(store, "tenant").set("a", "fact")  # the store is migrated on first use
    plan = store.database.connection.execute(
        "EXPLAIN QUERY PLAN " + SqliteSql.count_entries, {"scope": "tenant", "label": "knowledge"}
    ).fetchall()
    details = " ".join(str(row[-1]) for row in plan)
    assert "threadloom_entry_counts" in details and "threadloom_search_entries" not in details, details


def test_the_upgrade_counts_the_entries_already_stored(tmp_path: Path) -> None:
    for older in store_before(25, "sqlite", tmp_path):
        with older.database.write() as tx:  # the entries as version 24 stored them
            for scope, label, keys in (("alice", "knowledge", 3), ("bob", "notes", 2)):
                for index in range(keys):
                    tx.execute(
                        SqliteSql.upsert_entry,
                        {"scope": scope, "label": label, "key": f"k{index}", "content": f"fact {index}", "now": "t"},
                    )
        assert 25 in older.migrate()
        assert counted(older) == stored(older) == {("alice", "knowledge"): 3, ("bob", "notes"): 2}
        assert provider(older, "alice").get() == "3 entries indexed."
