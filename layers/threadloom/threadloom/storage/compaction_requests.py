"""Compaction request tracking on SQL: one namespace's requests, from queued to a final state."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from threadloom.clock import utc_now
from threadloom.records import TrackedCompaction
from threadloom.storage.database import to_timestamp_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.records import CompactionState
    from threadloom.storage.database import Database, Executor
    from threadloom.storage.dialect import SqlDialect


class SqlCompactionRequests:
    """Tracked compaction requests of ``namespace``; every statement is scoped to it.

    Records are found by the worker's request key, so re-sending a request that is waiting,
    running or finished finds the same record (and id); only a ``failed`` one is queued again.
    """

    def __init__(self, database: Database, sql: type[SqlDialect], namespace: str) -> None:
        self._database = database
        self._sql = sql
        self.namespace = namespace

    def record_queued(self, request_key: str, session_id: str, leaf_id: str | None) -> TrackedCompaction:
        """Record a request as ``queued`` (unless it is already known and not failed); returns it as stored."""
        with self._database.write() as tx:
            self._upsert(tx, request_key, session_id, leaf_id)
            rows = tx.query(self._sql.get_compaction_request_by_key, self._key(request_key))
        return _tracked(rows[0])

    def mark_running(self, request_key: str, session_id: str, leaf_id: str | None) -> None:
        """The worker picked the request up (recorded first if the producer never did)."""
        with self._database.write() as tx:
            self._upsert(tx, request_key, session_id, leaf_id)
            tx.execute(self._sql.start_compaction_request, self._key(request_key, now=utc_now()))

    def finish(
        self,
        request_key: str,
        state: CompactionState,
        *,
        from_message_id: str | None = None,
        to_message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        values = {"state": state, "from_id": from_message_id, "to_id": to_message_id, "error": error}
        with self._database.write() as tx:
            tx.execute(self._sql.finish_compaction_request, self._key(request_key, now=utc_now(), **values))

    def get(self, request_id: str) -> TrackedCompaction | None:
        """A request by the id its client was given."""
        rows = self._database.query_once(
            self._sql.get_compaction_request, {"namespace": self.namespace, "id": request_id}
        )
        return _tracked(rows[0]) if rows else None

    def latest(self, session_id: str) -> TrackedCompaction | None:
        """The session's most recent request, or None."""
        rows = self._database.query_once(
            self._sql.latest_compaction_request, {"namespace": self.namespace, "sid": session_id}
        )
        return _tracked(rows[0]) if rows else None

    def _upsert(self, tx: Executor, request_key: str, session_id: str, leaf_id: str | None) -> None:
        values = {"id": str(uuid.uuid4()), "sid": session_id, "leaf_id": leaf_id, "now": utc_now()}
        tx.execute(self._sql.upsert_compaction_request, self._key(request_key, **values))

    def _key(self, request_key: str, **values: object) -> dict[str, object]:
        return {"namespace": self.namespace, "request_key": request_key, **values}


def _optional_time(value: object) -> str | None:
    return None if value is None else to_timestamp_text(value)


def _tracked(row: Sequence[Any]) -> TrackedCompaction:
    return TrackedCompaction(
        id=row[0],
        session_id=row[1],
        leaf_id=row[2],
        state=cast("CompactionState", row[3]),
        from_message_id=row[4],
        to_message_id=row[5],
        error=row[6],
        requested_at=to_timestamp_text(row[7]),
        started_at=_optional_time(row[8]),
        finished_at=_optional_time(row[9]),
    )


__all__ = ["SqlCompactionRequests"]
