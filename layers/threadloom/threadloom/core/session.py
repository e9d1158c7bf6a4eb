"""``Session``: one conversation's messages, context blocks, skills and compaction.

A builder (``Session.create(store).for_session(id).with_context(...)``) that
initializes lazily on the first real call. Given a store it auto-wires message
storage, block contents, the prompt store and skill state to that store's backend
(contract D11); given a bare session provider it uses only what it is handed.

Over 400 lines because ``Session`` is the facade every caller uses; the work is delegated to
storage, ``ContextBlocks`` and the compaction function.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from threadloom.clock import utc_now
from threadloom.compaction.function import CompactContext
from threadloom.compaction.markers import COMPACTION_PREFIX
from threadloom.compaction.queue import CompactionRequest
from threadloom.core.context import ContextBlocks, ContextConfig
from threadloom.core.events import EventEmitter
from threadloom.core.messages import message_digest
from threadloom.core.skills import reclaim_loaded_skill
from threadloom.errors import CompactionError, ConflictError, NotFoundError, ThreadloomError, ValidationError
from threadloom.limits import DEFAULT_LIMITS, Limits, check_text
from threadloom.providers.protocols import RegistryCheckedSessionProvider
from threadloom.records import (
    BLOCK_SCOPES,
    OMITTED,
    AppendResult,
    BlockChange,
    CompactionFence,
    CompactResult,
    Omitted,
    TokenCountInput,
)
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens
from threadloom.tools.context_tools import build_context_tools

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.compaction.function import CompactFunction
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.providers.protocols import ContextProvider, SessionProvider, WritableContextProvider
    from threadloom.records import (
        BlockScope,
        BlockVersion,
        ContextBlock,
        HistoryPolicy,
        Message,
        SearchResult,
        StoredCompaction,
    )
    from threadloom.tools.base import Tool

logger = logging.getLogger(__name__)

_AUTO: Literal["auto"] = "auto"


def is_store(candidate: object) -> bool:
    """A store offers provider factories; anything else is treated as a session provider."""
    return callable(getattr(candidate, "session_provider", None))


class Session:
    """One conversation. Every method is synchronous; the first call wires providers (lazy init).

    Examples
    --------
    >>> from threadloom import Session, SqliteStore
    >>> session = (
    ...     Session.create(SqliteStore())
    ...     .for_session("chat-1")
    ...     .with_context("soul", provider=StaticText("You are helpful."))
    ...     .with_context("memory", description="Learned facts", max_tokens=1100)
    ...     .with_cached_prompt()
    ... )
    >>> session.append_message({"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    """

    def __init__(self, store_or_provider: Any) -> None:
        if store_or_provider is None:
            raise ValidationError("Session.create() requires a SqlProvider or SessionProvider")
        self._store: Any = store_or_provider if is_store(store_or_provider) else None
        self._explicit_provider: Any = None if self._store is not None else store_or_provider
        self.session_id = ""
        self.namespace = ""
        self.subject_id: str | None = None
        self._history_policy: HistoryPolicy | None = None
        self._pending: list[ContextConfig] = []
        self._cached_prompt: WritableContextProvider | Literal["auto"] | None = None
        self._compaction_fn: CompactFunction | None = None
        self._threshold: int | None = None
        self._token_counter: Callable[[TokenCountInput], float] | None = None
        self._compaction_queue: CompactionQueue | None = None
        self._events = EventEmitter()
        self._ready = False
        self._storage: Any = None
        self._checks_registry = False
        #: The subject this session's ``subject`` blocks were wired for, as a 1-tuple (None: none wired).
        #: A registered write checks it against the registry row (a keyed session opened again elsewhere).
        self._wired_subject: tuple[str | None] | None = None
        self._prompt_in_store = False
        self._blocks: ContextBlocks | None = None
        self._skill_state: Any = None
        self._warned_noop = False
        self._prompt_tokens_memo: tuple[str, int] | None = None
        self._compacting = 0
        self.limits: Limits = DEFAULT_LIMITS

    # ---------------------------------------------------------------- builder

    @classmethod
    def create(cls, store_or_session_provider: Any) -> Session:
        """Start a builder over a store (auto-wiring) or a bare session provider."""
        return cls(store_or_session_provider)

    def for_session(self, session_id: str) -> Session:
        """Scope storage and auto-wired block keys to ``session_id``; before first use only."""
        self._still_building("for_session")
        if not isinstance(session_id, str):
            raise ValidationError("session_id must be a string")
        self.session_id = session_id
        return self

    def in_namespace(self, namespace: str) -> Session:
        """The tenant or namespace the session belongs to (used to label queued compactions)."""
        self._still_building("in_namespace")
        self.namespace = namespace
        return self

    def for_subject(self, subject_id: str | None) -> Session:
        """The end user the session belongs to: its ``subject`` blocks are that user's, shared by their sessions."""
        self._still_building("for_subject")
        if subject_id is not None and (not isinstance(subject_id, str) or not subject_id):
            raise ValidationError("subject_id must be a non-empty string")
        self.subject_id = subject_id
        return self

    def with_block_history(self, policy: HistoryPolicy) -> Session:
        """How many versions (or days of them) each auto-wired writable block keeps (100 versions otherwise)."""
        self._still_building("with_block_history")
        self._history_policy = policy
        return self

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: ContextProvider | None = None,
        scope: BlockScope = "session",
    ) -> Session:
        """Add a context block; without a provider it is auto-wired to the store as a writable block.

        ``scope`` says who shares an auto-wired block: this session (the default), every session
        of the session's subject (``for_subject``) or every session of the namespace (``tenant``).
        A ``subject`` block of a session without a subject is empty and read-only.
        """
        self._still_building("with_context")
        if scope not in BLOCK_SCOPES:
            raise ValidationError(f"scope must be one of {', '.join(BLOCK_SCOPES)}, got {scope!r}")
        self._pending.append(ContextConfig(label, description, max_tokens, provider, scope))
        return self

    def with_cached_prompt(self, provider: WritableContextProvider | None = None) -> Session:
        """Persist the frozen system prompt (to ``provider``, or to the store when omitted)."""
        self._still_building("with_cached_prompt")
        self._cached_prompt = provider if provider is not None else _AUTO
        return self

    def on_compaction(self, fn: CompactFunction) -> Session:
        """Register the function that decides what to summarize (see ``create_compact_function``)."""
        self._compaction_fn = fn
        return self

    def compact_after(
        self, threshold: int, *, token_counter: Callable[[TokenCountInput], float] | None = None
    ) -> Session:
        """Compact automatically once the estimate strictly exceeds ``threshold`` after an append."""
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ValidationError(f"threshold must be a non-negative integer, got {threshold!r}")
        self._threshold = threshold
        if token_counter:
            self._token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> Session:
        """Called for every failure of automatic compaction; the append itself never fails (D8)."""
        self._events.error_handler = handler
        return self

    def on_event(self, callback: Callable[[dict[str, Any]], Any]) -> Session:
        """Receive ``session_status`` and ``session_error`` events (contract §5)."""
        self._events.add_listener(callback)
        return self

    def on_change(self, callback: Callable[[dict[str, Any]], Any]) -> Session:
        """Receive ``{"type": "session_changed", "change": kind, "leafId"?: id}`` after each write (ids only)."""
        self._events.add_change_listener(callback)
        return self

    def adopt_copied_history(self, leaf_id: str) -> None:
        """After storage copied a history in (a fork): what an append of it would have triggered.

        Listeners hear the status and an ``append`` change, and a copy over the threshold compacts.
        """
        self._ensure_ready()
        estimate = self._emit_status("idle")
        self._events.emit_change("append", leaf_id)
        self._maybe_auto_compact(estimate, leaf_id)

    def announce_change(self, change: str, leaf_id: str | None = None) -> None:
        """Tell change listeners about a write made around the session (a fork, a context tool)."""
        self._events.emit_change(change, leaf_id)

    @property
    def token_threshold(self) -> int | None:
        """The auto-compaction threshold (``compact_after``), or None."""
        return self._threshold

    @property
    def compacting(self) -> bool:
        """Whether this object is running ``compact`` right now (in this process)."""
        return self._compacting > 0

    def with_limits(self, limits: Limits) -> Session:
        """Enforce ``limits`` on every write (messages, blocks, skills, entries); ``DEFAULT_LIMITS`` otherwise."""
        self.limits = limits
        return self

    def with_compaction_queue(self, queue: CompactionQueue) -> Session:
        """Hand automatic compaction to a queue: appends only enqueue, a worker compacts (D9)."""
        self._compaction_queue = queue
        return self

    def _still_building(self, method: str) -> None:
        """Wiring is fixed at first use: a later change would relabel this object, not move its storage."""
        if self._ready:
            raise ValidationError(
                f"{method}() must come before the session's first use: its storage is already wired to session "
                f"{self.session_id!r}; create another Session for another conversation"
            )

    # -------------------------------------------------------------- lazy init

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        store = self._store
        suffix = f"_{self.session_id}" if self.session_id else ""
        owner = self.session_id or None
        configs: list[ContextConfig] = []
        for config in self._pending:
            provider = config.provider
            if provider is None and store is not None:
                provider = self._store_block(config.label, config.scope, f"{config.label}{suffix}", owner)
            configs.append(ContextConfig(config.label, config.description, config.max_tokens, provider, config.scope))
        prompt_store: WritableContextProvider | None = None
        if self._cached_prompt == _AUTO:
            prompt_store = store.prompt_store(self.session_id, namespace=self.namespace) if store is not None else None
            self._prompt_in_store = prompt_store is not None and callable(getattr(prompt_store, "get_registered", None))
        elif self._cached_prompt is not None:
            prompt_store = self._cached_prompt
        self._storage = store.session_provider(self.session_id) if store is not None else self._explicit_provider
        self._checks_registry = isinstance(self._storage, RegistryCheckedSessionProvider)
        if any(config.scope == "subject" for config in configs):
            self._wired_subject = (self.subject_id,)
        self._skill_state = store.skill_state(self.session_id) if store is not None else None
        self._blocks = ContextBlocks(
            configs,
            prompt_store,
            on_unload=self._reclaim_skill,
            on_loaded_skills_changed=self._persist_loaded_skills,
            loaded_skills=self._skill_state.load if self._skill_state is not None else None,
            limits=self.limits,
            tool_change=self._tool_change,
            on_shared_change=self._events.emit_shared_change,
        )
        self._ready = True

    def _store_block(
        self, label: str, scope: BlockScope, session_key: str, owner: str | None
    ) -> ContextProvider | None:
        """The store's provider of an auto-wired block of ``scope`` (None: a subject block without a subject)."""
        store = self._store
        history = {"history": self._history_policy} if self._history_policy is not None else {}
        if scope == "session":
            return store.context_provider(session_key, session_id=owner, namespace=self.namespace, **history)  # type: ignore[no-any-return]
        if scope == "subject" and not self.subject_id:
            return None
        subject = self.subject_id or "" if scope == "subject" else ""
        return store.shared_block(label, scope=scope, namespace=self.namespace, subject_id=subject, **history)  # type: ignore[no-any-return]

    def _tool_change(self) -> BlockChange:
        """The provenance of a change by a model tool call: this session, after its latest message."""
        latest = self._storage.get_latest_leaf() if self._storage is not None else None
        message_ids = (str(latest["id"]),) if latest is not None else ()
        return BlockChange(source="tool", session_id=self.session_id or None, message_ids=message_ids)

    @property
    def checks_registry(self) -> bool:
        """Whether ``append_message(..., registered=True)`` can check and stamp the registry (the SQL stores)."""
        self._ensure_ready()
        return self._checks_registry

    @property
    def frozen_prompt_checks_registry(self) -> bool:
        """Whether the frozen prompt lives in the session's own store, whose read can join the registry's row."""
        self._ensure_ready()
        return self._prompt_in_store

    def get_frozen_system_prompt(self, *, registered: bool = False) -> str | None:
        """The stored frozen prompt, or None when none is frozen yet; it never renders or stores one.

        ``registered`` (a :class:`SessionManager`'s read, :attr:`frozen_prompt_checks_registry`): the same
        statement checks that the session's namespace holds it, else :class:`SessionNotFoundError`.
        """
        self._ensure_ready()
        store: Any = self.blocks.prompt_store
        if registered:
            if not self._prompt_in_store:
                raise ValidationError("This session's prompt store cannot check the session registry in its read")
            return store.get_registered()  # type: ignore[no-any-return]
        return store.get() if store is not None else None

    def _require_registry_check(self) -> None:
        if not self._checks_registry:
            raise ValidationError("This session's storage cannot check the session registry in an append")

    @property
    def storage(self) -> SessionProvider:
        """The session provider in use (after lazy init)."""
        self._ensure_ready()
        return self._storage  # type: ignore[no-any-return]

    @property
    def blocks(self) -> ContextBlocks:
        self._ensure_ready()
        assert self._blocks is not None
        return self._blocks

    def _persist_loaded_skills(self, skill_ids: set[str]) -> None:
        if self._skill_state is not None:
            self._skill_state.save(skill_ids)

    def _reclaim_skill(self, label: str, key: str) -> None:
        rewritten = reclaim_loaded_skill(self.get_history(), label, key)
        if rewritten is not None:
            self.update_message(rewritten)

    # --------------------------------------------------------------- messages

    def append_message(
        self,
        message: Message,
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered: bool = False,
    ) -> AppendResult:
        """Store a message. Omitted parent: the latest leaf; ``None``: a new root; a string: that parent.

        Re-sending an id already stored is a no-op (``inserted=False``). With
        ``expected_leaf_id`` the append fails with :class:`ConflictError` if the leaf moved.
        With ``registered`` (a :class:`SessionManager`'s append) the storage also stamps the
        session's activity in its namespace's registry, in the append's own transaction, and
        refuses with :class:`SessionNotFoundError` (nothing written) when the namespace does not
        hold the session, or with :class:`SessionChangedError` when the session's ``subject`` blocks
        were wired for another subject than its row now holds; the storage must offer it
        (:attr:`checks_registry`).
        """
        self.limits.check_message(message)
        if isinstance(parent_id, str):
            self._check_reference(parent_id, "parent id")
        if expected_leaf_id is not None:
            self._check_reference(expected_leaf_id, "expected leaf id")
        if not self._ready:
            self._ensure_ready()
        result: AppendResult
        if registered:
            self._require_registry_check()
            result = self._storage.append_message(
                message,
                parent_id,
                expected_leaf_id=expected_leaf_id,
                registered_in=self.namespace,
                expected_subject=self._wired_subject,
            )
        else:
            result = self._storage.append_message(message, parent_id, expected_leaf_id=expected_leaf_id)
        # A new message is the latest leaf (D2), so its running estimate is the history's.
        estimate = self._emit_status("idle", leaf_tokens=result.path_tokens if result.inserted else None)
        if result.inserted:
            self._events.emit_change("append", result.id)  # before a queued compaction can announce itself
            self._maybe_auto_compact(estimate, result.id, registered=registered)
        if not self._needs_estimate():
            return result
        if result.__class__ is AppendResult:  # what replace() returns, built without its field walk
            return AppendResult(result.id, result.parent_id, result.inserted, result.path_tokens, estimate)
        return replace(result, token_estimate=estimate)

    def append_messages(
        self, messages: list[Message], parent_id: str | Omitted | None = OMITTED, *, registered: bool = False
    ) -> str | None:
        """Append a chain in one transaction where the backend allows it; returns the last id (D10)."""
        results = self.append_chain(messages, parent_id, registered=registered)
        return results[-1].id if results else (None if isinstance(parent_id, Omitted) else parent_id)

    def append_chain(
        self,
        messages: list[Message],
        parent_id: str | Omitted | None = OMITTED,
        *,
        expected_leaf_id: str | None = None,
        registered: bool = False,
    ) -> list[AppendResult]:
        """Append a chain atomically: one result per message, the first one's ``parent_id`` where it attached.

        With ``expected_leaf_id`` the chain is refused (:class:`ConflictError`) when the
        latest leaf moved; the check runs under the same lock as the write. ``registered``:
        as for :meth:`append_message` (an empty chain is checked and stamps too).
        """
        if not isinstance(messages, list):
            raise ValidationError("messages must be a list")
        for message in messages:
            self.limits.check_message(message)
        self._check_reference(parent_id, "parent id")
        self._check_reference(expected_leaf_id, "expected leaf id")
        self._ensure_ready()
        storage = self._storage
        results: list[AppendResult] = []
        if registered:
            self._require_registry_check()
            results = storage.append_chain(
                messages,
                parent_id,
                expected_leaf_id=expected_leaf_id,
                registered_in=self.namespace,
                expected_subject=self._wired_subject,
            )
        elif callable(getattr(storage, "append_chain", None)):
            results = storage.append_chain(messages, parent_id, expected_leaf_id=expected_leaf_id)
        else:
            parent = parent_id
            for index, message in enumerate(messages):
                result = storage.append_message(
                    message, parent, expected_leaf_id=expected_leaf_id if index == 0 else None
                )
                results.append(result)
                parent = result.id
        latest = next((result for result in reversed(results) if result.inserted), None)
        estimate = self._emit_status("idle", leaf_tokens=latest.path_tokens if latest is not None else None)
        if any(result.inserted for result in results):
            self._events.emit_change("append", results[-1].id)
            self._maybe_auto_compact(estimate, results[-1].id, registered=registered)
        if results and self._needs_estimate():
            results[-1] = replace(results[-1], token_estimate=estimate)
        return results

    def _check_reference(self, value: object, what: str) -> None:
        """Ids that only refer to stored messages need the text rules, not the id alphabet (they may predate it)."""
        if isinstance(value, str):
            check_text(value, what, max_chars=self.limits.max_id_chars)

    def update_message(self, message: Message, *, registered: bool = False) -> None:
        """Replace a stored message (matched by ``id``).

        ``registered`` (a :class:`SessionManager`'s edit): the storage checks, in the edit's own
        transaction, that the session's namespace holds it, else :class:`SessionNotFoundError`.
        """
        self.limits.check_message(message)
        self._ensure_ready()
        if registered:
            self._require_registry_check()
            leaf_tokens = self._storage.update_message(
                message, registered_in=self.namespace, expected_subject=self._wired_subject
            )
        else:
            leaf_tokens = self._storage.update_message(message)
        # A storage may answer with the latest leaf's running estimate (PostgreSQL's one-call edit).
        self._emit_status("idle", leaf_tokens=leaf_tokens if isinstance(leaf_tokens, int) else None)
        self._events.emit_change("update")

    def delete_messages(self, message_ids: list[str], *, registered: bool = False) -> None:
        """Delete messages; their children are re-attached to the nearest surviving ancestor (D4).

        ``registered`` (a :class:`SessionManager`'s deletion): as for :meth:`delete_message`.
        """
        self._ensure_ready()
        if registered:
            self._require_registry_check()
            self._storage.delete_messages(
                list(message_ids), registered_in=self.namespace, expected_subject=self._wired_subject
            )
        else:
            self._storage.delete_messages(list(message_ids))
        self._emit_status("idle")
        self._events.emit_change("delete")

    def delete_message(self, message_id: str, *, registered: bool = False) -> None:
        """Delete one stored message as :meth:`delete_messages` does; :class:`NotFoundError` if none has that id.

        ``registered`` (a :class:`SessionManager`'s deletion): the storage checks, in the deletion's own
        transaction, that the session's namespace holds it (else :class:`SessionNotFoundError`) and stamps
        its activity. A storage without a one-message deletion gets a read and :meth:`delete_messages`.
        """
        self._ensure_ready()
        storage = self._storage
        if registered:
            self._require_registry_check()
            leaf_tokens = storage.delete_message(
                message_id, registered_in=self.namespace, expected_subject=self._wired_subject
            )
        elif callable(getattr(storage, "delete_message", None)):
            leaf_tokens = storage.delete_message(message_id)
        else:
            if not isinstance(message_id, str) or storage.get_message(message_id) is None:
                raise NotFoundError(f"Message {message_id!r} not found in session {self.session_id!r}")
            storage.delete_messages([message_id])
            leaf_tokens = None
        # A storage may answer with the new leaf's running estimate (PostgreSQL's one-call deletion).
        self._emit_status("idle", leaf_tokens=leaf_tokens if isinstance(leaf_tokens, int) else None)
        self._events.emit_change("delete")

    def clear_messages(self, *, registered: bool = False) -> None:
        """Delete every message and overlay, forget loaded skills and re-render the prompt.

        ``registered`` (a :class:`SessionManager`'s clear): as for :meth:`delete_message`.
        """
        self._ensure_ready()
        if registered:
            self._require_registry_check()
            self._storage.clear_messages(registered_in=self.namespace, expected_subject=self._wired_subject)
        else:
            self._storage.clear_messages()
        self.blocks.clear_skill_state()
        self.blocks.refresh_system_prompt()
        self._emit_status("idle")
        self._events.emit_change("clear")

    # ------------------------------------------------------------------ reads

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        """Root→leaf (the latest leaf by default) with compaction overlays applied."""
        self._ensure_ready()
        return self._storage.get_history(leaf_id)  # type: ignore[no-any-return]

    def get_message(self, message_id: str, *, registered: bool = False) -> Message | None:
        """A stored message, or None. ``registered`` (a manager's read): the same statement checks that
        the session's namespace holds it, else :class:`SessionNotFoundError`."""
        self._ensure_ready()
        if registered:
            self._require_registry_check()
            return self._storage.get_message_in(self.namespace, message_id)  # type: ignore[no-any-return]
        return self._storage.get_message(message_id)  # type: ignore[no-any-return]

    def get_latest_leaf(self, *, registered: bool = False) -> Message | None:
        """The latest leaf's message, or None; ``registered`` as for :meth:`get_message`."""
        self._ensure_ready()
        if registered:
            self._require_registry_check()
            return self._storage.get_latest_leaf_in(self.namespace)  # type: ignore[no-any-return]
        return self._storage.get_latest_leaf()  # type: ignore[no-any-return]

    def get_branches(self, message_id: str) -> list[Message]:
        self._ensure_ready()
        return self._storage.get_branches(message_id)  # type: ignore[no-any-return]

    def get_branch_page(
        self, message_id: str, *, after_seq: int = 0, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, Message | None]]:
        """Up to ``limit`` children after the keyset ``after_seq``, each with its keyset value, oldest first.

        Past ``max_bytes`` of stored JSON a child comes as ``(seq, None)``: it exists but was not read
        (the first always is). Storage without a paged read (a custom provider) is paged over
        :meth:`get_branches`, by position, and reads every child.
        """
        self._ensure_ready()
        paged = getattr(self._storage, "get_branch_page", None)  # BranchPagingSessionProvider
        if callable(paged):
            return paged(message_id, after_seq=after_seq, limit=limit, max_bytes=max_bytes)  # type: ignore[no-any-return]
        children: list[Message | None] = list(self._storage.get_branches(message_id))
        return list(enumerate(children, start=1))[after_seq : after_seq + limit]

    def get_path_length(self, leaf_id: str | None = None) -> int:
        self._ensure_ready()
        return int(self._storage.get_path_length(leaf_id))

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Full-text search of this session's messages (contract D5 dialect)."""
        self._ensure_ready()
        search = getattr(self._storage, "search_messages", None)
        if not callable(search):
            raise ThreadloomError("Session provider does not support search")
        return search(query, limit)  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- context

    def get_context_block(self, label: str) -> ContextBlock | None:
        """One block (loads the blocks on first use, unlike the reference, which returned None)."""
        self.blocks.ensure_loaded()
        return self.blocks.get_block(label)

    def get_context_blocks(self) -> list[ContextBlock]:
        self.blocks.ensure_loaded()
        return self.blocks.get_blocks()

    def replace_context_block(
        self,
        label: str,
        content: str,
        *,
        based_on_version: int | None = None,
        change: BlockChange | None = None,
    ) -> ContextBlock:
        """Overwrite a writable block; the frozen prompt is unchanged until refreshed.

        This is the versioned write path every caller shares (HTTP, import, reflection):
        with ``based_on_version`` the write is refused (:class:`StaleVersionError`, with the
        current version) when the block changed since; ``change`` is the provenance stored
        with the new version (the library by default).
        """
        block = self.blocks.set_block(
            label, content, based_on_version=based_on_version, change=change or BlockChange(source="library")
        )
        self._events.emit_change("context")
        return block

    def append_context_block(self, label: str, content: str, *, change: BlockChange | None = None) -> ContextBlock:
        """Append to a writable block, merged with what is stored now (concurrent appends all land)."""
        block = self.blocks.append_to_block(label, content, change=change or BlockChange(source="library"))
        self._events.emit_change("context")
        return block

    def read_context_block(self, label: str) -> ContextBlock | None:
        """The block as stored now, with its version (a shared block may have changed elsewhere)."""
        self.blocks.ensure_loaded()
        return self.blocks.reload_block(label)

    def context_history(
        self, label: str, *, before: int | None = None, limit: int = 50, max_bytes: int = 5 * 1024 * 1024
    ) -> tuple[list[BlockVersion], bool]:
        """The block's versions below ``before``, newest first, and whether older ones remain."""
        return self.blocks.block_versions(label, before=before, limit=limit, max_bytes=max_bytes)

    def context_version(self, label: str, version: int) -> BlockVersion:
        """One stored version of the block (``NotFoundError`` when it never existed or was pruned)."""
        return self.blocks.block_version(label, version)

    def revert_context(
        self, label: str, version: int, *, change: BlockChange | None = None, based_on_version: int | None = None
    ) -> ContextBlock:
        """Make an old version's content current again, as a new version."""
        block = self.blocks.revert_block(
            label, version, change=change or BlockChange(source="library"), based_on_version=based_on_version
        )
        self._events.emit_change("context")
        return block

    def stale_prompt_blocks(self) -> list[str]:
        """Shared blocks changed since the frozen prompt was rendered ([] when none is frozen yet)."""
        blocks = self.blocks
        if not any(config.scope != "session" for config in blocks.configs):
            return []
        store = blocks.prompt_store
        frozen = store.get() if store is not None else None
        return [] if frozen is None else blocks.stale_shared_blocks(frozen)

    def add_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: ContextProvider | None = None,
    ) -> ContextBlock:
        """Add a block at runtime (auto-wired to the store without a provider); refresh the prompt to show it."""
        self._ensure_ready()
        if provider is None:
            if self._store is None:
                raise ValidationError(
                    f'addContext("{label}") requires an explicit provider when Session uses a SessionProvider'
                )
            suffix = f"_{self.session_id}" if self.session_id else ""
            provider = self._store.context_provider(
                f"{label}{suffix}", session_id=self.session_id or None, namespace=self.namespace
            )
        return self.blocks.add_block(ContextConfig(label, description, max_tokens, provider))

    def remove_context(self, label: str) -> bool:
        """Drop a block (and its loaded skills); history is not rewritten, as in the reference."""
        return self.blocks.remove_block(label)

    def freeze_system_prompt(self) -> str:
        """The cached prompt if one is stored, else render it once and persist it (first freeze wins)."""
        return self.blocks.freeze_system_prompt()

    def refresh_system_prompt(self) -> str:
        """Re-read every block, re-render and persist."""
        prompt = self.blocks.refresh_system_prompt()
        self._events.emit_change("context")
        return prompt

    # ----------------------------------------------------------------- skills

    def unload_skill(self, label: str, key: str) -> bool:
        """Forget a loaded skill and rewrite its tool result to ``[skill unloaded: <key>]`` (D7)."""
        unloaded = self.blocks.unload_skill(label, key)
        if unloaded:
            self._events.emit_change("context")
        return unloaded

    def get_loaded_skill_keys(self) -> set[str]:
        return self.blocks.loaded_skill_keys()

    def tools(self) -> dict[str, Tool]:
        """The model tools this session's blocks enable (never ``session_search``)."""
        self.blocks.ensure_loaded()
        return build_context_tools(self.blocks)

    # ------------------------------------------------------------- compaction

    def add_compaction(self, summary: str, from_id: str, to_id: str) -> StoredCompaction:
        self.limits.check_content(summary, "compaction summary", self.limits.max_summary_bytes)
        self._ensure_ready()
        stored: StoredCompaction = self._storage.add_compaction(summary, from_id, to_id)
        return stored

    def get_compactions(self) -> list[StoredCompaction]:
        self._ensure_ready()
        return self._storage.get_compactions()  # type: ignore[no-any-return]

    def compact(
        self, leaf_id: str | None = None, *, request_key: str | None = None, registered: bool = False
    ) -> CompactResult | None:
        """Run the compaction function now and store its overlay.

        The overlay commits only if the branch it was computed from is unchanged, its messages
        included (fenced, contract §4); if another caller already committed the same ``request_key``
        it raises :class:`CompactionAlreadyStoredError` (a :class:`ConflictError`).
        Failures of the function, and a summary over ``limits.max_summary_bytes``, raise
        :class:`CompactionError` (D8). ``registered`` (a :class:`SessionManager`'s compaction): the
        commit's transaction checks that the namespace still holds the session, for the subject its
        blocks are wired for, else :class:`SessionNotFoundError` or :class:`SessionChangedError`.
        """
        self._ensure_ready()
        fn = self._compaction_fn
        if fn is None:
            raise CompactionError("No compaction function registered. Call onCompaction() first.")
        if registered:
            self._require_registry_check()
        self._compacting += 1
        try:
            return self._compact(fn, leaf_id, request_key, registered)
        finally:
            self._compacting -= 1

    def _compact(
        self, fn: CompactFunction, leaf_id: str | None, request_key: str | None, registered: bool
    ) -> CompactResult | None:
        storage = self._storage
        tokens_before = self._emit_status("compacting")
        target_leaf = leaf_id or _latest_leaf_id(storage)
        fence = _make_fence(storage, target_leaf)
        history = self.get_history(target_leaf)
        # Taken before the function runs, which may change what it is given
        read = [(str(message["id"]), message_digest(message)) for message in history] if fence is not None else []
        try:
            result = fn(history, CompactContext(token_counter=self._token_counter))
        except Exception as error:
            self._events.emit_error(str(error))
            raise CompactionError(f"Compaction function failed: {error}") from error
        history_ids = [message.get("id") for message in history]
        if result is None or result.to_message_id not in history_ids:
            self._emit_status("idle")
            return None
        try:
            self.limits.check_content(result.summary, "compaction summary", self.limits.max_summary_bytes)
        except ValidationError as error:
            self._events.emit_error(str(error))
            raise CompactionError(f"Compaction function failed: {error}") from error
        visible = [
            compaction
            for compaction in storage.get_compactions()
            if f"{COMPACTION_PREFIX}{compaction.id}" in history_ids
            or (compaction.from_message_id in history_ids and compaction.to_message_id in history_ids)
        ]
        from_id = visible[0].from_message_id if visible else result.from_message_id
        scope = {"registered_in": self.namespace, "expected_subject": self._wired_subject} if registered else {}
        try:
            if fence is not None:
                # The stored messages up to the overlay's end: an overlay in the history is fenced by its id
                summarized = read[: history_ids.index(result.to_message_id) + 1]
                fence.messages = tuple(item for item in summarized if not item[0].startswith(COMPACTION_PREFIX))
                storage.add_compaction(
                    result.summary, from_id, result.to_message_id, request_key=request_key, fence=fence, **scope
                )
            else:
                storage.add_compaction(result.summary, from_id, result.to_message_id, **scope)
        except (ConflictError, NotFoundError):
            self._emit_status("idle")  # nothing was stored: the watchers' "compacting" ends here too
            raise
        self.blocks.refresh_system_prompt()
        self._emit_status("idle", compacted={"tokensBefore": tokens_before})
        self._events.emit_change("compaction", target_leaf)
        return CompactResult(from_message_id=from_id, to_message_id=result.to_message_id, summary=result.summary)

    def estimate_tokens(self) -> int:
        """The auto-compaction estimate: history (overlays applied) plus the frozen prompt."""
        return self._estimate(None)

    def _estimate(self, leaf_tokens: int | None) -> int:
        """``estimate_tokens``, skipping the read of the leaf's running estimate when the append returned it."""
        self._ensure_ready()
        blocks = self.blocks
        system_prompt = blocks.system_prompt_for_estimate()
        if self._token_counter is not None:
            blocks.ensure_loaded()
            value = self._token_counter(
                TokenCountInput(
                    messages=self.get_history(), system_prompt=system_prompt, context_blocks=blocks.get_blocks()
                )
            )
            return max(0, math.ceil(value)) if isinstance(value, (int, float)) and math.isfinite(value) else 0
        if leaf_tokens is not None:
            message_tokens: int = leaf_tokens
        else:
            incremental = getattr(self._storage, "get_token_estimate", None)
            message_tokens = incremental() if callable(incremental) else estimate_message_tokens(self.get_history())
        return int(message_tokens) + self._prompt_tokens(system_prompt)

    def _prompt_tokens(self, prompt: str) -> int:
        """Tokens of the frozen prompt, computed once per prompt text rather than after every append."""
        cached = self._prompt_tokens_memo
        if cached is not None and cached[0] == prompt:
            return cached[1]
        tokens = estimate_string_tokens(prompt)
        self._prompt_tokens_memo = (prompt, tokens)
        return tokens

    # ----------------------------------------------------------------- events

    def _needs_estimate(self) -> bool:
        return self._events.has_listeners or (self._threshold is not None and self._compaction_fn is not None)

    def _emit_status(
        self, phase: str, *, compacted: dict[str, int] | None = None, leaf_tokens: int | None = None
    ) -> int:
        estimate = 0
        if self._needs_estimate():
            try:
                estimate = self._estimate(leaf_tokens)
            except Exception as error:  # an estimate failure must never fail the write that triggered it
                self._events.report_auto_error(error)
        self._events.emit_status(phase, estimate, self._threshold, compacted)
        return estimate

    def _maybe_auto_compact(self, estimate: int, leaf_id: str, *, registered: bool = False) -> None:
        if self._threshold is None or self._compaction_fn is None or estimate <= self._threshold:
            return
        try:
            if self._compaction_queue is not None:
                self._compaction_queue.enqueue(
                    CompactionRequest(
                        namespace=self.namespace, session_id=self.session_id, leaf_id=leaf_id, requested_at=utc_now()
                    )
                )
                return
            compacted = self.compact(registered=registered)
        except (ConflictError, NotFoundError) as error:  # changed or deleted meanwhile: nothing was stored
            logger.info("Automatic compaction skipped: %s", error)
            return
        except Exception as error:
            self._events.report_auto_error(error)
            return
        if compacted is None and not self._warned_noop:
            self._warned_noop = True
            logger.warning(
                "[Session] Auto-compaction fired (~%s tokens > %s) but the compaction function returned null, "
                "so history was not shortened.",
                estimate,
                self._threshold,
            )
        elif compacted is not None:
            self._warned_noop = False


def _latest_leaf_id(storage: Any) -> str | None:
    get_leaf_id = getattr(storage, "get_latest_leaf_id", None)
    if callable(get_leaf_id):
        return get_leaf_id()  # type: ignore[no-any-return]
    leaf = storage.get_latest_leaf()
    return leaf.get("id") if isinstance(leaf, dict) else None


def _make_fence(storage: Any, leaf_id: str | None) -> Any:
    """A fence when the backend supports fenced commits (the SQL backends do)."""
    latest = getattr(storage, "get_latest_compaction_id", None)
    if leaf_id is None or not callable(latest):
        return None
    return CompactionFence(leaf_id, latest())
