"""Round trips of what every request does, as the HTTP API configures a session (default profile).

On PostgreSQL each round trip costs more than the work it carries (more again through RDS
Proxy), so these counts are the budget the users' benchmark (bench/users_config.py) relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, Settings
from threadloom.errors import NotFoundError, SessionNotFoundError
from threadloom.storage.postgres import database as database_module
from threadloom.storage.postgres.database import PostgresDatabase
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres


class RoundTrips:
    """Counts what PostgresDatabase sends: each call of run_on is one write and one wait for the server."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.timeouts: list[bool] = []
        """For each statement sent alone: whether the timeouts statement went ahead of it."""
        self.together_timeouts: list[bool] = []
        """The same for each round trip of several statements."""

    @contextmanager
    def counting(self) -> Iterator[list[str]]:
        self.sent = []
        self.timeouts = []
        self.together_timeouts = []
        send = PostgresDatabase.run_on

        def counted(database: PostgresDatabase, connection: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(sql.split(maxsplit=1)[0] + " " + sql[:60])
            self.timeouts.append(bool(kwargs.get("timeouts")))
            return send(database, connection, sql, *args, **kwargs)

        send_together = PostgresDatabase._run_together

        def counted_together(database: PostgresDatabase, connection: Any, statements: Any, **options: Any) -> Any:
            self.sent.append("TOGETHER " + " | ".join(sql[:40] for sql, _ in statements))
            self.together_timeouts.append(options.get("timeouts", True))
            return send_together(database, connection, statements, **options)

        send_batch = PostgresDatabase.run_batch

        def counted_batch(database: PostgresDatabase, connection: Any, statements: Any) -> Any:
            self.sent.append("BATCH " + " | ".join(sql[:40] for sql, _ in statements))
            return send_batch(database, connection, statements)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(PostgresDatabase, "run_on", counted)
            patch.setattr(PostgresDatabase, "_run_together", counted_together)
            patch.setattr(PostgresDatabase, "run_batch", counted_batch)
            yield self.sent


@pytest.fixture
def runtime(make_store: Callable[[], Any], tmp_path: Path) -> Runtime:
    return Runtime(Settings(skills_dir=str(tmp_path), compaction_mode="inline"), store=make_store())


def test_opening_a_new_session_reads_prompt_and_blocks_in_one_round_trip_and_stores_the_prompt_in_one(
    runtime: Runtime,
) -> None:
    manager = runtime.manager("tenant")
    session_id = manager.create("new").id
    trips = RoundTrips()
    with trips.counting() as sent:
        prompt = manager.get_session(session_id).freeze_system_prompt()
    assert prompt
    # The stored prompt (absent) and the blocks of the default profile that live in the database
    # (memory, knowledge, session history) in one statement, then the prompt stored; no BEGIN/COMMIT,
    # and not the loaded skills (read on first use: the prompt does not show them)
    assert len(sent) == 2, sent
    assert not [statement for statement in sent if "loaded_skills" in statement], sent
    [together, insert] = sent
    assert together.startswith("TOGETHER SELECT unnest(threadloom_read_when_missi") and "|" not in together, sent
    assert insert.startswith("INSERT"), sent
    # And a second freeze in this process (the manager keeps the session, its blocks loaded) reads
    # the stored prompt in one round trip, by primary key, sent alone (no timeouts statement)
    trips = RoundTrips()
    with trips.counting() as sent:
        assert manager.get_session(session_id).freeze_system_prompt() == prompt
    assert len(sent) == 1 and trips.timeouts == [False], (sent, trips.timeouts)
    # And in another process, the first freeze finds it in one round trip too: the same call, which
    # reads no block when a prompt is stored (test_append_functions.py)
    elsewhere = Runtime(runtime.settings, store=runtime.store).manager("tenant")
    with RoundTrips().counting() as sent:
        assert elsewhere.get_session(session_id).freeze_system_prompt() == prompt
    assert len(sent) == 1 and sent[0].startswith("TOGETHER SELECT unnest(threadloom_read_when_missi"), sent


def test_reads_when_missing_answer_as_the_statements_would_in_one_call_or_one_by_one(runtime: Runtime) -> None:
    from threadloom.storage.postgres.sql import PostgresSql

    database = runtime.store.database
    runtime.manager("tenant").create("one")
    owner = {"namespace": "tenant", "sid": "s"}
    for key, content in (("stored", "P"), ("memory", "M")):
        database.execute_once(PostgresSql.upsert_block, {**owner, "key": key, "content": content, "now": "2026-12-03"})
    found, missing = (
        (PostgresSql.get_block, {**owner, "key": "stored"}),
        (PostgresSql.get_block, {**owner, "key": "none"}),
    )
    reads = [
        (PostgresSql.get_block, {**owner, "key": "memory"}),
        (PostgresSql.count_entries, {"scope": "tenant", "label": "knowledge"}),
        (PostgresSql.get_block, {**owner, "key": "absent"}),
        (PostgresSql.count_sessions, {"namespace": "tenant"}),
    ]
    each = [database.query_once(sql, params) for sql, params in reads]
    assert each == [[["M"]], [[0]], [], [[1]]]
    with RoundTrips().counting() as sent:
        assert database.read_when_missing(found, reads) == ([["P"]], None)
        assert database.read_when_missing(missing, reads) == ([], [[["M"]], [[0]], [[None]], [[1]]])
    assert len(sent) == 2 and all("threadloom_read_when_missi" in statement for statement in sent), sent
    # A statement the function does not know: the prompt alone, then the reads together
    other = [*reads, ("SELECT CAST(:value AS text)", {"value": "a:b"})]
    with RoundTrips().counting() as sent:
        assert database.read_when_missing(found, other) == ([["P"]], None)
        rows, answers = database.read_when_missing(missing, other)
    assert rows == [] and answers == [*each, [["a:b"]]]
    assert len(sent) == 3 and "threadloom_read_when_missing" not in " ".join(sent), sent


def test_an_append_with_events_and_the_compaction_check_is_one_round_trip(runtime: Runtime) -> None:
    manager = runtime.manager("tenant")
    session = manager.get_session(manager.create("appends").id)
    session.freeze_system_prompt()
    events: list[Any] = []
    session.on_event(events.append)
    session.append_message(text_message("first"))
    sent_timeouts: list[tuple[str, object]] = []
    run = database_module.run_pipelined

    def recorded(connection: Any, sql: str, params: Any, **options: Any) -> Any:
        sent_timeouts.append((sql, options.get("timeouts")))
        return run(connection, sql, params, **options)

    with RoundTrips().counting() as sent, pytest.MonkeyPatch.context() as patch:
        patch.setattr(database_module, "run_pipelined", recorded)
        result = session.append_message(text_message("second"))
    assert result.inserted and events
    assert len(sent) == 1, sent
    # and no timeouts statement goes ahead of it: the append function sets its own lock timeout (0012, 0013)
    [(sql, timeouts)] = sent_timeouts
    assert "threadloom_append_message(" in sql and timeouts is None, sent_timeouts


def test_appends_to_a_session_whose_prompt_is_never_frozen_ask_for_it_once(runtime: Runtime) -> None:
    """The estimate after an append renders the blocks; it used to ask the prompt store again after every append.

    An agent that keeps its messages here and builds its prompt elsewhere never freezes one. Its
    first append in a process reads the absent prompt and the blocks together (one round trip),
    and every later append is the append alone.
    """
    manager = runtime.manager("tenant")
    session = manager.get_session(manager.create("never frozen").id)
    with RoundTrips().counting() as sent:
        first = session.append_message(text_message("first", "hello there"))
    assert len(sent) == 2, sent
    assert sent[1].startswith("TOGETHER SELECT unnest(threadloom_read_when_missi"), sent
    for index in range(3):
        with RoundTrips().counting() as sent:
            later = session.append_message(text_message(f"later-{index}", "and again"))
        assert len(sent) == 1 and "threadloom_append_message(" in sent[0], sent
    # the estimate is still the history's tokens plus the rendered prompt's
    prompt = session.blocks.system_prompt_for_estimate()
    assert prompt and first.token_estimate is not None and later.token_estimate is not None
    assert later.token_estimate == estimate_message_tokens(session.get_history()) + estimate_string_tokens(prompt)


def test_an_append_through_the_api_is_one_round_trip_that_checks_and_stamps_the_session(runtime: Runtime) -> None:
    """The tenant's session check, the append and the activity stamp are one call of one function (0026).

    They were three round trips (the check, the append, then the stamp), and before that six (the stamp was a
    transaction of its own, with a second flush).
    """
    from threadloom.api.models import AppendIn
    from threadloom.api.use_cases.messages import append

    manager = runtime.manager("tenant")
    session_id = manager.create("through the api").id
    manager.get_session(session_id).freeze_system_prompt()
    before = manager.get(session_id)
    run = database_module.run_pipelined
    durable: list[tuple[str, bool]] = []

    def recorded(connection: Any, sql: str, params: Any, **options: Any) -> Any:
        durable.append((sql[:60], not options.get("cache_commit")))
        return run(connection, sql, params, **options)

    body = AppendIn.model_validate({"message": text_message("via-http")})
    with RoundTrips().counting() as sent, pytest.MonkeyPatch.context() as patch:
        patch.setattr(database_module, "run_pipelined", recorded)
        result, inserted = append(manager, session_id, body, runtime.limits)
    assert inserted and result.id == "via-http" and result.token_estimate > 0
    assert len(sent) == 1 and "threadloom_append_registered_message(" in sent[0], sent
    assert [flushed for _, flushed in durable] == [True], durable  # the stamp is as durable as the message
    after = manager.get(session_id)
    assert before is not None and after is not None
    assert after.updated_at >= before.updated_at and after.updated_at != before.updated_at
    assert manager.get_message_count(session_id) == 1
    # another tenant's append to it is refused in the same one round trip, and writes nothing
    other = runtime.manager("other")
    foreign = AppendIn.model_validate({"message": text_message("from-elsewhere")})
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
        append(other, session_id, foreign, runtime.limits)
    assert len(sent) == 1, sent
    assert manager.get(session_id) == after
    assert manager.get_session(session_id).get_message("from-elsewhere") is None
    assert session_id not in other._sessions  # nothing kept for an id that is not the tenant's


def test_a_chain_through_the_api_is_one_round_trip_too(runtime: Runtime) -> None:
    """A turn's user and assistant messages in one request: one call of threadloom_append_registered_within."""
    from threadloom.api.models import AppendIn
    from threadloom.api.use_cases.messages import append

    manager = runtime.manager("tenant")
    session_id = manager.create("a turn at a time").id
    manager.get_session(session_id).freeze_system_prompt()
    body = AppendIn.model_validate({"messages": [text_message("asked"), text_message("answered")]})
    run = database_module.run_pipelined
    statements: list[str] = []

    def recorded(connection: Any, sql: str, params: Any, **options: Any) -> Any:
        statements.append(sql)
        return run(connection, sql, params, **options)

    with RoundTrips().counting() as sent, pytest.MonkeyPatch.context() as patch:
        patch.setattr(database_module, "run_pipelined", recorded)
        result, inserted = append(manager, session_id, body, runtime.limits)
    assert inserted and result.ids == ["asked", "answered"]
    assert len(sent) == 1 and "threadloom_append_registered_within(" in statements[0], statements
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
        append(runtime.manager("other"), session_id, body, runtime.limits)
    assert len(sent) == 1, sent


def test_an_upsert_of_a_new_message_is_one_round_trip(runtime: Runtime) -> None:
    """The Strands adapter saves every message with upsert: it was four round trips (check, read, append, stamp)."""
    manager = runtime.manager("tenant")
    session_id = manager.create("saved one by one").id
    manager.get_session(session_id).freeze_system_prompt()
    manager.upsert(session_id, text_message("first"))
    with RoundTrips().counting() as sent:
        manager.upsert(session_id, text_message("second"))
    assert len(sent) == 1, sent


CONSISTENT_TREE = (
    "SELECT COUNT(*) FROM threadloom_messages m JOIN threadloom_messages p"
    " ON p.session_id = m.session_id AND p.id = m.parent_id"
    " WHERE m.session_id = :sid AND (m.depth <> p.depth + 1 OR m.path_tokens <> p.path_tokens + m.tokens"
    " OR m.jump IS DISTINCT FROM CASE WHEN p.depth % 64 = 0 THEN p.seq ELSE p.jump END)"
)


def test_editing_or_deleting_an_early_message_of_a_long_session_takes_a_few_round_trips(runtime: Runtime) -> None:
    """The estimates below the change are written in one statement, or 256 to a round trip; they were one each.

    An edit of the second message of a 10,000-message session took about 2 s on a local server (10,000
    round trips), more through RDS Proxy. An edit is now one call of ``threadloom_update_message``
    (0027), which moves them all in one UPDATE. A deletion of several messages (``delete_messages``)
    still sends its statements 256 to a round trip, each on its own, in order, so the trigger that keeps
    jump pointers sees every parent already moved when it re-parents the chain below: depth, running
    estimate and jump stay consistent across batch boundaries. A deletion of one message is one call of
    ``threadloom_delete_message`` (0028), which moves the rows below one by one, parents first, inside it.
    """
    manager = runtime.manager("tenant")
    session_id = manager.create("long").id
    session = manager.get_session(session_id)
    session.append_messages([text_message(f"m{index}", f"line {index}") for index in range(700)])
    database = runtime.store.database
    with RoundTrips().counting() as sent:
        session.update_message(text_message("m1", "a much longer line than it was, so every estimate below moves"))
    # one round trip, whatever the session's length: the 698 running estimates below move in the same call
    assert len(sent) == 1 and "threadloom_update_message(" in sent[0], sent
    assert database.query_once(CONSISTENT_TREE, {"sid": session_id}) == [[0]]
    assert session.storage.get_token_estimate() == estimate_message_tokens(session.get_history())  # type: ignore[attr-defined]
    with RoundTrips().counting() as sent:
        session.delete_messages(["m2"])  # m3 and the 696 below it move up a level
    assert len(sent) <= 20, sent
    assert database.query_once(CONSISTENT_TREE, {"sid": session_id}) == [[0]]
    history = session.get_history()
    assert [message["id"] for message in history][:4] == ["m0", "m1", "m3", "m4"] and len(history) == 699
    assert session.get_path_length() == 699
    with RoundTrips().counting() as sent:
        session.delete_message("m3")  # m4 and the 695 below it move up a level, in the same call
    assert len(sent) == 1 and "threadloom_delete_message(" in sent[0], sent
    assert database.query_once(CONSISTENT_TREE, {"sid": session_id}) == [[0]]
    history = session.get_history()
    assert [message["id"] for message in history][:4] == ["m0", "m1", "m4", "m5"] and len(history) == 698
    assert session.get_path_length() == 698
    assert session.storage.get_token_estimate() == estimate_message_tokens(history)  # type: ignore[attr-defined]


def test_an_edit_through_the_api_is_one_round_trip_with_the_tenant_check(runtime: Runtime) -> None:
    """``PUT /sessions/{id}/messages/{messageId}``: it read the session, read the message, edited it in a
    transaction of a statement a round trip and read it back: eleven round trips. Now one call (0027)."""
    from threadloom.api.use_cases.messages import update_message

    manager = runtime.manager("tenant")
    session_id = manager.create("edited over http").id
    for index in range(5):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    before = manager.get(session_id)
    edited = text_message("m1", "line 1, rewritten and longer")
    with RoundTrips().counting() as sent:
        out = update_message(manager, session_id, "m1", edited, runtime.limits)
    assert out.message == edited
    assert len(sent) == 1 and "threadloom_update_message(" in sent[0], sent
    session = manager.get_session(session_id)
    assert session.get_message("m1") == edited
    assert session.storage.get_token_estimate() == estimate_message_tokens(session.get_history())  # type: ignore[attr-defined]
    assert manager.get(session_id) == before  # an edit does not stamp the session
    # another tenant's edit is refused in the same one round trip and writes nothing; so is an unknown message
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
        update_message(runtime.manager("other"), session_id, "m1", text_message("m1", "planted"), runtime.limits)
    assert len(sent) == 1, sent
    with RoundTrips().counting() as sent, pytest.raises(NotFoundError, match="Message 'm9' not found"):
        update_message(manager, session_id, "m9", text_message("m9", "planted"), runtime.limits)
    assert len(sent) == 1, sent
    assert session.get_message("m1") == edited and session.get_message("m9") is None


def test_a_deletion_through_the_api_is_one_round_trip_with_the_tenant_check_and_stamp(runtime: Runtime) -> None:
    """``DELETE /sessions/{id}/messages/{messageId}``: it read the session, read the message, read the session
    again, deleted in a transaction of a statement a round trip, read the estimate for the status event and
    stamped the session: about sixteen round trips. Now one call (0028)."""
    from threadloom.api.use_cases.messages import delete_message

    manager = runtime.manager("tenant")
    session_id = manager.create("deleted over http").id
    for index in range(5):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    newer = manager.create("newer").id
    session = manager.get_session(session_id)
    statuses: list[dict[str, Any]] = []
    session.on_event(statuses.append)
    with RoundTrips().counting() as sent:
        delete_message(manager, session_id, "m2")
    assert len(sent) == 1 and "threadloom_delete_message(" in sent[0], sent
    assert [message["id"] for message in session.get_history()] == ["m0", "m1", "m3", "m4"]
    assert statuses[-1]["tokenEstimate"] == session.estimate_tokens()
    assert manager.list()[0].id == session_id != newer  # stamped in the same call
    # another tenant's deletion is refused in the same one round trip and writes nothing; so is an unknown message
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
        delete_message(runtime.manager("other"), session_id, "m1")
    assert len(sent) == 1, sent
    with RoundTrips().counting() as sent, pytest.raises(NotFoundError, match="Message 'm9' not found"):
        delete_message(manager, session_id, "m9")
    assert len(sent) == 1, sent
    assert [message["id"] for message in session.get_history()] == ["m0", "m1", "m3", "m4"]
    # the library's delete_messages of one id (an agent framework removing its last item) is the same call
    with RoundTrips().counting() as sent:
        manager.delete_messages(session_id, ["m4"])
    assert len(sent) == 1 and "threadloom_delete_message(" in sent[0], sent
    assert [message["id"] for message in session.get_history()] == ["m0", "m1", "m3"]


def test_a_deletion_with_more_below_it_than_one_call_moves_takes_the_shared_path(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving a very large subtree row by row in one statement could outlast the statement timeout: past a
    bound (``MOVED_IN_ONE_CALL``) the function writes nothing and answers 'large', and the shared code moves
    the rows in batches of statements, each bounded by the timeout. The tree ends the same either way."""
    from threadloom.storage.postgres.tree import PostgresSessionProvider

    monkeypatch.setattr(PostgresSessionProvider, "MOVED_IN_ONE_CALL", 2)
    manager = runtime.manager("tenant")
    session_id = manager.create("bounded").id
    for index in range(6):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    newer = manager.create("newer").id
    with RoundTrips().counting() as sent:
        manager.delete_message(session_id, "m1")  # four below it: past the bound
    assert "threadloom_delete_message(" in sent[0] and len(sent) > 3, sent  # 'large', then the shared path
    with RoundTrips().counting() as sent:
        manager.delete_message(session_id, "m4")  # one below it: within
    assert len(sent) == 1, sent
    session = manager.get_session(session_id)
    assert [message["id"] for message in session.get_history()] == ["m0", "m2", "m3", "m5"]
    assert runtime.store.database.query_once(CONSISTENT_TREE, {"sid": session_id}) == [[0]]
    assert session.storage.get_token_estimate() == estimate_message_tokens(session.get_history())  # type: ignore[attr-defined]
    assert manager.list()[0].id == session_id != newer  # the shared path stamped it too


def test_an_edit_with_more_below_it_than_one_call_moves_takes_the_shared_path_in_bounded_statements(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One UPDATE of every estimate below an edit near the root of 150,000 messages took 4.4 to 4.9 s, near the
    statement timeout: past the bound the function answers 'large' (migration 0029), and the shared code writes
    the estimates in statements of at most ``ESTIMATES_PER_STATEMENT`` rows, sent together."""
    from threadloom.storage import tree as shared_tree
    from threadloom.storage.postgres.tree import PostgresSessionProvider

    monkeypatch.setattr(PostgresSessionProvider, "MOVED_IN_ONE_CALL", 2)
    monkeypatch.setattr(shared_tree, "ESTIMATES_PER_STATEMENT", 2)
    manager = runtime.manager("tenant")
    session_id = manager.create("edited at length").id
    for index in range(7):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    with RoundTrips().counting() as sent:
        manager.update_message(session_id, text_message("m1", "line 1, now much longer than it was before"))
    assert "threadloom_update_message(" in sent[0], sent  # answered 'large', then the shared path
    [batch] = [statement for statement in sent if statement.startswith("BATCH")]
    assert batch.count("UPDATE threadloom_messages m SET path_to") == 3, batch  # 5 rows below, 2 a statement
    session = manager.get_session(session_id)
    for leaf in ("m1", "m2", "m4", "m6"):
        assert session.storage.get_token_estimate(leaf) == estimate_message_tokens(session.get_history(leaf))  # type: ignore[attr-defined]
    assert runtime.store.database.query_once(CONSISTENT_TREE, {"sid": session_id}) == [[0]]
    with RoundTrips().counting() as sent:
        manager.update_message(session_id, text_message("m5", "line 5, longer too"))  # one below it: within
    assert len(sent) == 1, sent


def test_reading_a_message_or_the_leaf_through_the_api_is_one_statement_with_the_tenant_check(
    runtime: Runtime,
) -> None:
    """``GET …/messages/{messageId}`` and ``GET …/leaf`` read the session's row, then the message: two round
    trips. One statement joins them now; it finds rows by their keys, so no timeouts statement goes with it."""
    from threadloom.api.use_cases.messages import get_message, leaf

    manager = runtime.manager("tenant")
    session_id = manager.create("read over http").id
    for index in range(3):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    counter = RoundTrips()
    with counter.counting() as sent:
        out = get_message(manager, session_id, "m1")
    assert out.message == text_message("m1", "line 1")
    assert len(sent) == 1 and "FROM threadloom_sessions s LEFT JOIN" in sent[0], sent
    assert counter.timeouts == [False]
    with RoundTrips().counting() as sent:
        latest = leaf(manager, session_id)
    assert latest.message == text_message("m2", "line 2") and len(sent) == 1, sent
    with RoundTrips().counting() as sent, pytest.raises(NotFoundError, match="Message 'm9' not found"):
        get_message(manager, session_id, "m9")
    assert len(sent) == 1, sent
    other = runtime.manager("other")
    for read in (lambda: get_message(other, session_id, "m1"), lambda: leaf(other, session_id)):
        with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
            read()
        assert len(sent) == 1, sent


def test_creating_a_session_is_one_statement_that_returns_its_row(runtime: Runtime) -> None:
    """``POST /sessions``: the INSERT returns the row; it was a transaction of four round trips.

    (The first in a process also reads the deployment's secret the ids are minted with, once.)
    """
    manager = runtime.manager("tenant")
    manager.create("first")
    with RoundTrips().counting() as sent:
        info = manager.create("new", model="a-model", source="a-test", subject_id="user-7")
    assert len(sent) == 1 and sent[0].startswith("INSERT"), sent
    assert info == manager.get(info.id)
    assert (info.name, info.model, info.source, info.subject_id) == ("new", "a-model", "a-test", "user-7")
    assert runtime.manager("other").get(info.id) is None


def test_adding_usage_is_one_statement_that_bounds_the_totals_itself(runtime: Runtime) -> None:
    """``POST /sessions/{id}/usage``: it was a transaction of four round trips and a read of the result."""
    from threadloom.errors import NotFoundError, ValidationError

    manager = runtime.manager("tenant")
    session_id = manager.create("metered").id
    with RoundTrips().counting() as sent:
        info = manager.add_usage(session_id, 10, 20, 0.25)
    assert len(sent) == 1 and sent[0].startswith("UPDATE"), sent
    assert (info.input_tokens, info.output_tokens, info.estimated_cost) == (10, 20, 0.25)
    assert manager.get(session_id) == info
    most = manager.limits.max_usage_tokens
    with pytest.raises(ValidationError, match="token totals"):
        manager.add_usage(session_id, most, 0, 0.0)
    with pytest.raises(ValidationError, match="estimated cost"):
        manager.add_usage(session_id, 0, 0, manager.limits.max_usage_cost)
    with pytest.raises(NotFoundError):
        runtime.manager("other").add_usage(session_id, 1, 1, 0.0)
    assert manager.get(session_id) == info  # the refusals changed nothing


def test_renaming_and_listing_are_one_statement_each(runtime: Runtime) -> None:
    """A rename returns the renamed row (it was two round trips); a page of the listing is one (it was three)."""
    from threadloom.errors import NotFoundError

    manager = runtime.manager("tenant")
    first = manager.create("first").id
    manager.create("second")
    with RoundTrips().counting() as sent:
        renamed = manager.rename(first, "renamed")
    assert len(sent) == 1 and sent[0].startswith("UPDATE"), sent
    assert renamed.name == "renamed" and manager.get(first) == renamed
    with RoundTrips().counting() as sent:
        page, cursor = manager.list_page(limit=1)
    assert len(sent) == 1, sent
    assert [info.id for info in page] == [first] and cursor is not None
    with RoundTrips().counting() as sent:
        rest, _ = manager.list_page(limit=1, cursor=cursor)
    assert len(sent) == 1 and [info.name for info in rest] == ["second"], sent
    with pytest.raises(NotFoundError):
        runtime.manager("other").rename(first, "taken")
    assert manager.get(first) == renamed


def test_a_history_page_after_the_first_is_one_round_trip_with_the_session_check(runtime: Runtime) -> None:
    from threadloom.api.paging import decode_cursor
    from threadloom.api.use_cases import history as service

    manager = runtime.manager("tenant")
    session_id = manager.create("long").id
    messages = [text_message(f"m{index}", f"line {index}") for index in range(700)]
    manager.append_all(session_id, messages)
    manager.add_compaction(session_id, "a summary", "m10", "m20")  # overlays come with the page
    limits = runtime.limits
    first = service.history(manager, session_id, limits, leaf_id=None, limit=200, cursor=None)
    assert first.next_cursor is not None and "j" in decode_cursor(first.next_cursor)  # where the next walk starts
    with RoundTrips().counting() as sent:
        page = service.history(manager, session_id, limits, leaf_id=None, limit=200, cursor=first.next_cursor)
    assert len(page.messages) == 200
    # One statement: the page, its overlays and the tenant check (the walk starts at the anchor the cursor carries)
    assert len(sent) == 1, sent
    assert "out_depth" in sent[0], sent  # threadloom_history_page_in
    # Another tenant's session: the same one statement, and a 404 with nothing read
    other = runtime.manager("other-tenant")
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError, match="not found"):
        service.history(other, session_id, limits, leaf_id=None, limit=200, cursor=first.next_cursor)
    assert len(sent) == 1, sent
    assert session_id not in other._sessions  # no Session was built for it either


def test_the_first_history_page_is_its_own_statements_with_the_check_the_leaf_and_the_total(
    runtime: Runtime,
) -> None:
    from threadloom.api.use_cases import history as service

    manager = runtime.manager("tenant")
    session_id = manager.create("long").id
    manager.append_all(session_id, [text_message(f"m{index}", f"line {index}") for index in range(700)])
    manager.add_compaction(session_id, "a summary", "m10", "m20")
    with RoundTrips().counting() as sent:
        page = service.history(manager, session_id, runtime.limits, leaf_id=None, limit=200, cursor=None)
    # The page's own calls and nothing else: the first (threadloom_history_page_at_head) checks the tenant
    # and finds the latest leaf; the second reads on past row 199, because the summary stands for 11 rows.
    # The overlay and both its ends came with them, so counting the total takes no statement either.
    assert page.leaf_id == "m699" and len(page.messages) == 200
    assert page.total == len(manager.get_session(session_id).get_history()) == 690
    assert len(sent) == 2 and all("out_depth" in statement for statement in sent), sent
    # Another tenant's session: one statement, and a 404 with nothing read
    other = runtime.manager("other-tenant")
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError, match="not found"):
        service.history(other, session_id, runtime.limits, leaf_id=None, limit=200, cursor=None)
    assert len(sent) == 1, sent
    # A session without messages: one statement, an empty page
    empty = manager.create("empty").id
    with RoundTrips().counting() as sent:
        page = service.history(manager, empty, runtime.limits, leaf_id=None, limit=200, cursor=None)
    assert (page.messages, page.leaf_id, page.total, page.next_cursor) == ([], None, 0, None)
    assert len(sent) == 1, sent


