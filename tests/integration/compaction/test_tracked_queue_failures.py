"""TrackedCompactionQueue when the inner queue refuses a request: the record is ``failed``, never left ``queued``.

On SQLite and PostgreSQL, with the SQS adapter on a queue that does not exist (moto) and with queue doubles.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.profile import load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.queue import CompactionRequest, request_key
from threadloom.compaction.sqs_queue import SqsCompactionQueue
from threadloom.compaction.tracking import NOT_QUEUED_ERROR, TrackedCompactionQueue
from threadloom.errors import StorageUnavailableError
from threadloom.records import TrackedCompaction

from tests.support.api import invoke, load_event, text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mypy_boto3_sqs.client import SQSClient
    from threadloom.records import CompactionState

ROOT = Path(__file__).resolve().parents[3]
QUICK_PROFILE = ROOT / "docs" / "examples" / "quick-compaction.yaml"  # threshold 60: a few messages are over it
TENANT = "user-123"  # the claim in the sample events
MISSING_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/no-such-queue.fifo"


class SwitchableQueue:
    """A queue double that raises ``error`` while it is set, and otherwise remembers what was enqueued."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.requests: list[CompactionRequest] = []

    def enqueue(self, request: CompactionRequest) -> None:
        if self.error is not None:
            raise self.error
        self.requests.append(request)


def compaction(session_id: str = "s1", leaf_id: str | None = "m1") -> CompactionRequest:
    return CompactionRequest.create("tenant-a", session_id, leaf_id)


def test_a_request_sqs_refuses_is_failed_and_the_error_propagates(
    make_store: Callable[[], Any], sqs: SQSClient
) -> None:
    # Given tracked requests in front of an SQS queue that does not exist
    store = make_store()
    tracked = TrackedCompactionQueue(SqsCompactionQueue(MISSING_QUEUE, client=sqs), store.compaction_requests)

    # When a request is submitted
    with pytest.raises(StorageUnavailableError, match="does not exist"):
        tracked.submit(compaction())

    # Then its record says it could not be queued, rather than waiting for a worker that will never see it
    record = store.compaction_requests("tenant-a").latest("s1")
    assert record is not None and record.state == "failed"
    assert record.error is not None and record.error.startswith(f"{NOT_QUEUED_ERROR}: ")
    assert "does not exist" in record.error
    assert record.finished_at is not None


def test_the_inner_error_is_re_raised_unchanged(make_store: Callable[[], Any]) -> None:
    # Given a queue that fails the send with a particular error
    store = make_store()
    error = StorageUnavailableError("SQS is down")
    tracked = TrackedCompactionQueue(SwitchableQueue(error), store.compaction_requests)

    # When a request is enqueued (the path of an automatic compaction)
    with pytest.raises(StorageUnavailableError) as raised:
        tracked.enqueue(compaction())

    # Then the very same error propagates, and the record is failed with its message
    assert raised.value is error
    record = store.compaction_requests("tenant-a").latest("s1")
    assert record is not None
    assert (record.state, record.error) == ("failed", f"{NOT_QUEUED_ERROR}: SQS is down")


def test_asking_again_once_the_queue_is_back_re_queues_the_same_request(make_store: Callable[[], Any]) -> None:
    # Given a request the queue refused
    store = make_store()
    queue = SwitchableQueue(StorageUnavailableError("SQS is down"))
    tracked = TrackedCompactionQueue(queue, store.compaction_requests)
    with pytest.raises(StorageUnavailableError):
        tracked.submit(compaction())
    refused = store.compaction_requests("tenant-a").latest("s1")
    assert refused is not None and refused.state == "failed"

    # When the queue is back and the same request is submitted again
    queue.error = None
    again = tracked.submit(compaction())

    # Then it is the same request, queued again without an error, and the queue has it
    assert again.id == refused.id
    assert (again.state, again.error, again.finished_at) == ("queued", None, None)
    assert [request_key(request) for request in queue.requests] == [request_key(compaction())]


