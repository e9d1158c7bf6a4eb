"""The message tree on PostgreSQL: the shared SQL logic with fewer network round trips.

On SQLite a statement costs microseconds; on PostgreSQL each one is a round trip (three,
for a statement with parameters, the way pg8000 sends them), more through RDS Proxy. The
shared :class:`SqlSessionProvider` runs about eight statements per append inside an
explicit transaction; here an append is one call of the ``threadloom_append`` function
(created by the migrations) that performs the same steps in the same order under the same
head-row lock, committed on its own; an edit and a deletion of one message are one call each
too. Hot reads are single statements for the same reason. Everything else, and the rare write
near a compaction overlay's end (its running token estimate must be rebuilt in Python), goes
through the shared code unchanged.

Over 400 lines because each write a function takes over keeps its way back to the shared code
beside it, where a reader checks that the two agree.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.compaction.overlays import apply_compactions
from threadloom.core.messages import parse_stored_message
from threadloom.errors import ConflictError, NotFoundError, SessionChangedError, StorageError
from threadloom.records import (
    OMITTED,
    AppendResult,
    HistorySlice,
    Message,
    Omitted,
    SearchResult,
    SessionInfo,
    StoredCompaction,
)
from threadloom.search import searchable_text, to_tsvector_literal
from threadloom.storage.database import to_timestamp_text
from threadloom.storage.history_pages import HistoryPageReader
from threadloom.storage.postgres.connection import sqlstate
from threadloom.storage.postgres.sql import PostgresSql
from threadloom.storage.registry import SqlSessionRegistry, _session_info
from threadloom.storage.tree import SqlSessionProvider, _child_page, _PreparedMessage, session_not_found

if TYPE_CHECKING:
    import builtins
    from collections.abc import Sequence

    from threadloom.storage.database import Params, Row
    from threadloom.storage.postgres.database import PostgresDatabase

# SQLSTATEs raised by threadloom_append (see migrations/0001_initial.sql).
_TAKE_GENERAL_PATH = "TL001"
_PARENT_MISSING = "TL404"
_LEAF_MOVED = "TL409"
_SUBJECT_CHANGED = "TL412"  # the registered appends of migration 0031 (an edit or a deletion answers 'subject')


class PostgresSessionProvider(SqlSessionProvider):
    """Session storage for one session id on PostgreSQL (same observable behaviour as SQLite)."""

    _database: PostgresDatabase

    MOVED_IN_ONE_CALL = 10_000
    """The most messages below a deleted or edited one that one call moves itself (about 0.3 s)."""

    def __init__(self, database: PostgresDatabase, session_id: str) -> None:
        super().__init__(database, PostgresSql, session_id)

    def _one_read(self, sql: str, **values: Any) -> list[list[Any]]:
        return self._database.query_once(sql, self._params(**values))

    # ------------------------------------------------------------------ reads

    def get_message(self, message_id: str) -> Message | None:
        rows = self._one_read(PostgresSql.get_message, id=message_id)
        return parse_stored_message(rows[0][0]) if rows else None

    def get_latest_leaf_id(self) -> str | None:
        rows = self._one_read(PostgresSql.get_head_leaf)
        return rows[0][0] if rows else None

    def get_latest_leaf(self) -> Message | None:
        rows = self._one_read(PostgresSql.latest_leaf_content)
        return parse_stored_message(rows[0][0]) if rows else None

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        """Root→leaf with overlays applied, read in one statement."""
        path: list[tuple[int, str]] = []
        compactions: list[StoredCompaction] = []
        for depth, content in self._one_read(PostgresSql.history, leaf=leaf_id):
            if depth >= 0:
                path.append((depth, content))
            else:
                compactions = [
                    StoredCompaction(
                        id=item[0],
                        summary=item[1],
                        from_message_id=item[2],
                        to_message_id=item[3],
                        created_at=item[4],
                    )
                    for item in json.loads(content)
                ]
        messages = _ordered_messages(path)
        return apply_compactions(messages, compactions) if compactions else messages

    def get_history_page(
        self,
        leaf_id: str | None,
        *,
        start: int = 0,
        limit: int,
        max_bytes: int,
        after_id: str | None = None,
        walk_from: tuple[int, str] | None = None,
        namespace: str | None = None,
        with_total: bool = False,
    ) -> HistorySlice:
        """As on SQLite, in one call of ``threadloom_history_page_in`` (0008) that also brings the overlays.

        Outside a transaction: one round trip for a page, unless an overlay crosses its edge or the
        byte budget left contents out (one more statement each). The same statement checks
        ``namespace`` and sends the page's rows as one JSON value. ``with_total`` (the first page) counts
        the history from the leaf depth and overlays that call brought, with no statement of its own
        unless an overlay's end must be located. A ``leaf_id`` of None reads from the session's head
        (``threadloom_history_page_at_head``, 0009): check, latest leaf and page in one round trip.
        """
        reader = HistoryPageReader(
            _OneStatementReads(self._database),
            PostgresSql,
            self.session_id,
            leaf_id=leaf_id,
            leaf_depth=None,
            compactions=None,
            namespace=namespace,
        )
        entries = reader.read(start, limit=limit, max_bytes=max_bytes, after_id=after_id, walk_from=walk_from)
        if reader.leaf_id is None:  # read from the head of a session without messages
            return HistorySlice(entries=[], path_length=0, total=0 if with_total else None)
        return HistorySlice(
            entries=entries,
            path_length=reader.path_length,
            next_anchor=reader.next_anchor,
            total=reader.count() if with_total else None,
            leaf_id=reader.leaf_id,
        )

    def get_raw_path(self, leaf_id: str | None = None) -> list[Message]:
        rows = self._one_read(PostgresSql.raw_path, leaf=leaf_id)
        return _ordered_messages([(depth, content) for depth, content in rows])

    def get_branches(self, message_id: str) -> list[Message]:
        rows = self._one_read(PostgresSql.get_children, id=message_id)
        return [message for (content,) in rows if (message := parse_stored_message(content)) is not None]

    def get_branch_page(
        self, message_id: str, *, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, Message | None]]:
        params = self._branch_params(message_id, after_seq, limit, max_bytes)
        return _child_page(self._database.query_once(PostgresSql.get_children_page, params))

    def get_path_length(self, leaf_id: str | None = None) -> int:
        rows = self._one_read(PostgresSql.leaf_depth, leaf=leaf_id)
        return int(rows[0][0]) + 1 if rows else 0

    def get_token_estimate(self, leaf_id: str | None = None) -> int:
        if leaf_id is None:
            rows = self._one_read(PostgresSql.get_leaf_estimate)
        else:
            rows = self._one_read(PostgresSql.message_estimate, id=leaf_id)
        return int(rows[0][0]) if rows else 0

    def get_compactions(self) -> list[StoredCompaction]:
        return [
            StoredCompaction(
                id=row[0],
                summary=row[1],
                from_message_id=row[2],
                to_message_id=row[3],
                created_at=to_timestamp_text(row[4]),
            )
            for row in self._one_read(PostgresSql.get_compactions)
        ]

    def get_latest_compaction_id(self) -> str | None:
        rows = self._one_read(PostgresSql.get_latest_compaction_id)
        return rows[0][0] if rows else None

    def search_messages(self, query: str, limit: int = 20) -> list[SearchResult]:
        match = PostgresSql.match_param(query)
        if match is None or limit <= 0:
            return []
        return [search_result(row) for row in self._one_read(PostgresSql.search_session, match=match, limit=int(limit))]

    # ----------------------------------------------------------------- writes

    def append_message(
        self,
        message: Message,
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> AppendResult:
        prepared = _PreparedMessage(message)
        rows = self._call_append([prepared], parent_id, expected_leaf_id, registered_in, expected_subject)
        if rows is None:
            return super().append_message(
                message,
                parent_id,
                expected_leaf_id=expected_leaf_id,
                registered_in=registered_in,
                expected_subject=expected_subject,
            )
        return _append_result(rows[0])

    def append_chain(
        self,
        messages: list[Message],
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> list[AppendResult]:
        # The one-statement function checks the expected leaf before every insert, which only fits a single
        # message; a guarded chain takes the shared path, which checks it once under the head lock.
        if not messages or expected_leaf_id is not None:
            return super().append_chain(
                messages,
                parent_id,
                expected_leaf_id=expected_leaf_id,
                registered_in=registered_in,
                expected_subject=expected_subject,
            )
        prepared = [_PreparedMessage(message) for message in messages]
        rows = self._call_append(prepared, parent_id, None, registered_in, expected_subject)
        if rows is None:
            return super().append_chain(
                messages, parent_id, registered_in=registered_in, expected_subject=expected_subject
            )
        return [_append_result(row) for row in rows]

    def update_message(
        self, message: Message, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None:
        """One call of ``threadloom_update_message`` (0027, 0029, 0031): one round trip, the tenant's check included.

        Returns the latest leaf's running estimate, which the same call reads. A message at or above
        the end of a compaction overlay whose estimate changes takes the shared path: that end's
        estimate is measured from its compacted history, here in Python. So does one whose estimate
        changes with more than :attr:`MOVED_IN_ONE_CALL` messages below it: the shared path writes
        their estimates in statements of a bounded size, each within the statement timeout.
        """
        prepared = _PreparedMessage(message)
        database = self._database
        params = self._params(
            namespace=registered_in,
            id=prepared.id,
            role=prepared.role,
            content=prepared.content,
            tokens=prepared.tokens,
            vector=to_tsvector_literal(prepared.text),
            max_below=self.MOVED_IN_ONE_CALL,
            **_subject_check(expected_subject),
        )
        answer: str = database.execute_once(PostgresSql.update_one, params)[0][0]
        outcome, _, leaf_tokens = answer.partition(":")
        if outcome == "updated":
            return int(leaf_tokens) if leaf_tokens else None
        if outcome == "session":
            raise session_not_found(self.session_id)
        if outcome == "message":
            raise NotFoundError(f"Message {prepared.id!r} not found in session {self.session_id!r}")
        if outcome == "subject":
            raise SessionChangedError.of(self.session_id)
        # 'overlay', 'large': nothing written
        return super().update_message(message, registered_in=registered_in, expected_subject=expected_subject)

    def delete_message(
        self, message_id: str, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None:
        """One call of ``threadloom_delete_message`` (0028, 0031): one round trip, the tenant's check and stamp in it.

        Returns the new leaf's running estimate, which the same call reads. A message with a compaction
        overlay starting or ending at or below it takes the shared path: the overlays it breaks go, and
        each remaining end's estimate is measured from its compacted history, here in Python. So does one
        with more than :attr:`MOVED_IN_ONE_CALL` messages below it, which the shared path moves in batches
        of statements, each within the statement timeout.
        """
        if not isinstance(message_id, str):
            raise NotFoundError(f"Message {message_id!r} not found in session {self.session_id!r}")
        params = self._params(
            namespace=registered_in,
            id=message_id,
            now=utc_now(),
            max_below=self.MOVED_IN_ONE_CALL,
            **_subject_check(expected_subject),
        )
        answer: str = self._database.execute_once(PostgresSql.delete_one, params)[0][0]
        outcome, _, leaf_tokens = answer.partition(":")
        if outcome == "deleted":
            return int(leaf_tokens) if leaf_tokens else None
        if outcome == "session":
            raise session_not_found(self.session_id)
        if outcome == "message":
            raise NotFoundError(f"Message {message_id!r} not found in session {self.session_id!r}")
        if outcome == "subject":
            raise SessionChangedError.of(self.session_id)
        # 'overlay', 'large': nothing written
        return super().delete_message(message_id, registered_in=registered_in, expected_subject=expected_subject)

    def _call_append(
        self,
        prepared: list[_PreparedMessage],
        parent_id: str | Omitted | None,
        expected_leaf_id: str | None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> list[list[Any]] | None:
        """Run the append function; rows of (id, parent, inserted, path tokens), or None: "take the shared path".

        With ``registered_in`` the function stamps the session's registry row in that namespace first
        and appends only if it is there (migration 0026), and with ``expected_subject`` only if the row's
        subject is that one (0031: ``TL412``, :class:`SessionChangedError`).
        """
        omitted = isinstance(parent_id, Omitted)
        database = self._database
        registered = registered_in is not None
        common: Params = self._params(
            parent_omitted=omitted,
            parent_id=None if omitted else parent_id,
            expected_leaf_id=expected_leaf_id,
            created_at=utc_now(),
            lock_timeout=database.lock_setting,
        )
        if registered:
            common["namespace"] = registered_in
            common.update(_subject_check(expected_subject))
        if len(prepared) == 1:
            [item] = prepared
            sql = PostgresSql.append_one_registered if registered else PostgresSql.append_one
            params: Params = {
                **common,
                "id": item.id,
                "role": item.role,
                "content": item.content,
                "tokens": item.tokens,
                "vector": to_tsvector_literal(item.text),
            }
        else:
            sql = PostgresSql.append_registered if registered else PostgresSql.append
            params = {
                **common,
                "ids": [item.id for item in prepared],
                "roles": [item.role for item in prepared],
                "contents": [item.content for item in prepared],
                "tokens": [item.tokens for item in prepared],
                "vectors": [to_tsvector_literal(item.text) for item in prepared],
            }
        try:
            rows = database.execute_once(sql, params, sets_own_lock_timeout=True)
        except StorageError as error:
            cause = error.__cause__
            code = sqlstate(cause) if cause is not None else None
            if code == _TAKE_GENERAL_PATH:
                return None
            if code == _LEAF_MOVED:
                leaf = json.loads(_detail(cause) or "{}").get("leaf")
                raise ConflictError(
                    f"Expected the latest leaf to be {expected_leaf_id!r} but it is {leaf!r}; reload and retry"
                ) from None
            if code == _SUBJECT_CHANGED:
                raise SessionChangedError.of(self.session_id) from None
            if code == _PARENT_MISSING:
                parent = _detail(cause)
                raise NotFoundError(f"Parent message {parent!r} not found in session {self.session_id!r}") from None
            raise
        if len(prepared) == 1:  # threadloom_append_message's 't' | 'f', path tokens, then ':' and the parent if any
            answer: str | None = rows[0][0]
            if answer is None:  # threadloom_append_registered_message: not this namespace's session
                raise session_not_found(self.session_id)
            path_tokens, has_parent, parent = answer[1:].partition(":")
            return [[prepared[0].id, parent if has_parent else None, answer[0] == "t", path_tokens]]
        if not rows and registered:  # threadloom_append_registered_within: not this namespace's
            raise session_not_found(self.session_id)
        return rows


class _OneStatementReads:
    """An executor for reads that runs each statement on its own (one round trip, no BEGIN/COMMIT)."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._database = database

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        return self._database.query_once(sql, params)  # type: ignore[return-value]

    def execute(self, sql: str, params: Params | None = None) -> None:
        raise StorageError("A one-statement reader does not write")

    def execute_all(self, statements: Sequence[tuple[str, Params]]) -> None:
        raise StorageError("A one-statement reader does not write")