def test_the_loaded_skills_are_read_once_when_first_needed(runtime: Runtime) -> None:
    # Given a session whose loaded skills were saved by an earlier request
    manager = runtime.manager("tenant")
    session_id = manager.create("skills").id
    runtime.store.skill_state(session_id).save({"skills:pirate"})
    # When a new request appends, then asks for its loaded skills twice
    session = manager.get_session(session_id)
    with RoundTrips().counting() as sent:
        session.append_message(text_message("m1"))
    assert not [statement for statement in sent if "loaded_skills" in statement], sent
    with RoundTrips().counting() as sent:
        assert session.get_loaded_skill_keys() == {"skills:pirate"}
        assert session.get_loaded_skill_keys() == {"skills:pirate"}
    # Then they were read once, on first use
    assert len([statement for statement in sent if "loaded_skills" in statement]) == 1, sent


@pytest.mark.parametrize("scope", ["session", "subject"])
def test_a_block_write_is_one_statement_with_its_version_and_the_pruning(
    make_store: Callable[[], Any], scope: str
) -> None:
    """A versioned write was a transaction of a statement a round trip (start, the row's compare-and-set, the
    version row, the pruning, commit): five. It is one statement of data-modifying CTEs now, so an append to
    ``memory`` (the model's memory tool, ``PUT …/context/memory``) reads the block and writes it: two."""
    from threadloom.api.use_cases.context import write_context_block
    from threadloom.core.manager import SessionManager
    from threadloom.errors import StaleVersionError
    from threadloom.records import HistoryPolicy

    store = make_store()
    manager = (
        SessionManager(store, namespace="tenant")
        .with_context("memory", scope=scope)
        .with_block_history(HistoryPolicy(keep_versions=3))
    )
    session_id = manager.create_session("written", subject_id="alice").id
    session = manager.get_session(session_id)
    session.append_context_block("memory", "first")
    with RoundTrips().counting() as sent:
        session.append_context_block("memory", "second")
    assert len(sent) == 2 and "WITH written AS (" in sent[1], sent
    with RoundTrips().counting() as sent:
        block = session.replace_context_block("memory", "replaced", based_on_version=2)
    assert len(sent) == 1 and block.content == "replaced", sent
    with RoundTrips().counting() as sent, pytest.raises(StaleVersionError) as stale:
        session.replace_context_block("memory", "late", based_on_version=2)
    assert len(sent) == 2 and stale.value.current_version == 3, sent  # refused, then the current read once
    for text in ("4", "5"):
        session.replace_context_block("memory", text)
    versions = [version.version for version in session.context_history("memory")[0]]
    assert versions == [5, 4, 3]  # pruned in the same statement: the last three are kept
    with RoundTrips().counting() as sent:
        write_context_block(manager, session_id, "memory", content="over http", mode="append", limits=manager.limits)
    # The session's check goes with the block's read (SessionManager.checked_session), then its write
    assert len(sent) == 2 and sent[0].startswith("TOGETHER SELECT threadloom_require_session("), sent


