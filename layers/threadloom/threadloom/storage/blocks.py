"""Context-block contents, frozen prompts and loaded-skill state on SQL (shared by every backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.errors import SessionNotFoundError
from threadloom.providers.protocols import BlockRead
from threadloom.records import BlockChange, HistoryPolicy
from threadloom.storage import block_versions
from threadloom.storage.block_versions import BlockOwner

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.records import BlockScope, BlockVersion
    from threadloom.storage.database import Database
    from threadloom.storage.dialect import SqlDialect

LIBRARY_CHANGE = BlockChange(source="library")
"""The provenance of a plain ``set(content)``: a program calling the library directly."""


class SqlContextProvider:
    """A writable block stored under ``key`` of one owner; ``init(label)`` names an unkeyed provider after its block.

    The owner is ``(namespace, session_id)``: every read, write and delete names it, so a key
    chosen in one namespace or session never reaches another's row, and deleting the session
    removes its rows (contract D12). ``session_id=None`` is a block of no session (``''``).
    """

    def __init__(
        self,
        database: Database,
        sql: type[SqlDialect],
        key: str = "",
        *,
        session_id: str | None = None,
        namespace: str = "",
        history: HistoryPolicy | None = None,
    ):
        self._database = database
        self._sql = sql
        self.key = key
        self.session_id = session_id
        self.namespace = namespace
        self.history = history if history is not None else HistoryPolicy()

    def init(self, label: str) -> None:
        if not self.key:
            self.key = label

    def _owner(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "sid": self.session_id or ""}

    def _row(self) -> dict[str, Any]:
        return {**self._owner(), "key": self.key}

    def get(self) -> str | None:
        return _first_value(self._database.query_once(self._sql.get_block, self._row(), by_key=True))

    def block_read(self) -> BlockRead:
        """``get()`` as a read that can go with the session's other block reads (one round trip)."""
        return BlockRead(self._database, (self._sql.get_block, self._row()), _first_value, single_value=True)

    def set(self, content: str) -> None:
        """Write ``content`` as a new version of whatever is stored (provenance: the library)."""
        self.write(content, based_on_version=None, change=LIBRARY_CHANGE)

    # -- versions (a VersionedContextProvider) ----------------------------------------------------

    scope: BlockScope = "session"

    def owner(self) -> BlockOwner:
        """Whose row and versions these are."""
        return BlockOwner(self.namespace, "session", self.session_id or "", self.key)

    def current(self) -> tuple[str | None, int]:
        """The stored content (None when never written) and its version (0 then), read now."""
        return block_versions.read_current(self._database, self._sql, self.owner())

    def write(self, content: str, *, based_on_version: int | None, change: BlockChange) -> int:
        """Store ``content`` as the next version if the block is still at ``based_on_version``
        (None: whatever it is at); ``StaleVersionError`` otherwise. Returns the new version."""
        return block_versions.write_version(
            self._database,
            self._sql,
            self.owner(),
            content,
            based_on_version=based_on_version,
            change=change,
            policy=self.history,
        )

    def versions(self, *, before: int | None, limit: int, max_bytes: int) -> tuple[list[BlockVersion], bool]:
        """A page of the block's history, newest first, and whether older versions remain."""
        return block_versions.versions_page(
            self._database, self._sql, self.owner(), before=before, limit=limit, max_bytes=max_bytes
        )

    def version(self, number: int) -> BlockVersion | None:
        """One stored version (None when it never existed or was pruned)."""
        return block_versions.get_version(self._database, self._sql, self.owner(), number)


