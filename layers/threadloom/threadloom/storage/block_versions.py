"""Versioned writes of writable blocks and their bounded history, on SQL (shared by every backend).

Every change of a writable block is a compare-and-set on the block's row (its ``version`` must
still be the one the change was based on) plus one row of ``threadloom_block_versions`` with the
content and its provenance, in one transaction: two processes editing one block never lose an
edit silently. The history of each block is pruned in the same transaction (the last N versions,
and versions younger than D days), so storage cannot grow without limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from threadloom.clock import timestamp_text, utc_now
from threadloom.errors import StaleVersionError
from threadloom.records import BlockChange, BlockVersion, HistoryPolicy
from threadloom.storage.database import to_timestamp_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.records import BlockScope
    from threadloom.storage.database import Database, Executor, Params
    from threadloom.storage.dialect import SqlDialect


@dataclass(frozen=True, slots=True)
class BlockOwner:
    """Whose block row it is: ``owner_id`` is the session id, the subject id or ``''`` (tenant)."""

    namespace: str
    scope: BlockScope
    owner_id: str
    key: str

    def row_params(self) -> Params:
        """The parameters naming the block's row in its table."""
        if self.scope == "session":
            return {"namespace": self.namespace, "sid": self.owner_id, "key": self.key}
        return {"namespace": self.namespace, "scope": self.scope, "subject": self.owner_id, "key": self.key}

    def version_params(self) -> Params:
        """The parameters naming the block's versions."""
        return {"namespace": self.namespace, "scope": self.scope, "owner": self.owner_id, "key": self.key}


def _statements(sql: type[SqlDialect], scope: str) -> tuple[str, str, str, str]:
    """(read, update if version, update, insert) of the table that holds blocks of ``scope``."""
    if scope == "session":
        return sql.session_block_read, sql.session_block_update_if, sql.session_block_update, sql.session_block_insert
    return sql.shared_block_read, sql.shared_block_update_if, sql.shared_block_update, sql.shared_block_insert


def read_current(database: Database, sql: type[SqlDialect], owner: BlockOwner) -> tuple[str | None, int]:
    """The block's stored content (None when never written) and its version (0 then)."""
    rows = database.query_once(_statements(sql, owner.scope)[0], owner.row_params(), by_key=True)
    return (str(rows[0][0]), int(rows[0][1])) if rows else (None, 0)


def write_version(
    database: Database,
    sql: type[SqlDialect],
    owner: BlockOwner,
    content: str,
    *,
    based_on_version: int | None,
    change: BlockChange,
    policy: HistoryPolicy,
) -> int:
    """Store ``content`` as the block's next version; returns it.

    ``based_on_version`` None writes whatever the current version is (the change still becomes a
    version); a number writes only if the block still has that version (0: never written), else
    :class:`StaleVersionError` with the current version and content, and nothing is written.
    """
    now = utc_now()
    if sql.block_write_once:
        return _write_in_one_statement(
            database, sql, owner, content, based_on_version=based_on_version, change=change, policy=policy, now=now
        )
    read, update_if, update, insert = _statements(sql, owner.scope)
    params = {**owner.row_params(), "content": content, "now": now}
    with database.write() as tx:
        if based_on_version is None:
            rows = tx.query(update, params) or tx.query(insert, params) or tx.query(update, params)
        elif based_on_version == 0:
            # A row from before history (0021) has version 0 too: the insert leaves it to the update.
            rows = tx.query(insert, params) or tx.query(update_if, {**params, "based_on": 0})
        else:
            rows = tx.query(update_if, {**params, "based_on": based_on_version})
        if not rows:
            current = tx.query(read, owner.row_params())
            current_content, current_version = (str(current[0][0]), int(current[0][1])) if current else ("", 0)
            raise _stale(owner, based_on_version, current_content, current_version)
        version = int(rows[0][0])
        values = {**owner.version_params(), **version_values(version, content, change), "now": now}
        tx.execute(sql.insert_block_version, values)
        _prune(tx, sql, owner, version, policy=policy, now=now)
    return version


