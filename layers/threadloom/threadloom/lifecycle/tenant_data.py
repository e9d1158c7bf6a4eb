"""What an import brings that belongs to the tenant, not to a session: shared blocks and knowledge entries.

An export reads the knowledge a page at a time (:func:`knowledge_pages`). An import writes both
into the importing namespace only (a record has no owner field), checked against the profile (a
label it does not declare is refused) and planned against what the namespace already holds, before
anything is written: the same content is left as it is, other content is a conflict. Knowledge may
not pass the tenant's quota, checked as it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from threadloom.errors import ConflictError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator, Mapping

    from threadloom.lifecycle.protocols import LifecycleStorage
    from threadloom.storage.snapshot import KnowledgeEntrySnapshot, SessionSnapshot, SharedBlockSnapshot


def shared_block_name(block: SharedBlockSnapshot) -> str:
    """How reports name a shared block: ``subject/<subject id>/<label>`` or ``tenant/<label>``."""
    return f"subject/{block.subject_id}/{block.key}" if block.scope == "subject" else f"tenant/{block.key}"


class SubjectNotAllowedError(ValidationError):
    """A file names a data subject the caller may not act for (the API: another user, without act-for-users)."""


def check_subjects(
    sessions: Iterable[SessionSnapshot], blocks: Iterable[SharedBlockSnapshot], caller: str | None
) -> None:
    """Refuse a session or a subject block of another subject than ``caller`` (none: a session without one).

    As ``POST /sessions`` refuses ``subjectId`` of another user: a session of that subject reads and
    writes the subject's shared memory, and a subject block would plant it, or tell by "unchanged"
    against "conflict" whether a guess of it is right.
    """
    for snapshot in sessions:
        if snapshot.subject_id is not None and snapshot.subject_id != caller:
            raise SubjectNotAllowedError(
                f"Session {snapshot.id!r} of the file belongs to another data subject, and acting for other users "
                "needs the act-for-users scope; nothing was imported"
            )
    for block in blocks:
        if block.scope == "subject" and block.subject_id != caller:
            raise SubjectNotAllowedError(
                f"The file carries the block {block.key!r} of another data subject, and acting for other users "
                "needs the act-for-users scope; nothing was imported"
            )


def check_shared_labels(blocks: Iterable[SharedBlockSnapshot], scopes: Mapping[str, str]) -> None:
    """Refuse a shared block the profile does not declare with that scope (nothing is imported)."""
    for block in blocks:
        if scopes.get(block.key) != block.scope:
            declared = ", ".join(f"{label} ({scope})" for label, scope in sorted(scopes.items())) or "none"
            raise ValidationError(
                f"The {block.scope} block {block.key!r} is not a {block.scope} block of this deployment's profile "
                f"(shared blocks: {declared}); nothing was imported"
            )


def check_knowledge_labels(entries: Iterable[KnowledgeEntrySnapshot], labels: Collection[str]) -> None:
    """Refuse an entry of a block the profile does not declare as searchable (nothing is imported)."""
    for entry in entries:
        if entry.label not in labels:
            declared = ", ".join(sorted(labels)) or "none"
            raise ValidationError(
                f"The knowledge entry {entry.key!r} is under {entry.label!r}, which is not a search block of this "
                f"deployment's profile (search blocks: {declared}); nothing was imported"
            )


@dataclass(slots=True)
class KnowledgePlan:
    fresh: list[KnowledgeEntrySnapshot] = field(default_factory=list)
    present: int = 0


def knowledge_pages(
    storage: LifecycleStorage, namespace: str, labels: Collection[str] | None, page_size: int
) -> Iterator[list[KnowledgeEntrySnapshot]]:
    """The namespace's entries a page at a time in (label, key) order: every label's, or those of ``labels``,
    each label read from its first key, so the entries of a label left out are never read."""
    for label in [None] if labels is None else sorted(set(labels)):
        after = ("", "") if label is None else (label, "")
        while page := storage.read_knowledge_entries(namespace, after=after, limit=page_size):
            if label is not None:
                page = [entry for entry in page if entry.label == label]
                if not page:
                    break
            yield page
            after = (page[-1].label, page[-1].key)


def plan_knowledge(storage: LifecycleStorage, namespace: str, entries: list[KnowledgeEntrySnapshot]) -> KnowledgePlan:
    """Which entries the namespace lacks (written) and which it holds with the same content (left).

    One it holds with other content is a conflict, raised before anything is written. The tenant's
    quota is checked where the entries are written, inside the import's transaction
    (``write_sessions(entry_quota=...)``), because only there does it hold against writers beside it.
    The entries' times are the file's, so a restore keeps when each was learned.
    """
    plan = KnowledgePlan()
    by_label: dict[str, list[KnowledgeEntrySnapshot]] = {}
    for entry in entries:
        by_label.setdefault(entry.label, []).append(entry)
    for label, of_label in by_label.items():
        stored = storage.read_knowledge_contents(namespace, label, [entry.key for entry in of_label])
        for entry in of_label:
            content = stored.get(entry.key)
            if content is None:
                plan.fresh.append(entry)
            elif content == entry.content:
                plan.present += 1
            else:
                raise ConflictError(
                    f"Knowledge entry {entry.key!r} of block {label!r} already exists with different content; "
                    "change or remove it first to re-import (nothing was imported)"
                )
    return plan


@dataclass(slots=True)
class SharedBlockPlan:
    fresh: list[SharedBlockSnapshot] = field(default_factory=list)
    present: list[SharedBlockSnapshot] = field(default_factory=list)


def plan_shared_blocks(storage: LifecycleStorage, namespace: str, blocks: list[SharedBlockSnapshot]) -> SharedBlockPlan:
    """Which blocks the namespace lacks (written) and which it holds with the same content (left);
    one it holds with other content is a conflict, raised before anything is written."""
    plan = SharedBlockPlan()
    stored: dict[tuple[str, str], dict[str, str]] = {}
    for block in blocks:
        owner = (block.scope, block.subject_id)
        if owner not in stored:
            current = storage.read_shared_blocks(namespace, block.scope, block.subject_id, max_versions=0)
            stored[owner] = {row.key: row.content for row in current}
        content = stored[owner].get(block.key)
        if content is None:
            plan.fresh.append(block)
        elif content == block.content:
            plan.present.append(block)
        else:
            raise ConflictError(
                f"Shared block {shared_block_name(block)!r} already exists with different content; "
                "change or erase it first to re-import (nothing was imported)"
            )
    return plan


__all__ = [
    "KnowledgePlan",
    "SharedBlockPlan",
    "check_knowledge_labels",
    "check_shared_labels",
    "plan_knowledge",
    "plan_shared_blocks",
    "shared_block_name",
]