class SqlSharedBlockProvider(SqlContextProvider):
    """A writable block shared beyond one session: every session of one subject, or the whole tenant.

    Its row belongs to ``(namespace, subject_id)`` (scope ``subject``) or ``(namespace)`` (scope
    ``tenant``) in ``threadloom_shared_blocks``; every read and write names that owner. Reading
    it also reads its version, so a replacement by the model is based on what it was shown.
    """

    def __init__(
        self,
        database: Database,
        sql: type[SqlDialect],
        key: str,
        *,
        scope: BlockScope,
        namespace: str,
        subject_id: str = "",
        history: HistoryPolicy | None = None,
    ) -> None:
        super().__init__(database, sql, key, namespace=namespace, history=history)
        if scope not in ("subject", "tenant"):
            raise ValueError(f"a shared block's scope is 'subject' or 'tenant', not {scope!r}")
        if (scope == "subject") != bool(subject_id):
            raise ValueError("a subject block needs a subject id, a tenant block none")
        self.scope = scope
        self.subject_id = subject_id
        self.loaded_version = 0
        """The version the last ``get()`` (or read) saw."""

    def owner(self) -> BlockOwner:
        return BlockOwner(self.namespace, self.scope, self.subject_id, self.key)

    def get(self) -> str | None:
        content, self.loaded_version = self.current()
        return content

    def block_read(self) -> BlockRead:
        """The content and version, read with the session's other shared blocks (one round trip)."""
        statement = (self._sql.shared_block_read, self.owner().row_params())
        return BlockRead(self._database, statement, self._finish_read)

    def _finish_read(self, rows: Sequence[Sequence[Any]]) -> str | None:
        if not rows:
            self.loaded_version = 0
            return None
        self.loaded_version = int(rows[0][1])
        return str(rows[0][0])


class SqlPromptStore(SqlContextProvider):
    """The frozen system prompt of one session: the first freeze wins across processes."""

    def get_registered(self) -> str | None:
        """The stored prompt, read with the check that the namespace's registry holds the session (one statement).

        None when no prompt is frozen yet; :class:`SessionNotFoundError` when the namespace does not hold the
        session. Found by keys, so it goes alone (no timeouts statement).
        """
        params = {"namespace": self.namespace, "sid": self.session_id or "", "key": self.key}
        rows = self._database.query_once(self._sql.get_prompt_in_namespace, params, by_key=True)
        if not rows:
            raise SessionNotFoundError(f"Session {self.session_id!r} not found")
        return _first_value(rows)

    def set_if_absent(self, content: str) -> str:
        """Store ``content`` unless a prompt is already stored; return whichever prompt is stored now.

        One statement when this call stores it (the insert says so by returning the row), a
        second read only when another freeze won. The prompt is a cache of what the blocks
        rendered, so its commit need not wait for the disk (``durable=False``): lost only in a
        server crash moments after the freeze, it is frozen again by the next request.
        """
        values = {**self._row(), "content": content, "now": utc_now()}
        if self._database.execute_once(self._sql.insert_prompt_if_absent, values, durable=False):
            return content
        rows = self._database.query_once(self._sql.get_block, self._row(), by_key=True)
        return str(rows[0][0]) if rows else content

    def set(self, content: str) -> None:
        """Store the prompt (a refresh): one statement, committed as :meth:`set_if_absent` commits it.

        A cache of what the blocks rendered, not a block change, so it has no version.
        """
        self._database.execute_once(
            self._sql.upsert_block, {**self._row(), "content": content, "now": utc_now()}, durable=False
        )

    def delete(self) -> None:
        self._database.execute_once(self._sql.delete_block, self._row())


class SqlSkillState:
    """The set of loaded skills (``"label:key"``) of one session, persisted (contract D7)."""

    def __init__(self, database: Database, sql: type[SqlDialect], session_id: str) -> None:
        self._database = database
        self._sql = sql
        self.session_id = session_id

    def load(self) -> set[str]:
        return {row[0] for row in self._database.query_once(self._sql.get_loaded_skills, {"sid": self.session_id})}

    def save(self, skill_ids: set[str]) -> None:
        with self._database.write() as tx:
            tx.execute(self._sql.clear_loaded_skills, {"sid": self.session_id})
            for skill_id in sorted(skill_ids):
                tx.execute(self._sql.add_loaded_skill, {"sid": self.session_id, "skill_id": skill_id})


def _first_value(rows: Sequence[Sequence[Any]]) -> str | None:
    return str(rows[0][0]) if rows and rows[0][0] is not None else None
