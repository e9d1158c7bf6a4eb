"""Export sessions to a file and import them back, into the same or another backend.

An import keeps a session's id only when the id is the importing namespace's own: held by it,
or minted for it (``core.keys``) and held by nobody. Any other id gets one minted from the
namespace and the old id, the same on every import, and the report lists those renames. So the
answer never depends on whether another tenant holds an id. An import is all-or-nothing (one
transaction for the whole file, after the whole file validated) and idempotent: a session already
present with exactly the exported content is skipped; one present with other content is a
conflict, so it never overwrites data.

An import streams: a first pass validates the file a session at a time and decides every id, a
second compares the sessions already present, a third writes the new ones, one at a time, in the
transaction; memory is one session, one capped line and the file's ids, whatever the file's size
(``bench/import_memory.py``), plus the file's shared blocks and knowledge entries, which have their
own caps (``export_format.MAX_SHARED_BLOCKS``, ``MAX_KNOWLEDGE_ENTRIES``, ``MAX_KNOWLEDGE_BYTES``).
A stream that cannot seek is first copied to a temporary file (in memory up to ``SPOOL_BYTES``).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING

from threadloom.clock import utc_now
from threadloom.errors import ConflictError, NotFoundError, ValidationError
from threadloom.lifecycle.export_format import (
    MAX_BLOCK_VERSIONS,
    MAX_KNOWLEDGE_BYTES,
    MAX_KNOWLEDGE_ENTRIES,
    PROMPT_KEY_PREFIX,
    ExportReader,
    ExportWriter,
    snapshot_records,
)
from threadloom.lifecycle.id_plan import IdPlan
from threadloom.lifecycle.tenant_data import (
    check_knowledge_labels,
    check_shared_labels,
    check_subjects,
    knowledge_pages,
    plan_knowledge,
    plan_shared_blocks,
    shared_block_name,
)
from threadloom.limits import DEFAULT_LIMITS
from threadloom.records import BlockChange, BlockVersion

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

    from threadloom.lifecycle.protocols import LifecycleStorage
    from threadloom.limits import Limits
    from threadloom.storage.snapshot import SessionSnapshot, SharedBlockSnapshot

SPOOL_BYTES = 1024 * 1024
KNOWLEDGE_PAGE = 500
"""Knowledge entries an export reads at a time."""


class LegalHoldNotAllowedError(ValidationError):
    """A file would place a new session on legal hold for a caller who may not set holds (the API: no admin scope)."""


@dataclass(frozen=True, slots=True)
class ExportReport:
    sessions: int
    messages: int
    shared_blocks: int = 0
    """Subject and tenant blocks written (only with ``include_shared_blocks``)."""
    knowledge_entries: int = 0
    """Knowledge entries written (only with ``include_knowledge``)."""


@dataclass(frozen=True, slots=True)
class ImportReport:
    """``imported``: sessions written now; ``unchanged``: already present with identical content."""

    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    messages: int = 0
    source_namespace: str | None = None
    """The namespace the file was exported from (its header), when it says."""
    renamed: dict[str, str] = field(default_factory=dict)
    """``{id in the file: id given}`` for each session whose id was not minted for the importing namespace."""
    shared_blocks_imported: list[str] = field(default_factory=list)
    """Subject and tenant blocks written now, named ``subject/<subject id>/<label>`` or ``tenant/<label>``."""
    shared_blocks_unchanged: list[str] = field(default_factory=list)
    """Shared blocks already present with the same content."""
    shared_block_versions: int = 0
    """Versions stored for ``shared_blocks_imported``: the file's history, plus one per block recording the import."""
    knowledge_entries_imported: int = 0
    """Knowledge entries written now, with their search terms."""
    knowledge_entries_unchanged: int = 0
    """Knowledge entries already present with the same content."""


