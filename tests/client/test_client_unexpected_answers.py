"""Answers the API itself never gives, through both clients: a proxy's redirect, a page that is not JSON, a 404
that is about no resource (a wrong base path, a gateway's own refusal).

Each raises a ``ThreadloomError`` that says what came back, rather than reading as success (a 301 is not
a deleted session), crashing on the answer's shape, or reading as "absent" (``get`` → None, ``delete`` → False).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from threadloom import NotFoundError
from threadloom.api.exceptions import ForbiddenError, UnauthenticatedError
from threadloom.client import AsyncThreadloomClient, HttpError, ServiceUnreachableError, ThreadloomClient

from tests.client.servers import Script, msg, scripted_server
from tests.support.local_server import local_server

PROFILE = """
blocks:
  - {label: memory, kind: writable, max_tokens: 1000}
  - {label: knowledge, kind: search, description: Facts worth finding}
compaction: {enabled: false}
"""
LOCATION = "https://threadloom.example.com/sessions/s1"
MOVED = (301, {"location": LOCATION}, b"<html><body><h1>301 Moved Permanently</h1></body></html>")
NGINX = b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>" + b"x" * 5000 + b"</body></html>"

Call = Callable[[Any], Any]
"""A client method call, on a ``ThreadloomClient`` or an ``AsyncThreadloomClient`` (then awaited)."""

CALLS: list[tuple[str, Call]] = [
    ("DELETE /sessions/s1", lambda client: client.delete("s1")),
    ("POST /sessions/s1/clear", lambda client: client.clear_messages("s1")),
    ("DELETE /sessions/s1/messages/m1", lambda client: client.get_session("s1").delete_messages(["m1"])),
    ("GET /sessions/s1", lambda client: client.get("s1")),
    ("POST /sessions/s1/messages", lambda client: client.append("s1", msg("m1", "user", "hi"))),
    ("GET /sessions/s1/export", lambda client: client.export_session("s1")),
]
ABSENT_WHEN_NOT_FOUND: list[Call] = [
    lambda client: client.get("s1"),
    lambda client: client.delete("s1"),
    lambda client: client.get_session("s1").get_message("m1"),
    lambda client: client.get_session("s1").delete_messages(["m1"]),
    lambda client: client.get_session("s1").get_context_block("memory"),
    lambda client: client.knowledge_entry("knowledge", "k"),
    lambda client: client.delete_knowledge_entry("knowledge", "k"),
]


def run_async(url: str, call: Call, base: str = "") -> Any:
    async def main() -> Any:
        async with AsyncThreadloomClient(url + base, token="t") as client:
            return await call(client)

    return asyncio.run(main())


def run_sync(url: str, call: Call, base: str = "") -> Any:
    with ThreadloomClient(url + base, token="t") as client:
        return call(client)


CLIENTS = pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])


@CLIENTS
@pytest.mark.parametrize(("route", "call"), CALLS, ids=[route for route, _ in CALLS])
def test_a_redirect_raises_http_error_instead_of_reading_as_success(route: str, call: Call, run: Any) -> None:
    # Given a proxy in front of the API that answers 301 to https
    script = Script(MOVED)
    with scripted_server(script) as url, pytest.raises(HttpError) as raised:
        run(url, call)

    # Then the call raises, saying where it was sent and where the answer points, and is not repeated
    error = raised.value
    assert (error.status, error.code) == (301, "redirect")
    assert route in str(error) and LOCATION in str(error) and "does not follow redirects" in str(error)
    assert len(script.seen) == 1


@CLIENTS
def test_a_redirect_without_a_location_and_a_see_other_where_none_is_expected_raise_too(run: Any) -> None:
    script = Script((302, {}, b""), (303, {"location": LOCATION}, {"url": LOCATION}))
    with scripted_server(script) as url:
        with pytest.raises(HttpError, match=r"^HTTP 302 from GET /sessions/s1\b") as raised:
            run(url, lambda client: client.get("s1"))
        assert raised.value.status == 302 and LOCATION not in str(raised.value)
        with pytest.raises(HttpError, match="HTTP 303") as raised:  # only the export reads a 303 (its S3 link)
            run(url, lambda client: client.delete("s1"))
        assert LOCATION in str(raised.value)


@CLIENTS
def test_an_answer_that_is_not_json_raises_http_error_with_an_excerpt(run: Any) -> None:
    # Given a proxy that answers its own HTML page with 200
    with scripted_server(Script((200, {}, NGINX))) as url, pytest.raises(HttpError) as raised:
        run(url, lambda client: client.get("s1"))

    # Then the error says the answer was not JSON, with its status and the start of the page only
    error = raised.value
    assert (error.status, error.code) == (200, "not_json")
    assert "GET /sessions/s1" in str(error) and "not JSON" in str(error) and "text/html" in str(error)
    assert "Welcome to nginx!" in str(error) and len(str(error)) < 400


@CLIENTS
def test_a_gateway_404_without_the_envelope_is_not_read_as_absent(run: Any) -> None:
    # Given API Gateway's own answer for a route it does not have (no {"error": ...} envelope)
    script = Script(*[(404, {}, {"message": "Not Found"})] * len(ABSENT_WHEN_NOT_FOUND))
    with scripted_server(script) as url:
        for call in ABSENT_WHEN_NOT_FOUND:
            # Then no call reads it as "no such session / message / block / entry", and its text is kept
            with pytest.raises(NotFoundError, match="Not Found"):
                run(url, call)
    assert len(script.seen) == len(ABSENT_WHEN_NOT_FOUND)


@CLIENTS
def test_the_gateway_text_of_a_refusal_without_the_envelope_is_kept(run: Any) -> None:
    script = Script((401, {}, {"message": "Unauthorized"}), (403, {}, {"message": "Forbidden"}))
    with scripted_server(script) as url:
        with pytest.raises(UnauthenticatedError, match=r"HTTP 401 from GET /sessions/s1: Unauthorized"):
            run(url, lambda client: client.get("s1"))
        with pytest.raises(ForbiddenError, match=r"HTTP 403 from GET /sessions/s1: Forbidden"):
            run(url, lambda client: client.get("s1"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("client-unexpected-answers") / "d", profile=PROFILE) as running:
        yield running.url


@pytest.mark.e2e
@CLIENTS
def test_a_wrong_base_path_raises_instead_of_reading_as_absent(url: str, run: Any) -> None:
    # Given a session, and a client pointed at a base path the API does not serve
    session_id = run(url, lambda client: client.create("still here")).id
    run(url, lambda client: client.get_session(session_id).append_message(msg("m1", "user", "hi")))
    wrong: list[Call] = [
        lambda client: client.get(session_id),
        lambda client: client.delete(session_id),
        lambda client: client.get_session(session_id).get_message("m1"),
        lambda client: client.get_session(session_id).delete_messages(["m1"]),
        lambda client: client.get_session(session_id).get_context_block("memory"),
        lambda client: client.knowledge_entry("knowledge", "k"),
        lambda client: client.delete_knowledge_entry("knowledge", "k"),
    ]
    # Then every call raises the API's "no such route" (route_not_found), none answers None or False
    for call in wrong:
        with pytest.raises(NotFoundError, match="No such route"):
            run(url, call, "/prod")

    # And at the right base path the session and its message are still there
    assert run(url, lambda client: client.get(session_id)) is not None
    assert run(url, lambda client: client.get_session(session_id).get_message("m1")) is not None


@pytest.mark.e2e
@CLIENTS
def test_only_a_404_about_the_named_resource_reads_as_absent(url: str, run: Any) -> None:
    session_id = run(url, lambda client: client.create("present")).id
    # A resource that is not stored reads as absent, as in the library
    assert run(url, lambda client: client.get("missing")) is None
    assert run(url, lambda client: client.delete("missing")) is False
    assert run(url, lambda client: client.get_session(session_id).get_message("missing")) is None
    assert run(url, lambda client: client.get_session(session_id).delete_messages(["missing"])) is None
    assert run(url, lambda client: client.get_session(session_id).get_context_block("nope")) is None
    assert run(url, lambda client: client.knowledge_entry("knowledge", "missing")) is None
    assert run(url, lambda client: client.delete_knowledge_entry("knowledge", "missing")) is False
    # ... but a 404 about something else (the session of a block, a block that is not searchable) raises
    with pytest.raises(NotFoundError, match="Session 'missing' not found"):
        run(url, lambda client: client.get_session("missing").get_context_block("memory"))
    with pytest.raises(NotFoundError, match="No searchable block"):
        run(url, lambda client: client.knowledge_entry("nowhere", "k"))
    with pytest.raises(NotFoundError, match="No searchable block"):
        run(url, lambda client: client.delete_knowledge_entry("nowhere", "k"))


@CLIENTS
def test_the_export_still_follows_its_303_but_not_a_redirect_from_the_link(run: Any) -> None:
    # Given an API whose export answers 303 with a presigned link (here on the same loopback server)
    exported = b'{"format": "threadloom-export"}\n'
    script = Script((303, {}, {"url": "LINK"}), (200, {"content-type": "application/x-ndjson"}, exported))
    with scripted_server(script) as url:
        script.answers[0] = (303, {"location": f"{url}/bucket/s1.jsonl"}, {"url": f"{url}/bucket/s1.jsonl"})
        # Then the client fetches the file from the link, without the token
        assert run(url, lambda client: client.export_session("s1")) == exported
        assert [path for _, path, _ in script.seen] == ["/sessions/s1/export", "/bucket/s1.jsonl"]
        assert "authorization" not in script.seen[1][2]

        # But a link that answers a redirect (S3's 301 to another region) is no export file
        script.answers[:] = [
            (303, {}, {"url": f"{url}/bucket/s1.jsonl?X-Amz-Signature=secret"}),
            (301, {}, b"<Error><Code>PermanentRedirect</Code></Error>"),
        ]
        with pytest.raises(ServiceUnreachableError, match=r"GET .*/bucket/s1.jsonl answered 301$") as raised:
            run(url, lambda client: client.export_session("s1"))
        assert "secret" not in str(raised.value)
