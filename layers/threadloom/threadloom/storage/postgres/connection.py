"""Opening pg8000 connections: settings from the environment, DSNs, TLS, IAM tokens and secrets.

Why a factory rather than a connection: a Lambda execution environment keeps one connection
for its whole life, and that connection goes stale (RDS Proxy closes idle clients, failovers
reset sockets). Whoever holds the factory can open a replacement, with a fresh IAM token or
a re-read secret each time. Nothing here sends SQL: pg8000 only sends the startup packet
(user, database, application_name), which RDS Proxy multiplexes without pinning.

Over 400 lines because the ways to authenticate (password, IAM token, secret) and TLS share the
settings and DSN parsing kept here.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import pg8000.native  # type: ignore[import-untyped]
from pg8000.exceptions import DatabaseError, InterfaceError  # type: ignore[import-untyped]

from threadloom.errors import StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from mypy_boto3_rds import RDSClient

#: A pg8000.native.Connection (pg8000 ships no type information).
Connection = Any
#: Opens a new connection each time it is called.
ConnectionFactory = Callable[[], Connection]

AuthMode = Literal["iam", "secret", "password", "dsn"]
TlsMode = Literal["verify", "verify-ca", "require", "prefer", "off"]

DEFAULT_PORT: Final = 5432
DEFAULT_APPLICATION_NAME: Final = "threadloom"
# Defaults sized for the API function's 10 s timeout: the server gives up on a held lock
# (lock) or a slow statement (statement) before the client socket does (timeout), and all
# of them before the function. Configurable per deployment (docs/storage-reliability.md).
DEFAULT_CONNECT_TIMEOUT_S: Final = 3.0
DEFAULT_LOCK_TIMEOUT_S: Final = 2.0
DEFAULT_STATEMENT_TIMEOUT_S: Final = 5.0
DEFAULT_TIMEOUT_S: Final = 8.0
DEFAULT_SECRET_MAX_AGE_S: Final = 300

_AUTH_MODES: Final = ("iam", "secret", "password", "dsn")
_TLS_ALIASES: Final[dict[str, TlsMode]] = {
    "verify": "verify",
    "verify-full": "verify",
    "true": "verify",
    "on": "verify",
    "1": "verify",
    "yes": "verify",
    "verify-ca": "verify-ca",
    "require": "require",
    "prefer": "prefer",
    "allow": "prefer",
    "off": "off",
    "disable": "off",
    "false": "off",
    "0": "off",
    "no": "off",
}
_DSN_OPTIONS: Final = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "application_name",
        "connect_timeout",
        "timeout",
        "lock_timeout",
        "statement_timeout",
        "prepared_statements",
    }
)
_SWITCHES: Final = {
    **dict.fromkeys(("on", "true", "1", "yes"), True),
    **dict.fromkeys(("off", "false", "0", "no"), False),
}
# SQLSTATE classes meaning "the server cannot serve this now" rather than "the request is wrong".
_CONNECTION_LOST_CODES: Final = frozenset({"57P01", "57P02"})
_AUTH_FAILED_CODES: Final = frozenset({"28P01", "28000"})
_LOST_MARKERS: Final = ("network error", "connection is closed", "communication error")


@dataclass(frozen=True, slots=True)
class ConnectParams:
    """Where and how to connect, minus the password (which may change between connects)."""

    host: str
    port: int = DEFAULT_PORT
    database: str = "postgres"
    user: str = "postgres"
    password: str | None = field(default=None, repr=False)
    tls: TlsMode = "prefer"
    root_cert: str | None = None
    application_name: str = DEFAULT_APPLICATION_NAME
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    timeout: float = DEFAULT_TIMEOUT_S
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT_S
    statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT_S
    #: Name each statement once per connection (see ``prepared.py``): only without a pooler that
    #: loses them (PgBouncer before 1.21) or pins on them (RDS Proxy).
    prepared_statements: bool = False

    def __post_init__(self) -> None:
        check_timeouts(self.timeout, self.lock_timeout, self.statement_timeout)

    def describe(self) -> str:
        """Where we connect, for error messages (never the password)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """Connection settings of a deployment, read once from ``THREADLOOM_DB_*`` variables.

    ``auth`` picks where the password comes from: ``iam`` (an RDS IAM token generated for
    every connect; TLS is mandatory), ``secret`` (a Secrets Manager secret read through
    Powertools Parameters, cached ``secret_max_age`` seconds), ``password`` (a plain
    variable, for development) or ``dsn`` (everything from ``THREADLOOM_DATABASE_URL``).
    """

    host: str | None = None
    port: int | None = None
    database: str | None = None
    user: str | None = None
    auth: AuthMode = "password"
    password: str | None = field(default=None, repr=False)
    secret_id: str | None = None
    secret_max_age: int = DEFAULT_SECRET_MAX_AGE_S
    database_url: str | None = field(default=None, repr=False)
    #: None: ``verify``, except for ``dsn`` where the URL's sslmode (else libpq's ``prefer``) applies.
    tls: TlsMode | None = None
    region: str | None = None
    application_name: str = DEFAULT_APPLICATION_NAME
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    timeout: float = DEFAULT_TIMEOUT_S
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT_S
    statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT_S
    prepared_statements: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PostgresSettings:
        """Read the settings; unset variables keep the defaults, bad values raise ValidationError.

        ``THREADLOOM_DB_AUTH`` defaults to ``dsn`` when ``THREADLOOM_DATABASE_URL`` is set,
        ``secret`` when ``THREADLOOM_DB_SECRET_ID`` is set, else ``password``.
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value not in (None, "") else None

        url = get("THREADLOOM_DATABASE_URL")
        secret_id = get("THREADLOOM_DB_SECRET_ID")
        auth_text = (get("THREADLOOM_DB_AUTH") or ("dsn" if url else "secret" if secret_id else "password")).lower()
        if auth_text not in _AUTH_MODES:
            raise ValidationError(f"THREADLOOM_DB_AUTH must be one of {', '.join(_AUTH_MODES)}, not {auth_text!r}")
        settings = cls(
            host=get("THREADLOOM_DB_HOST"),
            port=_number(env, "THREADLOOM_DB_PORT", None, int),
            database=get("THREADLOOM_DB_NAME"),
            user=get("THREADLOOM_DB_USER"),
            auth=auth_text,  # type: ignore[arg-type]
            password=get("THREADLOOM_DB_PASSWORD"),
            secret_id=secret_id,
            secret_max_age=_number(env, "THREADLOOM_DB_SECRET_MAX_AGE", DEFAULT_SECRET_MAX_AGE_S, int),
            database_url=url,
            tls=parse_tls_mode(tls_text, "THREADLOOM_DB_TLS") if (tls_text := get("THREADLOOM_DB_TLS")) else None,
            region=get("THREADLOOM_DB_REGION") or get("AWS_REGION") or get("AWS_DEFAULT_REGION"),
            application_name=get("THREADLOOM_DB_APPLICATION_NAME") or DEFAULT_APPLICATION_NAME,
            connect_timeout=_number(env, "THREADLOOM_DB_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S, float),
            timeout=_number(env, "THREADLOOM_DB_TIMEOUT", DEFAULT_TIMEOUT_S, float),
            lock_timeout=_optional_seconds(env, "THREADLOOM_DB_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT_S),
            statement_timeout=_optional_seconds(env, "THREADLOOM_DB_STATEMENT_TIMEOUT", DEFAULT_STATEMENT_TIMEOUT_S),
            prepared_statements=_switch(env, "THREADLOOM_DB_PREPARED_STATEMENTS", default=False),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse combinations that cannot work, naming the variable to fix."""
        check_timeouts(self.timeout, self.lock_timeout, self.statement_timeout, prefix="THREADLOOM_DB_")
        if self.auth == "dsn" and not self.database_url:
            raise ValidationError("THREADLOOM_DB_AUTH=dsn needs THREADLOOM_DATABASE_URL")
        if self.auth == "secret" and not self.secret_id:
            raise ValidationError("THREADLOOM_DB_AUTH=secret needs THREADLOOM_DB_SECRET_ID")
        if self.auth == "iam":
            if self.tls not in (None, "verify", "verify-ca", "require"):
                raise ValidationError("IAM authentication requires TLS: set THREADLOOM_DB_TLS=verify (the default)")
            if not self.region:
                raise ValidationError("IAM authentication needs a region: set THREADLOOM_DB_REGION or AWS_REGION")

    def connect_params(self) -> ConnectParams:
        """Everything but the password (see :func:`settings_factory`)."""
        if self.auth == "dsn":
            return parse_database_url(
                self.database_url or "",
                default_tls=self.tls or "prefer",
                connect_timeout=self.connect_timeout,
                timeout=self.timeout,
                lock_timeout=self.lock_timeout,
                statement_timeout=self.statement_timeout,
                prepared_statements=self.prepared_statements,
            )
        return ConnectParams(
            host=self.host or "127.0.0.1",
            port=self.port or DEFAULT_PORT,
            database=self.database or "postgres",
            user=self.user or "postgres",
            password=self.password if self.auth == "password" else None,
            tls=self.tls or "verify",
            application_name=self.application_name,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
            lock_timeout=self.lock_timeout,
            statement_timeout=self.statement_timeout,
            prepared_statements=self.prepared_statements,
        )


