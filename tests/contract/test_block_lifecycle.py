"""Shared blocks through the data lifecycle, on every backend (issue 26 item 6).

Subject erasure removes the subject's blocks and every version of them (the receipt counts
them) and nothing of another subject's or of the tenant's; a session removed by deletion,
retention or erasure takes its own blocks' versions with it, never a shared block another
session still reads, and the versions it made of shared blocks lose their link to it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from threadloom.core.manager import SessionManager
from threadloom.lifecycle import erase_subject
from threadloom.lifecycle.retention import sweep

if TYPE_CHECKING:
    from collections.abc import Callable


def _manager(store: Any) -> SessionManager:
    return (
        SessionManager(store, namespace="tenant-a")
        .with_context("memory", scope="subject")
        .with_context("house", scope="tenant")
        .with_context("notes")
    )


def _count(store: Any, table: str) -> int:
    return int(store.database.query_once(f"SELECT COUNT(*) FROM {table}", {})[0][0])


def test_erasing_a_subject_removes_their_blocks_and_every_version(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = _manager(store)
    alice = manager.get_session(manager.create_session("a", subject_id="alice").id)
    bob = manager.get_session(manager.create_session("b", subject_id="bob").id)
    for fact in ("Name: Alice", "Likes tea", "Lives in Lyon"):
        alice.append_context_block("memory", fact)
    alice.replace_context_block("notes", "alice's session note")
    alice.replace_context_block("house", "written in alice's session")
    bob.replace_context_block("memory", "Name: Bob")
    receipt = erase_subject(store.lifecycle(), "tenant-a", "alice")
    counts = receipt.counts
    assert (counts["sessions"], counts["subject_blocks"], counts["block_versions"]) == (1, 1, 4)  # 3 memory + 1 notes
    # Bob's memory and the tenant's block stay; the tenant block's version no longer names alice's session
    survivor = _manager(make_store()).get_session(bob.session_id)
    assert survivor.get_context_block("memory").content == "Name: Bob"  # type: ignore[union-attr]
    assert survivor.get_context_block("house").content == "written in alice's session"  # type: ignore[union-attr]
    [house] = survivor.context_history("house")[0]
    assert house.change.session_id is None and house.change.message_ids == ()
    remaining = store.database.query_once("SELECT owner_id FROM threadloom_block_versions ORDER BY owner_id", {})
    assert [row[0] for row in remaining] == ["", "bob"]
    # erasing again finds nothing
    assert erase_subject(store.lifecycle(), "tenant-a", "alice").empty


def test_a_deleted_or_swept_session_never_takes_a_shared_block_with_it(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = _manager(store)
    one = manager.create_session("one", subject_id="alice")
    two = manager.create_session("two", subject_id="alice")
    manager.get_session(one.id).replace_context_block("memory", "Name: Alice")
    manager.get_session(one.id).replace_context_block("notes", "one's own")
    assert manager.delete(one.id)
    assert _count(store, "threadloom_shared_blocks") == 1
    assert manager.get_session(two.id).read_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    versions = store.database.query_once("SELECT scope, owner_id FROM threadloom_block_versions", {})
    assert [tuple(row) for row in versions] == [("subject", "alice")]  # one's own notes went with it
    # a retention sweep removes inactive sessions whole, and still no shared block
    manager.get_session(two.id).replace_context_block("notes", "two's own")
    later = datetime.now(UTC) + timedelta(days=400)
    report = sweep(store.lifecycle(), inactive_days=30, now=later)
    assert report.counts["sessions"] == 1 and report.counts["block_versions"] == 1
    assert _count(store, "threadloom_shared_blocks") == 1
    newcomer = manager.get_session(manager.create_session("three", subject_id="alice").id)
    assert newcomer.get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]


def test_retention_sweeps_an_inactive_session_and_leaves_the_live_ones_shared_blocks_whole(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    manager = _manager(store)
    old = manager.create_session("old", subject_id="alice")
    live = manager.create_session("live", subject_id="alice")
    # Given the old conversation taught the user's memory and the house rules, and the live one added to them
    manager.get_session(old.id).replace_context_block("memory", "Name: Alice")
    manager.get_session(old.id).replace_context_block("house", "Answer in English")
    manager.get_session(live.id).append_context_block("memory", "Likes: lemons")
    before = [(row[0], row[1]) for row in store.database.query_once(_VERSIONS, {})]
    long_ago = (datetime.now(UTC) - timedelta(days=90)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    with store.database.write() as tx:
        tx.execute("UPDATE threadloom_sessions SET updated_at = :at WHERE id = :sid", {"at": long_ago, "sid": old.id})
    # When retention sweeps sessions inactive for 30 days
    report = sweep(store.lifecycle(), inactive_days=30)
    # Then only the old session goes; the live session still reads both shared blocks, with every version
    assert [expired.id for expired in report.expired] == [old.id] and report.counts["sessions"] == 1
    session = manager.get_session(live.id)
    assert session.read_context_block("memory").content == "Name: Alice\nLikes: lemons"  # type: ignore[union-attr]
    assert session.read_context_block("house").content == "Answer in English"  # type: ignore[union-attr]
    assert _count(store, "threadloom_shared_blocks") == 2
    assert [(row[0], row[1]) for row in store.database.query_once(_VERSIONS, {})] == before
    # and the versions the old session made no longer name it
    linked = store.database.query_once(
        "SELECT COUNT(*) FROM threadloom_block_versions WHERE session_id = :sid", {"sid": old.id}
    )
    assert int(linked[0][0]) == 0


_VERSIONS = "SELECT scope, version FROM threadloom_block_versions ORDER BY scope, version"