def _subject_check(expected_subject: tuple[str | None] | None) -> dict[str, Any]:
    """The functions' ``p_check_subject`` and ``p_subject`` (migration 0031) for ``expected_subject``."""
    return {
        "check_subject": expected_subject is not None,
        "subject": expected_subject[0] if expected_subject is not None else None,
    }


def _append_result(row: list[Any]) -> AppendResult:
    tokens = row[3]
    return AppendResult(
        id=row[0], parent_id=row[1], inserted=bool(row[2]), path_tokens=int(tokens) if tokens is not None else None
    )


def _detail(error: BaseException | None) -> str | None:
    """The DETAIL field of a server error raised by threadloom_append."""
    fields = error.args[0] if error is not None and error.args and isinstance(error.args[0], dict) else {}
    detail = fields.get("D")
    return detail if isinstance(detail, str) else None


class PostgresSessionRegistry(SqlSessionRegistry):
    """The shared registry; search hits carry the searched text, rebuilt from the stored message."""

    def get(self, session_id: str) -> SessionInfo | None:
        """One statement, no transaction: every request checks its session this way (one round trip, not three)."""
        database: PostgresDatabase = self._database  # type: ignore[assignment]
        rows = database.query_once(PostgresSql.get_session, {"namespace": self.namespace, "id": session_id})
        return _session_info(tuple(rows[0])) if rows else None

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        match = PostgresSql.match_param(query)
        if match is None or limit <= 0:
            return []
        database: PostgresDatabase = self._database  # type: ignore[assignment]
        rows = database.query_once(
            PostgresSql.search_namespace, {"match": match, "namespace": self.namespace, "limit": int(limit)}
        )
        return [search_result(row) for row in rows]


def search_result(row: list[Any]) -> SearchResult:
    """A hit as SQLite reports it: ``content`` is the indexed text (the text parts joined)."""
    message = parse_stored_message(row[2])
    return SearchResult(
        id=row[0],
        role=row[1],
        content=searchable_text(message) if message is not None else "",
        created_at=to_timestamp_text(row[3]),
        session_id=row[4],
    )


def _ordered_messages(path: list[tuple[int, str]]) -> list[Message]:
    """Messages root first; the recursive query yields them leaf first, so this is a reverse."""
    path.sort(key=lambda item: item[0])
    return [message for _, content in path if (message := parse_stored_message(content)) is not None]
