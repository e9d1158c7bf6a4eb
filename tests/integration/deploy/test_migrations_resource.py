"""The migrations custom resource against the real PostgreSQL server, answering a local stand-in for CloudFormation.

CloudFormation hands the function a presigned S3 URL and waits for a JSON answer PUT there; here a local HTTP
server plays that URL, and moto plays Secrets Manager (the application role's password).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws
from threadloom import PostgresStore, SessionManager
from threadloom.storage.migrations import Migration
from threadloom.storage.postgres import schema

from tests.support.messages import text_message
from tests.support.postgres import admin_connection, connect_kwargs, create_database, drop_database

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.postgres

LATEST_VERSION = max(migration.version for migration in schema.postgres_migrations())
MIGRATION_COUNT = len(schema.postgres_migrations())


@dataclass
class FakeContext:
    remaining_ms: int = 300_000
    function_name: str = "threadloom-migrations"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-migrations"
    aws_request_id: str = "6f1a7c2e-0000-4000-8000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class CloudFormationStandIn:
    """Receives the answers PUT to the presigned URL."""

    url: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def cloudformation() -> Iterator[CloudFormationStandIn]:
    stand_in = CloudFormationStandIn(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            stand_in.answers.append(json.loads(body))
            stand_in.headers.append(dict(self.headers.items()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stand_in.url = f"http://127.0.0.1:{server.server_port}/cloudformation-answer?X-Amz-Signature=abc"
    yield stand_in
    server.shutdown()
    server.server_close()


@pytest.fixture
def app_role() -> Iterator[str]:
    """A role name of this test (roles are server-wide); dropped after the test's databases."""
    name = f"threadloom_app_{uuid.uuid4().hex[:12]}"
    yield name
    connection = admin_connection()
    try:
        connection.run(f'DROP ROLE IF EXISTS "{name}"')
    finally:
        connection.close()


@pytest.fixture
def database(app_role: str) -> Iterator[str]:
    name = f"threadloom_test_deploy_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin_connection().close()  # skip, or fail in CI, when there is no server
    create_database(name)
    yield name
    drop_database(name)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    from aws_lambda_powertools.utilities.parameters import base

    with mock_aws():
        yield boto3.client("secretsmanager", region_name="eu-west-1")
    base.DEFAULT_PROVIDERS.clear()  # Powertools keeps the provider (and its eu-west-1 client) process-wide


@pytest.fixture
def handler() -> Any:
    import threadloom_migrations

    return threadloom_migrations


def properties(database: str, app_role: str, secret_arn: str | None, **overrides: str) -> dict[str, str]:
    server = connect_kwargs()
    values = {
        "ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-migrations",
        "Host": str(server["host"]),
        "Port": str(server["port"]),
        "Database": database,
        "MigratorUser": str(server["user"]),
        "MigratorAuth": "password",
        "Tls": "off",
        "AppUser": app_role,
        "IdleInTransactionTimeoutMs": "7000",
        "LayerVersion": "arn:aws:lambda:eu-west-1:123456789012:layer:threadloom:1",
    }
    if secret_arn:
        values["AppSecretArn"] = secret_arn
    values.update(overrides)
    return values


def event(
    request_type: str, url: str, props: dict[str, str], old: dict[str, str] | None = None, physical_id: str = ""
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/threadloom-dev/1",
        "RequestId": str(uuid.uuid4()),
        "LogicalResourceId": "DatabaseMigrations",
        "ResourceType": "Custom::ThreadloomMigrations",
        "ResourceProperties": props,
    }
    if old is not None:
        body["OldResourceProperties"] = old
    if physical_id:
        body["PhysicalResourceId"] = physical_id
    return body


def app_secret(secrets: Any, role: str, password: str) -> str:
    value = json.dumps({"username": role, "password": password})
    return str(secrets.create_secret(Name=f"{role}-secret", SecretString=value)["ARN"])


def run_as(database: str, role: str, sql: str) -> list[list[Any]]:
    import pg8000.native

    kwargs = connect_kwargs(database=database) | {"user": role}
    connection = pg8000.native.Connection(**kwargs, timeout=10)
    try:
        return list(connection.run(sql))
    finally:
        connection.close()


def sqlstate_of(database: str, role: str, sql: str) -> str:
    from pg8000.exceptions import DatabaseError

    with pytest.raises(DatabaseError) as raised:
        run_as(database, role, sql)
    return str(raised.value.args[0]["C"])


def threadloom_tables(database: str) -> list[str]:
    connection = admin_connection(database)
    try:
        rows = connection.run("SELECT tablename FROM pg_tables WHERE tablename LIKE 'threadloom%' ORDER BY 1")
        return [row[0] for row in rows]
    finally:
        connection.close()


