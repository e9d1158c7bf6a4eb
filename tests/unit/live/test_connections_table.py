"""The connections table on moto: subscribe, find subscribers in one query, unsubscribe, close, tenant scoping."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws
from threadloom.errors import NotFoundError, StorageUnavailableError, ValidationError
from threadloom.live.aws.connections import RECOUNT_SECONDS, ConnectionsTable, session_key, tenant_key

from tests.support.connections import CONNECTIONS_TABLE, create_connections_table

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_dynamodb.client import DynamoDBClient


@pytest.fixture
def dynamodb() -> Iterator[DynamoDBClient]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        yield client


@pytest.fixture
def connections(dynamodb: DynamoDBClient) -> ConnectionsTable:
    return ConnectionsTable(CONNECTIONS_TABLE, client=dynamodb)


OPEN_CONNECTION_ITEMS = 3
"""One open connection of a tenant: its item, its entry under the tenant, and the tenant's count."""


def item_count(client: DynamoDBClient) -> int:
    return client.scan(TableName=CONNECTIONS_TABLE)["Count"]


def test_subscribers_of_a_session_are_found(connections: ConnectionsTable) -> None:
    connections.open("c1", tenant="tenant-a")
    connections.open("c2", tenant="tenant-a")
    connections.subscribe("c1", tenant="tenant-a", session_id="s1")
    connections.subscribe("c2", tenant="tenant-a", session_id="s1")
    connections.subscribe("c2", tenant="tenant-a", session_id="s2")

    assert sorted(connections.subscribers("tenant-a", "s1")) == ["c1", "c2"]
    assert connections.subscribers("tenant-a", "s2") == ["c2"]
    assert connections.subscribers("tenant-b", "s1") == []
    assert connections.tenant_of("c1") == "tenant-a"


def test_subscribing_twice_keeps_one_subscription(connections: ConnectionsTable) -> None:
    connections.open("c1", tenant="tenant-a")
    connections.subscribe("c1", tenant="tenant-a", session_id="s1")
    connections.subscribe("c1", tenant="tenant-a", session_id="s1")
    assert connections.subscribers("tenant-a", "s1") == ["c1"]


def test_a_connection_cannot_subscribe_for_another_tenant(
    dynamodb: DynamoDBClient, connections: ConnectionsTable
) -> None:
    connections.open("c1", tenant="tenant-a")
    with pytest.raises(NotFoundError, match="not open for this tenant"):
        connections.subscribe("c1", tenant="tenant-b", session_id="s1")
    with pytest.raises(NotFoundError):
        connections.subscribe("never-opened", tenant="tenant-a", session_id="s1")
    assert connections.subscribers("tenant-b", "s1") == []
    assert item_count(dynamodb) == OPEN_CONNECTION_ITEMS  # only the connection itself


def test_unsubscribe_removes_both_halves(dynamodb: DynamoDBClient, connections: ConnectionsTable) -> None:
    connections.open("c1", tenant="tenant-a")
    connections.subscribe("c1", tenant="tenant-a", session_id="s1")
    connections.unsubscribe("c1", tenant="tenant-a", session_id="s1")
    connections.unsubscribe("c1", tenant="tenant-a", session_id="never-subscribed")
    assert connections.subscribers("tenant-a", "s1") == []
    assert item_count(dynamodb) == OPEN_CONNECTION_ITEMS


def test_close_forgets_the_connection_and_all_its_subscriptions(
    dynamodb: DynamoDBClient, connections: ConnectionsTable
) -> None:
    connections.open("c1", tenant="tenant-a")
    connections.open("c2", tenant="tenant-a")
    for index in range(30):  # more than one BatchWriteItem
        connections.subscribe("c1", tenant="tenant-a", session_id=f"s{index}")
    connections.subscribe("c2", tenant="tenant-a", session_id="s0")

    removed = connections.close("c1")

    assert removed == 2 + 2 * 30  # the connection, its entry under the tenant, both halves of each subscription
    assert connections.tenant_of("c1") is None
    assert connections.subscribers("tenant-a", "s0") == ["c2"]
    assert all(connections.subscribers("tenant-a", f"s{index}") == [] for index in range(1, 30))
    assert item_count(dynamodb) == OPEN_CONNECTION_ITEMS + 2  # c2 and its one subscription's two halves
    assert connections.close("c1") == 0


