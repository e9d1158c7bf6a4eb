"""Removing one session whole: what is derived from it outside the database first, then its rows.

That order makes a retry complete: if the process dies between the two steps, the
session's rows are still there, so the next sweep or erasure finds it and finishes.
The rows go in one transaction (``LifecycleStorage.delete_session``), never half.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from threadloom.lifecycle.export_format import PROMPT_KEY_PREFIX

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.lifecycle.protocols import DerivedDataEraser, LifecycleStorage

KINDS = (
    "sessions",
    "messages",
    "compactions",
    "context_blocks",
    "prompts",
    "loaded_skills",
    "subject_blocks",
    "block_versions",
)
"""The database kinds a removal counts, in receipt order; erasers add their own kinds after these."""


@dataclass(slots=True)
class Removal:
    """What removals took away: counts per kind and every removed id (for a receipt's digest)."""

    counts: Counter[str] = field(default_factory=Counter)
    removed_ids: list[str] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)

    def ordered_counts(self) -> dict[str, int]:
        kinds = [*KINDS, *sorted(kind for kind in self.counts if kind not in KINDS)]
        return {kind: int(self.counts.get(kind, 0)) for kind in kinds}


def remove_session(
    storage: LifecycleStorage,
    namespace: str,
    session_id: str,
    removal: Removal,
    *,
    erasers: Sequence[DerivedDataEraser] = (),
    expired_before: str | None = None,
) -> bool:
    """Remove the session and everything derived from it; False when it was absent (or no longer expired)."""
    derived = {eraser.kind: eraser.erase_session(namespace, session_id) for eraser in erasers}
    rows = storage.delete_session(namespace, session_id, expired_before=expired_before)
    for kind, count in derived.items():
        removal.counts[kind] += count
    if rows is None:
        return False
    prompt_key = f"{PROMPT_KEY_PREFIX}{session_id}"
    prompts = [key for key in rows.block_keys if key == prompt_key]
    removal.counts["sessions"] += 1
    removal.counts["messages"] += len(rows.message_ids)
    removal.counts["compactions"] += len(rows.compaction_ids)
    removal.counts["context_blocks"] += len(rows.block_keys) - len(prompts)
    removal.counts["prompts"] += len(prompts)
    removal.counts["loaded_skills"] += len(rows.loaded_skills)
    removal.counts["block_versions"] += rows.block_versions
    removal.session_ids.append(session_id)
    removal.removed_ids.append(f"session:{session_id}")
    removal.removed_ids += [f"message:{session_id}/{item}" for item in rows.message_ids]
    removal.removed_ids += [f"compaction:{session_id}/{item}" for item in rows.compaction_ids]
    removal.removed_ids += [f"block:{item}" for item in rows.block_keys]
    removal.removed_ids += [f"skill:{session_id}/{item}" for item in rows.loaded_skills]
    return True


__all__ = ["KINDS", "Removal", "remove_session"]
