"""Deployment configuration: THREADLOOM_DB_* settings, IAM tokens, Secrets Manager secrets, TLS, DSNs."""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pg8000.exceptions import DatabaseError
from threadloom import PostgresStore, Session, StorageUnavailableError, ValidationError
from threadloom.storage.postgres import connection as connection_module
from threadloom.storage.postgres.connection import (
    ConnectParams,
    PostgresSettings,
    open_connection,
    parse_database_url,
    settings_factory,
    tls_context,
)
from threadloom.storage.postgres.database import environment_database

from tests.support.messages import text_message
from tests.support.postgres import backend_pid, connect_kwargs

# --------------------------------------------------------------- settings


def test_settings_default_to_password_auth_with_verified_tls() -> None:
    settings = PostgresSettings.from_env({})
    assert settings.auth == "password"
    params = settings.connect_params()
    assert (params.host, params.port, params.database, params.user, params.tls) == (
        "127.0.0.1",
        5432,
        "postgres",
        "postgres",
        "verify",
    )


def test_auth_mode_follows_what_is_configured() -> None:
    assert PostgresSettings.from_env({"THREADLOOM_DATABASE_URL": "postgresql://a@h/d"}).auth == "dsn"
    assert PostgresSettings.from_env({"THREADLOOM_DB_SECRET_ID": "db-secret"}).auth == "secret"
    iam = PostgresSettings.from_env(
        {"THREADLOOM_DB_AUTH": "IAM", "THREADLOOM_DB_HOST": "proxy.example", "AWS_REGION": "eu-west-1"}
    )
    assert (iam.auth, iam.region) == ("iam", "eu-west-1")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"THREADLOOM_DB_AUTH": "kerberos"}, "THREADLOOM_DB_AUTH must be one of"),
        ({"THREADLOOM_DB_AUTH": "dsn"}, "needs THREADLOOM_DATABASE_URL"),
        ({"THREADLOOM_DB_AUTH": "secret"}, "needs THREADLOOM_DB_SECRET_ID"),
        (
            {"THREADLOOM_DB_AUTH": "iam", "THREADLOOM_DB_TLS": "off", "AWS_REGION": "x"},
            "IAM authentication requires TLS",
        ),
        ({"THREADLOOM_DB_PORT": "five"}, "THREADLOOM_DB_PORT must be a number"),
        ({"THREADLOOM_DB_TLS": "maybe"}, "THREADLOOM_DB_TLS must be one of"),
    ],
)
def test_bad_settings_name_the_variable_to_fix(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PostgresSettings.from_env(environ)


def test_iam_needs_a_region() -> None:
    with pytest.raises(ValidationError, match="needs a region"):
        PostgresSettings.from_env({"THREADLOOM_DB_AUTH": "iam"})


def test_database_urls_follow_libpq() -> None:
    params = parse_database_url(
        "postgresql://us%40er:p%2Fss@db.example:6432/app?sslmode=verify-full&application_name=api&connect_timeout=2"
    )
    assert (params.user, params.password, params.host, params.port, params.database) == (
        "us@er",
        "p/ss",
        "db.example",
        6432,
        "app",
    )
    assert (params.tls, params.application_name, params.connect_timeout) == ("verify", "api", 2.0)
    assert parse_database_url("postgres://h/d").tls == "prefer"  # libpq's default
    assert parse_database_url("postgresql://h/d?sslmode=disable").tls == "off"
    assert "p/ss" not in params.describe() and "p/ss" not in repr(params)
    with pytest.raises(ValidationError, match="Unsupported database URL option"):
        parse_database_url("postgresql://h/d?options=-c%20statement_timeout%3D5s")
    with pytest.raises(ValidationError, match="must start with postgresql://"):
        parse_database_url("mysql://h/d")


def test_tls_modes() -> None:
    verify = tls_context("verify")
    assert isinstance(verify, ssl.SSLContext)
    assert verify.check_hostname and verify.verify_mode == ssl.CERT_REQUIRED
    verify_ca = tls_context("verify-ca")
    assert isinstance(verify_ca, ssl.SSLContext)
    assert not verify_ca.check_hostname and verify_ca.verify_mode == ssl.CERT_REQUIRED
    require = tls_context("require")
    assert isinstance(require, ssl.SSLContext) and require.verify_mode == ssl.CERT_NONE
    assert tls_context("off") is False
    assert tls_context("prefer") is None


# ------------------------------------------------- what reaches pg8000


@dataclass
class Recorder:
    """Stands in for the socket and pg8000.native.Connection to see what a connect would send."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    refuse_passwords: set[str] = field(default_factory=set)

    def connection(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if kwargs.get("password") in self.refuse_passwords:
            raise DatabaseError({"S": "FATAL", "C": "28P01", "M": "password authentication failed"})
        return object()


class FakeSocket:
    def settimeout(self, value: float) -> None:
        self.timeout = value

    def setsockopt(self, *args: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorded = Recorder()
    monkeypatch.setattr(connection_module.socket, "create_connection", lambda *args, **kwargs: FakeSocket())
    monkeypatch.setattr(connection_module.pg8000.native, "Connection", recorded.connection)
    return recorded


def test_iam_auth_connects_to_the_proxy_with_a_fresh_token_over_verified_tls(recorder: Recorder) -> None:
    settings = PostgresSettings.from_env(
        {
            "THREADLOOM_DB_AUTH": "iam",
            "THREADLOOM_DB_HOST": "threadloom.proxy-abc.eu-west-1.rds.amazonaws.com",
            "THREADLOOM_DB_USER": "threadloom_app",
            "THREADLOOM_DB_NAME": "threadloom",
            "THREADLOOM_DB_REGION": "eu-west-1",
        }
    )
    settings_factory(settings)()  # a real boto3 client: token generation is a local presign
    [call] = recorder.calls
    assert call["host"] == "threadloom.proxy-abc.eu-west-1.rds.amazonaws.com"
    assert (call["user"], call["database"], call["port"], call["application_name"]) == (
        "threadloom_app",
        "threadloom",
        5432,
        "threadloom",
    )
    assert call["password"].startswith("threadloom.proxy-abc.eu-west-1.rds.amazonaws.com:5432/?Action=connect")
    assert "DBUser=threadloom_app" in call["password"]
    context = call["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_iam_auth_generates_a_token_for_every_connect(recorder: Recorder) -> None:
    class CountingRds:
        calls = 0

        def generate_db_auth_token(self, **kwargs: Any) -> str:
            CountingRds.calls += 1
            assert kwargs == {"DBHostname": "proxy", "Port": 5432, "DBUsername": "app", "Region": "us-east-1"}
            return f"token-{CountingRds.calls}"

    settings = PostgresSettings(auth="iam", host="proxy", user="app", region="us-east-1")
    factory = settings_factory(settings, rds_client=CountingRds())  # type: ignore[arg-type]
    factory()
    factory()
    assert [call["password"] for call in recorder.calls] == ["token-1", "token-2"]


@pytest.fixture
def secrets() -> Iterator[Callable[[dict[str, Any]], str]]:
    """Create Secrets Manager secrets in moto; returns a function making one and giving its id."""
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")

        def make(value: dict[str, Any]) -> str:
            name = f"threadloom/db/{uuid.uuid4()}"
            client.create_secret(Name=name, SecretString=json.dumps(value))
            return name

        yield make


def test_secret_auth_reads_the_secret_through_powertools_and_keeps_the_proxy_host(
    recorder: Recorder, secrets: Callable[[dict[str, Any]], str]
) -> None:
    secret_id = secrets({"username": "app", "password": "s3cret", "host": "instance.internal", "dbname": "appdb"})
    settings = PostgresSettings.from_env(
        {"THREADLOOM_DB_SECRET_ID": secret_id, "THREADLOOM_DB_HOST": "proxy.internal", "THREADLOOM_DB_TLS": "verify"}
    )
    settings_factory(settings)()
    [call] = recorder.calls
    assert (call["host"], call["user"], call["password"], call["database"]) == (
        "proxy.internal",
        "app",
        "s3cret",
        "appdb",
    )
    assert isinstance(call["ssl_context"], ssl.SSLContext)


def test_a_rotated_secret_is_read_again_when_the_cached_password_is_refused(
    recorder: Recorder, secrets: Callable[[dict[str, Any]], str]
) -> None:
    secret_id = secrets({"username": "app", "password": "old"})
    settings = PostgresSettings(auth="secret", secret_id=secret_id, host="proxy")
    factory = settings_factory(settings)
    factory()  # caches "old"
    boto3.client("secretsmanager", region_name="us-east-1").put_secret_value(
        SecretId=secret_id, SecretString=json.dumps({"username": "app", "password": "new"})
    )
    recorder.refuse_passwords.add("old")
    factory()
    assert [call["password"] for call in recorder.calls] == ["old", "old", "new"]


def test_an_unreadable_secret_is_a_storage_error(recorder: Recorder, secrets: Callable[[dict[str, Any]], str]) -> None:
    settings = PostgresSettings(auth="secret", secret_id="threadloom/does-not-exist", host="proxy")
    with pytest.raises(StorageUnavailableError, match="Cannot read database secret 'threadloom/does-not-exist'"):
        settings_factory(settings)()


# ------------------------------------------------------ against the server


@pytest.mark.postgres
def test_from_environment_shares_one_lazy_connection_per_process(pg_url: str) -> None:
    environ = {"THREADLOOM_DATABASE_URL": pg_url}
    first = PostgresStore.from_environment(environ)
    second = PostgresStore.from_environment(environ)
    assert first.database is second.database is environment_database(PostgresSettings.from_env(environ))
    Session.create(first).for_session("s").append_message(text_message("m1"))
    assert backend_pid(first) == backend_pid(second)
    assert [m["id"] for m in Session.create(second).for_session("s").get_history()] == ["m1"]
    first.close()


@pytest.mark.postgres
def test_password_auth_from_separate_variables(pg_url: str) -> None:
    kwargs = connect_kwargs(pg_url)
    environ = {
        "THREADLOOM_DB_HOST": str(kwargs["host"]),
        "THREADLOOM_DB_PORT": str(kwargs["port"]),
        "THREADLOOM_DB_NAME": str(kwargs["database"]),
        "THREADLOOM_DB_USER": str(kwargs["user"]),
        "THREADLOOM_DB_PASSWORD": str(kwargs.get("password", "")),
        "THREADLOOM_DB_TLS": "off",
    }
    store = PostgresStore.from_environment(environ)
    assert Session.create(store).for_session("s").append_message(text_message("m1")).inserted
    store.close()


def test_from_environment_does_not_connect_until_used() -> None:
    store = PostgresStore.from_environment({"THREADLOOM_DATABASE_URL": "postgresql://app@127.0.0.1:1/x"})
    session = Session.create(store).for_session("s")  # nothing connects yet
    with pytest.raises(StorageUnavailableError, match="Cannot reach PostgreSQL"):
        session.get_history()


@pytest.mark.postgres
def test_a_server_without_tls_is_answered_with_the_setting_to_change() -> None:
    """The default `verify` against a local server must say how to turn TLS off, not just fail."""
    kwargs = connect_kwargs()
    params = ConnectParams(host=str(kwargs["host"]), port=int(str(kwargs["port"])), tls="verify", connect_timeout=5)
    with pytest.raises(StorageUnavailableError) as raised:
        open_connection(params)
    message = str(raised.value)
    assert "Server refuses SSL" in message
    assert "TLS mode is 'verify'" in message and "THREADLOOM_DB_TLS=off" in message and "sslmode=disable" in message
