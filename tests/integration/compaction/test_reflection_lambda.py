"""Reflection through SQS FIFO (moto) and the real compaction Lambda handler, on SQLite and PostgreSQL.

The API process queues ``POST /reflect`` on the compaction queue as a message of kind ``reflection``; the
compaction Lambda, a separate runtime over its own store, receives it and applies the facts; the same event
delivered again applies nothing more.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom.api.profile import ReflectionSpec, load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.sqs_queue import SqsCompactionQueue

from tests.integration.compaction.sqs_lambda import event_from_messages, queue_arn, receive
from tests.support.api import gateway_event, invoke, text

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_sqs.client import SQSClient

    from tests.integration.compaction.sqs_lambda import CompactionLambda

TENANT = "user-123"


def runtime_over(store: Any, queue: SqsCompactionQueue, tmp_path: Path) -> Runtime:
    profile = load_profile().model_copy(update={"reflection": ReflectionSpec(enabled=True)})
    settings = Settings(
        skills_dir=str(tmp_path / "skills"), compaction_mode="sqs", compaction_queue_url=queue.queue_url
    )
    return Runtime(settings, profile=profile, store=store, queue=queue)


def test_a_queued_reflection_is_applied_by_the_compaction_lambda_once(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str, compaction_lambda: CompactionLambda, tmp_path: Path
) -> None:
    queue = SqsCompactionQueue(fifo_queue, client=sqs)
    api = runtime_over(make_store(), queue, tmp_path)
    set_runtime(api)
    _, created = invoke(gateway_event("POST", "/sessions", {"name": "About me"}))
    session_id = created["id"]
    messages = [text("u1", "user", "My name is Ada."), text("a1", "assistant", "Hello Ada.")]
    invoke(gateway_event("POST", f"/sessions/{session_id}/messages", {"messages": messages}))
    status, queued = invoke(gateway_event("POST", f"/sessions/{session_id}/reflect"))
    assert (status, queued["status"]) == (202, "queued")

    # The compaction Lambda: its own runtime and store, the message as SQS delivers it
    set_runtime(runtime_over(make_store(), queue, tmp_path))
    received = receive(sqs, fifo_queue)
    assert [json.loads(message["Body"])["kind"] for message in received] == ["reflection"]
    event = event_from_messages(received, queue_arn(sqs, fifo_queue))
    assert compaction_lambda.invoke(event) == {"batchItemFailures": []}
    assert compaction_lambda.invoke(event) == {"batchItemFailures": []}  # a redelivery

    set_runtime(runtime_over(make_store(), queue, tmp_path))  # a fresh API process reads the block
    _, block = invoke(gateway_event("GET", f"/sessions/{session_id}/context/memory"))
    assert block["content"] == "Name: Ada"
    outcomes = [line.get("outcome") for line in compaction_lambda.log_lines() if "outcome" in line]
    assert outcomes == ["proposed", "duplicate"]
    set_runtime(None)
