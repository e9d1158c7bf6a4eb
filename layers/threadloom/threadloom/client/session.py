"""``RemoteSession``: one session of the deployed API, with the methods of the library's ``Session``.

Code written against ``Session`` runs against the API by swapping the object. Configuration
(context blocks, compaction, caching) is the server's profile, so the builder methods of
``Session`` have no counterpart here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from threadloom.client import wire
from threadloom.client.transport import path
from threadloom.errors import NotFoundError
from threadloom.records import OMITTED, AppendResult, CompactResult, Omitted
from threadloom.tools.base import Tool

if TYPE_CHECKING:
    from collections.abc import Iterator

    from threadloom.client.transport import Transport
    from threadloom.records import ContextBlock, Message, SearchResult, StoredCompaction

MAX_CHAIN: Final = 500
"""The most messages one append request may carry (``AppendIn.messages``)."""


class RemoteSession:
    """A handle on one session; every method is one or a few HTTP requests, nothing is cached."""

    def __init__(self, transport: Transport, session_id: str, *, page_size: int = 200) -> None:
        self._http = transport
        self.session_id = session_id
        self.page_size = page_size

    def __repr__(self) -> str:
        return f"RemoteSession({self.session_id!r})"

    def _route(self, *segments: str) -> str:
        return path("sessions", self.session_id, *segments)

    # ------------------------------------------------------------- messages

    def append_message(
        self, message: Message, parent_id: str | Omitted | None = OMITTED, *, expected_leaf_id: str | None = None
    ) -> AppendResult:
        """Append one message; re-sending a stored id is a no-op (``inserted=False``), so retries are safe."""
        body: dict[str, Any] = {"message": message}
        if parent_id is not OMITTED:
            body["parentId"] = parent_id
        if expected_leaf_id is not None:
            body["expectedLeafId"] = expected_leaf_id
        out = self._http.request("POST", self._route("messages"), body=body, idempotent=True)
        return AppendResult(id=out["id"], parent_id=out.get("parentId"), inserted=bool(out["inserted"]))

    def append_messages(self, messages: list[Message], parent_id: str | Omitted | None = OMITTED) -> str | None:
        """Append a chain; longer chains go in requests of 500, each attached to the previous one's last id."""
        last: str | None = None
        for start in range(0, len(messages), MAX_CHAIN):
            body: dict[str, Any] = {"messages": messages[start : start + MAX_CHAIN]}
            if start:
                body["parentId"] = last
            elif parent_id is not OMITTED:
                body["parentId"] = parent_id
            last = self._http.request("POST", self._route("messages"), body=body, idempotent=True)["id"]
        return last

    def update_message(self, message: Message) -> None:
        self._http.request("PUT", self._route("messages", str(message["id"])), body={"message": message})

    def delete_messages(self, message_ids: list[str]) -> None:
        """Delete each message; ids that are not stored are skipped, as in the library."""
        for message_id in message_ids:
            try:
                self._http.request("DELETE", self._route("messages", message_id))
            except NotFoundError as error:
                if not str(error).startswith("Message "):
                    raise

    def clear_messages(self) -> None:
        self._http.request("POST", self._route("clear"), idempotent=True)

    def get_message(self, message_id: str) -> Message | None:
        try:
            out = self._http.request("GET", self._route("messages", message_id))
        except NotFoundError:
            return None
        return out["message"]  # type: ignore[no-any-return]

    def get_latest_leaf(self) -> Message | None:
        return self._http.request("GET", self._route("leaf"))["message"]  # type: ignore[no-any-return]

    def get_branches(self, message_id: str) -> list[Message]:
        """The children of a message, oldest first (every page, when the API pages them)."""
        children: list[Message] = []
        params: dict[str, Any] = {}
        while True:
            page = self._http.request("GET", self._route("messages", message_id, "branches"), params=params)
            children.extend(page["messages"])
            if not page.get("nextCursor"):
                return children
            params = {"cursor": page["nextCursor"]}

    def iter_history(self, leaf_id: str | None = None, *, page_size: int | None = None) -> Iterator[Message]:
        """Root → leaf with compaction overlays applied, fetched a page at a time as it is consumed."""
        params: dict[str, Any] = {"leafId": leaf_id, "limit": page_size or self.page_size}
        while True:
            page = self._http.request("GET", self._route("history"), params=params)
            yield from page["messages"]
            cursor = page.get("nextCursor")
            if not cursor:
                return
            params = {"limit": page_size or self.page_size, "cursor": cursor}

    def get_history(self, leaf_id: str | None = None) -> list[Message]:
        return list(self.iter_history(leaf_id))

    def get_path_length(self, leaf_id: str | None = None) -> int:
        page = self._http.request("GET", self._route("history"), params={"leafId": leaf_id, "limit": 1})
        total = page.get("total")
        if isinstance(total, int):
            return total
        return sum(1 for _ in self.iter_history(leaf_id))

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        out = self._http.request("GET", self._route("search"), params={"q": query, "limit": limit})
        return [wire.search_result(hit) for hit in out["results"]]

    # -------------------------------------------------------- context blocks

    def get_context_block(self, label: str) -> ContextBlock | None:
        try:
            return wire.context_block(self._http.request("GET", self._route("context", label)))
        except NotFoundError as error:
            if str(error).startswith("Session "):
                raise
            return None

    def get_context_blocks(self) -> list[ContextBlock]:
        return [wire.context_block(block) for block in self._http.request("GET", self._route("context"))["blocks"]]

    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        out = self._http.request("PUT", self._route("context", label), body={"content": content, "mode": "replace"})
        return wire.context_block(out)

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        # A retry after a lost answer would append twice: only retried when the server surely did not run it.
        out = self._http.request(
            "PUT", self._route("context", label), body={"content": content, "mode": "append"}, idempotent=False
        )
        return wire.context_block(out)

    def freeze_system_prompt(self) -> str:
        return self._http.request("GET", self._route("system-prompt"))["systemPrompt"]  # type: ignore[no-any-return]

    def refresh_system_prompt(self) -> str:
        out = self._http.request("POST", self._route("system-prompt", "refresh"), idempotent=True)
        return out["systemPrompt"]  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ tools

    def tool_specs(self, fmt: str = "json-schema") -> Any:
        """The session's tools in a vendor format: ``json-schema``, ``bedrock``, ``openai`` or ``anthropic``."""
        return self._http.request("GET", self._route("tools"), params={"format": fmt})["tools"]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run a tool on the server; its result text (errors included, as ``Error: ...``)."""
        out = self._http.request("POST", self._route("tools", name), body={"input": arguments})
        return out["output"]  # type: ignore[no-any-return]

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
        body = {"leafId": leaf_id} if leaf_id is not None else {}
        out = self._http.request("POST", self._route("compact"), body=body, idempotent=True)
        if out.get("status") != "compacted":
            return None
        return CompactResult(
            from_message_id=out["fromMessageId"], to_message_id=out["toMessageId"], summary=out["summary"]
        )

    def status(self) -> dict[str, Any]:
        """Phase, token estimate and threshold, and the latest compaction request with its state."""
        return dict(self._http.request("GET", self._route("status")))

    def get_compactions(self) -> list[StoredCompaction]:
        out = self._http.request("GET", self._route("compactions"))
        return [wire.stored_compaction(item) for item in out["compactions"]]


__all__ = ["MAX_CHAIN", "RemoteSession"]
