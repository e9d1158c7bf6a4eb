"""Versioned migrations: idempotent, safe when many Lambdas migrate at once, and shipped as plain SQL."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from threadloom import PostgresStore, Session
from threadloom.cli import main
from threadloom.core.manager import SessionManager
from threadloom.storage.postgres.schema import apply_postgres_migrations, postgres_migrations, render_plain_sql

from tests.support.messages import text_message
from tests.support.postgres import admin_connection, connect_kwargs, create_database, drop_database, url_for

pytestmark = pytest.mark.postgres

PLAIN_SQL = Path(__file__).resolve().parents[3] / "sql" / "postgres" / "threadloom.sql"
POSTGRES_DOC = Path(__file__).resolve().parents[3] / "docs" / "postgres.md"


def documented_grants(role: str) -> list[str]:
    """The GRANT statements docs/postgres.md tells an administrator to run, for ``role``."""
    text = POSTGRES_DOC.read_text(encoding="utf-8")
    block = next(part for part in text.split("```sql\n")[1:] if part.startswith("GRANT "))
    lines = block.split("```", 1)[0].strip().splitlines()
    return [line.rstrip(";").replace(" TO threadloom_app", f" TO {role}") for line in lines]


CATALOG = {
    "columns": (
        "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name LIKE 'threadloom%' ORDER BY 1, 2"
    ),
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'threadloom%' ORDER BY 1",
    "functions": (
        "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.proname LIKE 'threadloom%' ORDER BY 1"
    ),
    "table_options": "SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'threadloom%' ORDER BY 1",
    "versions": "SELECT version, name FROM threadloom_schema_migrations ORDER BY 1",
}


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """An empty database of its own (the worker database is already migrated)."""
    name = f"threadloom_test_fresh_{os.getpid()}_{threading.get_ident() % 10_000}"
    admin_connection().close()  # skip, or fail in CI, when there is no server
    create_database(name)
    yield name
    drop_database(name)


def catalog(database: str) -> dict[str, list[list[Any]]]:
    connection = admin_connection(database)
    try:
        return {key: connection.run(query) for key, query in CATALOG.items()}
    finally:
        connection.close()


def test_migrate_is_idempotent(make_store: Any) -> None:
    store = make_store()
    assert store.migrate() == []
    assert store.migrate() == []
    assert make_store().migrate() == []


def test_many_processes_migrating_one_new_database_at_once_apply_each_version_once(fresh_database: str) -> None:
    stores = [PostgresStore(url_for(fresh_database)) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def migrate(store: PostgresStore) -> None:
        barrier.wait()
        try:
            results.append(store.migrate())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert errors == []
    shipped = postgres_migrations()
    assert sorted(results) == [[]] * 7 + [[migration.version for migration in shipped]]
    assert catalog(fresh_database)["versions"] == [[migration.version, migration.name] for migration in shipped]


def test_the_plain_sql_file_is_the_migrations_rendered() -> None:
    assert PLAIN_SQL.read_text(encoding="utf-8") == render_plain_sql(), (
        "sql/postgres/threadloom.sql is stale: regenerate it with `threadloom migrate --print-sql`"
    )


def test_the_plain_sql_builds_the_same_schema_as_migrate(fresh_database: str, request: pytest.FixtureRequest) -> None:
    # Given one database migrated by code and one built from the plain SQL
    connection = admin_connection(fresh_database)
    try:
        connection.run(PLAIN_SQL.read_text(encoding="utf-8"))
    finally:
        connection.close()
    reference = f"{fresh_database}_ref"
    create_database(reference)
    request.addfinalizer(lambda: drop_database(reference))
    store = PostgresStore(url_for(reference))
    store.migrate()
    store.close()
    # Then both schemas are identical, versions included
    assert catalog(fresh_database) == catalog(reference)


def test_a_role_that_cannot_create_tables_runs_on_the_plain_sql_schema(fresh_database: str) -> None:
    # Given an administrator applied the plain SQL and granted only data access
    role = f"threadloom_test_app_{os.getpid()}"
    admin = admin_connection(fresh_database)
    try:
        admin.run(PLAIN_SQL.read_text(encoding="utf-8"))
        admin.run(f"DROP ROLE IF EXISTS {role}")
        admin.run(f"CREATE ROLE {role} LOGIN")
        admin.run(f"REVOKE CREATE ON SCHEMA public FROM {role}")
        # only what the docs grant: functions are not left to PUBLIC's default EXECUTE
        admin.run("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC")
        for grant in documented_grants(role):
            admin.run(grant)
    finally:
        admin.close()
    kwargs = connect_kwargs(database=fresh_database)
    url = f"postgresql://{role}@{kwargs['host']}:{kwargs['port']}/{fresh_database}"
    try:
        # When the application starts with auto_migrate (the default)
        store = PostgresStore(url)
        session = Session.create(store).for_session("s")
        session.append_message(text_message("m1", "least privilege works"))
        session.append_message(text_message("m2", "and pages too"))
        # Then it finds the schema current, issues no DDL, and works: appends, search, history pages
        assert store.migrate() == []
        assert [r.id for r in session.search("privilege")] == ["m1"]
        first = store.session_provider("s").get_history_page(None, start=0, limit=1, max_bytes=10**6)
        second = store.session_provider("s").get_history_page("m2", start=1, limit=1, max_bytes=10**6, after_id="m1")
        assert [entry.last_id for entry in first.entries + second.entries] == ["m1", "m2"]
        store.close()
    finally:
        drop_database(fresh_database)
        admin = admin_connection()
        try:
            admin.run(f"DROP ROLE IF EXISTS {role}")
        finally:
            admin.close()


def test_cli_prints_the_plain_sql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--print-sql"]) == 0
    assert capsys.readouterr().out == PLAIN_SQL.read_text(encoding="utf-8")
    assert main(["migrate", "--print-sql", "--after", "1"]) == 0
    assert "0001_initial" not in capsys.readouterr().out


def test_cli_migrates_a_database(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--database-url", url_for(fresh_database)]) == 0
    assert "applied 0001_initial.sql" in capsys.readouterr().out
    assert main(["migrate", "--database-url", url_for(fresh_database)]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_cli_migrates_the_database_the_environment_names(
    fresh_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THREADLOOM_DATABASE_URL", url_for(fresh_database))
    assert main(["migrate"]) == 0
    assert "applied 0001_initial.sql" in capsys.readouterr().out


def test_cli_reports_an_unreachable_database(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--database-url", "postgresql://app@127.0.0.1:1/x"]) == 6  # ExitCode.UNAVAILABLE
    assert "Cannot reach PostgreSQL at postgresql://app@127.0.0.1:1/x" in capsys.readouterr().err


def test_cli_explains_the_tls_default_when_the_handshake_fails(capsys: pytest.CaptureFixture[str]) -> None:
    # The test server speaks no TLS, so a verifying connection fails in the handshake.
    url = url_for("postgres") + "?sslmode=verify-full"
    assert main(["migrate", "--database-url", url]) == 6
    err = capsys.readouterr().err
    assert "TLS defaults to `verify`" in err and "sslmode=require" in err and "sslrootcert" in err


def test_an_upgrade_to_0033_gives_every_stored_session_its_minute_and_the_sweeps_find_them(
    fresh_database: str,
) -> None:
    # Given a database at version 32 holding sessions, half of them long idle
    store = PostgresStore(url_for(fresh_database))
    admin = admin_connection(fresh_database)
    try:
        apply_postgres_migrations(store.database, [m for m in postgres_migrations() if m.version < 33])
        ids = [f"session-{index}" for index in range(6)]
        recent, long_ago = datetime.now(UTC), datetime(2026, 1, 1, 12, 34, 56, tzinfo=UTC)
        for index, session_id in enumerate(ids):
            admin.run(
                "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
                "VALUES (:id, 'tenant', :id, :at, :at, :seq)",
                id=session_id,
                at=long_ago + timedelta(seconds=index) if index < 3 else recent,
                seq=index + 1,
            )
        # When it migrates to the latest version
        assert 33 in store.migrate()
        # Then each row's minute is its updated_at's, retention finds exactly the idle ones, oldest first,
        # and the list's order is as it was
        rows = admin.run(
            "SELECT count(*) FILTER (WHERE updated_minute = date_trunc('minute', updated_at AT TIME ZONE 'UTC')), "
            "count(*) FROM threadloom_sessions"
        )
        assert rows[0][0] == rows[0][1] == 6
        expired = store.lifecycle().expired_sessions("2026-06-01T00:00:00.000Z", limit=10)
        assert [item.id for item in expired] == ids[:3]
        assert [info.id for info in SessionManager(store, namespace="tenant").list()] == list(reversed(ids))
    finally:
        admin.close()
        store.close()


def test_an_upgrade_to_0034_counts_the_sessions_each_namespace_already_holds(fresh_database: str) -> None:
    # Given a database at version 33 holding sessions in two namespaces
    store = PostgresStore(url_for(fresh_database))
    admin = admin_connection(fresh_database)
    try:
        apply_postgres_migrations(store.database, [m for m in postgres_migrations() if m.version < 34])
        now = datetime.now(UTC)
        for index, namespace in enumerate(["alice"] * 3 + ["bob"] * 2):
            admin.run(
                "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq) "
                "VALUES (:id, :namespace, 'old', :now, :now, :seq)",
                id=f"session-{index}",
                namespace=namespace,
                now=now,
                seq=index + 1,
            )
        # When it migrates, Then each namespace's count is what it holds, and keeps up from there
        assert 34 in store.migrate()
        assert SessionManager(store, namespace="alice").count() == 3
        assert SessionManager(store, namespace="bob").count() == 2
        SessionManager(store, namespace="bob").create("new")
        assert SessionManager(store, namespace="bob").count() == 3
    finally:
        admin.close()
        store.close()


def test_an_upgrade_to_0036_counts_the_entries_each_block_already_holds(fresh_database: str) -> None:
    # Given a database at version 35 holding entries of two tenants' blocks
    store = PostgresStore(url_for(fresh_database))
    admin = admin_connection(fresh_database)
    try:
        apply_postgres_migrations(store.database, [m for m in postgres_migrations() if m.version < 36])
        now = datetime.now(UTC)
        for index, scope in enumerate(["alice"] * 3 + ["bob"] * 2):
            admin.run(
                "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
                "VALUES (:scope, 'knowledge', :key, 'old', :now, :now)",
                scope=scope,
                key=f"key-{index}",
                now=now,
            )
        # When it migrates, Then each block's count is what it holds, and keeps up from there
        assert 36 in store.migrate()
        alice, bob = store.search_provider(scope="alice"), store.search_provider(scope="bob")
        alice.init("knowledge")
        bob.init("knowledge")
        assert (alice.get(), bob.get()) == ("3 entries indexed.", "2 entries indexed.")
        bob.set("new", "text")
        assert bob.get() == "3 entries indexed."
    finally:
        admin.close()
        store.close()
