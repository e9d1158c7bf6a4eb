"""The message tree on SQL, written once for every backend.

Design points (see contract §3 and §4):

- Every session has a head row. An append locks it inside its transaction, so
  concurrent appends without a parent form one chain (each sees the leaf left by
  the previous commit) and appends to other sessions are not blocked.
- The head row caches the latest leaf. A newly inserted message is by definition
  the most recently inserted childless one, so appends keep it exact in O(1);
  only deletes fall back to a scan.
- Each row stores its depth and ``path_tokens``, the token estimate of the
  history ending at it (overlays applied). Appends compute both from the parent
  row, so path length and the auto-compaction estimate never read the history.
  Operations that change a subtree (overlays, updates, deletes) recompute that
  subtree only.

Over 400 lines because the invariants above are kept by the same transactions; paged history reads
are in ``history_pages.py``.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.compaction.markers import now_iso
from threadloom.compaction.overlays import apply_compactions, compaction_message, overlay_ranges
from threadloom.core.messages import message_digest, parse_stored_message, serialize_message, validate_message
from threadloom.errors import (
    CompactionAlreadyStoredError,
    ConflictError,
    NotFoundError,
    SessionChangedError,
    SessionNotFoundError,
    ValidationError,
)
from threadloom.limits import HARD_LIMITS
from threadloom.records import (
    OMITTED,
    AppendResult,
    CompactionFence,
    HistorySlice,
    Message,
    Omitted,
    SearchResult,
    StoredCompaction,
)
from threadloom.search import searchable_text
from threadloom.storage.database import to_timestamp_text
from threadloom.storage.dialect import JUMP_SPAN
from threadloom.storage.history_pages import HistoryPageReader
from threadloom.tokens import estimate_message_tokens, estimate_single_message_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.limits import Limits
    from threadloom.storage.database import Database, Executor, Params
    from threadloom.storage.dialect import SqlDialect
    from threadloom.storage.snapshot import CompactionRow, MessageRow


NO_BYTE_LIMIT = 2**62
"""A byte budget no page reaches (reads without ``max_bytes``)."""

ESTIMATES_PER_STATEMENT = 10_000
"""The most running estimates one statement rewrites after an edit (about 0.3 s), so each stays within the
statement timeout however large the subtree; the statements go together, many to a round trip."""


class SqlSessionProvider:
    """Session storage for one session id on a SQL backend (SQLite or PostgreSQL)."""

    def __init__(self, database: Database, sql: type[SqlDialect], session_id: str) -> None:
        self._database = database
        self._sql = sql
        self.session_id = session_id

    def _params(self, **values: Any) -> dict[str, Any]:
        return {"sid": self.session_id, **values}

    def stamp_registered(self, tx: Executor, namespace: str, expected_subject: tuple[str | None] | None = None) -> None:
        """Stamp the session's activity in ``namespace``'s registry, first in an append's transaction.

        The registry row is locked before the head row, the order a session's deletion takes them in.
        ``expected_subject`` (a 1-tuple): the subject the caller's blocks are wired for; another one in the
        row (the session deleted and opened again for another subject) is :class:`SessionChangedError`.
        """
        params = {"namespace": namespace, "id": self.session_id, "now": utc_now()}
        rows = tx.query(self._sql.touch_session, params)
        if not rows:
            raise session_not_found(self.session_id)
        if expected_subject is not None and rows[0][0] != expected_subject[0]:
            raise SessionChangedError.of(self.session_id)

    def check_registered(self, tx: Executor, namespace: str, expected_subject: tuple[str | None] | None = None) -> None:
        """Refuse (:class:`SessionNotFoundError`) unless ``namespace``'s registry holds the session
        (:class:`SessionChangedError` unless with ``expected_subject``'s subject, when given)."""
        rows = tx.query(self._sql.session_subject, {"namespace": namespace, "id": self.session_id})
        if not rows:
            raise session_not_found(self.session_id)
        if expected_subject is not None and rows[0][0] != expected_subject[0]:
            raise SessionChangedError.of(self.session_id)

    def get_message_in(self, namespace: str, message_id: str) -> Message | None:
        """:meth:`get_message` of a session ``namespace`` holds (else :class:`SessionNotFoundError`), one statement.

        Its rows are found by their keys (the session's, the message's): it cannot run long, so it goes alone.
        """
        params = self._params(namespace=namespace, id=message_id)
        return self._found_in(self._database.query_once(self._sql.get_message_in_namespace, params, by_key=True))

    def get_latest_leaf_in(self, namespace: str) -> Message | None:
        """:meth:`get_latest_leaf` of a session ``namespace`` holds (else :class:`SessionNotFoundError`)."""
        params = self._params(namespace=namespace)
        return self._found_in(self._database.query_once(self._sql.get_latest_leaf_in_namespace, params, by_key=True))

    def _found_in(self, rows: Sequence[Sequence[Any]]) -> Message | None:
        if not rows:
            raise session_not_found(self.session_id)
        content = rows[0][0]
        return parse_stored_message(content) if content is not None else None

    # ------------------------------------------------------------------ reads

    def get_message(self, message_id: str) -> Message | None:
        rows = self._database.query_once(self._sql.get_message, self._params(id=message_id))
        return parse_stored_message(rows[0][0]) if rows else None

    def get_latest_leaf_id(self) -> str | None:
        rows = self._database.query_once(self._sql.get_head_leaf, self._params())
        return rows[0][0] if rows else None

    def get_latest_leaf(self) -> Message | None:
        with self._database.read() as tx:
            rows = tx.query(self._sql.get_head_leaf, self._params())
            if not rows or rows[0][0] is None:
                return None
            content = tx.query(self._sql.get_message, self._params(id=rows[0][0]))
        return parse_stored_message(content[0][0]) if content else None

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        with self._database.read() as tx:
            return self._history(tx, leaf_id)

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
        """The items of ``get_history(leaf_id)`` from raw depth ``start``: at most ``limit`` and ``max_bytes``.

        Costs O(page), not O(path) (see :mod:`threadloom.storage.history_pages`). ``after_id`` is the
        message the previous page ended on; :class:`ConflictError` when it moved, :class:`NotFoundError`
        when the leaf is gone. ``walk_from`` is the previous page's ``next_anchor`` (a checked shortcut).
        With ``namespace``, a session outside it is a :class:`SessionNotFoundError` and nothing of it
        is read: the caller needs no registry read of its own. With ``with_total`` the slice also
        carries ``count_history(leaf_id)``, counted from what the page read already knows. A
        ``leaf_id`` of None reads the latest leaf's history (empty when there are no messages).
        """
        with self._database.read() as tx:
            if namespace is not None and not tx.query(
                self._sql.get_session, {"namespace": namespace, "id": self.session_id}
            ):
                raise SessionNotFoundError(f"Session {self.session_id!r} not found")
            if leaf_id is None:
                head = tx.query(self._sql.get_head_leaf, self._params())
                leaf_id = head[0][0] if head else None
                if leaf_id is None:
                    return HistorySlice(entries=[], path_length=0, total=0 if with_total else None)
            reader = HistoryPageReader(
                tx, self._sql, self.session_id, leaf_id=leaf_id, leaf_depth=None, compactions=self._compactions(tx)
            )
            entries = reader.read(start, limit=limit, max_bytes=max_bytes, after_id=after_id, walk_from=walk_from)
            total = reader.count() if with_total else None
        return HistorySlice(
            entries=entries,
            path_length=reader.path_length,
            next_anchor=reader.next_anchor,
            total=total,
            leaf_id=leaf_id,
        )

    def count_history(self, leaf_id: str) -> int:
        """``len(get_history(leaf_id))`` without reading the history: the path length minus what overlays hide."""
        with self._database.read() as tx:
            meta = tx.query(self._sql.get_message_meta, self._params(id=leaf_id))
            if not meta:
                raise NotFoundError(f"Message {leaf_id!r} not found in session {self.session_id!r}")
            reader = HistoryPageReader(
                tx,
                self._sql,
                self.session_id,
                leaf_id=leaf_id,
                leaf_depth=int(meta[0][1]),
                compactions=self._compactions(tx),
            )
            return reader.count()

    def get_raw_path(self, leaf_id: str | None = None) -> list[Message]:
        """The path root→leaf without overlays (what the compaction worker and skill scans need)."""
        with self._database.read() as tx:
            leaf = self._resolve_leaf(tx, leaf_id)
            return self._path_messages(tx, leaf) if leaf else []

    def get_branches(self, message_id: str) -> list[Message]:
        rows = self._database.query_once(self._sql.get_children, self._params(id=message_id))
        return [message for (content,) in rows if (message := parse_stored_message(content)) is not None]

    def get_branch_page(
        self, message_id: str, *, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, Message | None]]:
        """Up to ``limit`` children of ``message_id`` inserted after ``after_seq``, oldest first, with their seq.

        A keyset read on the ``(session_id, parent_id, seq)`` index: O(page) however many children there are.
        Past ``max_bytes`` of stored JSON (the first child always comes) a child's message is None: it
        exists, but was not read.
        """
        rows = self._database.query_once(
            self._sql.get_children_page, self._branch_params(message_id, after_seq, limit, max_bytes)
        )
        return _child_page(rows)

    def _branch_params(self, message_id: str, after_seq: int, limit: int, max_bytes: int | None) -> dict[str, Any]:
        budget = NO_BYTE_LIMIT if max_bytes is None else max_bytes
        return self._params(id=message_id, after_seq=after_seq, limit=limit, budget=budget)

    def get_tree_skeleton(self) -> list[tuple[str, str | None]]:
        """Every message's ``(id, parent_id)`` in insertion order, without content (one query)."""
        rows = self._database.query_once(self._sql.tree_skeleton, self._params())
        return [(str(row[0]), None if row[1] is None else str(row[1])) for row in rows]

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """Raw number of rows root→leaf (overlays ignored, as in the reference); O(1) via the stored depth."""
        with self._database.read() as tx:
            leaf = self._resolve_leaf(tx, leaf_id)
            if leaf is None:
                return 0
            meta = tx.query(self._sql.get_message_meta, self._params(id=leaf))
        return int(meta[0][1]) + 1 if meta else 0

    def get_token_estimate(self, leaf_id: str | None = None) -> int:
        """Heuristic tokens of ``get_history(leaf_id)`` (overlays applied), read from one row."""
        with self._database.read() as tx:
            if leaf_id is None:
                rows = tx.query(self._sql.get_leaf_estimate, self._params())
            else:
                meta = tx.query(self._sql.get_message_meta, self._params(id=leaf_id))
                rows = [(meta[0][3],)] if meta else []
        return int(rows[0][0]) if rows else 0

    def get_compactions(self) -> list[StoredCompaction]:
        return [_stored_compaction(row) for row in self._database.query_once(self._sql.get_compactions, self._params())]

    def get_latest_compaction_id(self) -> str | None:
        rows = self._database.query_once(self._sql.get_latest_compaction_id, self._params())
        return rows[0][0] if rows else None

    def get_compaction_by_request(self, request_key: str) -> StoredCompaction | None:
        """The overlay stored under ``request_key``, if any: lets a worker skip a redelivered request cheaply."""
        rows = self._database.query_once(self._sql.find_compaction_by_request, self._params(request_key=request_key))
        return _stored_compaction(rows[0]) if rows else None

    def search_messages(self, query: str, limit: int = 20) -> list[SearchResult]:
        """D5 search within this session; a query without searchable words returns []."""
        match = self._sql.match_param(query)
        if match is None or limit <= 0:
            return []
        self._sql.prepare_message_search(self._database)
        statement = self._sql.message_search_statement(
            self._database, self._sql.search_session, session_id=self.session_id
        )
        if statement is None:
            return []
        rows = self._database.query_once(statement, self._params(match=match, limit=int(limit)))
        return [_search_result(row) for row in rows]

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
        """Insert ``message`` under the head lock; a message id already stored is a no-op (first write wins).

        With ``registered_in`` the append is a manager's: in the same transaction it stamps the
        session's activity in that namespace's registry, and refuses (``SessionNotFoundError``,
        nothing written) when the namespace does not hold the session, or (``SessionChangedError``)
        when its subject is not ``expected_subject``'s (given: the subject the caller wired blocks for).
        """
        prepared = _PreparedMessage(message)
        with self._database.write() as tx:
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            leaf_id, next_seq = self._lock_head(tx)
            targets = self._compaction_targets(tx)
            result = self._insert(
                tx,
                prepared,
                parent_id,
                leaf_id=leaf_id,
                seq=next_seq,
                targets=targets,
                expected_leaf_id=expected_leaf_id,
            )
            if result.inserted:
                tx.execute(self._sql.set_head, self._params(leaf=result.id, next_seq=next_seq + 1))
        return result

    def append_chain(
        self,
        messages: list[Message],
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> list[AppendResult]:
        """Append ``messages`` as one chain in one transaction (all or nothing); one result per message.

        The first message takes ``parent_id`` (omitted: the latest leaf, D10); each
        next one hangs under the previous. An id already stored is skipped but still
        chains, as in the reference. ``expected_leaf_id`` is compared with the leaf
        read under the head lock, before the chain's first insert, exactly as for one append.
        ``registered_in``, ``expected_subject``: as for :meth:`append_message`, even for an empty chain.
        """
        prepared = [_PreparedMessage(message) for message in messages]
        results: list[AppendResult] = []
        with self._database.write() as tx:
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            leaf_id, next_seq = self._lock_head(tx)
            targets = self._compaction_targets(tx)
            parent: str | Omitted | None = parent_id
            inserted_any = False
            for item in prepared:
                result = self._insert(
                    tx,
                    item,
                    parent,
                    leaf_id=leaf_id,
                    seq=next_seq,
                    targets=targets,
                    expected_leaf_id=None if inserted_any else expected_leaf_id,
                )
                if result.inserted:
                    leaf_id, next_seq, inserted_any = result.id, next_seq + 1, True
                parent = result.id
                results.append(result)
            if inserted_any:
                tx.execute(self._sql.set_head, self._params(leaf=leaf_id, next_seq=next_seq))
        return results

    def _insert(
        self,
        tx: Executor,
        prepared: _PreparedMessage,
        parent_id: str | Omitted | None,
        *,
        leaf_id: str | None,
        seq: int,
        targets: set[str],
        expected_leaf_id: str | None,
    ) -> AppendResult:
        message_id = prepared.id
        existing = tx.query(self._sql.get_message_meta, self._params(id=message_id))
        if existing:
            return AppendResult(id=message_id, parent_id=existing[0][0], inserted=False)
        if expected_leaf_id is not None and expected_leaf_id != leaf_id:
            raise leaf_moved(expected_leaf_id, leaf_id)
        parent = leaf_id if isinstance(parent_id, Omitted) else (parent_id or None)
        depth, path_tokens, jump = 0, prepared.tokens, None
        if parent is not None:
            parent_meta = tx.query(self._sql.get_message_meta, self._params(id=parent))
            if not parent_meta:
                raise NotFoundError(f"Parent message {parent!r} not found in session {self.session_id!r}")
            depth, path_tokens = int(parent_meta[0][1]) + 1, int(parent_meta[0][3]) + prepared.tokens
            jump = parent_meta[0][5] if int(parent_meta[0][1]) % JUMP_SPAN == 0 else parent_meta[0][4]
        tx.execute(
            self._sql.insert_message,
            self._params(
                id=message_id,
                seq=seq,
                parent_id=parent,
                role=prepared.role,
                content=prepared.content,
                depth=depth,
                tokens=prepared.tokens,
                path_tokens=path_tokens,
                created_at=utc_now(),
                jump=jump,
            ),
        )
        tx.execute(self._sql.index_message, self._params(id=message_id, **self._sql.index_params(prepared.text)))
        if message_id in targets:
            self._recompute_subtrees(tx, [message_id])
            return AppendResult(id=message_id, parent_id=parent, inserted=True)  # estimate rebuilt: read it back
        return AppendResult(id=message_id, parent_id=parent, inserted=True, path_tokens=path_tokens)

    def update_message(
        self, message: Message, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None:
        """Replace a stored message's content (matched by id); an unknown id raises :class:`NotFoundError`.

        With ``registered_in`` (a manager's edit) the same transaction first checks that the namespace's
        registry holds the session, else :class:`SessionNotFoundError` and nothing is written (and, with
        ``expected_subject``, that the session has that subject, else :class:`SessionChangedError`); an
        edit does not stamp the session's activity. Returns None: the latest leaf's estimate is not known here
        (PostgreSQL's one-call edit returns it).
        """
        prepared = _PreparedMessage(message)
        content, text = prepared.content, prepared.text
        with self._database.write() as tx:
            if registered_in is not None:
                self.check_registered(tx, registered_in, expected_subject)
            self._lock_head(tx)
            meta = tx.query(self._sql.get_message_meta, self._params(id=message["id"]))
            if not meta:
                raise NotFoundError(f"Message {message['id']!r} not found in session {self.session_id!r}")
            tokens = prepared.tokens
            if self._sql.unindex_message:
                tx.execute(self._sql.unindex_message, self._params(id=message["id"]))
            tx.execute(
                self._sql.update_message,
                self._params(id=message["id"], role=message["role"], content=content, tokens=tokens),
            )
            tx.execute(self._sql.index_message, self._params(id=message["id"], **self._sql.index_params(text)))
            if tokens != int(meta[0][2]):
                self._recompute_subtrees(tx, [message["id"]])
        return None

    def delete_messages(
        self,
        message_ids: list[str],
        *,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> None:
        """Delete messages; children move to the nearest surviving ancestor and broken overlays go (D4).

        With ``registered_in`` (a manager's deletion) the same transaction first stamps the session's
        activity in that namespace's registry, else :class:`SessionNotFoundError` and nothing is written;
        ``expected_subject`` as for :meth:`append_message`.
        """
        doomed = {message_id for message_id in message_ids if isinstance(message_id, str)}
        if not doomed and registered_in is None:
            return
        with self._database.write() as tx:
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            if doomed:
                self._lock_head(tx)
                self._delete_locked(tx, doomed)

    def delete_message(
        self, message_id: str, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None:
        """Delete one stored message as :meth:`delete_messages` does, or raise :class:`NotFoundError`.

        With ``registered_in`` (a manager's deletion) the same transaction first stamps the session's
        activity in that namespace's registry, else :class:`SessionNotFoundError` and nothing is written;
        a refused deletion rolls the stamp back. Returns None: the new leaf's estimate is not known here
        (PostgreSQL's one-call deletion returns it).
        """
        if not isinstance(message_id, str):
            raise NotFoundError(f"Message {message_id!r} not found in session {self.session_id!r}")
        with self._database.write() as tx:
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            self._lock_head(tx)
            if not self._delete_locked(tx, {message_id}):
                raise NotFoundError(f"Message {message_id!r} not found in session {self.session_id!r}")
        return None

    def _delete_locked(self, tx: Executor, doomed: set[str]) -> bool:
        """Delete the stored ones of ``doomed`` under the head's lock; whether any was stored."""
        parents: dict[str, str | None] = {}
        for message_id in doomed:
            meta = tx.query(self._sql.get_message_meta, self._params(id=message_id))
            if meta:
                parents[message_id] = meta[0][0]
        if not parents:
            return False

        def surviving_ancestor(message_id: str) -> str | None:
            ancestor = parents[message_id]
            while ancestor is not None and ancestor in parents:
                ancestor = parents[ancestor]
            return ancestor

        moved: list[str] = []
        for message_id in parents:
            for (child,) in tx.query(self._sql.get_child_ids, self._params(id=message_id)):
                if child not in parents:
                    tx.execute(
                        self._sql.reparent_message,
                        self._params(id=child, parent_id=surviving_ancestor(message_id)),
                    )
                    moved.append(child)
        affected = set(moved)
        for message_id in parents:
            for compaction_id, from_id, to_id in tx.query(self._sql.compactions_touching, self._params(id=message_id)):
                tx.execute(self._sql.delete_compaction, self._params(id=compaction_id))
                affected.update(node for node in (from_id, to_id) if node not in parents)
            if self._sql.unindex_message:
                tx.execute(self._sql.unindex_message, self._params(id=message_id))
            tx.execute(self._sql.delete_message, self._params(id=message_id))
        self._recompute_subtrees(tx, sorted(affected))
        self._rescan_leaf(tx)
        return True

    def clear_messages(
        self, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> None:
        """Remove every message, index row and overlay of the session (``registered_in``, ``expected_subject``:
        as for deletions)."""
        with self._database.write() as tx:
            if registered_in is not None:
                self.stamp_registered(tx, registered_in, expected_subject)
            self._lock_head(tx)
            statements = [self._sql.clear_messages, self._sql.clear_compactions, self._sql.clear_head]
            if self._sql.unindex_session:
                statements.insert(0, self._sql.unindex_session)
            tx.execute_all([(statement, self._params()) for statement in statements])  # one round trip

    def add_compaction(
        self,
        summary: str,
        from_message_id: str,
        to_message_id: str,
        *,
        request_key: str | None = None,
        fence: CompactionFence | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> StoredCompaction:
        """Store an overlay. With a ``fence`` it commits only if the snapshot it was computed from still holds.

        A ``request_key`` already used in this session returns the overlay stored then
        (a redelivered compaction request changes nothing). With a ``fence`` as well (two
        workers racing on one request) it raises :class:`CompactionAlreadyStoredError`
        instead, so only the worker whose overlay committed reports a compaction.
        ``registered_in``, ``expected_subject``: as for :meth:`update_message`, so a summary made while
        the session was deleted and opened again for another subject is not stored in the new one.
        """
        if not isinstance(summary, str) or not isinstance(from_message_id, str) or not isinstance(to_message_id, str):
            raise ValidationError("A compaction needs a string summary, from_message_id and to_message_id")
        with self._database.write() as tx:
            _, next_seq = self._lock_head(tx)
            if registered_in is not None:
                self.check_registered(tx, registered_in, expected_subject)
            if request_key is not None:
                rows = tx.query(self._sql.find_compaction_by_request, self._params(request_key=request_key))
                if rows:
                    if fence is not None:
                        raise CompactionAlreadyStoredError(
                            f"Compaction request {request_key!r} was already stored by another worker"
                        )
                    return _stored_compaction(rows[0])
            if fence is not None:
                self._check_fence(tx, fence, from_message_id, to_message_id)
            stored = StoredCompaction(
                id=str(uuid.uuid4()),
                summary=summary,
                from_message_id=from_message_id,
                to_message_id=to_message_id,
                created_at=utc_now(),
            )
            tx.execute(
                self._sql.insert_compaction,
                self._params(
                    id=stored.id,
                    seq=next_seq,
                    summary=summary,
                    from_id=from_message_id,
                    to_id=to_message_id,
                    request_key=request_key,
                    created_at=stored.created_at,
                ),
            )
            tx.execute(self._sql.set_head_seq_only, self._params(next_seq=next_seq + 1))
            if tx.query(self._sql.get_message_meta, self._params(id=to_message_id)):
                self._recompute_subtrees(tx, [to_message_id])
        return stored

    def copy_history(self, at_message_id: str, target_session_id: str, *, limits: Limits = HARD_LIMITS) -> list[str]:
        """Copy ``get_history(at_message_id)`` into the empty session ``target_session_id``, inside the database.

        What a fork used to do through the client, minus the round trips: overlays are materialized
        as their summary messages, every message gets a new id (in its stored JSON too), the copy is
        one chain from a new root, and depth, running token estimates and the search index are what
        appending the same messages would have built. One transaction; the path is walked and copied
        by a few statements whatever its length. Returns the new ids, root first.
        """
        with self._database.write() as tx:
            meta = tx.query(self._sql.get_message_meta, self._params(id=at_message_id))
            if not meta:
                raise NotFoundError(f"Message {at_message_id!r} not found in session {self.session_id!r}")
            last = int(meta[0][1])  # the fork point's depth: the path holds last + 1 messages
            ranges: list[tuple[int, int, StoredCompaction]] = []
            compactions = self._compactions(tx)
            if compactions:
                ends = tx.query(self._sql.path_overlay_ends, self._params(leaf=at_message_id))
                ranges = overlay_ranges({str(row[0]): int(row[1]) for row in ends}, compactions)
            plan = _CopyPlan(last, ranges)
            limits.check_fork_size(plan.size, at_message_id)
            prefix = str(uuid.uuid4())[:28]
            new_ids = [f"{prefix}{position:08x}" for position in range(plan.size)]
            copy = {
                "sid": self.session_id,
                "leaf": at_message_id,
                "target": target_session_id,
                "prefix": prefix,
                "segments": json.dumps(plan.segments),
                "created_at": utc_now(),
            }
            tx.execute(self._sql.copy_path, copy)
            for statement in self._sql.index_copied_path:
                tx.execute(statement, copy)
            for position, prepared in plan.summaries(new_ids):
                before = (
                    tx.query(self._sql.get_message_meta, {"sid": target_session_id, "id": new_ids[position - 1]})
                    if position
                    else []
                )
                row = {
                    "sid": target_session_id,
                    "id": prepared.id,
                    "seq": position + 1,
                    "parent_id": new_ids[position - 1] if position else None,
                    "role": prepared.role,
                    "content": prepared.content,
                    "depth": position,
                    "tokens": prepared.tokens,
                    "path_tokens": (int(before[0][3]) if before else 0) + prepared.tokens,
                    "created_at": copy["created_at"],
                    "jump": ((position - 1) // JUMP_SPAN) * JUMP_SPAN + 1 if position else None,
                }
                tx.execute(self._sql.insert_message, row)
                tx.execute(self._sql.index_message, {**row, **self._sql.index_params(prepared.text)})
            tx.execute(
                self._sql.set_copied_head, {"target": target_session_id, "leaf": new_ids[-1], "next_seq": plan.size + 1}
            )
        return new_ids

    def restore(
        self,
        tx: Executor,
        rows: list[MessageRow],
        compactions: list[CompactionRow],
        *,
        leaf_id: str | None,
        next_seq: int,
    ) -> None:
        """Write an exported tree back row for row (import), inside the caller's transaction.

        Ids, insertion order, timestamps and overlays are kept; depth, token estimates and
        the search index are rebuilt exactly as appends would have built them.
        """
        tx.execute(self._sql.import_head, self._params(leaf=leaf_id, next_seq=next_seq))
        overlays = [
            StoredCompaction(c.id, c.summary, c.from_message_id, c.to_message_id, c.created_at) for c in compactions
        ]
        targets = {overlay.to_message_id for overlay in overlays}
        parents: dict[str, str | None] = {}
        messages: dict[str, Message] = {}
        estimates: dict[str, tuple[int, int]] = {}
        for row in sorted(rows, key=lambda item: item.seq):
            prepared = _PreparedMessage(row.message)
            depth, path_tokens = 0, prepared.tokens
            if row.parent_id is not None:
                parent = estimates.get(row.parent_id)
                if parent is None:
                    raise ValidationError(f"Message {row.id!r} comes before its parent {row.parent_id!r}")
                depth, path_tokens = parent[0] + 1, parent[1] + prepared.tokens
            parents[row.id], messages[row.id] = row.parent_id, row.message
            if row.id in targets:  # the end of an overlay: measure its history with overlays applied
                path = [row.id]
                while (up := parents[path[-1]]) is not None:
                    path.append(up)
                path_tokens = estimate_message_tokens(
                    apply_compactions([messages[i] for i in reversed(path)], overlays)
                )
            estimates[row.id] = (depth, path_tokens)
            values = self._params(
                id=row.id,
                seq=row.seq,
                parent_id=row.parent_id,
                role=prepared.role,
                content=prepared.content,
                depth=depth,
                tokens=prepared.tokens,
                path_tokens=path_tokens,
                created_at=row.created_at,
                jump=None,  # filled by the database's trigger from the parent written just before
                **self._sql.index_params(prepared.text),
            )
            if self._sql.insert_message_indexed:  # one statement where the index lives in the row
                tx.execute(self._sql.insert_message_indexed, values)
            else:
                tx.execute(self._sql.insert_message, values)
                tx.execute(self._sql.index_message, values)
        for compaction in compactions:
            tx.execute(
                self._sql.insert_compaction,
                self._params(
                    id=compaction.id,
                    seq=compaction.seq,
                    summary=compaction.summary,
                    from_id=compaction.from_message_id,
                    to_id=compaction.to_message_id,
                    request_key=compaction.request_key,
                    created_at=compaction.created_at,
                ),
            )

    # ---------------------------------------------------------------- helpers

    def _lock_head(self, tx: Executor) -> tuple[str | None, int]:
        tx.execute(self._sql.ensure_head, self._params())
        row = tx.query(self._sql.lock_head, self._params())[0]
        return row[0], int(row[1])

    def _resolve_leaf(self, tx: Executor, leaf_id: str | None) -> str | None:
        if leaf_id:
            return leaf_id if tx.query(self._sql.get_message_meta, self._params(id=leaf_id)) else None
        rows = tx.query(self._sql.get_head_leaf, self._params())
        return rows[0][0] if rows else None

    def _path_messages(self, tx: Executor, leaf_id: str) -> list[Message]:
        rows = tx.query(self._sql.path_rows, self._params(leaf=leaf_id))
        return [message for (_, content) in rows if (message := parse_stored_message(content)) is not None]

    def _history(self, tx: Executor, leaf_id: str | None) -> list[Message]:
        leaf = self._resolve_leaf(tx, leaf_id)
        if leaf is None:
            return []
        messages = self._path_messages(tx, leaf)
        compactions = self._compactions(tx)
        return apply_compactions(messages, compactions) if compactions else messages

    def _compactions(self, tx: Executor) -> list[StoredCompaction]:
        return [_stored_compaction(row) for row in tx.query(self._sql.get_compactions, self._params())]

    def _compaction_targets(self, tx: Executor) -> set[str]:
        return {row[0] for row in tx.query(self._sql.get_compaction_targets, self._params())}

    def _is_ancestor_or_self(self, tx: Executor, ancestor: str, descendant: str) -> bool:
        ancestor_meta = tx.query(self._sql.get_message_meta, self._params(id=ancestor))
        descendant_meta = tx.query(self._sql.get_message_meta, self._params(id=descendant))
        if not ancestor_meta or not descendant_meta:
            return False
        steps = int(descendant_meta[0][1]) - int(ancestor_meta[0][1])
        if steps < 0:
            return False
        walk = tx.query(self._sql.path_ids_up, self._params(start=descendant, max_steps=steps))
        return len(walk) == steps + 1 and walk[-1][0] == ancestor

    def _check_fence(self, tx: Executor, fence: CompactionFence, from_id: str, to_id: str) -> None:
        latest = tx.query(self._sql.get_latest_compaction_id, self._params())
        if (latest[0][0] if latest else None) != fence.latest_compaction_id:
            raise ConflictError("Another compaction committed since this one read the history")
        if not self._is_ancestor_or_self(tx, to_id, fence.leaf_id):
            raise ConflictError(f"Message {to_id!r} is no longer on the compacted branch")
        if not self._is_ancestor_or_self(tx, from_id, to_id):
            raise ConflictError(f"Message {from_id!r} is not an ancestor of {to_id!r}")
        if fence.messages:  # under the head's lock, which every edit and deletion takes too
            stored = {str(row[0]): str(row[3]) for row in tx.query(self._sql.export_messages, self._params())}
            for message_id, digest in fence.messages:
                content = stored.get(message_id)
                message = parse_stored_message(content) if content is not None else None
                if message is None or message_digest(message) != digest:
                    raise ConflictError(f"Message {message_id!r} was changed or removed since this compaction read it")

    def _rescan_leaf(self, tx: Executor) -> None:
        rows = tx.query(self._sql.find_latest_leaf, self._params())
        tx.execute(self._sql.set_head_leaf_only, self._params(leaf=rows[0][0] if rows else None))

    def _recompute_subtrees(self, tx: Executor, roots: list[str]) -> None:
        """Recompute depth and path_tokens below ``roots`` after the tree or an overlay changed.

        A node's estimate is its parent's plus its own tokens, unless it is the end of
        some overlay; only then is its history rebuilt and measured. A pass's rows are written
        before the next pass reads them: when no depth moves (an edit) in statements of at most
        ``ESTIMATES_PER_STATEMENT`` rows, else one statement a row, parents first; either way many to a
        round trip on PostgreSQL (``execute_all``). An edit of an early message of a 10,000-message
        session used to take 10,000 round trips.
        """
        targets = self._compaction_targets(tx)
        done: set[str] = set()
        depth_of: dict[str, int] = {}
        for root in roots:
            meta = tx.query(self._sql.get_message_meta, self._params(id=root))
            if meta:
                depth_of[root] = int(meta[0][1])
        # Ancestors first: a descendant root is then recomputed inside its ancestor's pass.
        for root in sorted(depth_of, key=depth_of.__getitem__):
            if root in done:
                continue
            computed: dict[str, tuple[int, int]] = {}
            estimates: list[tuple[str, Params]] = []
            moved = False
            for node, parent, tokens, stored_depth in tx.query(self._sql.subtree, self._params(root=root)):
                if node in done:
                    continue
                base: tuple[int, int] = (-1, 0)
                if parent is not None:
                    known = computed.get(parent)
                    if known is None:
                        parent_meta = tx.query(self._sql.get_message_meta, self._params(id=parent))
                        known = (int(parent_meta[0][1]), int(parent_meta[0][3])) if parent_meta else (-1, 0)
                    base = known
                depth = base[0] + 1
                if node in targets:
                    path_tokens = estimate_message_tokens(self._history(tx, node))
                else:
                    path_tokens = base[1] + int(tokens)
                computed[node] = (depth, path_tokens)
                moved = moved or depth != int(stored_depth)
                estimates.append((self._sql.set_estimate, self._params(id=node, depth=depth, path_tokens=path_tokens)))
                done.add(node)
            if estimates and not moved and self._sql.set_path_tokens:  # an edit: depths stay, a few statements
                rows = [[params["id"], params["path_tokens"]] for _, params in estimates]
                tx.execute_all(
                    [
                        (
                            self._sql.set_path_tokens,
                            self._params(rows=json.dumps(rows[start : start + ESTIMATES_PER_STATEMENT])),
                        )
                        for start in range(0, len(rows), ESTIMATES_PER_STATEMENT)
                    ]
                )
            else:  # one statement a row, in order: the jump-pointer trigger reads each row's parent
                tx.execute_all(estimates)


class _PreparedMessage:
    """A validated message with everything computed outside the transaction (keeps lock time short)."""

    __slots__ = ("content", "id", "role", "text", "tokens")

    def __init__(self, message: Message) -> None:
        validate_message(message)
        self.id: str = message["id"]
        self.role: str = message["role"]
        try:
            self.content = serialize_message(message)
            self.tokens = estimate_single_message_tokens(message)
            self.text = searchable_text(message)
        except RecursionError:
            raise ValidationError(f"Message {self.id!r} is nested too deeply to store") from None
        # validate_message already refused NUL characters and lone surrogates in every string.


class _CopyPlan:
    """Where each message of a path lands in a fork: kept stretches shift up past the overlaid ranges.

    ``segments`` is what the copy statement joins on: old depths ``a..b`` land at depth + ``o``,
    after ``t`` tokens of overlay summaries. Each overlaid range ``from..to`` becomes one summary
    message at ``from``'s new position, as :func:`apply_compactions` would have put it.
    """

    def __init__(self, last: int, ranges: list[tuple[int, int, StoredCompaction]]) -> None:
        self.segments: list[dict[str, int]] = []
        self._summaries: list[tuple[int, Message]] = []
        created_at = now_iso() if ranges else ""
        offset = start = tokens_before = 0
        for first, end, overlay in ranges:
            if first > start:
                self.segments.append({"a": start, "b": first - 1, "o": offset, "t": tokens_before})
            summary = compaction_message(overlay, created_at)
            self._summaries.append((first + offset, summary))
            tokens_before += estimate_single_message_tokens(summary)
            offset -= end - first
            start = end + 1
        if start <= last:
            self.segments.append({"a": start, "b": last, "o": offset, "t": tokens_before})
        self.size = last + 1 + offset
        """Messages the fork holds."""

    def summaries(self, new_ids: list[str]) -> list[tuple[int, _PreparedMessage]]:
        """Each overlay's summary message at its new position, with that position's id."""
        return [
            (position, _PreparedMessage({**summary, "id": new_ids[position]})) for position, summary in self._summaries
        ]


def session_not_found(session_id: str) -> SessionNotFoundError:
    """The refusal of a manager's append to a session its namespace does not hold (as the manager words it)."""
    return SessionNotFoundError(f"Session {session_id!r} not found")


def leaf_moved(expected_leaf_id: str, leaf_id: str | None) -> ConflictError:
    """The refusal of a write made against a leaf that is no longer the latest."""
    return ConflictError(f"Expected the latest leaf to be {expected_leaf_id!r} but it is {leaf_id!r}; reload and retry")


def _stored_compaction(row: Sequence[Any]) -> StoredCompaction:
    return StoredCompaction(
        id=row[0],
        summary=row[1],
        from_message_id=row[2],
        to_message_id=row[3],
        created_at=to_timestamp_text(row[4]),
    )


def _child_page(rows: Sequence[Sequence[Any]]) -> list[tuple[int, Message | None]]:
    """``(seq, message)`` rows; a row without content (not read) keeps None, a corrupt one is skipped."""
    return [
        (int(seq), None if content is None else message)
        for seq, content in rows
        if content is None or (message := parse_stored_message(content)) is not None
    ]


def _search_result(row: Sequence[Any]) -> SearchResult:
    return SearchResult(
        id=row[0],
        role=row[1],
        content=row[2] or "",
        created_at=to_timestamp_text(row[3]),
        session_id=row[4],
    )
