"""Block scopes, versions and history through ``ThreadloomClient`` and the async client, against the local server.

The local server's caller is one user (subject ``local``): two of their sessions share the
subject-scoped ``memory``; a replacement based on an old version raises ``StaleVersionError``
with the current version, as the library does; the history and a revert come back as the
library's records.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from threadloom.api.exceptions import ForbiddenError
from threadloom.client import AsyncThreadloomClient, ThreadloomClient
from threadloom.errors import StaleVersionError

from tests.support.local_server import local_server

pytestmark = pytest.mark.e2e

PROFILE = """
blocks:
  - {label: memory, kind: writable, scope: subject, description: Facts about the user}
  - {label: notes, kind: writable}
compaction: {enabled: false}
"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("client-blocks") / "d", profile=PROFILE) as running:
        yield running.url


def test_sessions_of_one_user_share_memory_and_its_history(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        one = client.get_session(client.create("one").id)
        two = client.get_session(client.create("two").id)
        written = one.replace_context_block("memory", "Name: Alice", based_on_version=0)
        assert (written.scope, written.version) == ("subject", 1)
        shared = two.get_context_block("memory")
        assert shared is not None and (shared.content, shared.version) == ("Name: Alice", 1)
        with pytest.raises(StaleVersionError) as stale:
            two.replace_context_block("memory", "Name: Bob", based_on_version=0)
        assert stale.value.current_version == 1 and stale.value.current_content is None
        two.append_context_block("memory", "Likes tea")
        versions, cursor = one.context_history("memory", limit=1)
        assert [v.version for v in versions] == [2] and cursor is not None
        older, end = one.context_history("memory", cursor=cursor)
        assert [(v.version, v.content, v.change.source) for v in older] == [(1, "Name: Alice", "http")] and end is None
        assert one.context_version("memory", 1).content == "Name: Alice"
        reverted = one.revert_context("memory", 1, based_on_version=2)
        assert (reverted.content, reverted.version) == ("Name: Alice", 3)
        assert two.get_context_block("notes").scope == "session"  # type: ignore[union-attr]


def test_the_async_client_reads_history_and_reverts(url: str) -> None:
    async def run() -> None:
        async with AsyncThreadloomClient(url, token="not-checked-locally") as client:
            session = client.get_session((await client.create("async")).id)
            await session.replace_context_block("notes", "first")
            await session.replace_context_block("notes", "second")
            versions, _ = await session.context_history("notes")
            assert [v.content for v in versions] == ["second", "first"]
            reverted = await session.revert_context("notes", 1)
            assert (reverted.content, reverted.version) == ("first", 3)
            assert (await session.context_version("notes", 2)).content == "second"

    asyncio.run(run())


def test_a_session_is_created_for_a_subject_only_with_the_right_to_act_for_users(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        # The local caller is the subject `local` and holds no scopes: its own subject may be named ...
        assert client.create("mine", subject_id="local").subject_id == "local"
        # ... another user's (whose subject-scoped memory the session would read and write) may not.
        before = len(client.list())
        with pytest.raises(ForbiddenError, match="act-for-users"):
            client.create("theirs", subject_id="ada")
        assert len(client.list()) == before


def test_an_export_with_shared_blocks_carries_their_history_and_the_import_counts_them(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        session_id = client.create("export me").id
        client.get_session(session_id).append_context_block("memory", "Plays the cello")
        plain = client.export_session(session_id)
        with_blocks = client.export_session(session_id, include_shared_blocks=True)
        kinds = [json.loads(line)["type"] for line in with_blocks.splitlines()]
        assert "shared_block" not in plain.decode() and kinds.count("shared_block") == 1
        versions = kinds.count("block_version")
        assert versions >= 1  # every version the user's memory has so far, this test's append included
        # Importing the file where it came from changes nothing, and says so per block
        answer = client.import_sessions(with_blocks)
        assert answer["unchanged"] == [session_id] and answer["imported"] == []
        assert answer["sharedBlocksImported"] == [] and answer["sharedBlockVersions"] == 0
        assert answer["sharedBlocksUnchanged"] == ["subject/local/memory"]
