"""Request and response bodies of the HTTP API (camelCase on the wire, snake_case in Python).

They are the OpenAPI contract: routers annotate their parameters and return types
with these, and Powertools validates both directions.

Over 400 lines because it is the whole OpenAPI schema: one small class per body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from threadloom.limits import HARD_LIMITS, ID_ALPHABET
from threadloom.records import (  # noqa: TC001
    BlockVersion,
    CompactionState,
    ContextBlock,
    SearchEntry,
    SearchResult,
    SessionInfo,
    SessionOverview,
    StoredCompaction,
    TrackedCompaction,
)

if TYPE_CHECKING:
    from threadloom.live.status import IdleReason

Id = Annotated[
    str,
    Field(
        min_length=1,
        max_length=HARD_LIMITS.max_id_chars,
        description=f"Characters {ID_ALPHABET}; not only dots (so that a URL path can carry it)",
    ),
]


class ApiModel(BaseModel):
    """camelCase aliases, populated by name too; unknown request fields are rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True)


class MessageIn(BaseModel):
    """A UIMessage-compatible message: ``id``, ``role``, ``parts`` plus any other fields, stored unchanged."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    id: Id
    role: Annotated[str, Field(min_length=1, max_length=64)]
    parts: list[Any]

    def as_message(self) -> dict[str, Any]:
        return self.model_dump()


# ---------------------------------------------------------------- sessions


class SessionCreate(ApiModel):
    name: Annotated[str, Field(max_length=1024)] = ""
    parent_session_id: str | None = None
    model: str | None = None
    source: str | None = None
    subject_id: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """Whose personal data the session holds (for erasure); default: the caller's JWT ``sub``."""


class SessionOpen(ApiModel):
    """Get or create the session an agent framework names with its own key (``SessionManager.open_session``)."""

    key: Annotated[str, Field(min_length=1, max_length=512)]
    name: Annotated[str, Field(max_length=1024)] | None = None
    model: str | None = None
    source: str | None = None


class SessionRename(ApiModel):
    """``PATCH /sessions/{id}``: rename, and/or set the legal hold (a held session outlives retention)."""

    name: Annotated[str, Field(max_length=1024)] | None = None
    legal_hold: bool | None = None


class SessionOut(ApiModel):
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
    legal_hold: bool = False

    @classmethod
    def of(cls, info: SessionInfo) -> SessionOut:
        return cls(
            id=info.id,
            name=info.name,
            parent_session_id=info.parent_session_id,
            model=info.model,
            source=info.source,
            input_tokens=info.input_tokens,
            output_tokens=info.output_tokens,
            estimated_cost=info.estimated_cost,
            end_reason=info.end_reason,
            created_at=info.created_at,
            updated_at=info.updated_at,
            subject_id=info.subject_id,
            legal_hold=info.legal_hold,
        )


class SessionListItem(SessionOut):
    """A session as the list shows it: the registry row, the latest path's length and its last words.

    ``message_count`` counts the stored messages from the root to the latest leaf (0 without messages);
    ``preview`` is the start (at most 160 characters) of the leaf's first non-empty text part, said by
    ``preview_role``. Both are null when the store cannot tell.
    """

    message_count: int | None = None
    preview: str | None = None
    preview_role: str | None = None

    @classmethod
    def of_overview(cls, info: SessionInfo, overview: SessionOverview | None, *, known: bool) -> SessionListItem:
        base = SessionOut.of(info).model_dump()
        if not known:
            return cls(**base)
        if overview is None:
            return cls(**base, message_count=0)
        return cls(
            **base, message_count=overview.message_count, preview=overview.preview, preview_role=overview.preview_role
        )


class SessionPage(ApiModel):
    sessions: list[SessionListItem]
    next_cursor: str | None = None


class Deleted(ApiModel):
    deleted: bool = True


# ------------------------------------------------------------- lifecycle


class ExportLink(ApiModel):
    """A large export, stored in S3: download it from ``url`` before ``expires_in`` seconds pass."""

    url: str
    expires_in: int
    bytes: int
    sessions: int


