"""``AsyncThreadloomClient``: every endpoint group against the local server, and the retry rules on loopback servers.

The requests and the reading of answers are the sync client's (threadloom.client.operations);
these tests check that the awaited driver sends, retries and raises the same way.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from threadloom import (
    BlockLimitError,
    ConflictError,
    NotFoundError,
    ReadOnlyBlockError,
    SessionInfo,
    StorageUnavailableError,
    ValidationError,
)
from threadloom.api.exceptions import ForbiddenError, PayloadTooLargeError
from threadloom.client import AsyncThreadloomClient, HttpError, ServiceUnreachableError, ThreadloomClient

from tests.client.servers import PROFILE, UNAVAILABLE, Script, api_behind_a_flaky_network, msg, scripted_server
from tests.support.local_server import free_port, local_server

Scenario = Callable[[AsyncThreadloomClient], Awaitable[None]]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("async-client-api") / "d", profile=PROFILE) as running:
        yield running.url


def against(url: str, scenario: Scenario, **options: Any) -> None:
    """Run ``scenario`` with a client on ``url`` in a fresh event loop, closing the client afterwards."""

    async def main() -> None:
        async with AsyncThreadloomClient(url, token="not-checked-locally", **options) as client:
            await scenario(client)

    asyncio.run(main())


def quick(url: str, scenario: Scenario, sleeps: list[float], **options: Any) -> None:
    """``against``, recording each backoff instead of waiting it out."""

    async def recorded(client: AsyncThreadloomClient) -> None:
        async def sleep(seconds: float) -> None:
            sleeps.append(seconds)

        client._http._sleep = sleep
        await scenario(client)

    against(url, recorded, **options)


@pytest.mark.e2e
def test_sessions_create_open_get_page_rename_hold_status_delete(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        created = await client.create("Voyage", model="m-1", source="cli")
        opened = await client.open_session("async-user", source="openai-agents")
        assert isinstance(created, SessionInfo) and (created.name, created.model) == ("Voyage", "m-1")
        assert await client.get(created.id) == created and await client.get("missing") is None
        assert await client.open_session("async-user") == opened

        paged = [info.id async for info in client.iter_sessions(page_size=1)]
        assert paged == [info.id for info in await client.list()] and {created.id, opened.id} <= set(paged)
        assert await client.count() == len(paged)
        page, cursor = await client.list_page(limit=1)
        assert len(page) == 1 and cursor is not None

        assert (await client.rename(created.id, "Voyage 2")).name == "Voyage 2"
        with pytest.raises(ForbiddenError, match="'threadloom/admin' scope"):  # the local server grants no scope
            await client.set_legal_hold(created.id, True)
        assert (await client.status(created.id))["phase"] == "idle"
        assert await client.delete(created.id) is True and await client.delete(created.id) is False
        with pytest.raises(NotFoundError, match="not found"):
            await client.rename(created.id, "gone")

    against(server_url, scenario)


@pytest.mark.e2e
def test_messages_and_paging_over_1200_messages(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        sid = (await client.create("Long")).id
        session = client.get_session(sid)
        assert await client.append(sid, msg("u0", "user", "Plot a course to Lisbon")) == "u0"
        assert await client.upsert(sid, msg("u0", "user", "Plot a course to Porto")) == "u0"
        assert await session.get_message("u0") == msg("u0", "user", "Plot a course to Porto")
        chain = [msg(f"t{i}", "assistant" if i % 2 else "user", f"Leg {i}") for i in range(1200)]
        assert await client.append_all(sid, chain) == "t1199"  # three requests of at most 500
        assert (await session.append_message(msg("t1199", "assistant", "dup"))).inserted is False
        branch = await session.append_message(msg("b1", "user", "Or Vigo?"), "t3")
        assert (branch.id, branch.parent_id, branch.inserted) == ("b1", "t3", True)

        # history pages lazily and in order over 1,200+ messages; the branch has its own path
        assert await session.get_latest_leaf() == msg("b1", "user", "Or Vigo?")
        main_path = [m["id"] async for m in client.iter_history(sid, "t1199", page_size=97)]
        assert main_path == ["u0"] + [f"t{i}" for i in range(1200)]
        assert [m["id"] for m in await session.get_history("t1199")] == main_path
        assert [m["id"] for m in await client.get_history(sid)] == ["u0", "t0", "t1", "t2", "t3", "b1"]
        assert await session.get_path_length("t1199") == 1201 and await client.get_message_count(sid) == 6
        assert sorted(m["id"] for m in await client.get_branches(sid, "t3")) == ["b1", "t4"]
        assert sorted(m["id"] for m in await session.get_branches("t3")) == ["b1", "t4"]

        await session.update_message(msg("t2", "user", "Leg two, revised"))
        assert (await session.get_message("t2")) == msg("t2", "user", "Leg two, revised")
        await client.delete_messages(sid, ["t3", "not-stored"])
        assert await session.get_message("t3") is None
        await session.delete_messages(["b1"])
        assert await session.get_message("b1") is None
        assert [m["id"] for m in await client.get_history(sid)][:5] == ["u0", "t0", "t1", "t2", "t4"]
        await client.clear_messages(sid)
        assert await client.get_history(sid) == [] and await session.get_latest_leaf() is None

    against(server_url, scenario)


@pytest.mark.e2e
def test_search_fork_split_usage_and_compaction(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        sid = (await client.create("Harbour")).id
        session = client.get_session(sid)
        turns = [msg(f"h{i}", "user" if i % 2 == 0 else "assistant", f"lighthouse leg {i}") for i in range(8)]
        await session.append_messages(turns)
        assert {hit.session_id for hit in await session.search("lighthouse", limit=3)} == {sid}
        assert sid in {hit.session_id for hit in await client.search("lighthouse")}

        fork = await client.fork(sid, "h3", "Side trip")
        assert fork.parent_session_id == sid and await client.get_message_count(fork.id) == 4
        with_usage = await client.add_usage(sid, 120, 30, 0.5)
        assert (with_usage.input_tokens, with_usage.output_tokens, with_usage.estimated_cost) == (120, 30, 0.5)

        assert await session.compact() is None  # queued for the local server's worker
        deadline = time.monotonic() + 15
        while not await client.get_compactions(sid) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        (overlay,) = await session.get_compactions()
        assert overlay.from_message_id == "h1"
        assert any(m["id"] == f"compaction_{overlay.id}" for m in await session.get_history())

        split = await client.compact_and_split(sid, "They sailed past the lighthouse.", "Part 2")
        assert split.parent_session_id == sid
        assert "They sailed past the lighthouse." in (await client.get_history(split.id))[0]["parts"][0]["text"]

    against(server_url, scenario)


@pytest.mark.e2e
def test_context_blocks_prompt_tools_and_service_routes(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        session = client.get_session((await client.create("Context")).id)
        assert [block.label for block in await session.get_context_blocks()][:3] == ["soul", "memory", "skills"]
        assert await session.get_context_block("nope") is None
        assert (await session.replace_context_block("memory", "Destination: Lisbon")).content == "Destination: Lisbon"
        appended = await session.append_context_block("memory", "Crew: 4")
        assert appended.content == "Destination: Lisbon\nCrew: 4"
        assert "You are a ship's navigator." in await session.freeze_system_prompt()
        assert "Crew: 4" in await session.refresh_system_prompt()
        specs = await session.tool_specs("anthropic")
        assert {"set_context", "load_context", "session_search"} <= {spec["name"] for spec in specs}
        assert (await session.call_tool("set_context", {"label": "memory", "content": "Cargo: tea"})).startswith(
            "Written to memory."
        )
        assert (await session.get_context_block("memory")).content == "Cargo: tea"  # type: ignore[union-attr]
        assert (await session.status())["phase"] == "idle"
        assert await client.health() == {"status": "ok", "storage": "reachable"}
        assert "/sessions/open" in (await client.openapi())["paths"]

    against(server_url, scenario)


@pytest.mark.e2e
def test_export_import_and_erase(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        info = await client.create("Archive me")
        await client.append_all(info.id, [msg("u1", "user", "Plot a course"), msg("a1", "assistant", "West")])
        history = await client.get_history(info.id)
        exported = await client.export_session(info.id)
        assert exported.startswith(b"{") and b'"u1"' in exported
        assert await client.delete(info.id)
        receipt = await client.import_sessions(exported)
        assert receipt["imported"] == [info.id] and receipt["messages"] == 2
        assert await client.get_history(info.id) == history
        with pytest.raises(ForbiddenError, match="scope"):
            await client.erase_subject("customer-42")

    against(server_url, scenario)


@pytest.mark.e2e
def test_errors_come_back_as_the_library_exceptions(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        session = client.get_session((await client.create("Errors")).id)
        await session.append_message(msg("a", "user", "one"))
        with pytest.raises(NotFoundError, match="Session 'missing' not found"):
            await client.get_history("missing")
        with pytest.raises(ConflictError):
            await session.append_message(msg("b", "user", "two"), expected_leaf_id="not-the-leaf")
        with pytest.raises(ValidationError):
            await session.append_message({"id": "c", "parts": []})
        with pytest.raises(PayloadTooLargeError):
            await session.append_message(msg("big", "user", "x" * 30_000))
        with pytest.raises(ReadOnlyBlockError):
            await session.replace_context_block("soul", "Someone else")
        with pytest.raises(BlockLimitError):
            await session.replace_context_block("memory", "word " * 1500)

    against(server_url, scenario)


@pytest.mark.e2e
def test_the_async_and_sync_clients_read_the_same_records(server_url: str) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        info = await client.open_session("both-clients")
        await client.append_all(info.id, [msg("p1", "user", "Where to?"), msg("p2", "assistant", "Lisbon")])
        with ThreadloomClient(server_url) as sync:
            assert sync.get(info.id) == await client.get(info.id)
            assert sync.get_history(info.id) == await client.get_history(info.id)
            assert sync.get_compactions(info.id) == await client.get_compactions(info.id)

    against(server_url, scenario)


def test_a_write_that_fails_twice_then_succeeds_is_retried_with_one_idempotency_key() -> None:
    script = Script(UNAVAILABLE, (429, {"retry-after": "2"}, {"message": "Too Many Requests"}))
    sleeps: list[float] = []

    async def scenario(client: AsyncThreadloomClient) -> None:
        assert (await client.create("n")).id == "s1"

    with scripted_server(script) as url:
        quick(url, scenario, sleeps)
    assert [(method, path) for method, path, _ in script.seen] == [("POST", "/sessions")] * 3
    assert len({headers["idempotency-key"] for _, _, headers in script.seen}) == 1
    assert all(headers["authorization"] == "Bearer not-checked-locally" for _, _, headers in script.seen)
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.2 and sleeps[1] == 2.0


def test_dropped_connections_bounded_retries_and_unsafe_writes() -> None:
    sleeps: list[float] = []

    async def read(client: AsyncThreadloomClient) -> None:
        assert await client.get("s1") is not None

    script = Script("drop", "drop")
    with scripted_server(script) as url:
        quick(url, read, sleeps)
    assert len(script.seen) == 3 and len(sleeps) == 2

    async def usage(client: AsyncThreadloomClient) -> None:
        with pytest.raises(StorageUnavailableError, match="Database is down"):
            await client.add_usage("s1", 1, 1, 0.0)  # may have run: not repeated

    script = Script(UNAVAILABLE)
    with scripted_server(script) as url:
        sleeps.clear()
        quick(url, usage, sleeps)
    assert len(script.seen) == 1 and sleeps == []

    async def failing(client: AsyncThreadloomClient) -> None:
        with pytest.raises(HttpError) as raised:
            await client.get("s1")
        assert (raised.value.status, raised.value.code) == (500, "internal_error")

    script = Script(UNAVAILABLE, UNAVAILABLE, (500, {}, {"error": {"code": "internal_error", "message": "boom"}}))
    with scripted_server(script) as url:
        sleeps.clear()
        quick(url, failing, sleeps, max_retries=2)
    assert len(script.seen) == 3 and len(sleeps) == 2

    async def unreachable(client: AsyncThreadloomClient) -> None:
        with pytest.raises(ServiceUnreachableError):
            await client.create("n")  # connection refused: never sent, so even a POST is retried

    sleeps.clear()
    quick(f"http://127.0.0.1:{free_port()}", unreachable, sleeps, max_retries=2)
    assert len(sleeps) == 2


def test_a_lost_answer_is_replayed_not_applied_twice(tmp_path: Path) -> None:
    async def scenario(client: AsyncThreadloomClient) -> None:
        to_drop.append("POST /sessions")
        created = await client.create("Once")
        assert [info.id for info in await client.list()] == [created.id]
        to_drop.append(f"POST /sessions/{created.id}/messages")
        await client.append(created.id, msg("m1", "user", "hi"))
        assert [m["id"] for m in await client.get_history(created.id)] == ["m1"] and not to_drop

    sleeps: list[float] = []
    with api_behind_a_flaky_network(tmp_path) as (url, to_drop):
        quick(url, scenario, sleeps)
    assert len(sleeps) == 2


def test_a_large_export_is_followed_to_its_presigned_url_without_credentials() -> None:
    seen: list[dict[str, str]] = []

    class Bucket(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({key.lower(): value for key, value in self.headers.items()})
            body = b'{"format": "threadloom-export"}\n'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    bucket = ThreadingHTTPServer(("127.0.0.1", 0), Bucket)
    threading.Thread(target=bucket.serve_forever, daemon=True).start()
    link = f"http://127.0.0.1:{bucket.server_port}/exports/s1.jsonl?X-Amz-Signature=abc"

    def api(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/sessions/s1/export"
        return httpx.Response(303, headers={"location": link}, json={"url": link, "expiresIn": 900, "bytes": 32})

    async def scenario(client: AsyncThreadloomClient) -> None:
        assert await client.export_session("s1") == b'{"format": "threadloom-export"}\n'

    try:
        against("http://api.test", scenario, transport=httpx.MockTransport(api))
    finally:
        bucket.shutdown()
        bucket.server_close()
    assert len(seen) == 1 and "authorization" not in seen[0]
