"""Where a message tree branches, and which leaf each branch leads to.

A viewer needs both to draw a "2 of 3" branch switcher and to re-render the path through the
chosen child; computing them from the tree's skeleton (ids and parents, no content) takes
one read whatever the history length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True, slots=True)
class Branch:
    """One child of a branching message and the latest leaf of its subtree."""

    id: str
    leaf_id: str


@dataclass(frozen=True, slots=True)
class BranchPoint:
    """A message (``None``: the roots) with more than one child, children in insertion order."""

    parent_id: str | None
    children: tuple[Branch, ...]


def branch_points(skeleton: Iterable[tuple[str, str | None]]) -> list[BranchPoint]:
    """Branch points of a tree given ``(id, parent_id)`` in insertion order.

    A child is always inserted after its parent (deletes re-attach children to an older
    ancestor), so one backward pass finds each subtree's most recently inserted leaf, which
    is the leaf the contract calls latest (D2).
    """
    rows = list(skeleton)
    order = {message_id: index for index, (message_id, _) in enumerate(rows)}
    children: dict[str | None, list[str]] = {}
    for message_id, parent_id in rows:
        key = parent_id if parent_id in order else None
        children.setdefault(key, []).append(message_id)
    latest_leaf: dict[str, str] = {}
    for message_id, _ in reversed(rows):
        kids = children.get(message_id)
        latest_leaf[message_id] = max((latest_leaf[kid] for kid in kids), key=order.__getitem__) if kids else message_id
    return [
        BranchPoint(parent_id, tuple(Branch(kid, latest_leaf[kid]) for kid in kids))
        for parent_id, kids in children.items()
        if len(kids) > 1
    ]


__all__ = ["Branch", "BranchPoint", "branch_points"]
