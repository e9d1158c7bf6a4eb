"""Migration 0017: the append moves the head in the statement that locks it, on a database that has rows.

A database built at version 16 holds sessions written by the old function; after 0017 their chains go on
from the stored leaf with the next seq, a retry still answers the stored message and leaves the head as it
was, and many threads appending to one session still form one chain (no fork, no gap in seq).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from threadloom import PostgresStore, Session
from threadloom.storage.postgres.schema import apply_postgres_migrations, postgres_migrations

from tests.support.postgres import create_database, drop_database, url_for

pytestmark = pytest.mark.postgres

HEAD_FIRST = 17
HEAD = "SELECT leaf_id, next_seq FROM threadloom_session_heads WHERE session_id = :sid"
ROWS = "SELECT id, seq, parent_id, depth FROM threadloom_messages WHERE session_id = :sid ORDER BY seq"


def message(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": f"note {message_id}"}]}


@pytest.fixture
def store_at_version_16() -> Iterator[PostgresStore]:
    name = f"threadloom_test_v16_heads_{os.getpid()}"
    create_database(name)
    store = PostgresStore(url_for(name), auto_migrate=False)  # stays at version 16 until a test migrates it
    apply_postgres_migrations(store.database, [m for m in postgres_migrations() if m.version < HEAD_FIRST])
    yield store
    store.close()
    drop_database(name)


def query(store: PostgresStore, sql: str, **params: Any) -> list[list[Any]]:
    with store.database.read() as tx:
        return [list(row) for row in tx.query(sql, params)]


def test_chains_written_before_the_migration_go_on_from_their_stored_leaf(store_at_version_16: PostgresStore) -> None:
    # Given two sessions written by version 16's append (one with a branch, so its leaf is not its last seq)
    store = store_at_version_16
    old = Session.create(store).for_session("old")
    for index in range(5):
        old.append_message(message(f"o{index}"))
    old.append_message(message("branch"), parent_id="o1")
    Session.create(store).for_session("other").append_message(message("x0"))
    assert query(store, HEAD, sid="old") == [["branch", 7]]

    # When 0017 is applied and the session goes on
    assert apply_postgres_migrations(store.database) == [m.version for m in postgres_migrations() if m.version >= 17]
    after = Session.create(store).for_session("old")
    result = after.append_message(message("next"))

    # Then the new message hangs under the stored leaf, takes the next seq and moves the head
    assert (result.parent_id, result.inserted) == ("branch", True)
    rows = query(store, ROWS, sid="old")
    assert rows[-2:] == [["branch", 6, "o1", 2], ["next", 7, "branch", 3]]
    assert query(store, HEAD, sid="old") == [["next", 8]]
    assert [m["id"] for m in after.get_history()] == ["o0", "o1", "branch", "next"]
    # and the other session is untouched
    assert query(store, ROWS, sid="other") == [["x0", 1, None, 0]]


def test_a_retry_answers_the_stored_message_and_leaves_the_head_as_it_was(store_at_version_16: PostgresStore) -> None:
    store = store_at_version_16
    apply_postgres_migrations(store.database)
    session = Session.create(store).for_session("retry")
    session.append_message(message("a"))
    session.append_message(message("b"))
    head_before = query(store, HEAD, sid="retry")

    again = session.append_message(message("a"))  # a retry of the first message

    assert (again.id, again.parent_id, again.inserted) == ("a", None, False)
    assert query(store, HEAD, sid="retry") == head_before == [["b", 3]]
    assert [row[0] for row in query(store, ROWS, sid="retry")] == ["a", "b"]
    assert session.append_message(message("c")).parent_id == "b"


def test_the_first_append_of_a_session_creates_its_head(store_at_version_16: PostgresStore) -> None:
    store = store_at_version_16
    apply_postgres_migrations(store.database)
    result = Session.create(store).for_session("fresh").append_message(message("root"))
    assert (result.parent_id, result.inserted) == (None, True)
    assert query(store, HEAD, sid="fresh") == [["root", 2]]
    assert query(store, ROWS, sid="fresh") == [["root", 1, None, 0]]


def test_threads_appending_to_one_session_form_one_chain(store_at_version_16: PostgresStore) -> None:
    store = store_at_version_16
    apply_postgres_migrations(store.database)
    stores = [PostgresStore(url_for(f"threadloom_test_v16_heads_{os.getpid()}")) for _ in range(4)]
    errors: list[BaseException] = []

    def append(worker: int, target: PostgresStore) -> None:
        try:
            session = Session.create(target).for_session("busy")
            for index in range(25):
                session.append_message(message(f"w{worker}-{index}"))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=append, args=(n, s)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for target in stores:
        target.close()
    assert errors == []
    rows = query(store, ROWS, sid="busy")
    assert [row[1] for row in rows] == list(range(1, 101))  # no gap in seq
    assert [row[2] for row in rows] == [None] + [row[0] for row in rows[:-1]]  # each under the one before: no fork
    assert [row[3] for row in rows] == list(range(100))
    assert query(store, HEAD, sid="busy") == [[rows[-1][0], 101]]
