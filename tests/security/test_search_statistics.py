"""Security suite: nothing one tenant sees of its search hits may depend on other tenants' rows (issue 23).

Found by the probe run before the independent one. On SQLite, hits are ordered by FTS5's bm25,
whose inverse document frequency and average length were counted over the one full-text table
every tenant shared. So tenant B, holding two messages that contain words W and R (W twice in
one, R twice in the other), saw their order flip once any other tenant's messages contained W:
one query told B whether anybody else wrote a word (a name, a deal, a diagnosis). The same
statistics ordered ``search_context`` entries. SQLite now keeps one index per namespace (and one
per entry scope), so bm25 counts the caller's own rows only; PostgreSQL orders by ``ts_rank``,
which reads only the hit itself. Both backends are checked, through the real handler.

Control: the order is read from the answer and follows each row's own term counts (the
single-word queries), so a flip would be seen; before the per-namespace index the SQLite case
failed (it was a strict xfail).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import backend_store, call, seeded_runtime, text

A = "user-123"
B = "tenant-b"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    return seeded_runtime(tmp_path, store=backend_store(request))[0]


@pytest.fixture(params=["sqlite", "postgres"])
def any_runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    return seeded_runtime(tmp_path, store=backend_store(request))[0]


def order(query: str, session_id: str | None = None) -> list[str]:
    path = f"/sessions/{session_id}/search" if session_id else "/search"
    status, body = call("GET", path, tenant=B, query={"q": query})
    assert status == 200, body
    return [hit["id"] for hit in body["results"]]


def b_session() -> str:
    session_id = str(call("POST", "/sessions", {"name": "probe"}, tenant=B)[1]["id"])
    for message_id, words in (("d1", "merger qzkvtrw merger"), ("d2", "qzkvtrw merger qzkvtrw")):
        answer = call(
            "POST", f"/sessions/{session_id}/messages", {"message": text(message_id, "user", words)}, tenant=B
        )
        assert answer[0] == 201, answer
    return session_id


def test_another_tenants_messages_never_change_the_order_of_the_callers_hits(runtime: Runtime) -> None:
    session_id = b_session()
    before = (order("merger qzkvtrw"), order("merger qzkvtrw", session_id))
    # Tenant A writes the word W ("merger") many times
    a_session = call("POST", "/sessions", {"name": "deal"})[1]["id"]
    for index in range(20):
        call("POST", f"/sessions/{a_session}/messages", {"message": text(f"a{index}", "user", f"the merger {index}")})
    assert (order("merger qzkvtrw"), order("merger qzkvtrw", session_id)) == before


def test_control_the_order_of_hits_follows_each_messages_own_term_counts(any_runtime: Runtime) -> None:
    session_id = b_session()
    assert order("merger", session_id) == ["d1", "d2"]
    assert order("qzkvtrw", session_id) == ["d2", "d1"]


def context_order(session_id: str, query: str) -> list[str]:
    """The keys ``search_context`` answers B with, in their order."""
    answer = tool(session_id, "search_context", {"label": "knowledge", "query": query})
    return re.findall(r"^\[([^\]]+)\]$", str(answer["output"]), flags=re.MULTILINE)


def tool(session_id: str, name: str, arguments: dict[str, Any], tenant: str = B) -> dict[str, Any]:
    status, body = call("POST", f"/sessions/{session_id}/tools/{name}", {"input": arguments}, tenant=tenant)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def b_entries() -> str:
    session_id = b_session()
    for key, words in (("e1", "merger qzkvtrw merger"), ("e2", "qzkvtrw merger qzkvtrw")):
        entry = {"label": "knowledge", "content": words, "metadata": {"title": key}}
        assert tool(session_id, "set_context", entry)["isError"] is False
    return session_id


def test_another_tenants_entries_never_change_the_order_of_the_callers_search_context_hits(
    runtime: Runtime,
) -> None:
    session_id = b_entries()
    before = context_order(session_id, "merger qzkvtrw")
    assert sorted(before) == ["e1", "e2"]
    a_session = call("POST", "/sessions", {"name": "deal"})[1]["id"]
    for index in range(20):
        entry = {"label": "knowledge", "content": f"the merger {index}", "metadata": {"title": f"a{index}"}}
        assert tool(a_session, "set_context", entry, tenant=A)["isError"] is False
    assert context_order(session_id, "merger qzkvtrw") == before


def test_control_search_context_orders_entries_by_their_own_term_counts(any_runtime: Runtime) -> None:
    session_id = b_entries()
    assert context_order(session_id, "merger") == ["e1", "e2"]
    assert context_order(session_id, "qzkvtrw") == ["e2", "e1"]
