"""The direct deployed ``StatusPublisher``: one ``post_to_connection`` per subscriber, from inside the write.

For stacks whose functions reach ``execute-api`` (no VPC, or a NAT): ``LivePublishing=direct`` in template.yaml.
Functions in private subnets without a NAT cannot reach the Management API (no VPC endpoint serves it), so they
hand events to the publisher function instead (``threadloom.live.aws.queue_publisher``). Publishing runs inside
the write that triggered it (API function) or the compaction (worker), so it is bounded: the subscribers are read
a Query page at a time, reading and posting stop when the publish budget is spent, each post has short timeouts
and no retries, and nothing it does ever raises.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from threadloom.errors import ThreadloomError
from threadloom.live.aws.posting import ConnectionPoster, management_api_client
from threadloom.live.events import encode
from threadloom.live.publisher import PUBLISH_BUDGET_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_apigatewaymanagementapi.client import ApiGatewayManagementApiClient

    from threadloom.live.aws.connections import ConnectionsTable
    from threadloom.live.events import LiveEvent

logger = logging.getLogger(__name__)


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
        self._poster = ConnectionPoster(connections, endpoint_url, client=client)
        self._budget_seconds = budget_seconds

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        """Post ``event`` to every subscriber of the session; never raises."""
        deadline = time.monotonic() + self._budget_seconds
        what = f"{event['type']} for session {session_id!r}"
        data: bytes | None = None
        try:
            for subscribers in self._connections.subscriber_pages(namespace, session_id):
                if time.monotonic() >= deadline:
                    logger.warning("Live publish of %s over budget: later pages of subscribers not read", what)
                    return
                if subscribers:
                    data = data or encode(event).encode("utf-8")
                    self._poster.post_all(subscribers, data, deadline=deadline, what=what)
        except ThreadloomError:
            logger.warning("Could not read the subscribers of session %r", session_id, exc_info=True)


__all__ = ["ManagementApiPublisher", "management_api_client"]
