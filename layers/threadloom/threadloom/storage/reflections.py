"""Reflection on SQL: a session's watermark, the runs that moved it and the block edits they proposed.

The fence of a reflection is one transaction (:meth:`SqlReflections.commit_run`): the run's row, unique per
request key, and the watermark moved from the value the run read to the last message it read. A redelivered
request finds its row (``ReflectionAlreadyStoredError``); a second request over the same messages finds the
watermark moved (``ConflictError``); either way nothing of it is stored. A proposal moves between statuses only
by compare-and-set (:meth:`SqlReflections.move`), so two workers, or a worker and an approver, never both apply
one. Every statement names the owner ``(namespace, session_id)``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from threadloom.clock import utc_now
from threadloom.errors import ConflictError
from threadloom.storage.database import to_timestamp_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.storage.database import Database
    from threadloom.storage.dialect import SqlDialect

ProposalStatus = Literal["pending", "applying", "applied", "rejected", "failed"]
"""``pending``: waits for approval; ``applying``: claimed by one worker or approver (with approval off, a run stores
its proposals claimed by the worker that stored them); then ``applied``, ``rejected`` or ``failed`` (the write was
refused; ``error`` says why)."""
EditOperation = Literal["append", "replace"]


class ReflectionAlreadyStoredError(ConflictError):
    """A run under this request key is already stored: the request was handled before (a redelivery)."""


@dataclass(frozen=True, slots=True)
class ReflectionMark:
    """The last message of a session a reflection has read, and the request that read it."""

    message_id: str
    request_key: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class NewProposal:
    """An edit a run proposes: append a line to, or replace, the block ``label``."""

    label: str
    operation: EditOperation
    content: str
    source_message_ids: tuple[str, ...]
    based_on_version: str | None = None


@dataclass(frozen=True, slots=True)
class StoredProposal:
    """A proposal as stored, with its status and, once applied, the version of the block it produced."""

    id: str
    session_id: str
    request_key: str
    seq: int
    label: str
    operation: EditOperation
    content: str
    source_message_ids: tuple[str, ...]
    based_on_version: str | None
    status: ProposalStatus
    error: str | None
    applied_version: str | None
    created_at: str
    decided_at: str | None


class SqlReflections:
    """The reflection rows of ``namespace``; every statement is scoped to it."""

    def __init__(self, database: Database, sql: type[SqlDialect], namespace: str) -> None:
        self._database = database
        self._sql = sql
        self.namespace = namespace

    def mark(self, session_id: str) -> ReflectionMark | None:
        """The session's watermark, or None before its first reflection."""
        rows = self._database.query_once(self._sql.get_reflection_mark, self._owner(session_id), by_key=True)
        return ReflectionMark(str(rows[0][0]), str(rows[0][1]), to_timestamp_text(rows[0][2])) if rows else None

    def commit_run(
        self,
        request_key: str,
        session_id: str,
        *,
        after_message_id: str | None,
        to_message_id: str,
        messages_read: int,
        proposals: Sequence[NewProposal],
        status: Literal["pending", "applying"],
    ) -> list[StoredProposal]:
        """Store the run, move the watermark from ``after_message_id`` and store its proposals, all or nothing.

        Raises ``ReflectionAlreadyStoredError`` when the request key was stored before and ``ConflictError`` when the
        watermark is no longer ``after_message_id`` (another run read those messages first).
        """
        now = utc_now()
        values = {
            **self._owner(session_id),
            "request_key": request_key,
            "after_id": after_message_id,
            "to_id": to_message_id,
            "messages_read": messages_read,
            "proposals": len(proposals),
            "now": now,
        }
        ids = [str(uuid.uuid4()) for _ in proposals]
        with self._database.write() as tx:
            if not tx.query(self._sql.insert_reflection_run, values):
                raise ReflectionAlreadyStoredError(f"Reflection request {request_key} was handled before")
            moved = tx.query(
                self._sql.insert_reflection_mark if after_message_id is None else self._sql.advance_reflection_mark,
                values,
            )
            if not moved:
                raise ConflictError(f"Another reflection of session {session_id!r} read these messages first")
            for proposal_id, proposal in zip(ids, proposals, strict=True):
                tx.execute(
                    self._sql.insert_reflection_proposal,
                    {
                        **values,
                        "id": proposal_id,
                        "label": proposal.label,
                        "operation": proposal.operation,
                        "content": proposal.content,
                        "sources": json.dumps(list(proposal.source_message_ids)),
                        "based_on": proposal.based_on_version,
                        "status": status,
                    },
                )
        return [found for proposal_id in ids if (found := self.get(session_id, proposal_id)) is not None]

    def get(self, session_id: str, proposal_id: str) -> StoredProposal | None:
        rows = self._database.query_once(
            self._sql.get_reflection_proposal, {**self._owner(session_id), "id": proposal_id}, by_key=True
        )
        return _proposal(rows[0]) if rows else None

    def page(
        self, session_id: str, *, status: ProposalStatus | None, after_seq: int = 0, limit: int
    ) -> list[StoredProposal]:
        """Up to ``limit`` proposals of the session after ``after_seq``, oldest first (one status, or all)."""
        values = {**self._owner(session_id), "status": status, "after_seq": after_seq, "limit": limit}
        return [_proposal(row) for row in self._database.query_once(self._sql.list_reflection_proposals, values)]

    def of_run(self, request_key: str, status: ProposalStatus | None = None) -> list[StoredProposal]:
        """The proposals of one run (only those in ``status``, when given)."""
        values = {"namespace": self.namespace, "request_key": request_key, "status": status}
        return [_proposal(row) for row in self._database.query_once(self._sql.run_reflection_proposals, values)]

    def move(
        self,
        session_id: str,
        proposal_id: str,
        from_status: ProposalStatus,
        to_status: ProposalStatus,
        *,
        error: str | None = None,
        applied_version: str | None = None,
    ) -> bool:
        """Compare-and-set the status; False when the proposal was not in ``from_status`` (someone else moved it)."""
        values = {
            **self._owner(session_id),
            "id": proposal_id,
            "from_status": from_status,
            "to_status": to_status,
            "error": error,
            "applied_version": applied_version,
            "now": utc_now(),
        }
        return bool(self._database.execute_once(self._sql.move_reflection_proposal, values))

    def _owner(self, session_id: str) -> dict[str, Any]:
        return {"namespace": self.namespace, "sid": session_id}


