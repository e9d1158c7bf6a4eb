"""The tenant's knowledge in an export, through ``ThreadloomClient`` and the async client.

``export_session(include_knowledge=True)`` asks the API for ``includeKnowledge=true`` (next to
``includeSharedBlocks`` when both are asked, neither by default); against the local server the file
then carries the tenant's entries, and importing it where it came from says they were already there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
from threadloom.client import AsyncThreadloomClient, ThreadloomClient

from tests.support.local_server import local_server

PROFILE = """
blocks:
  - {label: knowledge, kind: search, description: Facts worth finding}
compaction: {enabled: false}
"""
FILE = b'{"format": "threadloom-export"}\n'


def recording(seen: list[dict[str, str]]) -> httpx.MockTransport:
    """An API that records each export request's query and answers with a file."""

    def api(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/sessions/s1/export"
        seen.append(dict(request.url.params))
        return httpx.Response(200, content=FILE, headers={"content-type": "application/x-ndjson"})

    return httpx.MockTransport(api)


def test_the_client_asks_for_knowledge_only_when_told() -> None:
    seen: list[dict[str, str]] = []
    with ThreadloomClient("http://api.test", token="secret", transport=recording(seen)) as client:
        assert client.export_session("s1") == FILE
        assert client.export_session("s1", include_knowledge=True) == FILE
        assert client.export_session("s1", include_shared_blocks=True, include_knowledge=True) == FILE
    assert seen == [
        {},
        {"includeKnowledge": "true"},
        {"includeSharedBlocks": "true", "includeKnowledge": "true"},
    ]


def test_the_async_client_asks_for_knowledge_only_when_told() -> None:
    seen: list[dict[str, str]] = []

    async def scenario() -> None:
        async with AsyncThreadloomClient("http://api.test", token="secret", transport=recording(seen)) as client:
            assert await client.export_session("s1") == FILE
            assert await client.export_session("s1", include_knowledge=True) == FILE

    asyncio.run(scenario())
    assert seen == [{}, {"includeKnowledge": "true"}]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("client-knowledge-export") / "d", profile=PROFILE) as running:
        yield running.url


def kinds(data: bytes) -> list[str]:
    return [json.loads(line)["type"] for line in data.splitlines()]


@pytest.mark.e2e
def test_an_export_with_knowledge_carries_the_entries_and_the_import_counts_them(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        session_id = client.create("export me").id
        entry = {"label": "knowledge", "content": "Fees are paid at the marina office.", "metadata": {"title": "Fees"}}
        assert client.get_session(session_id).tools()["set_context"].execute(entry) == 'Indexed "fees" in knowledge.'
        plain = client.export_session(session_id)
        with_knowledge = client.export_session(session_id, include_knowledge=True)
        assert "knowledge_entry" not in kinds(plain)
        records = [json.loads(line) for line in with_knowledge.splitlines()]
        carried = [(r["label"], r["key"]) for r in records if r["type"] == "knowledge_entry"]
        assert ("knowledge", "fees") in carried
        # Importing the file where it came from changes nothing, and says so
        answer = client.import_sessions(with_knowledge)
        assert answer["unchanged"] == [session_id] and answer["imported"] == []
        assert answer["knowledgeEntriesImported"] == 0 and answer["knowledgeEntriesUnchanged"] == len(carried)


@pytest.mark.e2e
def test_the_async_client_exports_knowledge(url: str) -> None:
    async def scenario() -> tuple[list[str], list[str], dict[str, object]]:
        async with AsyncThreadloomClient(url, token="not-checked-locally") as client:
            session = client.get_session((await client.create("async export")).id)
            entry = {"label": "knowledge", "content": "Buoys mark the channel", "metadata": {"title": "Buoys"}}
            assert await session.call_tool("set_context", entry) == 'Indexed "buoys" in knowledge.'
            plain = await client.export_session(session.session_id)
            with_knowledge = await client.export_session(session.session_id, include_knowledge=True)
            answer = await client.import_sessions(with_knowledge)
            return kinds(plain), kinds(with_knowledge), answer

    plain, with_knowledge, answer = asyncio.run(scenario())
    assert "knowledge_entry" not in plain and "knowledge_entry" in with_knowledge
    assert answer["knowledgeEntriesImported"] == 0
    assert answer["knowledgeEntriesUnchanged"] == with_knowledge.count("knowledge_entry")
