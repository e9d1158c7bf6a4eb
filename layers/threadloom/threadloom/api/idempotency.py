"""``Idempotency-Key`` support for writes, through Powertools idempotency on a DynamoDB table.

The key is scoped by tenant and route through :func:`record_key`, a SHA-256 of the
length-prefixed tuple ``(tenant, method, path, key)``: no tenant claim, path or key
can be chosen to spell another tenant's record (a plain ``tenant#METHOD path#key``
let the claim ``tenant-a#POST /sessions`` replay tenant ``tenant-a``'s answers).
The request body is hashed into the record (``payload_validation_jmespath``), so the
same key with another body raises ``IdempotencyKeyReusedError`` (HTTP 409). Without ``THREADLOOM_IDEMPOTENCY_TABLE``
(the local server, tests) the header is accepted and ignored: appends are still
idempotent by message id in the store (contract §4).

Powertools' idempotency package imports boto3 when imported, so it is loaded by the first keyed write,
not when the API function starts (``bench/cold_start.py``); the Lambda context is kept until then.
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any, cast

from threadloom.api.exceptions import IdempotencyInProgressError, IdempotencyKeyReusedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

Outcome = tuple[int, dict[str, Any]]
"""An HTTP status and a JSON body: what is remembered under a key and replayed."""

_lambda_context: LambdaContext | None = None


@functools.cache
def config() -> IdempotencyConfig:
    """Keys, payload hash and expiry of every idempotent write (built on first use, with boto3)."""
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="key", payload_validation_jmespath="payload", expires_after_seconds=3600
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
    try:
        stored = wrapped(request={"key": record_key(*scope, key), "payload": payload})
    except IdempotencyValidationError as error:
        raise IdempotencyKeyReusedError(
            "This Idempotency-Key was already used with a different request body"
        ) from error
    except IdempotencyAlreadyInProgressError as error:
        raise IdempotencyInProgressError("A request with this Idempotency-Key is still in progress") from error
    return int(stored["status"]), dict(stored["body"])


__all__ = ["Outcome", "config", "persistence_layer", "record_key", "register_lambda_context", "run_idempotent"]
