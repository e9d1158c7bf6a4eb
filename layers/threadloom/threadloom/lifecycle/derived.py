"""Erasers for what the deployed stack keeps about a session outside the database (``DerivedDataEraser``).

- the frozen prompt in the DynamoDB prompt cache (item ``<tenant>#<session id>``);
- Powertools idempotency records of the session's writes (a create or fork replays the
  session's name); they expire within an hour, but erasure cannot wait. Each keyed write
  also lists its record in a per-session index item (:func:`idempotency_index_key`), so
  erasing reads one item by its exact key instead of scanning the table;
- export files written to S3 for presigned downloads (``exports/<tenant>/<session id>/…``,
  the tenant and id encoded by :func:`key_segment`).

Clients are created lazily (boto3 is imported only when an eraser first runs).
"""

from __future__ import annotations

import functools
import hashlib
import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client

EXPORT_PREFIX = "exports/"
IDEMPOTENCY_INDEX_PREFIX = "session-records#"


@functools.cache
def aws_client(service: str) -> Any:
    """One lazily built boto3 client per service for the process (timeouts and standard retries)."""
    import boto3

    from threadloom.aws_clients import client_config

    return boto3.session.Session().client(service, config=client_config())  # type: ignore[call-overload]


def key_segment(value: str) -> str:
    """One S3 key segment for a tenant or id: percent-encoded, so no claim (``acme/x``) spells a deeper prefix.

    Every character but ``A-Z a-z 0-9 - _ . ~`` is encoded, ``/`` and ``%`` included, and ``.``/``..``
    (which some tools read as path steps) become ``%2E``/``%2E%2E``: distinct values give distinct
    segments and no segment is a prefix of another's folder.
    """
    encoded = urllib.parse.quote(value, safe="")
    return encoded.replace(".", "%2E") if not encoded.strip(".") else encoded


def export_object_prefix(namespace: str, session_id: str) -> str:
    """Where a session's export files live in the export bucket."""
    return f"{EXPORT_PREFIX}{key_segment(namespace)}/{key_segment(session_id)}/"


def idempotency_index_key(namespace: str, session_id: str) -> str:
    """The id of the item listing a session's idempotency records: exact, tenant-scoped, unforgeable.

    SHA-256 over the length-prefixed namespace and session id, so no tenant claim or session id
    (``:``, or one that is a substring of another's) names another tenant's index.
    """
    digest = hashlib.sha256()
    for part in (namespace, session_id):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f"{IDEMPOTENCY_INDEX_PREFIX}{digest.hexdigest()}"


class DynamoDBPromptCacheEraser:
    """Deletes the session's frozen prompt item from the DynamoDB prompt table."""

    kind = "prompt_cache"

    def __init__(self, table: str, *, client: DynamoDBClient | None = None) -> None:
        self._table = table
        self._client = client

    def erase_session(self, namespace: str, session_id: str) -> int:
        client: DynamoDBClient = self._client or aws_client("dynamodb")
        response = client.delete_item(
            TableName=self._table, Key={"pk": {"S": f"{namespace}#{session_id}"}}, ReturnValues="ALL_OLD"
        )
        return 1 if response.get("Attributes") else 0


class IdempotencyRecordEraser:
    """Deletes the idempotency records of the session's writes, listed in its index item.

    ``threadloom.api.idempotency`` adds every keyed write's record id to the item
    :func:`idempotency_index_key` names (with the records' expiry), so this reads one item by
    its exact key and deletes what it lists: no scan, and nothing of another tenant or session.
    """

    kind = "idempotency_records"

    def __init__(self, table: str, *, client: DynamoDBClient | None = None) -> None:
        self._table = table
        self._client = client

    def erase_session(self, namespace: str, session_id: str) -> int:
        client: DynamoDBClient = self._client or aws_client("dynamodb")
        index = {"id": {"S": idempotency_index_key(namespace, session_id)}}
        item = client.get_item(TableName=self._table, Key=index, ConsistentRead=True).get("Item") or {}
        removed = 0
        for record_id in sorted(item.get("records", {}).get("SS", [])):
            response = client.delete_item(TableName=self._table, Key={"id": {"S": record_id}}, ReturnValues="ALL_OLD")
            removed += 1 if response.get("Attributes") else 0
        if item:
            client.delete_item(TableName=self._table, Key=index)
        return removed


class S3ExportEraser:
    """Deletes the session's export files from the export bucket."""

    kind = "export_objects"

    def __init__(self, bucket: str, *, client: S3Client | None = None) -> None:
        self._bucket = bucket
        self._client = client

    def erase_session(self, namespace: str, session_id: str) -> int:
        client: S3Client = self._client or aws_client("s3")
        removed = 0
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=export_object_prefix(namespace, session_id)):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=self._bucket, Delete={"Objects": keys, "Quiet": True})  # type: ignore[typeddict-item]
                removed += len(keys)
        return removed


__all__ = [
    "EXPORT_PREFIX",
    "aws_client",
    "DynamoDBPromptCacheEraser",
    "IDEMPOTENCY_INDEX_PREFIX",
    "IdempotencyRecordEraser",
    "S3ExportEraser",
    "export_object_prefix",
    "idempotency_index_key",
    "key_segment",
]