def test_expired_items_are_ignored_before_dynamodb_deletes_them(dynamodb: DynamoDBClient) -> None:
    stale = ConnectionsTable(CONNECTIONS_TABLE, client=dynamodb, ttl_seconds=-1)
    stale.open("c1", tenant="tenant-a")
    assert stale.tenant_of("c1") is None
    fresh = ConnectionsTable(CONNECTIONS_TABLE, client=dynamodb)
    fresh.open("c2", tenant="tenant-a")
    fresh.subscribe("c2", tenant="tenant-a", session_id="s1")
    assert stale.subscribers("tenant-a", "s1") == ["c2"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a#b", "c"), ("a", "b#c")),
        (("a%23b", "c"), ("a#b", "c")),
        (("a", "b%23c"), ("a", "b#c")),
        (("t", "x#connection#y"), ("t", "x")),
    ],
)
def test_keys_cannot_collide_across_tenants(first: tuple[str, str], second: tuple[str, str]) -> None:
    assert session_key(*first) != session_key(*second)


def test_ids_with_separators_stay_separate(connections: ConnectionsTable) -> None:
    connections.open("c1", tenant="a#b")
    connections.open("c2", tenant="a")
    connections.subscribe("c1", tenant="a#b", session_id="c")
    connections.subscribe("c2", tenant="a", session_id="b#c")
    assert connections.subscribers("a#b", "c") == ["c1"]
    assert connections.subscribers("a", "b#c") == ["c2"]


def test_bad_ids_are_validation_errors(connections: ConnectionsTable) -> None:
    with pytest.raises(ValidationError, match="too long"):
        connections.subscribers("tenant", "x" * 3000)
    with pytest.raises(ValidationError, match="Unicode"):
        connections.subscribers("tenant", "bad\ud800")
    with pytest.raises(ValidationError):
        connections.open("", tenant="tenant-a")


def test_a_missing_table_is_storage_unavailable(dynamodb: DynamoDBClient) -> None:
    missing = ConnectionsTable("no-such-table", client=dynamodb)
    with pytest.raises(StorageUnavailableError, match="no-such-table"):
        missing.subscribers("tenant-a", "s1")
    with pytest.raises(StorageUnavailableError, match="no-such-table"):
        missing.subscribe("c1", tenant="tenant-a", session_id="s1")


