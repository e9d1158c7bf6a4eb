"""Contract §4 on PostgreSQL under real contention: many connections, one session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from threadloom import ConflictError, Session
from threadloom.compaction import create_compact_function
from threadloom.compaction.function import CompactContext
from threadloom.records import CompactResult, Message

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres

WRITERS = 8
APPENDS_PER_WRITER = 200


def run_threads(count: int, target: Callable[[int], None]) -> list[BaseException]:
    """Start ``count`` threads at once (barrier) and return whatever they raised."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        barrier.wait()
        try:
            target(index)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_eight_writers_on_their_own_connections_build_one_chain(make_store: Callable[[], Any]) -> None:
    # Given 8 writers, each with its own store and connection, appending to one session without a parent
    stores = [make_store() for _ in range(WRITERS)]

    def writer(index: int) -> None:
        session = Session.create(stores[index]).for_session("shared")
        for step in range(APPENDS_PER_WRITER):
            session.append_message(text_message(f"w{index}-{step}"))

    # When they all append at once
    errors = run_threads(WRITERS, writer)

    # Then every message is stored, in one chain: each attached to the leaf current at its commit
    assert errors == []
    session = Session.create(make_store()).for_session("shared")
    history = session.get_history()
    expected = {f"w{i}-{s}" for i in range(WRITERS) for s in range(APPENDS_PER_WRITER)}
    assert len(history) == WRITERS * APPENDS_PER_WRITER == 1_600
    assert {m["id"] for m in history} == expected
    assert session.get_path_length() == 1_600
    assert session.get_latest_leaf() == history[-1]
    # no hidden sibling anywhere: each message has exactly one child except the leaf
    store = make_store()
    children = store.database.query_once(
        "SELECT parent_id, COUNT(*) FROM threadloom_messages WHERE session_id = 'shared' GROUP BY parent_id"
    )
    assert all(count == 1 for _, count in children)
    assert len(children) == 1_600  # 1,599 parents plus the root's NULL
    # and each writer's own messages keep their order
    for index in range(WRITERS):
        own = [m["id"] for m in history if m["id"].startswith(f"w{index}-")]
        assert own == [f"w{index}-{step}" for step in range(APPENDS_PER_WRITER)]


def test_appends_to_other_sessions_do_not_wait_for_a_locked_session(make_store: Callable[[], Any], admin: Any) -> None:
    # Given a session whose head row is locked by a long transaction elsewhere
    Session.create(make_store()).for_session("busy").append_message(text_message("b0"))
    admin.run("START TRANSACTION")
    admin.run("SELECT 1 FROM threadloom_session_heads WHERE session_id = 'busy' FOR UPDATE")
    blocked_done = threading.Event()

    def append_to_busy() -> None:
        Session.create(make_store()).for_session("busy").append_message(text_message("b1"))
        blocked_done.set()

    waiter = threading.Thread(target=append_to_busy)
    waiter.start()
    try:
        # When another session appends
        started = time.perf_counter()
        Session.create(make_store()).for_session("free").append_message(text_message("f0"))
        elapsed = time.perf_counter() - started
        # Then it completes at once, while the append to the locked session waits
        assert elapsed < 2
        assert not blocked_done.wait(0.5)
    finally:
        admin.run("COMMIT")
    waiter.join(10)
    assert blocked_done.is_set()
    assert [m["id"] for m in Session.create(make_store()).for_session("busy").get_history()] == ["b0", "b1"]


def test_expected_leaf_lets_exactly_one_of_racing_writers_win(make_store: Callable[[], Any]) -> None:
    session = Session.create(make_store()).for_session("race")
    session.append_message(text_message("start"))
    for round_number in range(5):
        leaf = session.get_latest_leaf()
        assert leaf is not None
        stores = [make_store() for _ in range(4)]
        outcomes: list[str] = []

        def writer(
            index: int,
            stores: list[Any] = stores,
            leaf_id: str = leaf["id"],
            r: int = round_number,
            outcomes: list[str] = outcomes,
        ) -> None:
            try:
                Session.create(stores[index]).for_session("race").append_message(
                    text_message(f"r{r}-{index}"), expected_leaf_id=leaf_id
                )
                outcomes.append("won")
            except ConflictError:
                outcomes.append("conflict")

        assert run_threads(4, writer) == []
        assert sorted(outcomes) == ["conflict", "conflict", "conflict", "won"]
        for store in stores:
            store.close()
    history = session.get_history()
    assert len(history) == 6
    assert all(len(session.get_branches(m["id"])) <= 1 for m in history)


