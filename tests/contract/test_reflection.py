"""Reflection on every backend: facts applied once with provenance, the watermark, redelivery and two workers.

Each test drives ``ReflectionWorker`` over a real store; ``make_store()`` gives another connection to the same
data (another process, a redelivered SQS message on another Lambda). The offline extractor keeps only what the
user states about themselves, so the expected block content is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from threadloom.compaction.queue import CompactionRequest, request_key
from threadloom.core.manager import SessionManager
from threadloom.errors import ConflictError
from threadloom.reflection.facts import Fact, UserStatement
from threadloom.reflection.offline import SelfStatementExtractor
from threadloom.reflection.proposals import apply_proposal, reject_proposal
from threadloom.reflection.session_blocks import SessionMemoryBlocks
from threadloom.reflection.worker import ReflectionOutcome, ReflectionSettings, ReflectionWorker

from tests.support.messages import text_message

TENANT = "tenant-a"
SESSION = "s-reflect"


def manager_over(store: Any, namespace: str = TENANT, max_tokens: int = 500) -> SessionManager:
    return SessionManager.create(store, namespace=namespace).with_context("memory", max_tokens=max_tokens)


def worker_over(store: Any, *, approval: bool = False, extractor: Any = None, max_tokens: int = 500) -> Any:
    manager = manager_over(store, max_tokens=max_tokens)
    settings = ReflectionSettings(label="memory", approval=approval)
    return ReflectionWorker(lambda namespace: manager, extractor or SelfStatementExtractor(), settings), manager


def seed(store: Any, *messages: tuple[str, str, str]) -> None:
    if store.registry(TENANT).get(SESSION) is None:
        store.registry(TENANT).create("About me", session_id=SESSION)
    manager_over(store).append_all(SESSION, [text_message(i, text, role) for i, text, role in messages])


def reflect_request(leaf_id: str | None = None) -> CompactionRequest:
    return CompactionRequest.create(TENANT, SESSION, leaf_id, kind="reflection")


def memory(store: Any) -> str:
    block = manager_over(store).get_session(SESSION).get_context_block("memory")
    return block.content if block is not None else ""


FIRST = (
    ("u1", "Hi, my name is Ada.", "user"),
    ("a1", "My name is Claude. I prefer brevity.", "assistant"),  # the assistant's words are never read
    ("u2", "I prefer tea. My friend's name is Bo.", "user"),
)


def test_a_reflection_applies_what_the_user_said_about_themselves_with_its_source(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    seed(store, *FIRST)
    worker, _ = worker_over(store)
    request = reflect_request("u2")

    assert worker.handle(request) is ReflectionOutcome.PROPOSED

    assert memory(make_store()) == "Name: Ada\nPrefers: tea"
    ledger = store.reflections(TENANT)
    stored = ledger.of_run(request_key(request))
    assert [(p.content, p.source_message_ids, p.status) for p in stored] == [
        ("Name: Ada", ("u1",), "applied"),
        ("Prefers: tea", ("u2",), "applied"),
    ]
    assert all(p.applied_version and p.decided_at for p in stored)
    mark = ledger.mark(SESSION)
    assert mark is not None and (mark.message_id, mark.request_key) == ("u2", request_key(request))


def test_the_next_reflection_reads_only_the_messages_after_the_watermark(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    worker, _ = worker_over(store)
    worker.handle(reflect_request("u2"))
    seed(store, ("u3", "Call me Addy. My name is Ada.", "user"))
    second = reflect_request("u3")

    assert worker.handle(second) is ReflectionOutcome.PROPOSED
    assert worker.handle(reflect_request("u3")) is ReflectionOutcome.DUPLICATE  # the same leaf: the same request
    assert worker.handle(reflect_request()) is ReflectionOutcome.NOTHING_NEW  # the latest leaf: nothing after it

    assert memory(store) == "Name: Ada\nPrefers: tea\nPreferred name: Addy"
    assert [(p.content, p.source_message_ids) for p in store.reflections(TENANT).of_run(request_key(second))] == [
        ("Preferred name: Addy", ("u3",))
    ]


def test_nothing_to_remember_still_moves_the_watermark(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, ("u1", "What's the weather like?", "user"), ("a1", "Sunny.", "assistant"))
    worker, _ = worker_over(store)
    assert worker.handle(reflect_request()) is ReflectionOutcome.NOTHING_FOUND
    mark = store.reflections(TENANT).mark(SESSION)
    assert mark is not None and mark.message_id == "a1"
    assert memory(store) == ""


def test_a_redelivered_request_is_applied_once(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    request = reflect_request("u2")
    first, _ = worker_over(store)
    redelivery, _ = worker_over(make_store())  # the same message, on another process

    assert first.handle(request) is ReflectionOutcome.PROPOSED
    assert redelivery.handle(request) is ReflectionOutcome.DUPLICATE

    assert memory(make_store()) == "Name: Ada\nPrefers: tea"
    assert len(store.reflections(TENANT).of_run(request_key(request))) == 2


class Rendezvous:
    """An extractor that waits until every worker has read the session before any may commit."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=30)
        self.inner = SelfStatementExtractor()

    def __call__(self, statements: Sequence[UserStatement]) -> list[Fact]:
        facts = self.inner(statements)
        self.barrier.wait()
        return facts


