"""Retention: expired sessions disappear whole; held and active ones stay; interruptions never leave halves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from threadloom.lifecycle import sweep

from tests.support.lifecycle import build_rich_session, manager_for, scan_database

NS = "tenant-a"
LONG_AGO = "2020-01-01T00:00:00.000Z"


def age(store: Any, session_id: str, when: str = LONG_AGO) -> None:
    """Make a session look inactive since ``when``."""
    cast = "CAST(:when AS timestamptz)" if store.sql.name != "sqlite" else ":when"
    with store.database.write() as tx:
        tx.execute(
            f"UPDATE threadloom_sessions SET updated_at = {cast} WHERE id = :id", {"when": when, "id": session_id}
        )


def rows_of(store: Any, session_id: str) -> dict[str, int]:
    checks = {
        "sessions": "SELECT COUNT(*) FROM threadloom_sessions WHERE id = :sid",
        "heads": "SELECT COUNT(*) FROM threadloom_session_heads WHERE session_id = :sid",
        "messages": "SELECT COUNT(*) FROM threadloom_messages WHERE session_id = :sid",
        "compactions": "SELECT COUNT(*) FROM threadloom_compactions WHERE session_id = :sid",
        "blocks": "SELECT COUNT(*) FROM threadloom_context_blocks WHERE session_id = :sid",
        "skills": "SELECT COUNT(*) FROM threadloom_loaded_skills WHERE session_id = :sid",
    }
    with store.database.read() as tx:
        return {kind: int(tx.query(sql, {"sid": session_id})[0][0]) for kind, sql in checks.items()}


FULL = {"sessions": 1, "heads": 1, "messages": 6, "compactions": 1, "blocks": 2, "skills": 1}
GONE = dict.fromkeys(FULL, 0)


def test_expired_sessions_go_whole_while_held_and_active_ones_stay(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    expired = build_rich_session(manager, "Old", word="kumquat")
    held = build_rich_session(manager, "Old but held", word="papaya")
    active = build_rich_session(manager, "Recent", word="durian")
    other_tenant = build_rich_session(manager_for(store, "tenant-b", tmp_path / "skills"), "Old b", word="quince")
    for sid in (expired, held, other_tenant):
        age(store, sid)
    manager.set_legal_hold(held, True)
    assert rows_of(store, expired) == FULL
    # When the sweep runs with a 30-day limit (every namespace)
    report = sweep(store.lifecycle(), inactive_days=30)
    # Then the expired sessions are gone entirely, the held and the active one are intact
    assert sorted(item.id for item in report.expired) == sorted([expired, other_tenant])
    assert report.counts["sessions"] == 2 and report.counts["messages"] == 12 and report.complete
    assert rows_of(store, expired) == GONE and rows_of(store, other_tenant) == GONE
    assert rows_of(store, held) == FULL and rows_of(store, active) == FULL
    text = scan_database(store)
    assert "kumquat" not in text and "quince" not in text and "papaya" in text and "durian" in text


def test_dry_run_lists_without_removing(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    sid = build_rich_session(manager, "Old")
    age(store, sid)
    report = sweep(store.lifecycle(), inactive_days=30, dry_run=True)
    assert [item.id for item in report.expired] == [sid] and report.dry_run
    assert rows_of(store, sid) == FULL


def test_sweeps_run_in_bounded_batches_and_resume(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    ids = [manager.create(f"s{index}").id for index in range(7)]
    for index, sid in enumerate(ids):
        age(store, sid, f"2020-01-0{index + 1}T00:00:00.000Z")
    first = sweep(store.lifecycle(), inactive_days=30, batch_size=2, max_sessions=3)
    assert [item.id for item in first.expired] == ids[:3] and not first.complete  # oldest first
    rest = sweep(store.lifecycle(), inactive_days=30, batch_size=2)
    assert [item.id for item in rest.expired] == ids[3:] and rest.complete
    assert manager.count() == 0


def test_a_session_touched_after_listing_is_kept(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    sid = build_rich_session(manager, "Old")
    age(store, sid)
    cutoff = (datetime.now(UTC) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    listed = store.lifecycle().expired_sessions(cutoff, limit=10)
    assert [item.id for item in listed] == [sid]
    manager.rename(sid, "Used again")  # activity between the listing and the delete
    assert store.lifecycle().delete_session(NS, sid, expired_before=cutoff) is None
    assert rows_of(store, sid) == FULL


def test_an_interrupted_sweep_leaves_no_half_deleted_session(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    ids = [build_rich_session(manager, f"Old {index}") for index in range(4)]
    for index, sid in enumerate(ids):
        age(store, sid, f"2020-01-0{index + 1}T00:00:00.000Z")

    class CrashOnThird:
        kind = "crash_probe"

        def __init__(self) -> None:
            self.calls = 0

        def erase_session(self, namespace: str, session_id: str) -> int:
            self.calls += 1
            if self.calls == 3:
                # The last statement of the deleting transaction fails: everything before it must roll back.
                monkeypatch.setattr(store.sql, "delete_session", "DELETE FROM no_such_table WHERE id = :id")
            return 0

    with pytest.raises(Exception, match="no_such_table"):
        sweep(store.lifecycle(), inactive_days=30, erasers=[CrashOnThird()])
    # Then the first two are gone whole and the third and fourth are whole
    assert [rows_of(store, sid) for sid in ids] == [GONE, GONE, FULL, FULL]
    monkeypatch.undo()
    # And the next sweep finishes the job
    assert len(sweep(store.lifecycle(), inactive_days=30).expired) == 2
    assert [rows_of(store, sid) for sid in ids] == [GONE] * 4
