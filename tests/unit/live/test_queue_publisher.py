"""QueuePublisher: one FIFO message per event of a watched session, nothing for an unwatched one, bounded, silent."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ConnectTimeoutError
from moto import mock_aws
from threadloom.api.runtime import Runtime, Settings
from threadloom.errors import ValidationError
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.queue_publisher import QueuePublisher
from threadloom.live.aws.relay import RelayMessage, message_group_id
from threadloom.live.events import SessionStatus, session_changed, session_status
from threadloom.live.publisher import StatusPublisher

from tests.support.connections import CONNECTIONS_TABLE, PagedSubscribers, create_connections_table

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_sqs.client import SQSClient

UNHURRIED = 30.0
"""A budget no loaded test machine exhausts, where the test is not about the budget."""
EVENT = session_status("s1", SessionStatus("idle", 1234, 100_000))
QUEUE_NAME = "threadloom-live.fifo"


@pytest.fixture
def aws() -> Iterator[tuple[ConnectionsTable, SQSClient, str]]:
    """tenant-a's s1 watched by c1 and c2, tenant-b's s1 by c3; an empty live-events FIFO queue."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(dynamodb)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=dynamodb)
        for connection_id, tenant in (("c1", "tenant-a"), ("c2", "tenant-a"), ("c3", "tenant-b")):
            table.open(connection_id, tenant=tenant)
            table.subscribe(connection_id, tenant=tenant, session_id="s1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName=QUEUE_NAME, Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield table, sqs, url


def received(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    messages = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]).get(
        "Messages", []
    ):
        for message in batch:
            messages.append(dict(message))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def test_an_event_of_a_watched_session_is_queued_once_with_its_subscribers(
    aws: tuple[ConnectionsTable, SQSClient, str],
) -> None:
    table, sqs, url = aws
    # When an event of tenant-a's s1 is published
    QueuePublisher(table, url, client=sqs, budget_seconds=UNHURRIED).publish("tenant-a", "s1", EVENT)
    # Then one message names tenant-a's two subscribers (never tenant-b's), in the session's FIFO group
    (message,) = received(sqs, url)
    relay = RelayMessage.from_json(message["Body"])
    assert (relay.namespace, relay.session_id, relay.event) == ("tenant-a", "s1", EVENT)
    assert sorted(relay.connection_ids) == ["c1", "c2"]
    assert message["Attributes"]["MessageGroupId"] == message_group_id("tenant-a", "s1")


def test_a_session_nobody_watches_sends_nothing(aws: tuple[ConnectionsTable, SQSClient, str]) -> None:
    table, sqs, url = aws
    QueuePublisher(table, url, client=sqs, budget_seconds=UNHURRIED).publish("tenant-a", "unwatched", EVENT)
    QueuePublisher(table, url, client=sqs, budget_seconds=UNHURRIED).publish("tenant-c", "s1", EVENT)
    assert received(sqs, url) == []


def test_equal_events_are_all_delivered_in_publish_order(aws: tuple[ConnectionsTable, SQSClient, str]) -> None:
    table, sqs, url = aws
    publisher = QueuePublisher(table, url, client=sqs, budget_seconds=UNHURRIED)
    events = [session_changed("s1", "clear"), session_changed("s1", "clear"), EVENT]
    for event in events:
        publisher.publish("tenant-a", "s1", event)
    # Fresh deduplication ids: the second identical `clear` is not swallowed by FIFO deduplication
    assert [RelayMessage.from_json(message["Body"]).event for message in received(sqs, url)] == events


def test_an_unreachable_queue_neither_raises_nor_blocks(aws: tuple[ConnectionsTable, SQSClient, str]) -> None:
    table, sqs, _url = aws
    missing = "https://sqs.us-east-1.amazonaws.com/123456789012/missing.fifo"
    started = time.monotonic()
    QueuePublisher(table, missing, client=sqs).publish("tenant-a", "s1", EVENT)
    assert time.monotonic() - started < 1.0


