"""On PostgreSQL a tenant's session check waits for the block's first read and goes in its round trip.

``storage/checked_reads.py``: inside ``SessionManager.checked_session`` the registry's check is sent in
one pipeline with the first read (``read_together``), each its own snapshot, in the form that fails
when it finds nothing, so that the server skips the read; the read's rows come back only when the check
found the session. Everything else the block sends first (a write, a transaction)
runs the check alone before it; a failed round trip leaves it waiting; a block that reads nothing runs it
at its end; and it belongs to the thread that opened the block. The API's reads are one round trip
fewer for it (counted here); ``tests/contract/test_checked_reads.py`` checks their answers and refusals
on every backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, Settings
from threadloom.api.use_cases import block_history, compaction, context, history, messages
from threadloom.errors import SessionNotFoundError, StorageError, StorageTimeoutError, StorageUnavailableError
from threadloom.live.status import status_report
from threadloom.storage.checked_reads import checked_first, settle_waiting_check

from tests.contract.test_checked_reads import _session
from tests.integration.postgres.test_round_trips import RoundTrips

pytestmark = pytest.mark.postgres


@pytest.fixture
def runtime(make_store: Callable[[], Any], tmp_path: Path) -> Runtime:
    """The HTTP API's runtime over a PostgresStore; the session is ``tests/contract/test_checked_reads.py``'s."""
    return Runtime(Settings(skills_dir=str(tmp_path), compaction_mode="inline"), store=make_store())


def test_the_api_reads_check_the_tenant_in_the_round_trip_of_their_first_read(runtime: Runtime) -> None:
    session_id = _session(runtime)
    limits = runtime.limits
    expected = {
        # Each was one round trip more: the registry read ahead of it
        "context blocks": (lambda m: context.context_blocks(m, session_id), 1),
        "context block": (lambda m: context.context_block(m, session_id, "memory"), 1),
        "block history": (
            lambda m: block_history.block_history(m, session_id, "memory", limits, limit=None, cursor=None),
            1,
        ),
        "branch points": (lambda m: history.branch_points(m, session_id), 1),
        "search": (lambda m: history.search_session(m, session_id, "lighthouse", None, limits), 1),
        "compactions": (lambda m: compaction.compactions(m, session_id, limits, limit=None, cursor=None), 1),
        # The message's check, then its page of children
        "branches": (lambda m: messages.branches(m, session_id, "m2", limits, limit=None, cursor=None), 2),
        # The latest compaction request, then the estimate
        "status": (lambda m: status_report(m, session_id), 2),
        # The model's tools through the API (and MCP): a search of the session's messages in one, of a
        # block in two (the session's loaded skills, then the search), a memory write in two (the leaf, the write)
        "search tool": (
            lambda m: context.call_tool(m, session_id, "search_context", {"label": "knowledge", "query": "x"}),
            2,
        ),
        "session search tool": (lambda m: context.call_tool(m, session_id, "session_search", {"query": "x"}), 1),
        "memory tool": (
            lambda m: context.call_tool(m, session_id, "set_context", {"label": "memory", "content": "new"}),
            2,
        ),
        # An append to a block (what is stored, then the write) and a revert (the version, then the write)
        "block append": (
            lambda m: context.write_context_block(
                m, session_id, "memory", content="more", mode="append", limits=runtime.limits
            ),
            2,
        ),
        "block revert": (
            lambda m: block_history.revert_block(m, session_id, "memory", version=1, based_on_version=None),
            2,
        ),
    }
    for name, (read, trips) in expected.items():
        counter = RoundTrips()
        with counter.counting() as sent:
            read(runtime.manager("owner"))
        assert len(sent) == trips, (name, sent)
        # A read by key goes with the check (by key too) without the timeouts statement, as it would alone
        by_key = ("context blocks", "context block", "block append")
        assert counter.together_timeouts[0] == (name not in by_key), (name, counter)
        assert sent[0].startswith("TOGETHER SELECT threadloom_require_session(:names | "), (name, sent)
        # And another tenant is refused in that same one round trip; the server skipped its read
        with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
            read(runtime.manager("intruder"))
        assert len(sent) == 1, (name, sent)


def test_the_read_that_carries_a_refused_check_hands_back_no_rows(runtime: Runtime) -> None:
    session_id = _session(runtime)
    database = runtime.store.database
    answered: list[Any] = []
    with pytest.raises(SessionNotFoundError), runtime.manager("intruder").checked_session(session_id):
        answered.append(
            database.query_once("SELECT content FROM threadloom_messages WHERE session_id = :sid", {"sid": session_id})
        )
    assert answered == []


def test_a_write_or_a_transaction_runs_the_check_alone_before_it(runtime: Runtime, admin: Any) -> None:
    session_id = _session(runtime)
    database = runtime.store.database
    insert = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
        "VALUES (:n, :s, 'x', 'y', now())"
    )
    for open_write in (
        lambda: database.execute_once(insert, {"n": "owner", "s": session_id}),
        lambda: database.write().__enter__(),
    ):
        with (
            RoundTrips().counting() as sent,
            pytest.raises(SessionNotFoundError),
            runtime.manager("intruder").checked_session(session_id),
        ):
            open_write()
        assert len(sent) == 1 and sent[0].startswith("SELECT SELECT subject_id FROM threadloom_sessions"), sent
    assert admin.run("SELECT count(*) FROM threadloom_context_blocks WHERE key = 'x'") == [[0]]
    # The owner's write goes after its check, alone
    with RoundTrips().counting() as sent, runtime.manager("owner").checked_session(session_id):
        database.execute_once(insert, {"n": "owner", "s": session_id})
    assert len(sent) == 2 and sent[0].startswith("SELECT SELECT subject_id FROM threadloom_sessions"), sent
    assert admin.run("SELECT count(*) FROM threadloom_context_blocks WHERE key = 'x'") == [[1]]


def test_a_failed_round_trip_leaves_the_check_waiting_and_it_runs_at_the_end(runtime: Runtime) -> None:
    session_id = _session(runtime)
    database = runtime.store.database
    broken = ("SELECT no_such_column FROM threadloom_messages WHERE session_id = :sid", {"sid": session_id})
    # The owner gets the statement's own error; the check, whose answer that error hid, runs again at the end
    with (
        RoundTrips().counting() as sent,
        pytest.raises(StorageError) as raised,
        runtime.manager("owner").checked_session(session_id),
    ):
        database.query_once(*broken)
    assert not isinstance(raised.value, SessionNotFoundError)
    assert len(sent) == 2 and sent[1].startswith("SELECT SELECT subject_id FROM threadloom_sessions"), sent
    # Another tenant gets the refusal, whatever the block's own statement: the check failed first
    with (
        RoundTrips().counting() as sent,
        pytest.raises(SessionNotFoundError),
        runtime.manager("intruder").checked_session(session_id),
    ):
        database.query_once(*broken)
    assert len(sent) == 1, sent


def test_a_refused_check_makes_the_server_skip_the_reads_that_went_with_it(runtime: Runtime, admin: Any) -> None:
    """A refused request runs the check by key and nothing else: its timing says nothing of the session.

    A sequence's ``nextval`` is not undone by a rollback, so it shows whether the server ran the read.
    """
    session_id = _session(runtime)
    database = runtime.store.database
    admin.run("DROP SEQUENCE IF EXISTS threadloom_test_reads_run")
    admin.run("CREATE SEQUENCE threadloom_test_reads_run")
    read = ("SELECT nextval('threadloom_test_reads_run') FROM threadloom_sessions WHERE id = :id", {"id": session_id})
    try:
        for send in (
            lambda: database.query_once(*read),
            lambda: database.read_together([read, read]),
            lambda: database.query_once(*read, by_key=True),
        ):
            with (
                RoundTrips().counting() as sent,
                pytest.raises(SessionNotFoundError),
                runtime.manager("intruder").checked_session(session_id),
            ):
                send()
            assert len(sent) == 1 and sent[0].startswith("TOGETHER SELECT threadloom_require_session("), sent
        assert admin.run("SELECT last_value, is_called FROM threadloom_test_reads_run") == [[1, False]]
        # The owner's read runs, in the same single round trip
        with RoundTrips().counting() as sent, runtime.manager("owner").checked_session(session_id):
            assert database.read_together([read, read]) == [[[1]], [[2]]]
        assert len(sent) == 1, sent
    finally:
        admin.run("DROP SEQUENCE threadloom_test_reads_run")


def test_a_block_inside_another_runs_the_outer_check_first_and_its_own_with_its_read(runtime: Runtime) -> None:
    session_id = _session(runtime)
    other = runtime.manager("owner").create("other").id
    database = runtime.store.database
    check = "SELECT 1 FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    with (
        RoundTrips().counting() as sent,
        checked_first(database, (check, {"namespace": "owner", "id": session_id}), RuntimeError),
        checked_first(database, (check, {"namespace": "owner", "id": other}), RuntimeError),
    ):
        assert database.query_once("SELECT CAST(:v AS int)", {"v": 7}) == [[7]]
    assert len(sent) == 2 and sent[0].startswith("SELECT SELECT 1") and sent[1].startswith("TOGETHER SELECT 1"), sent
    with (
        pytest.raises(LookupError),
        checked_first(database, (check, {"namespace": "owner", "id": session_id}), RuntimeError),
        checked_first(database, (check, {"namespace": "intruder", "id": other}), LookupError),
    ):
        database.query_once("SELECT CAST(:v AS int)", {"v": 7})


def test_the_check_belongs_to_the_thread_that_opened_the_block(runtime: Runtime) -> None:
    session_id = _session(runtime)
    database = runtime.store.database
    elsewhere: list[Any] = []

    def another_request() -> None:
        elsewhere.append(database.query_once("SELECT CAST(:v AS int)", {"v": 5}))

    with (
        RoundTrips().counting() as sent,
        pytest.raises(SessionNotFoundError),
        runtime.manager("intruder").checked_session(session_id),
    ):
        thread = threading.Thread(target=another_request)
        thread.start()
        thread.join()
        assert elsewhere == [[[5]]]  # not refused: the pending check is not that thread's
    assert sent[0].startswith("SELECT SELECT CAST"), sent
    # the block's own check, at its end
    assert sent[1].startswith("SELECT SELECT subject_id FROM threadloom_sessions"), sent


def test_after_a_refusal_the_block_caught_every_statement_is_refused_before_it_is_sent(
    runtime: Runtime, admin: Any
) -> None:
    session_id = _session(runtime)
    database = runtime.store.database
    insert = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
        "VALUES ('owner', :s, 'planted', 'y', now())"
    )
    refusals: list[str] = []
    with (
        RoundTrips().counting() as sent,
        pytest.raises(SessionNotFoundError),
        runtime.manager("intruder").checked_session(session_id),
    ):
        for attempt in (
            lambda: database.query_once("SELECT CAST(:v AS int)", {"v": 1}),
            lambda: database.execute_once(insert, {"s": session_id}),
            lambda: database.read_together([("SELECT CAST(:v AS int)", {"v": 2})]),
            lambda: database.write().__enter__(),
        ):
            try:
                attempt()
            except SessionNotFoundError:
                refusals.append("refused")
    assert refusals == ["refused"] * 4
    assert len(sent) == 1, sent  # only the first read (with the check) left
    assert admin.run("SELECT count(*) FROM threadloom_context_blocks WHERE key = 'planted'") == [[0]]


def test_before_a_side_effect_outside_the_database_the_waiting_check_runs_alone(runtime: Runtime) -> None:
    """``settle_waiting_check``: what the model's skill write calls before the skill store (S3) is written."""
    session_id = _session(runtime)
    database = runtime.store.database
    side_effects: list[str] = []
    with RoundTrips().counting() as sent, runtime.manager("owner").checked_session(session_id):
        settle_waiting_check()
        side_effects.append("written")
        settle_waiting_check()  # answered already: nothing more is sent
        assert database.query_once("SELECT CAST(:v AS int)", {"v": 3}) == [[3]]
    assert side_effects == ["written"]
    assert len(sent) == 2 and sent[0].startswith("SELECT SELECT subject_id FROM threadloom_sessions"), sent
    assert sent[1].startswith("SELECT SELECT CAST"), sent  # the read went alone, the check answered
    with (
        RoundTrips().counting() as sent,
        pytest.raises(SessionNotFoundError),
        runtime.manager("intruder").checked_session(session_id),
    ):
        settle_waiting_check()
        side_effects.append("written by another tenant")
    assert side_effects == ["written"] and len(sent) == 1, sent
    settle_waiting_check()  # outside any block: nothing to run


