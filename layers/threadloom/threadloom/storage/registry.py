"""The session registry behind SessionManager, on SQL: one namespace's named sessions."""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.core.keys import (
    keyed_session_id,
    legacy_keyed_session_id,
    new_session_id,
    previous_keyed_session_id,
)
from threadloom.errors import SessionChangedError, SessionNotFoundError, StorageError, ValidationError
from threadloom.limits import DEFAULT_LIMITS, Limits, check_text
from threadloom.providers.protocols import BlockRead
from threadloom.records import SearchResult, SessionInfo, SessionOverview
from threadloom.storage.block_versions import session_versions_removal
from threadloom.storage.checked_reads import checked_first
from threadloom.storage.database import to_timestamp_text

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager

    from threadloom.storage.database import Database, Executor, Params, Row
    from threadloom.storage.dialect import SqlDialect

NO_LIMIT = 2**62


def session_removal(sql: type[SqlDialect], namespace: str, session_id: str) -> list[tuple[str, Params]]:
    """Every statement that removes a session and what derives from it (contract D12), its row last.

    They return no rows, so a transaction sends them together (on PostgreSQL many to a round trip).
    """
    sid: Params = {"sid": session_id}
    owner: Params = {"namespace": namespace, **sid}
    statements: list[tuple[str, Params]] = [(sql.unindex_session, sid)] if sql.unindex_session else []
    statements += [
        (sql.clear_messages, sid),
        (sql.clear_compactions, sid),
        (sql.delete_head, sid),
        (sql.delete_session_blocks, owner),
        *session_versions_removal(sql, namespace, session_id),
        (sql.clear_loaded_skills, sid),
        (sql.delete_session_compaction_requests, owner),
        *((statement, owner) for statement in sql.delete_session_reflections),
        (sql.delete_session, {"namespace": namespace, "id": session_id}),
    ]
    return statements


