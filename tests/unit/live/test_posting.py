"""ConnectionPoster: what became of each post (delivered, gone and forgotten, failed, skipped at the deadline)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws
from threadloom.errors import ValidationError
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.posting import MAX_CONCURRENCY, ConnectionPoster, PostOutcome

from tests.support.connections import CONNECTIONS_TABLE, create_connections_table
from tests.support.management_api import RecordingManagementApi

if TYPE_CHECKING:
    from collections.abc import Iterator

ENDPOINT = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
DATA = b'{"type":"session_changed","sessionId":"s1","change":"clear"}'


@pytest.fixture
def table() -> Iterator[ConnectionsTable]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        connections = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        for connection_id in ("c-ok", "c-gone", "c-slow"):
            connections.open(connection_id, tenant="tenant-a")
            connections.subscribe(connection_id, tenant="tenant-a", session_id="s1")
        yield connections


def test_each_post_is_counted_by_what_became_of_it(table: ConnectionsTable) -> None:
    api = RecordingManagementApi(gone={"c-gone"}, timing_out={"c-slow"})
    poster = ConnectionPoster(table, ENDPOINT, client=api)  # type: ignore[arg-type]
    outcome = poster.post_all(["c-ok", "c-gone", "c-slow"], DATA, deadline=time.monotonic() + 30, what="test")
    assert outcome == PostOutcome(delivered=1, gone=1, failed=1, skipped=0)
    assert api.posts == [("c-ok", {"type": "session_changed", "sessionId": "s1", "change": "clear"})]
    assert sorted(table.subscribers("tenant-a", "s1")) == ["c-ok", "c-slow"]  # only the gone one is forgotten


def test_nothing_is_posted_after_the_deadline(table: ConnectionsTable) -> None:
    api = RecordingManagementApi()
    poster = ConnectionPoster(table, ENDPOINT, client=api)  # type: ignore[arg-type]
    outcome = poster.post_all(["c-ok", "c-slow"], DATA, deadline=time.monotonic() - 1, what="test")
    assert outcome == PostOutcome(skipped=2)
    assert api.posts == []


class _InFlightCounter(RecordingManagementApi):
    """Records how many posts were in flight at once."""

    def __init__(self, seconds: float) -> None:
        super().__init__(slow_seconds=seconds)
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most_in_flight = 0

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> dict[str, Any]:
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        try:
            return super().post_to_connection(ConnectionId=ConnectionId, Data=Data)
        finally:
            with self._lock:
                self._in_flight -= 1


def test_the_publisher_functions_poster_has_several_posts_in_flight(table: ConnectionsTable) -> None:
    # Given posts that each take 50 ms and a poster with four posts in flight at most
    api = _InFlightCounter(0.05)
    poster = ConnectionPoster(table, ENDPOINT, client=api, concurrency=4)  # type: ignore[arg-type]
    targets = [f"c{index}" for index in range(12)]
    # When it posts to twelve connections
    outcome = poster.post_all(targets, DATA, deadline=time.monotonic() + 30, what="test")
    # Then every post was made, more than one at a time and never more than four
    assert outcome == PostOutcome(delivered=12)
    assert sorted(target for target, _ in api.posts) == sorted(targets)
    assert 1 < api.most_in_flight <= 4


def test_inside_a_write_posts_go_one_at_a_time(table: ConnectionsTable) -> None:
    api = _InFlightCounter(0.01)
    poster = ConnectionPoster(table, ENDPOINT, client=api)  # type: ignore[arg-type]
    poster.post_all(["c1", "c2", "c3"], DATA, deadline=time.monotonic() + 30, what="test")
    assert [target for target, _ in api.posts] == ["c1", "c2", "c3"] and api.most_in_flight == 1


@pytest.mark.parametrize("concurrency", [0, MAX_CONCURRENCY + 1])
def test_concurrency_stays_within_the_connection_pool(table: ConnectionsTable, concurrency: int) -> None:
    with pytest.raises(ValidationError, match="concurrency"):
        ConnectionPoster(table, ENDPOINT, concurrency=concurrency)