def export_sessions(
    storage: LifecycleStorage,
    namespace: str,
    session_ids: Iterable[str],
    stream: IO[bytes],
    *,
    on_session: Callable[[str], None] | None = None,
    signing_key: bytes | None = None,
    include_shared_blocks: bool = False,
    include_knowledge: bool = False,
    knowledge_labels: Collection[str] | None = None,
) -> ExportReport:
    """Write the named sessions of ``namespace`` as one export; an unknown id raises ``NotFoundError``.

    An id named more than once is exported once, where it first appears (an import refuses a file
    holding a session twice).

    Each session is read from its own consistent snapshot, so a large export never holds
    one long transaction open. With ``signing_key`` the footer carries an HMAC-SHA256 of the file.
    With ``include_shared_blocks``, the subject blocks of the sessions' subjects and the tenant's
    blocks follow the sessions, each with its newest ``MAX_BLOCK_VERSIONS`` versions. With
    ``include_knowledge``, every knowledge entry of the namespace (its ``search`` blocks') follows,
    in (label, key) order; they belong to the tenant, not to a session, so they are opt-in too.
    ``knowledge_labels`` keeps those of the given labels only: the HTTP API passes its profile's
    ``search`` blocks, the labels its import takes and its routes show, so a label the profile no
    longer declares neither travels nor stops the file from importing.
    """
    writer = ExportWriter(stream, namespace=namespace, signing_key=signing_key)
    messages = 0
    subjects: dict[str, None] = {}
    for session_id in dict.fromkeys(session_ids):  # each once, in the order first named
        snapshot = storage.read_session(namespace, session_id)
        if snapshot is None:
            raise NotFoundError(f"Session {session_id!r} not found in namespace {namespace!r}")
        writer.add(snapshot)
        messages += len(snapshot.messages)
        if snapshot.subject_id:
            subjects[snapshot.subject_id] = None
        if on_session is not None:
            on_session(session_id)
    shared = 0
    if include_shared_blocks:
        owners = [("subject", subject) for subject in subjects] + [("tenant", "")]
        for scope, subject in owners:
            for block in storage.read_shared_blocks(namespace, scope, subject, max_versions=MAX_BLOCK_VERSIONS):
                writer.add_shared_block(block)
                shared += 1
    entries = knowledge_bytes = 0
    if include_knowledge:
        for page in knowledge_pages(storage, namespace, knowledge_labels, KNOWLEDGE_PAGE):
            entries += len(page)
            knowledge_bytes += sum(len(entry.content.encode("utf-8")) for entry in page)
            if entries > MAX_KNOWLEDGE_ENTRIES or knowledge_bytes > MAX_KNOWLEDGE_BYTES:
                raise ValidationError(
                    f"Namespace {namespace!r} holds more knowledge than one export file can carry (at most "
                    f"{MAX_KNOWLEDGE_ENTRIES} entries and {MAX_KNOWLEDGE_BYTES // (1024 * 1024)} MiB of them, "
                    "which an import holds in memory); export without include_knowledge"
                )
            for entry in page:
                writer.add_knowledge_entry(entry)
    writer.close()
    return ExportReport(sessions=writer.sessions, messages=messages, shared_blocks=shared, knowledge_entries=entries)


