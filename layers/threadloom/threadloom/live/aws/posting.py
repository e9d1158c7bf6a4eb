"""Posting one live event to given WebSocket connections through the API Gateway Management API.

Shared by both deployed publishing paths: the direct publisher (inside the write, when the functions can reach
``execute-api``) and the publisher function fed by the live-events queue (outside the VPC). Each post has short
timeouts and no retries, posting stops at a deadline, and a connection that answers 410 Gone has closed without
``$disconnect`` reaching us (or before its TTL), so it is removed with all its subscriptions. Nothing here raises.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from threadloom.errors import ThreadloomError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mypy_boto3_apigatewaymanagementapi.client import ApiGatewayManagementApiClient

    from threadloom.live.aws.connections import ConnectionsTable

logger = logging.getLogger(__name__)

_CLIENT_CONFIG = Config(connect_timeout=0.5, read_timeout=0.5, retries={"mode": "standard", "total_max_attempts": 1})
_GONE = 410


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
    """

    def __init__(
        self,
        connections: ConnectionsTable,
        endpoint_url: str,
        *,
        client: ApiGatewayManagementApiClient | None = None,
    ) -> None:
        self._connections = connections
        self._endpoint_url = endpoint_url
        self._client = client

    @property
    def _api(self) -> ApiGatewayManagementApiClient:
        if self._client is None:
            self._client = management_api_client(self._endpoint_url)
        return self._client

    def post_all(self, connection_ids: Sequence[str], data: bytes, *, deadline: float, what: str) -> PostOutcome:
        """Post ``data`` to each connection until ``time.monotonic()`` reaches ``deadline``; never raises.

        ``what`` names the event in log lines (its type and session, never its content).
        """
        delivered = gone = failed = 0
        for index, connection_id in enumerate(connection_ids):
            if time.monotonic() >= deadline:
                skipped = len(connection_ids) - index
                logger.warning(
                    "Live publish of %s over budget: %d of %d subscribers skipped", what, skipped, len(connection_ids)
                )
                return PostOutcome(delivered, gone, failed, skipped)
            result = self._post(connection_id, data)
            delivered += result == "delivered"
            gone += result == "gone"
            failed += result == "failed"
        return PostOutcome(delivered, gone, failed)

    def _post(self, connection_id: str, data: bytes) -> str:
        try:
            self._api.post_to_connection(ConnectionId=connection_id, Data=data)
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


__all__ = ["ConnectionPoster", "PostOutcome", "management_api_client"]
