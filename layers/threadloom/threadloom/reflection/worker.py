"""The consumer side of a reflection: one queued request in, the session's new facts proposed (and applied) once.

Like the compaction worker, it treats the request as a trigger and re-reads the session:

* the session is gone → ``SESSION_GONE``;
* no message after the watermark (the last message a reflection read) → ``NOTHING_NEW``;
* otherwise the user's messages since the watermark (at most ``max_messages``, the latest) go to the extractor,
  its facts become edits (``facts.plan_edits``), and one transaction stores the run under the request key, moves
  the watermark and stores the proposals (``SqlReflections.commit_run``). A request handled before (a redelivery,
  or a second worker with the same message) → ``DUPLICATE``; a watermark another request moved meanwhile →
  ``SKIPPED_STALE``; nothing of this run is stored, and nothing is applied.
* with approval off the proposals are stored claimed by this worker (``applying``) and applied at once, in order
  (``proposals.apply_run``), by it alone; with approval on they wait (``pending``) for ``POST .../approve`` or
  ``.../reject``. A worker that dies while applying leaves the rest ``applying``: visible, never applied twice.

An extractor failure raises (``CompactionError``), so the queue retries that request alone. Logs carry ids and
counts, never message text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from threadloom.compaction.queue import request_key
from threadloom.errors import ConflictError, SessionChangedError, SessionNotFoundError, ValidationError
from threadloom.reflection.facts import UserStatement, plan_edits
from threadloom.reflection.proposals import apply_run
from threadloom.reflection.session_blocks import SessionMemoryBlocks
from threadloom.storage.reflections import ReflectionAlreadyStoredError

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.compaction.queue import CompactionRequest
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.records import Message
    from threadloom.reflection.facts import FactExtractor
    from threadloom.reflection.protocols import MemoryBlocks
    from threadloom.storage.reflections import SqlReflections

logger = logging.getLogger(__name__)


class ReflectionOutcome(StrEnum):
    """What handling one request did; every outcome but a raised error means "acknowledge the message"."""

    PROPOSED = "proposed"
    """This call stored a run with at least one proposal (applied at once unless approval is on)."""
    NOTHING_FOUND = "nothing_found"
    """This call read new messages and moved the watermark, but they stated nothing to remember."""
    NOTHING_NEW = "nothing_new"
    """No message after the watermark."""
    DUPLICATE = "duplicate"
    """This request was handled before (its run is stored)."""
    SKIPPED_STALE = "skipped_stale"
    """Another reflection of the session read these messages first."""
    SESSION_GONE = "session_gone"
    """The session no longer exists in the request's namespace."""


@dataclass(frozen=True, slots=True)
class ReflectionSettings:
    """Which block a reflection edits, whether edits wait for approval, and how many messages one run reads."""

    label: str = "memory"
    approval: bool = False
    max_messages: int = 200


def reflections_of(manager: SessionManager) -> SqlReflections:
    """The namespace's reflection rows; a store without them cannot reflect (``ValidationError``)."""
    factory = getattr(manager.store, "reflections", None)
    if not callable(factory):
        raise ValidationError("This store keeps no reflection records; use the SQLite or PostgreSQL store")
    ledger: SqlReflections = factory(manager.namespace)
    return ledger


def user_statements(messages: list[Message]) -> list[UserStatement]:
    """The text of each user message (text parts joined by new lines); other roles and parts are not read."""
    statements = []
    for message in messages:
        if message.get("role") != "user":
            continue
        parts = message.get("parts") or []
        texts = [part["text"] for part in parts if part.get("type") == "text" and isinstance(part.get("text"), str)]
        if texts:
            statements.append(UserStatement(str(message.get("id")), "\n".join(texts)))
    return statements