def import_sessions(
    storage: LifecycleStorage,
    namespace: str,
    stream: IO[bytes],
    *,
    limits: Limits | None = None,
    block_labels: Collection[str] | None = None,
    signing_key: bytes | None = None,
    keep_ids: bool = False,
    legal_holds: bool = True,
    shared_block_scopes: Mapping[str, str] | None = None,
    knowledge_labels: Collection[str] | None = None,
    acting_for: tuple[str | None] | None = None,
) -> ImportReport:
    """Validate the whole file, then write every new session in one transaction.

    ``block_labels``: the labels of the blocks the deployment stores per session (its profile's
    writable blocks); a block of the file must then be one of those for its own session
    (``<label>_<session id>``) or the session's prompt, else nothing is imported. With
    ``signing_key``, only files signed with it are imported (unsigned or tampered: refused).
    A session keeps its id only when it is the namespace's own; see :class:`IdPlan`.
    ``keep_ids`` is for a trusted operator moving a deployment (the CLI's ``--keep-ids``): every
    id is kept, and one held in another namespace is a conflict that says so. Never for a tenant.
    ``legal_holds=False`` (a caller who may not set holds): a new session on legal hold is refused
    (:class:`LegalHoldNotAllowedError`, nothing imported), since a hold keeps it from every retention sweep.
    The file's subject and tenant blocks are written into ``namespace`` (never the exporter's),
    for the subject the file names; ``shared_block_scopes`` (``{label: scope}`` of the profile's
    shared blocks) refuses any other label or scope. A block already present with the same
    content is unchanged, with other content a conflict; see ``tenant_data.plan_shared_blocks``.
    The file's knowledge entries are written into ``namespace`` likewise; ``knowledge_labels`` (the
    profile's ``search`` blocks) refuses any other label, and a label may not pass
    ``limits.max_entries_per_tenant``; see ``tenant_data.plan_knowledge``. ``acting_for`` (a 1-tuple:
    the caller's subject) refuses sessions and subject blocks of any other subject
    (:class:`SubjectNotAllowedError`), as the API does for a token that may not act for other users.
    """
    with _seekable(stream) as source:
        start = source.tell()
        reader = ExportReader(source, limits, signing_key=signing_key)
        plan = IdPlan(storage, namespace, keep_ids=keep_ids)
        for snapshot in reader.sessions():
            if block_labels is not None:
                check_block_keys(snapshot, block_labels)
            if acting_for is not None:
                check_subjects((snapshot,), (), acting_for[0])
            plan.add(snapshot)
        if plan.held and not legal_holds:
            raise LegalHoldNotAllowedError(
                f"Session {plan.held[0]!r} of the file is on legal hold, and placing a hold needs the admin scope; "
                "nothing was imported"
            )
        header = reader.header
        if acting_for is not None:
            check_subjects((), reader.shared_blocks, acting_for[0])
        if shared_block_scopes is not None:
            check_shared_labels(reader.shared_blocks, shared_block_scopes)
        shared = plan_shared_blocks(storage, namespace, reader.shared_blocks)
        if knowledge_labels is not None:
            check_knowledge_labels(reader.knowledge_entries, knowledge_labels)
        knowledge = plan_knowledge(storage, namespace, reader.knowledge_entries)

        def again() -> Iterator[SessionSnapshot]:
            source.seek(start)
            for snapshot in ExportReader(source, limits, signing_key=signing_key, knowledge=False).sessions():
                yield plan.renamed(snapshot)

        if plan.present:
            for snapshot in again():
                if snapshot.id in plan.present:
                    _check_unchanged(storage, namespace, snapshot, plan.renames)
        blocks: list[SharedBlockSnapshot] = []
        if plan.fresh or shared.fresh or knowledge.fresh:
            source_name = header.namespace if header is not None else None
            blocks = [_as_imported(block, plan, source_name) for block in shared.fresh]
            fresh = (snapshot for snapshot in again() if snapshot.id in plan.fresh) if plan.fresh else iter(())
            quota = (limits or DEFAULT_LIMITS).max_entries_per_tenant
            storage.write_sessions(namespace, fresh, blocks, knowledge.fresh, entry_quota=quota)
    return ImportReport(
        imported=list(plan.fresh),
        unchanged=list(plan.present),
        messages=plan.messages,
        source_namespace=header.namespace if header is not None else None,
        renamed=plan.renames,
        shared_blocks_imported=[shared_block_name(block) for block in shared.fresh],
        shared_blocks_unchanged=[shared_block_name(block) for block in shared.present],
        shared_block_versions=sum(len(block.versions) for block in blocks),
        knowledge_entries_imported=len(knowledge.fresh),
        knowledge_entries_unchanged=knowledge.present,
    )


def _as_imported(block: SharedBlockSnapshot, plan: IdPlan, source_namespace: str | None) -> SharedBlockSnapshot:
    """The block as the namespace stores it: the file's versions (their links to sessions kept only for
    sessions imported with the file, under their new ids), then one version made by this import."""
    targets = set(plan.fresh) | set(plan.present)
    versions = []
    for version in block.versions:
        session_id = version.change.session_id
        if session_id is not None:
            session_id = plan.target(session_id)
            if session_id not in targets:
                session_id = None
        change = replace(
            version.change, session_id=session_id, message_ids=version.change.message_ids if session_id else ()
        )
        versions.append(replace(version, change=change))
    now = utc_now()
    note = f"imported from an export of namespace {source_namespace}" if source_namespace else "imported from an export"
    number = block.version + 1
    change = BlockChange(source="import", note=note[:200])
    versions.append(BlockVersion(number, block.content, len(block.content.encode()), now, change))
    return replace(block, version=number, updated_at=now, versions=versions[-MAX_BLOCK_VERSIONS:])


def _check_unchanged(
    storage: LifecycleStorage, namespace: str, snapshot: SessionSnapshot, renames: dict[str, str]
) -> None:
    existing = storage.read_session(namespace, snapshot.id)
    if existing is None or _content(existing) != _content(snapshot):
        old = next((key for key, value in renames.items() if value == snapshot.id), snapshot.id)
        named = repr(old) if old == snapshot.id else f"{old!r} (imported as {snapshot.id!r})"
        raise ConflictError(
            f"Session {named} already exists with different content; delete it first to re-import "
            "(nothing was imported)"
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


__all__ = [
    "ExportReport",
    "ImportReport",
    "LegalHoldNotAllowedError",
    "check_block_keys",
    "export_sessions",
    "import_sessions",
]