def check_timeouts(timeout: float, lock: float | None, statement: float | None, *, prefix: str = "") -> None:
    """The server must give up before the client socket does, or a write could commit after the caller gave up."""
    names = {"timeout": f"{prefix}TIMEOUT" if prefix else "timeout"}
    names["lock"] = f"{prefix}LOCK_TIMEOUT" if prefix else "lock_timeout"
    names["statement"] = f"{prefix}STATEMENT_TIMEOUT" if prefix else "statement_timeout"
    for key, value in (("lock", lock), ("statement", statement)):
        if value is not None and value >= timeout:
            raise ValidationError(
                f"{names[key]} ({value:g} s) must be shorter than {names['timeout']} ({timeout:g} s), "
                "so the server gives up (and rolls back) before the client does"
            )
    if lock is not None and statement is not None and lock > statement:
        raise ValidationError(f"{names['lock']} ({lock:g} s) must not exceed {names['statement']} ({statement:g} s)")


def _optional_seconds(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    """Seconds, where ``0`` or ``off`` means "no server-side limit"."""
    text = env.get(name)
    if text is not None and text.strip().lower() in ("0", "off", "none"):
        return None
    value: float | None = _number(env, name, default, float)
    return value


def _switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    """``on``/``off`` (or true/false, 1/0, yes/no); anything else is a mistake worth naming."""
    text = env.get(name)
    if not text:
        return default
    value = _SWITCHES.get(text.strip().lower())
    if value is None:
        raise ValidationError(f"{name} must be on or off, not {text!r}")
    return value


def _number(env: Mapping[str, str], name: str, default: Any, kind: Callable[[str], Any]) -> Any:
    text = env.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ValidationError(f"{name} must be a number, not {text!r}") from None
    if value <= 0:
        raise ValidationError(f"{name} must be positive, not {text!r}")
    return value


def parse_tls_mode(text: str, source: str = "sslmode") -> TlsMode:
    mode = _TLS_ALIASES.get(text.strip().lower())
    if mode is None:
        raise ValidationError(f"{source} must be one of verify, verify-ca, require, prefer or off, not {text!r}")
    return mode


def parse_database_url(
    url: str,
    *,
    default_tls: TlsMode = "prefer",
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    timeout: float = DEFAULT_TIMEOUT_S,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT_S,
    statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT_S,
    prepared_statements: bool = False,
) -> ConnectParams:
    """Parse ``postgresql://user:password@host:port/database?sslmode=...`` (libpq's URL form).

    Supported query options: ``sslmode`` (disable, allow, prefer, require, verify-ca,
    verify-full), ``sslrootcert``, ``application_name``, ``connect_timeout``, ``timeout``
    (the client socket), ``lock_timeout`` and ``statement_timeout`` (server side; ``0``
    turns one off), all in seconds, and ``prepared_statements`` (``on`` or ``off``, the default:
    see docs/postgres.md before turning it on behind a pooler). Without ``sslmode`` the ``default_tls`` applies (libpq's
    ``prefer`` for a DSN given in code).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValidationError("A database URL must start with postgresql:// (for example postgresql://user@host/db)")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - _DSN_OPTIONS)
    if unknown:
        raise ValidationError(f"Unsupported database URL option(s): {', '.join(unknown)}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValidationError("The database URL has an invalid port") from None
    return ConnectParams(
        host=unquote(parts.hostname or "") or "127.0.0.1",
        port=port,
        database=unquote(parts.path.lstrip("/")) or "postgres",
        user=unquote(parts.username or "") or "postgres",
        password=unquote(parts.password) if parts.password is not None else None,
        tls=parse_tls_mode(options["sslmode"]) if "sslmode" in options else default_tls,
        root_cert=options.get("sslrootcert") or None,
        application_name=options.get("application_name") or DEFAULT_APPLICATION_NAME,
        connect_timeout=_number(options, "connect_timeout", connect_timeout, float),
        timeout=_number(options, "timeout", timeout, float),
        lock_timeout=_optional_seconds(options, "lock_timeout", lock_timeout),
        statement_timeout=_optional_seconds(options, "statement_timeout", statement_timeout),
        prepared_statements=_switch(options, "prepared_statements", default=prepared_statements),
    )


def tls_context(mode: TlsMode, root_cert: str | None = None) -> ssl.SSLContext | bool | None:
    """What pg8000's ``ssl_context`` needs for ``mode``.

    ``verify`` checks the certificate chain and the host name (RDS Proxy presents
    publicly trusted certificates, so the system trust store suffices); ``prefer`` is
    pg8000's own default: TLS without checks if the server offers it, else plain text.
    """
    if mode == "off":
        return False
    if mode == "prefer":
        return None
    context = ssl.create_default_context(cafile=root_cert)
    if mode == "verify-ca":
        context.check_hostname = False
    elif mode == "require":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def open_connection(params: ConnectParams, password: str | None = None) -> Connection:
    """Open one pg8000.native connection; any failure becomes :class:`StorageUnavailableError`.

    The TCP connect gets its own (short) timeout so an unreachable host fails fast; the
    socket then keeps ``params.timeout`` as the client-side backstop for every statement.
    """
    secret = password if password is not None else params.password
    try:
        sock = socket.create_connection((params.host, params.port), timeout=params.connect_timeout)
    except OSError as error:
        raise StorageUnavailableError(f"Cannot reach PostgreSQL at {params.describe()}: {error}") from error
    try:
        sock.settimeout(params.timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return pg8000.native.Connection(
            user=params.user,
            host=params.host,
            port=params.port,
            database=params.database,
            password=secret,
            sock=sock,
            ssl_context=tls_context(params.tls, params.root_cert),
            application_name=params.application_name,
        )
    except Exception as error:  # pg8000 lets socket errors and timeouts through raw during the handshake
        sock.close()
        reason = describe_error(error)
        if "refuses SSL" in reason:  # the first thing a local server without TLS answers
            reason += (
                f" (TLS mode is {params.tls!r}; for a server without TLS set THREADLOOM_DB_TLS=off "
                "or add ?sslmode=disable to the URL)"
            )
        raise StorageUnavailableError(f"Cannot connect to PostgreSQL at {params.describe()}: {reason}") from error


def dsn_factory(url: str) -> ConnectionFactory:
    """A factory for a libpq-style URL (the form ``PostgresStore("postgresql://...")`` takes)."""
    params = parse_database_url(url)
    return lambda: open_connection(params)


def settings_factory(settings: PostgresSettings, *, rds_client: RDSClient | None = None) -> ConnectionFactory:
    """A factory following ``settings.auth``; each call authenticates afresh.

    IAM tokens live 15 minutes but are only checked at connect, so one is generated per
    connect. A secret is cached by Powertools for ``secret_max_age`` seconds; when the
    server rejects it (rotation), it is re-read once and the connect retried.
    """
    settings.validate()
    params = settings.connect_params()
    if settings.auth in ("password", "dsn"):
        return lambda: open_connection(params)
    if settings.auth == "iam":

        def connect_with_token() -> Connection:
            client = rds_client or _rds_client(settings.region or "")
            try:
                token = client.generate_db_auth_token(
                    DBHostname=params.host, Port=params.port, DBUsername=params.user, Region=settings.region
                )
            except Exception as error:  # botocore raises several unrelated types (no credentials, ...)
                raise StorageUnavailableError(f"Cannot generate an RDS IAM token: {error}") from error
            return open_connection(params, token)

        return connect_with_token

    def connect_with_secret() -> Connection:
        try:
            return _open_with_secret(settings, params, force_fetch=False)
        except StorageUnavailableError as error:
            if not _auth_failed(error):
                raise
        return _open_with_secret(settings, params, force_fetch=True)

    return connect_with_secret


def _open_with_secret(settings: PostgresSettings, params: ConnectParams, *, force_fetch: bool) -> Connection:
    """Read the secret (JSON as RDS writes it, or a bare password) and connect with it.

    Explicit settings win; the secret fills what they leave unset (an RDS-managed secret
    names the instance, while we usually connect to the proxy).
    """
    values = read_secret(settings.secret_id or "", max_age=settings.secret_max_age, force_fetch=force_fetch)
    merged = replace(
        params,
        host=settings.host or str(values.get("host") or params.host),
        port=settings.port or int(values.get("port") or params.port),
        database=settings.database or str(values.get("dbname") or params.database),
        user=settings.user or str(values.get("username") or params.user),
    )
    password = values.get("password")
    if not isinstance(password, str):
        raise StorageUnavailableError(f"Secret {settings.secret_id!r} holds no password")
    return open_connection(merged, password)


def read_secret(secret_id: str, *, max_age: int, force_fetch: bool = False) -> dict[str, Any]:
    """The secret's fields through Powertools Parameters (cached in the execution environment)."""
    try:
        from aws_lambda_powertools.utilities import parameters
    except ImportError as error:  # the [aws] extra is not installed
        raise StorageUnavailableError("THREADLOOM_DB_AUTH=secret needs aws-lambda-powertools") from error
    try:
        raw = parameters.get_secret(secret_id, max_age=max_age, force_fetch=force_fetch)
    except Exception as error:  # Powertools wraps every SDK failure in GetParameterError
        raise StorageUnavailableError(f"Cannot read database secret {secret_id!r}: {error}") from error
    text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"password": text}
    return parsed if isinstance(parsed, dict) else {"password": text}


