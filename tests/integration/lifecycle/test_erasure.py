"""Subject erasure: every session of the subject and everything made from it goes; nothing of it remains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadloom.lifecycle import erase_subject, sessions_of_subject

from tests.support.lifecycle import build_rich_session, manager_for, scan_database, text

NS = "tenant-a"
EMPTY_DIGEST = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def expected_counts(store: Any, session_ids: list[str]) -> dict[str, int]:
    kinds = ("sessions", "messages", "compactions", "context_blocks", "prompts", "loaded_skills")
    counts = dict.fromkeys((*kinds, "subject_blocks", "block_versions"), 0)
    for sid in session_ids:
        snapshot = store.lifecycle().read_session(NS, sid)
        counts["sessions"] += 1
        counts["messages"] += len(snapshot.messages)
        counts["compactions"] += len(snapshot.compactions)
        prompts = [block for block in snapshot.blocks if block.key == f"_system_prompt_{sid}"]
        counts["prompts"] += len(prompts)
        counts["context_blocks"] += len(snapshot.blocks) - len(prompts)
        counts["loaded_skills"] += len(snapshot.loaded_skills)
        versions = "SELECT COUNT(*) FROM threadloom_block_versions WHERE scope = 'session' AND owner_id = :sid"
        counts["block_versions"] += int(store.database.query_once(versions, {"sid": sid})[0][0])
    return counts


def test_erasing_a_subject_leaves_nothing_of_it_anywhere(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    # Given two sessions of alice, a fork, a split continuation and a child session given to someone else
    first = build_rich_session(manager, "Alice 1", subject="alice", word="kumquat")
    second = build_rich_session(manager, "Alice 2", subject="alice", word="kumquat")
    fork = manager.fork(first, f"{first}-a1", "Alice fork").id
    manager.append(fork, text(f"{fork}-x", "user", "kumquat jam recipe?"))
    split = manager.compact_and_split(second, "Summary: alice grows kumquat trees.").id
    handed_over = manager.create("Derived", parent_session_id=fork, subject_id="carol").id
    manager.append(handed_over, text(f"{handed_over}-y", "user", "kumquat follow-up"))
    # And bob's session, and alice's session in another tenant
    bob = build_rich_session(manager, "Bob", subject="bob", word="papaya")
    other_tenant = manager_for(store, "tenant-b", tmp_path / "skills")
    elsewhere = build_rich_session(other_tenant, "Alice elsewhere", subject="alice", word="durian")
    doomed = [first, second, fork, split, handed_over]
    assert sorted(sessions_of_subject(store.lifecycle(), NS, "alice")) == sorted(doomed)
    want = expected_counts(store, doomed)
    doomed_messages = [row.id for sid in doomed for row in store.lifecycle().read_session(NS, sid).messages]

    # When alice is erased in tenant-a
    receipt = erase_subject(store.lifecycle(), NS, "alice")

    # Then the receipt counts what went, and no table holds any of its ids or its text
    assert receipt.counts == want
    assert receipt.digest.startswith("sha256:") and receipt.digest != EMPTY_DIGEST
    everything = scan_database(store)
    for value in [*doomed, *doomed_messages, "kumquat"]:
        assert value not in everything, value
    # And bob and alice's other tenant are untouched
    assert "papaya" in everything and "durian" in everything
    assert manager.get(bob) is not None and len(manager.get_history(bob)) == 3
    assert other_tenant.get(elsewhere) is not None
    assert [info.id for info in manager.list()] == [bob]


def test_a_second_erasure_returns_an_empty_receipt(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, NS, tmp_path / "skills")
    build_rich_session(manager, "Alice", subject="alice")
    first = erase_subject(store.lifecycle(), NS, "alice")
    again = erase_subject(store.lifecycle(), NS, "alice")
    assert first.counts["sessions"] == 1 and not first.empty
    assert again.empty and again.digest == EMPTY_DIGEST
    assert again.erased_at >= first.erased_at


def test_the_digest_covers_exactly_the_removed_ids(store: Any, tmp_path: Path) -> None:
    import hashlib

    manager = manager_for(store, NS, tmp_path / "skills")
    sid = manager.create("Tiny", subject_id="dora").id
    manager.append(sid, text("t1", "user", "hello"))
    receipt = erase_subject(store.lifecycle(), NS, "dora")
    ids = sorted([f"session:{sid}", f"message:{sid}/t1"])
    assert receipt.digest == "sha256:" + hashlib.sha256("\n".join(ids).encode()).hexdigest()
