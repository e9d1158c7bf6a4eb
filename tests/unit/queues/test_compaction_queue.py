"""CompactionRequest serialisation and the embedded InProcessCompactionQueue."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime

import pytest
from threadloom.compaction.queue import CompactionQueue, CompactionRequest, InProcessCompactionQueue
from threadloom.errors import CompactionError, ValidationError


def request(session_id: str = "s1", leaf_id: str | None = "m1", namespace: str = "tenant") -> CompactionRequest:
    return CompactionRequest(namespace, session_id, leaf_id, "2026-01-02T03:04:05.000Z")


# --- CompactionRequest -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("leaf_id", ["m-42", None])
def test_request_round_trips_through_json(leaf_id: str | None) -> None:
    # Given a request, with and without a leaf
    original = CompactionRequest("tenant-ü", "session-9", leaf_id, "2026-01-02T03:04:05.000Z")

    # When it is serialised and parsed back
    body = original.to_json()
    parsed = CompactionRequest.from_json(body.encode("utf-8"))

    # Then it is equal, and the body uses the snake_case field names
    assert parsed == original
    assert json.loads(body) == {
        "namespace": "tenant-ü",
        "session_id": "session-9",
        "leaf_id": leaf_id,
        "requested_at": "2026-01-02T03:04:05.000Z",
    }


def test_create_stamps_the_current_utc_time() -> None:
    # Given nothing but ids
    # When a request is created
    created = CompactionRequest.create("tenant", "s1")

    # Then it targets the latest leaf and carries a UTC ISO-8601 timestamp
    assert created.leaf_id is None
    assert created.requested_at.endswith("Z")
    stamped = datetime.fromisoformat(created.requested_at)
    assert stamped.utcoffset() is not None
    assert stamped.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_from_json_ignores_unknown_fields() -> None:
    # Given a body from a newer producer with an extra field and no leaf
    body = json.dumps({"namespace": "t", "session_id": "s", "requested_at": "2026-01-02T03:04:05Z", "priority": 1})

    # When it is parsed
    parsed = CompactionRequest.from_json(body)

    # Then the known fields are read
    assert parsed == CompactionRequest("t", "s", None, "2026-01-02T03:04:05Z")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"namespace": "t"}', "missing session_id, requested_at"),
        ('{"namespace": 1, "session_id": "s", "requested_at": "2026-01-02T03:04:05Z"}', "'namespace' must be a string"),
        ('{"namespace": "t", "session_id": "s", "leaf_id": 5, "requested_at": "2026-01-02T03:04:05Z"}', "'leaf_id'"),
        ('{"namespace": "t", "session_id": "s", "leaf_id": "", "requested_at": "2026-01-02T03:04:05Z"}', "'leaf_id'"),
        ('{"namespace": "t", "session_id": "s", "requested_at": "yesterday"}', "not an ISO-8601 timestamp"),
    ],
)
def test_from_json_rejects_malformed_bodies(body: str, message: str) -> None:
    # Given a malformed message body
    # When it is parsed
    # Then a ValidationError says what is wrong
    with pytest.raises(ValidationError, match=message):
        CompactionRequest.from_json(body)


def test_requests_are_hashable_and_frozen() -> None:
    # Given a request
    original = request()

    # When it is mutated
    with pytest.raises(AttributeError):
        original.leaf_id = "other"  # type: ignore[misc]

    # Then it is unchanged and usable as a set member
    assert {original, request()} == {original}
    assert original.dedup_key == ("tenant", "s1", "m1")


# --- InProcessCompactionQueue ----------------------------------------------------------------------------------------


def test_duplicate_pending_requests_collapse() -> None:
    # Given a handler that blocks on its first request
    handled: list[CompactionRequest] = []
    started, release = threading.Event(), threading.Event()

    def handler(item: CompactionRequest) -> None:
        handled.append(item)
        if len(handled) == 1:
            started.set()
            release.wait(timeout=10)

    compactions = InProcessCompactionQueue(handler)

    # When one request is being handled, the same one is sent again, another three times, and a third once
    compactions.enqueue(request("busy"))
    assert started.wait(timeout=10)
    compactions.enqueue(request("busy"))
    for _ in range(3):
        compactions.enqueue(request("s2"))
    compactions.enqueue(request("s2", leaf_id="m2"))
    release.set()
    drained = compactions.drain(timeout=10)
    compactions.close()

    # Then waiting duplicates collapsed, while the one re-sent during handling ran again
    assert drained
    assert handled == [request("busy"), request("busy"), request("s2"), request("s2", leaf_id="m2")]


def test_worker_survives_handler_exceptions_and_logs_them(caplog: pytest.LogCaptureFixture) -> None:
    # Given a handler that fails for one session
    handled: list[str] = []

    def handler(item: CompactionRequest) -> None:
        if item.session_id == "broken":
            raise RuntimeError("summarizer down")
        handled.append(item.session_id)

    compactions = InProcessCompactionQueue(handler)

    # When the failing request is followed by a good one
    with caplog.at_level(logging.ERROR, logger="threadloom.compaction.queue"):
        compactions.enqueue(request("broken"))
        compactions.enqueue(request("fine"))
        drained = compactions.drain(timeout=10)
    compactions.close()

    # Then the good one still ran and the failure was logged with its traceback
    assert drained
    assert handled == ["fine"]
    assert any("broken" in record.getMessage() and record.exc_info for record in caplog.records)


def test_handler_can_be_set_after_requests_arrive() -> None:
    # Given a queue without a handler that has received a request
    compactions = InProcessCompactionQueue()
    compactions.enqueue(request("early"))
    waited = compactions.drain(timeout=0.05)

    # When the handler is set
    handled: list[str] = []
    compactions.set_handler(lambda item: handled.append(item.session_id))
    drained = compactions.drain(timeout=10)
    compactions.close()

    # Then the waiting request is handled only then
    assert waited is False
    assert drained
    assert handled == ["early"]


def test_drain_times_out_while_a_handler_is_busy() -> None:
    # Given a handler blocked until released
    release = threading.Event()

    def handler(_: CompactionRequest) -> None:
        release.wait(timeout=10)

    compactions = InProcessCompactionQueue(handler)
    compactions.enqueue(request())

    # When draining with a short timeout, then again after release
    early = compactions.drain(timeout=0.05)
    release.set()
    late = compactions.drain(timeout=10)
    compactions.close()

    # Then the first drain reports unfinished work and the second completes
    assert early is False
    assert late is True


def test_close_finishes_queued_requests_then_refuses_new_ones() -> None:
    # Given three queued requests
    handled: list[str] = []
    compactions = InProcessCompactionQueue(lambda item: handled.append(item.session_id))
    for session_id in ("a", "b", "c"):
        compactions.enqueue(request(session_id))

    # When the queue is closed
    stopped = compactions.close(timeout=10)

    # Then the queued requests ran first, the worker stopped, and new requests are refused
    assert stopped
    assert handled == ["a", "b", "c"]
    with pytest.raises(CompactionError, match="closed"):
        compactions.enqueue(request("d"))


def test_close_without_a_handler_discards_waiting_requests(caplog: pytest.LogCaptureFixture) -> None:
    # Given a request waiting for a handler that never comes
    compactions = InProcessCompactionQueue()
    compactions.enqueue(request())

    # When the queue is closed
    with caplog.at_level(logging.WARNING, logger="threadloom.compaction.queue"):
        stopped = compactions.close()

    # Then it stops at once and says what it dropped
    assert stopped
    assert "never handled" in caplog.text


def test_no_thread_exists_before_the_first_request() -> None:
    # Given a new queue with a handler
    before = {thread.name for thread in threading.enumerate()}
    compactions = InProcessCompactionQueue(lambda _: None)

    # When nothing has been enqueued yet
    after = {thread.name for thread in threading.enumerate()}

    # Then no worker was started
    assert "threadloom-compaction" not in after - before
    assert compactions.close()


def test_drain_from_the_handler_is_refused() -> None:
    # Given a handler that tries to drain its own queue
    errors: list[Exception] = []
    compactions = InProcessCompactionQueue()

    def handler(_: CompactionRequest) -> None:
        try:
            compactions.drain(timeout=1)
        except CompactionError as exc:
            errors.append(exc)

    compactions.set_handler(handler)

    # When it runs
    compactions.enqueue(request())
    compactions.drain(timeout=10)
    compactions.close()

    # Then the call fails fast instead of waiting on itself
    assert len(errors) == 1


def test_queues_satisfy_the_protocol() -> None:
    # Given the in-process queue
    compactions = InProcessCompactionQueue()

    # When it is checked against the protocol
    # Then it conforms
    assert isinstance(compactions, CompactionQueue)
    assert compactions.close()
