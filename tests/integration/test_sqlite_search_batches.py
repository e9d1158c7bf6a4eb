"""SQLite indexes messages for search in batches (migration 0011), and search never notices.

An append only marks its row in ``threadloom_message_fts_pending``; every 64th append and every
message search index what waits, each row into its namespace's own index (migration 0024), and a
deleted or rewritten message's row leaves it through ``threadloom_message_fts_stale``. Each test
checks what a search returns right after the writes (the backlog still there) and what the
tables hold, on real SQLite files.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from threadloom import Session, SessionManager, SqliteStore
from threadloom.clock import utc_now
from threadloom.lifecycle import export_sessions, import_sessions
from threadloom.search import searchable_text
from threadloom.storage.migrations import apply_migrations, load_migrations
from threadloom.storage.sqlite.search_index import INDEX_EVERY, SEARCH_BATCH
from threadloom.storage.sqlite.sql import message_index_name

from tests.support.messages import text_message
from tests.support.schema_versions import store_before


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "batches.db")


@pytest.fixture
def store(path: str) -> Any:
    opened = SqliteStore(path)
    yield opened
    opened.close()


def pending(store: SqliteStore) -> list[int]:
    rows = store.database.connection.execute(
        "SELECT message_rowid FROM threadloom_message_fts_pending ORDER BY 1"
    ).fetchall()
    return [row[0] for row in rows]


def indexed(store: SqliteStore) -> dict[int, str]:
    """The rows of every message index: rowid → indexed text; each row sits in its message's namespace's index."""
    connection = store.database.connection
    found: dict[int, str] = {}
    for (table,) in connection.execute("SELECT name FROM threadloom_search_indexes WHERE kind LIKE 'messages%'"):
        for rowid, content in connection.execute(f"SELECT rowid, content FROM {table}").fetchall():
            assert rowid not in found, rowid
            found[rowid] = content
            owner = connection.execute(
                "SELECT s.namespace, m.rowid FROM threadloom_messages m "
                "LEFT JOIN threadloom_sessions s ON s.id = m.session_id WHERE m.rowid = ?",
                (rowid,),
            ).fetchone()
            assert owner is None or table == message_index_name(owner[0]) or rowid in stale(store), rowid
    return found


def stale(store: SqliteStore) -> set[int]:
    """Rowids named for removal from an index by the next batch."""
    rows = store.database.connection.execute("SELECT message_rowid FROM threadloom_message_fts_stale").fetchall()
    return {row[0] for row in rows}


def index_table(store: SqliteStore, session_id: str) -> str:
    """The message index of the namespace holding ``session_id`` (of unregistered sessions without one)."""
    rows = store.database.connection.execute(
        "SELECT namespace FROM threadloom_sessions WHERE id = ?", (session_id,)
    ).fetchall()
    return message_index_name(rows[0][0] if rows else None)


def expected_index(store: SqliteStore) -> dict[int, str]:
    """What indexing every stored message as its append used to would hold: rowid → searchable text."""
    rows = store.database.connection.execute("SELECT rowid, content FROM threadloom_messages").fetchall()
    texts = {rowid: searchable_text(json.loads(content)) for rowid, content in rows}
    return {rowid: text for rowid, text in texts.items() if text}


def assert_invariant(store: SqliteStore) -> None:
    """Every message with searchable text is indexed with exactly that text, or waits; any other row is stale."""
    expected, actual, waiting, leaving = expected_index(store), indexed(store), set(pending(store)), stale(store)
    assert set(actual) - set(expected) <= leaving
    for rowid, text in expected.items():
        assert actual.get(rowid) == text or (rowid in waiting and (rowid not in actual or rowid in leaving)), rowid


def hits(searcher: Any, query: str) -> list[str]:
    return sorted(result.id for result in searcher.search(query, limit=10_000))


def words(count: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [text_message(f"{prefix}{index}", f"word{index} common {prefix}marker") for index in range(count)]


def test_a_search_right_after_appends_finds_every_message(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    for message in words(INDEX_EVERY // 2):
        session.append_message(message)
    # Fewer appends than a batch needs: most messages still wait (the first append's batch took the first)
    assert len(pending(store)) >= INDEX_EVERY // 2 - 1
    assert_invariant(store)

    assert hits(session, "common") == sorted(f"m{index}" for index in range(INDEX_EVERY // 2))
    assert hits(session, "word7") == ["m7"]
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_a_namespace_search_indexes_the_backlog_too(store: SqliteStore) -> None:
    manager = SessionManager.create(store, namespace="n")
    first, second = manager.create("one").id, manager.create("two").id
    manager.append(first, text_message("a", "lighthouse keeper"))
    manager.append(second, text_message("b", "lighthouse beam"))
    manager.append(second, text_message("c", "unrelated"))
    assert pending(store)

    assert {(hit.session_id, hit.id) for hit in manager.search("lighthouse")} == {(first, "a"), (second, "b")}
    assert pending(store) == []


def test_an_update_is_found_by_its_new_text_only(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    session.append_messages([text_message("old", "original alpha"), text_message("x", "filler")])
    assert hits(session, "alpha") == ["old"]  # indexed by that search
    session.append_message(text_message("fresh", "original gamma"))  # still waiting

    session.update_message(text_message("old", "rewritten beta"))
    session.update_message(text_message("fresh", "rewritten delta"))
    assert_invariant(store)

    assert hits(session, "alpha") == [] and hits(session, "gamma") == []
    assert hits(session, "beta") == ["old"] and hits(session, "delta") == ["fresh"]
    assert hits(session, "rewritten") == ["fresh", "old"]
    assert indexed(store) == expected_index(store)


def test_an_update_to_no_text_leaves_nothing_to_find(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    session.append_messages([text_message("a", "vanishing words"), text_message("b", "staying words")])
    assert hits(session, "words") == ["a", "b"]
    session.append_message(text_message("c", "vanishing too"))

    for message_id in ("a", "c"):
        session.update_message({"id": message_id, "role": "user", "parts": [{"type": "step-start"}]})

    assert hits(session, "vanishing") == []
    assert hits(session, "words") == ["b"]
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_a_message_without_searchable_text_never_waits(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    tool_only = {"id": "t", "role": "assistant", "parts": [{"type": "tool-x", "toolCallId": "c", "input": {}}]}
    session.append_message({"id": "seed", "role": "user", "parts": [{"type": "step-start"}]})  # runs the first batch
    session.append_message(tool_only)
    session.append_message({"id": "e", "role": "user", "parts": [{"type": "text", "text": ""}]})
    session.append_messages([{"id": "n", "role": "user", "parts": []}])

    assert pending(store) == []
    assert indexed(store) == {}


def test_deleted_messages_leave_nothing_to_find_and_nothing_waiting(store: SqliteStore) -> None:
    manager = SessionManager.create(store, namespace="n")
    kept, doomed = manager.create("kept").id, manager.create("doomed").id
    manager.append_all(kept, [text_message("k0", "shared needle"), text_message("k1", "indexed needle")])
    assert hits(manager, "needle") == ["k0", "k1"]  # indexed
    manager.append(kept, text_message("k2", "waiting needle"))
    manager.append(kept, text_message("k3", "waiting needle last"))
    manager.append_all(doomed, [text_message("d0", "doomed needle"), text_message("d1", "doomed needle")])
    assert hits(manager, "doomed") == ["d0", "d1"]
    manager.append(doomed, text_message("d2", "doomed needle waiting"))

    # When an indexed and a waiting message are deleted, and a whole session with both
    manager.delete_messages(kept, ["k1", "k3"])
    assert manager.delete(doomed)
    # Then their rowids may still wait, but no search finds them and the next batch drops them
    assert hits(manager, "needle") == ["k0", "k2"]
    assert hits(manager.get_session(kept), "needle") == ["k0", "k2"]
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_a_cleared_session_is_not_found(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    session.append_messages([text_message("a", "cleared text")])
    assert hits(session, "cleared") == ["a"]
    session.append_message(text_message("b", "cleared text waiting"))

    session.clear_messages()

    assert hits(session, "cleared") == []
    assert pending(store) == [] and indexed(store) == {}


def test_a_rowid_freed_while_waiting_is_indexed_with_its_new_message(store: SqliteStore) -> None:
    # Given the newest message, still waiting, deleted: SQLite hands its rowid to the next row
    session = Session.create(store).for_session("s")
    session.append_messages([text_message("a", "first")])
    session.append_message(text_message("b", "stale words"))
    [freed] = pending(store)
    session.delete_messages(["b"])
    # When a new message takes that rowid
    session.append_message(text_message("c", "fresh words"))
    rowid_of_c = store.database.connection.execute("SELECT rowid FROM threadloom_messages WHERE id = 'c'").fetchone()[0]
    assert rowid_of_c == freed and pending(store) == [freed]
    # Then the search finds the new message's text only
    assert hits(session, "words") == ["c"]
    assert hits(session, "stale") == []
    assert indexed(store) == expected_index(store)


def test_a_row_indexed_by_an_older_writer_gives_way(store: SqliteStore, path: str) -> None:
    # Given a waiting message deleted and its rowid reused by a process that indexed its new message
    # at once (version 10 did, in the one shared index of its time), under a rowid that waits
    session = Session.create(store).for_session("s")
    session.append_messages([text_message("a", "first")])
    session.append_message(text_message("b", "stale words"))
    [freed] = pending(store)
    older = sqlite3.connect(path, isolation_level=None)
    try:
        older.execute("BEGIN IMMEDIATE")
        older.execute("DELETE FROM threadloom_messages WHERE id = 'b'")
        older.execute(
            "INSERT INTO threadloom_messages (rowid, session_id, id, seq, parent_id, role, content, depth, tokens, "
            "path_tokens, created_at) VALUES (?, 's', 'c', 3, 'a', 'user', ?, 1, 10, 20, ?)",
            (freed, json.dumps(text_message("c", "fresh words")), utc_now()),
        )
        older.execute(f"INSERT INTO {index_table(store, 's')} (rowid, content) VALUES (?, 'fresh words')", (freed,))
        older.execute("UPDATE threadloom_session_heads SET leaf_id = 'c', next_seq = 4 WHERE session_id = 's'")
        older.execute("COMMIT")
    finally:
        older.close()
    # Then the batch replaces that row with the same text instead of failing on its rowid
    assert hits(session, "words") == ["c"]
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_a_fork_of_waiting_messages_is_searchable(store: SqliteStore) -> None:
    manager = SessionManager.create(store, namespace="n")
    source = manager.create("source").id
    manager.append_all(source, [text_message("i0", "indexed beacon"), text_message("i1", "indexed beacon")])
    assert hits(manager, "beacon") == ["i0", "i1"]
    manager.append(source, text_message("w0", "waiting beacon"))
    manager.append(source, text_message("w1", "waiting beacon"))
    manager.append(source, {"id": "w2", "role": "assistant", "parts": [{"type": "step-start"}]})
    manager.add_compaction(source, "summary beacon of w0", "w0", "w0")
    assert pending(store)

    fork = manager.fork(source, "w2", "fork")

    copies = [message["id"] for message in manager.get_history(fork.id)]
    assert len(copies) == 5
    assert_invariant(store)
    # Indexed sources were copied indexed, waiting ones wait as copies, the summary waits too
    assert hits(manager.get_session(fork.id), "beacon") == sorted(copies[:4])
    assert hits(manager.get_session(fork.id), "summary") == [copies[2]]
    assert {hit.session_id for hit in manager.search("waiting")} == {source, fork.id}
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_a_long_fork_with_overlays_of_a_source_never_searched(store: SqliteStore) -> None:
    # Given a source whose rows are partly indexed by append batches and partly waiting, with overlays
    manager = SessionManager.create(store, namespace="n")
    source = manager.create("source").id
    for index in range(3 * INDEX_EVERY + 10):
        manager.append(source, text_message(f"s{index}", f"turn{index} voyage"))
    manager.add_compaction(source, "summary of the start", "s3", "s40")
    manager.add_compaction(source, "summary of the middle", "s100", "s120")
    assert pending(store) and indexed(store)
    # When it is forked, then searched
    fork = manager.fork(source, f"s{3 * INDEX_EVERY + 9}", "fork")
    copies = manager.get_history(fork.id)
    assert_invariant(store)
    # Then every copy is found by its own text, in the fork, exactly as in the source
    found = manager.get_session(fork.id).search("voyage", limit=10_000)
    expected = {message["id"]: searchable_text(message) for message in copies if "voyage" in searchable_text(message)}
    assert len(expected) == 3 * INDEX_EVERY + 10 - 38 - 21
    assert {hit.id: hit.content for hit in found} == expected
    assert hits(manager.get_session(fork.id), "summary") == sorted([copies[3]["id"], copies[63]["id"]])
    assert indexed(store) == expected_index(store)


def test_appends_alone_keep_the_backlog_small(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    most = 0
    for message in words(10 * INDEX_EVERY + 7):
        session.append_message(message)
        most = max(most, len(pending(store)))
    # Every INDEX_EVERY-th append indexes what waits; no search ran
    assert most <= INDEX_EVERY
    assert len(pending(store)) < INDEX_EVERY
    assert len(indexed(store)) > 9 * INDEX_EVERY
    assert_invariant(store)
    assert len(hits(session, "common")) == 10 * INDEX_EVERY + 7


def test_chains_count_towards_the_batch_and_absorb_their_own_rows(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    session.append_message(text_message("first"))
    for start in range(0, 3 * INDEX_EVERY, INDEX_EVERY // 4 * 3):
        session.append_messages(
            [text_message(f"c{index}", f"chain {index}") for index in range(start, start + INDEX_EVERY // 4 * 3)]
        )
        assert len(pending(store)) < 2 * INDEX_EVERY
    session.append_messages([text_message(f"big{index}") for index in range(5 * INDEX_EVERY)])
    assert len(pending(store)) < INDEX_EVERY
    assert_invariant(store)


def test_a_backlog_larger_than_one_search_batch_is_indexed_whole(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    count = SEARCH_BATCH + SEARCH_BATCH // 2
    session.append_messages(words(count))
    store.database.connection.execute(f"DELETE FROM {index_table(store, 's')}")  # as if nothing had been indexed
    store.database.connection.execute(
        "INSERT OR IGNORE INTO threadloom_message_fts_pending SELECT rowid FROM threadloom_messages"
    )
    assert len(pending(store)) == count

    assert len(session.search("common", limit=count + 1)) == count
    assert pending(store) == []
    assert indexed(store) == expected_index(store)


def test_an_import_is_searchable_at_once(store: SqliteStore) -> None:
    manager = SessionManager.create(store, namespace="default")
    source = manager.create("exported").id
    manager.append_all(source, [text_message("x0", "exported compass"), text_message("x1", "other")])
    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), "default", [source], buffer)
    assert manager.delete(source)
    assert hits(manager, "compass") == []

    import_sessions(store.lifecycle(), "default", io.BytesIO(buffer.getvalue()))

    assert hits(manager, "compass") == ["x0"]
    assert indexed(store) == expected_index(store)


def test_two_stores_on_one_file_interleaved(path: str) -> None:
    first, second = SqliteStore(path), SqliteStore(path)
    try:
        one = Session.create(first).for_session("s")
        two = Session.create(second).for_session("s")
        appended: list[str] = []
        for round_ in range(3 * INDEX_EVERY // 2):
            writer, reader = (one, two) if round_ % 2 else (two, one)
            message_id = f"r{round_}"
            writer.append_message(text_message(message_id, f"turn{round_} shared"))
            appended.append(message_id)
            # Whoever searches sees what the other connection committed just before, and only that
            assert hits(reader, f"turn{round_}") == [message_id]
            if round_ % 5 == 0:
                assert len(hits(reader, "shared")) == len(appended)
        assert hits(one, "shared") == hits(two, "shared") == sorted(appended)
        assert_invariant(first)
        assert indexed(second) == expected_index(second)
    finally:
        first.close()
        second.close()


def test_a_search_waits_for_nothing_when_nothing_waits(store: SqliteStore) -> None:
    session = Session.create(store).for_session("s")
    session.append_message(text_message("a", "quiet"))  # the first append's batch indexes it
    assert pending(store) == []
    statements: list[str] = []
    store.database.connection.set_trace_callback(statements.append)
    try:
        assert hits(session, "quiet") == ["a"]
    finally:
        store.database.connection.set_trace_callback(None)
    assert not any(sql.startswith("BEGIN") for sql in statements)


# ------------------------------------------------------------------ migration 0011


@pytest.fixture
def store_at_version_10(path: str) -> Any:
    """A store whose schema stops before migration 0011, messages indexed as version 10 did it."""
    older = SqliteStore(path)
    apply_migrations(
        older.database,
        [migration for migration in load_migrations(older.migrations_package) if migration.version < 11],
        create_table_sql=older.sql.create_migrations_table,
        applied_at=utc_now(),
    )
    with older.database.write() as tx:
        tx.execute("INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES ('s', 'v2', 4)")
        for seq, (message_id, text) in enumerate(
            [("v0", "legacy harbour"), ("v1", "legacy anchor"), ("v2", "legacy harbour light")], start=1
        ):
            message = text_message(message_id, text)
            tx.execute(
                "INSERT INTO threadloom_messages "
                "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at) "
                "VALUES ('s', :id, :seq, :parent, 'user', :content, :depth, 10, :path, :at)",
                {
                    "id": message_id,
                    "seq": seq,
                    "parent": f"v{seq - 2}" if seq > 1 else None,
                    "content": json.dumps(message, separators=(",", ":")),
                    "depth": seq - 1,
                    "path": 10 * seq,
                    "at": utc_now(),
                },
            )
            # what version 10's append ran: the full-text row in the append's own transaction
            tx.execute(
                "INSERT INTO threadloom_message_fts (rowid, content) "
                "SELECT rowid, :text FROM threadloom_messages WHERE session_id = 's' AND id = :id",
                {"text": text, "id": message_id},
            )
    older.close()
    reopened = SqliteStore(path)
    yield reopened
    reopened.close()


def test_the_migration_keeps_stored_messages_searchable(store_at_version_10: SqliteStore) -> None:
    store = store_at_version_10
    assert 11 in store.migrate()
    session = Session.create(store).for_session("s")
    assert sorted(pending(store)) == [1, 2, 3]  # migration 0024 moves them to their namespace's index
    assert hits(session, "harbour") == ["v0", "v2"]
    assert pending(store) == []

    session.append_message(text_message("v3", "new harbour"))
    session.update_message(text_message("v1", "renamed harbour"))

    assert hits(session, "harbour") == ["v0", "v1", "v2", "v3"]
    assert hits(session, "anchor") == []
    assert indexed(store) == expected_index(store)


def test_the_index_is_what_one_insert_per_message_built(path: str) -> None:
    # Given the same messages, one database indexed by batches, the other by hand one message at a time
    store = SqliteStore(path)
    session = Session.create(store).for_session("s")
    texts = [f"line {index} about {'cats' if index % 3 else 'dogs'} and ünïcödé {index % 7}" for index in range(150)]
    for index, text in enumerate(texts):
        session.append_message(text_message(f"m{index}", text))
    session.search("cats")
    reference = sqlite3.connect(":memory:")
    reference.execute("CREATE VIRTUAL TABLE f USING fts5 (content, tokenize = 'porter unicode61')")
    for index, text in enumerate(texts):
        reference.execute("INSERT INTO f (rowid, content) VALUES (?, ?)", (index + 1, text))
    try:
        for query in ("cats", "dogs", "unicode", "ünïcödé 3", '"about dogs"'):
            table = index_table(store, "s")
            ours = store.database.connection.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rank, rowid",
                (store.sql.match_param(query),),
            ).fetchall()
            theirs = reference.execute(
                "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank, rowid", (store.sql.match_param(query),)
            ).fetchall()
            assert ours == theirs, query
    finally:
        reference.close()
        store.close()


# ------------------------------------------------------------------ migration 0024

MESSAGES_AT_23 = {
    # namespace → session → messages (id, text); "acme" writes "merger" often, "beta" holds the probe pair
    "acme": {"a-deal": [(f"a{index}", f"the merger {index}") for index in range(12)]},
    "beta": {
        "b-one": [("d1", "merger qzkvtrw merger"), ("d2", "qzkvtrw merger qzkvtrw")],
        "b-two": [("d3", "a merger note"), ("d4", "no match here")],
    },
}
ENTRIES_AT_23 = {"acme": [("k1", "merger plans"), ("k2", "merger merger timeline")], "beta": [("e1", "qzkvtrw merger")]}


@pytest.fixture
def store_at_version_23(tmp_path: Path) -> Any:
    """A store at schema 23 holding two namespaces' messages and entries in the shared FTS5 tables of that schema."""
    for older in store_before(24, "sqlite", tmp_path):
        with older.database.write() as tx:
            for namespace, sessions in MESSAGES_AT_23.items():
                for session_id, messages in sessions.items():
                    tx.execute(
                        older.sql.insert_session,
                        {
                            "id": session_id,
                            "namespace": namespace,
                            "name": session_id,
                            "parent_session_id": None,
                            "model": None,
                            "source": None,
                            "subject_id": None,
                            "now": utc_now(),
                        },
                    )
                    tx.execute(
                        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) "
                        "VALUES (:sid, :leaf, :next)",
                        {"sid": session_id, "leaf": messages[-1][0], "next": len(messages) + 1},
                    )
                    for seq, (message_id, text) in enumerate(messages, start=1):
                        tx.execute(
                            "INSERT INTO threadloom_messages "
                            "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at) "
                            "VALUES (:sid, :id, :seq, :parent, 'user', :content, :depth, 10, :path, :at)",
                            {
                                "sid": session_id,
                                "id": message_id,
                                "seq": seq,
                                "parent": messages[seq - 2][0] if seq > 1 else None,
                                "content": json.dumps(text_message(message_id, text), separators=(",", ":")),
                                "depth": seq - 1,
                                "path": 10 * seq,
                                "at": utc_now(),
                            },
                        )
                        # what version 23's batch did: every namespace's rows in the one shared index
                        tx.execute(
                            "INSERT INTO threadloom_message_fts (rowid, content) "
                            "SELECT rowid, :text FROM threadloom_messages WHERE session_id = :sid AND id = :id",
                            {"text": text, "sid": session_id, "id": message_id},
                        )
            for scope, entries in ENTRIES_AT_23.items():
                for key, content in entries:
                    params = {"scope": scope, "label": "knowledge", "key": key, "content": content, "now": utc_now()}
                    tx.execute(
                        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
                        "VALUES (:scope, :label, :key, :content, :now, :now)",
                        params,
                    )
                    tx.execute(
                        "INSERT INTO threadloom_search_entries_fts (rowid, content) SELECT rowid, :content "
                        "FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key",
                        params,
                    )
        yield older


