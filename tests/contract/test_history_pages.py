"""Paged history reads: the pages of a leaf's history, concatenated, are exactly ``get_history(leaf)``.

Every backend: long chains crossing many jump spans, random trees with nested, overlapping,
superseded and off-branch overlays, every page size, byte budgets, and the stored jump pointers
after appends, deletes, overlays, imports and forks.
"""

from __future__ import annotations

import io
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import PostgresStore, Session, SqliteStore
from threadloom.clock import utc_now
from threadloom.core.manager import SessionManager
from threadloom.errors import ConflictError, NotFoundError, SessionNotFoundError
from threadloom.lifecycle import export_sessions, import_sessions
from threadloom.records import HistoryEntry
from threadloom.storage.dialect import JUMP_SPAN
from threadloom.storage.migrations import apply_migrations, load_migrations
from threadloom.storage.postgres.schema import apply_postgres_migrations, postgres_migrations

from tests.support.messages import text_message

UNLIMITED = 10**12


def comparable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with the summaries' read time left out (each read stamps its own)."""
    return [
        {key: value for key, value in message.items() if key != "createdAt"}
        if message["id"].startswith("compaction_")
        else message
        for message in messages
    ]


def read_pages(session: Session, leaf: str, limit: int, max_bytes: int = UNLIMITED) -> list[list[HistoryEntry]]:
    """Every page of ``leaf``'s history, following the keyset each page ends with."""
    pages: list[list[HistoryEntry]] = []
    start, after, anchor = 0, None, None
    while True:
        page = session.storage.get_history_page(  # type: ignore[attr-defined]
            leaf, start=start, limit=limit, max_bytes=max_bytes, after_id=after, walk_from=anchor
        )
        assert page.entries, "a page before the end of the path is never empty"
        assert len(page.entries) <= limit
        pages.append(page.entries)
        last = page.entries[-1]
        if last.next_depth >= page.path_length:
            return pages
        assert last.next_depth > start
        start, after, anchor = last.next_depth, last.last_id, page.next_anchor


def paged_history(session: Session, leaf: str, limit: int, max_bytes: int = UNLIMITED) -> list[dict[str, Any]]:
    return [entry.message for page in read_pages(session, leaf, limit, max_bytes) for entry in page]


