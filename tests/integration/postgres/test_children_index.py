"""Migration 0024: children are found through a 64-bit hash of (session, parent), on a database that has rows.

A database built at version 23 holds branched sessions under the old (session_id, parent_id, seq) b-tree;
after 0024 the same children, subtrees and latest leaves come back, the old index is gone, and the new
one is a fraction of its size. Two sessions reuse the same message ids (clients do), so a lookup must
never mix them up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import PostgresStore, Session
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message
from tests.support.schema_versions import store_before

pytestmark = pytest.mark.postgres

CHILDREN_BY_HASH = 24
INDEXES = "SELECT indexname FROM pg_indexes WHERE tablename = 'threadloom_messages' ORDER BY indexname"


@pytest.fixture
def store_at_version_23(tmp_path: Path) -> Iterator[PostgresStore]:
    """A database at version 23 that stays there until a test migrates it."""
    yield from store_before(CHILDREN_BY_HASH, "postgres", tmp_path, auto_migrate=False)


def answers(store: PostgresStore) -> dict[str, Any]:
    """What every children lookup answers, for both sessions."""
    found: dict[str, Any] = {}
    for sid in ("a", "b"):
        run = store.database.query_once
        found[f"{sid} children"] = run(PostgresSql.get_child_ids, {"sid": sid, "id": "m3"})
        found[f"{sid} contents"] = run(PostgresSql.get_children, {"sid": sid, "id": "m3"})
        found[f"{sid} page"] = run(
            PostgresSql.get_children_page, {"sid": sid, "id": "m3", "after_seq": -1, "limit": 2, "budget": 10**6}
        )
        found[f"{sid} subtree"] = run(PostgresSql.subtree, {"sid": sid, "root": "m2"})
        found[f"{sid} leaf"] = run(PostgresSql.find_latest_leaf, {"sid": sid})
    return found


def test_children_subtrees_and_leaves_are_the_same_after_the_migration(store_at_version_23: PostgresStore) -> None:
    # Given two sessions written at version 23 with the same ids, branched differently at m3
    store = store_at_version_23
    for sid, branches in (("a", 3), ("b", 1)):
        session = Session.create(store).for_session(sid)
        session.append_messages([text_message(f"m{i}", f"{sid} {i}") for i in range(6)])
        for branch in range(branches):
            session.append_messages([text_message(f"x{branch}", f"{sid} side {branch}")], "m3")
    before = answers(store)
    assert "threadloom_messages_by_parent" in [row[0] for row in store.database.query_once(INDEXES)]
    # When the store migrates to 0024
    assert CHILDREN_BY_HASH in store.migrate()
    # Then every lookup answers exactly as before, each session its own rows
    after = answers(store)
    assert after == before
    assert [row[0] for row in after["a children"]] == ["m4", "x0", "x1", "x2"]
    assert [row[0] for row in after["b children"]] == ["m4", "x0"]
    assert [row[0] for row in after["a page"]] == [5, 7]  # seqs: keyset order, limit 2
    indexes = [row[0] for row in store.database.query_once(INDEXES)]
    assert "threadloom_messages_children" in indexes and "threadloom_messages_by_parent" not in indexes
    # And appends after the migration keep the index current
    Session.create(store).for_session("a").append_messages([text_message("x9", "late branch")], "m3")
    late = store.database.query_once(PostgresSql.get_child_ids, {"sid": "a", "id": "m3"})
    assert [row[0] for row in late] == ["m4", "x0", "x1", "x2", "x9"]


def test_the_children_index_is_a_fraction_of_the_b_tree_it_replaces(store_at_version_23: PostgresStore) -> None:
    # Given a thousand messages with long ids at version 23
    store = store_at_version_23
    session = Session.create(store).for_session("s" * 36)
    session.append_messages([text_message(f"{i:036d}", "a note") for i in range(1_000)])
    size = "SELECT pg_relation_size(CAST(:name AS regclass))"
    old = store.database.query_once(size, {"name": "threadloom_messages_by_parent"})[0][0]
    # When migrated
    store.migrate()
    new = store.database.query_once(size, {"name": "threadloom_messages_children"})[0][0]
    # Then the new index takes well under half the old one's pages (8 bytes of key instead of 72)
    assert new * 2 < old, (new, old)


def test_a_fresh_database_is_not_left_analyzed_empty(store_at_version_23: PostgresStore) -> None:
    # Given an empty database at version 23, when it migrates to 0024
    store_at_version_23.migrate()
    # Then the message table was not analyzed while empty (reltuples -1: never): analyzed empty, the planner
    # would trust "no rows" and PL/pgSQL would keep the append's sequential scans as the table grew
    reltuples = "SELECT reltuples FROM pg_class WHERE relname = 'threadloom_messages'"
    assert store_at_version_23.database.query_once(reltuples)[0][0] == -1
