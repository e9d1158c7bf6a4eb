"""ConnectionPoster: what became of each post (delivered, gone and forgotten, failed, skipped at the deadline)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.posting import ConnectionPoster, PostOutcome

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
