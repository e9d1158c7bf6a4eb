"""Subject erasure: every session of a data subject in a namespace, with what was made from them, gone.

The subject's shared blocks (``scope: subject``, their memory across sessions) go too, with
every version of them; the receipt counts them (``subject_blocks``, ``block_versions``).

The sessions are those carrying the subject id, plus, transitively, every fork and split
continuation made from them (their ``parent_session_id`` chain), whatever subject those
carry. Each is removed whole (:mod:`threadloom.lifecycle.removal`), children first so an
interrupted erasure is finished by running it again. The receipt says what went, when,
and a SHA-256 over the sorted removed ids, without repeating any content or id.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from threadloom.clock import utc_now
from threadloom.errors import ValidationError
from threadloom.lifecycle.removal import Removal, remove_session

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from threadloom.lifecycle.protocols import DerivedDataEraser, LifecycleStorage


@dataclass(frozen=True, slots=True)
class ErasureReceipt:
    namespace: str
    subject_id: str
    erased_at: str
    counts: dict[str, int]
    digest: str
    """``sha256:`` + hex SHA-256 of the sorted removed ids, one per line (the empty digest when nothing went)."""

    @property
    def empty(self) -> bool:
        return not any(self.counts.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "subjectId": self.subject_id,
            "erasedAt": self.erased_at,
            "counts": dict(self.counts),
            "digest": self.digest,
        }


def sessions_of_subject(storage: LifecycleStorage, namespace: str, subject_id: str) -> list[str]:
    """The subject's sessions and everything forked or split from them, parents before children."""
    order: list[str] = []
    seen: set[str] = set()
    queue = list(storage.subject_session_ids(namespace, subject_id))
    while queue:
        session_id = queue.pop(0)
        if session_id in seen:
            continue
        seen.add(session_id)
        order.append(session_id)
        queue.extend(storage.child_session_ids(namespace, session_id))
    return order


def digest_of(removed_ids: list[str]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(sorted(removed_ids)).encode("utf-8")).hexdigest()


def erase_subject(
    storage: LifecycleStorage,
    namespace: str,
    subject_id: str,
    *,
    erasers: Sequence[DerivedDataEraser] = (),
    on_session: Callable[[str], None] | None = None,
) -> ErasureReceipt:
    """Erase the subject's data in ``namespace``; erasing again returns an empty receipt."""
    if not isinstance(subject_id, str) or not subject_id.strip():
        raise ValidationError("A subject id must be a non-empty string")
    removal = Removal()
    for session_id in reversed(sessions_of_subject(storage, namespace, subject_id)):
        remove_session(storage, namespace, session_id, removal, erasers=erasers)
        if on_session is not None:
            on_session(session_id)
    # The subject's shared (subject-scoped) blocks and every version of them: their memory across sessions.
    blocks = storage.erase_subject_blocks(namespace, subject_id)
    removal.counts["subject_blocks"] += len(blocks.block_keys)
    removal.counts["block_versions"] += blocks.block_versions
    removal.removed_ids += [f"subject-block:{key}" for key in blocks.block_keys]
    if removal.session_ids:
        storage.purge_deleted()
    return ErasureReceipt(
        namespace=namespace,
        subject_id=subject_id,
        erased_at=utc_now(),
        counts=removal.ordered_counts(),
        digest=digest_of(removal.removed_ids),
    )


__all__ = ["ErasureReceipt", "digest_of", "erase_subject", "sessions_of_subject"]