def assert_pages_equal_history(session: Session, leaf: str, limits: tuple[int, ...]) -> None:
    expected = comparable(session.get_history(leaf))
    for limit in limits:
        assert comparable(paged_history(session, leaf, limit)) == expected, f"leaf {leaf}, page size {limit}"
    assert session.storage.count_history(leaf) == len(expected)  # type: ignore[attr-defined]
    for start in (0, len(expected) // 2):  # the count a page read brings, whatever page it is
        page = session.storage.get_history_page(  # type: ignore[attr-defined]
            leaf, start=start, limit=limits[0], max_bytes=UNLIMITED, with_total=True
        )
        assert page.total == len(expected), (leaf, start)


def assert_jumps_exact(store: Any, session_id: str) -> None:
    """Every stored jump is the seq of the ancestor at depth ((depth - 1) // JUMP_SPAN) * JUMP_SPAN (None: a root)."""
    with store.database.read() as tx:
        rows = tx.query(
            "SELECT id, parent_id, depth, jump, seq FROM threadloom_messages WHERE session_id = :sid",
            {"sid": session_id},
        )
    parent = {row[0]: row[1] for row in rows}
    depth = {row[0]: int(row[2]) for row in rows}
    seq = {row[0]: int(row[4]) for row in rows}
    for message_id, _, message_depth, jump, _ in rows:
        expected = None
        if message_depth > 0:
            target = ((message_depth - 1) // JUMP_SPAN) * JUMP_SPAN
            expected = parent[message_id]
            while depth[expected] > target:
                expected = parent[expected]
        assert jump == (None if expected is None else seq[expected]), f"jump of {message_id} at depth {message_depth}"


def chain(session: Session, count: int, prefix: str = "m", parent: str | None = None) -> list[str]:
    ids = [f"{prefix}{index}" for index in range(count)]
    messages = [text_message(message_id, f"message {message_id}") for message_id in ids]
    for start in range(0, count, 400):
        session.append_messages(messages[start : start + 400], parent if start == 0 else ids[start - 1])
    return ids


def test_pages_of_a_long_chain_equal_the_history(store: Any) -> None:
    session = Session.create(store).for_session("s")
    ids = chain(session, 5 * JUMP_SPAN + 7, parent=None)
    assert_pages_equal_history(session, ids[-1], (1, 7, JUMP_SPAN, 200, 1000))
    assert_pages_equal_history(session, ids[100], (3, 50))  # an inner leaf: the path stops there
    assert_jumps_exact(store, "s")


def test_overlays_spanning_page_edges_nested_superseded_and_beyond_the_page(store: Any) -> None:
    session = Session.create(store).for_session("s")
    ids = chain(session, 300, parent=None)
    session.add_compaction("early", "m3", "m9")
    session.add_compaction("inside a replaced range (ignored)", "m5", "m20")
    session.add_compaction("long", "m40", "m250")  # ends far beyond any small page
    session.add_compaction("superseded", "m260", "m262")
    session.add_compaction("latest from m260 wins", "m260", "m270")
    session.add_compaction("a single message", "m280", "m280")
    session.add_compaction("backwards (ignored)", "m290", "m285")
    session.add_compaction("the last message", "m299", "m299")
    assert_pages_equal_history(session, ids[-1], (1, 2, 3, 5, 8, 64, 200))
    assert_pages_equal_history(session, "m100", (1, 4, 50))  # the long overlay's end is not on this path


def test_random_trees_with_overlays_page_exactly_like_the_full_read(store: Any) -> None:
    for seed in range(4):
        rng = random.Random(seed)
        session = Session.create(store).for_session(f"tree-{seed}")
        ids = chain(session, rng.randint(70, 160), prefix=f"t{seed}-", parent=None)
        for branch in range(rng.randint(2, 5)):  # branches hanging off random points, some long
            ids += chain(session, rng.randint(1, 90), prefix=f"t{seed}-b{branch}-", parent=rng.choice(ids))
        leaves = [message_id for message_id in ids if not session.get_branches(message_id)]
        for _ in range(rng.randint(3, 12)):
            leaf = rng.choice(leaves)
            path = [message["id"] for message in session.storage.get_raw_path(leaf)]  # type: ignore[attr-defined]
            first, second = rng.choice(path), rng.choice(path if rng.random() < 0.8 else ids)
            session.add_compaction(f"summary {first}..{second}", first, second)
        for leaf in leaves:
            assert_pages_equal_history(session, leaf, (1, rng.randint(2, 9), 64))
        assert_jumps_exact(store, f"tree-{seed}")


def test_pages_stop_at_the_byte_budget(store: Any) -> None:
    session = Session.create(store).for_session("s")
    rng = random.Random(7)
    messages = [text_message(f"m{index}", "é" * rng.randint(1, 3000)) for index in range(60)]
    session.append_messages(messages)
    session.add_compaction("summary " * 50, "m10", "m12")
    budget = 8000
    pages = read_pages(session, "m59", limit=25, max_bytes=budget)
    for page in pages:
        for entry in page:
            assert entry.size == len(json.dumps(entry.message, separators=(",", ":"), ensure_ascii=False).encode())
        assert len(page) == 1 or sum(entry.size + 1 for entry in page) <= budget
    flat = [entry.message for page in pages for entry in page]
    assert comparable(flat) == comparable(session.get_history("m59"))
    assert len(pages) > 60 * 1500 * 2 // budget // 2  # the budget, not the count, ended most pages


def test_a_cursor_notices_a_changed_tree_and_a_deleted_leaf(store: Any) -> None:
    session = Session.create(store).for_session("s")
    ids = chain(session, 150, parent=None)
    first = session.storage.get_history_page("m149", start=0, limit=70, max_bytes=UNLIMITED)  # type: ignore[attr-defined]
    last = first.entries[-1]
    session.delete_messages(["m20"])  # every later message moves up one level
    with pytest.raises(ConflictError):
        session.storage.get_history_page(
            "m149", start=last.next_depth, limit=70, max_bytes=UNLIMITED, after_id=last.last_id
        )  # type: ignore[attr-defined]
    assert_pages_equal_history(session, "m149", (13, 64))
    assert_jumps_exact(store, "s")
    session.delete_messages([ids[-1]])
    with pytest.raises(NotFoundError):
        session.storage.get_history_page("m149", start=0, limit=10, max_bytes=UNLIMITED)  # type: ignore[attr-defined]


def test_jumps_stay_exact_through_deletes_overlays_updates_imports_and_forks(store: Any) -> None:
    manager = SessionManager(store)
    sid = manager.create_session("long").id
    session = manager.get_session(sid)
    chain(session, 260, parent=None)
    chain(session, 80, prefix="side", parent="m100")
    session.delete_messages(["m10", "m11", "m64", "m150"])  # children move up: depths below change
    session.add_compaction("overlay", "m30", "m200")
    session.update_message(text_message("m5", "a much longer text " * 40))
    assert_jumps_exact(store, sid)
    assert_pages_equal_history(session, "m259", (9, 100))
    assert_pages_equal_history(session, "side79", (9, 100))

    fork = manager.fork(sid, "m259", "fork")
    assert_jumps_exact(store, fork.id)
    forked = manager.get_session(fork.id)
    leaf = forked.storage.get_latest_leaf_id()  # type: ignore[attr-defined]
    assert comparable(paged_history(forked, leaf, 37)) == comparable(forked.get_history(leaf))

    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), "default", [sid], buffer)
    assert manager.delete(sid)
    import_sessions(store.lifecycle(), "default", io.BytesIO(buffer.getvalue()))
    assert_jumps_exact(store, sid)
    assert_pages_equal_history(manager.get_session(sid), "m259", (9, 100))


