"""A store bundles one backend's providers so a Session can auto-wire everything from it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from threadloom.clock import utc_now
from threadloom.storage.blocks import SqlContextProvider, SqlPromptStore, SqlSharedBlockProvider, SqlSkillState
from threadloom.storage.compaction_requests import SqlCompactionRequests
from threadloom.storage.lifecycle import SqlLifecycleStorage
from threadloom.storage.migrations import apply_migrations, load_migrations
from threadloom.storage.reflections import SqlReflections, SqlReflectionSweep
from threadloom.storage.registry import SqlSessionRegistry
from threadloom.storage.search_entries import SqlSearchProvider
from threadloom.storage.tree import SqlSessionProvider

if TYPE_CHECKING:
    from threadloom.records import BlockScope, HistoryPolicy
    from threadloom.storage.database import Database
    from threadloom.storage.dialect import SqlDialect


class SqlStore:
    """Factories for every provider of one SQL backend, plus ``migrate()``.

    Subclasses set ``sql`` (the backend's statement catalogue) and the package that
    holds its ``migrations/`` folder. The schema is migrated lazily on first use
    unless ``auto_migrate`` is off (for roles that cannot create tables).
    """

    sql: ClassVar[type[SqlDialect]]
    migrations_package: ClassVar[str]

    def __init__(self, database: Database, *, auto_migrate: bool = True) -> None:
        self.database = database
        self._auto_migrate = auto_migrate
        self._migrated = False
        self._migrate_lock = threading.Lock()

    def migrate(self) -> list[int]:
        """Create or upgrade the schema; idempotent. Returns the versions applied by this call."""
        with self._migrate_lock:
            applied = apply_migrations(
                self.database,
                load_migrations(self.migrations_package),
                create_table_sql=self.sql.create_migrations_table,
                applied_at=utc_now(),
            )
            self._migrated = True
            return applied

    def _ready(self) -> Database:
        if self._auto_migrate and not self._migrated:
            self.migrate()
        return self.database

    def session_provider(self, session_id: str = "") -> SqlSessionProvider:
        return SqlSessionProvider(self._ready(), self.sql, session_id)

    def context_provider(
        self, key: str = "", *, session_id: str | None = None, namespace: str = "", history: HistoryPolicy | None = None
    ) -> SqlContextProvider:
        """The block ``key`` of the owner ``(namespace, session_id)``."""
        return SqlContextProvider(
            self._ready(), self.sql, key, session_id=session_id, namespace=namespace, history=history
        )

    def shared_block(
        self,
        key: str,
        *,
        scope: BlockScope,
        namespace: str,
        subject_id: str = "",
        history: HistoryPolicy | None = None,
    ) -> SqlSharedBlockProvider:
        """The block ``key`` shared by a subject's sessions (``scope="subject"``) or the tenant's."""
        return SqlSharedBlockProvider(
            self._ready(), self.sql, key, scope=scope, namespace=namespace, subject_id=subject_id, history=history
        )

    def prompt_store(self, session_id: str = "", *, namespace: str = "") -> SqlPromptStore:
        """The frozen prompt of ``session_id`` in ``namespace``."""
        key = f"_system_prompt_{session_id}" if session_id else "_system_prompt"
        return SqlPromptStore(self._ready(), self.sql, key, session_id=session_id or None, namespace=namespace)

    def search_provider(self, *, scope: str = "", max_entries: int | None = None) -> SqlSearchProvider:
        return SqlSearchProvider(self._ready(), self.sql, scope=scope, max_entries=max_entries)

    def skill_state(self, session_id: str = "") -> SqlSkillState:
        return SqlSkillState(self._ready(), self.sql, session_id)

    def registry(self, namespace: str = "default") -> SqlSessionRegistry:
        return SqlSessionRegistry(self._ready(), self.sql, namespace)

    def lifecycle(self) -> SqlLifecycleStorage:
        """Whole-session export/import and deletion across namespaces (``threadloom.lifecycle``)."""
        return SqlLifecycleStorage(self._ready(), self.sql)

    def compaction_requests(self, namespace: str = "default") -> SqlCompactionRequests:
        return SqlCompactionRequests(self._ready(), self.sql, namespace)

    def reflections(self, namespace: str = "default") -> SqlReflections:
        """The reflection watermarks, runs and proposals of ``namespace`` (``threadloom.reflection``)."""
        return SqlReflections(self._ready(), self.sql, namespace)

    def reflection_sweep(self) -> SqlReflectionSweep:
        """Sessions of every tenant gone idle since their last reflection (the idle trigger)."""
        return SqlReflectionSweep(self._ready(), self.sql)