def test_compaction_running_while_appends_continue_hides_nothing_it_did_not_read(
    make_store: Callable[[], Any],
) -> None:
    # Given a session with some history and a slow summarizer that records what each run read
    Session.create(make_store()).for_session("busy").append_messages(
        [text_message(f"seed-{i}", "long enough text " * 20) for i in range(20)]
    )
    summarized: set[str] = set()
    summarize = create_compact_function(lambda prompt: time.sleep(0.02) or "summary", tail_token_budget=300)

    def recording(messages: list[Message], context: CompactContext | None = None) -> CompactResult | None:
        summarized.update(str(m["id"]) for m in messages)
        return summarize(messages, context)

    writers_done = threading.Event()
    appended: list[str] = []
    compactions = 0

    def writer(index: int) -> None:
        session = Session.create(make_store()).for_session("busy")
        for step in range(120):
            message_id = f"w{index}-{step}"
            session.append_message(text_message(message_id, "more text " * 10))
            appended.append(message_id)

    def compactor() -> None:
        nonlocal compactions
        session = Session.create(make_store()).for_session("busy").on_compaction(recording)
        while not writers_done.is_set():
            try:
                if session.compact() is not None:
                    compactions += 1
            except ConflictError:
                pass

    background = threading.Thread(target=compactor)
    background.start()
    # When two writers append while compaction runs again and again
    errors = run_threads(2, writer)
    writers_done.set()
    background.join()
    assert errors == []
    assert compactions >= 2

    # Then nothing is lost: the raw chain holds every message, with no branch
    session = Session.create(make_store()).for_session("busy")
    raw = [m["id"] for m in session.storage.get_raw_path()]  # type: ignore[attr-defined]
    assert set(appended) | {f"seed-{i}" for i in range(20)} == set(raw)
    assert len(raw) == 20 + 240
    # and every appended message is in the history, unless an overlay covers it, which only
    # happens to messages a compaction actually read (none appended while it ran is hidden)
    visible = {m["id"] for m in session.get_history()}
    position = {message_id: index for index, message_id in enumerate(raw)}
    covered: set[str] = set()
    for compaction in session.get_compactions():
        start, end = position[compaction.from_message_id], position[compaction.to_message_id]
        covered.update(raw[start : end + 1])
    assert covered and covered <= summarized
    assert set(raw) - covered <= visible
    assert all(message_id in visible or message_id in covered for message_id in appended)


def test_manager_appends_racing_a_delete_never_deadlock_and_leave_nothing_behind(
    make_store: Callable[[], Any],
) -> None:
    """A manager's append locks the session's row, then its head; deleting the session takes them in that order too.

    Four writers, each with its own connection, append to one session while a fifth deletes it after
    a few of their appends. Every append either lands before the delete (and is erased with it) or
    is refused as not found; none fails otherwise (a deadlock, 40P01, would surface as a StorageError),
    and nothing of the session is left afterwards. Ten rounds.
    """
    from threadloom import SessionManager
    from threadloom.errors import SessionNotFoundError

    managers = [SessionManager.create(make_store(), namespace="tenant") for _ in range(5)]
    for round_number in range(10):
        session_id = managers[0].create(f"doomed-{round_number}").id
        started = threading.Event()
        refused: list[int] = []

        def worker(
            index: int,
            session_id: str = session_id,
            started: threading.Event = started,
            refused: list[int] = refused,
        ) -> None:
            if index == 4:
                started.wait(5)
                assert managers[4].delete(session_id)
                return
            for step in range(40):
                try:
                    managers[index].append_message(session_id, text_message(f"r{index}-{step}"))
                except SessionNotFoundError:
                    refused.append(index)
                    return
                if step == 3:
                    started.set()

        assert run_threads(5, worker) == []
        assert refused, "the delete came after every append: the race was not exercised"
        database = make_store().database
        for table in ("threadloom_messages", "threadloom_session_heads"):
            rows = database.query_once(f"SELECT COUNT(*) FROM {table} WHERE session_id = :sid", {"sid": session_id})
            assert rows == [[0]], (table, rows)
        assert managers[0].get(session_id) is None
