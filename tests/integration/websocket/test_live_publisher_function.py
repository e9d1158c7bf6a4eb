"""The publisher function outside the VPC, and the whole queue path: write → Query → FIFO queue → handler → posts.

The live-events queue is moto's; the handler runs as the event source mapping would call it (``deliver``); the
Management API is the recording stand-in, which answers 410 for a connection that is gone.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws
from threadloom.api.observability import logger
from threadloom.api.profile import load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.queue import CompactionRequest
from threadloom.correlation import MESSAGE_ATTRIBUTE
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.posting import ConnectionPoster
from threadloom.live.aws.queue_publisher import QueuePublisher
from threadloom.live.aws.relay import DELIVERY_CONCURRENCY, RelayMessage, message_group_id
from threadloom.live.events import session_changed

from tests.integration.compaction.sqs_lambda import (
    FakeLambdaContext,
    event_from_messages,
    event_from_requests,
    load_event,
    receive,
)
from tests.support.api import SEED, TENANT, invoke
from tests.support.api import load_event as load_api_event
from tests.support.connections import CONNECTIONS_TABLE, create_connections_table
from tests.support.management_api import RecordingManagementApi
from tests.support.messages import text_message

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from mypy_boto3_sqs.client import SQSClient

ENDPOINT = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
SESSION = "s-demo"
CONTEXT = FakeLambdaContext(function_name="threadloom-live-publisher")
PROFILE = "compaction: {threshold: 100000, protect_head: 1, tail_token_budget: 30, min_tail_messages: 2}\n"


@pytest.fixture
def aws() -> Iterator[tuple[ConnectionsTable, SQSClient, str]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(dynamodb)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="threadloom-live.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield ConnectionsTable(CONNECTIONS_TABLE, client=dynamodb), sqs, url


@pytest.fixture
def api(aws: tuple[ConnectionsTable, SQSClient, str]) -> Iterator[RecordingManagementApi]:
    """The handler's poster as deployed (several posts in flight) over the moto table and a recording API."""
    import threadloom_live_publisher

    recording = RecordingManagementApi()
    poster = ConnectionPoster(aws[0], ENDPOINT, client=recording, concurrency=DELIVERY_CONCURRENCY)  # type: ignore[arg-type]
    threadloom_live_publisher.set_poster(poster)
    yield recording
    threadloom_live_publisher.set_poster(None)


def handle(event: dict[str, Any]) -> dict[str, Any]:
    import threadloom_live_publisher

    return dict(threadloom_live_publisher.lambda_handler(event, CONTEXT))


def test_the_sample_event_is_posted_and_the_gone_connection_forgotten(
    aws: tuple[ConnectionsTable, SQSClient, str], api: RecordingManagementApi
) -> None:
    # Given the sample record (what `sam local invoke LivePublisherFunction -e` reads): two subscribers, one gone
    event = load_event("sqs_live_publish")
    relay = RelayMessage.from_json(event["Records"][0]["body"])
    live, gone = relay.connection_ids
    table = aws[0]
    for connection_id in (live, gone):
        table.open(connection_id, tenant=relay.namespace)
        table.subscribe(connection_id, tenant=relay.namespace, session_id=relay.session_id)
    api.gone.add(gone)
    # When the publisher function handles it
    response = handle(event)
    # Then it answers the expected (no failures), posted the event to the live one and forgot the gone one
    assert response == load_event("sqs_live_publish.expected")
    assert api.posts == [(live, dict(relay.event))]
    assert table.subscribers(relay.namespace, relay.session_id) == [live]
    assert table.tenant_of(gone) is None


def test_a_malformed_record_is_dropped_and_a_failed_post_fails_nothing(
    aws: tuple[ConnectionsTable, SQSClient, str], api: RecordingManagementApi
) -> None:
    # Given a batch of a good record of session s1 (one of whose posts times out) and a malformed one of session s2
    good = copy.deepcopy(load_event("sqs_live_publish")["Records"][0])
    body = RelayMessage("tenant-a", "s1", ("c-slow", "c-ok"), session_changed("s1", "append", "m9")).to_json()
    good.update(messageId="good", body=body, md5OfBody=hashlib.md5(body.encode()).hexdigest())
    good["attributes"]["MessageGroupId"] = message_group_id("tenant-a", "s1")
    bad = copy.deepcopy(good)
    bad.update(messageId="bad", body='{"v": 1, "namespace": "tenant-a"}')
    bad["attributes"]["MessageGroupId"] = message_group_id("tenant-a", "s2")
    api.timing_out.add("c-slow")
    # When the batch is handled
    response = handle({"Records": [good, bad]})
    # Then no record is reported failed: a retry would not mend the malformed one, only hold back session s2 ...
    assert response == {"batchItemFailures": []}
    # ... and the good one reached the connection that answered: a timed-out post is not retried
    assert [target for target, _ in api.posts] == ["c-ok"]


