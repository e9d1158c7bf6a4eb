"""Export sessions to a file and import them back, into the same or another backend.

An import keeps every id (unlike a fork), is all-or-nothing (one transaction for the whole
file, after the whole file validated), and is idempotent: a session already present with
exactly the exported content is skipped; one present with other content is a conflict,
so an import never overwrites data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from threadloom.errors import ConflictError, NotFoundError, ValidationError
from threadloom.lifecycle.export_format import PROMPT_KEY_PREFIX, ExportWriter, read_export, snapshot_records

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable
    from typing import IO

    from threadloom.lifecycle.protocols import LifecycleStorage
    from threadloom.limits import Limits
    from threadloom.storage.snapshot import SessionSnapshot


@dataclass(frozen=True, slots=True)
class ExportReport:
    sessions: int
    messages: int


@dataclass(frozen=True, slots=True)
class ImportReport:
    """``imported``: sessions written now; ``unchanged``: already present with identical content."""

    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    messages: int = 0


def export_sessions(
    storage: LifecycleStorage,
    namespace: str,
    session_ids: Iterable[str],
    stream: IO[bytes],
    *,
    on_session: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write the named sessions of ``namespace`` as one export; an unknown id raises ``NotFoundError``.

    Each session is read from its own consistent snapshot, so a large export never holds
    one long transaction open.
    """
    writer = ExportWriter(stream, namespace=namespace)
    messages = 0
    for session_id in session_ids:
        snapshot = storage.read_session(namespace, session_id)
        if snapshot is None:
            raise NotFoundError(f"Session {session_id!r} not found in namespace {namespace!r}")
        writer.add(snapshot)
        messages += len(snapshot.messages)
        if on_session is not None:
            on_session(session_id)
    writer.close()
    return ExportReport(sessions=writer.sessions, messages=messages)


def import_sessions(
    storage: LifecycleStorage,
    namespace: str,
    stream: IO[bytes],
    *,
    limits: Limits | None = None,
    block_labels: Collection[str] | None = None,
) -> ImportReport:
    """Validate the whole file, then write every new session in one transaction.

    ``block_labels``: the labels of the blocks the deployment stores per session (its profile's
    writable blocks); a block of the file must then be one of those for its own session
    (``<label>_<session id>``) or the session's prompt, else nothing is imported.
    """
    _, snapshots = read_export(stream, limits)
    if block_labels is not None:
        for snapshot in snapshots:
            check_block_keys(snapshot, block_labels)
    fresh: list[SessionSnapshot] = []
    unchanged: list[str] = []
    for snapshot in snapshots:
        owner = storage.session_namespace(snapshot.id)
        if owner is None:
            fresh.append(snapshot)
            continue
        if owner != namespace:
            # Session ids are unique across namespaces; the answer names no namespace and no content
            raise ConflictError(f"Session {snapshot.id!r} cannot be imported: its id is taken; nothing was imported")
        existing = storage.read_session(namespace, snapshot.id)
        if existing is None or _content(existing) != _content(snapshot):
            raise ConflictError(
                f"Session {snapshot.id!r} already exists with different content; delete it first to re-import "
                "(nothing was imported)"
            )
        unchanged.append(snapshot.id)
    if fresh:
        storage.write_sessions(namespace, fresh)
    return ImportReport(
        imported=[snapshot.id for snapshot in fresh],
        unchanged=unchanged,
        messages=sum(len(snapshot.messages) for snapshot in fresh),
    )


def check_block_keys(snapshot: SessionSnapshot, block_labels: Collection[str]) -> None:
    """Refuse a block the profile would never write for this session: its key names another block or session."""
    allowed = {f"{label}_{snapshot.id}" for label in block_labels} | {f"{PROMPT_KEY_PREFIX}{snapshot.id}"}
    for block in snapshot.blocks:
        if block.key not in allowed:
            labels = ", ".join(sorted(block_labels)) or "none"
            raise ValidationError(
                f"Session {snapshot.id!r}: block key {block.key!r} is not a block this deployment stores for the "
                f"session (writable blocks: {labels}; a key is '<label>_<session id>'); nothing was imported"
            )


def _content(snapshot: SessionSnapshot) -> list[dict[str, object]]:
    return list(snapshot_records(snapshot))


__all__ = ["ExportReport", "ImportReport", "check_block_keys", "export_sessions", "import_sessions"]
