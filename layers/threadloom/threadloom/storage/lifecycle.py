"""Whole-session reads, writes and deletes on SQL, for export/import, retention and erasure.

Every operation works on complete sessions inside one transaction, so a reader never sees,
and an interrupted sweep never leaves, half a session. The statements are each backend's
(``SqlDialect``); :mod:`threadloom.lifecycle` uses this through its ``LifecycleStorage`` Protocol.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Final

from threadloom.core.messages import parse_stored_message
from threadloom.errors import ConflictError, QuotaExceededError, ValidationError
from threadloom.storage.block_versions import version_from_row, version_values
from threadloom.storage.database import to_timestamp_text
from threadloom.storage.registry import session_id_secret, session_removal
from threadloom.storage.snapshot import (
    BlockRow,
    CompactionRow,
    ExpiredSession,
    KnowledgeEntrySnapshot,
    MessageRow,
    RemovedRows,
    RemovedSubjectBlocks,
    SessionSnapshot,
    SharedBlockSnapshot,
)
from threadloom.storage.tree import SqlSessionProvider

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from threadloom.records import BlockVersion
    from threadloom.storage.database import Database, Executor
    from threadloom.storage.dialect import SqlDialect


ENTRY_BATCH: Final = 500
"""Knowledge entries an import reads or writes in one statement."""
ENTRY_BATCH_CHARS: Final = 4 * 1024 * 1024
"""A batch of entries to write ends once their contents reach this many characters (bounds one statement)."""


class SqlLifecycleStorage:
    """Complete sessions in and out of one SQL database, across namespaces."""

    def __init__(self, database: Database, sql: type[SqlDialect]) -> None:
        self._database = database
        self._sql = sql

    # ------------------------------------------------------------------ reads

    def read_session(self, namespace: str, session_id: str) -> SessionSnapshot | None:
        """Everything stored for the session, from one consistent snapshot."""
        sid = {"sid": session_id}
        owner = {"namespace": namespace, **sid}
        with self._database.read() as tx:
            rows = tx.query(self._sql.get_session, {"namespace": namespace, "id": session_id})
            if not rows:
                return None
            info = rows[0]
            head = tx.query(self._sql.export_head, sid)
            messages = []
            for message_id, parent_id, seq, content, created_at in tx.query(self._sql.export_messages, sid):
                message = parse_stored_message(content)
                if message is None:
                    raise ValidationError(f"Stored message {message_id!r} of session {session_id!r} is corrupt")
                messages.append(MessageRow(message_id, parent_id, int(seq), to_timestamp_text(created_at), message))
            compactions = [
                CompactionRow(row[0], int(row[1]), row[2], row[3], row[4], row[5], to_timestamp_text(row[6]))
                for row in tx.query(self._sql.export_compactions, sid)
            ]
            blocks = [
                BlockRow(key, content, to_timestamp_text(updated))
                for key, content, updated in tx.query(self._sql.export_blocks, owner)
            ]
            skills = [row[0] for row in tx.query(self._sql.get_loaded_skills, sid)]
        return SessionSnapshot(
            id=info[0],
            name=info[1],
            parent_session_id=info[2],
            model=info[3],
            source=info[4],
            input_tokens=int(info[5]),
            output_tokens=int(info[6]),
            estimated_cost=float(info[7]),
            end_reason=info[8],
            created_at=to_timestamp_text(info[9]),
            updated_at=to_timestamp_text(info[10]),
            subject_id=info[12],
            legal_hold=bool(info[13]),
            leaf_id=head[0][0] if head else None,
            next_seq=int(head[0][1]) if head else 1,
            messages=messages,
            compactions=compactions,
            blocks=blocks,
            loaded_skills=skills,
        )

    def read_shared_blocks(
        self, namespace: str, scope: str, subject_id: str = "", *, max_versions: int
    ) -> list[SharedBlockSnapshot]:
        """The namespace's blocks of ``scope`` (of ``subject_id``; ``''`` for the tenant), each with its
        newest ``max_versions`` versions, from one consistent snapshot."""
        owner = {"namespace": namespace, "scope": scope}
        with self._database.read() as tx:
            blocks = tx.query(self._sql.subject_blocks, {**owner, "subject": subject_id})
            history: dict[str, list[BlockVersion]] = {}
            for row in tx.query(self._sql.owner_versions, {**owner, "owner": subject_id}):
                history.setdefault(str(row[0]), []).append(version_from_row(row[1:]))
        return [
            SharedBlockSnapshot(
                scope=scope,
                subject_id=subject_id,
                key=str(key),
                content=str(content),
                version=int(version),
                updated_at=to_timestamp_text(updated),
                versions=history.get(str(key), [])[-max_versions:] if max_versions > 0 else [],
            )
            for key, content, version, updated in blocks
        ]

    def read_knowledge_entries(
        self, namespace: str, *, after: tuple[str, str] = ("", ""), limit: int
    ) -> list[KnowledgeEntrySnapshot]:
        """The namespace's knowledge entries of every label in (label, key) order, the first ``limit``
        after ``after``: an export pages through them without holding them all."""
        params = {"scope": namespace, "after_label": after[0], "after_key": after[1], "limit": int(limit)}
        return [
            KnowledgeEntrySnapshot(
                str(label), str(key), str(content), to_timestamp_text(created), to_timestamp_text(updated)
            )
            for label, key, content, created, updated in self._database.query_once(self._sql.export_entries, params)
        ]

    def read_knowledge_contents(self, namespace: str, label: str, keys: Sequence[str]) -> dict[str, str]:
        """``{key: content}`` of the label's entries among ``keys`` (one statement per ``ENTRY_BATCH`` keys)."""
        contents: dict[str, str] = {}
        for start in range(0, len(keys), ENTRY_BATCH):
            params = {"scope": namespace, "label": label, "keys": json.dumps(list(keys[start : start + ENTRY_BATCH]))}
            for key, content in self._database.query_once(self._sql.entry_contents, params):
                contents[str(key)] = str(content)
        return contents

    def session_namespace(self, session_id: str) -> str | None:
        """The namespace holding ``session_id`` (session ids are unique across namespaces), or None."""
        rows = self._database.query_once(self._sql.session_namespace, {"id": session_id})
        return str(rows[0][0]) if rows else None

    def session_id_secret(self) -> str:
        """The secret session ids are minted with, so an import can tell ids minted for a namespace."""
        return session_id_secret(self._database, self._sql)

    def subject_session_ids(self, namespace: str, subject_id: str) -> list[str]:
        rows = self._database.query_once(self._sql.subject_sessions, {"namespace": namespace, "subject": subject_id})
        return [row[0] for row in rows]

    def child_session_ids(self, namespace: str, session_id: str) -> list[str]:
        """Forks and split continuations made from ``session_id``."""
        rows = self._database.query_once(self._sql.child_sessions, {"namespace": namespace, "parent": session_id})
        return [row[0] for row in rows]

    def expired_sessions(
        self, cutoff: str, *, namespace: str = "", limit: int, after: ExpiredSession | None = None
    ) -> list[ExpiredSession]:
        """Unheld sessions last active before ``cutoff``, oldest first; ``namespace=""`` means all namespaces."""
        params = {
            "cutoff": cutoff,
            "namespace": namespace,
            "limit": int(limit),
            "after_time": after.updated_at if after else "0001-01-01T00:00:00.000Z",
            "after_id": after.id if after else "",
        }
        rows = self._database.query_once(self._sql.expired_sessions, params)
        return [ExpiredSession(row[0], row[1], to_timestamp_text(row[2])) for row in rows]

    # ----------------------------------------------------------------- writes

    def write_sessions(
        self,
        namespace: str,
        snapshots: Iterable[SessionSnapshot],
        shared_blocks: Iterable[SharedBlockSnapshot] = (),
        knowledge_entries: Sequence[KnowledgeEntrySnapshot] = (),
        *,
        entry_quota: int | None = None,
    ) -> None:
        """Insert whole sessions, then new shared blocks of ``namespace`` with their versions, then new
        knowledge entries with their search terms, all in one transaction: any failure leaves the
        database untouched.

        With ``entry_quota``, each label's count is read again under the transaction's hold on it
        (``lock_entry_count``), and a label the new entries would take past the quota is refused: a
        check made before, outside the transaction, does not hold against imports running beside it.

        A session never lands on rows already stored under its id (left by a prompt frozen while
        its session was deleted, say): that is a conflict, answered before any insert, and not a
        unique-key failure of the database.
        """
        with self._database.write() as tx:
            for snapshot in snapshots:
                if tx.query(self._sql.session_namespace, {"id": snapshot.id}):
                    raise ConflictError(f"Session {snapshot.id!r} already exists")
                if self._rows_remain(tx, namespace, snapshot.id):
                    raise ConflictError(
                        f"Session {snapshot.id!r} cannot be imported: rows stored under its id remain "
                        "(delete the session or import it under another id); nothing was imported"
                    )
                self._write_session(tx, namespace, snapshot)
            for block in shared_blocks:
                self._write_shared_block(tx, namespace, block)
            if entry_quota is not None:
                self._check_entry_quota(tx, namespace, knowledge_entries, entry_quota)
            batch: list[KnowledgeEntrySnapshot] = []
            size = 0
            for entry in knowledge_entries:
                batch.append(entry)
                size += len(entry.content)
                if len(batch) == ENTRY_BATCH or size >= ENTRY_BATCH_CHARS:
                    self._write_knowledge_entries(tx, namespace, batch)
                    batch, size = [], 0
            if batch:
                self._write_knowledge_entries(tx, namespace, batch)

    def _check_entry_quota(
        self, tx: Executor, namespace: str, entries: Sequence[KnowledgeEntrySnapshot], quota: int
    ) -> None:
        for label, adding in sorted(Counter(entry.label for entry in entries).items()):  # one lock order for all
            held = int(tx.query(self._sql.lock_entry_count, {"scope": namespace, "label": label})[0][0])
            if held + adding > quota:
                raise QuotaExceededError(
                    f"Importing {adding} new entries into block {label!r}, which holds {held}, would pass the most "
                    f"allowed ({quota}); nothing was imported"
                )

    def _write_knowledge_entries(self, tx: Executor, namespace: str, entries: list[KnowledgeEntrySnapshot]) -> None:
        """Entries the namespace did not have, in one statement, indexed as ``set_context`` indexes one;
        one written meanwhile is a conflict."""
        sql = self._sql
        # Either the statement carries each entry's search terms, or the index gets them after it, by an
        # index statement made (and filled, on SQLite) before the rows go in.
        apart = None if sql.import_entries_indexes else sql.entry_statement(tx, sql.index_entry, namespace)
        rows = [
            {
                "label": entry.label,
                "key": entry.key,
                "content": entry.content,
                "created_at": entry.created_at,
                "updated_at": entry.updated_at,
                **(sql.index_params(entry.content) if apart is None else {}),
            }
            for entry in entries
        ]
        written = {
            (str(label), str(key))
            for label, key in tx.query(sql.import_entries, {"scope": namespace, "entries": json.dumps(rows)})
        }
        if len(written) != len(entries):
            taken = next(entry for entry in entries if (entry.label, entry.key) not in written)
            raise ConflictError(
                f"Knowledge entry {taken.key!r} of block {taken.label!r} was written while importing; "
                "nothing was imported"
            )
        if apart is not None:
            scope = {"scope": namespace}
            tx.execute_all(
                [(apart, {**scope, "label": e.label, "key": e.key, **sql.index_params(e.content)}) for e in entries]
            )

    def _write_shared_block(self, tx: Executor, namespace: str, block: SharedBlockSnapshot) -> None:
        """A block the namespace did not have, and its versions; one written meanwhile is a conflict."""
        owner = {"namespace": namespace, "scope": block.scope, "key": block.key}
        row = {**owner, "subject": block.subject_id, "content": block.content, "version": block.version}
        if not tx.query(self._sql.import_shared_block, {**row, "now": block.updated_at}):
            raise ConflictError(
                f"The {block.scope} block {block.key!r} was written while importing; nothing was imported"
            )
        for version in block.versions:
            values = version_values(version.version, version.content, version.change)
            tx.execute(
                self._sql.import_block_version,
                {**owner, "owner": block.subject_id, **values, "now": version.created_at},
            )

    def _rows_remain(self, tx: Executor, namespace: str, session_id: str) -> bool:
        sid = {"sid": session_id}
        return any(
            tx.query(statement, params)
            for statement, params in (
                (self._sql.block_keys, {"namespace": namespace, **sid}),
                (self._sql.export_head, sid),
                (self._sql.compaction_ids, sid),
                (self._sql.get_loaded_skills, sid),
                (self._sql.message_ids, sid),
            )
        )

    def _write_session(self, tx: Executor, namespace: str, snapshot: SessionSnapshot) -> None:
        tx.execute(
            self._sql.import_session,
            {
                "id": snapshot.id,
                "namespace": namespace,
                "name": snapshot.name,
                "parent_session_id": snapshot.parent_session_id,
                "model": snapshot.model,
                "source": snapshot.source,
                "input_tokens": snapshot.input_tokens,
                "output_tokens": snapshot.output_tokens,
                "estimated_cost": snapshot.estimated_cost,
                "end_reason": snapshot.end_reason,
                "subject_id": snapshot.subject_id,
                "legal_hold": snapshot.legal_hold,
                "created_at": snapshot.created_at,
                "updated_at": snapshot.updated_at,
            },
        )
        tree = SqlSessionProvider(self._database, self._sql, snapshot.id)
        tree.restore(tx, snapshot.messages, snapshot.compactions, leaf_id=snapshot.leaf_id, next_seq=snapshot.next_seq)
        for block in snapshot.blocks:
            tx.execute(
                self._sql.import_block,
                {
                    "namespace": namespace,
                    "sid": snapshot.id,
                    "key": block.key,
                    "content": block.content,
                    "updated_at": block.updated_at,
                },
            )
        for skill in snapshot.loaded_skills:
            tx.execute(self._sql.add_loaded_skill, {"sid": snapshot.id, "skill_id": skill})

    def delete_session(
        self, namespace: str, session_id: str, *, expired_before: str | None = None
    ) -> RemovedRows | None:
        """Remove the session whole (D12) in one transaction; None when absent.

        With ``expired_before`` the session is removed only if, inside that transaction, it is
        still unheld and last active before that time (a concurrent append or hold wins).
        """
        sid = {"sid": session_id}
        owner = {"namespace": namespace, **sid}
        key = {"namespace": namespace, "id": session_id}
        with self._database.write() as tx:
            if self._sql.erase_setup:
                tx.execute(self._sql.erase_setup)
            if expired_before is None:
                present = tx.query(self._sql.lock_session, key)
            else:
                present = tx.query(self._sql.lock_expired_session, {**key, "cutoff": expired_before})
            if not present:
                return None
            versions = {"namespace": namespace, "scope": "session", "owner": session_id}
            removed = RemovedRows(
                session_id=session_id,
                message_ids=[row[0] for row in tx.query(self._sql.message_ids, sid)],
                compaction_ids=[row[0] for row in tx.query(self._sql.compaction_ids, sid)],
                block_keys=[row[0] for row in tx.query(self._sql.block_keys, owner)],
                loaded_skills=[row[0] for row in tx.query(self._sql.get_loaded_skills, sid)],
                block_versions=int(tx.query(self._sql.count_owner_versions, versions)[0][0]),
            )
            tx.execute_all(session_removal(self._sql, namespace, session_id))
        return removed

    def erase_subject_blocks(self, namespace: str, subject_id: str) -> RemovedSubjectBlocks:
        """Remove the subject's shared blocks and every version of them, in one transaction."""
        owner = {"namespace": namespace, "scope": "subject"}
        with self._database.write() as tx:
            keys = [row[0] for row in tx.query(self._sql.subject_blocks, {**owner, "subject": subject_id})]
            versions = int(tx.query(self._sql.count_owner_versions, {**owner, "owner": subject_id})[0][0])
            tx.execute(self._sql.delete_subject_blocks, {**owner, "subject": subject_id})
            tx.execute(self._sql.delete_owner_versions, {**owner, "owner": subject_id})
        return RemovedSubjectBlocks(block_keys=keys, block_versions=versions)

    def purge_deleted(self) -> None:
        """Drop what deleted rows may leave in index structures (after a batch of deletes, not per row)."""
        statements = self._sql.purge_statements_now(self._database)
        if not statements:
            return
        with self._database.write() as tx:
            for statement in statements:
                tx.execute(statement)


__all__ = ["SqlLifecycleStorage"]
