"""The ``StatusPublisher`` of functions in a VPC without a NAT: hand each event to the publisher function via SQS.

The API Gateway Management API (``https://{api}.execute-api.{region}.amazonaws.com/{stage}/@connections``) is not
served by any VPC endpoint: an ``execute-api`` interface endpoint only reaches private REST APIs, and a WebSocket
API cannot be private. So the functions in the private subnets keep the cheap part, the subscribers Query
(DynamoDB has a gateway endpoint), and only when a session has subscribers send one message to the live-events
FIFO queue (SQS has an interface endpoint). The publisher function, outside the VPC, posts it
(``functions/live_publisher``). A write with nobody watching costs the Query alone.

The id of the API request that wrote (if any) travels as the message attribute ``threadloom-correlation-id``, as
on the compaction queue, so the publisher function's log lines name the request. Bounded like every publisher:
the subscribers are read a Query page at a time, each SQS call has 0.5 s timeouts and no retries, reading and
sending stop when the publish budget is spent, and nothing here raises.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from threadloom import correlation
from threadloom.errors import ThreadloomError, ValidationError
from threadloom.live.aws.relay import RelayMessage, deduplication_id, message_group_id, relay_messages
from threadloom.live.publisher import PUBLISH_BUDGET_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

    from threadloom.live.aws.connections import ConnectionsTable
    from threadloom.live.events import LiveEvent

logger = logging.getLogger(__name__)

_CLIENT_CONFIG = Config(connect_timeout=0.5, read_timeout=0.5, retries={"mode": "standard", "total_max_attempts": 1})


@functools.cache
def live_queue_client() -> SQSClient:
    """An SQS client with short timeouts and no retries, built on first use: a hand-off must stay bounded."""
    import boto3

    return boto3.session.Session().client("sqs", config=_CLIENT_CONFIG)


class QueuePublisher:
    """Sends each event of a watched session to the live-events FIFO queue, naming its subscribers.

    Parameters
    ----------
    connections:
        The connections table (who is subscribed to what).
    queue_url:
        The live-events FIFO queue (its name ends in ``.fifo``).
    client:
        An SQS client, for tests; by default ``live_queue_client()``.
    budget_seconds:
        Sending stops once this much time has passed (the Protocol's ``PUBLISH_BUDGET_SECONDS``).

    Examples
    --------
    >>> publisher = QueuePublisher(ConnectionsTable("connections"), "https://sqs.eu-west-1.amazonaws.com/1/live.fifo")
    >>> publisher.publish("tenant-a", "s1", session_changed("s1", "append"))  # doctest: +SKIP
    """

    def __init__(
        self,
        connections: ConnectionsTable,
        queue_url: str,
        *,
        client: SQSClient | None = None,
        budget_seconds: float = PUBLISH_BUDGET_SECONDS,
    ) -> None:
        if not queue_url or not queue_url.rstrip("/").endswith(".fifo"):
            raise ValidationError(f"QueuePublisher needs a FIFO queue URL (ending in .fifo), got {queue_url!r}")
        self._connections = connections
        self._queue_url = queue_url
        self._client = client
        self._budget_seconds = budget_seconds

    @property
    def _sqs(self) -> SQSClient:
        if self._client is None:
            self._client = live_queue_client()
        return self._client

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        """Queue ``event`` for the session's subscribers (nothing when it has none); never raises."""
        deadline = time.monotonic() + self._budget_seconds
        group = message_group_id(namespace, session_id)
        correlation_id = correlation.current()
        attributes: dict[str, MessageAttributeValueTypeDef] = (
            {correlation.MESSAGE_ATTRIBUTE: {"DataType": "String", "StringValue": correlation_id}}
            if correlation_id
            else {}
        )
        try:
            for subscribers in self._connections.subscriber_pages(namespace, session_id):
                messages = relay_messages(namespace, session_id, subscribers, event)
                if not self._send(messages, group, attributes, deadline, f"{event['type']} for session {session_id!r}"):
                    return
        except ThreadloomError:
            logger.warning("Could not read the subscribers of session %r", session_id, exc_info=True)

    def _send(
        self,
        messages: list[RelayMessage],
        group: str,
        attributes: dict[str, MessageAttributeValueTypeDef],
        deadline: float,
        what: str,
    ) -> bool:
        """Send one page's messages; False when the budget is spent or SQS failed (send nothing more)."""
        for index, message in enumerate(messages):
            if time.monotonic() >= deadline:
                logger.warning(
                    "Live hand-off of %s over budget: %d of this page's %d messages and later pages not sent",
                    what,
                    len(messages) - index,
                    len(messages),
                )
                return False
            try:
                self._sqs.send_message(
                    QueueUrl=self._queue_url,
                    MessageBody=message.to_json(),
                    MessageGroupId=group,
                    MessageDeduplicationId=deduplication_id(),
                    MessageAttributes=attributes,
                )
            except (ClientError, BotoCoreError) as exc:
                logger.warning("Live hand-off of %s failed: %s", what, exc)
                return False  # the next call would likely fail the same way; stop rather than spend the budget
        return True


__all__ = ["QueuePublisher", "live_queue_client"]
