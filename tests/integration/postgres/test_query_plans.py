"""The queries use the indexes that keep one session's cost independent of every other session.

Tables in a test are tiny, so the planner would happily scan them; sequential scans are
disabled for the EXPLAIN to show which index each query is able to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import Session, SessionManager
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres


def plan(admin: Any, sql: str, **params: Any) -> str:
    admin.run("START TRANSACTION")
    try:
        admin.run("SET LOCAL enable_seqscan = off")  # test connection only, never sent by Threadloom
        rows = admin.run("EXPLAIN " + sql, **params)
    finally:
        admin.run("ROLLBACK")
    return "\n".join(row[0] for row in rows)


@pytest.fixture
def populated(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = SessionManager.create(store, namespace="tenant")
    for index in range(3):
        info = manager.create(f"chat {index}")
        manager.append_all(info.id, [text_message(f"{info.id}-{i}", f"budget line {i}") for i in range(20)])
    Session.create(store).for_session("s").append_messages([text_message(f"m{i}") for i in range(20)])


def test_session_search_reads_only_that_session(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.search_session, sid="s", match="'budget'", limit=20)
    assert "Seq Scan" not in text
    assert "session_id = 's'" in text


def test_a_rare_term_in_a_big_session_is_found_through_the_composite_gin_index(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a big session where one message in thousands holds the term
    messages = [text_message(f"m{i}", f"ordinary chatter {i}") for i in range(3_000)]
    messages[1_234] = text_message("m1234", "the needle")
    Session.create(make_store()).for_session("big").append_messages(messages)
    admin.run("ANALYZE threadloom_messages")
    # Then the planner intersects the session's and the term's posting lists in one GIN index
    text = plan(admin, PostgresSql.search_session, sid="big", match="'needl'", limit=20)
    assert "threadloom_messages_search" in text
    assert "session_id = 'big'" in text and "search_vector @@" in text


def test_namespace_search_probes_one_session_at_a_time(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.search_namespace, namespace="tenant", match="'budget'", limit=20)
    assert "Nested Loop" in text
    # Any index that leads with the namespace (or the primary key) keeps other tenants' rows unread.
    namespace_indexes = ("by_activity", "by_subject", "by_parent", "pkey")
    assert any(f"threadloom_sessions_{name}" in text for name in namespace_indexes), text
    assert "threadloom_messages_search" in text


def test_history_walks_the_primary_key(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.history, sid="s", leaf=None)
    assert "threadloom_messages_pkey" in text
    assert "Seq Scan on threadloom_messages" not in text


def test_the_latest_leaf_rescan_uses_the_per_session_indexes(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.find_latest_leaf, sid="s")
    assert "threadloom_messages_by_seq" in text and "threadloom_messages_by_parent" in text