def test_clearing_a_session_checks_and_stamps_it_in_the_clears_transaction(runtime: Runtime) -> None:
    """``POST /sessions/{id}/clear`` read the session, cleared it in a transaction of a statement a round trip,
    re-rendered the prompt and stamped the session after: fourteen round trips. The stamp now opens the clear's
    transaction (a session deleted meanwhile gets nothing written) and the removals go together: ten, and one
    more since the use case reads the session's legal hold first (a held session is not cleared)."""
    from threadloom.api.use_cases.messages import clear

    manager = runtime.manager("tenant")
    session_id = manager.create("cleared").id
    for index in range(3):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    manager.get_session(session_id).freeze_system_prompt()
    newer = manager.create("newer").id
    with RoundTrips().counting() as sent:
        clear(manager, session_id)
    assert len(sent) == 11, sent  # and then the prompt re-rendered and stored, loaded skills forgotten, the estimate
    assert sent[0].startswith("SELECT SELECT id, name"), sent  # the session's record, with its hold, by its key
    assert sent[1].startswith("START") and "UPDATE threadloom_sessions" in sent[2], sent
    assert any(statement.startswith("BATCH DELETE FROM threadloom_messages") for statement in sent), sent
    assert manager.get_history(session_id) == [] and manager.list()[0].id == session_id != newer
    with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
        clear(runtime.manager("other"), session_id)
    assert len(sent) == 4, sent  # the hold (no row), start, the stamp finds no row in that namespace, rollback


