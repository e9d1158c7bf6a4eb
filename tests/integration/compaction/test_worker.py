"""CompactionWorker: what one queued request does to a real store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.compaction.queue import CompactionRequest, InProcessCompactionQueue
from threadloom.compaction.sqs_queue import deduplication_id
from threadloom.compaction.summarizers import ExtractiveSummarizer
from threadloom.core.compaction_worker import CompactionOutcome, CompactionWorker, request_key
from threadloom.core.manager import SessionManager
from threadloom.errors import CompactionError

from tests.integration.compaction.sqs_lambda import THRESHOLD, chat_message, compact_function, worker_manager

if TYPE_CHECKING:
    from collections.abc import Callable


class CountingSummarizer:
    """The extractive summarizer, counting its calls (each would be a paid model call in production)."""

    def __init__(self) -> None:
        self.calls = 0
        self._summarize = ExtractiveSummarizer()

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        return self._summarize(prompt)


def long_session(manager: SessionManager, count: int = 12) -> tuple[str, list[str]]:
    session_id = manager.create("chat").id
    ids = [manager.append(session_id, chat_message(session_id, index)) for index in range(count)]
    return session_id, ids


def test_a_request_compacts_once_and_a_repeat_does_not_call_the_summarizer(make_store: Callable[[], Any]) -> None:
    # Given a long session and a worker whose summarizer counts its calls
    summarizer = CountingSummarizer()
    manager = worker_manager(make_store(), summarize=summarizer)
    worker = CompactionWorker(lambda namespace: manager)
    session_id, ids = long_session(manager)
    request = CompactionRequest.create("tenant-a", session_id, ids[-1])

    # When the request is handled twice
    first = worker.handle(request)
    second = worker.handle(request)

    # Then the first compacts, the second is recognised as a duplicate before any summarizing
    assert (first, second) == (CompactionOutcome.COMPACTED, CompactionOutcome.DUPLICATE)
    assert summarizer.calls == 1
    assert len(manager.get_compactions(session_id)) == 1


def test_the_same_leaf_requested_again_later_is_the_same_request(make_store: Callable[[], Any]) -> None:
    # Given a compacted session
    manager = worker_manager(make_store())
    worker = CompactionWorker(lambda namespace: manager)
    session_id, ids = long_session(manager)
    worker.handle(CompactionRequest("tenant-a", session_id, ids[-1], "2026-01-02T03:04:05.000Z"))

    # When the producer re-sends the trigger for the same leaf after SQS's deduplication window
    outcome = worker.handle(CompactionRequest("tenant-a", session_id, ids[-1], "2026-01-02T04:00:00.000Z"))

    # Then the stored request key still recognises it
    assert outcome is CompactionOutcome.DUPLICATE
    assert len(manager.get_compactions(session_id)) == 1


def test_a_short_session_has_nothing_to_do(make_store: Callable[[], Any]) -> None:
    # Given a session shorter than head plus minimum tail
    manager = worker_manager(make_store())
    session_id, ids = long_session(manager, count=4)

    # When a request for it is handled
    outcome = CompactionWorker(lambda namespace: manager).handle(
        CompactionRequest.create("tenant-a", session_id, ids[-1])
    )

    # Then nothing is stored
    assert outcome is CompactionOutcome.NOTHING_TO_DO
    assert manager.get_compactions(session_id) == []


def test_a_deleted_leaf_falls_back_to_the_latest_leaf(make_store: Callable[[], Any]) -> None:
    # Given a request whose leaf was deleted before the worker ran (its parent is now the latest leaf)
    manager = worker_manager(make_store())
    worker = CompactionWorker(lambda namespace: manager)
    session_id, ids = long_session(manager)
    request = CompactionRequest.create("tenant-a", session_id, ids[-1])
    manager.delete_messages(session_id, [ids[-1]])

    # When it is handled
    outcome = worker.handle(request)

    # Then the current branch is compacted, and a redelivery of the same request is a duplicate
    assert outcome is CompactionOutcome.COMPACTED
    (compaction,) = manager.get_compactions(session_id)
    assert compaction.to_message_id in ids[:-1]
    assert manager.get_history(session_id)[-1]["id"] == ids[-2]
    assert worker.handle(request) is CompactionOutcome.DUPLICATE


def test_a_session_of_another_namespace_is_gone(make_store: Callable[[], Any]) -> None:
    # Given a session of tenant-a, and a request that names it under tenant-b
    store = make_store()
    managers = {"tenant-a": worker_manager(store, "tenant-a"), "tenant-b": worker_manager(store, "tenant-b")}
    session_id, ids = long_session(managers["tenant-a"])
    worker = CompactionWorker(managers.__getitem__)

    # When the request is handled
    outcome = worker.handle(CompactionRequest.create("tenant-b", session_id, ids[-1]))

    # Then tenant-b sees no such session and tenant-a's session is untouched
    assert outcome is CompactionOutcome.SESSION_GONE
    assert managers["tenant-a"].get_compactions(session_id) == []


def test_a_summarizer_failure_propagates_and_a_retry_succeeds(make_store: Callable[[], Any]) -> None:
    # Given a summarizer that fails once (a throttled model, say)
    failures = [RuntimeError("throttled")]
    summarizer = ExtractiveSummarizer()

    def flaky(prompt: str) -> str:
        if failures:
            raise failures.pop()
        return summarizer(prompt)

    manager = worker_manager(make_store(), summarize=flaky)
    worker = CompactionWorker(lambda namespace: manager)
    session_id, ids = long_session(manager)
    request = CompactionRequest.create("tenant-a", session_id, ids[-1])

    # When the request is handled, then handled again as SQS would redeliver it
    with pytest.raises(CompactionError, match="throttled"):
        worker.handle(request)
    stored_after_failure = manager.get_compactions(session_id)
    retried = worker.handle(request)

    # Then the failure stored nothing and the retry compacted
    assert stored_after_failure == []
    assert retried is CompactionOutcome.COMPACTED
    assert len(manager.get_compactions(session_id)) == 1


def test_a_manager_without_a_compaction_function_is_a_configuration_error(make_store: Callable[[], Any]) -> None:
    # Given a manager with no compaction function
    manager = SessionManager.create(make_store(), namespace="tenant-a")
    session_id, ids = long_session(manager)

    # When a request is handled, then it fails loudly (so it ends on the dead-letter queue, not silently dropped)
    with pytest.raises(CompactionError, match="No compaction function registered"):
        CompactionWorker(lambda namespace: manager).handle(CompactionRequest.create("tenant-a", session_id, ids[-1]))


def test_requests_without_a_leaf_are_told_apart_by_their_time(make_store: Callable[[], Any]) -> None:
    # Given two "compact whatever is latest" requests made at different times, with the session growing between
    manager = worker_manager(make_store())
    worker = CompactionWorker(lambda namespace: manager)
    session_id, _ = long_session(manager)
    early = CompactionRequest("tenant-a", session_id, None, "2026-01-02T03:04:05.000Z")
    late = CompactionRequest("tenant-a", session_id, None, "2026-01-02T05:00:00.000Z")

    # When both are handled, then the first again (a redelivery)
    outcomes = [worker.handle(early)]
    for index in range(12, 24):
        manager.append(session_id, chat_message(session_id, index))
    outcomes += [worker.handle(late), worker.handle(early)]

    # Then the later one is a request of its own and compacts again; the redelivery is a duplicate
    assert outcomes == [CompactionOutcome.COMPACTED, CompactionOutcome.COMPACTED, CompactionOutcome.DUPLICATE]
    assert len(manager.get_compactions(session_id)) == 2
    assert request_key(early) != request_key(late)


def test_a_request_key_names_the_same_request_as_the_sqs_deduplication_id() -> None:
    # Given a request for a leaf
    request = CompactionRequest("tenant-a", "session-1", "m-7", "2026-01-02T03:04:05.000Z")

    # When its key is computed, then it is the id SQS deduplicates it by
    assert request_key(request) == deduplication_id(request)


def test_the_worker_serves_the_in_process_queue(make_store: Callable[[], Any]) -> None:
    # Given a manager whose appends enqueue on the in-process queue, drained by the worker
    queue = InProcessCompactionQueue()
    manager = (
        SessionManager.create(make_store(), namespace="tenant-a")
        .on_compaction(compact_function())
        .compact_after(THRESHOLD)
        .with_compaction_queue(queue)
    )
    queue.set_handler(CompactionWorker(lambda namespace: manager))
    session_id = manager.create("local").id

    # When messages are appended past the threshold and the queue drains
    for index in range(12):
        manager.append(session_id, chat_message(session_id, index))
    assert queue.drain(timeout=30)
    queue.close(timeout=5)

    # Then the session was compacted off the append path and every message is still stored
    assert manager.get_compactions(session_id)
    session = manager.get_session(session_id)
    assert all(session.get_message(f"{session_id}-m{index:03d}") is not None for index in range(12))


def test_two_deliveries_racing_on_one_request_count_one_compaction(make_store: Callable[[], Any]) -> None:
    # Given two workers (two Lambda environments) whose summarizers both run before either commits
    barrier = threading.Barrier(2, timeout=20)

    def racing_summarizer(prompt: str) -> str:
        barrier.wait()
        return ExtractiveSummarizer()(prompt)

    managers = [worker_manager(make_store(), summarize=racing_summarizer) for _ in range(2)]
    session_id, ids = long_session(managers[0])
    request = CompactionRequest.create("tenant-a", session_id, ids[-1])
    outcomes: list[CompactionOutcome] = []

    def handle(manager: SessionManager) -> None:
        outcomes.append(CompactionWorker(lambda namespace: manager).handle(request))

    threads = [threading.Thread(target=handle, args=(manager,)) for manager in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then only the delivery whose overlay committed reports (and is counted as) a compaction
    assert sorted(outcomes) == sorted([CompactionOutcome.COMPACTED, CompactionOutcome.DUPLICATE])
    assert len(managers[0].get_compactions(session_id)) == 1