class ImportFromS3(ApiModel):
    """``POST /sessions/import`` with a JSON body: import an export file stored in the export bucket."""

    key: Annotated[str, Field(min_length=1, max_length=1024)]


class ImportOut(ApiModel):
    """``renamed``: ``{id in the file: id given}`` for each session whose id was not the tenant's own."""

    imported: list[str]
    unchanged: list[str]
    messages: int
    renamed: dict[str, str]
    shared_blocks_imported: list[str] = Field(
        default_factory=list,
        description="Subject and tenant blocks written now: 'subject/<subject id>/<label>' or 'tenant/<label>'",
    )
    shared_blocks_unchanged: list[str] = Field(
        default_factory=list, description="Subject and tenant blocks already present with the same content"
    )
    shared_block_versions: int = Field(
        default=0,
        description="Versions stored for the imported shared blocks: the file's history plus one version per block "
        "that records the import",
    )
    knowledge_entries_imported: int = Field(
        default=0, description="Knowledge entries (of the profile's search blocks) written now, with their search terms"
    )
    knowledge_entries_unchanged: int = Field(
        default=0, description="Knowledge entries already present with the same content"
    )


class SubjectErase(ApiModel):
    """``POST /subjects/erase``: the subject in the body, for an id a URL path cannot carry (``/``, ``?``, ``#``)."""

    subject_id: Annotated[str, Field(min_length=1, max_length=1024)]


class ErasureReceiptOut(ApiModel):
    """What a subject erasure removed, per kind; ``digest`` covers the removed ids without listing them."""

    namespace: str
    subject_id: str
    erased_at: str
    counts: dict[str, int]
    digest: str


# ---------------------------------------------------------------- messages


class AppendIn(ApiModel):
    """One ``message`` or a chain of ``messages``; ``parentId`` omitted = latest leaf, null = new root."""

    message: MessageIn | None = None
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=HARD_LIMITS.max_chain_messages)] | None = None
    parent_id: str | None = None
    expected_leaf_id: str | None = None


class AppendOut(ApiModel):
    """``tokenEstimate``/``tokenThreshold``: the session's estimate after the write and its compaction threshold."""

    id: str | None
    parent_id: str | None = None
    inserted: bool
    ids: list[str] | None = None
    token_estimate: int | None = None
    token_threshold: int | None = None


class MessageUpdate(ApiModel):
    """The new version of a stored message (its id must match the path)."""

    message: MessageIn


class MessageOut(ApiModel):
    message: dict[str, Any]


class MessageList(ApiModel):
    messages: list[dict[str, Any]]


class BranchPage(ApiModel):
    """One page of a message's children, oldest first; pass ``nextCursor`` back as ``cursor`` for the next."""

    messages: list[dict[str, Any]]
    next_cursor: str | None = None


class LeafOut(ApiModel):
    message: dict[str, Any] | None


class HistoryPage(ApiModel):
    messages: list[dict[str, Any]]
    leaf_id: str | None
    total: int
    next_cursor: str | None = None


class BranchOut(ApiModel):
    """A child of a branching message and the latest leaf under it (pass it as ``leafId`` to history)."""

    id: str
    leaf_id: str


class BranchPointOut(ApiModel):
    parent_id: str | None
    children: list[BranchOut]


class BranchPointList(ApiModel):
    """Every message with more than one child (``parentId: null``: several roots)."""

    branch_points: list[BranchPointOut]


class MessagesDeleted(ApiModel):
    deleted: list[str]


# ------------------------------------------------------------------ search


class SearchHit(ApiModel):
    id: str
    role: str
    content: str
    created_at: str
    session_id: str

    @classmethod
    def of(cls, hit: SearchResult) -> SearchHit:
        return cls(id=hit.id, role=hit.role, content=hit.content, created_at=hit.created_at, session_id=hit.session_id)


