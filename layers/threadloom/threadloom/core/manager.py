"""``SessionManager``: a namespace of named sessions sharing one configuration.

Everything the manager does is scoped to its namespace (a tenant, in the HTTP
app): a session id from another namespace is treated as unknown, and cross-session
search only sees this namespace's sessions (contract D6).

Over 400 lines because the manager is the namespace's one entry point for every session-level
operation; each method is short.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from threadloom.core.keys import LEGACY_KEYED_SESSION_NAMESPACE
from threadloom.core.session import Session
from threadloom.errors import NotFoundError, SessionChangedError, SessionNotFoundError, ValidationError
from threadloom.limits import DEFAULT_LIMITS, Limits, check_text, shown
from threadloom.providers.protocols import is_search_entry_store
from threadloom.records import OMITTED, Omitted
from threadloom.tools.session_search import build_session_search_tool, format_history_results

_Done = TypeVar("_Done")

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Iterator

    from threadloom.compaction.function import CompactFunction
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.providers.protocols import BlockRead, ContextProvider, SearchEntryStore, WritableContextProvider
    from threadloom.records import (
        AppendResult,
        BlockScope,
        HistoryPolicy,
        Message,
        SearchResult,
        SessionInfo,
        SessionOverview,
        StoredCompaction,
        TokenCountInput,
    )
    from threadloom.tools.base import Tool

HISTORY_BLOCK_DESCRIPTION = "Cross-session conversation history"
SPLIT_SEED_PREFIX = "[Context from previous session]"
HISTORY_SEARCH_LIMIT = 10
KEYED_SESSION_NAMESPACE = LEGACY_KEYED_SESSION_NAMESPACE
"""UUIDv5 namespace of the keyed ids issued before migration 0016 (now derived with the deployment secret)."""


class _CreateDescriptor:
    """Lets ``create`` be the builder on the class and the session factory on an instance, as in the reference."""

    @overload
    def __get__(self, instance: None, owner: type[SessionManager]) -> Callable[..., SessionManager]: ...

    @overload
    def __get__(self, instance: SessionManager, owner: type[SessionManager]) -> Callable[..., SessionInfo]: ...

    def __get__(
        self, instance: SessionManager | None, owner: type[SessionManager]
    ) -> Callable[..., SessionManager] | Callable[..., SessionInfo]:
        if instance is None:
            return lambda store, *, namespace="default": owner(store, namespace=namespace)
        return instance.create_session


def _describe_sessions(count: int) -> str | None:
    if count == 0:
        return None
    return f"{count} session available for search." if count == 1 else f"{count} sessions available for search."


class SearchableHistory:
    """A read-only searchable block over the manager's sessions (``with_searchable_history``)."""

    def __init__(self, manager: SessionManager) -> None:
        self._manager = manager

    def get(self) -> str | None:
        return _describe_sessions(self._manager.count())

    def block_read(self) -> BlockRead | None:
        """The count as a read that can go with the session's other block reads, where the registry offers it."""
        return self._manager.count_read(_describe_sessions)

    def search(self, query: str) -> str | None:
        return format_history_results(self._manager.search(query, limit=HISTORY_SEARCH_LIMIT))