def test_the_migration_moves_every_indexed_row_to_its_namespaces_own_index(store_at_version_23: Any) -> None:
    store = store_at_version_23
    indexed_before = dict(
        store.database.connection.execute("SELECT rowid, content FROM threadloom_message_fts").fetchall()
    )
    assert 24 in store.migrate()
    tables = {row[0] for row in store.database.connection.execute("SELECT name FROM sqlite_master")}
    assert "threadloom_message_fts" not in tables and "threadloom_search_entries_fts" not in tables

    # Every message is found in its namespace, by its own text, and nowhere else
    for namespace, sessions in MESSAGES_AT_23.items():
        manager = SessionManager.create(store, namespace=namespace)
        expected = {message_id for messages in sessions.values() for message_id, text in messages if "merger" in text}
        assert hits(manager, "merger") == sorted(expected)
        for session_id, messages in sessions.items():
            found = manager.get_session(session_id).search("merger", limit=100)
            assert {hit.id: hit.content for hit in found} == {i: t for i, t in messages if "merger" in t}
    assert indexed(store) == indexed_before == expected_index(store)
    assert pending(store) == [] and stale(store) == set()
    # The order now follows the namespace's own statistics only: beta's pair as in a database of beta alone
    beta = SessionManager.create(store, namespace="beta")
    assert [hit.id for hit in beta.get_session("b-one").search("merger")] == ["d1", "d2"]
    assert [hit.id for hit in beta.get_session("b-one").search("qzkvtrw")] == ["d2", "d1"]
    # The entries come back in each scope's own index, on first use
    for scope, entries in ENTRIES_AT_23.items():
        provider = store.search_provider(scope=scope)
        provider.init("knowledge")
        answer = provider.search("merger") or ""
        assert sorted(re.findall(r"^\[(\w+)\]$", answer, flags=re.MULTILINE)) == sorted(
            key for key, content in entries if "merger" in content
        )
    nobody = store.search_provider(scope="nobody")
    nobody.init("knowledge")
    assert nobody.search("merger") is None
    names = {row[0] for row in store.database.connection.execute("SELECT owner FROM threadloom_search_indexes")}
    assert names == {"acme", "beta"}  # a scope that never wrote gets no index


def test_a_session_registered_after_its_messages_moves_to_its_namespaces_index(store: SqliteStore) -> None:
    # Given a bare Session's messages, indexed in the index of unregistered sessions
    session = Session.create(store).for_session("late")
    session.append_messages([text_message("l0", "late lantern"), text_message("l1", "other")])
    assert hits(session, "lantern") == ["l0"]
    # When a namespace registers that session id
    manager = SessionManager.create(store, namespace="n")
    store.registry("n").create("late", session_id="late")
    # Then its namespace's search finds them, and so does the session's own search
    assert hits(manager, "lantern") == ["l0"]
    assert hits(manager.get_session("late"), "lantern") == ["l0"]
    assert indexed(store) == expected_index(store)