class SearchOut(ApiModel):
    """Hits best first. ``truncated``: more hits matched than fit in one response (its byte cap), so
    fewer than ``limit`` came back although more exist; narrow the query or lower ``limit``."""

    results: list[SearchHit]
    truncated: bool = False


# ----------------------------------------------------- fork, split, compact


class ForkIn(ApiModel):
    at_message_id: Id
    name: Annotated[str, Field(max_length=1024)] = ""


class SplitIn(ApiModel):
    summary: Annotated[str, Field(min_length=1)]
    name: str | None = None


class UsageIn(ApiModel):
    input_tokens: Annotated[int, Field(ge=0)]
    output_tokens: Annotated[int, Field(ge=0)]
    cost: Annotated[float, Field(ge=0)] = 0.0


class CompactIn(ApiModel):
    leaf_id: str | None = None


class CompactionOut(ApiModel):
    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: str

    @classmethod
    def of(cls, stored: StoredCompaction) -> CompactionOut:
        return cls(
            id=stored.id,
            summary=stored.summary,
            from_message_id=stored.from_message_id,
            to_message_id=stored.to_message_id,
            created_at=stored.created_at,
        )


class CompactionList(ApiModel):
    """One page of the overlays, oldest first; pass ``nextCursor`` back as ``cursor`` for the next."""

    compactions: list[CompactionOut]
    next_cursor: str | None = None


class OriginalsPage(ApiModel):
    """One page of the messages an overlay replaces, oldest first; ``nextCursor`` continues it."""

    messages: list[dict[str, Any]]
    next_cursor: str | None = None


class CompactOut(ApiModel):
    """What ``POST /compact`` did: ``compacted``, ``nothing_to_compact``, or ``queued``.

    ``queued`` answers 202: a worker compacts later; follow ``requestId`` at ``/sessions/{id}/status``.
    """

    status: Literal["queued", "compacted", "nothing_to_compact"]
    request_id: str | None = None
    from_message_id: str | None = None
    to_message_id: str | None = None
    summary: str | None = None


class CompactionRequestOut(ApiModel):
    """One tracked compaction request; ``fromMessageId``/``toMessageId`` is the range its overlay covers."""

    id: str
    state: CompactionState
    leaf_id: str | None
    from_message_id: str | None
    to_message_id: str | None
    error: str | None
    requested_at: str
    started_at: str | None
    finished_at: str | None

    @classmethod
    def of(cls, tracked: TrackedCompaction) -> CompactionRequestOut:
        return cls(
            id=tracked.id,
            state=tracked.state,
            leaf_id=tracked.leaf_id,
            from_message_id=tracked.from_message_id,
            to_message_id=tracked.to_message_id,
            error=tracked.error,
            requested_at=tracked.requested_at,
            started_at=tracked.started_at,
            finished_at=tracked.finished_at,
        )


class IdleReasonOut(ApiModel):
    """Why a session over its compaction threshold is ``idle``: a stable ``code`` and a sentence for people."""

    code: Literal[
        "nothing_to_summarize", "compaction_failed", "compaction_queued", "still_over_after_compaction", "not_requested"
    ]
    message: str

    @classmethod
    def of(cls, reason: IdleReason | None) -> IdleReasonOut | None:
        return None if reason is None else cls(code=reason.code, message=reason.message)


class SessionStatusOut(ApiModel):
    """The live figures of a session (as the WebSocket ``session_status`` event) and its latest compaction request.

    ``idle_reason`` is set only while the estimate exceeds the threshold and nothing is compacting.
    """

    session_id: str
    phase: Literal["idle", "compacting"]
    token_estimate: int
    token_threshold: int | None
    compaction: CompactionRequestOut | None
    idle_reason: IdleReasonOut | None = None
    stale_blocks: list[str] = Field(
        default_factory=list,
        description="Shared (subject or tenant) blocks changed since the frozen prompt was rendered; "
        "refresh the system prompt to show them",
    )


# ----------------------------------------------------------------- context


