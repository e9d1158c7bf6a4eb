"""JSON bodies of the HTTP API (camelCase) → the library's records, so client and library return the same types."""

from __future__ import annotations

from typing import Any

from threadloom.records import (
    BlockChange,
    BlockVersion,
    ContextBlock,
    Proposal,
    ReflectResult,
    SearchEntry,
    SearchResult,
    SessionInfo,
    StoredCompaction,
)


def session_info(body: dict[str, Any]) -> SessionInfo:
    return SessionInfo(
        id=body["id"],
        name=body["name"],
        parent_session_id=body.get("parentSessionId"),
        model=body.get("model"),
        source=body.get("source"),
        input_tokens=int(body.get("inputTokens", 0)),
        output_tokens=int(body.get("outputTokens", 0)),
        estimated_cost=float(body.get("estimatedCost", 0.0)),
        end_reason=body.get("endReason"),
        created_at=body["createdAt"],
        updated_at=body["updatedAt"],
        subject_id=body.get("subjectId"),
        legal_hold=bool(body.get("legalHold", False)),
    )


def search_result(body: dict[str, Any]) -> SearchResult:
    return SearchResult(
        id=body["id"],
        role=body["role"],
        content=body["content"],
        created_at=body["createdAt"],
        session_id=body["sessionId"],
    )


def stored_compaction(body: dict[str, Any]) -> StoredCompaction:
    return StoredCompaction(
        id=body["id"],
        summary=body["summary"],
        from_message_id=body["fromMessageId"],
        to_message_id=body["toMessageId"],
        created_at=body["createdAt"],
    )


def context_block(body: dict[str, Any]) -> ContextBlock:
    return ContextBlock(
        label=body["label"],
        description=body.get("description"),
        content=body["content"],
        tokens=int(body["tokens"]),
        max_tokens=body.get("maxTokens"),
        writable=bool(body["writable"]),
        is_skill=bool(body["isSkill"]),
        is_searchable=bool(body["isSearchable"]),
        scope=body.get("scope", "session"),
        version=body.get("version"),
    )


def search_entry(body: dict[str, Any]) -> SearchEntry:
    return SearchEntry(
        key=body["key"], content=body["content"], created_at=body["createdAt"], updated_at=body["updatedAt"]
    )


def block_version(body: dict[str, Any]) -> BlockVersion:
    change = body["change"]
    return BlockVersion(
        version=int(body["version"]),
        content=body["content"],
        size_bytes=int(body["sizeBytes"]),
        created_at=body["createdAt"],
        change=BlockChange(
            source=change["source"],
            session_id=change.get("sessionId"),
            message_ids=tuple(change.get("messageIds") or ()),
            request_id=change.get("requestId"),
            note=change.get("note"),
        ),
    )


__all__ = ["block_version", "context_block", "search_result", "session_info", "stored_compaction"]


def proposal(body: dict[str, Any]) -> Proposal:
    return Proposal(
        id=body["id"],
        label=body["label"],
        operation=body["operation"],
        content=body["content"],
        source_message_ids=tuple(body["sourceMessageIds"]),
        based_on_version=body.get("basedOnVersion"),
        status=body["status"],
        error=body.get("error"),
        applied_version=body.get("appliedVersion"),
        created_at=body["createdAt"],
        decided_at=body.get("decidedAt"),
    )


def reflect_result(body: dict[str, Any]) -> ReflectResult:
    proposals = body.get("proposals")
    return ReflectResult(
        status=body["status"],
        leaf_id=body.get("leafId"),
        proposals=None if proposals is None else tuple(proposal(item) for item in proposals),
    )