@pytest.fixture
def runtime(tmp_path: Path, aws: tuple[ConnectionsTable, SQSClient, str]) -> Iterator[Runtime]:
    """The API function's runtime as deployed with LivePublishing=queue, ``s-demo`` watched by c-watch and c-gone."""
    table, sqs, url = aws
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE, encoding="utf-8")
    built = Runtime(
        Settings(sqlite_path=str(tmp_path / "api.db"), compaction_mode="inline"),
        profile=load_profile(profile),
        publisher=QueuePublisher(table, url, client=sqs, budget_seconds=30),
    )
    built.store.registry(TENANT).create("Pirate taxes", session_id=SESSION)
    built.manager(TENANT).append_all(SESSION, [dict(message) for message in SEED])
    for connection_id in ("c-watch", "c-gone"):
        table.open(connection_id, tenant=TENANT)
        table.subscribe(connection_id, tenant=TENANT, session_id=SESSION)
    set_runtime(built)
    yield built
    set_runtime(None)
    built.store.close()


def test_a_write_in_the_vpc_reaches_the_watchers_through_the_queue(
    aws: tuple[ConnectionsTable, SQSClient, str], api: RecordingManagementApi, runtime: Runtime
) -> None:
    table, sqs, url = aws
    api.gone.add("c-gone")
    # When the sample append goes through the API Lambda (which cannot reach the Management API) ...
    append = load_api_event("append")
    status, body = invoke(append)
    assert status == 201, body
    assert api.posts == []  # nothing posted from inside the VPC
    # ... and the event source mapping hands what was queued to the publisher function
    messages = receive(sqs, url)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    response = handle(event_from_messages(messages, arn))
    # Then the publisher function's log lines carry the id of the API request that wrote
    request_id = append["requestContext"]["requestId"]
    assert {message["MessageAttributes"][MESSAGE_ATTRIBUTE]["StringValue"] for message in messages} == {request_id}
    assert logger.get_correlation_id() == request_id
    # And the watcher got the status and the change, in the order they were published, without content
    assert response == {"batchItemFailures": []}
    queued = [json.loads(message["Body"])["event"] for message in messages]
    assert api.events_for("c-watch") == queued
    assert [event["type"] for event in queued] == ["session_status", "session_changed"]
    assert {"type": "session_changed", "sessionId": SESSION, "change": "append", "leafId": "m5"} in queued
    assert all("parts" not in event and "text" not in event for event in queued)
    # And the connection that answered 410 is forgotten
    assert table.subscribers(TENANT, SESSION) == ["c-watch"]


def test_a_write_nobody_watches_queues_nothing(
    aws: tuple[ConnectionsTable, SQSClient, str], api: RecordingManagementApi, runtime: Runtime
) -> None:
    table, sqs, url = aws
    for connection_id in ("c-watch", "c-gone"):
        table.close(connection_id)
    status, body = invoke(load_api_event("append"))
    assert status == 201, body
    assert receive(sqs, url) == []


def test_a_compaction_in_the_vpc_reaches_the_watchers_compacting_then_idle(
    aws: tuple[ConnectionsTable, SQSClient, str], api: RecordingManagementApi, runtime: Runtime
) -> None:
    import threadloom_compaction

    _table, sqs, url = aws
    manager = runtime.manager(TENANT)
    for index in range(6):
        manager.append(SESSION, text_message(f"extra-{index}", "Another doubloon for the ledger " * 5))
    while appended := receive(sqs, url):  # the appends' events: not under test here
        for message in appended:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # When the compaction worker compacts the session (built over the process runtime, as in Lambda)
    threadloom_compaction.set_worker(None)
    try:
        response = threadloom_compaction.lambda_handler(
            event_from_requests(CompactionRequest.create(TENANT, SESSION, None)), CONTEXT
        )
    finally:
        threadloom_compaction.set_worker(None)
    assert response == {"batchItemFailures": []}
    # And the publisher function handles what the worker queued, one poll at a time as the event source mapping does
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    while messages := receive(sqs, url):
        assert handle(event_from_messages(messages, arn)) == {"batchItemFailures": []}
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # Then the watcher saw compacting first and idle (with the tokens before) last, never the other way round
    statuses = [event for event in api.events_for("c-watch") if event["type"] == "session_status"]
    assert statuses and statuses[0]["phase"] == "compacting"
    assert statuses[-1]["phase"] == "idle" and isinstance(statuses[-1]["compacted"]["tokensBefore"], int)