@pytest.mark.parametrize("state", ["running", "done"])
def test_a_request_the_worker_already_has_is_left_alone(make_store: Callable[[], Any], state: str) -> None:
    # Given a request the worker has picked up (or finished) from an earlier send
    store = make_store()
    log = store.compaction_requests("tenant-a")
    key = request_key(compaction())
    log.mark_running(key, "s1", "m1")
    if state == "done":
        log.finish(key, "done", from_message_id="m0", to_message_id="m1")
    tracked = TrackedCompactionQueue(SwitchableQueue(StorageUnavailableError("SQS is down")), store.compaction_requests)

    # When sending it again fails
    with pytest.raises(StorageUnavailableError):
        tracked.submit(compaction())

    # Then its record keeps what the worker wrote
    record = log.latest("s1")
    assert record is not None and (record.state, record.error) == (state, None)


class BrokenLog:
    """A request log that records ``tracked`` as queued, then fails every write."""

    def __init__(self, tracked: TrackedCompaction) -> None:
        self.tracked = tracked

    def record_queued(self, request_key: str, session_id: str, leaf_id: str | None) -> TrackedCompaction:
        return self.tracked

    def mark_running(self, request_key: str, session_id: str, leaf_id: str | None) -> None:
        raise RuntimeError("database gone too")

    def finish(self, request_key: str, state: CompactionState, **values: str | None) -> None:
        raise RuntimeError("database gone too")

    def get(self, request_id: str) -> TrackedCompaction | None:
        return self.tracked

    def latest(self, session_id: str) -> TrackedCompaction | None:
        return self.tracked


def test_a_record_that_cannot_be_marked_does_not_hide_the_queue_error() -> None:
    # Given a request log that cannot record the failure, and a queue that fails the send
    queued = TrackedCompaction(
        id="r1",
        session_id="s1",
        leaf_id="m1",
        state="queued",
        from_message_id=None,
        to_message_id=None,
        error=None,
        requested_at="2026-01-02T03:04:05.000Z",
        started_at=None,
        finished_at=None,
    )
    error = StorageUnavailableError("SQS is down")
    tracked = TrackedCompactionQueue(SwitchableQueue(error), lambda namespace: BrokenLog(queued))

    # When a request is submitted
    with pytest.raises(StorageUnavailableError) as raised:
        tracked.submit(compaction())

    # Then the queue's error is the one raised
    assert raised.value is error


@pytest.fixture
def api(make_store: Callable[[], Any], tmp_path: Path) -> Iterator[SwitchableQueue]:
    """The HTTP API over a store of either backend, its compaction queue failing every send until told otherwise."""
    queue = SwitchableQueue(StorageUnavailableError("Compaction queue is unavailable"))
    runtime = Runtime(
        Settings(skills_dir=str(tmp_path / "skills")),
        profile=load_profile(QUICK_PROFILE),
        store=make_store(),
        queue=queue,
    )
    set_runtime(runtime)
    yield queue
    set_runtime(None)


def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    event["queryStringParameters"] = None
    event["rawQueryString"] = ""
    event["body"] = json.dumps(body) if body is not None else None
    return invoke(event)


def test_status_says_a_refused_compaction_failed_and_post_compact_retries_it(api: SwitchableQueue) -> None:
    # Given a session over the threshold whose automatic compaction the queue refused
    status, created = call("POST", "/sessions", {"name": "queue down"})
    assert status == 201
    sid = created["id"]
    for index in range(6):
        message = text(f"m{index}", "user", f"turn {index} " * 20)
        assert call("POST", f"/sessions/{sid}/messages", {"message": message})[0] == 201

    # When its status is read
    _, refused = call("GET", f"/sessions/{sid}/status")

    # Then the request is failed (not waiting for a worker), and the idle reason says so
    assert refused["compaction"]["state"] == "failed"
    assert refused["compaction"]["error"].startswith(NOT_QUEUED_ERROR)
    assert refused["idleReason"]["code"] == "compaction_failed"

    # When POST /compact is refused too, the client is told and the record stays failed
    status, body = call("POST", f"/sessions/{sid}/compact")
    assert status == 503 and body["error"]["code"] == "storage_unavailable"
    assert call("GET", f"/sessions/{sid}/status")[1]["compaction"]["state"] == "failed"

    # When the queue is back, asking again queues the same request
    api.error = None
    status, accepted = call("POST", f"/sessions/{sid}/compact")
    assert status == 202 and accepted["requestId"] == refused["compaction"]["id"]
    _, queued = call("GET", f"/sessions/{sid}/status")
    assert (queued["compaction"]["state"], queued["compaction"]["error"]) == ("queued", None)
    assert queued["idleReason"]["code"] == "compaction_queued"
    assert [request.session_id for request in api.requests] == [sid]
