"""Posting one live event to given WebSocket connections through the API Gateway Management API.

Shared by both deployed publishing paths: the direct publisher (inside the write, when the functions can reach
``execute-api``) and the publisher function fed by the live-events queue (outside the VPC), which posts to a
message's connections several at a time. Each post has short timeouts and no retries, no post starts after a
deadline, and a connection that answers 410 Gone has closed without ``$disconnect`` reaching us (or before its
TTL), so it is removed with all its subscriptions. Nothing here raises.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from threadloom.errors import ThreadloomError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mypy_boto3_apigatewaymanagementapi.client import ApiGatewayManagementApiClient

    from threadloom.live.aws.connections import ConnectionsTable

logger = logging.getLogger(__name__)

_CLIENT_CONFIG = Config(connect_timeout=0.5, read_timeout=0.5, retries={"mode": "standard", "total_max_attempts": 1})
_GONE = 410
MAX_CONCURRENCY = 10
"""botocore's connection pool size: more threads than this would wait for a connection."""


@functools.cache
def management_api_client(endpoint_url: str) -> ApiGatewayManagementApiClient:
    """The Management API client of one WebSocket stage, built on first use and reused across invocations."""
    import boto3

    return boto3.session.Session().client("apigatewaymanagementapi", endpoint_url=endpoint_url, config=_CLIENT_CONFIG)


@dataclass(frozen=True, slots=True)
class PostOutcome:
    """What became of one event's posts: delivered, gone (and forgotten), failed, or skipped at the deadline."""

    delivered: int = 0
    gone: int = 0
    failed: int = 0
    skipped: int = 0


class ConnectionPoster:
    """Posts encoded events to connections of one WebSocket stage and forgets the connections that are gone.

    Parameters
    ----------
    connections:
        The connections table (a gone connection is closed there).
    endpoint_url:
        The stage's ``https://<api id>.execute-api.<region>.amazonaws.com/<stage>`` URL.
    client:
        A Management API client, for tests; by default ``management_api_client(endpoint_url)``.
    concurrency:
        Posts in flight at once (1: one after the other, as inside a write; at most ``MAX_CONCURRENCY``).
    """

    def __init__(
        self,
        connections: ConnectionsTable,
        endpoint_url: str,
        *,
        client: ApiGatewayManagementApiClient | None = None,
        concurrency: int = 1,
    ) -> None:
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValidationError(f"ConnectionPoster concurrency must be 1 to {MAX_CONCURRENCY}, not {concurrency}")
        self._connections = connections
        self._endpoint_url = endpoint_url
        self._client = client
        self._concurrency = concurrency
        self._pool: ThreadPoolExecutor | None = None

    @property
    def _api(self) -> ApiGatewayManagementApiClient:
        if self._client is None:
            self._client = management_api_client(self._endpoint_url)
        return self._client

    def post_all(self, connection_ids: Sequence[str], data: bytes, *, deadline: float, what: str) -> PostOutcome:
        """Post ``data`` to each connection, starting no post once ``time.monotonic()`` reaches ``deadline``.

        Never raises. ``what`` names the event in log lines (its type and session, never its content).
        """
        api = self._api

        def post(connection_id: str) -> str:
            if time.monotonic() >= deadline:
                return "skipped"
            return self._post(api, connection_id, data)

        if self._concurrency == 1 or len(connection_ids) < 2:
            results = [post(connection_id) for connection_id in connection_ids]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="live-post")
            results = list(self._pool.map(post, connection_ids))
        outcome = PostOutcome(
            delivered=results.count("delivered"),
            gone=results.count("gone"),
            failed=results.count("failed"),
            skipped=results.count("skipped"),
        )
        if outcome.skipped:
            logger.warning(
                "Live publish of %s over budget: %d of %d subscribers skipped", what, outcome.skipped, len(results)
            )
        return outcome

    def _post(self, api: ApiGatewayManagementApiClient, connection_id: str, data: bytes) -> str:
        try:
            api.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == _GONE:
                self._forget(connection_id)
                return "gone"
            logger.warning("Post to connection %r failed: %s", connection_id, exc)
            return "failed"
        except BotoCoreError as exc:  # timeouts, connection errors
            logger.warning("Post to connection %r failed: %s", connection_id, exc)
            return "failed"
        return "delivered"

    def _forget(self, connection_id: str) -> None:
        try:
            removed = self._connections.close(connection_id)
        except ThreadloomError:
            logger.warning("Could not forget gone connection %r", connection_id, exc_info=True)
            return
        logger.info("Connection %r is gone; removed %d items", connection_id, removed)


__all__ = ["MAX_CONCURRENCY", "ConnectionPoster", "PostOutcome", "management_api_client"]
