"""SessionManager lifecycle, conveniences, fork, split, usage and erasure (D10, D12)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import NotFoundError, Session, SessionManager, ValidationError

from tests.support.messages import text_message


def manager_for(store: Any, namespace: str = "default") -> SessionManager:
    return (
        SessionManager.create(store, namespace=namespace)
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_cached_prompt()
    )


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [message["id"] for message in messages]


def test_create_get_list_rename(store: Any) -> None:
    manager = manager_for(store)
    first = manager.create("First", model="m-1", source="web")
    second = manager.create("Second")
    assert manager.get(first.id) == first
    assert (first.model, first.source, first.input_tokens, first.estimated_cost) == ("m-1", "web", 0, 0.0)
    manager.append(first.id, text_message("m1"))
    assert [info.id for info in manager.list()] == [first.id, second.id]
    renamed = manager.rename(second.id, "Renamed")
    assert renamed.name == "Renamed"
    assert [info.id for info in manager.list()] == [second.id, first.id]
    assert manager.get("missing") is None
    with pytest.raises(NotFoundError):
        manager.rename("missing", "x")


def test_list_pages(store: Any) -> None:
    manager = manager_for(store)
    created = [manager.create(f"s{index}") for index in range(5)]
    pages, cursor = [], None
    while True:
        page, cursor = manager.list_page(limit=2, cursor=cursor)
        pages.append([info.id for info in page])
        if cursor is None:
            break
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [session_id for page in pages for session_id in page] == [info.id for info in reversed(created)]
    with pytest.raises(ValidationError):
        manager.list_page(limit=2, cursor="garbage")


def test_namespaces_isolate_sessions(store: Any) -> None:
    mine, theirs = manager_for(store, "a"), manager_for(store, "b")
    info = theirs.create("private")
    assert mine.get(info.id) is None
    with pytest.raises(NotFoundError):
        mine.append(info.id, text_message("m1"))
    with pytest.raises(NotFoundError):
        mine.get_history(info.id)
    assert mine.list() == []


def test_append_upsert_and_append_all(store: Any) -> None:
    manager = manager_for(store)
    info = manager.create("chat")
    assert manager.append(info.id, text_message("m1")) == "m1"
    manager.upsert(info.id, text_message("m1", "edited"))
    manager.upsert(info.id, text_message("m2"))
    # D10: omitted parent chains onto the latest leaf
    assert manager.append_all(info.id, [text_message("m3"), text_message("m4")]) == "m4"
    assert ids(manager.get_history(info.id)) == ["m1", "m2", "m3", "m4"]
    assert manager.get_history(info.id)[0] == text_message("m1", "edited")
    assert manager.append_all(info.id, [text_message("r1")], None) == "r1"
    assert ids(manager.get_history(info.id)) == ["r1"]
    assert manager.append_all(info.id, []) is None
    assert manager.get_message_count(info.id) == 1


def test_fork_copies_the_materialized_history_with_new_ids(store: Any) -> None:
    manager = manager_for(store)
    info = manager.create("original", model="m")
    manager.append_all(info.id, [text_message(f"m{index}") for index in range(5)])
    manager.add_compaction(info.id, "early summary", "m1", "m2")
    fork = manager.fork(info.id, "m3", "fork")
    assert fork.parent_session_id == info.id and fork.name == "fork"
    copied = manager.get_history(fork.id)
    assert [m["parts"] for m in copied] == [m["parts"] for m in manager.get_history(info.id, "m3")]
    assert not set(ids(copied)) & {"m0", "m1", "m2", "m3"}
    assert manager.get_compactions(fork.id) == []
    with pytest.raises(NotFoundError):
        manager.fork(info.id, "missing", "bad fork")


def test_compact_and_split(store: Any) -> None:
    manager = manager_for(store)
    info = manager.create("long chat", model="claude", source="api")
    manager.append(info.id, text_message("m1"))
    continuation = manager.compact_and_split(info.id, "What happened so far.")
    assert manager.get(info.id).end_reason == "compaction"  # type: ignore[union-attr]
    assert (continuation.name, continuation.parent_session_id) == ("long chat", info.id)
    assert (continuation.model, continuation.source) == ("claude", "api")
    [seed] = manager.get_history(continuation.id)
    assert seed["role"] == "assistant"
    assert seed["parts"] == [{"type": "text", "text": "[Context from previous session]\n\nWhat happened so far."}]


def test_usage_accumulates_and_is_validated(store: Any) -> None:
    manager = manager_for(store)
    info = manager.create("chat")
    manager.add_usage(info.id, 10, 5, 0.25)
    updated = manager.add_usage(info.id, 1, 2, 0.5)
    assert (updated.input_tokens, updated.output_tokens, updated.estimated_cost) == (11, 7, 0.75)
    with pytest.raises(ValidationError):
        manager.add_usage(info.id, -1, 0, 0)
    with pytest.raises(NotFoundError):
        manager.add_usage("missing", 1, 1, 1)


def test_delete_erases_everything_derived_from_the_session(store: Any, make_store: Callable[[], Any]) -> None:
    # D12: messages, search rows, overlays, context blocks, cached prompt and skill state
    manager = manager_for(store)
    info = manager.create("doomed")
    session = manager.get_session(info.id)
    manager.append_all(info.id, [text_message("m1", "unique zebra words"), text_message("m2")])
    manager.add_compaction(info.id, "s", "m1", "m1")
    session.replace_context_block("memory", "secret fact")
    session.freeze_system_prompt()
    assert manager.delete(info.id)
    assert not manager.delete(info.id)
    assert manager.get(info.id) is None and manager.search("zebra") == []
    raw = Session.create(make_store()).for_session(info.id).with_context("memory").with_cached_prompt()
    assert raw.get_history() == [] and raw.get_compactions() == []
    assert raw.get_context_block("memory").content == ""  # type: ignore[union-attr]
    assert "secret fact" not in raw.freeze_system_prompt()


def test_searchable_history_block(store: Any) -> None:
    manager = manager_for(store).with_searchable_history("history")
    info = manager.create("one")
    manager.append(info.id, text_message("m1", "we discussed the roadmap"))
    session = manager.get_session(info.id)
    block = session.get_context_block("history")
    assert block is not None and block.content == "1 session available for search."
    assert block.is_searchable and block.description == "Cross-session conversation history"
    found = session.tools()["search_context"].execute({"label": "history", "query": "roadmap"})
    assert found == "[user] we discussed the roadmap"


def test_open_session_creates_once_per_key_and_namespace(make_store: Callable[[], Any]) -> None:
    # Given two managers of one namespace (two processes) and one of another namespace
    first, second = manager_for(make_store()), manager_for(make_store())
    other = manager_for(make_store(), namespace="tenant-b")

    # When the same key is opened from each
    opened = first.open_session("user-42", source="openai-agents")
    again = second.open_session("user-42", name="ignored: it exists")
    elsewhere = other.open_session("user-42")

    # Then one namespace shares one session, named after the key; the other namespace has its own
    assert again == opened and opened.name == "user-42" and opened.source == "openai-agents"
    assert opened.id == first.session_id_for("user-42") != elsewhere.id
    assert first.count() == 1 and other.get(opened.id) is None
    with pytest.raises(ValidationError):
        first.open_session("")