class ContextBlockOut(ApiModel):
    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    writable: bool
    is_skill: bool
    is_searchable: bool
    scope: Literal["session", "subject", "tenant"] = Field(
        default="session", description="Who shares the block: this session, its subject's sessions, or the tenant's"
    )
    version: int | None = Field(
        default=None, description="The stored version (0: never written); send it as basedOnVersion to replace"
    )

    @classmethod
    def of(cls, block: ContextBlock) -> ContextBlockOut:
        return cls(
            label=block.label,
            description=block.description,
            content=block.content,
            tokens=block.tokens,
            max_tokens=block.max_tokens,
            writable=block.writable,
            is_skill=block.is_skill,
            is_searchable=block.is_searchable,
            scope=block.scope,
            version=block.version,
        )


class ContextBlockList(ApiModel):
    blocks: list[ContextBlockOut]


class ContextWrite(ApiModel):
    """Replace the block's content, or append to it (``mode: append``).

    A replacement with ``basedOnVersion`` is refused (409 ``stale_version``, with the current
    version) when the block changed since that version; an append is merged with what is stored.
    """

    content: str
    mode: Literal["replace", "append"] = "replace"
    based_on_version: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None


class ContextRevert(ApiModel):
    """Make ``version``'s content current again (a new version); ``basedOnVersion`` as for a write."""

    version: Annotated[int, Field(ge=1, le=2**31 - 1)]
    based_on_version: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None


class BlockChangeOut(ApiModel):
    """Who made a change: ``tool`` (a model tool call in ``sessionId`` after ``messageIds``), ``http``
    (``requestId``), ``import``, ``reflection`` (``messageIds``: what it read), ``operator`` or ``library``."""

    source: Literal["tool", "http", "import", "reflection", "operator", "library"]
    session_id: str | None = None
    message_ids: list[str] = Field(default_factory=list)
    request_id: str | None = None
    note: str | None = None


class BlockVersionOut(ApiModel):
    """One stored version of a writable block."""

    label: str
    version: int
    content: str
    size_bytes: int
    created_at: str
    change: BlockChangeOut

    @classmethod
    def of(cls, label: str, version: BlockVersion) -> BlockVersionOut:
        change = version.change
        return cls(
            label=label,
            version=version.version,
            content=version.content,
            size_bytes=version.size_bytes,
            created_at=version.created_at,
            change=BlockChangeOut(
                source=change.source,
                session_id=change.session_id,
                message_ids=list(change.message_ids),
                request_id=change.request_id,
                note=change.note,
            ),
        )


class BlockHistoryPage(ApiModel):
    """Versions newest first, cut at ``limit`` or the byte budget; ``nextCursor`` continues with older ones."""

    versions: list[BlockVersionOut]
    next_cursor: str | None = None


class SearchEntryOut(ApiModel):
    """One keyed entry of a searchable block, as the model stored it with ``set_context``."""

    key: str
    content: str
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, entry: SearchEntry) -> SearchEntryOut:
        return cls(key=entry.key, content=entry.content, created_at=entry.created_at, updated_at=entry.updated_at)


class SearchEntryPage(ApiModel):
    """Entries in key order, cut at ``limit`` or the byte budget; ``nextCursor`` continues after the last."""

    entries: list[SearchEntryOut]
    next_cursor: str | None = None


class SystemPromptOut(ApiModel):
    system_prompt: str


class BlockUsage(ApiModel):
    label: str
    tokens: int
    max_tokens: int | None


class ContextWindowOut(ApiModel):
    """What the model will see and how close the session is to compacting (the token heuristic's figures).

    ``frozenPrompt`` is the stored system prompt (null until first frozen), ``freshPrompt`` a render
    of the blocks as they are now (nothing stored); ``totalTokens`` is the auto-compaction estimate:
    the prompt as the estimate sees it plus the history with overlays applied.
    """

    frozen_prompt: str | None
    fresh_prompt: str
    system_prompt_tokens: int
    blocks: list[BlockUsage]
    history_tokens: int
    history_messages: int
    total_tokens: int
    threshold: int | None
    loaded_skills: list[str]


