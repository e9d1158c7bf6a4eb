"""``Idempotency-Key`` support for writes, through Powertools idempotency on a DynamoDB table.

The key is scoped by tenant, caller and route through :func:`record_key`, a SHA-256 of the
length-prefixed tuple ``(tenant, subject, method, path, key)``: no tenant claim, subject, path or key
can be chosen to spell another tenant's or user's record (a plain ``tenant#METHOD path#key``
let the claim ``tenant-a#POST /sessions`` replay tenant ``tenant-a``'s answers).
The request body is hashed into the record (``payload_validation_jmespath``), so the
same key with another body raises ``IdempotencyKeyReusedError`` (HTTP 409). Without ``THREADLOOM_IDEMPOTENCY_TABLE``
(the local server, tests) the header is accepted and ignored: appends are still
idempotent by message id in the store (contract §4).

Every keyed write also adds its record's id to an index item per session it names (the path's
session, and the session a create or fork answers), keyed by :func:`threadloom.lifecycle.derived.idempotency_index_key`,
so deleting or erasing a session removes exactly its records by key, never by a scan.

Powertools' idempotency package imports boto3 when imported, so it is loaded by the first keyed write,
not when the API function starts (``bench/cold_start.py``); the Lambda context is kept until then.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, cast

from threadloom.api.exceptions import IdempotencyInProgressError, IdempotencyKeyReusedError
from threadloom.api.observability import logger
from threadloom.lifecycle.derived import aws_client, idempotency_index_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

Outcome = tuple[int, dict[str, Any]]
"""An HTTP status and a JSON body: what is remembered under a key and replayed."""

_lambda_context: LambdaContext | None = None
EXPIRES_AFTER_SECONDS = 3600
_SESSION_PATH = re.compile(r"/sessions/([^/]+)")


@functools.cache
def config() -> IdempotencyConfig:
    """Keys, payload hash and expiry of every idempotent write (built on first use, with boto3)."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="key", payload_validation_jmespath="payload", expires_after_seconds=EXPIRES_AFTER_SECONDS
    )


@functools.cache
def persistence_layer(table: str) -> DynamoDBPersistenceLayer:
    """Built on first use: the layer creates its boto3 client in ``__init__``."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from threadloom.aws_clients import client_config

    return DynamoDBPersistenceLayer(table_name=table, boto_config=client_config())


def record_key(*parts: str) -> str:
    """An unforgeable record key: SHA-256 over each part's UTF-8 length and bytes, in order."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def sessions_named(path: str, body: dict[str, Any]) -> list[str]:
    """The sessions a write's record belongs to: the one in its path, and the one a create or fork answers."""
    found: list[str] = []
    match = _SESSION_PATH.search(path)
    if match and match.group(1) not in ("open", "import", "import-from-s3"):
        found.append(urllib.parse.unquote(match.group(1)))
    created = body.get("id")
    if path.rstrip("/").endswith(("/sessions", "/fork")) and isinstance(created, str):
        found.append(created)
    return list(dict.fromkeys(found))


def index_record(table: str, namespace: str, session_ids: list[str], record_id: str) -> None:
    """Add ``record_id`` to each session's index item, which expires with the records it lists."""
    client = aws_client("dynamodb")
    expiration = int(time.time()) + EXPIRES_AFTER_SECONDS + 60
    for session_id in session_ids:
        client.update_item(
            TableName=table,
            Key={"id": {"S": idempotency_index_key(namespace, session_id)}},
            UpdateExpression="ADD #records :record SET #expiration = :expiration",
            ExpressionAttributeNames={"#records": "records", "#expiration": "expiration"},
            ExpressionAttributeValues={":record": {"SS": [record_id]}, ":expiration": {"N": str(expiration)}},
        )


def register_lambda_context(context: LambdaContext) -> None:
    """Lets an ``INPROGRESS`` record of a timed-out invocation be retried before it expires.

    Kept here and handed to Powertools by :func:`run_idempotent`, so an invocation without a keyed write
    never loads the idempotency package.
    """
    global _lambda_context  # noqa: PLW0603 - the current invocation's context, one per execution environment
    _lambda_context = context


def run_idempotent(
    table: str | None, key: str | None, *, scope: tuple[str, ...], payload: Any, run: Callable[[], Outcome]
) -> Outcome:
    """``run()`` once per ``(*scope, key)``; later calls with the same key replay its outcome."""
    if not table or not key:
        return run()
    from aws_lambda_powertools.utilities.idempotency import idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )

    idempotency = config()
    if _lambda_context is not None:
        idempotency.register_lambda_context(_lambda_context)

    def remembered(request: dict[str, Any]) -> dict[str, Any]:
        status, body = run()
        return {"status": status, "body": body}

    wrapped = cast(
        "Callable[..., dict[str, Any]]",
        idempotent_function(
            remembered, data_keyword_argument="request", config=idempotency, persistence_store=persistence_layer(table)
        ),
    )
    request = {"key": record_key(*scope, key), "payload": payload}
    try:
        stored = wrapped(request=request)
    except IdempotencyValidationError as error:
        raise IdempotencyKeyReusedError(
            "This Idempotency-Key was already used with a different request body"
        ) from error
    except IdempotencyAlreadyInProgressError as error:
        raise IdempotencyInProgressError("A request with this Idempotency-Key is still in progress") from error
    body = dict(stored["body"])
    record_id = persistence_layer(table)._get_hashed_idempotency_key(request)  # the id Powertools stored it under
    tenant, path = scope[0], scope[-1]
    named = sessions_named(path, body)
    if record_id and named:
        try:
            index_record(table, tenant, named, record_id)
        except Exception as error:  # the write succeeded: answer it; the record still expires within the hour
            logger.warning("idempotency record not indexed", error=str(error), sessions=len(named))
    return int(stored["status"]), body


__all__ = [
    "Outcome",
    "config",
    "index_record",
    "persistence_layer",
    "record_key",
    "register_lambda_context",
    "run_idempotent",
    "sessions_named",
]