def _write_in_one_statement(
    database: Database,
    sql: type[SqlDialect],
    owner: BlockOwner,
    content: str,
    *,
    based_on_version: int | None,
    change: BlockChange,
    policy: HistoryPolicy,
    now: str,
) -> int:
    """:func:`write_version` as one statement that commits on its own (PostgreSQL: one round trip, not five)."""
    kind = "any" if based_on_version is None else "new" if based_on_version == 0 else "if"
    statement = sql.block_write_once["session" if owner.scope == "session" else "shared"][kind]
    params = {
        **owner.row_params(),
        **owner.version_params(),
        **version_values(0, content, change),
        "now": now,
        "based_on": based_on_version,
        "keep_versions": policy.keep_versions,
        "cutoff": _cutoff(policy, now),
    }
    del params["version"]
    rows = database.execute_once(statement, params)
    if not rows:
        current_content, current_version = read_current(database, sql, owner)
        raise _stale(owner, based_on_version, current_content or "", current_version)
    return int(rows[0][0])


def _stale(owner: BlockOwner, based_on_version: int | None, content: str, version: int) -> StaleVersionError:
    return StaleVersionError(
        f'Block "{owner.key}" changed since version {based_on_version}: it is at version {version}',
        current_version=version,
        current_content=content,
    )


def version_values(version: int, content: str, change: BlockChange) -> Params:
    """The parameters of one version row (its size counted here, never taken from the caller)."""
    return {
        "version": version,
        "content": content,
        "size_bytes": len(content.encode("utf-8")),
        "source": change.source,
        "session_id": change.session_id,
        "message_ids": json.dumps(list(change.message_ids)),
        "request_id": change.request_id,
        "note": change.note,
    }


def _prune(
    tx: Executor, sql: type[SqlDialect], owner: BlockOwner, version: int, *, policy: HistoryPolicy, now: str
) -> None:
    """Drop the versions the policy no longer keeps (never the current one)."""
    oldest_kept = version - policy.keep_versions + 1
    tx.execute(
        sql.prune_block_versions,
        {**owner.version_params(), "version": version, "oldest_kept": oldest_kept, "cutoff": _cutoff(policy, now)},
    )


def _cutoff(policy: HistoryPolicy, now: str) -> str:
    """The moment before which the policy keeps no version (but the current one)."""
    if policy.keep_days is None:
        return "0001-01-01T00:00:00.000Z"  # nothing is older: only the count bounds the history
    moment = datetime.fromisoformat(now.replace("Z", "+00:00")) - timedelta(days=policy.keep_days)
    return timestamp_text(moment)


def version_from_row(row: Sequence[Any]) -> BlockVersion:
    """A version from ``(version, size, source, session, message ids, request, note, created, content)``."""
    message_ids = json.loads(row[4]) if row[4] else []
    return BlockVersion(
        version=int(row[0]),
        content=str(row[8]),
        size_bytes=int(row[1]),
        created_at=to_timestamp_text(row[7]),
        change=BlockChange(
            source=row[2],
            session_id=row[3],
            message_ids=tuple(str(item) for item in message_ids),
            request_id=row[5],
            note=row[6],
        ),
    )


def versions_page(
    database: Database,
    sql: type[SqlDialect],
    owner: BlockOwner,
    *,
    before: int | None,
    limit: int,
    max_bytes: int,
) -> tuple[list[BlockVersion], bool]:
    """Up to ``limit`` versions below ``before``, newest first, within ``max_bytes`` of content
    (at least one); and whether more are left after them."""
    params = {**owner.version_params(), "before": before if before is not None else 2**31 - 1, "limit": limit + 1}
    rows = database.query_once(sql.block_versions_page, {**params, "budget": max_bytes})
    page: list[BlockVersion] = []
    for row in rows[:limit]:
        if row[8] is None:
            break
        page.append(version_from_row(row))
    return page, len(rows) > len(page)


def get_version(database: Database, sql: type[SqlDialect], owner: BlockOwner, version: int) -> BlockVersion | None:
    """One stored version, or None when it never existed or was pruned."""
    rows = database.query_once(sql.get_block_version, {**owner.version_params(), "version": version})
    return version_from_row(rows[0]) if rows else None


def session_versions_removal(sql: type[SqlDialect], namespace: str, session_id: str) -> list[tuple[str, Params]]:
    """A removed session's own block versions go; the versions it made of shared blocks lose their link to it."""
    return [
        (sql.delete_owner_versions, {"namespace": namespace, "scope": "session", "owner": session_id}),
        (sql.unlink_session_versions, {"namespace": namespace, "sid": session_id}),
    ]


__all__ = [
    "BlockOwner",
    "get_version",
    "read_current",
    "session_versions_removal",
    "version_from_row",
    "versions_page",
    "write_version",
]