@pytest.fixture
def store_at_version_4(backend: str, tmp_path: Path) -> Iterator[Any]:
    """A store whose schema stops before the jump pointers (migration 0005 not applied yet)."""
    if backend == "sqlite":
        sqlite_store = SqliteStore(str(tmp_path / "v4.db"))
        older = [m for m in load_migrations(sqlite_store.migrations_package) if m.version < 5]
        apply_migrations(
            sqlite_store.database,
            older,
            create_table_sql=sqlite_store.sql.create_migrations_table,
            applied_at=utc_now(),
        )
        yield sqlite_store
        sqlite_store.close()
        return
    from tests.support.postgres import create_database, drop_database, url_for

    name = f"threadloom_test_v4_{os.getpid()}"
    create_database(name)
    postgres_store = PostgresStore(url_for(name))
    apply_postgres_migrations(postgres_store.database, [m for m in postgres_migrations() if m.version < 5])
    yield postgres_store
    postgres_store.close()
    drop_database(name)


def test_the_migration_backfills_the_jumps_of_stored_messages(store_at_version_4: Any) -> None:
    # Given messages written before migration 0005: a long chain and a branch, as version 4 stored them
    store = store_at_version_4
    rows = [(f"m{index}", f"m{index - 1}" if index else None, index) for index in range(300)]
    rows += [(f"b{index}", f"b{index - 1}" if index else "m70", 71 + index) for index in range(90)]
    with store.database.write() as tx:
        tx.execute("INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES ('s', 'm299', 391)")
        for seq, (message_id, parent_id, depth) in enumerate(rows, start=1):
            content = json.dumps(text_message(message_id), separators=(",", ":"))
            tx.execute(
                "INSERT INTO threadloom_messages "
                "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at) "
                "VALUES ('s', :id, :seq, :parent, 'user', :content, :depth, 10, :path, :at)",
                {
                    "id": message_id,
                    "seq": seq,
                    "parent": parent_id,
                    "content": content,
                    "depth": depth,
                    "path": 10 * (depth + 1),
                    "at": utc_now(),
                },
            )
    # When the store migrates
    assert 5 in store.migrate()
    # Then every stored row has its jump, and pages read like the whole history
    assert_jumps_exact(store, "s")
    session = Session.create(store).for_session("s")
    assert_pages_equal_history(session, "m299", (7, 200))
    assert_pages_equal_history(session, "b89", (64,))


def test_the_walk_anchor_is_only_a_shortcut_however_the_tree_changed(store: Any) -> None:
    # Given a long chain with a side branch, read a first page that hands out an anchor
    session = Session.create(store).for_session("s")
    ids = chain(session, 8 * JUMP_SPAN, parent=None)
    chain(session, 6 * JUMP_SPAN, prefix="side", parent=ids[2 * JUMP_SPAN])
    leaf = ids[-1]

    def resume(walk_from: tuple[int, str] | None) -> list[HistoryEntry]:
        return session.storage.get_history_page(  # type: ignore[attr-defined, no-any-return]
            leaf,
            start=first.entries[-1].next_depth,
            limit=50,
            max_bytes=UNLIMITED,
            after_id=first.entries[-1].last_id,
            walk_from=walk_from,
        ).entries

    first = session.storage.get_history_page(leaf, start=0, limit=50, max_bytes=UNLIMITED)  # type: ignore[attr-defined]
    anchor = first.next_anchor
    assert anchor is not None and anchor[1] != leaf
    anchor_depth = ids.index(anchor[1])
    assert anchor_depth % JUMP_SPAN == 0 and anchor_depth >= 99  # at or past the next page's last depth
    assert resume(anchor) == resume(None)
    # Then an anchor that is no ancestor of the leaf (a message of another branch, a wrong seq or id,
    # or one above the page) is not used: the page is the one read from the leaf
    with store.database.read() as tx:
        seqs = dict(tx.query("SELECT id, seq FROM threadloom_messages WHERE session_id = 's'", {}))
    for forged in [(seqs[anchor[1]], "side10"), (anchor[0] + 1, anchor[1]), (seqs[ids[60]], ids[60])]:
        assert resume(forged) == resume(None)
    # When messages between the page and the anchor, or between the anchor and the leaf, are deleted
    session.delete_messages([ids[80], ids[anchor_depth + 3]])
    assert resume(anchor) == resume(None)
    assert comparable([e.message for e in resume(anchor)]) == comparable(session.get_history(leaf))[50:100]
    # When the anchor itself is deleted, and even appended again with the same id elsewhere (a new seq)
    session.delete_messages([anchor[1]])
    session.append_messages([text_message(anchor[1], "back, on the side branch")], "side20")
    assert resume(anchor) == resume(None)
    assert comparable([e.message for e in resume(anchor)]) == comparable(session.get_history(leaf))[50:100]
    # And a change above the page is still a conflict, anchor or not
    session.delete_messages([ids[10]])
    for walk_from in (anchor, None):
        with pytest.raises(ConflictError):
            resume(walk_from)


