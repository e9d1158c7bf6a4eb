"""The session_search tool and the shared history-result formatting."""

from __future__ import annotations

import pytest
from threadloom.records import SearchResult
from threadloom.tools.session_search import build_session_search_tool, format_history_results

HITS = [
    SearchResult(id="m1", role="user", content="I like tea", created_at="2026-01-01 00:00:00", session_id="s1"),
    SearchResult(id="m2", role="assistant", content="Noted: tea", created_at="2026-01-01 00:00:01", session_id="s2"),
]


def test_format_history_results() -> None:
    # Given hits / When formatted / Then "[role] content" blocks are joined by a --- line
    assert format_history_results(HITS) == "[user] I like tea\n---\n[assistant] Noted: tea"
    # Given no hits / Then there is nothing to show
    assert format_history_results([]) is None


def test_session_search_tool_shape() -> None:
    # Given the tool
    tool = build_session_search_tool(lambda query, limit: [])
    # Then name and schema are exact and the description is present
    assert tool.name == "session_search"
    assert tool.description
    assert tool.input_schema == {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Search query"}},
        "required": ["query"],
    }


def test_session_search_results_and_limit() -> None:
    # Given a search function recording its calls
    calls: list[tuple[str, int]] = []

    def search(query: str, limit: int) -> list[SearchResult]:
        calls.append((query, limit))
        return HITS if query == "tea" else []

    tool = build_session_search_tool(search)
    # When searching with and without hits
    # Then the results are formatted, "No results found." otherwise, always with limit 10
    assert tool.execute({"query": "tea"}) == "[user] I like tea\n---\n[assistant] Noted: tea"
    assert tool.execute({"query": "coffee"}) == "No results found."
    assert calls == [("tea", 10), ("coffee", 10)]


def test_session_search_wraps_errors() -> None:
    # Given a failing search / When executed / Then the failure becomes "Error: <message>"
    def search(query: str, limit: int) -> list[SearchResult]:
        raise RuntimeError("database unavailable")

    assert build_session_search_tool(search).execute({"query": "tea"}) == "Error: database unavailable"


@pytest.mark.parametrize("args", [{}, {"query": None}, {"query": 42}])
def test_session_search_rejects_malformed_query(args: dict[str, object]) -> None:
    # Given a missing or non-string query
    calls: list[str] = []
    tool = build_session_search_tool(lambda query, limit: calls.append(query) or [])
    # When executed / Then an error string comes back and search is never called
    assert tool.execute(args).startswith("Error: ")
    assert calls == []
