"""The scheduled idle-reflection Lambda on SQLite and PostgreSQL, queuing to a moto SQS FIFO queue (issue 26 item 5).

The function runs through its real entry point with the sample scheduler event; the sessions' last activity is
moved back in the database, as time passing would, so the sweep's window (idle 30 minutes, every 5) finds them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.profile import ReflectionSpec, load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.queue import CompactionRequest
from threadloom.compaction.sqs_queue import SqsCompactionQueue, deduplication_id, message_group_id

from tests.support.api import FakeLambdaContext, text

EVENT = Path(__file__).resolve().parents[3] / "events" / "idle_reflection_schedule.json"
TENANT = "tenant-idle"
REGION = "us-east-1"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_store_factory")()
    else:
        yield SqliteStore(str(tmp_path / "idle.db"))
    set_runtime(None)


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    monkeypatch.setenv("THREADLOOM_IDLE_REFLECTION_MINUTES", "30")
    monkeypatch.setenv("THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES", "5")
    with mock_aws():
        client = boto3.client("sqs", region_name=REGION)
        url = client.create_queue(QueueName="compactions.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield client, url


def runtime_over(store: Any, client: Any, url: str, *, enabled: bool = True) -> Runtime:
    profile = load_profile().model_copy(update={"reflection": ReflectionSpec(enabled=enabled)})
    runtime = Runtime(
        Settings(compaction_mode="sqs", compaction_queue_url=url),
        profile=profile,
        store=store,
        queue=SqsCompactionQueue(url, client=client),
    )
    set_runtime(runtime)
    return runtime


def went_quiet(store: Any, session_id: str, minutes_ago: int) -> None:
    """Move the session's last activity back, as ``minutes_ago`` minutes of silence would."""
    moment = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat(timespec="milliseconds")
    with store.database.write() as tx:
        tx.execute(
            "UPDATE threadloom_sessions SET updated_at = :moment WHERE id = :sid",
            {"moment": moment.replace("+00:00", "Z"), "sid": session_id},
        )


def received(client: Any, url: str) -> list[dict[str, Any]]:
    answer = client.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId", "MessageDeduplicationId"]
    )
    messages: list[dict[str, Any]] = answer.get("Messages", [])
    for message in messages:
        client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def invoke() -> dict[str, Any]:
    from threadloom_idle_reflection import lambda_handler

    result: dict[str, Any] = lambda_handler(json.loads(EVENT.read_text(encoding="utf-8")), FakeLambdaContext())  # type: ignore[arg-type]
    return result


def test_a_quiet_session_is_queued_once_with_its_group_and_dedup_ids(store: Any, sqs: tuple[Any, str]) -> None:
    client, url = sqs
    runtime = runtime_over(store, client, url)
    manager = runtime.manager(TENANT)
    quiet = manager.create("Quiet").id
    manager.append(quiet, text("u1", "user", "Hi! My name is Ada."))
    busy = manager.create("Busy").id
    manager.append(busy, text("b1", "user", "My name is Bo."))
    went_quiet(store, quiet, 32)  # in the window [35, 30) minutes ago; "busy" spoke just now

    assert invoke() == {"swept": True, "queued": 1}
    # A second run of the schedule in the same window (at-least-once delivery) sends the same deduplication id,
    # so SQS keeps one message.
    assert invoke()["queued"] == 1

    (message,) = received(client, url)
    request = CompactionRequest.from_json(message["Body"])
    assert (request.namespace, request.session_id, request.kind, request.leaf_id) == (TENANT, quiet, "reflection", None)
    assert message["Attributes"]["MessageGroupId"] == message_group_id(request) == f"{TENANT}:{quiet}"
    assert message["Attributes"]["MessageDeduplicationId"] == deduplication_id(request)

    # Once the reflection ran, the session is reflected up to its last activity: later sweeps leave it alone.
    assert runtime.jobs.handle(request) in {"applied", "proposed"}
    went_quiet(store, quiet, 33)
    assert invoke() == {"swept": True, "queued": 0}
    assert received(client, url) == []


def test_reflection_off_in_the_profile_queues_nothing(store: Any, sqs: tuple[Any, str]) -> None:
    client, url = sqs
    runtime = runtime_over(store, client, url, enabled=False)
    manager = runtime.manager(TENANT)
    session_id = manager.create("Quiet").id
    manager.append(session_id, text("u1", "user", "Hi! My name is Ada."))
    went_quiet(store, session_id, 32)

    assert invoke() == {"swept": False, "reason": "reflection.enabled is false", "queued": 0}
    assert received(client, url) == []


def test_a_bad_period_is_refused_naming_the_variable(
    store: Any, sqs: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, url = sqs
    runtime_over(store, client, url)
    monkeypatch.setenv("THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES", "0")
    from threadloom.errors import ValidationError

    with pytest.raises(ValidationError, match="THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES must be a positive"):
        invoke()


def test_a_zero_threshold_is_the_trigger_turned_off(
    store: Any, sqs: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, url = sqs
    runtime = runtime_over(store, client, url)
    monkeypatch.setenv("THREADLOOM_IDLE_REFLECTION_MINUTES", "0")
    session_id = runtime.manager(TENANT).create("Quiet").id
    went_quiet(store, session_id, 32)

    assert invoke() == {"swept": False, "reason": "THREADLOOM_IDLE_REFLECTION_MINUTES is 0", "queued": 0}
    assert received(client, url) == []
