"""A whole session as stored, row for row: what export reads and import writes back unchanged.

Unlike the public records these keep storage-level facts (insertion ``seq``, the head's
``next_seq``, overlay ``request_key``) because a restored session must behave exactly
like the original: same latest leaf (D2), same redelivery fencing, same ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from threadloom.records import BlockVersion, Message  # noqa: TC001 - dataclass field types are read at runtime by tools


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: str
    parent_id: str | None
    seq: int
    created_at: str
    message: Message


@dataclass(frozen=True, slots=True)
class CompactionRow:
    id: str
    seq: int
    summary: str
    from_message_id: str
    to_message_id: str
    request_key: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class BlockRow:
    """A context block's content or (key ``_system_prompt_<session id>``) the frozen prompt."""

    key: str
    content: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class SharedBlockSnapshot:
    """A subject or tenant block of one namespace (the owner is not in it) and its kept versions, oldest first."""

    scope: str
    subject_id: str
    key: str
    content: str
    version: int
    updated_at: str
    versions: list[BlockVersion] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class KnowledgeEntrySnapshot:
    """One knowledge entry of a namespace (a ``search`` block's keyed entry); the owner is not in it."""

    label: str
    key: str
    content: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    id: str
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    subject_id: str | None
    legal_hold: bool
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at: str
    updated_at: str
    leaf_id: str | None
    next_seq: int
    messages: list[MessageRow] = field(default_factory=list)
    compactions: list[CompactionRow] = field(default_factory=list)
    blocks: list[BlockRow] = field(default_factory=list)
    loaded_skills: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RemovedRows:
    """What deleting one session removed from the database, by kind (ids for the receipt's digest)."""

    session_id: str
    message_ids: list[str]
    compaction_ids: list[str]
    block_keys: list[str]
    loaded_skills: list[str]
    block_versions: int = 0
    """Versions of the session's own blocks removed with them (shared blocks' versions stay, unlinked)."""


@dataclass(frozen=True, slots=True)
class RemovedSubjectBlocks:
    """What erasing a subject's shared blocks removed: their keys and how many versions."""

    block_keys: list[str]
    block_versions: int


@dataclass(frozen=True, slots=True)
class ExpiredSession:
    namespace: str
    id: str
    updated_at: str


__all__ = [
    "BlockRow",
    "CompactionRow",
    "ExpiredSession",
    "KnowledgeEntrySnapshot",
    "MessageRow",
    "RemovedRows",
    "SessionSnapshot",
    "SharedBlockSnapshot",
]
