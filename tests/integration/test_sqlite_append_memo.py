"""SQLite appends that skip their read (the head the last append left) stay exact whatever else writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from threadloom import Session, SqliteStore
from threadloom.errors import ConflictError, NotFoundError
from threadloom.storage.sqlite.tree import SqliteSessionProvider
from threadloom.tokens import estimate_message_tokens

from tests.support.messages import text_message


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of appends that read the head from the database (the memo did not answer)."""
    seen: list[str] = []
    original = SqliteSessionProvider._append_read

    def counting(self: SqliteSessionProvider, tx: Any, prepared: Any, **kwargs: Any) -> Any:
        seen.append(prepared.id)
        return original(self, tx, prepared, **kwargs)

    monkeypatch.setattr(SqliteSessionProvider, "_append_read", counting)
    return seen


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "memo.db")


def ids(session: Session) -> list[str]:
    return [message["id"] for message in session.get_history()]


def test_consecutive_appends_skip_the_read_once_armed(path: str, reads: list[str]) -> None:
    session = Session.create(SqliteStore(path)).for_session("s")
    results = [session.append_message(text_message(f"m{index}")) for index in range(5)]
    # the first append reads, the second also takes the other connections' mark, then none reads
    assert reads == ["m0", "m1"]
    assert [result.parent_id for result in results] == [None, "m0", "m1", "m2", "m3"]
    assert ids(session) == [f"m{index}" for index in range(5)]
    assert results[-1].path_tokens == estimate_message_tokens(session.get_history())
    assert session.storage.get_token_estimate() == estimate_message_tokens(session.get_history())


def test_a_write_by_another_connection_is_seen(path: str, reads: list[str]) -> None:
    session = Session.create(SqliteStore(path)).for_session("s")
    for index in range(3):
        session.append_message(text_message(f"m{index}"))
    other = sqlite3.connect(path)
    other.execute("UPDATE threadloom_session_heads SET leaf_id = 'm0' WHERE session_id = 's'")
    other.commit()
    other.close()

    result = session.append_message(text_message("after"))

    assert result.parent_id == "m0"
    assert reads[-1] == "after"
    assert ids(session) == ["m0", "after"]


def test_another_store_on_the_same_file_is_seen(path: str) -> None:
    first = Session.create(SqliteStore(path)).for_session("s")
    second = Session.create(SqliteStore(path)).for_session("s")
    for index in range(3):
        first.append_message(text_message(f"a{index}"))
    second.append_message(text_message("b0"))
    first.append_message(text_message("a3"))
    assert ids(first) == ["a0", "a1", "a2", "b0", "a3"]


def test_other_writes_on_the_same_connection_are_seen(path: str) -> None:
    store = SqliteStore(path)
    session = Session.create(store).for_session("s")
    for index in range(3):
        session.append_message(text_message(f"m{index}"))
    session.delete_messages(["m2"])
    session.append_message(text_message("m3"))
    assert ids(session) == ["m0", "m1", "m3"]
    other = Session.create(store).for_session("t")
    other.append_message(text_message("t0"))
    session.append_message(text_message("m4"))
    assert ids(session) == ["m0", "m1", "m3", "m4"]


def test_duplicate_expected_leaf_and_parent_rules_hold_with_a_memo(path: str) -> None:
    session = Session.create(SqliteStore(path)).for_session("s")
    for index in range(3):
        session.append_message(text_message(f"m{index}"))

    again = session.append_message(text_message("m1", "a different text"))
    assert (again.inserted, again.parent_id) == (False, "m0")
    # a duplicate wins over a stale expected leaf, as on PostgreSQL
    assert not session.append_message(text_message("m2"), expected_leaf_id="m0").inserted
    with pytest.raises(ConflictError):
        session.append_message(text_message("m3"), expected_leaf_id="m0")
    with pytest.raises(NotFoundError):
        session.append_message(text_message("m3"), "missing")
    assert session.append_message(text_message("m3"), expected_leaf_id="m2").parent_id == "m2"
    assert session.append_message(text_message("root2"), None).parent_id is None
    assert session.append_message(text_message("m4"), "m3").parent_id == "m3"
    assert session.get_message("m1") == text_message("m1")
    assert session.storage.get_latest_leaf_id() == "m4"
    assert ids(session) == ["m0", "m1", "m2", "m3", "m4"]


def test_an_outer_transaction_rolled_back_leaves_no_memo(path: str) -> None:
    store = SqliteStore(path)
    session = Session.create(store).for_session("s")
    for index in range(3):
        session.append_message(text_message(f"m{index}"))
    database = store.database
    with pytest.raises(RuntimeError), database.write():
        session.append_message(text_message("undone"))
        raise RuntimeError
    assert session.append_message(text_message("m3")).parent_id == "m2"
    assert ids(session) == ["m0", "m1", "m2", "m3"]


def test_appending_the_end_of_an_overlay_rebuilds_its_estimate(path: str, reads: list[str]) -> None:
    store = SqliteStore(path)
    session = Session.create(store).for_session("s")
    session.append_message(text_message("m0"))
    # an overlay whose end is not stored (yet): appending that id must rebuild the estimate
    store.database.connection.execute(
        "INSERT INTO threadloom_compactions (session_id, id, seq, summary, from_message_id, to_message_id, "
        "created_at) VALUES ('s', 'c1', 1, 'summary of m0 to ghost', 'm0', 'ghost', '2024-01-01T00:00:00.000Z')"
    )
    for index in range(1, 4):
        session.append_message(text_message(f"m{index}"))
    reads.clear()

    result = session.append_message(text_message("ghost"))

    assert reads == ["ghost"]  # the memo knew it for an overlay's end and left it to the read path
    assert (result.parent_id, result.path_tokens) == ("m3", None)
    assert session.storage.get_token_estimate("ghost") == estimate_message_tokens(session.get_history("ghost"))
    after = session.append_message(text_message("m4"))
    assert after.parent_id == "ghost"
    assert after.path_tokens == estimate_message_tokens(session.get_history("m4"))
    assert [message["id"] for message in session.get_history()][-1] == "m4"


def test_a_shared_in_memory_uri_is_one_database_and_every_append_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    # Given two stores over one shared in-memory database, named by SQLite's URI form
    monkeypatch.chdir(tmp_path)
    uri = "file::memory:?cache=shared"
    first, second = SqliteStore(uri), SqliteStore(uri)
    one = Session.create(first).for_session("s")
    other = Session.create(second).for_session("s")
    # When one appends several in a row, the other one, then the first again
    for index, session in enumerate([one, one, one, other, one, one]):
        session.append_message(text_message(f"m{index}"))
    # Then they share one chain (a URI, not a file named after it), and no append trusted a remembered head,
    # which a shared cache could make stale without moving either counter
    assert ids(one) == ids(other) == [f"m{index}" for index in range(6)]
    assert reads == [f"m{index}" for index in range(6)]
    assert list(tmp_path.iterdir()) == []