ToolFormat = Literal["json-schema", "bedrock", "openai", "anthropic"]


class ToolsOut(ApiModel):
    format: ToolFormat
    tools: Any


class ToolCallIn(ApiModel):
    input: dict[str, Any] = Field(default_factory=dict)


class ToolCallOut(ApiModel):
    """``output`` is what the model sees; ``isError`` says whether it reports a refusal or failure."""

    output: str
    is_error: bool = False


class HealthOut(ApiModel):
    status: Literal["ok", "degraded"]
    storage: Literal["reachable", "unreachable"]


class ErrorBody(ApiModel):
    code: str
    message: str
    current_version: int | None = Field(
        default=None, description="With code stale_version: the block's version now (re-read it, then retry)"
    )


class ErrorOut(ApiModel):
    """The error envelope of every 4xx/5xx answer."""

    error: ErrorBody


class ReflectIn(ApiModel):
    """Reflect the conversation up to ``leafId`` (default: the latest leaf)."""

    leaf_id: Id | None = None


class ProposalOut(ApiModel):
    """An edit a reflection proposed to a memory block, with the messages it comes from and where it stands.

    ``status``: ``pending`` (waits for approval), ``applying`` (being written), ``applied``, ``rejected``
    or ``failed`` (the write was refused; ``error`` says why). ``operation`` ``append`` adds ``content`` as a line;
    ``replace`` replaces the block with ``content`` if it is still at ``basedOnVersion``.
    """

    id: str
    label: str
    operation: Literal["append", "replace"]
    content: str
    source_message_ids: list[str]
    based_on_version: str | None
    status: Literal["pending", "applying", "applied", "rejected", "failed"]
    error: str | None
    applied_version: str | None
    created_at: str
    decided_at: str | None


class ReflectOut(ApiModel):
    """What ``POST /reflect`` did: ``queued`` (202, a worker reflects later) or, run now, the worker's outcome."""

    status: Literal["queued", "proposed", "nothing_found", "nothing_new", "duplicate", "skipped_stale"]
    leaf_id: str | None = None
    proposals: list[ProposalOut] | None = None


class ProposalList(ApiModel):
    """One page of a session's proposals, oldest first."""

    proposals: list[ProposalOut]
    next_cursor: str | None = None


def build_all() -> int:
    """Build every model's validator now rather than on first use (``defer_build``): SnapStart's warm-up."""
    models = [
        value
        for value in globals().values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == __name__
    ]
    for model in models:
        model.model_rebuild()
    return len(models)


__all__ = [
    "build_all",
    "AppendIn",
    "AppendOut",
    "BlockChangeOut",
    "BlockHistoryPage",
    "BlockUsage",
    "BlockVersionOut",
    "BranchOut",
    "BranchPointList",
    "BranchPointOut",
    "CompactIn",
    "CompactOut",
    "CompactionList",
    "CompactionOut",
    "ContextBlockList",
    "ContextBlockOut",
    "ContextRevert",
    "ContextWindowOut",
    "ContextWrite",
    "Deleted",
    "ErrorBody",
    "ErrorOut",
    "ForkIn",
    "HealthOut",
    "HistoryPage",
    "LeafOut",
    "MessageIn",
    "MessageList",
    "MessageOut",
    "MessageUpdate",
    "MessagesDeleted",
    "ProposalList",
    "ProposalOut",
    "ReflectIn",
    "ReflectOut",
    "SearchHit",
    "SearchOut",
    "SessionCreate",
    "SessionOpen",
    "SessionOut",
    "SessionPage",
    "SessionRename",
    "ExportLink",
    "ImportFromS3",
    "ImportOut",
    "ErasureReceiptOut",
    "SplitIn",
    "SystemPromptOut",
    "ToolCallIn",
    "ToolCallOut",
    "ToolFormat",
    "ToolsOut",
    "UsageIn",
]