def test_the_frozen_prompt_through_the_api_is_one_statement_with_the_tenant_check(runtime: Runtime) -> None:
    """``GET /sessions/{id}/system-prompt``, which an agent asks for on every turn, read the session's row and
    then the prompt: two round trips. A prompt already frozen is now one statement joining the two."""
    from threadloom.api.use_cases.context import system_prompt

    manager = runtime.manager("tenant")
    session_id = manager.create("prompted").id
    with RoundTrips().counting() as sent:
        first = system_prompt(manager, session_id).system_prompt
    assert len(sent) == 3, sent  # the check and the read (none frozen), the blocks, the prompt stored
    counter = RoundTrips()
    with counter.counting() as sent:
        again = system_prompt(runtime.manager("tenant"), session_id).system_prompt
    assert again == first and len(sent) == 1 and counter.timeouts == [False], sent
    for other, target in ((runtime.manager("other"), session_id), (manager, "no-such-session")):
        with RoundTrips().counting() as sent, pytest.raises(SessionNotFoundError):
            system_prompt(other, target)
        assert len(sent) == 1, sent


def test_a_fork_through_the_api_reads_the_parent_once(runtime: Runtime) -> None:
    """``POST /sessions/{id}/fork`` checked the session and the message in the use case, again in the manager,
    and read the parent a third time for its subject: fifteen round trips. The manager's own checks are
    enough, and the parent's row, read once, gives the child its subject: twelve."""
    from threadloom.api.use_cases.sessions import fork

    manager = runtime.manager("tenant")
    session_id = manager.create_session("parent", subject_id="alice").id
    for index in range(4):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    with RoundTrips().counting() as sent:
        child = fork(manager, session_id, "m2", "child")
    assert len(sent) == 12, sent
    assert sum(statement.startswith("SELECT SELECT id, name, parent_session_id") for statement in sent) == 1, sent
    assert child.subject_id == "alice" and child.parent_session_id == session_id
    copied = manager.get_history(child.id)
    assert [message["parts"] for message in copied] == [text_message(f"m{i}", f"line {i}")["parts"] for i in range(3)]
    with RoundTrips().counting() as sent, pytest.raises(NotFoundError, match="Message 'm9' not found"):
        fork(manager, session_id, "m9", "nothing")
    assert len(sent) == 2, sent  # the parent's row, the message: nothing created
    with pytest.raises(SessionNotFoundError):
        fork(runtime.manager("other"), session_id, "m2", "stolen")


