"""The export file: versioned JSON Lines, one record per line, sealed by a checksum footer.

The layout is documented in docs/export-format.md. Writing streams (a session at a time);
reading validates everything before anything is imported: the header's format and version,
every record's shape, the same limits the HTTP API enforces, the tree's references, and the
footer's record count and SHA-256 over every preceding line, so a truncated or edited file
is refused as a whole.

Over 400 lines because writing and validating the one format stay side by side, so a change to the layout changes both.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from threadloom.clock import utc_now
from threadloom.errors import ValidationError
from threadloom.limits import DEFAULT_LIMITS, check_text
from threadloom.records import BlockChange, BlockVersion
from threadloom.storage.snapshot import (
    BlockRow,
    CompactionRow,
    KnowledgeEntrySnapshot,
    MessageRow,
    SessionSnapshot,
    SharedBlockSnapshot,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import IO

    from threadloom.limits import Limits

FORMAT_NAME: Final = "threadloom-export"
FORMAT_VERSION: Final = 1
PROMPT_KEY_PREFIX: Final = "_system_prompt_"
MAX_SHARED_BLOCKS: Final = 1000
"""The most subject and tenant blocks one file may carry (they are held in memory while importing)."""
MAX_BLOCK_VERSIONS: Final = 100
"""The most versions of one shared block a file carries (the newest; the history default keeps as many)."""
MAX_KNOWLEDGE_ENTRIES: Final = 10_000
"""The most knowledge entries one file may carry (they are held in memory while importing)."""
MAX_KNOWLEDGE_BYTES: Final = 64 * 1024 * 1024
"""The most knowledge content (UTF-8 bytes, all entries together) one file may carry, for the same reason."""
MAX_CHANGE_MESSAGE_IDS: Final = 1000
"""The most message ids one version's provenance may name."""
CHANGE_SOURCES: Final = ("tool", "http", "import", "reflection", "operator", "library")


class ExportFormatError(ValidationError):
    """The file is not a complete, valid export this version can read (nothing was imported)."""


class UnsupportedVersionError(ExportFormatError):
    """The file was written by a newer Threadloom in a format version this one cannot read."""


_T = TypeVar("_T")


