"""Migrations custom resource: at every deploy, bring the schema up to date and set up the application role.

Create and Update apply the pending migrations as the migrator (DDL rights) and grant the application
role DML rights only (``threadloom.storage.postgres.provisioning``); the answer carries the schema
version, which the template hands to the functions so they update only after the schema did. Any
failure answers FAILED with the reason, which fails the deploy and rolls it back (each migration run is
one transaction, so a failed one leaves the database unchanged). Delete changes nothing: removing the
stack never drops data.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Final

from threadloom.api.observability import logger, tracer
from threadloom.errors import StorageUnavailableError, ValidationError
from threadloom.storage.postgres.connection import PostgresSettings, parse_tls_mode, settings_factory
from threadloom.storage.postgres.database import PostgresDatabase, ServerTimeouts
from threadloom.storage.postgres.provisioning import AppRole, provision
from threadloom_cfn_response import CustomResourceRequest, send_response

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from threadloom.storage.postgres.provisioning import ProvisioningResult

#: Seconds kept back from the function's remaining time to answer CloudFormation whatever happens.
ANSWER_MARGIN_S: Final = 20.0
#: How long to keep trying to reach a database (or proxy) that is still starting.
CONNECT_WAIT_S: Final = 180.0
#: A migration waits at most this long for a lock the running application holds, then fails the deploy.
MIGRATION_LOCK_TIMEOUT_S: Final = 30.0


def settings_from(properties: dict[str, Any], socket_timeout: float) -> PostgresSettings:
    """The migrator's connection: the resource's properties, generous statement limits, a bounded socket."""
    auth = str(properties.get("MigratorAuth") or "iam")
    if auth not in ("iam", "secret", "password"):
        raise ValidationError(f"MigratorAuth must be iam, secret or password, not {auth!r}")
    socket_timeout = max(socket_timeout, MIGRATION_LOCK_TIMEOUT_S + 5)
    return PostgresSettings(
        host=_required(properties, "Host"),
        port=int(properties.get("Port") or 5432),
        database=_required(properties, "Database"),
        user=_required(properties, "MigratorUser"),
        auth=auth,  # type: ignore[arg-type]
        secret_id=properties.get("MigratorSecretArn") or None,
        tls=parse_tls_mode(str(properties.get("Tls") or "verify"), "Tls"),
        region=os.environ.get("AWS_REGION"),
        application_name="threadloom-migrations",
        connect_timeout=5.0,
        timeout=socket_timeout,
        lock_timeout=MIGRATION_LOCK_TIMEOUT_S,
        statement_timeout=None,  # an index build may take long; the socket timeout still bounds it
    )


def app_role_from(properties: dict[str, Any]) -> AppRole:
    password = None
    if secret_arn := properties.get("AppSecretArn"):
        from aws_lambda_powertools.utilities import parameters

        secret = parameters.get_secret(secret_arn, transform="json", force_fetch=True)
        password = str(secret["password"])
    return AppRole(
        name=_required(properties, "AppUser"),
        password=password,
        idle_in_transaction_timeout_ms=int(properties.get("IdleInTransactionTimeoutMs") or 10_000),
    )


def physical_id(properties: dict[str, Any]) -> str:
    """One resource per database: moving to another database replaces it (and the old one's Delete is a no-op)."""
    host, port, database = properties.get("Host", ""), properties.get("Port") or 5432, properties.get("Database", "")
    return f"threadloom-schema:{host}:{port}/{database}"


def wait_until_reachable(database: PostgresDatabase, deadline: float) -> None:
    """A proxy created moments ago may refuse connections for a while; retry until ``deadline``."""
    delay = 2.0
    while True:
        try:
            database.query_once("SELECT 1")
            return
        except StorageUnavailableError as error:
            if time.monotonic() + delay >= deadline:
                raise
            logger.warning("Database not reachable yet; retrying", error=str(error), retry_in_s=delay)
            time.sleep(delay)
            delay = min(delay * 2, 20.0)


def migrate(properties: dict[str, Any], remaining_s: float) -> ProvisioningResult:
    if properties.get("AppUser") == properties.get("MigratorUser"):
        raise ValidationError("The application role must not be the migrator: it would keep DDL rights")
    started = time.monotonic()
    settings = settings_from(properties, socket_timeout=remaining_s - ANSWER_MARGIN_S)
    params = settings.connect_params()

    database = PostgresDatabase(
        settings_factory(settings),
        description=f"PostgreSQL at {params.describe()}",
        timeouts=ServerTimeouts(lock=settings.lock_timeout, statement=settings.statement_timeout),
    )
    try:
        wait_until_reachable(database, started + min(CONNECT_WAIT_S, max(remaining_s - 2 * ANSWER_MARGIN_S, 0)))
        return provision(database, app_role_from(properties))
    finally:
        database.close()


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> None:
    request = CustomResourceRequest.from_event(event)
    resource_id = physical_id(request.properties)
    if request.request_type == "Delete":
        logger.info("Delete: the schema and its data stay", physical_resource_id=request.physical_resource_id)
        send_response(request, "SUCCESS", physical_resource_id=request.physical_resource_id or resource_id)
        return
    try:
        result = migrate(request.properties, context.get_remaining_time_in_millis() / 1000)
    except Exception as error:
        logger.exception("Migrations failed; answering FAILED so the deploy rolls back")
        send_response(request, "FAILED", physical_resource_id=resource_id, reason=f"{type(error).__name__}: {error}")
        return
    logger.info(
        "Schema is current",
        applied=result.applied,
        schema_version=result.schema_version,
        role_created=result.role_created,
    )
    send_response(
        request,
        "SUCCESS",
        physical_resource_id=resource_id,
        reason=f"Schema at version {result.schema_version}; applied {result.applied or 'nothing'}",
        data={"SchemaVersion": str(result.schema_version)},
    )


def _required(properties: dict[str, Any], name: str) -> str:
    value = str(properties.get(name) or "").strip()
    if not value:
        raise ValidationError(f"The migrations resource needs the property {name}")
    return value