def test_when_the_check_cannot_run_at_the_end_the_blocks_own_error_is_raised(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block that failed for want of the server (a timeout) and whose check then cannot run either
    raises its own error, which says what happened; only a refusal takes its place."""
    session_id = _session(runtime)
    database = runtime.store.database

    def unavailable(*_args: Any, **_options: Any) -> Any:
        raise StorageUnavailableError("the server went away")

    with pytest.raises(StorageTimeoutError), runtime.manager("intruder").checked_session(session_id):
        monkeypatch.setattr(database, "query_once", unavailable)
        raise StorageTimeoutError("the read timed out")
    monkeypatch.setattr(database, "query_once", lambda *_args, **_options: [])  # the check finds nothing
    with pytest.raises(SessionNotFoundError), runtime.manager("intruder").checked_session(session_id):
        raise StorageTimeoutError("the read timed out")
    # Without an error of its own, the block gets the check's
    monkeypatch.setattr(database, "query_once", unavailable)
    with pytest.raises(StorageUnavailableError), runtime.manager("owner").checked_session(session_id):
        pass


def test_a_session_created_again_for_another_subject_is_refused_in_the_reads_round_trip(
    make_store: Callable[[], Any],
) -> None:
    """The check carries the subject a warm process wired the session's blocks for (``TL412``)."""
    from threadloom.errors import SessionChangedError

    from tests.contract.test_block_scopes import _manager

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-9", subject_id="alice").id
    with warm.checked_session(session_id) as session:
        session.append_context_block("memory", "Name: Alice")
    elsewhere.delete(session_id)
    elsewhere.open_session("user-9", subject_id="dave")
    with RoundTrips().counting() as sent, pytest.raises(SessionChangedError):
        context.context_block(warm, session_id, "memory")
    assert len(sent) == 1 and sent[0].startswith("TOGETHER SELECT threadloom_require_session("), sent
    with RoundTrips().counting() as sent:  # retried: read afresh, Dave's memory
        assert context.context_block(warm, session_id, "memory").content == ""
    # The check went with the registry row's read, which gave the subject, then the blocks were read
    assert sent[0].startswith("TOGETHER SELECT threadloom_require_session(:names | SELECT id, name"), sent