def test_deleting_a_session_sends_its_removals_together(runtime: Runtime) -> None:
    """Removing a session and what derives from it was a transaction of a statement a round trip (about
    fifteen), then the frozen prompt's deletion in a transaction of its own (three). The removals return no
    rows, so they go in one batch after the session's row is locked, the prompt's row among them."""
    manager = runtime.manager("tenant")
    session_id = manager.create("doomed").id
    session = manager.get_session(session_id)
    for index in range(3):
        manager.append_message(session_id, text_message(f"m{index}", f"line {index}"))
    session.append_context_block("memory", "a note")
    session.freeze_system_prompt()
    kept = manager.create("kept").id
    manager.append_message(kept, text_message("k0", "kept line"))
    manager.get_session(kept).append_context_block("memory", "kept note")
    with RoundTrips().counting() as sent:
        assert manager.delete(session_id)
    assert len(sent) == 4, sent  # start, lock the row, the removals, commit
    assert [statement.split()[0] for statement in sent] == ["START", "SELECT", "BATCH", "COMMIT"], sent
    database = runtime.store.database
    for table in ("threadloom_messages", "threadloom_session_heads", "threadloom_context_blocks"):
        assert database.query_once(f"SELECT count(*) FROM {table} WHERE session_id = :sid", {"sid": session_id}) == [
            [0]
        ], table
    assert manager.get(session_id) is None and not manager.search("line 1")
    assert [message["id"] for message in manager.get_history(kept)] == ["k0"]  # the other session is untouched
    assert manager.get_session(kept).read_context_block("memory").content == "kept note"  # type: ignore[union-attr]
    with RoundTrips().counting() as sent:
        assert not manager.delete(session_id)
    assert len(sent) == 3, sent  # start, the lock finds nothing, commit


