"""Frozen records returned by the public API (snake_case versions of the reference's types).

Messages themselves stay plain JSON dicts (``id, role, parts, createdAt?, metadata?``)
so they round-trip unchanged with the AI SDK's ``UIMessage``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Message = dict[str, Any]
"""A stored message: a JSON object with at least ``id`` (str), ``role`` (str) and ``parts`` (list)."""


class Omitted(enum.Enum):
    """Marks an argument the caller left out, which differs from an explicit ``None``."""

    OMITTED = "omitted"


OMITTED: Final = Omitted.OMITTED
"""Default of ``parent_id``: attach to the latest leaf (``None`` means a new root)."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: ``inserted`` is False when the id already existed (first write wins).

    ``path_tokens`` is the running token estimate of the history ending at this message
    (overlays applied) when the backend computed it with the write, else None; it lets the
    auto-compaction check and status events skip a read.
    ``token_estimate`` is the session's estimate right after the append, when the session computed
    one (it has a threshold or event listeners); None otherwise.
    """

    id: str
    parent_id: str | None
    inserted: bool
    path_tokens: int | None = field(default=None, compare=False)
    token_estimate: int | None = field(default=None, compare=False)


BlockScope = Literal["session", "subject", "tenant"]
"""The owner of a writable block's row: the session, the session's subject (end user) or the tenant."""

BLOCK_SCOPES: Final = ("session", "subject", "tenant")


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """One context block as loaded from its provider."""

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    writable: bool
    is_skill: bool
    is_searchable: bool
    scope: BlockScope = "session"
    """Who shares the block: this session only, every session of the subject, or the whole tenant."""
    version: int | None = None
    """The stored version the content is (0: never written); None for a provider without versions."""


ChangeSource = Literal["tool", "http", "import", "reflection", "operator", "library"]
"""Who made a block change: a model tool call, an HTTP API call, an import, a reflection job, an operator
(the CLI) or a program using the library directly."""


@dataclass(frozen=True, slots=True)
class BlockChange:
    """The provenance of one block change, stored with the version it makes.

    ``session_id`` and ``message_ids`` say where a change came from (a tool call in session S
    after message M; the messages a reflection read); ``request_id`` the HTTP request.
    """

    source: ChangeSource
    session_id: str | None = None
    message_ids: tuple[str, ...] = ()
    request_id: str | None = None
    note: str | None = None


DEFAULT_KEEP_VERSIONS: Final = 100
"""Versions kept per block when the profile does not say."""


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """How much history one block keeps: the last ``keep_versions``, and with ``keep_days`` only
    those younger than that many days too (both bound it). The current version is always kept."""

    keep_versions: int = DEFAULT_KEEP_VERSIONS
    keep_days: int | None = None


@dataclass(frozen=True, slots=True)
class BlockVersion:
    """One stored version of a writable block: its content, size, when and who (``change``)."""

    version: int
    content: str
    size_bytes: int
    created_at: str
    change: BlockChange


@dataclass(frozen=True, slots=True)
class SearchEntry:
    """One keyed entry of a searchable block: what the model stored with ``set_context``, and when."""

    key: str
    content: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """A memory edit a reflection proposed, as the HTTP API shows it (docs/reflection.md).

    ``status``: ``pending`` (waits for approval), ``applying``, ``applied``, ``rejected`` or
    ``failed`` (``error`` says why). ``operation`` ``append`` adds ``content`` as a line;
    ``replace`` replaces the block if it is still at ``based_on_version``.
    """

    id: str
    label: str
    operation: Literal["append", "replace"]
    content: str
    source_message_ids: tuple[str, ...]
    based_on_version: str | None
    status: Literal["pending", "applying", "applied", "rejected", "failed"]
    error: str | None
    applied_version: str | None
    created_at: str
    decided_at: str | None


@dataclass(frozen=True, slots=True)
class ReflectResult:
    """What a reflect request did: ``queued`` (a worker reflects later; its proposals appear in the
    session's list) or, run at once, the outcome and that run's proposals."""

    status: str
    leaf_id: str | None
    proposals: tuple[Proposal, ...] | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of the session registry (the reference's ``assistant_sessions`` columns)."""

    id: str
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at: str
    updated_at: str
    subject_id: str | None = None
    """Whose personal data the session holds (erasure target); the JWT ``sub`` in the HTTP app."""
    legal_hold: bool = False
    """A held session is never removed by a retention sweep."""


@dataclass(frozen=True, slots=True)
class SessionOverview:
    """What a list of sessions shows beside the registry row: the latest path's length and its last words.

    ``message_count`` is the number of stored messages from the root to the latest leaf (the leaf's
    stored depth plus one: O(1), overlays not applied); ``preview`` the start of the leaf's first
    non-empty text part, and ``preview_role`` its role. A session without messages has no overview.
    """

    session_id: str
    message_count: int
    preview_role: str
    preview: str | None


@dataclass(frozen=True, slots=True)
class StoredCompaction:
    """A compaction overlay row; overlays are applied at read time, originals are never deleted."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: str


@dataclass(frozen=True, slots=True)
class CompactResult:
    """What a compaction function returns: the inclusive range it summarized, and the summary."""

    from_message_id: str
    to_message_id: str
    summary: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A full-text hit; ``content`` is the indexed text of the message, not its JSON."""

    id: str
    role: str
    content: str
    created_at: str
    session_id: str


@dataclass(frozen=True, slots=True)
class TokenCountInput:
    """What a session token counter receives."""

    messages: list[Message]
    system_prompt: str
    context_blocks: list[ContextBlock] = field(default_factory=list)


CompactionState = Literal["queued", "running", "done", "failed", "nothing_to_summarize"]
"""Where a compaction request stands; the last three are final."""


@dataclass(frozen=True, slots=True)
class TrackedCompaction:
    """One compaction request as a client follows it (``GET /sessions/{id}/status``).

    ``from_message_id``/``to_message_id`` are the range its overlay covers once ``done``; ``error``
    says why it ``failed``. Timestamps are ISO-8601 UTC; ``started_at``/``finished_at`` stay None
    until the worker gets there.
    """

    id: str
    session_id: str
    leaf_id: str | None
    state: CompactionState
    from_message_id: str | None
    to_message_id: str | None
    error: str | None
    requested_at: str
    started_at: str | None
    finished_at: str | None


class HistoryEntry:
    """One item of a history page: a stored message or the summary standing in for an overlaid range.

    ``size`` is its bytes as compact JSON (what it adds to a response); ``last_id`` is the last
    stored message it covers (itself, or the end of the summarized range) and ``next_depth`` the
    depth where the history continues after it: together they are the keyset of the next page.
    ``text``, when storage has it, is the stored JSON of a row it checked is a well-formed message
    (valid JSON, an object with a string ``id`` and ``role`` and a ``parts`` list): ``message`` is
    then parsed from it only when asked, so a reader that sends the text on (the API's history
    page) never parses it.
    A plain slotted class, not a frozen dataclass: one is built per message of every page.
    """

    __slots__ = ("_message", "last_id", "next_depth", "size", "text")

    def __init__(
        self, message: Message | None, size: int, last_id: str, next_depth: int, text: str | None = None
    ) -> None:
        if message is None and text is None:
            raise ValueError("A history entry needs its message or its stored text")
        self._message = message
        self.size = size
        self.last_id = last_id
        self.next_depth = next_depth
        self.text = text

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = json.loads(self.text or "")
        return self._message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HistoryEntry):
            return NotImplemented
        return (self.message, self.size, self.last_id, self.next_depth) == (
            other.message,
            other.size,
            other.last_id,
            other.next_depth,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return (
            f"HistoryEntry(message={self.message!r}, size={self.size}, last_id={self.last_id!r}, "
            f"next_depth={self.next_depth})"
        )


@dataclass(frozen=True, slots=True)
class HistorySlice:
    """Consecutive items of ``get_history(leaf)`` and the length of the raw path they come from."""

    entries: list[HistoryEntry]
    path_length: int
    next_anchor: tuple[int, str] | None = None
    """(seq, id) of an ancestor the next page's walk can start from (storage.history_pages), if any."""
    total: int | None = None
    """``len(get_history(leaf))``, when the read was asked for it (``with_total``)."""
    leaf_id: str | None = None
    """The leaf read: the one asked for, or the latest (None when the session has no messages)."""


class CompactionFence:
    """What a compaction saw when it read the history: it commits only if all of it still holds.

    ``messages``: (id, digest) of each stored message the summary was made from. An edit or a
    deletion while the summary was computed (a redaction, say) would otherwise be overridden by
    a summary of the text as it was; checked in the commit's transaction, under the session's lock.
    """

    __slots__ = ("latest_compaction_id", "leaf_id", "messages")

    def __init__(
        self, leaf_id: str, latest_compaction_id: str | None, messages: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.leaf_id = leaf_id
        self.latest_compaction_id = latest_compaction_id
        self.messages = messages


__all__ = [
    "CompactionFence",
    "CompactionState",
    "HistoryEntry",
    "HistorySlice",
    "TrackedCompaction",
    "OMITTED",
    "AppendResult",
    "CompactResult",
    "ContextBlock",
    "Message",
    "Omitted",
    "Proposal",
    "ReflectResult",
    "SearchResult",
    "SessionInfo",
    "StoredCompaction",
    "TokenCountInput",
]
