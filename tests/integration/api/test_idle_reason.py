"""``GET /sessions/{id}/status`` says why a session over its threshold sits idle, on SQLite and PostgreSQL.

The profile is the compaction walkthrough's (docs/examples/quick-compaction.yaml: threshold 60 tokens,
one protected head message, about 30 tokens of protected tail). The queue only records requests; the
test runs the real worker itself.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
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
    runtime = Runtime(
        Settings(skills_dir=str(tmp_path / "skills")), profile=load_profile(QUICK_PROFILE), store=store, queue=queue
    )
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


def new_session() -> str:
    status, created = call("POST", "/sessions", {"name": "idle over the threshold"})
    assert status == 201
    return str(created["id"])


def append_chain(sid: str, *bodies: tuple[str, str, str]) -> dict[str, Any]:
    status, body = call("POST", f"/sessions/{sid}/messages", {"messages": [text(*item) for item in bodies]})
    assert status == 201, body
    return dict(body)


def status_of(sid: str) -> dict[str, Any]:
    status, body = call("GET", f"/sessions/{sid}/status")
    assert status == 200, body
    return dict(body)


VOYAGE = (
    ("u1", "user", "Plot a course to Lisbon"),
    ("a1", "assistant", "Steer west past the lighthouse."),
    ("u2", "user", "How long will it take?"),
)


def test_under_the_threshold_there_is_no_reason(runtime: tuple[Runtime, RecordingQueue]) -> None:
    rt, queue = runtime
    quick = rt.profile
    roomy = quick.model_copy(update={"compaction": quick.compaction.model_copy(update={"threshold": 100_000})})
    set_runtime(Runtime(rt.settings, profile=roomy, store=rt.store, queue=queue))
    sid = new_session()
    append_chain(sid, ("u1", "user", "Hi"))
    current = status_of(sid)
    assert current["tokenEstimate"] <= current["tokenThreshold"]
    assert current["idleReason"] is None


def test_nothing_to_summarize_is_the_reason_a_session_over_its_threshold_sits_idle(
    runtime: tuple[Runtime, RecordingQueue],
) -> None:
    rt, queue = runtime
    sid = new_session()
    appended = append_chain(sid, *VOYAGE)  # over 60 tokens: the append queues a compaction by itself
    assert appended["tokenEstimate"] > appended["tokenThreshold"] == 60
    queued = status_of(sid)
    assert queued["phase"] == "idle" and queued["compaction"]["state"] == "queued"
    assert queued["idleReason"]["code"] == "compaction_queued"
    assert "waits for the worker" in queued["idleReason"]["message"]

    # Three messages are the protected head (1) and tail (2): the worker finds nothing to summarize
    CompactionWorker(rt.manager).handle(queue.requests[-1])
    idle = status_of(sid)
    assert idle["phase"] == "idle" and idle["compaction"]["state"] == "nothing_to_summarize"
    assert idle["tokenEstimate"] > idle["tokenThreshold"]
    reason = idle["idleReason"]
    assert reason["code"] == "nothing_to_summarize"
    assert f"({idle['tokenEstimate']:,} tokens) is over the compaction threshold (60)" in reason["message"]
    assert "found nothing to summarize" in reason["message"] and "'u2'" in reason["message"]


def test_a_compaction_that_leaves_the_session_over_its_threshold_says_so(
    runtime: tuple[Runtime, RecordingQueue],
) -> None:
    rt, queue = runtime
    sid = new_session()
    append_chain(sid, *VOYAGE, ("a2", "assistant", "About three days with a fair wind."))
    CompactionWorker(rt.manager).handle(queue.requests[-1])
    after = status_of(sid)
    assert after["compaction"]["state"] == "done"
    assert after["tokenEstimate"] > after["tokenThreshold"]
    assert after["idleReason"]["code"] == "still_over_after_compaction"


def test_a_failed_compaction_is_the_reason(
    runtime: tuple[Runtime, RecordingQueue], monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, queue = runtime

    def broken(self: ExtractiveSummarizer, prompt: str) -> str:
        raise RuntimeError("summarizer unavailable")

    monkeypatch.setattr(ExtractiveSummarizer, "__call__", broken)
    sid = new_session()
    append_chain(sid, *VOYAGE, ("a2", "assistant", "About three days with a fair wind."))
    with pytest.raises(CompactionError):
        CompactionWorker(rt.manager).handle(queue.requests[-1])
    reason = status_of(sid)["idleReason"]
    assert reason["code"] == "compaction_failed"
    assert "summarizer unavailable" in reason["message"]


def test_over_the_threshold_without_any_request(runtime: tuple[Runtime, RecordingQueue]) -> None:
    sid = new_session()
    # Writing a block is not an append: it grows the estimate past the threshold without queueing anything
    status, _ = call("PUT", f"/sessions/{sid}/context/memory", {"content": "The captain likes calm harbours. " * 20})
    assert status == 200
    current = status_of(sid)
    assert current["tokenEstimate"] > current["tokenThreshold"] and current["compaction"] is None
    assert current["idleReason"]["code"] == "not_requested"


def test_the_reason_of_another_tenants_session_is_not_found(runtime: tuple[Runtime, RecordingQueue]) -> None:
    sid = new_session()
    append_chain(sid, *VOYAGE)
    status, body = call("GET", f"/sessions/{sid}/status", tenant="someone-else")
    assert status == 404 and body["error"]["code"] == "not_found"
    assert "idleReason" not in json.dumps(body)
    # Word for word what a session that exists nowhere answers
    _, nowhere = call("GET", "/sessions/no-such-session/status", tenant="someone-else")
    assert body["error"]["message"] == nowhere["error"]["message"].replace("no-such-session", sid)
