"""Compaction requests through the real handler, on SQLite and PostgreSQL: queued → running → a final state.

The queue only records requests; the test then runs the real worker (over the same runtime) itself, so
each state can be observed through ``GET /sessions/{id}/status`` while it holds.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.profile import load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.compaction.summarizers.offline import ExtractiveSummarizer
from threadloom.core.compaction_worker import CompactionWorker
from threadloom.errors import CompactionError

from tests.support.api import RecordingQueue, invoke, load_event, text

ROOT = Path(__file__).resolve().parents[3]
QUICK_PROFILE = ROOT / "docs" / "examples" / "quick-compaction.yaml"
TENANT = "user-123"  # the claim in the sample events


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Runtime, RecordingQueue]]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    queue = RecordingQueue()
    quick = load_profile(QUICK_PROFILE)  # a small protected tail, so a few messages can be compacted
    profile = quick.model_copy(update={"compaction": quick.compaction.model_copy(update={"threshold": 100_000})})
    runtime = Runtime(Settings(skills_dir=str(tmp_path / "skills")), profile=profile, store=store, queue=queue)
    set_runtime(runtime)
    yield runtime, queue
    set_runtime(None)


def call(method: str, path: str, body: Any = None, tenant: str = TENANT) -> tuple[int, Any]:
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = tenant
    event["queryStringParameters"] = None
    event["rawQueryString"] = ""
    event["body"] = json.dumps(body) if body is not None else None
    return invoke(event)


def new_session(messages: int) -> str:
    status, created = call("POST", "/sessions", {"name": "status demo"})
    assert status == 201
    sid: str = created["id"]
    for index in range(messages):
        call("POST", f"/sessions/{sid}/messages", {"message": text(f"m{index}", "user", f"turn {index} " * 20)})
    return sid


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_append_answers_with_the_new_estimate_and_threshold(runtime: tuple[Runtime, RecordingQueue]) -> None:
    sid = new_session(0)
    estimates = []
    for index in range(3):
        status, body = call("POST", f"/sessions/{sid}/messages", {"message": text(f"a{index}", "user", "hello " * 10)})
        assert status == 201 and body["tokenThreshold"] == 100_000
        estimates.append(body["tokenEstimate"])
    assert estimates == sorted(estimates) and len(set(estimates)) == 3
    status, chain = call("POST", f"/sessions/{sid}/messages", {"messages": [text("c1", "user", "more words " * 5)]})
    assert status == 201 and chain["tokenEstimate"] > estimates[-1]
    _, current = call("GET", f"/sessions/{sid}/status")
    assert current["tokenEstimate"] == chain["tokenEstimate"]


def test_a_request_is_followed_from_queued_through_running_to_done(
    runtime: tuple[Runtime, RecordingQueue], monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, queue = runtime
    sid = new_session(8)
    status, before = call("GET", f"/sessions/{sid}/status")
    assert status == 200
    assert before == {
        "sessionId": sid,
        "phase": "idle",
        "tokenEstimate": before["tokenEstimate"],
        "tokenThreshold": 100_000,
        "compaction": None,
        "idleReason": None,
        "staleBlocks": [],
    }

    status, accepted = call("POST", f"/sessions/{sid}/compact")
    assert status == 202 and accepted["status"] == "queued"
    _, queued = call("GET", f"/sessions/{sid}/status")
    request = queued["compaction"]
    assert request["id"] == accepted["requestId"]
    assert (request["state"], request["leafId"], request["startedAt"], request["finishedAt"]) == (
        "queued",
        "m7",
        None,
        None,
    )
    assert request["requestedAt"].endswith("Z")

    release = threading.Event()
    original = ExtractiveSummarizer.__call__

    def slow(self: ExtractiveSummarizer, prompt: str) -> str:
        assert release.wait(10)
        return original(self, prompt)

    monkeypatch.setattr(ExtractiveSummarizer, "__call__", slow)
    worker = threading.Thread(target=CompactionWorker(rt.manager).handle, args=(queue.requests[0],))
    worker.start()
    try:
        wait_for(lambda: call("GET", f"/sessions/{sid}/status")[1]["compaction"]["state"] == "running")
        _, running = call("GET", f"/sessions/{sid}/status")
        assert running["phase"] == "compacting" and running["compaction"]["startedAt"]
    finally:
        release.set()
        worker.join(10)

    _, done = call("GET", f"/sessions/{sid}/status")
    _, overlays = call("GET", f"/sessions/{sid}/compactions")
    overlay = overlays["compactions"][0]
    assert done["phase"] == "idle" and done["tokenEstimate"] < before["tokenEstimate"]
    assert done["compaction"]["state"] == "done" and done["compaction"]["error"] is None
    assert (done["compaction"]["fromMessageId"], done["compaction"]["toMessageId"]) == (
        overlay["fromMessageId"],
        overlay["toMessageId"],
    )
    assert done["compaction"]["finishedAt"] >= done["compaction"]["startedAt"] >= request["requestedAt"]


def test_nothing_to_summarize_and_failed_are_final_states(
    runtime: tuple[Runtime, RecordingQueue], monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, queue = runtime
    worker = CompactionWorker(rt.manager)
    short = new_session(1)
    assert call("POST", f"/sessions/{short}/compact")[0] == 202
    worker.handle(queue.requests[-1])
    _, nothing = call("GET", f"/sessions/{short}/status")
    assert nothing["compaction"]["state"] == "nothing_to_summarize"
    assert nothing["compaction"]["fromMessageId"] is None and nothing["compaction"]["finishedAt"]

    def broken(self: ExtractiveSummarizer, prompt: str) -> str:
        raise RuntimeError("summarizer unavailable")

    monkeypatch.setattr(ExtractiveSummarizer, "__call__", broken)
    long = new_session(8)
    _, accepted = call("POST", f"/sessions/{long}/compact")
    with pytest.raises(CompactionError):
        worker.handle(queue.requests[-1])
    _, failed = call("GET", f"/sessions/{long}/status")
    assert failed["phase"] == "idle"
    assert failed["compaction"]["id"] == accepted["requestId"]
    assert failed["compaction"]["state"] == "failed" and "summarizer unavailable" in failed["compaction"]["error"]

    # Asking again re-queues the same request (a failed one is the only kind that restarts)
    _, again = call("POST", f"/sessions/{long}/compact")
    assert again["requestId"] == accepted["requestId"]
    _, requeued = call("GET", f"/sessions/{long}/status")
    assert requeued["compaction"]["state"] == "queued" and requeued["compaction"]["error"] is None


def test_status_of_another_tenants_session_is_not_found(runtime: tuple[Runtime, RecordingQueue]) -> None:
    sid = new_session(1)
    status, body = call("GET", f"/sessions/{sid}/status", tenant="someone-else")
    assert status == 404 and body["error"]["code"] == "not_found"
    assert call("GET", "/sessions/no-such-session/status")[0] == 404


def test_deleting_a_session_erases_its_requests(runtime: tuple[Runtime, RecordingQueue]) -> None:
    rt, _ = runtime
    sid = new_session(2)
    _, accepted = call("POST", f"/sessions/{sid}/compact")
    log = rt.store.compaction_requests(TENANT)
    assert log.get(accepted["requestId"]) is not None
    assert call("DELETE", f"/sessions/{sid}")[0] in (200, 204)
    assert log.get(accepted["requestId"]) is None and log.latest(sid) is None