@pytest.mark.parametrize("stored_prompt", [False, True], ids=["first-open", "reopen"])
def test_opening_a_session_with_a_subject_block_costs_at_most_one_more_round_trip(
    make_store: Callable[[], Any], stored_prompt: bool
) -> None:
    """Issue 26: the same open as a request makes it (a fresh manager, the session's existence checked, the frozen
    prompt) with ``memory`` shared by the user's sessions instead of per session: one statement more, at most."""
    from threadloom.api.use_cases.common import require_session
    from threadloom.core.manager import SessionManager

    store = make_store()

    def manager(scope: str) -> SessionManager:
        return SessionManager(store, namespace="tenant").with_context("memory", scope=scope).with_cached_prompt()

    sent_by_scope: dict[str, list[str]] = {}
    for scope in ("session", "subject"):
        session_id = manager(scope).create_session(f"{scope} open", subject_id="alice").id
        manager(scope).get_session(session_id).append_context_block("memory", "Name: Alice")
        if stored_prompt:
            manager(scope).get_session(session_id).freeze_system_prompt()
        trips = RoundTrips()
        with trips.counting() as sent:
            opened = manager(scope)
            session = require_session(opened, session_id)  # as every request does: the session must exist
            prompt = session.freeze_system_prompt()
        assert "Name: Alice" in prompt
        sent_by_scope[scope] = list(sent)
    assert 0 <= len(sent_by_scope["subject"]) - len(sent_by_scope["session"]) <= 1, sent_by_scope
