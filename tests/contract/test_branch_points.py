"""Branch points from the tree skeleton: the same answer on every backend, after branches and deletes."""

from __future__ import annotations

from typing import Any

from threadloom import Session
from threadloom.core.branch_points import Branch, BranchPoint, branch_points

from tests.support.messages import text_message


def test_branch_points_name_each_child_and_its_latest_leaf(store: Any) -> None:
    # Given u1 → a1 → u2, a regenerated answer a1b under u1 with its own follow-up, and a second root
    session = Session.create(store).for_session("s1")
    for message_id in ("u1", "a1", "u2"):
        session.append_message(text_message(message_id))
    session.append_message(text_message("a1b"), "u1")
    session.append_message(text_message("u2b"), "a1b")
    session.append_message(text_message("r2"), None)
    # When the skeleton is read and its branch points computed
    skeleton = session.storage.get_tree_skeleton()  # type: ignore[attr-defined]
    points = branch_points(skeleton)
    # Then u1 branches into a1 (leading to u2) and a1b (leading to u2b), and the roots branch too
    assert [row[0] for row in skeleton] == ["u1", "a1", "u2", "a1b", "u2b", "r2"]
    assert points == [
        BranchPoint(None, (Branch("u1", "u2b"), Branch("r2", "r2"))),
        BranchPoint("u1", (Branch("a1", "u2"), Branch("a1b", "u2b"))),
    ]


def test_deleting_a_branch_removes_its_branch_point(store: Any) -> None:
    session = Session.create(store).for_session("s1")
    for message_id in ("u1", "a1"):
        session.append_message(text_message(message_id))
    session.append_message(text_message("a1b"), "u1")
    session.delete_messages(["a1b"])
    assert branch_points(session.storage.get_tree_skeleton()) == []  # type: ignore[attr-defined]


def test_a_linear_conversation_has_no_branch_points() -> None:
    assert branch_points([("m1", None), ("m2", "m1"), ("m3", "m2")]) == []
    assert branch_points([]) == []


def test_an_orphaned_parent_counts_as_a_root() -> None:
    # A parent id that is not in the skeleton (never stored) makes its children roots
    points = branch_points([("x", "gone"), ("y", None)])
    assert points == [BranchPoint(None, (Branch("x", "x"), Branch("y", "y")))]
