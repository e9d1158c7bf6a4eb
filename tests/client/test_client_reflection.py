"""Reflection through ``ThreadloomClient`` and the async client, against the local server (approval on).

The user says who they are; a reflect request is queued (the local server's worker thread runs it);
its proposals come back as the library's ``Proposal`` records, each naming the messages it came
from; approving one writes the block through the versioned path (source ``reflection``), rejecting
one leaves the block alone, and deciding a proposal twice raises ``ConflictError``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from threadloom.client import AsyncThreadloomClient, ThreadloomClient
from threadloom.client.session import RemoteSession
from threadloom.errors import ConflictError, ValidationError
from threadloom.records import Message, Proposal

from tests.support.local_server import local_server

pytestmark = pytest.mark.e2e

PROFILE = """
blocks:
  - {label: memory, kind: writable, scope: subject, description: Facts about the user}
reflection: {enabled: true, block: memory, approval: required, extractor: {kind: offline}}
compaction: {enabled: false}
"""


def said(message_id: str, role: str, text: str) -> Message:
    return Message(id=message_id, role=role, parts=[{"type": "text", "text": text}])


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("client-reflection") / "d", profile=PROFILE) as running:
        yield running.url


def pending(session: RemoteSession, count: int) -> list[Proposal]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = list(session.iter_proposals(status="pending"))
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} pending proposals after 20 s: {found}")


def test_proposals_are_listed_approved_and_rejected(url: str) -> None:
    with ThreadloomClient(url, token="not-checked-locally") as client:
        session = client.get_session(client.create("about me").id)
        session.append_messages(
            [
                said("u1", "user", "Hi! My name is Ada."),
                said("a1", "assistant", "Hello Ada, my name is Claude."),
                said("u2", "user", "I prefer short answers."),
            ]
        )
        result = session.reflect()
        assert (result.status, result.leaf_id, result.proposals) == ("queued", "u2", None)
        proposals = pending(session, 2)
        assert [(p.operation, p.content, p.source_message_ids) for p in proposals] == [
            ("append", "Name: Ada", ("u1",)),
            ("append", "Prefers: short answers", ("u2",)),
        ]
        first, second = proposals
        page, cursor = session.proposals_page(status="pending", limit=1)
        assert [p.id for p in page] == [first.id] and cursor is not None

        applied = session.approve_proposal(first.id)
        assert (applied.status, applied.applied_version) == ("applied", "1")
        rejected = session.reject_proposal(second.id)
        assert rejected.status == "rejected" and rejected.decided_at is not None
        block = session.get_context_block("memory")
        assert block is not None and block.content == "Name: Ada"
        versions, _ = session.context_history("memory")
        assert [(v.change.source, v.change.message_ids) for v in versions] == [("reflection", ("u1",))]

        with pytest.raises(ConflictError, match="rejected, not pending"):
            session.approve_proposal(second.id)
        assert [p.status for p in session.iter_proposals()] == ["applied", "rejected"]
        with pytest.raises(ValidationError):
            session.proposals_page(status="lost")


def test_the_async_client_reflects_and_decides(url: str) -> None:
    async def run() -> None:
        async with AsyncThreadloomClient(url, token="not-checked-locally") as client:
            session = client.get_session((await client.create("async reflection")).id)
            await session.append_messages([said("u1", "user", "Please call me Addy.")])
            assert (await session.reflect("u1")).status == "queued"
            for _ in range(200):
                found = [p async for p in session.iter_proposals(status="pending")]
                if found:
                    break
                await asyncio.sleep(0.1)
            assert [(p.content, p.source_message_ids) for p in found] == [("Preferred name: Addy", ("u1",))]
            decided = await session.reject_proposal(found[0].id)
            assert decided.status == "rejected"
            page, cursor = await session.proposals_page()
            assert [p.status for p in page] == ["rejected"] and cursor is None

    asyncio.run(run())
