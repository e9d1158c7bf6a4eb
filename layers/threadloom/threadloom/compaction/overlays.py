"""Read-time compaction overlays: stored summaries replace the ranges they cover on one branch.

Originals are never deleted; every read re-applies the overlays to the walked
path. An overlay counts only when both ends are on this path (so sibling
branches that share a ``from`` do not interfere), the latest of several with the
same ``from`` wins, and overlays starting inside a range already replaced are
ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.compaction.markers import COMPACTION_PREFIX, now_iso

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from threadloom.records import Message, StoredCompaction


def compaction_message(compaction: StoredCompaction, created_at: str) -> Message:
    """The synthetic assistant message that stands in for a compacted range."""
    return {
        "id": f"{COMPACTION_PREFIX}{compaction.id}",
        "role": "assistant",
        "parts": [{"type": "text", "text": compaction.summary}],
        "createdAt": created_at,
    }


def apply_compactions(
    messages: list[Message],
    compactions: Sequence[StoredCompaction],
    *,
    now: Callable[[], str] | None = None,
) -> list[Message]:
    """Replace each overlaid range of the root-to-leaf ``messages`` by one synthetic summary message.

    ``compactions`` must be in provider order (oldest first, insertion order on
    ties); ``now`` gives the synthetic messages' ``createdAt`` (the read time, not
    the stored time, as in the reference). Runs in O(len(messages) + len(compactions)).
    """
    if not compactions or not messages:
        return list(messages)
    positions: dict[str, int] = {}
    for index, message in enumerate(messages):
        message_id = message.get("id")
        if isinstance(message_id, str):
            positions.setdefault(message_id, index)
    by_start: dict[str, list[StoredCompaction]] = {}
    for compaction in compactions:
        if compaction.from_message_id in positions and compaction.to_message_id in positions:
            by_start.setdefault(compaction.from_message_id, []).append(compaction)
    if not by_start:
        return list(messages)

    created_at: str | None = None
    result: list[Message] = []
    i = 0
    while i < len(messages):
        message_id = messages[i].get("id")
        chosen: StoredCompaction | None = None
        if isinstance(message_id, str):
            for candidate in reversed(by_start.get(message_id, ())):
                if positions[candidate.to_message_id] >= i:
                    chosen = candidate
                    break
        if chosen is None:
            result.append(messages[i])
            i += 1
            continue
        if created_at is None:
            created_at = (now or now_iso)()
        result.append(compaction_message(chosen, created_at))
        i = positions[chosen.to_message_id] + 1
    return result


def overlay_ranges(
    positions: Mapping[str, int], compactions: Sequence[StoredCompaction]
) -> list[tuple[int, int, StoredCompaction]]:
    """The overlays :func:`apply_compactions` applies to one path, as ``(from, to, overlay)`` positions.

    ``positions`` maps ids on the path to their index (root 0); only overlay ends need to be in
    it, so a caller that copies a path in the database reads a handful of ids, not the path.
    Same rules as :func:`apply_compactions`: both ends on the path, the latest overlay of a
    ``from`` wins, and one starting inside a replaced range is ignored. Ranges come in path order.
    """
    by_start: dict[str, list[StoredCompaction]] = {}
    for compaction in compactions:
        if compaction.from_message_id in positions and compaction.to_message_id in positions:
            by_start.setdefault(compaction.from_message_id, []).append(compaction)
    ranges: list[tuple[int, int, StoredCompaction]] = []
    next_free = 0
    for start_id in sorted(by_start, key=positions.__getitem__):
        start = positions[start_id]
        if start < next_free:
            continue
        for candidate in reversed(by_start[start_id]):
            end = positions[candidate.to_message_id]
            if end >= start:
                ranges.append((start, end, candidate))
                next_free = end + 1
                break
    return ranges


__all__ = ["apply_compactions", "compaction_message", "overlay_ranges"]
