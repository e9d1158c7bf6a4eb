"""Deploy-time set-up of a PostgreSQL database: the migrations, then the application role with DML rights only.

Run by the migrations custom resource as a migrator role that may create tables and roles (the
cluster's master user when the stack creates the database). The functions then connect as the
application role, which can read and write Threadloom's rows and call its functions but cannot
change the schema, so the deployed profile never migrates on a request.

Names and the password are never spliced into SQL here: ``format('%I', ...)`` and
``format('%L', ...)`` quote them on the server, and only the statement it returns is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from threadloom.errors import ValidationError
from threadloom.storage.postgres.schema import applied_versions, apply_postgres_migrations

if TYPE_CHECKING:
    from threadloom.storage.postgres.database import PostgresDatabase, PostgresExecutor

DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS: Final = 10_000
MIGRATIONS_TABLE: Final = "threadloom_schema_migrations"


class ProvisioningSql:
    """The statements of this module (each returns the DDL to run, quoted by the server)."""

    role_exists = "SELECT 1 FROM pg_roles WHERE rolname = :role"
    create_role = "SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :role::text, :password::text)"
    set_password = "SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', :role::text, :password::text)"
    set_idle_timeout = (
        "SELECT format('ALTER ROLE %I SET idle_in_transaction_session_timeout = %L', :role::text, :value::text)"
    )
    grant_schema_usage = "SELECT format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), :role::text)"
    grant_tables = (
        "SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE %I.%I TO %I', schemaname, tablename, :role::text)"
        " FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'threadloom\\_%'"
        f" AND tablename <> '{MIGRATIONS_TABLE}' ORDER BY tablename"
    )
    grant_migrations_table = (
        f"SELECT format('GRANT SELECT ON TABLE %I.{MIGRATIONS_TABLE} TO %I', current_schema(), :role::text)"
    )
    grant_sequences = (
        "SELECT format('GRANT USAGE, SELECT ON SEQUENCE %I.%I TO %I', sequence_schema, sequence_name, :role::text)"
        " FROM information_schema.sequences"
        " WHERE sequence_schema = current_schema() AND sequence_name LIKE 'threadloom\\_%' ORDER BY sequence_name"
    )
    grant_functions = (
        "SELECT format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure, :role::text)"
        " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.proname LIKE 'threadloom\\_%' ORDER BY 1"
    )


@dataclass(frozen=True, slots=True)
class AppRole:
    """The role the functions connect as; ``password`` None leaves an existing role's password alone."""

    name: str
    password: str | None = None
    idle_in_transaction_timeout_ms: int = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("The application role needs a name")
        if self.password is not None and not self.password:
            raise ValidationError(f"The password of role {self.name!r} is empty")
        if self.idle_in_transaction_timeout_ms <= 0:
            raise ValidationError("idle_in_transaction_timeout_ms must be positive")


@dataclass(frozen=True, slots=True)
class ProvisioningResult:
    applied: list[int]
    schema_version: int
    role_created: bool


def provision(database: PostgresDatabase, app_role: AppRole) -> ProvisioningResult:
    """Apply pending migrations (one transaction), then create or update ``app_role`` and its grants.

    Both steps are idempotent, so a retried or rolled-back deploy can run them again. A failed
    migration raises before the role is touched, leaving the database as it was.
    """
    applied = apply_postgres_migrations(database)
    with database.write() as tx:
        created = _ensure_role(tx, app_role)
        for statement in _grants(tx, app_role.name):
            tx.execute(statement)
    versions = applied_versions(database) or set()
    return ProvisioningResult(applied=applied, schema_version=max(versions, default=0), role_created=created)


def _ensure_role(tx: PostgresExecutor, role: AppRole) -> bool:
    exists = bool(tx.query(ProvisioningSql.role_exists, {"role": role.name}))
    if not exists and role.password is None:
        raise ValidationError(
            f"Role {role.name!r} does not exist and no password was given to create it "
            "(give the application secret, or create the role and register it with the proxy first)"
        )
    if role.password is not None:
        template = ProvisioningSql.set_password if exists else ProvisioningSql.create_role
        tx.execute(_rendered(tx, template, {"role": role.name, "password": role.password}))
    value = f"{role.idle_in_transaction_timeout_ms}ms"
    tx.execute(_rendered(tx, ProvisioningSql.set_idle_timeout, {"role": role.name, "value": value}))
    return not exists


def _grants(tx: PostgresExecutor, role: str) -> list[str]:
    params = {"role": role}
    statements = [_rendered(tx, ProvisioningSql.grant_schema_usage, params)]
    for query in (ProvisioningSql.grant_tables, ProvisioningSql.grant_sequences, ProvisioningSql.grant_functions):
        statements += [str(row[0]) for row in tx.query(query, params)]
    statements.append(_rendered(tx, ProvisioningSql.grant_migrations_table, params))
    return statements


def _rendered(tx: PostgresExecutor, query: str, params: dict[str, str]) -> str:
    return str(tx.query(query, params)[0][0])


__all__ = ["AppRole", "ProvisioningResult", "ProvisioningSql", "provision"]
