"""ManagementApiPublisher: one post per subscriber, 410 Gone forgets the connection, bounded, never raising."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from threadloom.api.runtime import Runtime, Settings
from threadloom.errors import ValidationError
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.publisher import ManagementApiPublisher
from threadloom.live.events import SessionStatus, encode, session_changed, session_status
from threadloom.live.publisher import NullPublisher, StatusPublisher

from tests.support.connections import CONNECTIONS_TABLE, PagedSubscribers, create_connections_table
from tests.support.management_api import RecordingManagementApi

if TYPE_CHECKING:
    from collections.abc import Iterator

ENDPOINT = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
UNHURRIED = 30.0
"""A budget no loaded test machine exhausts, where the test is not about the budget."""
EVENT = session_status("s1", SessionStatus("idle", 1234, 100_000))


@pytest.fixture
def connections() -> Iterator[ConnectionsTable]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        for connection_id in ("c-gone", "c-live", "c-other-session"):
            table.open(connection_id, tenant="tenant-a")
        table.open("c-other-tenant", tenant="tenant-b")
        table.subscribe("c-gone", tenant="tenant-a", session_id="s1")
        table.subscribe("c-gone", tenant="tenant-a", session_id="s2")
        table.subscribe("c-live", tenant="tenant-a", session_id="s1")
        table.subscribe("c-other-session", tenant="tenant-a", session_id="s2")
        table.subscribe("c-other-tenant", tenant="tenant-b", session_id="s1")
        yield table


def test_posts_to_each_subscriber_and_forgets_the_gone_one(connections: ConnectionsTable) -> None:
    # Given a real Management API client whose two expected posts are stubbed: c-gone answers 410, c-live 200
    client = boto3.client("apigatewaymanagementapi", endpoint_url=ENDPOINT, region_name="eu-west-1")
    data = encode(EVENT).encode()
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "post_to_connection",
            service_error_code="GoneException",
            http_status_code=410,
            expected_params={"ConnectionId": "c-gone", "Data": data},
        )
        stubber.add_response("post_to_connection", {}, {"ConnectionId": "c-live", "Data": data})
        publisher = ManagementApiPublisher(connections, ENDPOINT, client=client, budget_seconds=UNHURRIED)

        # When an event of tenant-a's session s1 is published
        publisher.publish("tenant-a", "s1", EVENT)

        # Then exactly those two posts happened (never to tenant-b's subscriber of its own s1)
        stubber.assert_no_pending_responses()
    # And the gone connection is forgotten everywhere, the others are kept
    assert connections.subscribers("tenant-a", "s1") == ["c-live"]
    assert connections.subscribers("tenant-a", "s2") == ["c-other-session"]
    assert connections.tenant_of("c-gone") is None
    assert connections.subscribers("tenant-b", "s1") == ["c-other-tenant"]


def test_the_posted_data_is_the_wire_event(connections: ConnectionsTable) -> None:
    api = RecordingManagementApi()
    ManagementApiPublisher(connections, ENDPOINT, client=api, budget_seconds=UNHURRIED).publish(
        "tenant-a", "s2", session_changed("s2", "append", "m9")
    )
    assert sorted(target for target, _ in api.posts) == ["c-gone", "c-other-session"]
    assert api.posts[0][1] == {"type": "session_changed", "sessionId": "s2", "change": "append", "leafId": "m9"}


def test_no_subscriber_means_no_post(connections: ConnectionsTable) -> None:
    api = RecordingManagementApi()
    ManagementApiPublisher(connections, ENDPOINT, client=api, budget_seconds=UNHURRIED).publish(
        "tenant-a", "nobody-watches", EVENT
    )
    assert api.posts == []


def test_a_failing_post_does_not_stop_the_others_or_raise(connections: ConnectionsTable) -> None:
    api = RecordingManagementApi(timing_out={"c-gone"})
    ManagementApiPublisher(connections, ENDPOINT, client=api, budget_seconds=UNHURRIED).publish("tenant-a", "s1", EVENT)
    assert [target for target, _ in api.posts] == ["c-live"]
    assert connections.tenant_of("c-gone") == "tenant-a"  # a timeout is not a 410: the connection stays


def test_posting_stops_when_the_budget_is_spent() -> None:
    # Given three subscribers and posts that each take longer than the whole budget
    api = RecordingManagementApi(slow_seconds=0.2)
    table = PagedSubscribers(["c1", "c2", "c3"])
    publisher = ManagementApiPublisher(table, ENDPOINT, client=api, budget_seconds=0.1)  # type: ignore[arg-type]
    # When an event is published
    started = time.monotonic()
    publisher.publish("tenant-a", "s1", EVENT)
    # Then only the first post was made: the others were skipped once the budget was spent
    assert [target for target, _ in api.posts] == ["c1"]
    assert time.monotonic() - started < 1.0


def test_reading_subscribers_stops_when_the_budget_is_spent() -> None:
    # Given a session whose subscribers span three Query pages that each take most of the budget
    api = RecordingManagementApi()
    table = PagedSubscribers(["c1"], ["c2"], ["c3"], page_seconds=0.06)
    publisher = ManagementApiPublisher(table, ENDPOINT, client=api, budget_seconds=0.1)  # type: ignore[arg-type]
    # When an event is published
    publisher.publish("tenant-a", "s1", EVENT)
    # Then the first page's subscriber got it, and the page after the budget ran out was the last one read
    assert [target for target, _ in api.posts] == ["c1"]
    assert table.pages_read == 2


def test_every_page_of_subscribers_is_posted_to_within_the_budget() -> None:
    api = RecordingManagementApi()
    table = PagedSubscribers(["c1", "c2"], [], ["c3"])
    ManagementApiPublisher(table, ENDPOINT, client=api).publish("tenant-a", "s1", EVENT)  # type: ignore[arg-type]
    assert [target for target, _ in api.posts] == ["c1", "c2", "c3"]


def test_an_unreachable_table_publishes_nothing_and_does_not_raise() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        api = RecordingManagementApi()
        publisher = ManagementApiPublisher(ConnectionsTable("missing", client=client), ENDPOINT, client=api)
        publisher.publish("tenant-a", "s1", EVENT)
    assert api.posts == []


def test_it_is_a_status_publisher() -> None:
    publisher = ManagementApiPublisher(ConnectionsTable("t"), ENDPOINT, client=RecordingManagementApi())
    assert isinstance(publisher, StatusPublisher)


def test_the_runtime_builds_it_from_the_environment() -> None:
    settings = Settings.from_env(
        {"THREADLOOM_CONNECTIONS_TABLE": "connections", "THREADLOOM_WEBSOCKET_ENDPOINT": ENDPOINT}
    )
    publisher = Runtime(settings).publisher
    assert isinstance(publisher, ManagementApiPublisher)
    assert isinstance(Runtime(Settings.from_env({})).publisher, NullPublisher)
    with pytest.raises(ValidationError, match="THREADLOOM_CONNECTIONS_TABLE"):
        _ = Runtime(Settings.from_env({"THREADLOOM_WEBSOCKET_ENDPOINT": ENDPOINT})).publisher
