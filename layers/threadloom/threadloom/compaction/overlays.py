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
    from collections.abc import Callable, Sequence

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


__all__ = ["apply_compactions", "compaction_message"]
