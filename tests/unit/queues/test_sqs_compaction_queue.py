"""SqsCompactionQueue: FIFO group per session, deduplication per (namespace, session, leaf), JSON body."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws
from threadloom.compaction.queue import CompactionQueue, CompactionRequest
from threadloom.compaction.sqs_queue import (
    SqsCompactionQueue,
    deduplication_id,
    default_sqs_client,
    message_group_id,
)
from threadloom.errors import StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

FIFO_URL_EXAMPLE = "https://sqs.us-east-1.amazonaws.com/123456789012/compactions.fifo"


@pytest.fixture
def sqs() -> Iterator[tuple[SQSClient, str]]:
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        url = client.create_queue(QueueName="compactions.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield client, url


def receive_all(client: SQSClient, url: str) -> list[MessageTypeDef]:
    """Every visible message, with its FIFO system attributes."""
    messages: list[MessageTypeDef] = []
    while True:
        batch = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], VisibilityTimeout=60
        ).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


def request(session_id: str = "s1", leaf_id: str | None = "m1", namespace: str = "tenant") -> CompactionRequest:
    return CompactionRequest(namespace, session_id, leaf_id, "2026-01-02T03:04:05.000Z")


def test_message_carries_group_dedup_id_and_json_body(sqs: tuple[SQSClient, str]) -> None:
    # Given a FIFO queue
    client, url = sqs
    compactions = SqsCompactionQueue(url, client=client)

    # When a request is enqueued
    compactions.enqueue(request())

    # Then one message arrives, grouped by session, deduplicated by its ids, with the request as body
    (message,) = receive_all(client, url)
    attributes = message.get("Attributes", {})
    assert attributes["MessageGroupId"] == "tenant:s1"
    expected_dedup = hashlib.sha256(json.dumps(["tenant", "s1", "m1"]).encode()).hexdigest()
    assert attributes["MessageDeduplicationId"] == expected_dedup
    assert len(expected_dedup) == 64
    assert CompactionRequest.from_json(message["Body"]) == request()


def test_repeated_trigger_within_the_dedup_window_collapses(sqs: tuple[SQSClient, str]) -> None:
    # Given a FIFO queue
    client, url = sqs
    compactions = SqsCompactionQueue(url, client=client)

    # When the same trigger is sent three times (with different timestamps) and a different leaf once
    for second in ("05", "06", "07"):
        compactions.enqueue(CompactionRequest("tenant", "s1", "m1", f"2026-01-02T03:04:{second}Z"))
    compactions.enqueue(request(leaf_id="m2"))

    # Then SQS keeps one message per (namespace, session, leaf)
    bodies = [CompactionRequest.from_json(message["Body"]) for message in receive_all(client, url)]
    assert [(body.session_id, body.leaf_id) for body in bodies] == [("s1", "m1"), ("s1", "m2")]


def test_sessions_get_separate_groups(sqs: tuple[SQSClient, str]) -> None:
    # Given two sessions in two namespaces with the same session id
    client, url = sqs
    compactions = SqsCompactionQueue(url, client=client)

    # When each is enqueued
    compactions.enqueue(request(namespace="a"))
    compactions.enqueue(request(namespace="b"))

    # Then each is its own group and neither deduplicates the other
    groups = sorted(message.get("Attributes", {})["MessageGroupId"] for message in receive_all(client, url))
    assert groups == ["a:s1", "b:s1"]


@pytest.mark.parametrize(
    ("namespace", "session_id"),
    [("tenant", "session with spaces"), ("ténant", "s1"), ("t" * 100, "s" * 100)],
)
def test_group_ids_sqs_would_refuse_are_hashed(sqs: tuple[SQSClient, str], namespace: str, session_id: str) -> None:
    # Given ids with characters SQS does not allow in a group id, or too long together
    client, url = sqs
    item = request(session_id=session_id, namespace=namespace)

    # When the request is enqueued
    SqsCompactionQueue(url, client=client).enqueue(item)

    # Then the group is a stable hash within SQS's limits, and the body keeps the real ids
    group = message_group_id(item)
    assert group.startswith("sha256-")
    assert len(group) <= 128
    assert group == message_group_id(request(session_id=session_id, namespace=namespace, leaf_id="other"))
    (message,) = receive_all(client, url)
    assert message.get("Attributes", {})["MessageGroupId"] == group
    assert CompactionRequest.from_json(message["Body"]) == item


def test_sessions_whose_ids_join_alike_get_separate_groups(sqs: tuple[SQSClient, str]) -> None:
    # Given two tenants' sessions whose "<namespace>:<session_id>" would read the same
    client, url = sqs
    compactions = SqsCompactionQueue(url, client=client)
    first = request(namespace="acme", session_id="eu:s1")
    second = request(namespace="acme:eu", session_id="s1")

    # When each is enqueued
    compactions.enqueue(first)
    compactions.enqueue(second)

    # Then they are in different groups (neither tenant's compactions wait for the other's), each valid for SQS
    groups = {
        CompactionRequest.from_json(m["Body"]): m.get("Attributes", {})["MessageGroupId"]
        for m in receive_all(client, url)
    }
    assert groups == {first: message_group_id(first), second: message_group_id(second)}
    assert groups[first] != groups[second]
    assert groups[first] == "acme:eu:s1"  # a namespace without ':' keeps its readable group
    assert groups[second].startswith("sha256-")


@pytest.mark.parametrize(
    ("namespace", "session_id"),
    [
        ("a:b", "c"),
        ("a", "b:c"),
        ("a:", "b"),
        ("a", ":b"),
        ("", "a:b"),
        (":", ""),
        ("t" * 64, "s" * 63),
        ("t" * 64, "s" * 64),
        ("x:" * 70, "y"),
        ("tenant", "sess\u00edon"),
        ("ten ant", "s1"),
    ],
)
def test_group_ids_are_within_sqs_limits_and_one_per_session(namespace: str, session_id: str) -> None:
    # Given a session's ids, of any length and characters
    item = request(session_id=session_id, namespace=namespace)

    # When its group id is computed
    group = message_group_id(item)

    # Then SQS accepts it (1-128 printable ASCII characters, no spaces), and every leaf of the session shares it
    assert 1 <= len(group) <= 128
    assert all("!" <= char <= "~" for char in group)
    assert group == message_group_id(request(session_id=session_id, namespace=namespace, leaf_id=None))


def test_group_ids_are_distinct_per_session() -> None:
    # Given sessions whose ids overlap around the ':' separator, or only differ past the readable length limit
    pairs = [
        (namespace, session_id)
        for namespace in ("a", "a:b", "a:b:c", "", ":", "a:", "t" * 64, "t" * 65)
        for session_id in ("b:c", "c", "b", ":c", "", ":", "s" * 63, "s" * 64)
    ]

    # When each one's group id is computed
    groups = {message_group_id(request(session_id=session_id, namespace=namespace)) for namespace, session_id in pairs}

    # Then no two sessions share a group
    assert len(groups) == len(pairs)


def test_dedup_id_is_unambiguous_across_field_boundaries() -> None:
    # Given two requests whose ids concatenate to the same text
    first = request(namespace="a:b", session_id="c")
    second = request(namespace="a", session_id="b:c")

    # When their deduplication ids are computed
    # Then they differ, and a request for the latest leaf differs from one for a leaf
    assert deduplication_id(first) != deduplication_id(second)
    assert deduplication_id(request(leaf_id=None)) != deduplication_id(request(leaf_id="None"))


def test_missing_queue_raises_storage_unavailable() -> None:
    # Given a queue URL with no queue behind it
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        compactions = SqsCompactionQueue(FIFO_URL_EXAMPLE, client=client)

        # When a request is enqueued
        with pytest.raises(StorageUnavailableError, match="does not exist") as raised:
            compactions.enqueue(request())

    # Then the SQS error is chained
    assert raised.value.__cause__ is not None


@pytest.mark.parametrize("code", ["ThrottlingException", "KmsThrottled", "InternalError", "AccessDenied"])
def test_send_failures_raise_storage_unavailable(code: str) -> None:
    # Given SQS fails the send (after botocore's retries)
    client = boto3.client("sqs", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("send_message", service_error_code=code, http_status_code=400)

    # When a request is enqueued
    with stubber, pytest.raises(StorageUnavailableError, match=code):
        SqsCompactionQueue(FIFO_URL_EXAMPLE, client=client).enqueue(request())

    # Then the stubbed call was made
    stubber.assert_no_pending_responses()


def test_unreachable_endpoint_raises_storage_unavailable() -> None:
    # Given a client pointed at a port nobody listens on, without retries
    client = boto3.client(
        "sqs",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1),
    )

    # When a request is enqueued
    with pytest.raises(StorageUnavailableError, match="Could not reach") as raised:
        SqsCompactionQueue(FIFO_URL_EXAMPLE, client=client).enqueue(request())

    # Then the network error is chained
    assert raised.value.__cause__ is not None


def test_standard_queue_url_is_refused() -> None:
    # Given a URL of a standard (non-FIFO) queue
    # When the queue adapter is built
    # Then it refuses, since ordering and deduplication need FIFO
    with pytest.raises(ValidationError, match="FIFO"):
        SqsCompactionQueue("https://sqs.us-east-1.amazonaws.com/123456789012/compactions")


def test_default_client_is_created_lazily(sqs: tuple[SQSClient, str]) -> None:
    # Given no cached default client
    client, url = sqs
    default_sqs_client.cache_clear()
    try:
        # When an adapter is built without a client
        compactions = SqsCompactionQueue(url)

        # Then no client exists until the first send
        assert default_sqs_client.cache_info().currsize == 0
        compactions.enqueue(request())
        assert default_sqs_client.cache_info().currsize == 1
        assert len(receive_all(client, url)) == 1
    finally:
        default_sqs_client.cache_clear()


def test_sqs_queue_satisfies_the_protocol() -> None:
    # Given the SQS adapter
    compactions = SqsCompactionQueue(FIFO_URL_EXAMPLE, client=boto3.client("sqs", region_name="us-east-1"))

    # When it is checked against the protocol
    # Then it conforms
    assert isinstance(compactions, CompactionQueue)
    assert compactions.queue_url == FIFO_URL_EXAMPLE
