"""The message tree on SQLite: the shared SQL logic with an append of four statements.

The shared :class:`SqlSessionProvider` spends eight statements on an append (head, lock,
overlay targets, duplicate check, parent, row, full-text row, head update). On SQLite
each one is a trip through the sqlite3 module, so here one read answers all the
questions at once and the full-text row is keyed by the new row's ``rowid`` without a
lookup: read, insert, index, head upsert. The rare append whose id ends a compaction
overlay (its running estimate must be rebuilt) goes through the shared code.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from threadloom.errors import NotFoundError
from threadloom.records import OMITTED, AppendResult, Message, Omitted
from threadloom.storage.database import utc_now
from threadloom.storage.sqlite.database import translate_sqlite_error
from threadloom.storage.sqlite.sql import SqliteSql
from threadloom.storage.tree import SqlSessionProvider, _PreparedMessage, leaf_moved
from threadloom.storage.values import check_storable_values

if TYPE_CHECKING:
    from threadloom.storage.sqlite.database import SqliteDatabase


class SqliteSessionProvider(SqlSessionProvider):
    """Session storage for one session id on SQLite (same observable behaviour as PostgreSQL)."""

    _database: SqliteDatabase

    def __init__(self, database: SqliteDatabase, session_id: str) -> None:
        super().__init__(database, SqliteSql, session_id)

    def append_message(
        self,
        message: Message,
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
    ) -> AppendResult:
        """Insert ``message`` under the write lock; a message id already stored is a no-op (first write wins).

        Statements bind by position and go straight to the connection: the message's own
        values were checked by :class:`_PreparedMessage`, the two other strings are checked here.
        """
        prepared = _PreparedMessage(message)
        explicit = not isinstance(parent_id, Omitted)
        requested_parent = parent_id if isinstance(parent_id, str) and parent_id else None
        session_id = self.session_id
        check_storable_values((session_id, requested_parent))
        database = self._database
        connection = database.connection
        with database.write() as tx:
            try:
                (
                    leaf_id,
                    next_seq,
                    existing,
                    existing_parent,
                    parent_found,
                    parent_depth,
                    parent_path_tokens,
                    target,
                    parent_jump,  # the new row's jump (history_pages): the parent, or the parent's own jump
                ) = connection.execute(
                    SqliteSql.append_context, (session_id, prepared.id, requested_parent, explicit)
                ).fetchall()[0]
            except sqlite3.Error as error:
                raise translate_sqlite_error(error, database.busy_timeout) from error
            if existing:
                return AppendResult(prepared.id, existing_parent, False)
            if expected_leaf_id is not None and expected_leaf_id != leaf_id:
                raise leaf_moved(expected_leaf_id, leaf_id)
            if target:  # re-appending the end of an overlay: the shared path rebuilds the estimates
                result = self._insert(
                    tx, prepared, parent_id, leaf_id=leaf_id, seq=next_seq, targets={prepared.id}, expected_leaf_id=None
                )
                tx.execute(SqliteSql.upsert_head, self._params(leaf=result.id, next_seq=next_seq + 1))
                return result
            parent = requested_parent if explicit else leaf_id
            depth, path_tokens, jump = 0, prepared.tokens, None
            if parent is not None:
                if not parent_found:
                    raise NotFoundError(f"Parent message {parent!r} not found in session {session_id!r}")
                depth, path_tokens, jump = parent_depth + 1, parent_path_tokens + prepared.tokens, parent_jump
            try:
                row_id = connection.execute(
                    SqliteSql.append_insert,
                    (
                        session_id,
                        prepared.id,
                        next_seq,
                        parent,
                        prepared.role,
                        prepared.content,
                        depth,
                        prepared.tokens,
                        path_tokens,
                        utc_now(),
                        jump,
                    ),
                ).lastrowid
                if prepared.text:
                    connection.execute(SqliteSql.index_row, (row_id, prepared.text))
                connection.execute(SqliteSql.append_head, (session_id, prepared.id, next_seq + 1))
            except sqlite3.Error as error:
                raise translate_sqlite_error(error, database.busy_timeout) from error
        return AppendResult(prepared.id, parent, True, path_tokens)
