"""An append's activity stamp stays a HOT update, and every read by activity answers as before (0033).

The stamp writes ``updated_at`` and ``activity_seq`` on the session's registry row. Before 0033 both
were indexed, so each append wrote a new row version and an entry in all five of the table's
b-trees. Now the sweeps read ``updated_minute`` (generated from ``updated_at``), and ``activity_seq``
moves only when another session is listed first. These tests pin both halves: the stamp touches no
index, and the session list, retention's sweep and the idle reflection sweep answer as before,
with ties, minute boundaries and pages.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from threadloom.core.manager import SessionManager
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message
from tests.support.postgres import plan

pytestmark = pytest.mark.postgres

NAMESPACE = "tenant"
APPEND = (
    "SELECT threadloom_append_registered_message(:ns, :sid, :id, 'user', :content, CAST(3 AS bigint), "
    "'''word'':1', true, NULL, NULL, :now, NULL, false, NULL)"
)


def _append_in_a_transaction(admin: Any, session_id: str, message_id: str) -> tuple[int, int]:
    """Append as a manager does, and answer the registry's (updates, HOT updates) of that call."""
    content = f'{{"id":"{message_id}","role":"user","parts":[{{"type":"text","text":"word"}}]}}'
    now = datetime.now(UTC)
    return _counted(admin, APPEND, ns=NAMESPACE, sid=session_id, id=message_id, content=content, now=now)


def _counted(admin: Any, statement: str, **params: Any) -> tuple[int, int]:
    """Run ``statement`` in a transaction, and answer the registry's (updates, HOT updates) it made."""
    # The view also shows counts of earlier transactions the backend has not reported yet, but none is
    # reported inside a transaction: the difference across the call is the call's own.
    counts = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'threadloom_sessions'"
    admin.run("START TRANSACTION")
    try:
        before = admin.run(counts)[0]
        admin.run(statement, **params)
        after = admin.run(counts)[0]
        admin.run("COMMIT")
    except BaseException:
        admin.run("ROLLBACK")
        raise
    return int(after[0] - before[0]), int(after[1] - before[1])


def _activity(admin: Any, session_id: str) -> int:
    return int(admin.run("SELECT activity_seq FROM threadloom_sessions WHERE id = :sid", sid=session_id)[0][0])


def _listed(manager: SessionManager) -> list[str]:
    return [info.id for info in manager.list()]


def _usage(admin: Any, session_id: str) -> tuple[int, int]:
    return _counted(
        admin,
        PostgresSql.add_usage,
        namespace=NAMESPACE,
        id=session_id,
        input_tokens=10,
        output_tokens=5,
        cost=0.01,
        now=datetime.now(UTC),
        max_tokens=10**12,
        max_cost=10.0**9,
    )


def test_appending_to_the_latest_session_stamps_it_without_touching_an_index(
    make_store: Callable[[], Any], admin: Any
) -> None:
    manager = SessionManager(make_store(), namespace=NAMESPACE)
    older, latest = manager.create("older").id, manager.create("latest").id
    seq = _activity(admin, latest)
    # When the session listed first takes appends, each stamp is a HOT update that keeps its place
    for index in range(3):
        assert _append_in_a_transaction(admin, latest, f"m{index}") == (1, 1)
    assert _activity(admin, latest) == seq and _listed(manager) == [latest, older]
    # and its updated_at is still the exact time of the latest append
    stamped = admin.run("SELECT updated_at, updated_minute FROM threadloom_sessions WHERE id = :sid", sid=latest)[0]
    assert stamped[1] == stamped[0].astimezone(UTC).replace(second=0, microsecond=0, tzinfo=None)
    # When another session takes an append, it moves first with the namespace's next value
    _append_in_a_transaction(admin, older, "o1")
    assert _activity(admin, older) == seq + 1 and _listed(manager) == [older, latest]


def test_usage_renames_and_ends_of_the_latest_session_stay_hot_too(make_store: Callable[[], Any], admin: Any) -> None:
    manager = SessionManager(make_store(), namespace=NAMESPACE)
    older, latest = manager.create("older").id, manager.create("latest").id
    seq = _activity(admin, latest)
    # Recording a turn's usage on the session listed first: HOT, in place, its totals added
    assert _usage(admin, latest) == (1, 1) and _usage(admin, latest) == (1, 1)
    info = manager.get(latest)
    assert info is not None and (info.input_tokens, info.output_tokens) == (20, 10) and _activity(admin, latest) == seq
    rename = PostgresSql.rename_session
    assert _counted(admin, rename, namespace=NAMESPACE, id=latest, name="renamed", now=datetime.now(UTC)) == (1, 1)
    # On a session listed second, it moves first, as before
    assert _usage(admin, older) == (1, 0)
    assert _activity(admin, older) == seq + 1 and _listed(manager) == [older, latest]
    manager.rename(latest, "again")
    assert _listed(manager) == [latest, older]
    end = PostgresSql.end_session
    assert _counted(admin, end, namespace=NAMESPACE, id=latest, reason="done", now=datetime.now(UTC)) == (1, 1)
    assert _listed(manager) == [latest, older]