@lru_cache(maxsize=4)
def _rds_client(region: str) -> RDSClient:
    import boto3

    from threadloom.aws_clients import client_config

    return boto3.client("rds", region_name=region, config=client_config())


# ------------------------------------------------------------------ errors


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a server error (pg8000 puts the server's fields in ``args[0]``)."""
    if isinstance(error, DatabaseError) and error.args and isinstance(error.args[0], dict):
        code = error.args[0].get("C")
        return code if isinstance(code, str) else None
    return None


def is_connection_lost(error: BaseException) -> bool:
    """The connection cannot be used any more (socket gone, or the server ended the session)."""
    if isinstance(error, InterfaceError):
        # pg8000 also uses InterfaceError for misuse (a missing parameter, a failed
        # transaction's COMMIT); only socket-level failures mean the connection is gone.
        text = str(error)
        return isinstance(error.__cause__, OSError) or any(marker in text for marker in _LOST_MARKERS)
    code = sqlstate(error)
    return code is not None and (code.startswith("08") or code in _CONNECTION_LOST_CODES)


def is_server_error(error: BaseException) -> bool:
    """The server answered with an ErrorResponse (pg8000 read up to ReadyForQuery: the protocol is in sync)."""
    return sqlstate(error) is not None


def _auth_failed(error: StorageUnavailableError) -> bool:
    return sqlstate(error.__cause__) in _AUTH_FAILED_CODES if error.__cause__ else False


def describe_error(error: BaseException) -> str:
    """A one-line reason: the server's message and SQLSTATE, or the network error's."""
    if isinstance(error, DatabaseError) and error.args and isinstance(error.args[0], dict):
        fields = error.args[0]
        return f"{fields.get('M', 'server error')} (SQLSTATE {fields.get('C', '?')})"
    cause = error.__cause__
    return f"{error}: {cause}" if cause is not None else str(error) or type(error).__name__