class SqlReflectionSweep:
    """The one read across tenants reflection makes: sessions gone idle since their last reflection."""

    def __init__(self, database: Database, sql: type[SqlDialect]) -> None:
        self._database = database
        self._sql = sql

    def idle_sessions(self, *, idle_before: str, active_after: str, limit: int) -> list[tuple[str, str]]:
        """``(namespace, session_id)`` of sessions last active in ``[active_after, idle_before)`` with messages or
        other activity after their last reflection, least recently active first."""
        values = {"idle_before": idle_before, "active_after": active_after, "limit": limit}
        return [
            (str(row[0]), str(row[1])) for row in self._database.query_once(self._sql.idle_unreflected_sessions, values)
        ]


def _proposal(row: Sequence[Any]) -> StoredProposal:
    return StoredProposal(
        id=str(row[0]),
        session_id=str(row[1]),
        request_key=str(row[2]),
        seq=int(row[3]),
        label=str(row[4]),
        operation=row[5],
        content=str(row[6]),
        source_message_ids=tuple(json.loads(row[7])),
        based_on_version=row[8],
        status=row[9],
        error=row[10],
        applied_version=row[11],
        created_at=to_timestamp_text(row[12]),
        decided_at=None if row[13] is None else to_timestamp_text(row[13]),
    )


__all__ = [
    "EditOperation",
    "NewProposal",
    "ProposalStatus",
    "ReflectionAlreadyStoredError",
    "ReflectionMark",
    "SqlReflectionSweep",
    "SqlReflections",
    "StoredProposal",
]
