"""Session events reach a publisher with the session id and changes; a publisher can never fail a write."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from threadloom import SessionManager, SqliteStore
from threadloom.compaction import create_compact_function
from threadloom.compaction.summarizers.offline import ExtractiveSummarizer
from threadloom.live import PUBLISH_BUDGET_SECONDS, LiveEvent, attach_publisher, current_status, subscribe_reply
from threadloom.live.hub import LocalHub

from tests.support.messages import text_message


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, LiveEvent]] = []

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        self.events.append((namespace, session_id, event))


class Exploding:
    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        raise ConnectionError("endpoint unreachable")


class Slow:
    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        time.sleep(PUBLISH_BUDGET_SECONDS + 0.05)


def manager_with(publisher: Any, threshold: int | None = None) -> SessionManager:
    manager = SessionManager.create(SqliteStore(), namespace="tenant-a")
    manager.on_compaction(create_compact_function(ExtractiveSummarizer(), protect_head=1, tail_token_budget=20))
    if threshold is not None:
        manager.compact_after(threshold)
    return attach_publisher(manager, publisher)


def test_writes_publish_status_and_change_with_session_id_and_no_content() -> None:
    recorder = Recorder()
    manager = manager_with(recorder, threshold=100_000)
    sid = manager.create("chat").id
    manager.append(sid, text_message("m1", "a secret sentence"))
    manager.get_session(sid).update_message(text_message("m1", "another secret"))
    manager.delete_messages(sid, ["m1"])
    manager.clear_messages(sid)
    assert all(namespace == "tenant-a" and session_id == sid for namespace, session_id, _ in recorder.events)
    kinds = [(event["type"], event.get("change")) for _, _, event in recorder.events]
    assert kinds == [
        ("session_status", None),
        ("session_changed", "append"),
        ("session_status", None),
        ("session_changed", "update"),
        ("session_status", None),
        ("session_changed", "delete"),
        ("session_status", None),
        ("session_changed", "clear"),
    ]
    first = recorder.events[0][2]
    assert first["type"] == "session_status" and first["tokenThreshold"] == 100_000 and first["tokenEstimate"] > 0
    assert recorder.events[1][2] == {"type": "session_changed", "sessionId": sid, "change": "append", "leafId": "m1"}
    assert "secret" not in repr(recorder.events)


def test_compaction_publishes_compacting_then_idle_with_compacted_then_change() -> None:
    recorder = Recorder()
    manager = manager_with(recorder)
    sid = manager.create("chat").id
    for index in range(8):
        manager.append(sid, text_message(f"m{index}", "words " * 30))
    recorder.events.clear()
    manager.get_session(sid).compact()
    events = [event for _, _, event in recorder.events]
    assert [event["type"] for event in events] == ["session_status", "session_status", "session_changed"]
    compacting, idle, changed = events
    assert compacting["type"] == "session_status" and compacting["phase"] == "compacting"
    assert idle["type"] == "session_status" and idle["phase"] == "idle"
    assert idle.get("compacted") == {"tokensBefore": compacting["tokenEstimate"]}
    assert idle["tokenEstimate"] < compacting["tokenEstimate"]
    assert changed["type"] == "session_changed" and changed["change"] == "compaction"


def test_failing_summarizer_publishes_session_error() -> None:
    recorder = Recorder()

    def broken(_text: str) -> str:
        raise RuntimeError("model down")

    manager = SessionManager.create(SqliteStore(), namespace="t")
    manager.on_compaction(create_compact_function(broken, protect_head=1, tail_token_budget=20)).compact_after(0)
    attach_publisher(manager, recorder)
    sid = manager.create("chat").id
    for index in range(6):
        manager.append(sid, text_message(f"m{index}", "words " * 30))
    errors = [event for _, _, event in recorder.events if event["type"] == "session_error"]
    assert errors and errors[0] == {"type": "session_error", "sessionId": sid, "error": errors[0]["error"]}
    assert "model down" in errors[0]["error"]


def test_fork_and_context_writes_are_announced() -> None:
    recorder = Recorder()
    manager = manager_with(recorder).with_context("memory", description="facts", max_tokens=500)
    sid = manager.create("chat").id
    manager.append(sid, text_message("m1"))
    recorder.events.clear()
    manager.get_session(sid).replace_context_block("memory", "likes tea")
    manager.fork(sid, "m1", "copy")
    changes = [(session_id, event.get("change")) for _, session_id, event in recorder.events]
    assert (sid, "context") in changes and (sid, "fork") in changes


def test_a_failing_or_slow_publisher_never_fails_a_write(caplog: pytest.LogCaptureFixture) -> None:
    for publisher in (Exploding(), Slow()):
        manager = manager_with(publisher)
        sid = manager.create("chat").id
        with caplog.at_level(logging.WARNING, logger="threadloom.live.publisher"):
            manager.append(sid, text_message("m1"))
        assert manager.get_session(sid).get_message("m1") is not None
    assert any("failed" in record.message for record in caplog.records)
    assert any("budget" in record.message for record in caplog.records)


def test_current_status_and_subscribe_reply() -> None:
    manager = manager_with(Recorder(), threshold=5000)
    sid = manager.create("chat").id
    manager.append(sid, text_message("m1", "hello"))
    status = current_status(manager, sid)
    assert (status.phase, status.token_threshold) == ("idle", 5000)
    assert status.token_estimate == manager.get_session(sid).estimate_tokens() > 0
    assert subscribe_reply(manager, sid) == {"type": "subscribed", "sessionId": sid, "status": status.to_json()}
    other_tenant = SessionManager.create(manager.store, namespace="tenant-b")
    assert subscribe_reply(other_tenant, sid) == {"type": "error", "error": f"Session {sid!r} not found"}


class Inbox:
    def __init__(self, open_: bool = True) -> None:
        self.texts: list[str] = []
        self.open = open_

    def send(self, text: str) -> bool:
        if self.open:
            self.texts.append(text)
        return self.open


def test_hub_delivers_per_namespace_and_forgets_gone_connections() -> None:
    hub = LocalHub(max_subscriptions_per_connection=2)
    alive, gone, other = Inbox(), Inbox(open_=False), Inbox()
    assert hub.subscribe(alive, "a", "s1") and hub.subscribe(gone, "a", "s1") and hub.subscribe(other, "b", "s1")
    hub.publish("a", "s1", {"type": "error", "error": "x"})
    assert alive.texts == ['{"type":"error","error":"x"}'] and other.texts == []
    assert hub.subscriber_count("a", "s1") == 1  # the gone one was forgotten
    assert hub.subscribe(alive, "a", "s2") and not hub.subscribe(alive, "a", "s3")
    hub.unsubscribe(alive, "a", "s1")
    hub.publish("a", "s1", {"type": "error", "error": "y"})
    assert len(alive.texts) == 1
    hub.drop(alive)
    assert hub.subscriber_count("a", "s2") == 0
