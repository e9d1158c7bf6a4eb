"""An edit's and a deletion's check of the subject (migration 0032) holds the session row to the end.

0031 read the subject with an unlocked ``EXISTS`` one statement before the write: a deletion of the
session and its creation again for another subject could commit in between, and the write then went
to the new session with the old subject's blocks in hand. The check now reads the row ``FOR KEY SHARE``,
so while the edit's transaction is open nobody can delete the row; the activity stamp, which takes
``FOR NO KEY UPDATE``, still goes through.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pg8000.exceptions import DatabaseError
from threadloom.core.manager import SessionManager

from tests.support.postgres import admin_connection, worker_database

pytestmark = pytest.mark.postgres

EDIT = (
    "SELECT threadloom_update_message(:ns, :sid, 'm1', 'user', :content, CAST(3 AS bigint), '''edited'':1',"
    " CAST(100 AS bigint), true, :subject)"
)
DELETE = "SELECT threadloom_delete_message(:ns, :sid, 'm1', :now, CAST(100 AS bigint), true, :subject)"


def _session_of_alice(make_store: Callable[[], Any]) -> str:
    manager = SessionManager(make_store(), namespace="tenant-a").with_context("memory", scope="subject")
    session_id = manager.open_session("user-9", subject_id="alice").id
    manager.append(session_id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    return session_id


def _call(connection: Any, statement: str, session_id: str, subject: str) -> Any:
    """The edit or the deletion of m1, checked for ``subject``."""
    edited = '{"id":"m1","role":"user","parts":[{"type":"text","text":"edited"}]}'
    now = datetime(2026, 12, 5, tzinfo=UTC)
    return connection.run(statement, ns="tenant-a", sid=session_id, subject=subject, content=edited, now=now)


@pytest.mark.parametrize(("statement", "stamps"), [(EDIT, False), (DELETE, True)], ids=["edit", "deletion"])
def test_a_checked_write_keeps_the_session_from_being_deleted_until_it_ends(
    make_store: Callable[[], Any], admin: Any, request: pytest.FixtureRequest, statement: str, stamps: bool
) -> None:
    session_id = _session_of_alice(make_store)
    other = admin_connection(worker_database(request))
    try:
        admin.run("BEGIN")
        result = _call(admin, statement, session_id, "alice")
        assert result[0][0] not in ("subject", "session", "message")  # written
        other.run("SET lock_timeout = '200ms'")
        if not stamps:  # an edit stamps nothing, so another write's activity stamp is not held up
            other.run("SELECT 1 FROM threadloom_sessions WHERE id = :sid FOR NO KEY UPDATE", sid=session_id)
        # but a deletion waits for the write's transaction
        with pytest.raises(DatabaseError) as waited:
            other.run("DELETE FROM threadloom_sessions WHERE namespace = 'tenant-a' AND id = :sid", sid=session_id)
        assert waited.value.args[0]["C"] == "55P03"  # lock_not_available
        admin.run("COMMIT")
        other.run("DELETE FROM threadloom_sessions WHERE namespace = 'tenant-a' AND id = :sid", sid=session_id)
    finally:
        other.close()


@pytest.mark.parametrize("statement", [EDIT, DELETE], ids=["edit", "deletion"])
def test_a_session_of_another_subject_is_answered_subject_and_nothing_is_written(
    make_store: Callable[[], Any], admin: Any, statement: str
) -> None:
    session_id = _session_of_alice(make_store)
    result = _call(admin, statement, session_id, "bob")
    assert result == [["subject"]]
    stored = admin.run("SELECT content FROM threadloom_messages WHERE session_id = :sid", sid=session_id)
    assert len(stored) == 1 and '"hi"' in stored[0][0]
