"""The API function and the compaction worker publish through the Management API after writes and compactions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws
from threadloom.api.profile import load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.queue import CompactionRequest
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.publisher import ManagementApiPublisher

from tests.integration.compaction.sqs_lambda import event_from_requests
from tests.support.api import SEED, TENANT, invoke, load_event
from tests.support.connections import CONNECTIONS_TABLE, create_connections_table
from tests.support.management_api import RecordingManagementApi
from tests.support.messages import text_message

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ENDPOINT = "https://abc123.execute-api.eu-west-1.amazonaws.com/dev"
SESSION = "s-demo"
PROFILE = """
blocks:
  - {label: memory, kind: writable, max_tokens: 1100}
compaction: {threshold: 100000, protect_head: 1, tail_token_budget: 30, min_tail_messages: 2}
"""


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Runtime, ConnectionsTable, RecordingManagementApi]]:
    """A runtime publishing through a recording Management API, with a watcher and a gone connection on s-demo."""
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE, encoding="utf-8")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        api = RecordingManagementApi(gone={"c-gone"})
        runtime = Runtime(
            Settings(sqlite_path=str(tmp_path / "api.db"), compaction_mode="inline"),
            profile=load_profile(profile),
            publisher=ManagementApiPublisher(table, ENDPOINT, client=api, budget_seconds=30),  # type: ignore[arg-type]
        )
        runtime.store.registry(TENANT).create("Pirate taxes", session_id=SESSION)
        runtime.manager(TENANT).append_all(SESSION, [dict(message) for message in SEED])
        for connection_id in ("c-watch", "c-gone"):
            table.open(connection_id, tenant=TENANT)
            table.subscribe(connection_id, tenant=TENANT, session_id=SESSION)
        set_runtime(runtime)
        yield runtime, table, api
        set_runtime(None)
        runtime.store.close()


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def test_an_append_through_the_api_function_is_published(
    live: tuple[Runtime, ConnectionsTable, RecordingManagementApi],
) -> None:
    _runtime, table, api = live
    # When the sample append event goes through the API Lambda
    status, body = invoke(load_event("append"))
    assert status == 201, body
    # Then the watcher got the new status and the change notice, with no message content
    events = api.events_for("c-watch")
    assert "session_status" in types(events) and "session_changed" in types(events)
    changes = [event for event in events if event["type"] == "session_changed"]
    assert {"type": "session_changed", "sessionId": SESSION, "change": "append", "leafId": "m5"} in changes
    status_event = next(event for event in events if event["type"] == "session_status")
    assert status_event["phase"] == "idle" and status_event["tokenEstimate"] > 0
    assert all("parts" not in event and "text" not in event for event in events)
    # And the connection that answered 410 is forgotten
    assert table.subscribers(TENANT, SESSION) == ["c-watch"]
    assert table.tenant_of("c-gone") is None


def test_the_compaction_worker_publishes_compacting_then_idle(
    live: tuple[Runtime, ConnectionsTable, RecordingManagementApi],
) -> None:
    import threadloom_compaction

    runtime, _table, api = live
    manager = runtime.manager(TENANT)
    for index in range(6):
        manager.append(SESSION, text_message(f"extra-{index}", "Another doubloon for the ledger " * 5))
    api.posts.clear()
    threadloom_compaction.set_worker(None)  # built over the process runtime, as in Lambda
    try:
        request = CompactionRequest.create(TENANT, SESSION, None)
        response = threadloom_compaction.lambda_handler(event_from_requests(request), _Context())
    finally:
        threadloom_compaction.set_worker(None)
    assert response == {"batchItemFailures": []}
    phases = [event.get("phase") for event in api.events_for("c-watch") if event["type"] == "session_status"]
    assert phases[0] == "compacting" and phases[-1] == "idle"
    finished = [event for event in api.events_for("c-watch") if event["type"] == "session_status"][-1]
    assert isinstance(finished["compacted"]["tokensBefore"], int)


class _Context:
    function_name = "threadloom-compaction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-compaction"
    aws_request_id = "00000000-0000-0000-0000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000