def _checked(number: int, check: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run one of the API's limit checks; its refusal names the line (nothing is imported)."""
    try:
        return check(*args, **kwargs)
    except ValidationError as exc:
        raise ExportFormatError(f"Line {number}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ExportHeader:
    version: int
    exported_at: str
    namespace: str | None


# ------------------------------------------------------------------ writing


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def snapshot_records(snapshot: SessionSnapshot) -> Iterator[dict[str, Any]]:
    """The records of one session, in file order."""
    sid = snapshot.id
    yield {
        "type": "session",
        "id": sid,
        "name": snapshot.name,
        "parent_session_id": snapshot.parent_session_id,
        "model": snapshot.model,
        "source": snapshot.source,
        "subject_id": snapshot.subject_id,
        "legal_hold": snapshot.legal_hold,
        "end_reason": snapshot.end_reason,
        "created_at": snapshot.created_at,
        "updated_at": snapshot.updated_at,
        "usage": {
            "input_tokens": snapshot.input_tokens,
            "output_tokens": snapshot.output_tokens,
            "estimated_cost": snapshot.estimated_cost,
        },
        "leaf_id": snapshot.leaf_id,
        "next_seq": snapshot.next_seq,
    }
    for row in snapshot.messages:
        yield {
            "type": "message",
            "session_id": sid,
            "id": row.id,
            "parent_id": row.parent_id,
            "seq": row.seq,
            "created_at": row.created_at,
            "message": row.message,
        }
    for overlay in snapshot.compactions:
        yield {
            "type": "compaction",
            "session_id": sid,
            "id": overlay.id,
            "seq": overlay.seq,
            "summary": overlay.summary,
            "from_message_id": overlay.from_message_id,
            "to_message_id": overlay.to_message_id,
            "request_key": overlay.request_key,
            "created_at": overlay.created_at,
        }
    for block in snapshot.blocks:
        if block.key == f"{PROMPT_KEY_PREFIX}{sid}":
            yield {"type": "prompt", "session_id": sid, "content": block.content, "updated_at": block.updated_at}
        else:
            yield {
                "type": "block",
                "session_id": sid,
                "key": block.key,
                "content": block.content,
                "updated_at": block.updated_at,
            }
    if snapshot.loaded_skills:
        yield {"type": "loaded_skills", "session_id": sid, "skills": list(snapshot.loaded_skills)}


def shared_block_records(block: SharedBlockSnapshot) -> Iterator[dict[str, Any]]:
    """The records of one shared block: the block, then its versions oldest first. No namespace:
    an import always writes them into the importing one."""
    owner = {"scope": block.scope, "subject_id": block.subject_id or None, "key": block.key}
    yield {
        "type": "shared_block",
        **owner,
        "content": block.content,
        "version": block.version,
        "updated_at": block.updated_at,
    }
    for version in block.versions:
        change = version.change
        yield {
            "type": "block_version",
            **owner,
            "version": version.version,
            "created_at": version.created_at,
            "content": version.content,
            "change": {
                "source": change.source,
                "session_id": change.session_id,
                "message_ids": list(change.message_ids),
                "request_id": change.request_id,
                "note": change.note,
            },
        }


def knowledge_entry_record(entry: KnowledgeEntrySnapshot) -> dict[str, Any]:
    """One knowledge entry; no namespace: an import always writes it into the importing one."""
    return {
        "type": "knowledge_entry",
        "label": entry.label,
        "key": entry.key,
        "content": entry.content,
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
    }


class ExportWriter:
    """Writes the header, then whole sessions, then the footer that seals the file."""

    def __init__(self, stream: IO[bytes], *, namespace: str | None = None, signing_key: bytes | None = None) -> None:
        self._stream = stream
        self._digest = hashlib.sha256()
        self._signature = hmac.new(signing_key, digestmod=hashlib.sha256) if signing_key else None
        self._records = 0
        self._sessions = 0
        header = {"type": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION, "exported_at": utc_now()}
        if namespace is not None:
            header["namespace"] = namespace
        self._write(header)

    def _write(self, record: dict[str, Any]) -> None:
        line = _line(record)
        self._digest.update(line)
        if self._signature is not None:
            self._signature.update(line)
        self._records += 1
        self._stream.write(line)

    def add(self, snapshot: SessionSnapshot) -> None:
        for record in snapshot_records(snapshot):
            self._write(record)
        self._sessions += 1

    def add_shared_block(self, block: SharedBlockSnapshot) -> None:
        """A subject or tenant block and its versions; after every session."""
        for record in shared_block_records(block):
            self._write(record)

    def add_knowledge_entry(self, entry: KnowledgeEntrySnapshot) -> None:
        """A knowledge entry of a ``search`` block; after every session."""
        self._write(knowledge_entry_record(entry))

    def close(self) -> None:
        footer = {
            "type": "footer",
            "sessions": self._sessions,
            "records": self._records + 1,
            "sha256": self._digest.hexdigest(),
        }
        if self._signature is not None:
            footer["hmac_sha256"] = self._signature.hexdigest()
        self._stream.write(_line(footer))

    @property
    def sessions(self) -> int:
        return self._sessions


def write_export(
    snapshots: Iterable[SessionSnapshot],
    stream: IO[bytes],
    *,
    namespace: str | None = None,
    signing_key: bytes | None = None,
) -> int:
    """Write a complete export (signed with ``signing_key`` when given); returns the number of sessions written."""
    writer = ExportWriter(stream, namespace=namespace, signing_key=signing_key)
    for snapshot in snapshots:
        writer.add(snapshot)
    writer.close()
    return writer.sessions


# ------------------------------------------------------------------ reading


ESCAPE_FACTOR: Final = 6
"""The most JSON escaping can grow text: a control character is written ``\\u00XX``."""
RECORD_OVERHEAD: Final = 64 * 1024
"""Room for a record's other fields (ids, timestamps, names) beside its one large value."""
PROMPT_LINE_START: Final = b'{"type":"prompt"'
KNOWLEDGE_LINE_START: Final = b'{"type":"knowledge_entry",'
SIGNING_KEY_VARIABLE: Final = "THREADLOOM_EXPORT_SIGNING_KEY"
TIMESTAMP_PATTERN: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", re.ASCII)
TIMESTAMP_SKEW: Final = timedelta(days=1)
"""How far past this host's clock an imported timestamp may be (clocks differ); later is refused."""


def max_line_bytes(limits: Limits) -> int:
    """The longest line a message, block, summary or skills record can take under ``limits``."""
    largest = max(limits.max_message_bytes, limits.max_block_bytes, limits.max_summary_bytes, limits.max_entry_bytes)
    return ESCAPE_FACTOR * largest + RECORD_OVERHEAD


def max_prompt_line_bytes(limits: Limits) -> int:
    """The longest line a frozen prompt record can take (a rendering of every block, up to a response)."""
    return ESCAPE_FACTOR * limits.max_response_bytes + RECORD_OVERHEAD


def signing_key_from_environment() -> bytes | None:
    """The deployment's export signing secret (``THREADLOOM_EXPORT_SIGNING_KEY``), or ``None`` when signing is off."""
    value = os.environ.get(SIGNING_KEY_VARIABLE, "")
    return value.encode("utf-8") if value else None


def _lines(stream: IO[bytes], limits: Limits) -> Iterator[tuple[int, bytes]]:
    """The file's lines, numbered; a line longer than any valid record is refused before it is all read."""
    cap = max_line_bytes(limits)
    prompt_cap = max_prompt_line_bytes(limits)
    number = 0
    while True:
        raw = stream.readline(cap + 1)
        if not raw:
            return
        number += 1
        limit: int | None = None
        if len(raw) > cap and not raw.endswith(b"\n"):
            limit = cap
            if raw.startswith(PROMPT_LINE_START):
                limit = prompt_cap
                whole = _rest_of_line(stream, raw, prompt_cap)
                if whole is not None:
                    raw, limit = whole, None
        if limit is not None:
            raise ExportFormatError(
                f"Line {number} is longer than {limit} bytes, more than any record can take under these limits "
                "(nothing was imported)"
            )
        yield number, raw


def _rest_of_line(stream: IO[bytes], start: bytes, cap: int) -> bytes | None:
    """``start`` and the rest of its line, read in pieces into one buffer; ``None`` past ``cap`` bytes.

    A refused line then costs its cap once, not twice (a concatenation copies).
    """
    buffer = bytearray(start)
    while len(buffer) <= cap and not buffer.endswith(b"\n"):
        piece = stream.readline(min(1024 * 1024, cap + 1 - len(buffer)))
        if not piece:
            break
        buffer += piece
    if len(buffer) > cap and not buffer.endswith(b"\n"):
        return None
    return bytes(buffer)


def read_export(
    stream: IO[bytes], limits: Limits | None = None, *, signing_key: bytes | None = None
) -> tuple[ExportHeader, list[SessionSnapshot]]:
    """Parse and validate a whole export against the API's ``limits``; raises :class:`ExportFormatError`.

    Holds every session in memory: :class:`ExportReader` streams them one at a time instead.
    """
    reader = ExportReader(stream, limits, signing_key=signing_key)
    sessions = list(reader.sessions())
    assert reader.header is not None  # a file without one is refused
    return reader.header, sessions


class ExportReader:
    """Streams an export's sessions one at a time, validating as it goes; the footer is checked last.

    Memory is one line (capped by :func:`max_line_bytes`) and one session. A session is yielded
    before the footer is read, so a caller that writes must do it in a transaction the final
    check can roll back (``import_sessions`` validates the whole file in a first pass anyway).
    With ``signing_key``, the footer must carry a matching ``hmac_sha256``: an unsigned or
    tampered file is refused. ``knowledge=False`` (a pass after one that validated the file):
    knowledge entry lines as this module writes them are counted and hashed, not parsed.
    """

    def __init__(
        self,
        stream: IO[bytes],
        limits: Limits | None = None,
        *,
        signing_key: bytes | None = None,
        knowledge: bool = True,
    ) -> None:
        self._stream = stream
        self._knowledge = knowledge
        self._limits = limits or DEFAULT_LIMITS
        self._signing_key = signing_key
        self.header: ExportHeader | None = None
        self.shared_blocks: list[SharedBlockSnapshot] = []
        """The file's subject and tenant blocks, complete once ``sessions()`` is exhausted."""
        self.knowledge_entries: list[KnowledgeEntrySnapshot] = []
        """The file's knowledge entries, complete once ``sessions()`` is exhausted."""
        self._knowledge_keys: set[tuple[str, str]] = set()
        self._knowledge_bytes = 0

    def sessions(self) -> Iterator[SessionSnapshot]:
        checks = self._limits
        digest = hashlib.sha256()
        signature = hmac.new(self._signing_key, digestmod=hashlib.sha256) if self._signing_key else None
        builder: _SessionBuilder | None = None
        sessions = 0
        seen_ids: set[str] = set()
        records = 0
        footer: dict[str, Any] | None = None
        for number, raw in _lines(self._stream, checks):
            if footer is not None:
                raise ExportFormatError(f"Line {number}: data after the footer")
            record, kind = self._record(raw, number)
            if self.header is None:
                self.header = _header(record, number)
            elif kind == "footer":
                footer = record
                _check_footer(
                    footer,
                    number,
                    records=records,
                    sessions=sessions + (builder is not None),
                    sha=digest.hexdigest(),
                    signature=signature.hexdigest() if signature is not None else None,
                )
                continue
            elif kind in ("session", "shared_block", "block_version", "knowledge_entry"):
                if builder is not None:  # a session ends where the next one, the shared blocks or knowledge start
                    yield builder.finish()
                    sessions += 1
                    builder = None
                if kind == "session":
                    builder = self._start_session(record, number, seen_ids)
                else:
                    self._add_tenant_record(kind, record, number)
            elif kind in ("message", "compaction", "block", "prompt", "loaded_skills"):
                if builder is None or record.get("session_id") != builder.id:
                    raise ExportFormatError(f"Line {number}: a {kind} record must follow its session's record")
                builder.add(kind, record, number)
            else:
                raise ExportFormatError(f"Line {number}: unknown record type {kind!r}")
            digest.update(raw)
            if signature is not None:
                signature.update(raw)
            records += 1
        if self.header is None:
            raise ExportFormatError("The file is empty; an export starts with a header line")
        if footer is None:
            raise ExportFormatError("The file is truncated: the footer line is missing (nothing was imported)")
        if builder is not None:
            yield builder.finish()

    def _add_tenant_record(self, kind: str, record: dict[str, Any], number: int) -> None:
        """A shared block, one of its versions, or a knowledge entry: what belongs to the tenant."""
        if kind != "knowledge_entry":
            self._add_shared(kind, record, number)
        elif self._knowledge:
            self._add_knowledge(record, number)

    def _record(self, raw: bytes, number: int) -> tuple[dict[str, Any], Any]:
        """The line's record and its type."""
        if not self._knowledge and self.header is not None and raw.startswith(KNOWLEDGE_LINE_START):
            # A pass that wants the sessions only (an import's second one): the line is counted and
            # hashed, not parsed; the first pass validated it, and the checksum still covers it.
            return {}, "knowledge_entry"
        record = _parse_line(raw, number)
        kind = record.get("type")
        if kind != "knowledge_entry" and raw.startswith(KNOWLEDGE_LINE_START):
            # JSON keeps the last of two "type" keys: the pass above would skip a line this one took for another record
            raise ExportFormatError(f"Line {number}: the record names its type twice")
        return record, kind

    def _start_session(self, record: dict[str, Any], number: int, seen_ids: set[str]) -> _SessionBuilder:
        if self.shared_blocks or self.knowledge_entries:
            raise ExportFormatError(f"Line {number}: sessions must come before the shared blocks and knowledge entries")
        builder = _SessionBuilder(record, number, self._limits)
        if builder.id in seen_ids:
            raise ExportFormatError(f"Line {number}: session {builder.id!r} appears twice")
        seen_ids.add(builder.id)
        return builder

    def _add_knowledge(self, record: dict[str, Any], number: int) -> None:
        limits = self._limits
        label = _checked(number, limits.check_label, record.get("label"), "block label")
        key = _text(record, "key", number, max_chars=limits.max_id_chars)
        if not label or not key:
            raise ExportFormatError(f"Line {number}: a knowledge entry's block label and key are not empty")
        content = _checked(
            number,
            limits.check_content,
            record.get("content"),
            f"content of entry {key!r} of block {label!r}",
            limits.max_entry_bytes,
        )
        if len(self.knowledge_entries) >= MAX_KNOWLEDGE_ENTRIES:
            raise ExportFormatError(f"Line {number}: more than {MAX_KNOWLEDGE_ENTRIES} knowledge entries in one file")
        self._knowledge_bytes += len(content.encode("utf-8"))
        if self._knowledge_bytes > MAX_KNOWLEDGE_BYTES:
            raise ExportFormatError(
                f"Line {number}: more than {MAX_KNOWLEDGE_BYTES // (1024 * 1024)} MiB of knowledge entries in one file"
            )
        if (label, key) in self._knowledge_keys:
            raise ExportFormatError(f"Line {number}: the entry {key!r} of block {label!r} appears twice")
        created_at = _timestamp(record, "created_at", number)
        updated_at = _timestamp(record, "updated_at", number)
        self._knowledge_keys.add((label, key))
        self.knowledge_entries.append(KnowledgeEntrySnapshot(label, key, content, created_at, updated_at))

    def _add_shared(self, kind: str, record: dict[str, Any], number: int) -> None:
        limits = self._limits
        scope = record.get("scope")
        if scope not in ("subject", "tenant"):
            raise ExportFormatError(f"Line {number}: a shared block's scope is 'subject' or 'tenant', not {scope!r}")
        subject = _text(record, "subject_id", number, max_chars=limits.max_name_chars, optional=True) or ""
        if (scope == "subject") != bool(subject):
            raise ExportFormatError(f"Line {number}: a subject block needs a subject_id, a tenant block none")
        key = _checked(number, limits.check_label, record.get("key"), "block label")
        content = _checked(
            number, limits.check_content, record.get("content"), f"content of block {key!r}", limits.max_block_bytes
        )
        version = _count(record, "version", number)
        if kind == "shared_block":  # version 0: a block stored before history (migration 0021), no versions
            if len(self.shared_blocks) >= MAX_SHARED_BLOCKS:
                raise ExportFormatError(f"Line {number}: more than {MAX_SHARED_BLOCKS} shared blocks in one file")
            if any((b.scope, b.subject_id, b.key) == (scope, subject, key) for b in self.shared_blocks):
                raise ExportFormatError(f"Line {number}: the {scope} block {key!r} appears twice")
            updated_at = _timestamp(record, "updated_at", number)
            self.shared_blocks.append(SharedBlockSnapshot(scope, subject, key, content, version, updated_at))
            return
        block = self.shared_blocks[-1] if self.shared_blocks else None
        if block is None or (block.scope, block.subject_id, block.key) != (scope, subject, key):
            raise ExportFormatError(f"Line {number}: a block_version record must follow its shared_block record")
        if len(block.versions) >= MAX_BLOCK_VERSIONS:
            raise ExportFormatError(f"Line {number}: more than {MAX_BLOCK_VERSIONS} versions of block {key!r}")
        if not 1 <= version <= block.version or (block.versions and version <= block.versions[-1].version):
            raise ExportFormatError(
                f"Line {number}: versions of block {key!r} must rise and not pass its version {block.version}"
            )
        created_at = _timestamp(record, "created_at", number)
        block.versions.append(
            BlockVersion(version, content, len(content.encode()), created_at, _change(record, number, limits))
        )


def _change(record: dict[str, Any], number: int, limits: Limits) -> BlockChange:
    """A version's provenance, as the file says (the import adds its own version on top)."""
    change = _field(record, "change", number, dict)
    source = change.get("source")
    if source not in CHANGE_SOURCES:
        raise ExportFormatError(f"Line {number}: change source {source!r} is not one of {', '.join(CHANGE_SOURCES)}")
    message_ids = _field(change, "message_ids", number, list)
    if len(message_ids) > MAX_CHANGE_MESSAGE_IDS:
        raise ExportFormatError(f"Line {number}: a change names more than {MAX_CHANGE_MESSAGE_IDS} message ids")
    for message_id in message_ids:
        _checked(number, check_text, message_id, "message id", max_chars=limits.max_id_chars)
    return BlockChange(
        source=source,
        session_id=_checked(number, limits.check_optional_id, change.get("session_id"), "session id"),
        message_ids=tuple(message_ids),
        request_id=_text(change, "request_id", number, max_chars=limits.max_name_chars, optional=True),
        note=_text(change, "note", number, max_chars=limits.max_name_chars, optional=True),
    )


def _parse_line(raw: bytes, number: int) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportFormatError(f"Line {number} is not UTF-8: {exc}") from exc
    if not text.endswith("\n"):
        raise ExportFormatError(f"Line {number} is cut short (no line end): the file is truncated")
    try:
        record = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise ExportFormatError(f"Line {number} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ExportFormatError(f"Line {number} nests JSON arrays or objects too deeply") from exc
    if not isinstance(record, dict):
        raise ExportFormatError(f"Line {number} must be a JSON object")
    _check_text_rules(record, number)
    return record


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_text_rules(value: Any, number: int) -> None:
    """No NUL characters and no lone surrogates: what PostgreSQL and UTF-8 refuse, refused on every backend."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ExportFormatError(f"Line {number} contains a NUL character")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ExportFormatError(f"Line {number} contains a lone surrogate") from exc
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _header(record: dict[str, Any], number: int) -> ExportHeader:
    if record.get("type") != "header" or record.get("format") != FORMAT_NAME:
        raise ExportFormatError(f"Line {number}: not a Threadloom export (the first line must be its header)")
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ExportFormatError(f"Line {number}: the header's version must be a positive integer")
    if version > FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"This export uses format version {version}, newer than this Threadloom reads "
            f"(version {FORMAT_VERSION}); upgrade Threadloom to import it"
        )
    namespace = record.get("namespace")
    return ExportHeader(version, str(record.get("exported_at", "")), namespace if isinstance(namespace, str) else None)


def _check_footer(
    footer: dict[str, Any], number: int, *, records: int, sessions: int, sha: str, signature: str | None
) -> None:
    if footer.get("records") != records + 1 or footer.get("sessions") != sessions:
        raise ExportFormatError(
            f"Line {number}: the footer counts {footer.get('records')} records and {footer.get('sessions')} sessions "
            f"but the file holds {records + 1} and {sessions}: records are missing or were added"
        )
    if footer.get("sha256") != sha:
        raise ExportFormatError(
            f"Line {number}: checksum mismatch: the file was modified after export (nothing was imported)"
        )
    if signature is None:
        return
    signed = footer.get("hmac_sha256")
    if not isinstance(signed, str):
        raise ExportFormatError(
            f"Line {number}: the file is not signed, and this deployment imports only signed exports "
            "(nothing was imported)"
        )
    if not hmac.compare_digest(signed, signature):
        raise ExportFormatError(
            f"Line {number}: signature mismatch: the file was modified after export or signed with another key "
            "(nothing was imported)"
        )


# ------------------------------------------------------------- validation


def _field(
    record: dict[str, Any], name: str, number: int, kind: type | tuple[type, ...], *, optional: bool = False
) -> Any:
    value = record.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) and kind is not bool:
        value = object()  # a bool is never a number here
    if not isinstance(value, kind):
        raise ExportFormatError(f"Line {number}: field {name!r} is missing or has the wrong type")
    return value


def _text(record: dict[str, Any], name: str, number: int, *, max_chars: int, optional: bool = False) -> Any:
    value = _field(record, name, number, str, optional=optional)
    if value is not None:
        _checked(number, check_text, value, name.replace("_", " "), max_chars=max_chars)
    return value


def _timestamp(record: dict[str, Any], name: str, number: int) -> str:
    """A timestamp as Threadloom writes them (``2026-01-31T12:00:00.000Z``), a real instant, not in the future.

    Retention compares these, so ``9999-…`` (never expires) or ``zzzz`` (sorts after every date on
    SQLite) would keep a session forever.
    """
    value: str = _field(record, name, number, str)
    if not TIMESTAMP_PATTERN.fullmatch(value):
        raise ExportFormatError(
            f"Line {number}: {name} {value[:40]!r} is not a UTC timestamp like 2026-01-31T12:00:00.000Z"
        )
    try:  # the pattern fixed the shape; this checks the date is real (C code: strptime took 14 µs a value)
        instant = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ExportFormatError(f"Line {number}: {name} {value!r} is not a real date and time") from exc
    if instant > datetime.now(UTC) + TIMESTAMP_SKEW:
        raise ExportFormatError(f"Line {number}: {name} {value!r} is in the future")
    return value


def _count(record: dict[str, Any], name: str, number: int) -> int:
    value = _field(record, name, number, int)
    if value < 0 or value > 2**62:
        raise ExportFormatError(f"Line {number}: field {name!r} is out of range")
    return int(value)


class _SessionBuilder:
    """Collects one session's records and checks them with the API's limits and the tree's rules."""

    def __init__(self, record: dict[str, Any], number: int, limits: Limits) -> None:
        self._limits = limits
        self.id: str = _checked(number, limits.check_id, record.get("id"), "session id")
        usage = _field(record, "usage", number, dict)
        input_tokens, output_tokens = usage.get("input_tokens"), usage.get("output_tokens")
        cost = usage.get("estimated_cost")
        _checked(number, limits.check_usage, input_tokens, output_tokens, cost)
        names = limits.max_name_chars
        self._fields: dict[str, Any] = {
            "id": self.id,
            "name": _checked(number, limits.check_name, record.get("name"), "session name"),
            "parent_session_id": _checked(
                number, limits.check_optional_id, record.get("parent_session_id"), "parent session id"
            ),
            "model": _text(record, "model", number, max_chars=names, optional=True),
            "source": _text(record, "source", number, max_chars=names, optional=True),
            "subject_id": _text(record, "subject_id", number, max_chars=names, optional=True),
            "legal_hold": _field(record, "legal_hold", number, bool),
            "end_reason": _text(record, "end_reason", number, max_chars=names, optional=True),
            "created_at": _timestamp(record, "created_at", number),
            "updated_at": _timestamp(record, "updated_at", number),
            "input_tokens": int(input_tokens),
            "output_tokens": int(output_tokens),
            "estimated_cost": float(cost),
            "leaf_id": _checked(number, limits.check_optional_id, record.get("leaf_id"), "leaf id"),
            "next_seq": _count(record, "next_seq", number),
        }
        self._line = number
        self._messages: list[MessageRow] = []
        self._message_ids: set[str] = set()
        self._seqs: set[int] = set()
        self._compactions: list[CompactionRow] = []
        self._request_keys: set[str] = set()
        self._blocks: list[BlockRow] = []
        self._skills: list[str] | None = None

    def _seq(self, record: dict[str, Any], number: int) -> int:
        seq = _count(record, "seq", number)
        if seq < 1 or seq >= self._fields["next_seq"] or seq in self._seqs:
            raise ExportFormatError(f"Line {number}: seq {seq} is not unique and below the session's next_seq")
        self._seqs.add(seq)
        return seq

    def add(self, kind: str, record: dict[str, Any], number: int) -> None:
        limits = self._limits
        if kind == "message":
            self._add_message(record, number)
        elif kind == "compaction":
            self._add_compaction(record, number)
        elif kind in ("block", "prompt"):
            if kind == "prompt":
                key = f"{PROMPT_KEY_PREFIX}{self.id}"
                ceiling = limits.max_response_bytes  # a rendering of every block, so larger than one block
            else:
                key = _text(record, "key", number, max_chars=limits.max_label_chars + limits.max_id_chars + 1)
                ceiling = limits.max_block_bytes
            if not key.endswith(f"_{self.id}") or any(block.key == key for block in self._blocks):
                raise ExportFormatError(f"Line {number}: block key {key!r} does not belong to session {self.id!r}")
            content = _checked(number, limits.check_content, record.get("content"), f"{kind} content", ceiling)
            self._blocks.append(BlockRow(key, content, _timestamp(record, "updated_at", number)))
        else:
            skills = _field(record, "skills", number, list)
            if (
                self._skills is not None
                or not all(isinstance(skill, str) and skill for skill in skills)
                or len(set(skills)) != len(skills)
            ):
                raise ExportFormatError(
                    f"Line {number}: loaded_skills must appear once and list distinct non-empty strings"
                )
            for skill in skills:
                _checked(
                    number, check_text, skill, "skill id", max_chars=limits.max_label_chars + limits.max_name_chars + 1
                )
            self._skills = list(skills)

    def _add_compaction(self, record: dict[str, Any], number: int) -> None:
        """An overlay whose id and request key are the session's only ones: the store keys rows by both."""
        limits = self._limits
        compaction_id = _checked(number, limits.check_id, record.get("id"), "compaction id")
        if any(row.id == compaction_id for row in self._compactions):
            raise ExportFormatError(f"Line {number}: compaction {compaction_id!r} appears twice in session {self.id!r}")
        request_key = _text(record, "request_key", number, max_chars=limits.max_name_chars, optional=True)
        if request_key is not None and request_key in self._request_keys:
            raise ExportFormatError(
                f"Line {number}: request_key {request_key!r} appears on two compactions of session {self.id!r}"
            )
        self._compactions.append(
            CompactionRow(
                id=compaction_id,
                seq=self._seq(record, number),
                summary=_checked(
                    number, limits.check_content, record.get("summary"), "summary", limits.max_summary_bytes
                ),
                from_message_id=self._known(record, "from_message_id", number),
                to_message_id=self._known(record, "to_message_id", number),
                request_key=request_key,
                created_at=_timestamp(record, "created_at", number),
            )
        )
        if request_key is not None:
            self._request_keys.add(request_key)

    def _known(self, record: dict[str, Any], name: str, number: int) -> str:
        value: str = _text(record, name, number, max_chars=self._limits.max_id_chars)
        if value not in self._message_ids:
            raise ExportFormatError(f"Line {number}: {name} {value!r} is not a message of session {self.id!r}")
        return value

    def _add_message(self, record: dict[str, Any], number: int) -> None:
        message_id = _text(record, "id", number, max_chars=self._limits.max_id_chars)
        message = _checked(number, self._limits.check_message, _field(record, "message", number, dict))
        if message.get("id") != message_id:
            raise ExportFormatError(f"Line {number}: the message's id differs from the record's id {message_id!r}")
        if message_id in self._message_ids:
            raise ExportFormatError(f"Line {number}: message {message_id!r} appears twice in session {self.id!r}")
        seq = self._seq(record, number)
        parent_id = _text(record, "parent_id", number, max_chars=self._limits.max_id_chars, optional=True)
        if parent_id is not None and parent_id not in self._message_ids:
            raise ExportFormatError(f"Line {number}: parent {parent_id!r} of message {message_id!r} is not before it")
        if self._messages and seq <= self._messages[-1].seq:
            raise ExportFormatError(f"Line {number}: messages must be in insertion (seq) order")
        self._message_ids.add(message_id)
        created_at = _timestamp(record, "created_at", number)
        self._messages.append(MessageRow(message_id, parent_id, seq, created_at, message))

    def finish(self) -> SessionSnapshot:
        leaf = self._fields["leaf_id"]
        if (leaf is None) != (not self._messages) or (leaf is not None and leaf not in self._message_ids):
            raise ExportFormatError(f"Line {self._line}: leaf_id {leaf!r} is not a message of session {self.id!r}")
        return SessionSnapshot(
            **self._fields,
            messages=self._messages,
            compactions=self._compactions,
            blocks=self._blocks,
            loaded_skills=self._skills or [],
        )


__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ExportFormatError",
    "ExportHeader",
    "ExportReader",
    "ExportWriter",
    "MAX_KNOWLEDGE_BYTES",
    "MAX_KNOWLEDGE_ENTRIES",
    "knowledge_entry_record",
    "max_line_bytes",
    "max_prompt_line_bytes",
    "signing_key_from_environment",
    "UnsupportedVersionError",
    "read_export",
    "shared_block_records",
    "snapshot_records",
    "write_export",
]