class ReflectionWorker:
    """Handles reflection requests for any namespace.

    Parameters
    ----------
    resolve_manager:
        The configured ``SessionManager`` of a namespace (cached by the caller).
    extractor:
        What finds the facts (``offline.SelfStatementExtractor`` or ``bedrock.BedrockFactExtractor``).
    settings:
        The block, the approval switch and the read limit.
    blocks_for:
        The ``MemoryBlocks`` a session's reflection edits; today the session's own blocks.
    """

    def __init__(
        self,
        resolve_manager: Callable[[str], SessionManager],
        extractor: FactExtractor,
        settings: ReflectionSettings | None = None,
        *,
        blocks_for: Callable[[Session], MemoryBlocks] = SessionMemoryBlocks,
    ) -> None:
        self._resolve_manager = resolve_manager
        self.extractor = extractor
        self.settings = settings or ReflectionSettings()
        self.blocks_for = blocks_for

    def __call__(self, request: CompactionRequest) -> ReflectionOutcome:
        return self.handle(request)

    def handle(self, request: CompactionRequest) -> ReflectionOutcome:
        """Reflect the session once; raises ``CompactionError`` (retry) when the extractor fails."""
        manager = self._resolve_manager(request.namespace)
        if manager.get(request.session_id) is None:
            logger.info("Reflection skipped: session %r not found in %r", request.session_id, manager.namespace)
            return ReflectionOutcome.SESSION_GONE
        ledger = reflections_of(manager)
        session = manager.get_session(request.session_id)
        blocks = self.blocks_for(session)
        key = request_key(request)
        if _handled(ledger, request.session_id, key):
            return _duplicate(request.session_id)
        mark = ledger.mark(request.session_id)
        after = mark.message_id if mark is not None else None
        try:
            # Checked with the read: a keyed session deleted and opened again for another subject since the
            # lookup above must not have its messages reflected into the first subject's memory.
            with manager.checked_session(request.session_id) as checked:
                path = _path(checked, request.leaf_id)
        except (SessionNotFoundError, SessionChangedError):
            logger.info("Reflection skipped: session %r was deleted meanwhile", request.session_id)
            return ReflectionOutcome.SESSION_GONE
        new = _messages_after(path, after)
        if not new:
            return ReflectionOutcome.NOTHING_NEW
        window = new[-self.settings.max_messages :]
        facts = self.extractor(user_statements(window))
        proposals = plan_edits(facts, blocks.read_block(self.settings.label))
        try:
            stored = ledger.commit_run(
                key,
                request.session_id,
                after_message_id=after,
                to_message_id=str(new[-1].get("id")),
                messages_read=len(window),
                proposals=proposals,
                status="pending" if self.settings.approval else "applying",
            )
        except ReflectionAlreadyStoredError:
            return _duplicate(request.session_id)
        except ConflictError as error:
            logger.info("Reflection of session %r skipped: %s", request.session_id, error)
            return ReflectionOutcome.SKIPPED_STALE
        applied = 0 if self.settings.approval else apply_run(ledger, blocks, stored)
        logger.info(
            "Reflected session %r: %d messages read, %d edits proposed, %d applied",
            request.session_id,
            len(window),
            len(stored),
            applied,
        )
        return ReflectionOutcome.PROPOSED if stored else ReflectionOutcome.NOTHING_FOUND


def _duplicate(session_id: str) -> ReflectionOutcome:
    logger.info("Reflection request for session %r already handled", session_id)
    return ReflectionOutcome.DUPLICATE


def _handled(ledger: SqlReflections, session_id: str, key: str) -> bool:
    mark = ledger.mark(session_id)
    return mark is not None and mark.request_key == key


def _path(session: Session, leaf_id: str | None) -> list[Message]:
    """Root to the requested leaf (or the latest, when it is gone) without overlays: compacted messages included."""
    if leaf_id is not None and session.get_message(leaf_id) is None:
        leaf_id = None
    raw_path = getattr(session.storage, "get_raw_path", None)
    path: list[Message] = raw_path(leaf_id) if callable(raw_path) else session.get_history(leaf_id)
    return path


def _messages_after(path: list[Message], after: str | None) -> list[Message]:
    """The messages after ``after`` on ``path``; all of them when it is not on it (a branch switched)."""
    if after is None:
        return path
    index = next((i for i, message in enumerate(path) if message.get("id") == after), None)
    return path if index is None else path[index + 1 :]


__all__ = ["ReflectionOutcome", "ReflectionSettings", "ReflectionWorker", "reflections_of", "user_statements"]