class SqlSessionRegistry:
    """Lifecycle rows of the sessions in ``namespace``; every statement is scoped to it."""

    def __init__(self, database: Database, sql: type[SqlDialect], namespace: str) -> None:
        self._database = database
        self._sql = sql
        self.namespace = namespace

    def create(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        session_id: str | None = None,
        subject_id: str | None = None,
    ) -> SessionInfo:
        """A new session; its id is minted for the namespace unless a trusted library caller chose ``session_id``.

        One statement that returns the row it wrote (one round trip on PostgreSQL; it was a
        transaction of four: begin, insert, read back, commit).
        """
        new_id = session_id or new_session_id(self._secret(), self.namespace)
        rows = self._database.execute_once(
            self._sql.insert_session,
            {
                "id": new_id,
                "namespace": self.namespace,
                "name": name,
                "parent_session_id": parent_session_id,
                "model": model,
                "source": source,
                "subject_id": subject_id,
                "now": utc_now(),
            },
        )
        return _session_info(tuple(rows[0]))

    def find_keyed(self, key: str) -> tuple[str, SessionInfo | None]:
        """The id of the session ``key`` names in this namespace, and the session when it exists.

        The id is minted for the namespace from the key under the deployment's secret. A session
        opened earlier has the id of its time (the 0016 HMAC id, or before that the public UUIDv5):
        it is found under that id in this namespace only, so a session of another tenant is never this one.
        """
        secret = self._secret()
        minted = keyed_session_id(secret, self.namespace, key)
        info = self.get(minted)
        if info is None:
            for older_id in (
                previous_keyed_session_id(secret, self.namespace, key),
                legacy_keyed_session_id(self.namespace, key),
            ):
                older = self.get(older_id)
                if older is not None:
                    return older_id, older
        return minted, info

    def _secret(self) -> str:
        return session_id_secret(self._database, self._sql)

    def get(self, session_id: str) -> SessionInfo | None:
        rows = self._database.query_once(self._sql.get_session, {"namespace": self.namespace, "id": session_id})
        return _session_info(tuple(rows[0])) if rows else None

    def checked(
        self, session_id: str, *, check_subject: bool = False, subject: str | None = None
    ) -> AbstractContextManager[None]:
        """Within the block the session must be this namespace's (else :class:`SessionNotFoundError`).

        With ``check_subject``, its subject must be ``subject`` too (else :class:`SessionChangedError`):
        what the caller knew of the session is still true. The check waits for the block's first read
        and goes in its round trip (:mod:`checked_reads`).
        """
        params: dict[str, Any] = {"namespace": self.namespace, "id": session_id}
        required = self._sql.session_required
        return checked_first(
            self._database,
            (self._sql.session_subject, params),
            lambda: SessionNotFoundError(f"Session {session_id!r} not found"),
            failing=(required, {**params, "check_subject": check_subject, "subject": subject}) if required else None,
            subject=(subject,) if check_subject else None,
            changed=lambda: SessionChangedError.of(session_id),
        )

    def _get(self, tx: Executor, session_id: str) -> SessionInfo | None:
        rows = tx.query(self._sql.get_session, {"namespace": self.namespace, "id": session_id})
        return _session_info(rows[0]) if rows else None

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, newest activity first."""
        return self.list_page(limit=None)[0]

    def list_page(
        self,
        *,
        limit: int | None,
        cursor: str | None = None,
        fit: Callable[[builtins.list[SessionInfo]], int] | None = None,
    ) -> tuple[builtins.list[SessionInfo], str | None]:
        """One page, newest activity first, and the opaque cursor of the next page (None at the end).

        A keyset read on ``(namespace, activity_seq, id)``: O(page) wherever the page starts. ``fit``
        says how many of the rows read may be returned (the caller's byte budget); the cursor then
        resumes right after the last one returned.
        """
        params: dict[str, object] = {"namespace": self.namespace, "limit": NO_LIMIT if limit is None else limit}
        # One statement on its own (one round trip; it was a read-only transaction of three).
        if cursor is None:
            rows = self._database.query_once(self._sql.list_sessions, params)
        else:
            after_seq, after_id = _parse_cursor(cursor)
            rows = self._database.query_once(
                self._sql.list_sessions_after, {**params, "after_seq": after_seq, "after_id": after_id}
            )
        sessions = [_session_info(tuple(row)) for row in rows]
        more = bool(rows) and limit is not None and len(rows) == limit
        if fit is not None and sessions:
            kept = max(1, min(fit(sessions), len(sessions)))
            more = more or kept < len(sessions)
            rows, sessions = rows[:kept], sessions[:kept]
        next_cursor = f"{rows[-1][11]}:{rows[-1][0]}" if more else None
        return sessions, next_cursor

    def overviews(self, session_ids: builtins.list[str], *, preview_chars: int) -> dict[str, SessionOverview]:
        """Message count and preview of each given session of the namespace that has messages (one statement)."""
        if not session_ids:
            return {}
        rows = self._database.query_once(
            self._sql.session_overviews,
            {"namespace": self.namespace, "ids": json.dumps(session_ids), "chars": preview_chars},
        )
        return {
            str(row[0]): SessionOverview(
                session_id=str(row[0]),
                message_count=int(row[1]),
                preview_role=str(row[2]),
                preview=None if row[3] is None else str(row[3]),
            )
            for row in rows
        }

    def count(self) -> int:
        return int(self._database.query_once(self._sql.count_sessions, {"namespace": self.namespace})[0][0])

    def count_read(self, describe: Callable[[int], str | None]) -> BlockRead:
        """``describe(count())`` as a read that can go with a session's block reads (one round trip)."""
        return BlockRead(
            self._database,
            (self._sql.count_sessions, {"namespace": self.namespace}),
            lambda rows: describe(int(rows[0][0])),
            single_value=True,
        )

    def _change(
        self, statement: str, session_id: str, *, durable: bool = True, **values: object
    ) -> Sequence[Sequence[Any]]:
        """One statement (one round trip) that finds the session in this namespace and changes it; its rows."""
        params = {"namespace": self.namespace, "id": session_id, "now": utc_now(), **values}
        return self._database.execute_once(statement, params, durable=durable)

    def _update(self, statement: str, session_id: str, *, durable: bool = True, **values: object) -> bool:
        """:meth:`_change`, answering whether the namespace holds the session."""
        return bool(self._change(statement, session_id, durable=durable, **values))

    def _update_returning(self, statement: str, session_id: str, **values: Any) -> SessionInfo | None:
        """:meth:`_change` of a statement that returns the changed row: the session as it now is, or None."""
        rows = self._change(statement, session_id, **values)
        return _session_info(tuple(rows[0])) if rows else None

    def rename(self, session_id: str, name: str) -> SessionInfo | None:
        """Rename, and return the session as it now is (None: not in this namespace), in one statement."""
        return self._update_returning(self._sql.rename_session, session_id, name=name)

    def touch(self, session_id: str) -> bool:
        """Stamp a write's activity (listing order, the retention clock) after the write itself committed.

        The stamp commits without waiting for the disk flush, as the cached prompt does: a server
        crash in the moment after it can lose the last stamp (the message it follows is durable),
        and an append through the API then costs one flush instead of two.
        """
        return self._update(self._sql.touch_session, session_id, durable=False)

    def add_usage(
        self, session_id: str, input_tokens: int, output_tokens: int, cost: float, *, limits: Limits = DEFAULT_LIMITS
    ) -> SessionInfo | None:
        """Add usage and return the session as it now is (None: not in this namespace).

        One statement that bounds the new totals itself, so no sum can overflow or reach infinity
        (it was a transaction of four round trips on PostgreSQL, and a fifth to read the result).
        Only when it changes nothing is the session read, to say which refusal it was.
        """
        changed = self._update_returning(
            self._sql.add_usage,
            session_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=cost,
            max_tokens=limits.max_usage_tokens,
            max_cost=float(limits.max_usage_cost),
        )
        if changed is not None:
            return changed
        info = self.get(session_id)
        if info is None:
            return None
        limits.check_usage_totals(
            info.input_tokens + input_tokens, info.output_tokens + output_tokens, info.estimated_cost + cost
        )
        raise ValidationError("The session's usage totals would exceed their limits")

    def set_legal_hold(self, session_id: str, hold: bool) -> bool:
        """Hold or release a session; a hold is not activity, so it leaves the retention clock alone."""
        with self._database.write() as tx:
            if self._get(tx, session_id) is None:
                return False
            tx.execute(self._sql.set_legal_hold, {"namespace": self.namespace, "id": session_id, "hold": bool(hold)})
        return True

    def end(self, session_id: str, reason: str) -> bool:
        return self._update(self._sql.end_session, session_id, reason=reason)

    def delete(self, session_id: str) -> bool:
        """Erase the session and everything derived from it (contract D12), in one transaction.

        The session's row is locked first, before its head row: the order in which a manager's
        append (which stamps the row) takes them, so the two cannot deadlock.
        """
        with self._database.write() as tx:
            if not tx.query(self._sql.lock_session, {"namespace": self.namespace, "id": session_id}):
                return False
            tx.execute_all(session_removal(self._sql, self.namespace, session_id))
        return True

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """D5 search across this namespace's sessions; every hit names its session (D6)."""
        match = self._sql.match_param(query)
        if match is None or limit <= 0:
            return []
        self._sql.prepare_message_search(self._database)
        statement = self._sql.message_search_statement(
            self._database, self._sql.search_namespace, namespace=self.namespace
        )
        if statement is None:
            return []
        with self._database.read() as tx:
            rows = tx.query(statement, {"match": match, "namespace": self.namespace, "limit": int(limit)})
        return [
            SearchResult(
                id=row[0], role=row[1], content=row[2] or "", created_at=to_timestamp_text(row[3]), session_id=row[4]
            )
            for row in rows
        ]


_SECRETS: weakref.WeakKeyDictionary[Database, str] = weakref.WeakKeyDictionary()


def session_id_secret(database: Database, sql: type[SqlDialect]) -> str:
    """The database's own secret session ids are minted with (migration 0016); it never leaves the database.

    Read once per database object: migration 0016 made it and nothing changes it, so a create, a
    keyed open or an import costs no extra statement after the first.
    """
    secret = _SECRETS.get(database)
    if secret is None:
        rows = database.query_once(sql.get_setting, {"name": "keyed_session_secret"})
        if not rows:
            raise StorageError("The session id secret is missing: apply migration 0016")
        secret = _SECRETS[database] = str(rows[0][0])
    return secret


def _parse_cursor(cursor: str) -> tuple[int, str]:
    seq, _, session_id = cursor.partition(":")
    if not seq.isascii() or not seq.isdigit() or len(seq) > 18 or not session_id:
        raise ValidationError("Invalid cursor")
    check_text(session_id, "cursor")
    return int(seq), session_id


def _session_info(row: Row) -> SessionInfo:
    return SessionInfo(
        id=row[0],
        name=row[1],
        parent_session_id=row[2],
        model=row[3],
        source=row[4],
        input_tokens=int(row[5]),
        output_tokens=int(row[6]),
        estimated_cost=float(row[7]),
        end_reason=row[8],
        created_at=to_timestamp_text(row[9]),
        updated_at=to_timestamp_text(row[10]),
        subject_id=row[12],
        legal_hold=bool(row[13]),
    )