def test_a_connection_lasts_no_longer_than_its_token_and_neither_do_its_subscriptions(
    connections: ConnectionsTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    now = time.time()
    # Given a connection whose token expires in a minute, subscribed to a session
    connections.open("c1", tenant="tenant-a", token_expires_at=int(now) + 60)
    connections.subscribe("c1", tenant="tenant-a", session_id="s1", expires_at=int(now) + 60)
    assert connections.open_connection("c1") == ("tenant-a", int(now) + 60)
    assert connections.subscribers("tenant-a", "s1") == ["c1"]
    # When the token has expired
    monkeypatch.setattr(time, "time", lambda: now + 61)
    # Then the connection is not open, its subscription gets nothing, and it cannot subscribe again
    assert connections.tenant_of("c1") is None and connections.open_connection("c1") is None
    assert connections.subscribers("tenant-a", "s1") == []
    with pytest.raises(NotFoundError):
        connections.subscribe("c1", tenant="tenant-a", session_id="s2")
    # A token that outlives the connection's own limit does not lengthen it
    connections.open("c2", tenant="tenant-a", token_expires_at=int(now) + 10**9)
    opened = connections.open_connection("c2")
    assert opened is not None and opened[1] <= int(now) + 61 + 2 * 3600 + 300


def subscription_count(client: DynamoDBClient, connection_id: str) -> int | None:
    item = client.get_item(
        TableName=CONNECTIONS_TABLE, Key={"pk": {"S": f"connection#{connection_id}"}, "sk": {"S": "connection"}}
    )
    count = item.get("Item", {}).get("subscription_count")
    return int(count["N"]) if count else None


def test_the_limit_counts_each_subscription_once(dynamodb: DynamoDBClient, connections: ConnectionsTable) -> None:
    connections.open("c1", tenant="tenant-a")
    assert connections.subscribe("c1", tenant="tenant-a", session_id="s1", limit=2)
    assert connections.subscribe("c1", tenant="tenant-a", session_id="s1", limit=2)  # held: not counted again
    assert connections.subscribe("c1", tenant="tenant-a", session_id="s2", limit=2)
    assert subscription_count(dynamodb, "c1") == 2
    # Full: refused with nothing written, but a session already held is still answered as held
    before = item_count(dynamodb)
    assert not connections.subscribe("c1", tenant="tenant-a", session_id="s3", limit=2)
    assert connections.subscribe("c1", tenant="tenant-a", session_id="s2", limit=2)
    assert item_count(dynamodb) == before and connections.subscribers("tenant-a", "s3") == []
    # Unsubscribing frees a place; unsubscribing what is not held changes nothing
    connections.unsubscribe("c1", tenant="tenant-a", session_id="s1")
    connections.unsubscribe("c1", tenant="tenant-a", session_id="s1")
    connections.unsubscribe("c1", tenant="tenant-a", session_id="never")
    assert subscription_count(dynamodb, "c1") == 1
    assert connections.subscribe("c1", tenant="tenant-a", session_id="s3", limit=2)
    assert sorted(connections.subscriptions_of("c1")) == ["s2", "s3"]
    # A full connection of another tenant is still "not open" for this one, not "full"
    with pytest.raises(NotFoundError):
        connections.subscribe("c1", tenant="tenant-b", session_id="s4", limit=2)


def test_unsubscribe_removes_the_halves_of_a_connection_that_never_counted(
    dynamodb: DynamoDBClient, connections: ConnectionsTable
) -> None:
    # Given a subscription written before connections counted theirs (no count on the connection)
    connections.open("c1", tenant="tenant-a")
    connections.subscribe("c1", tenant="tenant-a", session_id="s1")
    dynamodb.update_item(
        TableName=CONNECTIONS_TABLE,
        Key={"pk": {"S": "connection#c1"}, "sk": {"S": "connection"}},
        UpdateExpression="REMOVE subscription_count",
    )
    # When it is unsubscribed, Then both halves go and the count is not made negative
    connections.unsubscribe("c1", tenant="tenant-a", session_id="s1")
    assert connections.subscribers("tenant-a", "s1") == [] and connections.subscriptions_of("c1") == []
    assert subscription_count(dynamodb, "c1") is None and item_count(dynamodb) == OPEN_CONNECTION_ITEMS


def open_count(client: DynamoDBClient, tenant: str) -> int | None:
    item = client.get_item(TableName=CONNECTIONS_TABLE, Key={"pk": {"S": tenant_key(tenant)}, "sk": {"S": "count"}})
    count = item.get("Item", {}).get("open_connections")
    return int(count["N"]) if count else None


def test_a_tenant_holds_at_most_its_limit_of_connections(
    dynamodb: DynamoDBClient, connections: ConnectionsTable
) -> None:
    assert connections.open("c1", tenant="tenant-a", limit=2)
    assert connections.open("c1", tenant="tenant-a", limit=2)  # a $connect delivered twice counts once
    assert connections.open("c2", tenant="tenant-a", limit=2)
    before = item_count(dynamodb)
    # Full: refused with nothing written, while another tenant still connects
    assert not connections.open("c3", tenant="tenant-a", limit=2)
    assert item_count(dynamodb) == before and connections.tenant_of("c3") is None
    assert connections.open("c4", tenant="tenant-b", limit=2)
    # A close frees a place, once even when it comes twice (410 Gone, then $disconnect)
    connections.close("c1")
    connections.close("c1")
    assert open_count(dynamodb, "tenant-a") == 1
    assert connections.open("c3", tenant="tenant-a", limit=2)
    assert (open_count(dynamodb, "tenant-a"), open_count(dynamodb, "tenant-b")) == (2, 1)
    assert not connections.open("c5", tenant="tenant-a", limit=2)


def test_a_count_left_high_by_a_lost_disconnect_is_set_right_at_the_limit(
    dynamodb: DynamoDBClient, connections: ConnectionsTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    now = time.time()
    # Given a tenant at its limit, one connection of which ended without $disconnect (its token expired)
    assert connections.open("c1", tenant="tenant-a", limit=2, token_expires_at=int(now) + 60)
    assert connections.open("c2", tenant="tenant-a", limit=2)
    monkeypatch.setattr(time, "time", lambda: now + 61)
    assert open_count(dynamodb, "tenant-a") == 2
    # When another handshake comes, Then the count is set to the open connections and it gets the place
    assert connections.open("c3", tenant="tenant-a", limit=2)
    assert open_count(dynamodb, "tenant-a") == 2
    assert not connections.open("c4", tenant="tenant-a", limit=2)  # two are really open


def test_a_tenant_held_at_its_limit_is_counted_again_at_most_once_a_minute(
    dynamodb: DynamoDBClient, connections: ConnectionsTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    queries: list[str] = []
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.Query",
        lambda params, **_: queries.append(params["ExpressionAttributeValues"][":pk"]["S"]),
    )
    now = time.time()
    # Given a tenant at its limit of two, both connections really open
    assert connections.open("c1", tenant="tenant-a", limit=2)
    assert connections.open("c2", tenant="tenant-a", limit=2)
    # When handshakes keep coming, Then the tenant's partition is read once, not once per handshake
    for attempt in range(5):
        assert not connections.open(f"extra-{attempt}", tenant="tenant-a", limit=2)
    assert queries.count(tenant_key("tenant-a")) == 1
    # And a minute later, with one connection gone without $disconnect, the next handshake counts again
    monkeypatch.setattr(time, "time", lambda: now + RECOUNT_SECONDS + 1)
    dynamodb.delete_item(
        TableName=CONNECTIONS_TABLE, Key={"pk": {"S": tenant_key("tenant-a")}, "sk": {"S": "connection#c1"}}
    )
    assert connections.open("c3", tenant="tenant-a", limit=2)
    assert queries.count(tenant_key("tenant-a")) == 2
