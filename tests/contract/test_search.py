"""One search dialect on every backend (contract D5), scoped per session and per namespace (D6)."""

from __future__ import annotations

from typing import Any

import pytest
from threadloom import Session, SessionManager

from tests.support.messages import text_message

DOCUMENTS = {
    "d1": "The deployment is scheduled for Friday",
    "d2": "Deploying services requires approval from security",
    "d3": "Friday lunch: pizza with the team",
    "d4": "NEAR OR NOT are just words here (really)",
    "d5": 'She said "hello world" loudly',
    "d6": "world hello, reversed",
}


@pytest.fixture
def searchable(store: Any) -> Session:
    session = Session.create(store).for_session("s")
    for message_id, text in DOCUMENTS.items():
        session.append_message(text_message(message_id, text))
    return session


def hits(session: Session, query: str) -> set[str]:
    return {result.id for result in session.search(query)}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("scheduling", {"d1"}),
        ("deploying", {"d2"}),
        ("deployment friday", {"d1"}),
        ("FRIDAY", {"d1", "d3"}),
        ('"hello world"', {"d5"}),
        ("hello world", {"d5", "d6"}),
        ("NEAR OR NOT", {"d4"}),
        ("(really)", {"d4"}),
        ("approval -security", {"d2"}),
        ("", set()),
        ('"', set()),
        ("*", set()),
        ("nothing-matches-this", set()),
        ('"unbalanced quote friday', set()),
    ],
)
def test_dialect(searchable: Session, query: str, expected: set[str]) -> None:
    assert hits(searchable, query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("deplo*", {"d1", "d2"}),
        ("deploy*", {"d2"}),  # the prefix is stemmed as FTS5 stems it: deploy -> deploi, and deployment -> deploy
        ("fri*", {"d1", "d3"}),
        ("hel* wor*", {"d5", "d6"}),
        ("schedul*", {"d1"}),
        ("really*", {"d4"}),
        ("x*", set()),  # one character is not a prefix, only the word "x"
        ('"hello wor*"', set()),  # inside quotes * is literal
        ("lisb*", set()),
    ],
)
def test_prefix_queries(searchable: Session, query: str, expected: set[str]) -> None:
    assert hits(searchable, query) == expected


def test_results_carry_session_role_and_time(searchable: Session) -> None:
    [result] = searchable.search('"hello world"')
    assert result.session_id == "s" and result.role == "user"
    assert result.content == DOCUMENTS["d5"] and result.created_at


def test_search_is_per_session_and_follows_updates_and_deletes(store: Any, searchable: Session) -> None:
    other = Session.create(store).for_session("other")
    other.append_message(text_message("x1", "Friday in another session"))
    assert hits(searchable, "friday") == {"d1", "d3"}
    searchable.update_message(text_message("d3", "Saturday lunch"))
    searchable.delete_messages(["d1"])
    assert hits(searchable, "friday") == set()


def test_limit(searchable: Session) -> None:
    assert len(searchable.search("friday", limit=1)) == 1
    assert searchable.search("friday", limit=0) == []


def test_cross_session_search_is_scoped_to_the_namespace(store: Any) -> None:
    tenant_a = SessionManager.create(store, namespace="a")
    tenant_b = SessionManager.create(store, namespace="b")
    first = tenant_a.create("one")
    second = tenant_a.create("two")
    foreign = tenant_b.create("other tenant")
    tenant_a.append(first.id, text_message("m1", "quarterly budget review"))
    tenant_a.append(second.id, text_message("m2", "budget approved"))
    tenant_b.append(foreign.id, text_message("m3", "secret budget"))
    results = tenant_a.search("budget")
    assert {(r.session_id, r.id) for r in results} == {(first.id, "m1"), (second.id, "m2")}
    assert all(r.created_at for r in results)
    tool = tenant_a.tools()["session_search"]
    assert "[user] budget approved" in tool.execute({"query": "budget"})
    assert tool.execute({"query": "nothing"}) == "No results found."
