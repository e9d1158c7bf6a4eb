"""Export sessions to a file and import them back, into the same or another backend.

An import keeps every id (unlike a fork), is all-or-nothing (one transaction for the whole
file, after the whole file validated), and is idempotent: a session already present with
exactly the exported content is skipped; one present with other content is a conflict,
so an import never overwrites data.

An import streams: a first pass validates the file a session at a time, a second writes the
new sessions, one at a time, in the transaction; memory is one session and one capped line,
whatever the file's size (``bench/import_memory.py``). A stream that cannot seek is first
copied to a temporary file (in memory up to ``SPOOL_BYTES``).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from threadloom.errors import ConflictError, NotFoundError, ValidationError
from threadloom.lifecycle.export_format import PROMPT_KEY_PREFIX, ExportReader, ExportWriter, snapshot_records

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator

    from threadloom.lifecycle.protocols import LifecycleStorage
    from threadloom.limits import Limits
    from threadloom.storage.snapshot import SessionSnapshot

SPOOL_BYTES = 1024 * 1024


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
    source_namespace: str | None = None
    """The namespace the file was exported from (its header), when it says."""


def export_sessions(
    storage: LifecycleStorage,
    namespace: str,
    session_ids: Iterable[str],
    stream: IO[bytes],
    *,
    on_session: Callable[[str], None] | None = None,
    signing_key: bytes | None = None,
) -> ExportReport:
    """Write the named sessions of ``namespace`` as one export; an unknown id raises ``NotFoundError``.

    Each session is read from its own consistent snapshot, so a large export never holds
    one long transaction open. With ``signing_key`` the footer carries an HMAC-SHA256 of the file.
    """
    writer = ExportWriter(stream, namespace=namespace, signing_key=signing_key)
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
    signing_key: bytes | None = None,
) -> ImportReport:
    """Validate the whole file, then write every new session in one transaction.

    ``block_labels``: the labels of the blocks the deployment stores per session (its profile's
    writable blocks); a block of the file must then be one of those for its own session
    (``<label>_<session id>``) or the session's prompt, else nothing is imported. With
    ``signing_key``, only files signed with it are imported (unsigned or tampered: refused).
    """
    with _seekable(stream) as source:
        start = source.tell()
        reader = ExportReader(source, limits, signing_key=signing_key)
        fresh: list[str] = []
        unchanged: list[str] = []
        messages = 0
        for snapshot in reader.sessions():
            if block_labels is not None:
                check_block_keys(snapshot, block_labels)
            owner = storage.session_namespace(snapshot.id)
            if owner is None:
                fresh.append(snapshot.id)
                messages += len(snapshot.messages)
                continue
            if owner != namespace:
                # Session ids are unique across namespaces; the answer names no namespace and no content
                raise ConflictError(
                    f"Session {snapshot.id!r} cannot be imported: its id is taken; nothing was imported"
                )
            existing = storage.read_session(namespace, snapshot.id)
            if existing is None or _content(existing) != _content(snapshot):
                raise ConflictError(
                    f"Session {snapshot.id!r} already exists with different content; delete it first to re-import "
                    "(nothing was imported)"
                )
            unchanged.append(snapshot.id)
        header = reader.header
        if fresh:
            source.seek(start)
            wanted = set(fresh)
            again = ExportReader(source, limits, signing_key=signing_key)
            storage.write_sessions(namespace, (snapshot for snapshot in again.sessions() if snapshot.id in wanted))
    return ImportReport(
        imported=fresh,
        unchanged=unchanged,
        messages=messages,
        source_namespace=header.namespace if header is not None else None,
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


@contextmanager
def _seekable(stream: IO[bytes]) -> Iterator[IO[bytes]]:
    """The stream itself when it can seek, else a temporary copy (a pipe, a socket, an S3 body)."""
    if _can_seek(stream):
        yield stream
        return
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as copy:
        shutil.copyfileobj(stream, copy, 64 * 1024)
        copy.seek(0)
        yield copy


def _can_seek(stream: IO[bytes]) -> bool:
    try:
        return stream.seekable()
    except (AttributeError, ValueError, OSError):
        return False


def _content(snapshot: SessionSnapshot) -> list[dict[str, object]]:
    return list(snapshot_records(snapshot))


__all__ = ["ExportReport", "ImportReport", "check_block_keys", "export_sessions", "import_sessions"]
