"""``RemoteSession``: one session of the deployed API, with the methods of the library's ``Session``.

Code written against ``Session`` runs against the API by swapping the object. Configuration
(context blocks, compaction, caching) is the server's profile, so the builder methods of
``Session`` have no counterpart here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.client import operations as ops
from threadloom.client.operations import MAX_CHAIN
from threadloom.records import OMITTED, AppendResult, CompactResult, Omitted
from threadloom.tools.base import Tool

if TYPE_CHECKING:
    from collections.abc import Iterator

    from threadloom.client.transport import Transport
    from threadloom.records import (
        BlockVersion,
        ContextBlock,
        Message,
        Proposal,
        ReflectResult,
        SearchResult,
        StoredCompaction,
    )


class RemoteSession:
    """A handle on one session; every method is one or a few HTTP requests, nothing is cached."""

    def __init__(self, transport: Transport, session_id: str, *, page_size: int = 200) -> None:
        self._http = transport
        self.session_id = session_id
        self.page_size = page_size

    def __repr__(self) -> str:
        return f"RemoteSession({self.session_id!r})"

    # ------------------------------------------------------------- messages

    def append_message(
        self, message: Message, parent_id: str | Omitted | None = OMITTED, *, expected_leaf_id: str | None = None
    ) -> AppendResult:
        """Append one message; re-sending a stored id is a no-op (``inserted=False``), so retries are safe."""
        return self._http.run(ops.append_message(self.session_id, message, parent_id, expected_leaf_id))

    def append_messages(self, messages: list[Message], parent_id: str | Omitted | None = OMITTED) -> str | None:
        """Append a chain; longer chains go in requests of 500, each attached to the previous one's last id."""
        return self._http.run(ops.append_messages(self.session_id, messages, parent_id))

    def update_message(self, message: Message) -> None:
        self._http.run(ops.update_message(self.session_id, message))

    def delete_messages(self, message_ids: list[str]) -> None:
        """Delete each message; ids that are not stored are skipped, as in the library."""
        self._http.run(ops.delete_messages(self.session_id, message_ids))

    def clear_messages(self) -> None:
        self._http.run(ops.clear_messages(self.session_id))

    def get_message(self, message_id: str) -> Message | None:
        return self._http.run(ops.get_message(self.session_id, message_id))

    def get_latest_leaf(self) -> Message | None:
        return self._http.run(ops.get_latest_leaf(self.session_id))

    def get_branches(self, message_id: str) -> list[Message]:
        """The children of a message, oldest first (every page, when the API pages them)."""
        return self._http.run(
            ops.collect(lambda cursor: ops.branches_page(self.session_id, message_id, self.page_size, cursor))
        )

    def iter_history(self, leaf_id: str | None = None, *, page_size: int | None = None) -> Iterator[Message]:
        """Root → leaf with compaction overlays applied, fetched a page at a time as it is consumed."""
        limit = page_size or self.page_size
        return self._http.pages(lambda cursor: ops.history_page(self.session_id, leaf_id, limit, cursor))

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        return self._http.run(ops.get_history(self.session_id, leaf_id, self.page_size))

    def get_path_length(self, leaf_id: str | None = None) -> int:
        return self._http.run(ops.get_path_length(self.session_id, leaf_id, self.page_size))

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        return self._http.run(ops.search(query, limit, self.session_id))

    # -------------------------------------------------------- context blocks

    def get_context_block(self, label: str) -> ContextBlock | None:
        return self._http.run(ops.get_context_block(self.session_id, label))

    def get_context_blocks(self) -> list[ContextBlock]:
        return self._http.run(ops.get_context_blocks(self.session_id))

    def replace_context_block(self, label: str, content: str, *, based_on_version: int | None = None) -> ContextBlock:
        """Replace a block; with ``based_on_version``, ``StaleVersionError`` when it changed since (409)."""
        return self._http.run(ops.write_context_block(self.session_id, label, content, "replace", based_on_version))

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        return self._http.run(ops.write_context_block(self.session_id, label, content, "append"))

    def context_history(
        self, label: str, *, limit: int | None = None, cursor: str | None = None
    ) -> tuple[list[BlockVersion], str | None]:
        """A page of the block's versions (newest first) and the cursor of the next page (None: the end)."""
        return self._http.run(ops.context_history(self.session_id, label, limit, cursor))

    def context_version(self, label: str, version: int) -> BlockVersion:
        return self._http.run(ops.context_version(self.session_id, label, version))

    def revert_context(self, label: str, version: int, *, based_on_version: int | None = None) -> ContextBlock:
        """Make an old version current again (a new version)."""
        return self._http.run(ops.revert_context(self.session_id, label, version, based_on_version))

    # ------------------------------------------------------------ reflection

    def reflect(self, leaf_id: str | None = None) -> ReflectResult:
        """Reflect the conversation into memory (``queued`` when a worker does it later)."""
        return self._http.run(ops.reflect(self.session_id, leaf_id))

    def proposals_page(
        self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> tuple[list[Proposal], str | None]:
        """A page of the session's proposals, oldest first, and the cursor of the next page (None: the end)."""
        return self._http.run(ops.proposals_page(self.session_id, status, limit, cursor))

    def iter_proposals(self, *, status: str | None = None) -> Iterator[Proposal]:
        return self._http.pages(lambda cursor: ops.proposals_page(self.session_id, status, None, cursor))

    def approve_proposal(self, proposal_id: str) -> Proposal:
        """Apply a pending proposal (``ConflictError`` when it is no longer pending or its block changed)."""
        return self._http.run(ops.decide_proposal(self.session_id, proposal_id, "approve"))

    def reject_proposal(self, proposal_id: str) -> Proposal:
        return self._http.run(ops.decide_proposal(self.session_id, proposal_id, "reject"))

    def freeze_system_prompt(self) -> str:
        return self._http.run(ops.freeze_system_prompt(self.session_id))

    def refresh_system_prompt(self) -> str:
        return self._http.run(ops.refresh_system_prompt(self.session_id))

    # ------------------------------------------------------------------ tools

    def tool_specs(self, fmt: str = "json-schema") -> Any:
        """The session's tools in a vendor format: ``json-schema``, ``bedrock``, ``openai`` or ``anthropic``."""
        return self._http.run(ops.tool_specs(self.session_id, fmt))

    def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run a tool on the server; its result text (errors included, as ``Error: ...``)."""
        return self._http.run(ops.call_tool(self.session_id, name, arguments))

    def tools(self) -> dict[str, Tool]:
        """The session's tools (context tools and ``session_search``), executed on the server."""
        return {spec["name"]: self._remote_tool(spec) for spec in self.tool_specs()}

    def _remote_tool(self, spec: dict[str, Any]) -> Tool:
        name = str(spec["name"])

        def execute(arguments: dict[str, Any]) -> str:
            return self.call_tool(name, arguments)

        return Tool(name=name, description=spec["description"], input_schema=spec["inputSchema"], handler=execute)

    # ------------------------------------------------------------- compaction

    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Compact now; None when there was nothing to compact or the server queued it for its worker."""
        return self._http.run(ops.compact(self.session_id, leaf_id))

    def status(self) -> dict[str, Any]:
        """Phase, token estimate and threshold, and the latest compaction request with its state."""
        return self._http.run(ops.status(self.session_id))

    def get_compactions(self) -> list[StoredCompaction]:
        return self._http.run(ops.get_compactions(self.session_id))


__all__ = ["MAX_CHAIN", "RemoteSession"]