class _SlowSqs:
    """An SQS client whose every call spends ``seconds``, then succeeds or (``failing``) times out."""

    def __init__(self, seconds: float, *, failing: bool = False) -> None:
        self.seconds = seconds
        self.failing = failing
        self.calls = 0

    def send_message(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        time.sleep(self.seconds)
        if self.failing:
            raise ConnectTimeoutError(endpoint_url="https://sqs.us-east-1.amazonaws.com")
        return {"MessageId": str(self.calls)}


def test_a_failing_hand_off_is_tried_once_and_does_not_raise() -> None:
    # Given a session watched by more subscribers than fit in one message, and a queue that times out
    sqs = _SlowSqs(0.05, failing=True)
    table = PagedSubscribers([f"c{index}" for index in range(2500)])
    publisher = QueuePublisher(table, "https://q/live.fifo", client=sqs, budget_seconds=UNHURRIED)  # type: ignore[arg-type]
    # When an event is published, then it returns quietly after the first failed send (not one per message)
    publisher.publish("tenant-a", "s1", EVENT)
    assert sqs.calls == 1


def test_sending_stops_when_the_budget_is_spent() -> None:
    # Given three messages' worth of subscribers and sends that each take longer than the whole budget
    sqs = _SlowSqs(0.2)
    table = PagedSubscribers([f"c{index}" for index in range(2500)])
    publisher = QueuePublisher(table, "https://q/live.fifo", client=sqs, budget_seconds=0.1)  # type: ignore[arg-type]
    # When an event is published
    started = time.monotonic()
    publisher.publish("tenant-a", "s1", EVENT)
    # Then only the first message was sent: the others were dropped once the budget was spent
    assert sqs.calls == 1
    assert time.monotonic() - started < 1.0


def test_reading_subscribers_stops_when_the_budget_is_spent() -> None:
    # Given a session whose subscribers span three Query pages that each take most of the budget
    sqs = _SlowSqs(0.0)
    table = PagedSubscribers(["c1"], ["c2"], ["c3"], page_seconds=0.06)
    publisher = QueuePublisher(table, "https://q/live.fifo", client=sqs, budget_seconds=0.1)  # type: ignore[arg-type]
    # When an event is published
    publisher.publish("tenant-a", "s1", EVENT)
    # Then the first page was handed off, and the page after the budget ran out was the last one read
    assert sqs.calls == 1
    assert table.pages_read == 2


def test_an_unreadable_table_sends_nothing_and_does_not_raise(aws: tuple[ConnectionsTable, SQSClient, str]) -> None:
    _table, sqs, url = aws
    missing_table = ConnectionsTable("missing", client=boto3.client("dynamodb", region_name="us-east-1"))
    QueuePublisher(missing_table, url, client=sqs).publish("tenant-a", "s1", EVENT)
    assert received(sqs, url) == []


def test_it_is_a_status_publisher_and_needs_a_fifo_queue() -> None:
    assert isinstance(QueuePublisher(ConnectionsTable("t"), "https://q/live.fifo"), StatusPublisher)
    with pytest.raises(ValidationError, match="FIFO"):
        QueuePublisher(ConnectionsTable("t"), "https://q/live")


def test_the_runtime_chooses_the_publisher_from_the_environment() -> None:
    endpoint = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/threadloom-live.fifo"
    both = {
        "THREADLOOM_CONNECTIONS_TABLE": "connections",
        "THREADLOOM_WEBSOCKET_ENDPOINT": endpoint,
        "THREADLOOM_LIVE_QUEUE_URL": queue,
    }
    # A queue URL makes queue the default; THREADLOOM_LIVE_PUBLISHING=direct overrides it
    assert isinstance(Runtime(Settings.from_env(both)).publisher, QueuePublisher)
    direct = Runtime(Settings.from_env({**both, "THREADLOOM_LIVE_PUBLISHING": "direct"})).publisher
    assert type(direct).__name__ == "ManagementApiPublisher"
    with pytest.raises(ValidationError, match="THREADLOOM_LIVE_QUEUE_URL"):
        Settings.from_env({"THREADLOOM_LIVE_PUBLISHING": "queue", "THREADLOOM_WEBSOCKET_ENDPOINT": endpoint})
    with pytest.raises(ValidationError, match="THREADLOOM_WEBSOCKET_ENDPOINT"):
        Settings.from_env({"THREADLOOM_LIVE_PUBLISHING": "direct", "THREADLOOM_LIVE_QUEUE_URL": queue})
    with pytest.raises(ValidationError, match="queue, direct or none"):
        Settings.from_env({"THREADLOOM_LIVE_PUBLISHING": "sns"})
    with pytest.raises(ValidationError, match="THREADLOOM_CONNECTIONS_TABLE"):
        _ = Runtime(Settings.from_env({"THREADLOOM_LIVE_QUEUE_URL": queue})).publisher
