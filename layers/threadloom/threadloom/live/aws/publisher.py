"""The deployed ``StatusPublisher``: one ``post_to_connection`` per subscriber through the API Gateway Management API.

Publishing runs inside the write that triggered it (API function) or the compaction (worker), so it is bounded:
the subscribers are one Query, each post has short timeouts and no retries, posting stops when the publish budget
is spent, and nothing it does ever raises. A connection that answers 410 Gone has closed without ``$disconnect``
reaching us (or before its TTL), so it is removed with all its subscriptions.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from threadloom.errors import ThreadloomError
from threadloom.live.events import encode
from threadloom.live.publisher import PUBLISH_BUDGET_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_apigatewaymanagementapi.client import ApiGatewayManagementApiClient

    from threadloom.live.aws.connections import ConnectionsTable
    from threadloom.live.events import LiveEvent

logger = logging.getLogger(__name__)

_CLIENT_CONFIG = Config(connect_timeout=0.5, read_timeout=0.5, retries={"mode": "standard", "total_max_attempts": 1})
_GONE = 410


@functools.cache
def management_api_client(endpoint_url: str) -> ApiGatewayManagementApiClient:
    """The Management API client of one WebSocket stage, built on first use and reused across invocations."""
    import boto3

    return boto3.session.Session().client("apigatewaymanagementapi", endpoint_url=endpoint_url, config=_CLIENT_CONFIG)


class ManagementApiPublisher:
    """Posts live events to a session's subscribers on an API Gateway WebSocket stage.

    Parameters
    ----------
    connections:
        The connections table (who is subscribed to what).
    endpoint_url:
        The stage's ``https://<api id>.execute-api.<region>.amazonaws.com/<stage>`` URL.
    client:
        A Management API client, for tests; by default ``management_api_client(endpoint_url)``.
    budget_seconds:
        Posting stops once this much time has passed (the Protocol's ``PUBLISH_BUDGET_SECONDS``).

    Examples
    --------
    >>> publisher = ManagementApiPublisher(ConnectionsTable("connections"), "https://abc.execute-api.eu-west-1.amazonaws.com/dev")
    >>> publisher.publish("tenant-a", "s1", session_changed("s1", "append"))  # doctest: +SKIP
    """

    def __init__(
        self,
        connections: ConnectionsTable,
        endpoint_url: str,
        *,
        client: ApiGatewayManagementApiClient | None = None,
        budget_seconds: float = PUBLISH_BUDGET_SECONDS,
    ) -> None:
        self._connections = connections
        self._endpoint_url = endpoint_url
        self._client = client
        self._budget_seconds = budget_seconds

    @property
    def _api(self) -> ApiGatewayManagementApiClient:
        if self._client is None:
            self._client = management_api_client(self._endpoint_url)
        return self._client

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        """Post ``event`` to every subscriber of the session; never raises."""
        deadline = time.monotonic() + self._budget_seconds
        try:
            subscribers = self._connections.subscribers(namespace, session_id)
        except ThreadloomError:
            logger.warning("Could not read the subscribers of session %r", session_id, exc_info=True)
            return
        if not subscribers:
            return
        data = encode(event).encode("utf-8")
        for index, connection_id in enumerate(subscribers):
            if time.monotonic() >= deadline:
                logger.warning(
                    "Live publish of %s for session %r over budget: %d of %d subscribers skipped",
                    event["type"],
                    session_id,
                    len(subscribers) - index,
                    len(subscribers),
                )
                return
            self._post(connection_id, data)

    def _post(self, connection_id: str, data: bytes) -> None:
        try:
            self._api.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == _GONE:
                self._forget(connection_id)
            else:
                logger.warning("Post to connection %r failed: %s", connection_id, exc)
        except BotoCoreError as exc:  # timeouts, connection errors
            logger.warning("Post to connection %r failed: %s", connection_id, exc)

    def _forget(self, connection_id: str) -> None:
        try:
            removed = self._connections.close(connection_id)
        except ThreadloomError:
            logger.warning("Could not forget gone connection %r", connection_id, exc_info=True)
            return
        logger.info("Connection %r is gone; removed %d items", connection_id, removed)


__all__ = ["ManagementApiPublisher", "management_api_client"]
