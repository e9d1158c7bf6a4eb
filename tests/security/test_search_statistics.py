"""Security suite: the order of one tenant's search hits must not depend on other tenants' messages (issue 23 probe).

Found by the probe run before the independent one. On SQLite, hits are ordered by FTS5's bm25,
whose inverse document frequency is counted over the one full-text table every tenant shares. So
tenant B, holding two messages that contain words W and R (W twice in one, R twice in the other),
sees their order flip once any other tenant's messages contain W: one query tells B whether
anybody else wrote a word (a name, a deal, a diagnosis). PostgreSQL orders by ``ts_rank``, which
reads only the message itself, and holds. The same statistics order ``search_context`` entries.

**Not fixed yet** (the SQLite case is a strict xfail, so it fails loudly once fixed): a
per-message score without corpus statistics (for example FTS5 ``highlight()`` counts with length
normalization) closes it, but measured 0.98 s against bm25's 0.15 s for 20,000 matching messages,
so it needs a design decision (cap the candidates, or an index per namespace).

Control: the order is read from the answer and follows each message's own term counts (the
single-word queries), so a flip would be seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import backend_store, call, seeded_runtime, text

A = "user-123"
B = "tenant-b"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(
    params=[
        pytest.param(
            "sqlite",
            marks=pytest.mark.xfail(
                strict=True, reason="bm25 counts every tenant's messages; see the module docstring"
            ),
        ),
        "postgres",
    ]
)
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
