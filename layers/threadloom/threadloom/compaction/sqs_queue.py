"""Compaction requests on an SQS FIFO queue, consumed by the compaction Lambda (contract D9).

* ``MessageGroupId`` is ``"<namespace>:<session_id>"``, so one session's compactions run one at a time and in order
  while different sessions proceed in parallel. Distinct sessions never share a group: the readable form is used only
  when the namespace contains no ``:`` (so its first ``:`` ends the namespace; ``("acme", "eu:s1")`` gives
  ``"acme:eu:s1"`` while ``("acme:eu", "s1")`` is hashed), and SQS allows at most 128 characters from printable ASCII
  without spaces in a group id. Any other pair gets ``"sha256-<hex of namespace and session>"`` (still one group per
  session; it contains no ``:``, so it cannot collide with a readable one).
* ``MessageDeduplicationId`` is the SHA-256 hex of ``(namespace, session_id, leaf_id)``: the same trigger repeated
  within SQS's five-minute deduplication window is delivered once.
* The body is ``CompactionRequest.to_json()``; the id of the API request that queued it (if any) travels as the
  message attribute ``threadloom-correlation-id`` so the worker's logs name the request.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from threadloom import correlation
from threadloom.aws_clients import client_config
from threadloom.errors import StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

    from threadloom.compaction.queue import CompactionRequest

logger = logging.getLogger(__name__)

MAX_GROUP_ID_LENGTH = 128
_MISSING_QUEUE_CODES = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


@functools.cache
def default_sqs_client() -> SQSClient:
    """The process-wide SQS client used when none is injected, built on first use (never at import)."""
    import boto3

    return boto3.session.Session().client("sqs", config=client_config())


def message_group_id(request: CompactionRequest) -> str:
    """The FIFO group of ``request``'s session, one per ``(namespace, session_id)`` and never shared.

    ``"<namespace>:<session_id>"`` when the namespace has no ``:`` (else the split would be ambiguous) and SQS
    accepts it (at most 128 characters, printable ASCII without spaces); otherwise ``"sha256-<64 hex>"``.
    """
    readable = f"{request.namespace}:{request.session_id}"
    if (
        ":" not in request.namespace
        and len(readable) <= MAX_GROUP_ID_LENGTH
        and all("!" <= char <= "~" for char in readable)
    ):
        return readable
    digest = hashlib.sha256(json.dumps([request.namespace, request.session_id]).encode("utf-8")).hexdigest()
    return f"sha256-{digest}"


def deduplication_id(request: CompactionRequest) -> str:
    """SHA-256 hex (64 characters) of ``(namespace, session_id, leaf_id)``, unambiguous whatever the ids contain."""
    return hashlib.sha256(json.dumps(list(request.dedup_key)).encode("utf-8")).hexdigest()


class SqsCompactionQueue:
    """A ``CompactionQueue`` that sends each request to an SQS FIFO queue.

    Parameters
    ----------
    queue_url:
        URL of a FIFO queue (its name ends in ``.fifo``).
    client:
        An SQS client to use; by default ``default_sqs_client()`` is built on first use.

    Examples
    --------
    >>> compactions = SqsCompactionQueue("https://sqs.eu-west-1.amazonaws.com/123456789012/compactions.fifo")
    >>> compactions.enqueue(CompactionRequest.create("tenant-1", "session-9"))  # doctest: +SKIP
    """

    def __init__(self, queue_url: str, *, client: SQSClient | None = None) -> None:
        if not queue_url or not queue_url.rstrip("/").endswith(".fifo"):
            raise ValidationError(f"SqsCompactionQueue needs a FIFO queue URL (ending in .fifo), got {queue_url!r}")
        self._queue_url = queue_url
        self._client = client

    @property
    def queue_url(self) -> str:
        """The FIFO queue URL."""
        return self._queue_url

    @property
    def _sqs(self) -> SQSClient:
        if self._client is None:
            self._client = default_sqs_client()
        return self._client

    def enqueue(self, request: CompactionRequest) -> None:
        """Send ``request``; any SQS or network failure raises ``StorageUnavailableError``."""
        correlation_id = correlation.current()
        attributes: dict[str, MessageAttributeValueTypeDef] = (
            {correlation.MESSAGE_ATTRIBUTE: {"DataType": "String", "StringValue": correlation_id}}
            if correlation_id
            else {}
        )
        try:
            response = self._sqs.send_message(
                QueueUrl=self._queue_url,
                MessageBody=request.to_json(),
                MessageGroupId=message_group_id(request),
                MessageDeduplicationId=deduplication_id(request),
                MessageAttributes=attributes,
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _MISSING_QUEUE_CODES:
                message = f"Compaction queue {self._queue_url} does not exist"
            else:
                message = f"Could not enqueue compaction on {self._queue_url}: {code}"
            raise StorageUnavailableError(message) from exc
        except BotoCoreError as exc:
            raise StorageUnavailableError(f"Could not reach compaction queue {self._queue_url}: {exc}") from exc
        logger.debug(
            "Compaction enqueued for session %r in namespace %r as message %s",
            request.session_id,
            request.namespace,
            response.get("MessageId"),
        )


__all__ = [
    "SqsCompactionQueue",
    "deduplication_id",
    "default_sqs_client",
    "message_group_id",
]
