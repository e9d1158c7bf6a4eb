"""Every endpoint through ``ThreadloomClient`` against ``python -m threadloom.local_server`` in a subprocess."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
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
    SqliteStore,
    ValidationError,
)
from threadloom.api.exceptions import ForbiddenError, PayloadTooLargeError
from threadloom.client import ThreadloomClient
from threadloom.core.manager import SessionManager

from tests.client.servers import PROFILE, Script, msg, scripted_server
from tests.support.lifecycle import NO_SHARED_BLOCKS_OR_KNOWLEDGE
from tests.support.local_server import local_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("client-api")
    with local_server(data / "d", profile=PROFILE) as running:
        yield running.url, data / "d" / "threadloom.db"


@pytest.fixture
def client(server: tuple[str, Path]) -> Iterator[ThreadloomClient]:
    with ThreadloomClient(server[0], token="not-checked-locally") as api:
        yield api


def test_sessions_create_open_get_list_rename_delete(client: ThreadloomClient) -> None:
    # Given a few sessions
    created = client.create("Voyage", model="m-1", source="cli")
    opened = client.open_session("user-42", source="openai-agents")

    # Then they read back as the library's records
    assert isinstance(created, SessionInfo) and (created.name, created.model, created.source) == (
        "Voyage",
        "m-1",
        "cli",
    )
    assert client.get(created.id) == created
    assert client.open_session("user-42") == opened and opened.name == "user-42"
    assert client.get("missing") is None
    renamed = client.rename(created.id, "Voyage 2")
    assert renamed.name == "Voyage 2" and renamed.id == created.id

    # list / iter_sessions page with the API's cursor; count walks every page
    listed = [info.id for info in client.iter_sessions(page_size=1)]
    assert listed == [info.id for info in client.list()] and {created.id, opened.id} <= set(listed)
    assert client.count() == len(listed)
    page, cursor = client.list_page(limit=1)
    assert len(page) == 1 and cursor is not None

    # delete answers False the second time
    assert client.delete(created.id) is True
    assert client.delete(created.id) is False
    with pytest.raises(NotFoundError, match="not found"):
        client.rename(created.id, "gone")


def test_branches_follow_every_page(server: tuple[str, Path]) -> None:
    with ThreadloomClient(server[0], token="not-checked-locally", page_size=2) as small_pages:
        sid = small_pages.create("Many answers").id
        small_pages.append(sid, {"id": "q", "role": "user", "parts": [{"type": "text", "text": "?"}]})
        answers = [f"a{index}" for index in range(7)]
        for answer in answers:
            small_pages.append(sid, {"id": answer, "role": "assistant", "parts": []}, "q")
        # Four requests of at most two children each, collected in insertion order.
        assert [message["id"] for message in small_pages.get_branches(sid, "q")] == answers
        assert [message["id"] for message in small_pages.get_session(sid).get_branches("q")] == answers


def test_messages_history_branches_and_paging_over_1200_messages(client: ThreadloomClient) -> None:
    sid = client.create("Long").id
    session = client.get_session(sid)

    # append (one), upsert (replace), a chain longer than one request (500), and a branch
    assert client.append(sid, msg("u0", "user", "Plot a course to Lisbon")) == "u0"
    assert client.upsert(sid, msg("u0", "user", "Plot a course to Porto")) == "u0"
    assert session.get_message("u0") == msg("u0", "user", "Plot a course to Porto")
    chain = [msg(f"t{i}", "assistant" if i % 2 else "user", f"Leg {i}") for i in range(1200)]
    assert client.append_all(sid, chain) == "t1199"
    assert session.append_message(msg("t1199", "assistant", "dup")).inserted is False
    branch = session.append_message(msg("b1", "user", "Or Vigo?"), "t3")
    assert (branch.id, branch.parent_id, branch.inserted) == ("b1", "t3", True)

    # history pages lazily and in order over 1,200+ messages; the branch has its own path
    assert session.get_latest_leaf() == msg("b1", "user", "Or Vigo?")
    main_path = list(client.iter_history(sid, "t1199", page_size=97))
    assert [m["id"] for m in main_path] == ["u0"] + [f"t{i}" for i in range(1200)]
    assert [m["id"] for m in client.get_history(sid)] == ["u0", "t0", "t1", "t2", "t3", "b1"]
    assert session.get_path_length("t1199") == 1201 and client.get_message_count(sid) == 6
    assert sorted(m["id"] for m in client.get_branches(sid, "t3")) == ["b1", "t4"]
    odd = session.append_message(msg("agent.x:y@z~1", "user", "Every id character"), "t3")
    assert session.get_message(odd.id) == msg("agent.x:y@z~1", "user", "Every id character")
    client.delete_messages(sid, [odd.id])

    # update, delete (children re-attach), clear
    session.update_message(msg("t2", "user", "Leg two, revised"))
    assert session.get_message("t2") == msg("t2", "user", "Leg two, revised")
    client.delete_messages(sid, ["t3", "not-stored"])
    assert session.get_message("t3") is None and session.get_message("b1") is not None
    assert [m["id"] for m in client.get_history(sid)][-2:] == ["t2", "b1"]
    client.clear_messages(sid)
    assert client.get_history(sid) == [] and session.get_latest_leaf() is None


def test_search_fork_split_usage_and_compaction(client: ThreadloomClient) -> None:
    sid = client.create("Harbour").id
    session = client.get_session(sid)
    client.append_all(
        sid, [msg(f"h{i}", "user" if i % 2 == 0 else "assistant", f"lighthouse leg {i}") for i in range(8)]
    )

    hits = session.search("lighthouse", limit=3)
    assert len(hits) == 3 and {hit.session_id for hit in hits} == {sid}
    assert sid in {hit.session_id for hit in client.search("lighthouse")}
    assert "lighthouse" in client.tools()["session_search"].execute({"query": "lighthouse"})

    fork = client.fork(sid, "h3", "Side trip")
    assert fork.parent_session_id == sid and client.get_message_count(fork.id) == 4

    with_usage = client.add_usage(sid, 120, 30, 0.5)
    assert (with_usage.input_tokens, with_usage.output_tokens, with_usage.estimated_cost) == (120, 30, 0.5)

    # compaction is queued on the local server; the overlay then shows in history and compactions
    assert session.compact() is None
    deadline = time.monotonic() + 15
    while not client.get_compactions(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (overlay,) = client.get_compactions(sid)
    assert overlay.from_message_id == "h1" and any(m["id"] == f"compaction_{overlay.id}" for m in session.get_history())

    split = client.compact_and_split(sid, "They sailed past the lighthouse.", "Part 2")
    assert split.parent_session_id == sid and client.get(sid).end_reason == "compaction"  # type: ignore[union-attr]
    assert "They sailed past the lighthouse." in client.get_history(split.id)[0]["parts"][0]["text"]


def test_context_blocks_prompt_and_tools(client: ThreadloomClient) -> None:
    session = client.get_session(client.create("Context").id)
    labels = [block.label for block in session.get_context_blocks()]
    assert labels[:3] == ["soul", "memory", "skills"]
    assert session.get_context_block("nope") is None
    assert session.replace_context_block("memory", "Destination: Lisbon").content == "Destination: Lisbon"
    assert session.append_context_block("memory", "Crew: 4").content == "Destination: Lisbon\nCrew: 4"
    assert "You are a ship's navigator." in session.freeze_system_prompt()
    assert "Crew: 4" in session.refresh_system_prompt()

    tools = session.tools()
    assert {"set_context", "load_context", "session_search"} <= set(tools)
    assert tools["set_context"].execute({"label": "memory", "content": "Cargo: tea"}).startswith("Written to memory.")
    assert session.get_context_block("memory").content == "Cargo: tea"  # type: ignore[union-attr]
    assert "arr" in session.call_tool("load_context", {"label": "skills", "key": "pirate"})
    assert {tool["name"] for tool in session.tool_specs("anthropic")} == set(tools)
    assert {tool["toolSpec"]["name"] for tool in session.tool_specs("bedrock")["tools"]} == set(tools)
    assert client.health() == {"status": "ok", "storage": "reachable"}
    assert "/sessions/open" in client.openapi()["paths"]


def test_errors_come_back_as_the_library_exceptions(client: ThreadloomClient) -> None:
    sid = client.create("Errors").id
    session = client.get_session(sid)
    session.append_message(msg("a", "user", "one"))
    with pytest.raises(NotFoundError, match="Session 'missing' not found"):
        client.get_history("missing")
    with pytest.raises(ConflictError):
        session.append_message(msg("b", "user", "two"), expected_leaf_id="not-the-leaf")
    with pytest.raises(ValidationError):
        session.append_message({"id": "c", "parts": []})  # no role
    with pytest.raises(PayloadTooLargeError):
        session.append_message(msg("big", "user", "x" * 30_000))
    with pytest.raises(ReadOnlyBlockError):
        session.replace_context_block("soul", "Someone else")
    with pytest.raises(BlockLimitError):
        session.replace_context_block("memory", "word " * 1500)
    with pytest.raises(NotFoundError):
        session.call_tool("no_such_tool", {})


def test_code_written_for_the_library_runs_against_the_api(client: ThreadloomClient, server: tuple[str, Path]) -> None:
    """The same function, given a SessionManager or a ThreadloomClient, stores the same conversation."""

    def converse(manager: Any) -> list[Any]:
        info = manager.open_session("parity")
        manager.append_all(info.id, [msg("p1", "user", "Where to?"), msg("p2", "assistant", "Lisbon")])
        manager.append(info.id, msg("p3", "user", "Or Porto?"), "p1")
        manager.upsert(info.id, msg("p2", "assistant", "Lisbon, then Porto"))
        return [
            manager.get_history(info.id),
            manager.get_branches(info.id, "p1"),
            manager.get_message_count(info.id),
            manager.get_session(info.id).get_message("p2"),
            [hit.id for hit in manager.search("Porto")],
        ]

    via_api = converse(client)
    library = SessionManager.create(SqliteStore(str(server[1].parent.parent / "library.db")), namespace="local")
    assert converse(library) == via_api


def test_status_legal_hold_export_and_import_round_trip(client: ThreadloomClient) -> None:
    # Given a session with a short conversation
    info = client.create("Archive me")
    client.get_session(info.id).append_messages([msg("u1", "user", "Plot a course"), msg("a1", "assistant", "West")])
    history = client.get_history(info.id)

    # Then its status is readable, and a legal hold needs the admin scope (the local server grants none)
    status = client.status(info.id)
    assert status["phase"] == "idle" and status["tokenEstimate"] > 0
    with pytest.raises(ForbiddenError, match="'threadloom/admin' scope"):
        client.set_legal_hold(info.id, True)
    assert client.get(info.id).legal_hold is False  # type: ignore[union-attr]

    # When it is exported, importing the file again changes nothing
    exported = client.export_session(info.id)
    assert exported.startswith(b"{") and b'"u1"' in exported
    assert client.import_sessions(exported) == {
        "imported": [],
        "unchanged": [info.id],
        "messages": 0,
        "renamed": {},
        **NO_SHARED_BLOCKS_OR_KNOWLEDGE,
    }

    # And after the session is deleted, the file brings it back whole, with its ids (minted for its namespace)
    assert client.delete(info.id)
    receipt = client.import_sessions(exported.decode("utf-8"))
    assert receipt["imported"] == [info.id] and receipt["messages"] == 2
    assert client.get_history(info.id) == history


def test_erasing_a_subject_needs_the_admin_scope(client: ThreadloomClient) -> None:
    # The local server's requests carry no scopes, so the API refuses and the client says why
    with pytest.raises(ForbiddenError, match="scope"):
        client.erase_subject("customer-42")


def test_a_subject_is_named_in_the_body_so_any_id_can_be_erased() -> None:
    """A subject id may hold ``/``, ``?`` or ``#``, which no URL path carries: the client sends it in the body."""
    receipt = {"namespace": "t", "subjectId": "a/b?c#d", "counts": {}, "erasedAt": "x", "digest": "d"}
    script = Script((200, {}, receipt))
    with scripted_server(script) as url, ThreadloomClient(url) as client:
        assert client.erase_subject("a/b?c#d") == receipt
    [(method, path, _)] = script.seen
    assert (method, path) == ("POST", "/subjects/erase")
    assert json.loads(script.bodies[0]) == {"subjectId": "a/b?c#d"}


def test_a_large_export_is_followed_to_its_presigned_url_without_credentials() -> None:
    # Given an API that answers 303 with a link, and a file server standing in for S3
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

    try:
        with ThreadloomClient("http://api.test", token="secret", transport=httpx.MockTransport(api)) as remote:
            # When the client exports it
            data = remote.export_session("s1")
    finally:
        bucket.shutdown()
        bucket.server_close()

    # Then it gets the file from the link, and never sends the bearer token to the bucket
    assert data == b'{"format": "threadloom-export"}\n'
    assert len(seen) == 1 and "authorization" not in seen[0]
