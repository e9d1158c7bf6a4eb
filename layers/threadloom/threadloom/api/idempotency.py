"""``Idempotency-Key`` support for writes, through Powertools idempotency on a DynamoDB table.

The key is scoped by tenant and route through :func:`record_key`, a SHA-256 of the
length-prefixed tuple ``(tenant, method, path, key)``: no tenant claim, path or key
can be chosen to spell another tenant's record (a plain ``tenant#METHOD path#key``
let the claim ``tenant-a#POST /sessions`` replay tenant ``tenant-a``'s answers).
The request body is hashed into the record (``payload_validation_jmespath``), so the
same key with another body raises ``IdempotencyValidationError`` (HTTP 409). Without ``THREADLOOM_IDEMPOTENCY_TABLE``
(the local server, tests) the header is accepted and ignored: appends are still
idempotent by message id in the store (contract §4).
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from aws_lambda_powertools.utilities.typing import LambdaContext

Outcome = tuple[int, dict[str, Any]]
"""An HTTP status and a JSON body: what is remembered under a key and replayed."""

CONFIG = IdempotencyConfig(
    event_key_jmespath="key",
    payload_validation_jmespath="payload",
    expires_after_seconds=3600,
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
    """Lets an ``INPROGRESS`` record of a timed-out invocation be retried before it expires."""
    CONFIG.register_lambda_context(context)


def run_idempotent(
    table: str | None, key: str | None, *, scope: tuple[str, ...], payload: Any, run: Callable[[], Outcome]
) -> Outcome:
    """``run()`` once per ``(*scope, key)``; later calls with the same key replay its outcome."""
    if not table or not key:
        return run()

    def remembered(request: dict[str, Any]) -> dict[str, Any]:
        status, body = run()
        return {"status": status, "body": body}

    wrapped = cast(
        "Callable[..., dict[str, Any]]",
        idempotent_function(
            remembered, data_keyword_argument="request", config=CONFIG, persistence_store=persistence_layer(table)
        ),
    )
    stored = wrapped(request={"key": record_key(*scope, key), "payload": payload})
    return int(stored["status"]), dict(stored["body"])


__all__ = ["CONFIG", "Outcome", "persistence_layer", "record_key", "register_lambda_context", "run_idempotent"]
