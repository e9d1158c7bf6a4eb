"""Lost, stale and unreachable connections: replaced where safe, clear errors everywhere else."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pg8000.native
import pytest
from threadloom import PostgresStore, Session, SessionManager, StorageUnavailableError
from threadloom.errors import NotFoundError, StorageTimeoutError
from threadloom.storage.postgres import database as database_module
from threadloom.storage.postgres.database import PostgresDatabase, ServerTimeouts

from tests.support.messages import text_message
from tests.support.postgres import admin_connection, backend_pid, connect_kwargs, terminate, url_for

pytestmark = pytest.mark.postgres


def closed_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def undetectable_death(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a dead connection look alive until used, as after a silent network drop."""
    monkeypatch.setattr(database_module, "_closed_by_peer", lambda connection: False)


def test_a_connection_killed_while_idle_is_replaced_before_anything_is_sent(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1"))
    first = backend_pid(store)
    # When the server ends the idle connection (failover, proxy idle timeout)
    terminate(admin, first)
    # Then reads and writes go on over a new connection
    session.append_message(text_message("m2"))
    assert [m["id"] for m in session.get_history()] == ["m1", "m2"]
    assert backend_pid(store) != first
    terminate(admin, backend_pid(store))
    manager = SessionManager.create(store)
    assert manager.create("after a kill").name == "after a kill"


def test_a_read_that_finds_the_connection_dead_is_retried_once(
    make_store: Callable[[], Any], admin: Any, undetectable_death: None
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1"))
    terminate(admin, backend_pid(store))
    assert [m["id"] for m in session.get_history()] == ["m1"]
    terminate(admin, backend_pid(store))
    assert session.get_message("m1") is not None


def test_a_transaction_whose_start_fails_is_retried_on_a_new_connection(
    make_store: Callable[[], Any], admin: Any, undetectable_death: None
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1"))
    session.append_message(text_message("m2"))
    terminate(admin, backend_pid(store))
    # delete_messages runs START TRANSACTION first: nothing was applied when that failed
    session.delete_messages(["m2"])
    assert [m["id"] for m in session.get_history()] == ["m1"]


def test_an_edit_on_a_dead_connection_surfaces_and_sending_it_again_is_safe(
    make_store: Callable[[], Any], admin: Any, undetectable_death: None
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1", "before"))
    session.append_message(text_message("m2", "below"))
    terminate(admin, backend_pid(store))
    # An edit is one statement (migration 0027): sent on a dead socket it may or may not have committed
    with pytest.raises(StorageUnavailableError, match="may or may not have been applied"):
        session.update_message(text_message("m1", "after, and longer than before"))
    # sending it again over a new connection gives the same result as sending it once
    session.update_message(text_message("m1", "after, and longer than before"))
    assert session.get_message("m1") == text_message("m1", "after, and longer than before")
    estimates = store.database.query_once(
        "SELECT id, tokens, path_tokens FROM threadloom_messages WHERE session_id = 's' ORDER BY seq"
    )
    assert estimates[1][2] == estimates[0][1] + estimates[1][1]  # m2's running estimate moved once


def test_a_deletion_on_a_dead_connection_surfaces_and_sending_it_again_is_safe(
    make_store: Callable[[], Any], admin: Any, undetectable_death: None
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    for message_id in ("m1", "m2", "m3"):
        session.append_message(text_message(message_id, f"{message_id} text"))
    terminate(admin, backend_pid(store))
    # A deletion of one message is one statement (migration 0028): it may or may not have committed
    with pytest.raises(StorageUnavailableError, match="may or may not have been applied"):
        session.delete_message("m2")
    # sending it again deletes it if the first did not; once it is gone, the answer says so
    session.delete_message("m2")
    with pytest.raises(NotFoundError, match="Message 'm2' not found"):
        session.delete_message("m2")
    assert [m["id"] for m in session.get_history()] == ["m1", "m3"]
    rows = store.database.query_once(
        "SELECT id, depth, tokens, path_tokens FROM threadloom_messages WHERE session_id = 's' ORDER BY seq"
    )
    assert rows[1][1] == 1 and rows[1][3] == rows[0][2] + rows[1][2]  # m3 moved up once


def test_a_single_statement_write_on_a_dead_connection_surfaces_and_is_not_replayed(
    make_store: Callable[[], Any], admin: Any, undetectable_death: None
) -> None:
    store = make_store()
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1"))
    terminate(admin, backend_pid(store))
    # An append sent on a dead socket may or may not have committed, so it is not retried
    with pytest.raises(StorageUnavailableError, match="Lost the connection"):
        session.append_message(text_message("m2"))
    # the caller retries with the same id (appends are idempotent) over a new connection
    result = session.append_message(text_message("m2"))
    assert result.inserted
    assert [m["id"] for m in session.get_history()] == ["m1", "m2"]


def test_losing_the_connection_inside_a_transaction_rolls_it_back_and_surfaces(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    database: PostgresDatabase = store.database
    store.migrate()
    with pytest.raises(StorageUnavailableError), database.write() as tx:
        tx.execute(
            "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
            "VALUES ('', '', 'k', 'v', now())"
        )
        terminate(admin, backend_pid(store))
        tx.execute("SELECT 1")
    assert admin.run("SELECT COUNT(*) FROM threadloom_context_blocks")[0][0] == 0
    assert database.query_once("SELECT 1") == [[1]]  # and the next unit of work reconnects


def test_an_unreachable_database_raises_storage_unavailable_with_where_it_tried() -> None:
    port = closed_port()
    store = PostgresStore(f"postgresql://app@127.0.0.1:{port}/threadloom")  # constructing never connects
    session = Session.create(store).for_session("s")
    with pytest.raises(StorageUnavailableError, match=rf"Cannot reach PostgreSQL at postgresql://app@127.0.0.1:{port}"):
        session.append_message(text_message("m1"))


def test_a_factory_that_fails_raises_storage_unavailable() -> None:
    port = closed_port()

    def factory() -> Any:
        return pg8000.native.Connection(user="app", host="127.0.0.1", port=port, database="x", timeout=2)

    with pytest.raises(StorageUnavailableError, match="Cannot connect to PostgreSQL"):
        PostgresStore(factory).migrate()


@pytest.fixture
def raw_connection(pg_url: str) -> Iterator[Any]:
    connection = pg8000.native.Connection(**connect_kwargs(pg_url))
    yield connection
    if connection._usock is not None:
        connection.close()


def test_a_connection_passed_in_is_used_as_is_and_not_replaced(raw_connection: Any, admin: Any) -> None:
    store = PostgresStore(raw_connection)
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m1"))
    store.close()  # not ours to close
    assert raw_connection.run("SELECT 1") == [[1]]
    terminate(admin, backend_pid(store))
    with pytest.raises(StorageUnavailableError, match="cannot be reopened"):
        session.get_history()


def test_a_per_role_statement_timeout_surfaces_as_a_storage_timeout(pg_url: str) -> None:
    # With the library's own server timeouts turned off, a per-role statement_timeout still applies.
    role = "threadloom_test_timeout"
    admin = admin_connection()
    try:
        admin.run(
            "DO $$ BEGIN CREATE ROLE threadloom_test_timeout LOGIN; "
            "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        )
        admin.run(f"ALTER ROLE {role} SET statement_timeout = '100ms'")
    finally:
        admin.close()
    kwargs = {**connect_kwargs(pg_url), "user": role}
    database = PostgresDatabase(
        lambda: pg8000.native.Connection(**kwargs), timeouts=ServerTimeouts(lock=None, statement=None)
    )
    with pytest.raises(StorageTimeoutError, match="statement timeout"):
        database.query_once("SELECT pg_sleep(2)")
    assert database.query_once("SELECT 1") == [[1]]  # the connection stays usable
    database.close()


def test_url_for_keeps_the_server_and_swaps_the_database() -> None:
    assert url_for("other").rsplit("/", 1)[1].startswith("other")