def test_the_list_follows_the_latest_append_in_any_order_and_through_ties(
    make_store: Callable[[], Any], admin: Any
) -> None:
    manager = SessionManager(make_store(), namespace=NAMESPACE)
    ids = [manager.create(f"chat {index}").id for index in range(4)]
    recency = list(reversed(ids))
    for step, index in enumerate([0, 0, 2, 1, 1, 3, 0, 2, 2, 1]):
        manager.append(ids[index], text_message(f"m{step}"))
        recency.remove(ids[index])
        recency.insert(0, ids[index])
        assert _listed(manager) == recency, step
    # Given two sessions tied on activity_seq (two appends that raced), the list breaks the tie by id
    first, second = sorted(ids[:2], reverse=True)
    admin.run("UPDATE threadloom_sessions SET activity_seq = 1000 WHERE id IN (:a, :b)", a=first, b=second)
    assert _listed(manager)[:2] == [first, second]
    # When the one listed second takes an append, it goes first; the first one taking one stays first
    manager.append(second, text_message("after-tie"))
    assert _listed(manager)[:2] == [second, first] and _activity(admin, second) == 1001
    manager.append(second, text_message("again"))
    assert _listed(manager)[:2] == [second, first] and _activity(admin, second) == 1001
    # and pages of the list keep the same order
    page, cursor = manager.list_page(limit=3)
    rest, end = manager.list_page(limit=3, cursor=cursor)
    assert [info.id for info in page + rest] == _listed(manager) and end is None


def _set_updated_at(admin: Any, stamps: dict[str, datetime]) -> None:
    for session_id, moment in stamps.items():
        admin.run("UPDATE threadloom_sessions SET updated_at = :at WHERE id = :sid", at=moment, sid=session_id)


def test_retention_and_the_idle_sweep_answer_by_the_exact_time_at_a_minute_boundary_and_across_pages(
    make_store: Callable[[], Any], admin: Any
) -> None:
    store = make_store()
    manager = SessionManager(store, namespace=NAMESPACE)
    cutoff = datetime(2026, 12, 5, 10, 30, 30, tzinfo=UTC)
    offsets = {  # seconds from the cutoff: four in the cutoff's own minute, others around it
        "a-long-ago": -86_400,
        "b-minute-before": -45,
        "c-same-minute-early": -20,
        "d-same-minute-tie-1": -1,
        "e-same-minute-tie-2": -1,
        "f-at-cutoff": 0,
        "g-same-minute-late": 20,
        "h-next-minute": 40,
    }
    ids = {label: manager.create(label).id for label in offsets}
    stamps = {ids[label]: cutoff + timedelta(seconds=seconds) for label, seconds in offsets.items()}
    _set_updated_at(admin, stamps)
    expected = sorted((moment, session_id) for session_id, moment in stamps.items() if moment < cutoff)
    # Retention lists exactly those before the cutoff, oldest first, in pages of one
    lifecycle = store.lifecycle()
    listed, after = [], None
    while page := lifecycle.expired_sessions(cutoff.isoformat(), namespace=NAMESPACE, limit=1, after=after):
        listed.extend(page)
        after = page[-1]
    assert [item.id for item in listed] == [session_id for _, session_id in expected]
    # The idle sweep answers the sessions active in [active_after, idle_before), least recently active first
    active_after = cutoff - timedelta(seconds=30)
    idle = store.reflection_sweep().idle_sessions(
        idle_before=cutoff.isoformat(), active_after=active_after.isoformat(), limit=10
    )
    window = sorted(
        (moment, NAMESPACE, session_id) for session_id, moment in stamps.items() if active_after <= moment < cutoff
    )
    assert idle == [(namespace, session_id) for _, namespace, session_id in window]


def test_both_sweeps_read_the_minute_index_and_no_other(make_store: Callable[[], Any], admin: Any) -> None:
    manager = SessionManager(make_store(), namespace=NAMESPACE)
    for index in range(5):
        manager.create(f"chat {index}")
    now = datetime.now(UTC)
    retention = plan(
        admin,
        PostgresSql.expired_sessions,
        cutoff=now,
        namespace="",
        after_time=now - timedelta(days=400),
        after_id="",
        limit=10,
    )
    assert "threadloom_sessions_by_update_minute" in retention, retention
    idle = plan(
        admin, PostgresSql.idle_unreflected_sessions, idle_before=now, active_after=now - timedelta(days=1), limit=10
    )
    assert "threadloom_sessions_by_update_minute" in idle, idle
    indexes = admin.run("SELECT indexname FROM pg_indexes WHERE tablename = 'threadloom_sessions'")
    assert "threadloom_sessions_by_update" not in {row[0] for row in indexes}