class SessionManager:
    """Create, list, fork, split and search the sessions of one namespace.

    Examples
    --------
    >>> manager = SessionManager.create(SqliteStore("app.db"), namespace="tenant-a").with_context(
    ...     "memory", description="Learned facts", max_tokens=1100
    ... )
    >>> info = manager.create("My chat")
    >>> manager.append(info.id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    'm1'
    """

    def __init__(self, store: Any, *, namespace: str = "default") -> None:
        if not callable(getattr(store, "registry", None)):
            raise ValidationError("SessionManager needs a store (SqliteStore or PostgresStore)")
        if not isinstance(namespace, str) or not namespace:
            raise ValidationError("namespace must be a non-empty string")
        self.store = store
        self.namespace = namespace
        self._registry = store.registry(namespace)
        self._contexts: builtins.list[tuple[str, dict[str, Any]]] = []
        self._cached_prompt: WritableContextProvider | bool = False
        self._prompt_factory: Callable[[str], WritableContextProvider] | None = None
        self._compaction_fn: CompactFunction | None = None
        self._threshold: int | None = None
        self._token_counter: Callable[[TokenCountInput], float] | None = None
        self._error_handler: Callable[[BaseException], Any] | None = None
        self._event_listeners: builtins.list[Callable[[dict[str, Any]], Any]] = []
        self._session_listeners: builtins.list[Callable[[str, dict[str, Any]], Any]] = []
        self._history_label: str | None = None
        self._queue: CompactionQueue | None = None
        self._sessions: dict[str, Session] = {}
        # Subjects of sessions looked up here, so a session with subject blocks is wired without
        # reading the registry again (the API looks every session up before using it).
        self._subjects: dict[str, str | None] = {}
        self._history_policy: HistoryPolicy | None = None
        self.limits: Limits = DEFAULT_LIMITS

    # ---------------------------------------------------------------- builder

    create = _CreateDescriptor()
    """``SessionManager.create(store, namespace=...)`` builds a manager; ``manager.create(name)`` a session."""

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: ContextProvider | None = None,
        scope: BlockScope = "session",
    ) -> SessionManager:
        """A block template for every session; auto-wired blocks get per-session keys (``<label>_<id>``).

        ``scope="subject"`` shares the block between the sessions of one subject (the
        ``subject_id`` a session was created with), ``scope="tenant"`` between all of the namespace's.
        """
        options = {"description": description, "max_tokens": max_tokens, "provider": provider, "scope": scope}
        self._contexts.append((label, options))
        return self

    def with_block_history(self, policy: HistoryPolicy) -> SessionManager:
        """How much history every auto-wired writable block keeps (see ``HistoryPolicy``)."""
        self._history_policy = policy
        return self

    def with_cached_prompt(
        self,
        provider: WritableContextProvider | None = None,
        *,
        per_session: Callable[[str], WritableContextProvider] | None = None,
    ) -> SessionManager:
        """Persist each session's frozen prompt: to ``provider``, to ``per_session(session_id)``, or to the store.

        ``per_session`` exists because a prompt store such as ``DynamoDBPromptStore`` holds one
        prompt, so every session needs its own instance.
        """
        self._cached_prompt = provider if provider is not None else True
        self._prompt_factory = per_session
        return self

    def on_compaction(self, fn: CompactFunction) -> SessionManager:
        self._compaction_fn = fn
        return self

    def compact_after(
        self, threshold: int, *, token_counter: Callable[[TokenCountInput], float] | None = None
    ) -> SessionManager:
        self._threshold = threshold
        if token_counter:
            self._token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> SessionManager:
        self._error_handler = handler
        return self

    def on_event(self, callback: Callable[[dict[str, Any]], Any]) -> SessionManager:
        self._event_listeners.append(callback)
        return self

    def on_session_event(self, callback: Callable[[str, dict[str, Any]], Any]) -> SessionManager:
        """Receive ``(session_id, event)`` for every session's status, error and change events (live status)."""
        self._session_listeners.append(callback)
        for session_id, session in self._sessions.items():
            _bind_session_listener(session, session_id, callback)
        return self

    def with_searchable_history(self, label: str) -> SessionManager:
        """Give every session a searchable block over all of this namespace's sessions."""
        self._history_label = label
        return self

    def with_limits(self, limits: Limits) -> SessionManager:
        """Enforce ``limits`` on every write of every session (``DEFAULT_LIMITS`` otherwise)."""
        self.limits = limits
        return self

    def with_compaction_queue(self, queue: CompactionQueue) -> SessionManager:
        self._queue = queue
        return self

    def search_entries(self, label: str) -> SearchEntryStore:
        """The store behind the searchable block ``label`` shared by this namespace's sessions.

        Its entries belong to the namespace, not to a session, so they are read and removed here.
        Raises ``NotFoundError`` for a label that is no such block.
        """
        for name, options in self._contexts:
            provider = options["provider"]
            if name == label and is_search_entry_store(provider):
                store = cast("SearchEntryStore", provider)
                store.init(label)  # what wiring the block into a session does too
                return store
        raise NotFoundError(f"No searchable block {shown(label)} in this namespace")

    def delete_search_entry(self, label: str, key: str) -> bool:
        """Remove one entry of the searchable block ``label``; False when there was none.

        The sessions this manager holds loaded their blocks (the "<n> entries indexed." line)
        once; they are dropped so that the next use reads them again, as a new process would.
        """
        deleted = self.search_entries(label).delete(key)
        if deleted:
            self._sessions.clear()
        return deleted

    # --------------------------------------------------------------- sessions

    def get_session(self, session_id: str) -> Session:
        """The configured Session for ``session_id`` (cached for the manager's lifetime)."""
        cached = self._sessions.get(session_id)
        if cached is not None:
            return cached
        session = Session.create(self.store).for_session(session_id).in_namespace(self.namespace)
        session.with_limits(self.limits)
        if self._wires_subjects():
            session.for_subject(self._subject_of(session_id))
        if self._history_policy is not None:
            session.with_block_history(self._history_policy)
        for label, options in self._contexts:
            session.with_context(label, **options)
        if self._prompt_factory is not None:
            session.with_cached_prompt(self._prompt_factory(session_id))
        elif self._cached_prompt is True:
            session.with_cached_prompt()
        elif self._cached_prompt is not False:
            session.with_cached_prompt(self._cached_prompt)
        if self._history_label is not None:
            session.with_context(
                self._history_label, description=HISTORY_BLOCK_DESCRIPTION, provider=SearchableHistory(self)
            )
        if self._compaction_fn is not None:
            session.on_compaction(self._compaction_fn)
        if self._threshold is not None:
            session.compact_after(self._threshold, token_counter=self._token_counter)
        if self._error_handler is not None:
            session.on_compaction_error(self._error_handler)
        for listener in self._event_listeners:
            session.on_event(listener)
        for session_listener in self._session_listeners:
            _bind_session_listener(session, session_id, session_listener)
        if self._queue is not None:
            session.with_compaction_queue(self._queue)
        self._sessions[session_id] = session
        return session

    @contextmanager
    def checked_session(self, session_id: str) -> Iterator[Session]:
        """The session, for a block of reads: it must be this namespace's, else ``SessionNotFoundError``.

        On PostgreSQL the registry's check goes in the round trip of the block's first read, one
        round trip where it was two; the refusal is raised by that read, by a write the block sends
        first, or when the block ends (``storage/checked_reads.py``). A store whose registry cannot
        wait (another kind of store) is read first. An id refused stays uncached. A session whose
        subject blocks are wired for the subject known here (from a Session built here or only from a
        lookup: the Session built next would take it) is checked to have it still, else
        ``SessionChangedError`` (deleted and created again for another subject elsewhere) and the
        session is dropped from the cache, so a retry reads it afresh.
        """
        if not isinstance(session_id, str):
            raise SessionNotFoundError(f"Session {session_id!r} not found")
        checked = getattr(self._registry, "checked", None)
        if not callable(checked):
            self._require(session_id)
            yield self.get_session(session_id)
            return
        known = session_id in self._sessions
        # The subject known here, whether a Session was built with it or only looked up (open_session, get,
        # create_session): get_session wires the blocks for it, so it is the one to check.
        subject_known = self._wires_subjects() and session_id in self._subjects
        try:
            with checked(session_id, check_subject=subject_known, subject=self._subjects.get(session_id)):
                yield self.get_session(session_id)
        except Exception as error:
            if isinstance(error, (SessionNotFoundError, SessionChangedError)) or not known:
                self._forget(session_id)
            raise

    def _wires_subjects(self) -> bool:
        return any(options["scope"] == "subject" for _, options in self._contexts)

    def _require(self, session_id: str) -> SessionInfo:
        info = self.get(session_id) if isinstance(session_id, str) else None
        if info is None:
            raise SessionNotFoundError(f"Session {session_id!r} not found")
        return info

    def create_session(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        subject_id: str | None = None,
    ) -> SessionInfo:
        """``subject_id`` names whose data the session holds; a child session inherits its parent's."""
        limits = self.limits
        limits.check_name(name, "session name")
        limits.check_name(model, "model", optional=True)
        limits.check_name(source, "source", optional=True)
        limits.check_name(subject_id, "subject id", optional=True)
        if subject_id == "":
            raise ValidationError("subject_id must be a non-empty string")
        if parent_session_id is not None:
            check_text(parent_session_id, "parent session id", max_chars=limits.max_id_chars)
        if subject_id is None and parent_session_id is not None:
            parent = self._registry.get(parent_session_id)
            subject_id = parent.subject_id if parent is not None else None
        return self._remember(
            self._registry.create(
                name, parent_session_id=parent_session_id, model=model, source=source, subject_id=subject_id
            )
        )

    def session_id_for(self, key: str) -> str:
        """The session id that ``key`` names in this namespace (see :meth:`open_session`)."""
        return self._find_keyed(key)[0]

    def _find_keyed(self, key: str) -> tuple[str, SessionInfo | None]:
        if not isinstance(key, str) or not key:
            raise ValidationError("A session key must be a non-empty string")
        return self._registry.find_keyed(key)  # type: ignore[no-any-return]

    def open_session(
        self,
        key: str,
        *,
        name: str | None = None,
        model: str | None = None,
        source: str | None = None,
        subject_id: str | None = None,
    ) -> SessionInfo:
        """The session for the caller's own conversation key, created on first use.

        Agent frameworks name conversations themselves ("user-42"); the session id is derived
        from the namespace and the key with the deployment's secret (HMAC-SHA256, migration
        0016), so it is stable across processes, never clashes with another tenant's key and
        cannot be computed (and taken first) by another tenant. ``name`` defaults to the key.
        """
        session_id, info = self._find_keyed(key)
        if info is not None:
            return self._remember(info)
        if name is not None and not isinstance(name, str):
            raise ValidationError("A session name must be a string")
        try:
            return self._remember(
                self._registry.create(
                    key if name is None else name,
                    model=model,
                    source=source,
                    session_id=session_id,
                    subject_id=subject_id,
                )
            )
        except Exception:
            # Another process created it between the read and the insert: theirs is the session.
            info = self.get(session_id)
            if info is None:
                raise
            return info

    def get(self, session_id: str) -> SessionInfo | None:
        info: SessionInfo | None = self._registry.get(session_id)
        return self._remember(info) if info is not None else None

    def _remember(self, info: SessionInfo) -> SessionInfo:
        """Keep the subject just read; a cached Session wired for another subject is dropped.

        A keyed session's id is the same when it is deleted and opened again, maybe for another
        subject (elsewhere, in another process): its subject blocks must then be the new subject's.
        """
        self._learn_subject(info.id, info.subject_id)
        return info

    def _learn_subject(self, session_id: str, subject_id: str | None) -> None:
        if self._subjects.get(session_id, subject_id) != subject_id:
            self._sessions.pop(session_id, None)
        self._subjects[session_id] = subject_id

    def sessions_sharing(self, session_id: str, scope: str, *, limit: int = 50) -> builtins.list[str]:
        """The other sessions that read ``session_id``'s blocks of ``scope``: its subject's, or the tenant's
        most recently active (at most ``limit``); they are the ones whose frozen prompt a change makes stale.

        The subject each was just read with is kept (a cached Session wired for another is dropped), so
        telling them works their stale blocks out with their own subject's blocks, not ones cached here
        before the session was deleted and opened again for someone else.
        """
        if scope == "subject":
            subject = self._subject_of(session_id)
            if subject is None:
                return []
            ids: builtins.list[str] = self.store.lifecycle().subject_session_ids(self.namespace, subject)
            for other in ids:
                self._learn_subject(other, subject)
        elif scope == "tenant":
            ids = [self._remember(info).id for info in self._registry.list_page(limit=limit + 1)[0]]
        else:
            return []
        return [other for other in ids if other != session_id][:limit]

    def _subject_of(self, session_id: str) -> str | None:
        """The session's subject: as last looked up here, else read from the registry."""
        if session_id not in self._subjects:
            self.get(session_id)
        return self._subjects.get(session_id)

    def list(self) -> builtins.list[SessionInfo]:
        """Every session of the namespace, most recent activity first."""
        return self._registry.list()  # type: ignore[no-any-return]

    def list_page(
        self,
        *,
        limit: int,
        cursor: str | None = None,
        fit: Callable[[builtins.list[SessionInfo]], int] | None = None,
    ) -> tuple[builtins.list[SessionInfo], str | None]:
        """A page of :meth:`list` and the cursor of the next page (None when this is the last).

        ``fit(sessions)`` may cut the page shorter (how many to keep, e.g. by response bytes).
        """
        return self._registry.list_page(limit=limit, cursor=cursor, fit=fit)  # type: ignore[no-any-return]

    def overviews(
        self, session_ids: builtins.list[str], *, preview_chars: int = 160
    ) -> dict[str, SessionOverview] | None:
        """Message count and preview of the given sessions that have messages; None when the registry cannot tell."""
        overviews = getattr(self._registry, "overviews", None)
        if not callable(overviews):
            return None
        return overviews(session_ids, preview_chars=preview_chars)  # type: ignore[no-any-return]

    def count(self) -> int:
        return self._registry.count()  # type: ignore[no-any-return]

    def count_read(self, describe: Callable[[int], str | None]) -> BlockRead | None:
        """``describe(count())`` as a read to batch with others, when the registry can plan one (SQL stores)."""
        count_read = getattr(self._registry, "count_read", None)
        return count_read(describe) if callable(count_read) else None

    def rename(self, session_id: str, name: str) -> SessionInfo:
        self.limits.check_name(name, "session name")
        info = self._registry.rename(session_id, name)
        if info is None:
            raise NotFoundError(f"Session {session_id!r} not found")
        return info  # type: ignore[no-any-return]

    def set_legal_hold(self, session_id: str, hold: bool) -> SessionInfo:
        """Hold (or release) a session: a held session survives every retention sweep."""
        if not isinstance(hold, bool):
            raise ValidationError("legal_hold must be a boolean")
        if not self._registry.set_legal_hold(session_id, hold):
            raise NotFoundError(f"Session {session_id!r} not found")
        return self._require(session_id)

    def delete(self, session_id: str) -> bool:
        """Erase the session and everything derived from it (D12); False if it did not exist."""
        session = self._sessions.pop(session_id, None)
        self._subjects.pop(session_id, None)
        deleted = bool(self._registry.delete(session_id))
        # A prompt in the session's own store went with its other rows; one kept elsewhere is deleted here,
        # whether or not this process built the Session: a keyed session opened again (maybe for another
        # subject) must not find the old prompt under its id.
        prompt_store: object = None
        if session is not None and not session.frozen_prompt_checks_registry:
            prompt_store = session.blocks.prompt_store
        elif session is None and self._prompt_factory is not None:
            prompt_store = self._prompt_factory(session_id)
        delete_prompt = getattr(prompt_store, "delete", None)
        if deleted and callable(delete_prompt):
            delete_prompt()
        return deleted

    def forget_session(self, session_id: str) -> None:
        """Drop the cached Session of an id removed behind the manager's back (retention, erasure)."""
        self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        """Drop what is cached of the session: an id may be deleted and opened again for another subject."""
        self._sessions.pop(session_id, None)
        self._subjects.pop(session_id, None)

    def _touch(self, session_id: str) -> None:
        self._registry.touch(session_id)

    # --------------------------------------------------------------- messages

    def append(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        return self.append_message(session_id, message, parent_id).id

    def append_message(
        self,
        session_id: str,
        message: Message,
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
    ) -> AppendResult:
        """Append to a session of this namespace and stamp its activity, a retry's too (else ``NotFoundError``)."""
        return self._in_registered_session(
            session_id,
            lambda session, registered: session.append_message(
                message, parent_id, expected_leaf_id=expected_leaf_id, registered=registered
            ),
            stamps=True,
        )

    def _in_registered_session(
        self, session_id: str, action: Callable[[Session, bool], _Done], *, stamps: bool = False
    ) -> _Done:
        """Run ``action(session, registered)``: with ``registered`` the storage checks the namespace itself.

        On the SQL stores an append's check, stamp and write are then one transaction (one round trip
        on PostgreSQL), so a session deleted meanwhile gets nothing. A storage that cannot
        (:attr:`Session.checks_registry` false) gets the registry read first and, with ``stamps``, the
        activity stamp after. An id that is not (or no longer) this namespace's, or one the action
        refused before the session was ever kept, stays uncached.
        """
        if not isinstance(session_id, str):
            raise NotFoundError(f"Session {session_id!r} not found")
        known = session_id in self._sessions
        session = self.get_session(session_id)
        try:
            if not session.checks_registry:
                self._require(session_id)
                session = self.get_session(session_id)  # built again if the registry gave another subject
                result = action(session, False)
                if stamps:
                    self._touch(session_id)
                return result
            return action(session, True)
        except Exception as error:
            if isinstance(error, (SessionNotFoundError, SessionChangedError)) or not known:
                self._forget(session_id)
            raise

    def upsert(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        """Update the message if its id is stored, else append it.

        The append goes first (with the session's check and stamp, one round trip on PostgreSQL):
        an agent framework that saves every message this way mostly saves new ones. Only an id
        already stored (the append a no-op) is then rewritten, in a write that checks the session
        (and its subject) again: it may have been deleted or opened again for someone else in between.
        """
        result = self.append_message(session_id, message, parent_id)
        if not result.inserted:
            self.update_message(session_id, message)
        return result.id

    def append_all(
        self, session_id: str, messages: builtins.list[Message], parent_id: str | Omitted | None = OMITTED
    ) -> str | None:
        """Append a chain atomically; an omitted parent attaches to the latest leaf (D10)."""
        if not isinstance(messages, list):
            raise ValidationError("messages must be a list")
        return self._in_registered_session(
            session_id,
            lambda session, registered: session.append_messages(messages, parent_id, registered=registered),
            stamps=True,
        )

    def append_chain(
        self,
        session_id: str,
        messages: builtins.list[Message],
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
    ) -> builtins.list[AppendResult]:
        """Like :meth:`append_all`, with one result per message and an optional stale-leaf guard."""
        return self._in_registered_session(
            session_id,
            lambda session, registered: session.append_chain(
                messages, parent_id, expected_leaf_id=expected_leaf_id, registered=registered
            ),
            stamps=True,
        )

    def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[Message]:
        with self.checked_session(session_id) as session:
            return session.get_history(leaf_id)

    def get_message(self, session_id: str, message_id: str) -> Message | None:
        """A message of a session of this namespace (else ``NotFoundError``), or None if it has no such message.

        On the SQL stores one statement checks the session and reads the message (one round trip).
        """
        return self._in_registered_session(
            session_id, lambda session, registered: session.get_message(message_id, registered=registered)
        )

    def get_latest_leaf(self, session_id: str) -> Message | None:
        """The latest leaf of a session of this namespace (else ``NotFoundError``); one statement on the SQL stores."""
        return self._in_registered_session(
            session_id, lambda session, registered: session.get_latest_leaf(registered=registered)
        )

    def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        with self.checked_session(session_id) as session:
            return session.get_branches(message_id)

    def get_message_count(self, session_id: str) -> int:
        with self.checked_session(session_id) as session:
            return session.get_path_length()

    def get_frozen_system_prompt(self, session_id: str) -> str | None:
        """The session's stored frozen prompt, or None when none is frozen yet (nothing is rendered or stored).

        A session of this namespace only (else ``SessionNotFoundError``): with the prompt in the session's
        own SQL store, the check and the read are one statement (one round trip on PostgreSQL); a prompt kept
        elsewhere (DynamoDB) is read after the registry.
        """

        def read(session: Session, registered: bool) -> str | None:
            joined = registered and session.frozen_prompt_checks_registry
            if registered and not joined:
                self._require(session_id)
            return session.get_frozen_system_prompt(registered=joined)

        return self._in_registered_session(session_id, read)

    def clear_messages(self, session_id: str) -> None:
        """Clear a session of this namespace; on the SQL stores checked and stamped in the clear's transaction."""
        self._in_registered_session(
            session_id, lambda session, registered: session.clear_messages(registered=registered), stamps=True
        )

    def update_message(self, session_id: str, message: Message) -> None:
        """Rewrite a stored message of a session of this namespace (else ``NotFoundError``); no activity stamp.

        On the SQL stores the check is part of the edit's transaction (one round trip on PostgreSQL
        unless a compaction overlay ends at or below the message); over another storage the session
        is checked first.
        """
        self._in_registered_session(
            session_id, lambda session, registered: session.update_message(message, registered=registered)
        )

    def delete_messages(self, session_id: str, message_ids: builtins.list[str]) -> None:
        """Delete the stored ones of ``message_ids`` (ids not stored are skipped) and stamp the session.

        One id is :meth:`delete_message`'s deletion (one round trip on PostgreSQL, what an agent
        framework's "remove the last item" sends), except that an id not stored is skipped and stamps nothing.
        Several are checked and stamped in the deletion's own transaction on the SQL stores.
        """
        if len(message_ids) == 1 and isinstance(message_ids[0], str):
            try:
                self.delete_message(session_id, message_ids[0])
            except SessionNotFoundError:
                raise
            except NotFoundError:
                pass
            return
        self._in_registered_session(
            session_id,
            lambda session, registered: session.delete_messages(message_ids, registered=registered),
            stamps=True,
        )

    def delete_message(self, session_id: str, message_id: str) -> None:
        """Delete one stored message of a session of this namespace (else ``NotFoundError``) and stamp its activity.

        On the SQL stores the check, the deletion and the stamp are one transaction (one round trip on
        PostgreSQL unless a compaction overlay starts or ends at or below the message); an unknown
        message stamps nothing. Over another storage the session is checked first and stamped after.
        """
        self._in_registered_session(
            session_id,
            lambda session, registered: session.delete_message(message_id, registered=registered),
            stamps=True,
        )

    # ------------------------------------------------------- fork and compact

    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """Copy the history up to ``at_message_id`` (overlays materialized) into a new session with new ids.

        On a SQL store the copy happens inside the database in one transaction, a few statements
        whatever the history's length; other session providers get it appended through them. At
        most ``limits.max_fork_messages`` messages are copied (:class:`PayloadTooLargeError` beyond).
        """
        parent = self._require(session_id)
        source = self.get_session(session_id)
        copy_history = getattr(source.storage, "copy_history", None)  # HistoryCopyingSessionProvider
        if not callable(copy_history):
            return self.fork_by_appending(session_id, at_message_id, name)
        if source.get_message(at_message_id) is None:
            raise NotFoundError(f"Message {at_message_id!r} not found in session {session_id!r}")
        self.limits.check_name(name, "session name")
        # the child keeps its parent's subject, known from the check above: no second read of the parent
        info = self._remember(self._registry.create(name, parent_session_id=session_id, subject_id=parent.subject_id))
        try:
            new_ids = copy_history(at_message_id, info.id, limits=self.limits)
        except BaseException:
            self._registry.delete(info.id)
            raise
        self._touch(info.id)
        self.get_session(info.id).adopt_copied_history(new_ids[-1])
        source.announce_change("fork")
        return info

    def fork_by_appending(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """:meth:`fork` through the session API: read the history, append copies (any session provider)."""
        self._require(session_id)
        history = self.get_session(session_id).get_history(at_message_id)
        if not history:
            raise NotFoundError(f"Message {at_message_id!r} not found in session {session_id!r}")
        self.limits.check_fork_size(len(history), at_message_id)
        info = self.create_session(name, parent_session_id=session_id)
        copies = [{**message, "id": str(uuid.uuid4())} for message in history]
        self.get_session(info.id).append_messages(copies, None)
        self._touch(info.id)
        self.get_session(session_id).announce_change("fork")
        return info

    def add_compaction(self, session_id: str, summary: str, from_id: str, to_id: str) -> StoredCompaction:
        self._require(session_id)
        return self.get_session(session_id).add_compaction(summary, from_id, to_id)

    def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        with self.checked_session(session_id) as session:
            return session.get_compactions()

    def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        """End the session (``end_reason = "compaction"``) and continue in a new one seeded with ``summary``."""
        old = self._require(session_id)
        self.limits.check_content(summary, "summary", self.limits.max_summary_bytes)
        if name is not None:
            self.limits.check_name(name, "session name")
        self._registry.end(session_id, "compaction")
        info = self.create_session(
            name if name is not None else (old.name or "Compacted"),
            parent_session_id=session_id,
            model=old.model,
            source=old.source,
        )
        seed = {
            "id": str(uuid.uuid4()),
            "role": "assistant",
            "parts": [{"type": "text", "text": f"{SPLIT_SEED_PREFIX}\n\n{summary}"}],
        }
        self.append(info.id, seed)
        return info

    def add_usage(self, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> SessionInfo:
        """Add to the session's counters; each increment and each total stays finite and within the limits."""
        self.limits.check_usage(input_tokens, output_tokens, cost)
        info = self._registry.add_usage(session_id, input_tokens, output_tokens, float(cost), limits=self.limits)
        if info is None:
            raise NotFoundError(f"Session {session_id!r} not found")
        return info  # type: ignore[no-any-return]

    # ----------------------------------------------------------------- search

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """D5 search across this namespace's sessions; never raises on odd input."""
        if not isinstance(query, str):
            return []
        return self._registry.search(query, limit=limit)  # type: ignore[no-any-return]

    def tools(self) -> dict[str, Tool]:
        """``session_search`` only; merge with a session's own tools."""
        tool = build_session_search_tool(lambda query, limit: self.search(query, limit=limit))
        return {tool.name: tool}


def _bind_session_listener(session: Session, session_id: str, callback: Callable[[str, dict[str, Any]], Any]) -> None:
    def forward(event: dict[str, Any]) -> None:
        callback(session_id, event)

    session.on_event(forward).on_change(forward)
