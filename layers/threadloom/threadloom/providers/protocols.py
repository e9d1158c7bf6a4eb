"""The duck-typed provider kinds of the reference, as ``typing.Protocol`` classes.

Detection is by attribute presence and callability (never by ``isinstance`` on a
base class), so any object with the right methods plugs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from threadloom.limits import Limits
    from threadloom.records import (
        AppendResult,
        BlockChange,
        BlockVersion,
        Message,
        SearchEntry,
        SearchResult,
        StoredCompaction,
    )


@runtime_checkable
class ContextProvider(Protocol):
    """Read-only block content. May also define ``init(label)``, called before ``get``."""

    def get(self) -> str | None: ...


class ReadChannel(Protocol):
    """Where several providers' reads go (one database): it runs them together, answering in order.

    On PostgreSQL the reads of every block then cost one round trip instead of one each.
    """

    def read_together(self, statements: Sequence[Any]) -> Sequence[Any]: ...

    # Optional: ``read_when_missing(first, statements) -> (first's answer, the others' or None)``
    # reads ``statements`` only when ``first`` (a single-value read) finds nothing, in the same
    # round trip; a frozen prompt and the blocks it is rendered from are read that way.


@dataclass(frozen=True, slots=True)
class BlockRead:
    """A provider's ``get()`` as one read that can travel with other providers' reads on ``channel``.

    ``finish`` turns the channel's answer to ``statement`` into what ``get()`` would return.
    A provider offers it through an optional ``block_read()`` method (called after ``init``).
    """

    channel: ReadChannel
    statement: Any
    finish: Callable[[Any], str | None]
    single_value: bool = False
    """The statement answers at most one row of one column, so the channel may read it inside
    another statement (PostgreSQL reads a stored prompt and every block in one)."""


@runtime_checkable
class WritableContextProvider(ContextProvider, Protocol):
    """A block the model may overwrite through ``set_context``."""

    def set(self, content: str) -> None: ...


class VersionedContextProvider(WritableContextProvider, Protocol):
    """A writable block whose every change is a stored version with its provenance (issue 26).

    ``write`` is a compare-and-set: it stores only if the block is still at ``based_on_version``
    (``None``: whatever it is at), else raises ``StaleVersionError``. The store's blocks are one.
    """

    def current(self) -> tuple[str | None, int]: ...

    def write(self, content: str, *, based_on_version: int | None, change: BlockChange) -> int: ...

    def versions(self, *, before: int | None, limit: int, max_bytes: int) -> tuple[list[BlockVersion], bool]: ...

    def version(self, number: int) -> BlockVersion | None: ...


@runtime_checkable
class SkillProvider(ContextProvider, Protocol):
    """Keyed documents: ``get`` lists them, ``load`` fetches one. ``set(key, content, description)`` is optional."""

    def load(self, key: str) -> str | None: ...


@runtime_checkable
class SearchProvider(ContextProvider, Protocol):
    """Searchable keyed entries: ``get`` summarizes, ``search`` queries. ``set(key, content)`` is optional."""

    def search(self, query: str) -> str | None: ...


class SessionProvider(Protocol):
    """Message storage for one session: a tree of messages plus compaction overlays."""

    def get_message(self, message_id: str) -> Message | None: ...

    def get_history(self, leaf_id: str | None = None) -> list[Message]: ...

    def get_latest_leaf(self) -> Message | None: ...

    def get_branches(self, message_id: str) -> list[Message]: ...

    def get_path_length(self, leaf_id: str | None = None) -> int: ...

    def append_message(
        self, message: Message, parent_id: Any = ..., *, expected_leaf_id: str | None = None
    ) -> AppendResult: ...

    def update_message(self, message: Message) -> int | None:
        """Rewrite a stored message; may answer with the latest leaf's running estimate (else None)."""

    def delete_messages(self, message_ids: list[str]) -> None: ...

    def clear_messages(self) -> None: ...

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction: ...

    def get_compactions(self) -> list[StoredCompaction]: ...


@runtime_checkable
class RegistryCheckedSessionProvider(Protocol):
    """A session provider whose append (edit, deletion) can check the session registry in its own transaction.

    A manager's append then needs no read of the registry before it and no stamp after it (the SQL
    stores: one round trip on PostgreSQL instead of three); a manager's edit or deletion, no read before it.
    """

    def append_message(
        self,
        message: Message,
        parent_id: Any = ...,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> AppendResult: ...

    def append_chain(
        self,
        messages: list[Message],
        parent_id: Any = ...,
        *,
        expected_leaf_id: str | None = None,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> list[AppendResult]: ...

    def update_message(
        self, message: Message, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None: ...

    def delete_message(
        self, message_id: str, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> int | None: ...

    def delete_messages(
        self,
        message_ids: list[str],
        *,
        registered_in: str | None = None,
        expected_subject: tuple[str | None] | None = None,
    ) -> None: ...

    def clear_messages(
        self, *, registered_in: str | None = None, expected_subject: tuple[str | None] | None = None
    ) -> None: ...

    def stamp_registered(self, tx: Any, namespace: str) -> None: ...

    def check_registered(self, tx: Any, namespace: str) -> None: ...

    def get_message_in(self, namespace: str, message_id: str) -> Message | None: ...

    def get_latest_leaf_in(self, namespace: str) -> Message | None: ...


class SearchableSessionProvider(SessionProvider, Protocol):
    """A session provider that also offers full-text search over its messages."""

    def search_messages(self, query: str, limit: int = 20) -> list[SearchResult]: ...


class BranchPagingSessionProvider(Protocol):
    """A session provider that reads one page of a message's children by keyset (both SQL backends)."""

    def get_branch_page(
        self, message_id: str, *, after_seq: int, limit: int, max_bytes: int | None = None
    ) -> list[tuple[int, Message | None]]: ...


class HistoryCopyingSessionProvider(Protocol):
    """A session provider that copies a history into another session of its store (a fork) by itself."""

    def copy_history(self, at_message_id: str, target_session_id: str, *, limits: Limits) -> list[str]: ...


class SearchEntryStore(Protocol):
    """A search provider whose keyed entries can be read back and removed (both SQL backends)."""

    label: str

    def init(self, label: str) -> None: ...

    def entries(self, *, after: str = "", limit: int) -> list[SearchEntry]: ...

    def entry(self, key: str) -> SearchEntry | None: ...

    def delete(self, key: str) -> bool: ...


def is_search_entry_store(provider: object) -> bool:
    """True for a search provider that can list, read and delete its entries."""
    methods = ("search", "entries", "entry", "delete")
    return all(_has_callable(provider, name) for name in methods)


def _has_callable(provider: object, name: str) -> bool:
    return provider is not None and callable(getattr(provider, name, None))


def is_writable_provider(provider: object) -> bool:
    """True when the provider has a callable ``set``."""
    return _has_callable(provider, "set")


def is_skill_provider(provider: object) -> bool:
    """True when the provider has a callable ``load``."""
    return _has_callable(provider, "load")


def is_search_provider(provider: object) -> bool:
    """True when the provider has a callable ``search``."""
    return _has_callable(provider, "search")


__all__ = [
    "BlockRead",
    "BranchPagingSessionProvider",
    "ContextProvider",
    "HistoryCopyingSessionProvider",
    "ReadChannel",
    "RegistryCheckedSessionProvider",
    "SearchEntryStore",
    "SearchProvider",
    "SearchableSessionProvider",
    "SessionProvider",
    "SkillProvider",
    "VersionedContextProvider",
    "WritableContextProvider",
    "is_search_entry_store",
    "is_search_provider",
    "is_skill_provider",
    "is_writable_provider",
]
