"""Retries, backoff, ``Retry-After``, and idempotent replay, against small loopback HTTP servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import ConflictError, StorageUnavailableError
from threadloom.client import HttpError, RetryPolicy, ServiceUnreachableError, ThreadloomClient
from threadloom.client.transport import parse_retry_after
from threadloom.errors import SessionChangedError

from tests.client.servers import UNAVAILABLE, Script, api_behind_a_flaky_network, scripted_server
from tests.support.local_server import free_port


def quick_client(url: str, sleeps: list[float], **kwargs: Any) -> ThreadloomClient:
    client = ThreadloomClient(url, token="tok-123", timeout=30, **kwargs)
    client._http._sleep = sleeps.append  # record the backoff instead of waiting
    return client


def test_a_write_that_fails_twice_then_succeeds_is_retried_with_one_idempotency_key() -> None:
    script = Script(UNAVAILABLE, (429, {"retry-after": "2"}, {"message": "Too Many Requests"}))
    sleeps: list[float] = []
    with scripted_server(script) as url, quick_client(url, sleeps) as client:
        info = client.create("n")
    assert info.id == "s1"
    assert [(method, path) for method, path, _ in script.seen] == [("POST", "/sessions")] * 3
    keys = {headers["idempotency-key"] for _, _, headers in script.seen}
    assert len(keys) == 1 and all(h["authorization"] == "Bearer tok-123" for _, _, h in script.seen)
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.2 and sleeps[1] == 2.0  # jittered backoff, then Retry-After


def test_a_write_whose_first_attempt_is_still_running_waits_for_its_outcome() -> None:
    in_progress = (409, {}, {"error": {"code": "idempotency_in_progress", "message": "still in progress"}})
    script = Script(in_progress, (409, {}, {"error": {"code": "conflict", "message": "Latest leaf moved"}}))
    sleeps: list[float] = []
    with (
        scripted_server(script) as url,
        quick_client(url, sleeps) as client,
        pytest.raises(ConflictError, match="moved"),
    ):
        client.create("n")
    assert len(script.seen) == 2 and len(sleeps) == 1  # retried once; a plain conflict is final


def test_a_request_to_a_session_created_again_elsewhere_is_repeated_and_typed_when_retries_run_out() -> None:
    """409 ``session_changed``: the server's knowledge of a keyed session was stale; nothing ran."""
    changed = (409, {}, {"error": {"code": "session_changed", "message": "created again; retry the request"}})
    sleeps: list[float] = []
    with scripted_server(Script(changed)) as url, quick_client(url, sleeps) as client:
        client.add_usage("s1", 1, 1, 0.0)  # not idempotent, and still repeated: the first attempt did nothing
    assert len(sleeps) == 1
    script = Script(changed, changed, changed)
    with (
        scripted_server(script) as url,
        quick_client(url, sleeps, max_retries=2) as client,
        pytest.raises(SessionChangedError, match="created again"),
    ):
        client.get("s1")
    assert len(script.seen) == 3


def test_a_read_survives_two_dropped_connections() -> None:
    script = Script("drop", "drop")
    sleeps: list[float] = []
    with scripted_server(script) as url, quick_client(url, sleeps) as client:
        assert client.get("s1") is not None
    assert len(script.seen) == 3 and len(sleeps) == 2


def test_writes_that_may_have_run_are_not_repeated_unless_idempotent() -> None:
    # add_usage is not idempotent: a 503 (the write may have happened) is surfaced, not retried
    script = Script(UNAVAILABLE)
    sleeps: list[float] = []
    with (
        scripted_server(script) as url,
        quick_client(url, sleeps) as client,
        pytest.raises(StorageUnavailableError, match="Database is down"),
    ):
        client.add_usage("s1", 1, 1, 0.0)
    assert len(script.seen) == 1 and sleeps == []

    # ... but a throttled one (429: never run) is
    script = Script((429, {"retry-after": "0"}, {}))
    with scripted_server(script) as url, quick_client(url, sleeps) as client:
        assert client.add_usage("s1", 1, 1, 0.0).id == "s1"
    assert len(script.seen) == 2


def test_retries_are_bounded_and_unknown_failures_keep_their_status() -> None:
    script = Script(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE)
    sleeps: list[float] = []
    with (
        scripted_server(script) as url,
        quick_client(url, sleeps, max_retries=2) as client,
        pytest.raises(StorageUnavailableError),
    ):
        client.get("s1")
    assert len(script.seen) == 3 and len(sleeps) == 2

    script = Script((500, {}, {"error": {"code": "internal_error", "message": "Internal error (request r-1)"}}))
    with scripted_server(script) as url, quick_client(url, sleeps) as client, pytest.raises(HttpError) as raised:
        client.get("s1")
    assert (raised.value.status, raised.value.code, str(raised.value)) == (
        500,
        "internal_error",
        "Internal error (request r-1)",
    )


def test_an_unreachable_service_raises_after_the_retries() -> None:
    sleeps: list[float] = []
    with (
        quick_client(f"http://127.0.0.1:{free_port()}", sleeps, max_retries=2) as client,
        pytest.raises(ServiceUnreachableError),
    ):
        client.create("n")  # connection refused: nothing was sent, so even a POST is retried
    assert len(sleeps) == 2


def test_retry_after_and_backoff() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    policy = RetryPolicy(backoff=1.0, max_backoff=4.0)
    assert policy.delay(0, "120") == 4.0  # capped
    assert all(0 <= policy.delay(attempt) <= min(4.0, 2**attempt) for attempt in range(6))


@pytest.fixture
def flaky_api(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    with api_behind_a_flaky_network(tmp_path) as api:
        yield api


def test_a_lost_answer_is_replayed_not_applied_twice(flaky_api: tuple[str, list[str]]) -> None:
    url, to_drop = flaky_api
    sleeps: list[float] = []
    with quick_client(url, sleeps) as client:
        # Session creation is not naturally idempotent: the Idempotency-Key makes the retry a replay
        to_drop.append("POST /sessions")
        created = client.create("Once")
        assert [info.id for info in client.list()] == [created.id] and sleeps

        # An append retried after a lost answer stores the message once
        to_drop.append(f"POST /sessions/{created.id}/messages")
        client.append(created.id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        assert [m["id"] for m in client.get_history(created.id)] == ["m1"] and not to_drop

        # A fork too: one fork, not two
        to_drop.append(f"POST /sessions/{created.id}/fork")
        fork = client.fork(created.id, "m1", "Fork")
        assert sorted(info.id for info in client.list()) == sorted([created.id, fork.id]) and not to_drop


def test_every_error_code_the_api_answers_maps_back_to_the_exception_it_came_from() -> None:
    import httpx
    from threadloom.api.routes.errors import IDEMPOTENCY_CODES, MAPPING
    from threadloom.client.transport import error_for
    from threadloom.errors import ConflictError

    assert all(kind.__module__.startswith("threadloom") for kind, _, _ in MAPPING)
    assert {code for _, _, code in MAPPING} >= IDEMPOTENCY_CODES
    for kind, status, code in MAPPING:
        answer = httpx.Response(
            int(status), json={"error": {"code": code, "message": "m"}}, request=httpx.Request("GET", "http://x/")
        )
        if code in IDEMPOTENCY_CODES:  # API-only conflicts: the client raises their base class
            assert isinstance(error_for(answer), ConflictError) and issubclass(kind, ConflictError), code
        else:
            assert type(error_for(answer)) is kind, code
