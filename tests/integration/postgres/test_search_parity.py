"""D5 through the stores: SqliteStore and PostgresStore return the same hits for the same data and query,
for message search, namespace search and searchable context entries; the providers work standalone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import (
    PostgresContextProvider,
    PostgresSearchProvider,
    Session,
    SessionManager,
    SqliteSearchProvider,
    SqliteStore,
)

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres

DOCUMENTS = [
    "The deployment is scheduled for Friday",
    "Deploying services requires approval from security",
    'She said "hello world" loudly; world hello, reversed',
    "NEAR OR NOT are just words here (really) -- and AND too",
    "Café au lait, naïve résumé, CRÈME BRÛLÉE",
    "Cafe au lait, naive resume, creme brulee",
    "Please e-mail me the state-of-the-art report by 2024-01-15",
    "Don't stop believing; it's O'Reilly's book",
    "東京都は日本の首都です。 Привет, мир! Σίσυφος",
    "Emoji 🤖 robots 👍 and CamelCase HTTPServer",
    "generalization generalizations generally general",
    "backslash \\ quote ' colon : ampersand & bar | bang !",
    "",
]
QUERIES = [
    "deploy",
    "friday scheduling",
    '"hello world"',
    '"world hello"',
    "NEAR OR NOT",
    "(really)",
    "creme",
    "café",
    "e-mail",
    '"state of the art"',
    "o'reilly's",
    "Привет",
    "🤖",
    "httpserver",
    "general",
    "\\ ' : & | !",
    '"unbalanced quote',
    "",
    "*",
    "nothing-matches",
]


def test_message_search_returns_the_same_hits_on_both_backends(make_store: Callable[[], Any]) -> None:
    sessions = [Session.create(SqliteStore()).for_session("s"), Session.create(make_store()).for_session("s")]
    for session in sessions:
        session.append_messages([text_message(f"d{i}", text or " ") for i, text in enumerate(DOCUMENTS)])
    for query in QUERIES:
        sqlite_hits, postgres_hits = ({r.id: r.content for r in s.search(query, limit=100)} for s in sessions)
        assert sqlite_hits == postgres_hits, query


def test_namespace_search_returns_the_same_hits_on_both_backends(make_store: Callable[[], Any]) -> None:
    found = []
    for store in (SqliteStore(), make_store()):
        manager = SessionManager.create(store, namespace="t")
        first = manager.create("one")
        second = manager.create("two")
        manager.append_all(first.id, [text_message(f"a{i}", text) for i, text in enumerate(DOCUMENTS[:6])])
        manager.append_all(second.id, [text_message(f"b{i}", text) for i, text in enumerate(DOCUMENTS[6:12])])
        names = {first.id: "one", second.id: "two"}
        found.append(
            {query: {(names[r.session_id], r.id) for r in manager.search(query, limit=100)} for query in QUERIES}
        )
    assert found[0] == found[1]


def test_search_providers_agree_and_work_standalone(make_store: Callable[[], Any], pg_url: str) -> None:
    sqlite = SqliteSearchProvider(SqliteStore(), scope="tenant")
    postgres = PostgresSearchProvider(pg_url, scope="tenant")  # a URL is enough
    for provider in (sqlite, postgres):
        provider.init("notes")
        for index, text in enumerate(DOCUMENTS):
            provider.set(f"k{index}", text)
        provider.set("k0", "rewritten: nothing about the weekday")
    assert postgres.get() == sqlite.get() == f"{len(DOCUMENTS)} entries indexed."
    for query in QUERIES:
        sqlite_keys = sorted((sqlite.search(query) or "").split("\n\n"))
        postgres_keys = sorted((postgres.search(query) or "").split("\n\n"))
        assert sqlite_keys == postgres_keys, query
    assert postgres.search("friday") is None  # the rewrite replaced the indexed text


def test_context_provider_works_standalone(pg_url: str) -> None:
    block = PostgresContextProvider(pg_url, "memory")
    assert block.get() is None
    block.set("likes tea")
    assert PostgresContextProvider(pg_url, "memory").get() == "likes tea"
