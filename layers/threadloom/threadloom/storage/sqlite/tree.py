"""The message tree on SQLite: the shared SQL logic with an append of three or four statements.

The shared :class:`SqlSessionProvider` spends eight statements on an append (head, lock,
overlay targets, duplicate check, parent, row, full-text mark, head update). On SQLite
each one is a trip through the sqlite3 module, so here one read answers all the
questions at once and the new row's ``rowid`` is marked for the full-text index without
a lookup: read, insert, mark, head upsert. The message is indexed later, with others, by
a batch (:mod:`threadloom.storage.sqlite.search_index`): every 64th append runs one. The
rare append whose id ends a compaction overlay (its running estimate must be rebuilt) goes
through the shared code.

Consecutive appends to one session skip the read: the database remembers the head the
last append left (:class:`_LastAppend`) and trusts it while the connection's change
counters prove that nothing was written since, read under the write lock. A duplicate
id then shows as the primary key refusing the row, and the append falls back to the read.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from threadloom.clock import utc_now
from threadloom.errors import NotFoundError
from threadloom.records import OMITTED, AppendResult, Message, Omitted
from threadloom.storage.dialect import JUMP_SPAN
from threadloom.storage.sqlite.database import translate_sqlite_error
from threadloom.storage.sqlite.dialect import SqliteDialect
from threadloom.storage.sqlite.search_index import after_appends
from threadloom.storage.sqlite.sql import SqliteSql
from threadloom.storage.tree import SqlSessionProvider, _PreparedMessage, leaf_moved
from threadloom.storage.values import check_storable_values

if TYPE_CHECKING:
    from threadloom.storage.database import Executor
    from threadloom.storage.sqlite.database import SqliteDatabase


class SqliteSessionProvider(SqlSessionProvider):
    """Session storage for one session id on SQLite (same observable behaviour as PostgreSQL)."""

    _database: SqliteDatabase

    def __init__(self, database: SqliteDatabase, session_id: str) -> None:
        super().__init__(database, SqliteDialect, session_id)

    def append_message(
        self,
        message: Message,
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> AppendResult:
        """Insert ``message`` under the write lock; a message id already stored is a no-op (first write wins).

        Statements bind by position and go straight to the connection: the message's own
        values were checked by :class:`_PreparedMessage`, the two other strings are checked here.
        With ``registered_in`` the session's registry row is stamped in the same transaction, after
        the memo is checked (the stamp's own change is counted when it commits) and before the row,
        and its subject checked against ``expected_subject`` (as in the shared append).
        """
        prepared = _PreparedMessage(message)
        explicit = not isinstance(parent_id, Omitted)
        requested_parent = parent_id if isinstance(parent_id, str) and parent_id else None
        session_id = self.session_id
        check_storable_values((session_id, requested_parent))
        database = self._database
        connection = database.connection
        # Inside a caller's transaction a rollback could still undo what a memo would describe.
        remember = database.counts_changes and not connection.in_transaction
        transaction = database.write()
        with transaction as tx:
            last = database.last_append if remember else None
            version: int | None = None
            if isinstance(last, _LastAppend) and last.session_id == session_id:
                if last.changes == connection.total_changes:
                    version = database.data_version()
                if version is None or last.version != version:
                    last = None
            else:
                last = None
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            head: _Head | None = None
            if last is not None and (expected_leaf_id is None or expected_leaf_id == last.leaf.parent_id):
                if not explicit or requested_parent == last.leaf.parent_id:
                    head = last.leaf
                elif requested_parent is None:  # a new root
                    head = _Head(None, last.leaf.next_seq, -1, 0, None)
                if head is not None:
                    if last.targets is None:
                        last.targets = self._compaction_targets(tx)
                    if prepared.id in last.targets:
                        head = None  # the end of an overlay: the read below sends it to the shared path
            # With a memo, a stored id shows as the primary key refusing the row (nothing written).
            row = self._insert_row(connection, prepared, head, duplicate_ok=True) if head is not None else None
            if row is None:  # no memo, or the id is taken: read what the append needs to know
                answer = self._append_read(
                    tx,
                    prepared,
                    parent_id=parent_id,
                    requested_parent=requested_parent,
                    explicit=explicit,
                    expected_leaf_id=expected_leaf_id,
                )
                if isinstance(answer, AppendResult):
                    return answer
                head = answer
                row = self._insert_row(connection, prepared, head, duplicate_ok=False)
                assert row is not None
            assert head is not None
            depth, path_tokens = row
            after_appends(database, 1)  # every INDEX_EVERY-th append also indexes a batch for search
        changes = transaction.committed_changes
        if remember and changes is not None:
            database.last_append = _LastAppend(
                session_id=session_id,
                leaf=_Head(
                    prepared.id,
                    head.next_seq + 1,
                    depth,
                    path_tokens,
                    head.next_seq if depth % JUMP_SPAN == 0 else head.child_jump,
                ),
                targets=last.targets if last is not None else None,
                changes=changes,
                version=version,
            )
        return AppendResult(prepared.id, head.parent_id, True, path_tokens)

    def append_chain(
        self,
        messages: list[Message],
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> list[AppendResult]:
        """The shared chain append; its messages count towards the next batch of the search index."""
        database = self._database
        with database.write():
            results = super().append_chain(
                messages,
                parent_id,
                expected_leaf_id=expected_leaf_id,
                registered_in=registered_in,
                expected_subject=expected_subject,
            )
            after_appends(database, sum(result.inserted for result in results))
        return results

    def _append_read(
        self,
        tx: Executor,
        prepared: _PreparedMessage,
        *,
        parent_id: str | Omitted | None,
        requested_parent: str | None,
        explicit: bool,
        expected_leaf_id: str | None,
    ) -> AppendResult | _Head:
        """The one read of an append: its result when it is settled without inserting, else the head to insert under."""
        database = self._database
        session_id = self.session_id
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
            ) = database.connection.execute(
                SqliteSql.append_context, (session_id, prepared.id, requested_parent, explicit)
            ).fetchall()[0]
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, database.busy_timeout) from error
        if existing:
            return AppendResult(prepared.id, existing_parent, False)
        if expected_leaf_id is not None and expected_leaf_id != leaf_id:
            raise leaf_moved(expected_leaf_id, leaf_id)
        if target:  # re-appending the end of an overlay: the shared path rebuilds the estimates
            database.last_append = None
            result = self._insert(
                tx, prepared, parent_id, leaf_id=leaf_id, seq=next_seq, targets={prepared.id}, expected_leaf_id=None
            )
            tx.execute(SqliteSql.upsert_head, self._params(leaf=result.id, next_seq=next_seq + 1))
            return result
        parent = requested_parent if explicit else leaf_id
        if parent is None:
            return _Head(None, next_seq, -1, 0, None)
        if not parent_found:
            raise NotFoundError(f"Parent message {parent!r} not found in session {session_id!r}")
        return _Head(parent, next_seq, parent_depth, parent_path_tokens, parent_jump)

    def _insert_row(
        self, connection: sqlite3.Connection, prepared: _PreparedMessage, head: _Head, *, duplicate_ok: bool
    ) -> tuple[int, int] | None:
        """Insert the row under ``head``, its mark for the full-text index and the new head: ``(depth, path_tokens)``.

        With ``duplicate_ok``, None when the primary key refused the row (nothing was written).
        """
        depth = head.depth + 1
        path_tokens = head.path_tokens + prepared.tokens
        try:
            try:
                row_id = connection.execute(
                    SqliteSql.append_insert,
                    (
                        self.session_id,
                        prepared.id,
                        head.next_seq,
                        head.parent_id,
                        prepared.role,
                        prepared.content,
                        depth,
                        prepared.tokens,
                        path_tokens,
                        utc_now(),
                        head.child_jump,
                    ),
                ).lastrowid
            except sqlite3.IntegrityError:
                if duplicate_ok:
                    return None
                raise
            if prepared.text:
                connection.execute(SqliteSql.pend_row, (row_id,))
            connection.execute(SqliteSql.append_head, (self.session_id, prepared.id, head.next_seq + 1))
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, self._database.busy_timeout) from error
        return depth, path_tokens


class _Head:
    """Where an append's row goes: its parent (None: a new root) with the parent's depth, estimate and jump."""

    __slots__ = ("child_jump", "depth", "next_seq", "parent_id", "path_tokens")

    def __init__(
        self, parent_id: str | None, next_seq: int, depth: int, path_tokens: int, child_jump: int | None
    ) -> None:
        self.parent_id = parent_id
        self.next_seq = next_seq
        self.depth = depth
        """The parent's depth; -1 for a new root."""
        self.path_tokens = path_tokens
        self.child_jump = child_jump
        """The new row's jump (history_pages): the parent's seq, or the parent's own jump."""


class _LastAppend:
    """The head the last append through a database left, and the marks that prove it still is.

    ``leaf`` is where a child of the new leaf goes (the leaf as its parent). ``changes`` is the
    connection's ``total_changes`` read as that append committed, and ``version`` its ``PRAGMA
    data_version`` read under the same write lock (None until an append has read it). A later
    append reading both equal, under the write lock, knows nothing was written since, so the
    session's leaf, next seq and overlay ends are these.
    """

    __slots__ = ("changes", "leaf", "session_id", "targets", "version")

    def __init__(
        self, *, session_id: str, leaf: _Head, targets: set[str] | None, changes: int, version: int | None
    ) -> None:
        self.session_id = session_id
        self.leaf = leaf
        self.targets = targets
        """The session's overlay ends (an append of one rebuilds estimates); None until read."""
        self.changes = changes
        self.version = version