def test_create_migrates_and_sets_up_a_dml_only_application_role(
    handler: Any, cloudformation: CloudFormationStandIn, database: str, app_role: str, secrets: Any
) -> None:
    # Given an empty database and the application role's secret
    arn = app_secret(secrets, app_role, "first-Password-1")

    # When CloudFormation creates the resource
    props = properties(database, app_role, arn)
    handler.lambda_handler(event("Create", cloudformation.url, props), FakeContext())

    # Then it answered SUCCESS once, with the schema version, and no content type (the URL is presigned without one)
    (answer,) = cloudformation.answers
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Data"] == {"SchemaVersion": str(LATEST_VERSION)}
    assert answer["PhysicalResourceId"] == handler.physical_id(props)
    assert answer["LogicalResourceId"] == "DatabaseMigrations"
    assert cloudformation.headers[0].get("Content-Type", "") == ""
    assert "threadloom_messages" in threadloom_tables(database)

    # And the application role works through the store without migrating ...
    url = f"postgresql://{app_role}@{connect_kwargs()['host']}:{connect_kwargs()['port']}/{database}"
    store = PostgresStore(url, auto_migrate=False)
    try:
        manager = SessionManager.create(store, namespace="tenant-a")
        info = manager.create("deploy check")
        manager.append(info.id, text_message("u1", "hello from the app role"))
        assert [message["id"] for message in manager.get_session(info.id).get_history()] == ["u1"]
    finally:
        store.close()
    # ... but cannot change the schema or the migration record, and idles in a transaction for 7 s at most
    assert sqlstate_of(database, app_role, "CREATE TABLE threadloom_evil (id int)") == "42501"
    assert sqlstate_of(database, app_role, "DELETE FROM threadloom_schema_migrations") == "42501"
    assert sqlstate_of(database, app_role, "DROP TABLE threadloom_messages") == "42501"
    assert run_as(database, app_role, "SELECT count(*) FROM threadloom_schema_migrations") == [[MIGRATION_COUNT]]
    assert run_as(database, app_role, "SHOW idle_in_transaction_session_timeout") == [["7s"]]


def test_update_is_idempotent_and_applies_changed_settings(
    handler: Any, cloudformation: CloudFormationStandIn, database: str, app_role: str, secrets: Any
) -> None:
    # Given a created resource
    arn = app_secret(secrets, app_role, "first-Password-1")
    created = properties(database, app_role, arn)
    handler.lambda_handler(event("Create", cloudformation.url, created), FakeContext())
    physical_id = cloudformation.answers[0]["PhysicalResourceId"]

    # When a later deploy updates it with a new layer and a new idle timeout
    updated = properties(database, app_role, arn, IdleInTransactionTimeoutMs="9000", LayerVersion="layer:2")
    handler.lambda_handler(
        event("Update", cloudformation.url, updated, old=created, physical_id=physical_id), FakeContext()
    )

    # Then it succeeds with the same physical id (no replacement), nothing left to apply, the new setting in force
    answer = cloudformation.answers[1]
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["PhysicalResourceId"] == physical_id
    assert answer["Data"] == {"SchemaVersion": str(LATEST_VERSION)}
    assert "applied nothing" in answer["Reason"]
    assert run_as(database, app_role, "SHOW idle_in_transaction_session_timeout") == [["9s"]]


def test_a_failing_migration_answers_failed_and_leaves_the_database_unchanged(
    handler: Any,
    cloudformation: CloudFormationStandIn,
    database: str,
    app_role: str,
    *,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a release whose newest migration is broken
    broken = Migration(version=9999, name="9999_broken", sql="CREATE TABLE threadloom_half (id int); SELECT 1/0;")
    shipped = schema.postgres_migrations()
    monkeypatch.setattr(schema, "postgres_migrations", lambda: [*shipped, broken])
    arn = app_secret(secrets, app_role, "first-Password-1")

    # When CloudFormation creates the resource
    handler.lambda_handler(event("Create", cloudformation.url, properties(database, app_role, arn)), FakeContext())

    # Then it answered FAILED with the server's reason (so the stack rolls back), and nothing was applied
    (answer,) = cloudformation.answers
    assert answer["Status"] == "FAILED"
    assert "division by zero" in answer["Reason"]
    assert threadloom_tables(database) == []


def test_an_unreachable_database_answers_failed_before_the_function_times_out(
    handler: Any, cloudformation: CloudFormationStandIn, app_role: str
) -> None:
    # Given a host and port where nothing listens, and 45 s left in the function
    props = properties("nowhere", app_role, None, Host="127.0.0.1", Port="9")

    # When CloudFormation creates the resource
    handler.lambda_handler(event("Create", cloudformation.url, props), FakeContext(remaining_ms=45_000))

    # Then it answers FAILED, naming the address it tried
    (answer,) = cloudformation.answers
    assert answer["Status"] == "FAILED"
    assert "127.0.0.1:9" in answer["Reason"]


def test_the_application_role_may_not_be_the_migrator(
    handler: Any, cloudformation: CloudFormationStandIn, database: str
) -> None:
    props = properties(database, str(connect_kwargs()["user"]), None)
    handler.lambda_handler(event("Create", cloudformation.url, props), FakeContext())
    (answer,) = cloudformation.answers
    assert answer["Status"] == "FAILED"
    assert "must not be the migrator" in answer["Reason"]
    assert threadloom_tables(database) == []


def test_delete_keeps_the_schema_and_its_data(
    handler: Any, cloudformation: CloudFormationStandIn, database: str, app_role: str, secrets: Any
) -> None:
    # Given a created resource
    arn = app_secret(secrets, app_role, "first-Password-1")
    props = properties(database, app_role, arn)
    handler.lambda_handler(event("Create", cloudformation.url, props), FakeContext())
    physical_id = cloudformation.answers[0]["PhysicalResourceId"]

    # When the stack deletes it
    handler.lambda_handler(event("Delete", cloudformation.url, props, physical_id=physical_id), FakeContext())

    # Then it answers SUCCESS for the same resource and the tables are still there
    answer = cloudformation.answers[1]
    assert (answer["Status"], answer["PhysicalResourceId"]) == ("SUCCESS", physical_id)
    assert "threadloom_messages" in threadloom_tables(database)
