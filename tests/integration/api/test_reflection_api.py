"""Reflection over HTTP through the real handler, on SQLite and PostgreSQL: reflect, list, approve, reject.

Reflect answers 202 when a queue takes the request (the test then runs the runtime's own background jobs on it,
as the in-process worker or the compaction Lambda does) and 200 with the run's proposals without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.profile import ReflectionSpec, load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.queue import CompactionRequest

from tests.support.api import RecordingQueue, gateway_event, invoke, text

ROOT = Path(__file__).resolve().parents[3]
TENANT = "user-123"
CONVERSATION = [
    text("u1", "user", "Hi! My name is Ada."),
    text("a1", "assistant", "Nice to meet you, Ada. My name is Claude."),
    text("u2", "user", "Please call me Addy. I prefer short answers."),
    text("a2", "assistant", "Will do."),
]


def make_runtime(
    tmp_path: Path,
    store: Any,
    *,
    approval: str = "none",
    enabled: bool = True,
    queued: bool = True,
    profile: Any = None,
) -> tuple[Runtime, RecordingQueue | None]:
    base = profile or load_profile()
    spec = ReflectionSpec(enabled=enabled, approval=approval)  # type: ignore[arg-type]
    queue = RecordingQueue() if queued else None
    settings = Settings(skills_dir=str(tmp_path / "skills"), compaction_mode="in-process" if queued else "inline")
    runtime = Runtime(settings, profile=base.model_copy(update={"reflection": spec}), store=store, queue=queue)
    set_runtime(runtime)
    return runtime, queue


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_store_factory")()
    else:
        yield SqliteStore(str(tmp_path / "api.db"))
    set_runtime(None)


def call(method: str, path: str, body: Any = None, *, tenant: str = TENANT, query: Any = None) -> tuple[int, Any]:
    return invoke(gateway_event(method, path, body, tenant=tenant, query=query))


def conversation() -> str:
    status, created = call("POST", "/sessions", {"name": "About me"})
    assert status == 201
    session_id = str(created["id"])
    assert call("POST", f"/sessions/{session_id}/messages", {"messages": CONVERSATION})[0] in (200, 201)
    return session_id


def memory(session_id: str) -> str:
    status, block = call("GET", f"/sessions/{session_id}/context/memory")
    assert status == 200
    return str(block["content"])


def summary(proposal: dict[str, Any]) -> tuple[str, str, list[str], str]:
    return proposal["operation"], proposal["content"], proposal["sourceMessageIds"], proposal["status"]


def test_reflect_queues_and_the_worker_applies_the_users_facts(tmp_path: Path, store: Any) -> None:
    runtime, queue = make_runtime(tmp_path, store)
    session_id = conversation()
    assert queue is not None

    status, body = call("POST", f"/sessions/{session_id}/reflect")

    assert (status, body) == (202, {"status": "queued", "leafId": "a2", "proposals": None})
    (request,) = [item for item in queue.requests if item.kind == "reflection"]
    assert (request.namespace, request.session_id, request.leaf_id) == (TENANT, session_id, "a2")
    assert runtime.jobs.handle(request) == "proposed"
    assert memory(session_id) == "Name: Ada\nPreferred name: Addy\nPrefers: short answers"
    status, listed = call("GET", f"/sessions/{session_id}/proposals")
    assert status == 200 and listed["nextCursor"] is None
    assert [summary(item) for item in listed["proposals"]] == [
        ("append", "Name: Ada", ["u1"], "applied"),
        ("append", "Preferred name: Addy", ["u2"], "applied"),
        ("append", "Prefers: short answers", ["u2"], "applied"),
    ]
    assert runtime.jobs.handle(request) == "duplicate"  # a redelivery changes nothing
    assert memory(session_id) == "Name: Ada\nPreferred name: Addy\nPrefers: short answers"


def test_without_a_queue_reflect_runs_now_and_edits_wait_for_approval(tmp_path: Path, store: Any) -> None:
    make_runtime(tmp_path, store, approval="required", queued=False)
    session_id = conversation()

    status, body = call("POST", f"/sessions/{session_id}/reflect", {"leafId": "a1"})

    assert status == 200 and (body["status"], body["leafId"]) == ("proposed", "a1")
    assert [summary(item) for item in body["proposals"]] == [("append", "Name: Ada", ["u1"], "pending")]
    assert memory(session_id) == ""
    status, body = call("POST", f"/sessions/{session_id}/reflect")
    assert [summary(item) for item in body["proposals"]] == [
        ("append", "Preferred name: Addy", ["u2"], "pending"),
        ("append", "Prefers: short answers", ["u2"], "pending"),
    ]
    status, again = call("POST", f"/sessions/{session_id}/reflect")  # the same leaf again: the same request
    assert (status, again["status"], again["proposals"]) == (200, "duplicate", body["proposals"])

    # Pages of pending proposals, one at a time
    status, first = call("GET", f"/sessions/{session_id}/proposals", query={"status": "pending", "limit": "2"})
    assert status == 200 and len(first["proposals"]) == 2 and first["nextCursor"]
    status, rest = call(
        "GET", f"/sessions/{session_id}/proposals", query={"status": "pending", "cursor": first["nextCursor"]}
    )
    assert [item["content"] for item in rest["proposals"]] == ["Prefers: short answers"] and rest["nextCursor"] is None
    name, nickname = first["proposals"]

    status, approved = call("POST", f"/sessions/{session_id}/proposals/{name['id']}/approve")
    assert status == 200 and approved["status"] == "applied" and approved["appliedVersion"]
    status, rejected = call("POST", f"/sessions/{session_id}/proposals/{nickname['id']}/reject")
    assert status == 200 and rejected["status"] == "rejected" and rejected["decidedAt"]
    assert memory(session_id) == "Name: Ada"

    status, again = call("POST", f"/sessions/{session_id}/proposals/{name['id']}/approve")
    assert (status, again["error"]["code"]) == (409, "conflict")
    assert again["error"]["message"] == f"Proposal {name['id']!r} is applied, not pending; nothing was changed"
    status, again = call("POST", f"/sessions/{session_id}/proposals/{nickname['id']}/approve")
    assert (status, again["error"]["code"]) == (409, "conflict")
    status, missing = call("POST", f"/sessions/{session_id}/proposals/nope/reject")
    assert (status, missing["error"]["message"]) == (404, f"Proposal 'nope' not found in session {session_id!r}")
    status, pending = call("GET", f"/sessions/{session_id}/proposals", query={"status": "pending"})
    assert [item["content"] for item in pending["proposals"]] == ["Prefers: short answers"]
    status, bad = call("GET", f"/sessions/{session_id}/proposals", query={"status": "maybe"})
    assert status == 422 and bad["error"]["code"] == "invalid_request" and "status" in bad["error"]["message"]


def test_another_tenant_finds_neither_the_session_nor_its_proposals(tmp_path: Path, store: Any) -> None:
    make_runtime(tmp_path, store, approval="required", queued=False)
    session_id = conversation()
    _, body = call("POST", f"/sessions/{session_id}/reflect")
    proposal_id = body["proposals"][0]["id"]

    for method, path in [
        ("POST", f"/sessions/{session_id}/reflect"),
        ("GET", f"/sessions/{session_id}/proposals"),
        ("POST", f"/sessions/{session_id}/proposals/{proposal_id}/approve"),
        ("POST", f"/sessions/{session_id}/proposals/{proposal_id}/reject"),
    ]:
        status, refused = call(method, path, tenant="mallory")
        assert (status, refused["error"]["message"]) == (404, f"Session {session_id!r} not found")
    status, listed = call("GET", f"/sessions/{session_id}/proposals")
    assert [item["status"] for item in listed["proposals"]] == ["pending", "pending", "pending"]


def test_reflect_says_so_when_the_profile_has_reflection_off(tmp_path: Path, store: Any) -> None:
    make_runtime(tmp_path, store, enabled=False)
    session_id = conversation()
    status, body = call("POST", f"/sessions/{session_id}/reflect")
    assert (status, body["error"]["code"]) == (409, "conflict")
    assert body["error"]["message"] == (
        "Reflection is off in this deployment's profile (set reflection.enabled; see docs/reflection.md)"
    )
    status, body = call("POST", "/sessions/nope/reflect")
    assert status == 404
    status, body = call("POST", f"/sessions/{session_id}/reflect", {"leafId": "zz"})
    assert (status, body["error"]["code"]) == (409, "conflict")  # reflection is off before the leaf is looked up


def test_a_leaf_that_does_not_exist_is_a_404(tmp_path: Path, store: Any) -> None:
    make_runtime(tmp_path, store)
    session_id = conversation()
    status, body = call("POST", f"/sessions/{session_id}/reflect", {"leafId": "zz"})
    assert (status, body["error"]["message"]) == (404, f"Message 'zz' not found in session {session_id!r}")


def test_a_compaction_that_stored_an_overlay_queues_a_reflection_which_reads_the_originals(
    tmp_path: Path, store: Any
) -> None:
    quick = load_profile(ROOT / "docs" / "examples" / "quick-compaction.yaml")
    runtime, queue = make_runtime(tmp_path, store, profile=quick)
    assert queue is not None
    session_id = conversation()
    call(
        "POST",
        f"/sessions/{session_id}/messages",
        {"messages": [text("u3", "user", "Thanks."), text("a3", "assistant", "Anytime.")]},
    )
    compaction = CompactionRequest.create(TENANT, session_id, "a3")

    assert runtime.jobs.handle(compaction) == "compacted"

    (reflection,) = [item for item in queue.requests if item.kind == "reflection"]
    assert (reflection.session_id, reflection.leaf_id) == (session_id, None)
    assert runtime.jobs.handle(reflection) == "proposed"
    assert memory(session_id) == "Name: Ada\nPreferred name: Addy\nPrefers: short answers"


def test_the_idle_sweep_queues_a_reflection_of_a_quiet_session(tmp_path: Path, store: Any) -> None:
    from datetime import UTC, datetime, timedelta

    runtime, queue = make_runtime(tmp_path, store)
    assert queue is not None
    session_id = conversation()
    assert runtime.jobs.sweep_idle(every_minutes=5) == 0  # idle_minutes is not set: no idle trigger
    spec = ReflectionSpec(enabled=True, idle_minutes=30)
    runtime = Runtime(
        runtime.settings, profile=runtime.profile.model_copy(update={"reflection": spec}), store=store, queue=queue
    )
    set_runtime(runtime)
    assert runtime.jobs.sweep_idle(every_minutes=5) == 0  # active moments ago: not idle yet

    assert runtime.jobs.sweep_idle(every_minutes=5, now=datetime.now(UTC) + timedelta(minutes=32)) == 1

    (request,) = [item for item in queue.requests if item.kind == "reflection"]
    assert (request.namespace, request.session_id) == (TENANT, session_id)
    assert runtime.jobs.handle(request) == "proposed"
    assert memory(session_id) == "Name: Ada\nPreferred name: Addy\nPrefers: short answers"
