"""The compaction queue carries two kinds of request; a compaction's wire form and keys are what they were."""

from __future__ import annotations

import json

import pytest
from threadloom.compaction.queue import CompactionRequest, InProcessCompactionQueue, request_key
from threadloom.compaction.sqs_queue import deduplication_id
from threadloom.errors import ValidationError

STAMP = "2026-01-02T03:04:05.000Z"


def test_a_reflection_round_trips_and_names_its_kind_on_the_wire() -> None:
    request = CompactionRequest("tenant", "s1", "m1", STAMP, kind="reflection")
    assert json.loads(request.to_json()) == {
        "namespace": "tenant",
        "session_id": "s1",
        "leaf_id": "m1",
        "requested_at": STAMP,
        "kind": "reflection",
    }
    assert CompactionRequest.from_json(request.to_json()) == request


def test_a_compaction_is_sent_and_keyed_as_before() -> None:
    request = CompactionRequest("tenant", "s1", "m1", STAMP)
    assert "kind" not in json.loads(request.to_json())
    assert request.dedup_key == ("tenant", "s1", "m1")
    assert CompactionRequest.from_json(request.to_json()).kind == "compaction"


def test_a_reflection_never_shares_a_key_with_the_compaction_of_the_same_leaf() -> None:
    compaction = CompactionRequest("tenant", "s1", "m1", STAMP)
    reflection = CompactionRequest("tenant", "s1", "m1", STAMP, kind="reflection")
    assert request_key(compaction) != request_key(reflection)
    assert deduplication_id(compaction) != deduplication_id(reflection)


def test_an_unknown_kind_is_refused() -> None:
    body = json.dumps({"namespace": "t", "session_id": "s", "requested_at": STAMP, "kind": "dream"})
    with pytest.raises(ValidationError, match="kind must be one of compaction, reflection, not 'dream'"):
        CompactionRequest.from_json(body)


def test_the_in_process_queue_keeps_both_kinds_of_the_same_leaf() -> None:
    handled: list[str] = []
    queue = InProcessCompactionQueue()
    for kind in ("compaction", "reflection", "reflection"):
        queue.enqueue(CompactionRequest.create("tenant", "s1", "m1", kind=kind))  # type: ignore[arg-type]
    queue.set_handler(lambda request: handled.append(request.kind))
    assert queue.drain(timeout=10)
    assert handled == ["compaction", "reflection"]  # the repeated reflection waited behind its twin: dropped
    queue.close()
