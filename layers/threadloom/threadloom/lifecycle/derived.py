"""Erasers for what the deployed stack keeps about a session outside the database (``DerivedDataEraser``).

- the frozen prompt in the DynamoDB prompt cache (item ``<tenant>#<session id>``);
- Powertools idempotency records whose stored response names the session (a create or
  fork replays the session's name); they expire within an hour, but erasure cannot wait;
- export files written to S3 for presigned downloads (``exports/<tenant>/<session id>/…``).

Clients are created lazily (boto3 is imported only when an eraser first runs).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client

EXPORT_PREFIX = "exports/"


@functools.cache
def aws_client(service: str) -> Any:
    """One lazily built boto3 client per service for the process (timeouts and standard retries)."""
    import boto3

    from threadloom.aws_clients import client_config

    return boto3.session.Session().client(service, config=client_config())  # type: ignore[call-overload]


def export_object_prefix(namespace: str, session_id: str) -> str:
    """Where a session's export files live in the export bucket."""
    return f"{EXPORT_PREFIX}{namespace}/{session_id}/"


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
    """Deletes idempotency records whose remembered response mentions the session id.

    The records are keyed by a hash of the client's key, so they are found by a filtered
    scan; the table only holds the last hour of writes (its TTL), which keeps that cheap.
    """

    kind = "idempotency_records"

    def __init__(self, table: str, *, client: DynamoDBClient | None = None) -> None:
        self._table = table
        self._client = client

    def erase_session(self, namespace: str, session_id: str) -> int:
        client: DynamoDBClient = self._client or aws_client("dynamodb")
        removed = 0
        paginator = client.get_paginator("scan")
        pages = paginator.paginate(
            TableName=self._table,
            FilterExpression="contains(#data, :sid)",
            ExpressionAttributeNames={"#data": "data", "#id": "id"},
            ExpressionAttributeValues={":sid": {"S": session_id}},
            ProjectionExpression="#id",
        )
        for page in pages:
            for item in page.get("Items", []):
                client.delete_item(TableName=self._table, Key={"id": item["id"]})
                removed += 1
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
    "IdempotencyRecordEraser",
    "S3ExportEraser",
    "export_object_prefix",
]