def test_a_stored_message_that_is_not_json_is_skipped_by_pages_as_by_the_full_read(store: Any) -> None:
    # Given a chain whose stored contents were damaged outside the library (PostgreSQL sends a page as
    # one JSON value built from them, and reads such a page again as rows)
    session = Session.create(store).for_session("s")
    ids = chain(session, 3 * JUMP_SPAN, parent=None)
    damaged = {
        ids[5]: '{"id": "m5", "role": "user", "parts": [',
        ids[70]: '{"a": 1}],[71,"fake",3,{"id":"fake","role":"user","parts":[]}',
        ids[71]: "[1, 2]",
        ids[150]: "",
    }
    with store.database.write() as tx:
        for message_id, content in damaged.items():
            tx.execute(
                "UPDATE threadloom_messages SET content = :content WHERE session_id = 's' AND id = :id",
                {"content": content, "id": message_id},
            )
    # Then every page size reads what the full read does: the damaged rows skipped, nothing invented
    expected = comparable(session.get_history(ids[-1]))
    assert len(expected) == len(ids) - len(damaged)
    for limit in (1, 2, 7, 64, 200):  # a page never ends on damaged rows alone: it reads on to a readable one
        assert comparable(paged_history(session, ids[-1], limit)) == expected, limit


def test_a_page_read_in_a_namespace_reads_nothing_of_a_session_outside_it(store: Any) -> None:
    manager = SessionManager(store, namespace="tenant-a")
    sid = manager.create_session("a's").id
    ids = chain(manager.get_session(sid), 150, parent=None)
    expected = comparable(manager.get_session(sid).get_history(ids[-1]))

    def page(session_id: str, namespace: str) -> list[dict[str, Any]]:
        slice_ = store.session_provider(session_id).get_history_page(
            ids[-1], start=0, limit=60, max_bytes=UNLIMITED, namespace=namespace
        )
        return [entry.message for entry in slice_.entries]

    assert comparable(page(sid, "tenant-a")) == expected[:60]
    for session_id, namespace in [(sid, "tenant-b"), (sid, ""), (sid, "tenant-a "), ("nobody", "tenant-a")]:
        with pytest.raises(SessionNotFoundError, match=f"Session {session_id!r} not found"):
            page(session_id, namespace)


def test_a_page_without_a_leaf_reads_the_latest_leafs_history_and_says_which(store: Any) -> None:
    # Given a session with a side branch that is not the latest, an overlay and one without messages
    manager = SessionManager(store, namespace="tenant-a")
    sid = manager.create_session("a's").id
    session = manager.get_session(sid)
    ids = chain(session, 150, parent=None)
    session.append_messages([text_message("side", "a side branch")], ids[40])
    latest = chain(session, 30, prefix="late", parent=ids[100])  # appended last: the latest leaf
    session.add_compaction("a summary", "m10", "m30")
    expected = comparable(session.get_history(latest[-1]))
    provider = store.session_provider(sid)
    for namespace in ("tenant-a", None):
        # When a page is read with no leaf (with and without the tenant check)
        first = provider.get_history_page(
            None, start=0, limit=40, max_bytes=UNLIMITED, namespace=namespace, with_total=True
        )
        # Then it is the latest leaf's first page, and the slice names that leaf and the history's length
        assert first.leaf_id == latest[-1]
        assert first.total == len(expected)
        assert comparable([entry.message for entry in first.entries]) == expected[:40]
        # And the next page, read from that leaf as a cursor would, continues it
        last = first.entries[-1]
        second = provider.get_history_page(
            first.leaf_id, start=last.next_depth, limit=40, max_bytes=UNLIMITED, after_id=last.last_id
        )
        assert comparable([entry.message for entry in second.entries]) == expected[40:80]
    # A session without messages: an empty slice naming no leaf; another tenant's: not found
    empty = manager.create_session("empty").id
    nothing = store.session_provider(empty).get_history_page(
        None, start=0, limit=40, max_bytes=UNLIMITED, namespace="tenant-a", with_total=True
    )
    assert (nothing.entries, nothing.leaf_id, nothing.total) == ([], None, 0)
    with pytest.raises(SessionNotFoundError):
        provider.get_history_page(None, start=0, limit=40, max_bytes=UNLIMITED, namespace="tenant-b")
