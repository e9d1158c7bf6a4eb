"""The ``session_search`` tool: lets the model search earlier conversations across sessions.

The result format (``[<role>] <content>`` joined by a ``---`` line) is shared with
the manager's searchable-history block, so both read the same to the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from threadloom.records import SearchResult
from threadloom.tools.base import Tool, error_result, invalid_argument, object_schema, string_arg, string_property

SESSION_SEARCH = "session_search"
SESSION_SEARCH_LIMIT = 10
"""Hits the tool asks for: enough context for the model without flooding its window."""

HISTORY_RESULT_SEPARATOR = "\n---\n"

SessionSearchFn: TypeAlias = Callable[[str, int], Sequence[SearchResult]]
"""``(query, limit) -> results``, typically ``SessionManager.search``."""


def format_history_results(results: Sequence[SearchResult]) -> str | None:
    """Hits as ``[<role>] <content>`` separated by ``---`` lines; ``None`` when there are none."""
    if not results:
        return None
    return HISTORY_RESULT_SEPARATOR.join(f"[{result.role}] {result.content}" for result in results)


def build_session_search_tool(search: SessionSearchFn) -> Tool:
    """The cross-session search tool, calling ``search(query, 10)``."""
    schema = object_schema({"query": string_property("Search query")}, ["query"])
    description = "Search earlier conversations, across all sessions, for context relevant to the current one."

    def execute(args: dict[str, Any]) -> str:
        query = string_arg(args, "query")
        if query is None:
            return invalid_argument("query")
        try:
            formatted = format_history_results(search(query, SESSION_SEARCH_LIMIT))
        except Exception as exc:
            return error_result(exc)
        return formatted if formatted is not None else "No results found."

    return Tool(SESSION_SEARCH, description, schema, execute)


__all__ = [
    "HISTORY_RESULT_SEPARATOR",
    "SESSION_SEARCH",
    "SESSION_SEARCH_LIMIT",
    "SessionSearchFn",
    "build_session_search_tool",
    "format_history_results",
]