def run_together(workers: list[Any], requests: list[CompactionRequest]) -> list[ReflectionOutcome]:
    outcomes: list[ReflectionOutcome | BaseException] = [ReflectionOutcome.NOTHING_NEW] * len(workers)

    def run(index: int) -> None:
        try:
            outcomes[index] = workers[index].handle(requests[index])
        except BaseException as error:  # surfaced below
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return sorted(outcomes)  # type: ignore[type-var]


def test_two_workers_with_the_same_request_apply_it_once(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    extractor = Rendezvous(2)
    workers = [worker_over(make_store(), extractor=extractor)[0] for _ in range(2)]
    request = reflect_request("u2")

    outcomes = run_together(workers, [request, request])

    assert outcomes == sorted([ReflectionOutcome.DUPLICATE, ReflectionOutcome.PROPOSED])
    assert memory(make_store()) == "Name: Ada\nPrefers: tea"
    assert len(store.reflections(TENANT).of_run(request_key(request))) == 2


def test_two_requests_over_the_same_messages_store_one_run(make_store: Callable[[], Any]) -> None:
    # Given an on-demand reflection and one queued after a compaction, both of the latest leaf (two request keys)
    store = make_store()
    seed(store, *FIRST)
    extractor = Rendezvous(2)
    workers = [worker_over(make_store(), extractor=extractor)[0] for _ in range(2)]
    on_demand = reflect_request()
    after_compaction = CompactionRequest(TENANT, SESSION, None, "2026-01-01T00:00:00.000Z", "reflection")
    assert request_key(on_demand) != request_key(after_compaction)

    outcomes = run_together(workers, [on_demand, after_compaction])

    assert outcomes == sorted([ReflectionOutcome.PROPOSED, ReflectionOutcome.SKIPPED_STALE])
    assert memory(make_store()) == "Name: Ada\nPrefers: tea"


def test_with_approval_on_edits_wait_and_each_is_decided_once(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    worker, _ = worker_over(store, approval=True)
    request = reflect_request("u2")
    assert worker.handle(request) is ReflectionOutcome.PROPOSED
    name, tea = store.reflections(TENANT).of_run(request_key(request))
    assert (name.status, tea.status) == ("pending", "pending")
    assert memory(store) == ""

    ledger = make_store().reflections(TENANT)  # the approver is another process
    blocks = SessionMemoryBlocks(manager_over(make_store()).get_session(SESSION))
    applied = apply_proposal(ledger, blocks, name, from_status="pending")
    rejected = reject_proposal(ledger, SESSION, tea.id)

    assert (applied.status, rejected.status) == ("applied", "rejected")
    assert memory(make_store()) == "Name: Ada"
    with pytest.raises(ConflictError, match="is applied, not pending"):
        apply_proposal(ledger, blocks, name, from_status="pending")
    with pytest.raises(ConflictError, match="is rejected, not pending"):
        reject_proposal(ledger, SESSION, tea.id)
    with pytest.raises(ConflictError, match="is rejected, not pending"):
        apply_proposal(ledger, blocks, tea, from_status="pending")
    assert memory(make_store()) == "Name: Ada"


def test_a_replacement_based_on_an_old_version_is_refused_and_recorded(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, ("u1", "My name is Ada.", "user"))
    worker, manager = worker_over(store)
    worker.handle(reflect_request())
    approving, _ = worker_over(store, approval=True)
    seed(store, ("u2", "Actually, my name is Bea.", "user"))
    request = reflect_request("u2")
    approving.handle(request)
    (rename,) = store.reflections(TENANT).of_run(request_key(request))
    assert (rename.operation, rename.content) == ("replace", "Name: Bea")
    manager.get_session(SESSION).append_context_block("memory", "Prefers: tea")  # the block moves on meanwhile

    blocks = SessionMemoryBlocks(manager_over(make_store()).get_session(SESSION))
    with pytest.raises(ConflictError, match="changed since this edit was proposed"):
        apply_proposal(store.reflections(TENANT), blocks, rename, from_status="pending")

    failed = store.reflections(TENANT).get(SESSION, rename.id)
    assert failed is not None and failed.status == "failed" and "changed since" in (failed.error or "")
    assert memory(make_store()) == "Name: Ada\nPrefers: tea"


def test_an_edit_over_the_blocks_budget_fails_alone(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, ("u1", "My name is Ada. I prefer " + "very " * 20 + "long answers.", "user"))
    worker, _ = worker_over(store, max_tokens=8)
    request = reflect_request()
    assert worker.handle(request) is ReflectionOutcome.PROPOSED
    name, long_one = store.reflections(TENANT).of_run(request_key(request))
    assert name.status == "applied"
    assert long_one.status == "failed" and "exceeds maxTokens" in (long_one.error or "")
    assert memory(store) == "Name: Ada"


def test_another_tenant_sees_and_decides_nothing(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    worker, _ = worker_over(store, approval=True)
    request = reflect_request("u2")
    worker.handle(request)
    name, _ = store.reflections(TENANT).of_run(request_key(request))

    other = store.reflections("tenant-b")
    assert other.get(SESSION, name.id) is None
    assert other.page(SESSION, status=None, limit=10) == []
    assert other.mark(SESSION) is None
    assert other.of_run(request_key(request)) == []
    assert not other.move(SESSION, name.id, "pending", "rejected")
    assert store.reflections(TENANT).get(SESSION, name.id).status == "pending"  # type: ignore[union-attr]
    other_worker = ReflectionWorker(lambda namespace: manager_over(store, "tenant-b"), SelfStatementExtractor())
    assert other_worker.handle(CompactionRequest.create("tenant-b", SESSION, kind="reflection")) is (
        ReflectionOutcome.SESSION_GONE
    )


def test_deleting_the_session_deletes_its_reflection_rows(make_store: Callable[[], Any]) -> None:
    store = make_store()
    seed(store, *FIRST)
    worker, manager = worker_over(store, approval=True)
    worker.handle(reflect_request("u2"))
    ledger = store.reflections(TENANT)
    assert len(ledger.page(SESSION, status=None, limit=10)) == 2

    assert manager.delete(SESSION)

    assert ledger.page(SESSION, status=None, limit=10) == []
    assert ledger.mark(SESSION) is None
    assert worker.handle(reflect_request("u2")) is ReflectionOutcome.SESSION_GONE


class ListQueue:
    def __init__(self) -> None:
        self.requests: list[CompactionRequest] = []

    def enqueue(self, request: CompactionRequest) -> None:
        self.requests.append(request)


def test_the_idle_sweep_queues_sessions_active_since_their_last_reflection(make_store: Callable[[], Any]) -> None:
    from datetime import UTC, datetime, timedelta

    from threadloom.reflection.idle import queue_idle_reflections

    store = make_store()
    seed(store, *FIRST)
    store.registry("tenant-b").create("Other", session_id="s-other")
    manager_over(store, "tenant-b").append("s-other", text_message("b1", "My name is Bo."))
    later = datetime.now(UTC) + timedelta(minutes=31)  # 30 idle minutes have passed since the messages

    def sweep(now: datetime = later) -> list[tuple[str, str]]:
        queue = ListQueue()
        queued = queue_idle_reflections(store.reflection_sweep(), queue, idle_minutes=30, every_minutes=10, now=now)
        assert [(item.namespace, item.session_id, item.kind) for item in queue.requests] == [
            (namespace, session_id, "reflection") for namespace, session_id in queued
        ]
        return sorted(queued)

    assert sweep() == [(TENANT, SESSION), ("tenant-b", "s-other")]
    worker, _ = worker_over(store)
    worker.handle(reflect_request())
    assert memory(store) == "Name: Ada\nPrefers: tea"
    assert sweep() == [("tenant-b", "s-other")]  # reflected since its last message
    seed(store, ("u3", "I prefer green tea.", "user"))
    assert sweep() == [(TENANT, SESSION), ("tenant-b", "s-other")]  # active again
    assert sweep(later + timedelta(minutes=15)) == []  # their idle stretch began before this sweep's window
    assert sweep(later - timedelta(minutes=2)) == []  # not idle long enough yet


def test_a_session_opened_again_for_another_subject_is_not_reflected_into_the_first_ones_memory(
    make_store: Callable[[], Any],
) -> None:
    """A keyed session keeps its id when it is deleted and opened again, maybe for another subject: a worker that
    looked it up for Alice must not read Bob's new conversation and write his facts into Alice's memory."""

    def subject_manager(store: Any) -> SessionManager:
        return SessionManager.create(store, namespace=TENANT).with_context("memory", max_tokens=500, scope="subject")

    store, elsewhere = make_store(), subject_manager(make_store())
    manager = subject_manager(store)
    session_id = manager.open_session("user-1", subject_id="alice").id
    manager.append_all(session_id, [text_message("u1", "Hi, my name is Ada.", "user")])
    alice_other = manager.create_session("alice's other", subject_id="alice").id

    def created_again_for_bob_meanwhile(session: Any) -> SessionMemoryBlocks:
        elsewhere.delete(session_id)
        elsewhere.open_session("user-1", subject_id="bob")
        elsewhere.append_all(session_id, [text_message("b1", "Hi, my name is Bob.", "user")])
        return SessionMemoryBlocks(session)

    worker = ReflectionWorker(
        lambda namespace: manager,
        SelfStatementExtractor(),
        ReflectionSettings(label="memory"),
        blocks_for=created_again_for_bob_meanwhile,
    )
    request = CompactionRequest.create(TENANT, session_id, "u1", kind="reflection")
    assert worker.handle(request) is ReflectionOutcome.SESSION_GONE
    alice_memory = subject_manager(make_store()).get_session(alice_other).get_context_block("memory")
    assert alice_memory is not None and alice_memory.content == ""
    # Redelivered, the request reflects the session as it is now: Bob's, into Bob's memory
    worker.blocks_for = SessionMemoryBlocks
    assert worker.handle(CompactionRequest.create(TENANT, session_id, "b1", kind="reflection")) is (
        ReflectionOutcome.PROPOSED
    )
    assert subject_manager(make_store()).get_session(session_id).get_context_block("memory").content == "Name: Bob"  # type: ignore[union-attr]
    assert subject_manager(make_store()).get_session(alice_other).get_context_block("memory").content == ""  # type: ignore[union-attr]
