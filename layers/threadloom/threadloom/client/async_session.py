"""``AsyncRemoteSession``: :class:`~threadloom.client.session.RemoteSession` with every method awaited.

The requests and the reading of their answers are the same operations the synchronous handle
runs (:mod:`threadloom.client.operations`). ``tools()`` has no counterpart: a library ``Tool``
runs synchronously; use ``tool_specs`` and ``call_tool``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.client import operations as ops
from threadloom.records import OMITTED, Omitted

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from threadloom.client.transport import AsyncTransport
    from threadloom.records import (
        AppendResult,
        BlockVersion,
        CompactResult,
        ContextBlock,
        Message,
        Proposal,
        ReflectResult,
        SearchResult,
        StoredCompaction,
    )


class AsyncRemoteSession:
    """A handle on one session; every method is one or a few HTTP requests, nothing is cached."""

    def __init__(self, transport: AsyncTransport, session_id: str, *, page_size: int = 200) -> None:
        self._http = transport
        self.session_id = session_id
        self.page_size = page_size

    def __repr__(self) -> str:
        return f"AsyncRemoteSession({self.session_id!r})"

    # ------------------------------------------------------------- messages

    async def append_message(
        self, message: Message, parent_id: str | Omitted | None = OMITTED, *, expected_leaf_id: str | None = None
    ) -> AppendResult:
        """Append one message; re-sending a stored id is a no-op (``inserted=False``), so retries are safe."""
        return await self._http.run(ops.append_message(self.session_id, message, parent_id, expected_leaf_id))

    async def append_messages(self, messages: list[Message], parent_id: str | Omitted | None = OMITTED) -> str | None:
        return await self._http.run(ops.append_messages(self.session_id, messages, parent_id))

    async def update_message(self, message: Message) -> None:
        await self._http.run(ops.update_message(self.session_id, message))

    async def delete_messages(self, message_ids: list[str]) -> None:
        await self._http.run(ops.delete_messages(self.session_id, message_ids))

    async def clear_messages(self) -> None:
        await self._http.run(ops.clear_messages(self.session_id))

    async def get_message(self, message_id: str) -> Message | None:
        return await self._http.run(ops.get_message(self.session_id, message_id))

    async def get_latest_leaf(self) -> Message | None:
        return await self._http.run(ops.get_latest_leaf(self.session_id))

    async def get_branches(self, message_id: str) -> list[Message]:
        return await self._http.run(
            ops.collect(lambda cursor: ops.branches_page(self.session_id, message_id, self.page_size, cursor))
        )

    def iter_history(self, leaf_id: str | None = None, *, page_size: int | None = None) -> AsyncIterator[Message]:
        """Root → leaf, a page fetched as ``async for`` reaches it."""
        limit = page_size or self.page_size
        return self._http.pages(lambda cursor: ops.history_page(self.session_id, leaf_id, limit, cursor))

    async def get_history(self, leaf_id: str | None = None) -> list[Message]:
        return await self._http.run(ops.get_history(self.session_id, leaf_id, self.page_size))

    async def get_path_length(self, leaf_id: str | None = None) -> int:
        return await self._http.run(ops.get_path_length(self.session_id, leaf_id, self.page_size))

    async def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        return await self._http.run(ops.search(query, limit, self.session_id))

    # -------------------------------------------------------- context blocks

    async def get_context_block(self, label: str) -> ContextBlock | None:
        return await self._http.run(ops.get_context_block(self.session_id, label))

    async def get_context_blocks(self) -> list[ContextBlock]:
        return await self._http.run(ops.get_context_blocks(self.session_id))

    async def replace_context_block(
        self, label: str, content: str, *, based_on_version: int | None = None
    ) -> ContextBlock:
        """Replace a block; with ``based_on_version``, ``StaleVersionError`` when it changed since (409)."""
        return await self._http.run(
            ops.write_context_block(self.session_id, label, content, "replace", based_on_version)
        )

    async def append_context_block(self, label: str, content: str) -> ContextBlock:
        return await self._http.run(ops.write_context_block(self.session_id, label, content, "append"))

    async def context_history(
        self, label: str, *, limit: int | None = None, cursor: str | None = None
    ) -> tuple[list[BlockVersion], str | None]:
        """A page of the block's versions (newest first) and the cursor of the next page (None: the end)."""
        return await self._http.run(ops.context_history(self.session_id, label, limit, cursor))

    async def context_version(self, label: str, version: int) -> BlockVersion:
        return await self._http.run(ops.context_version(self.session_id, label, version))

    async def revert_context(self, label: str, version: int, *, based_on_version: int | None = None) -> ContextBlock:
        """Make an old version current again (a new version)."""
        return await self._http.run(ops.revert_context(self.session_id, label, version, based_on_version))

    # ------------------------------------------------------------ reflection

    async def reflect(self, leaf_id: str | None = None) -> ReflectResult:
        """Reflect the conversation into memory (``queued`` when a worker does it later)."""
        return await self._http.run(ops.reflect(self.session_id, leaf_id))

    async def proposals_page(
        self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> tuple[list[Proposal], str | None]:
        """A page of the session's proposals, oldest first, and the cursor of the next page (None: the end)."""
        return await self._http.run(ops.proposals_page(self.session_id, status, limit, cursor))

    def iter_proposals(self, *, status: str | None = None) -> AsyncIterator[Proposal]:
        return self._http.pages(lambda cursor: ops.proposals_page(self.session_id, status, None, cursor))

    async def approve_proposal(self, proposal_id: str) -> Proposal:
        """Apply a pending proposal (``ConflictError`` when it is no longer pending or its block changed)."""
        return await self._http.run(ops.decide_proposal(self.session_id, proposal_id, "approve"))

    async def reject_proposal(self, proposal_id: str) -> Proposal:
        return await self._http.run(ops.decide_proposal(self.session_id, proposal_id, "reject"))

    async def freeze_system_prompt(self) -> str:
        return await self._http.run(ops.freeze_system_prompt(self.session_id))

    async def refresh_system_prompt(self) -> str:
        return await self._http.run(ops.refresh_system_prompt(self.session_id))

    async def tool_specs(self, fmt: str = "json-schema") -> Any:
        return await self._http.run(ops.tool_specs(self.session_id, fmt))

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        return await self._http.run(ops.call_tool(self.session_id, name, arguments))

    # ------------------------------------------------------------- compaction

    async def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        return await self._http.run(ops.compact(self.session_id, leaf_id))

    async def status(self) -> dict[str, Any]:
        return await self._http.run(ops.status(self.session_id))

    async def get_compactions(self) -> list[StoredCompaction]:
        return await self._http.run(ops.get_compactions(self.session_id))


__all__ = ["AsyncRemoteSession"]
