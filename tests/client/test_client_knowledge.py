"""The tenant's searchable knowledge through ``ThreadloomClient`` and the async client, against the local server.

What the model stored with ``set_context`` is listed a page at a time, read by key and removed;
a removed entry is no longer found by ``search_context``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from threadloom.client import AsyncThreadloomClient, ThreadloomClient

from tests.support.local_server import local_server

pytestmark = pytest.mark.e2e

PROFILE = """
blocks:
  - {label: knowledge, kind: search, description: Facts worth finding}
compaction: {enabled: false}
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("client-knowledge") / "d", profile=PROFILE) as running:
        yield running.url


def test_entries_are_listed_read_and_removed(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        session = client.get_session(client.create("notes").id)
        tools = session.tools()
        for title in ("Tides", "Anchors", "Gulls"):
            entry = {"label": "knowledge", "content": f"All about {title.lower()}", "metadata": {"title": title}}
            assert tools["set_context"].execute(entry) == f'Indexed "{title.lower()}" in knowledge.'
        first, cursor = client.knowledge_page("knowledge", limit=2)
        assert [entry.key for entry in first] == ["anchors", "gulls"] and cursor is not None
        assert [entry.key for entry in client.iter_knowledge("knowledge", page_size=1)] == ["anchors", "gulls", "tides"]
        gulls = client.knowledge_entry("knowledge", "gulls")
        assert gulls is not None and gulls.content == "All about gulls"
        assert client.delete_knowledge_entry("knowledge", "gulls") is True
        assert client.delete_knowledge_entry("knowledge", "gulls") is False
        assert client.knowledge_entry("knowledge", "gulls") is None
        assert tools["search_context"].execute({"label": "knowledge", "query": "gulls"}) == "No results found."


def test_the_async_client_lists_and_removes(url: str) -> None:
    async def scenario() -> list[str]:
        async with AsyncThreadloomClient(url, token="not-checked-locally") as client:
            session = client.get_session((await client.create("async notes")).id)
            entry = {"label": "knowledge", "content": "Buoys mark the channel", "metadata": {"title": "Buoys"}}
            assert await session.call_tool("set_context", entry) == 'Indexed "buoys" in knowledge.'

            assert (await client.knowledge_entry("knowledge", "buoys")) is not None
            assert await client.delete_knowledge_entry("knowledge", "buoys") is True
            return [entry.key async for entry in client.iter_knowledge("knowledge")]

    assert "buoys" not in asyncio.run(scenario())
