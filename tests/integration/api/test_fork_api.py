"""``POST /sessions/{id}/fork`` through the real handler on SQLite and PostgreSQL: the history is copied inside
the database, bounded by ``limits.max_fork_messages``, and a long history costs no more statements than a short one."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.profile import LimitsSpec, load_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime

from tests.support.api import SEED, SESSION, TENANT, RecordingQueue, invoke, load_event, text

FORK_LIMIT = 10_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    profile = load_profile()
    profile = profile.model_copy(
        update={
            "limits": LimitsSpec(max_fork_messages=FORK_LIMIT),
            # No auto-compaction: its bookkeeping would add statements to a long fork's count.
            "compaction": profile.compaction.model_copy(update={"threshold": None}),
        }
    )
    runtime = Runtime(
        Settings(skills_dir=str(tmp_path / "skills")), profile=profile, store=store, queue=RecordingQueue()
    )
    runtime.store.registry(TENANT).create("Pirate taxes", session_id=SESSION)
    runtime.manager(TENANT).append_all(SESSION, [dict(message) for message in SEED])
    set_runtime(runtime)
    yield runtime
    set_runtime(None)


def request(method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in (query or {}).items())
    if body is not None:
        event["body"] = json.dumps(body)
    return invoke(event)


def history(session_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    query = {"limit": "200"}
    while True:
        status, page = request("GET", f"/sessions/{session_id}/history", query=query)
        assert status == 200, page
        messages += page["messages"]
        if not page["nextCursor"]:
            return messages
        query = {"limit": "200", "cursor": page["nextCursor"]}


def grow(runtime: Runtime, count: int) -> str:
    """Extend the seeded session to ``count`` messages; returns the last id."""
    manager = runtime.manager(TENANT)
    messages = [text(f"x{index:05d}", "user", f"turn {index} of a long voyage") for index in range(count - len(SEED))]
    for start in range(0, len(messages), 500):
        manager.append_all(SESSION, messages[start : start + 500])
    return messages[-1]["id"]


def test_fork_copies_the_history_with_new_ids(runtime: Runtime) -> None:
    status, fork = request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": "m3", "name": "Side trip"})
    assert status == 201 and fork["parentSessionId"] == SESSION and fork["name"] == "Side trip"
    copied = history(fork["id"])
    assert [{**message, "id": None} for message in copied] == [{**message, "id": None} for message in SEED[:3]]
    assert not {message["id"] for message in copied} & {"m1", "m2", "m3"}
    status, hits = request("GET", f"/sessions/{fork['id']}/search", query={"q": "doubloon"})
    assert status == 200 and [hit["id"] for hit in hits["results"]] == [copied[2]["id"]]


def test_fork_over_the_limit_is_413_and_creates_nothing(runtime: Runtime) -> None:
    last = grow(runtime, FORK_LIMIT + 1)
    before = runtime.manager(TENANT).count()
    status, body = request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": last, "name": "too long"})
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert f"at most {FORK_LIMIT}" in body["error"]["message"]
    assert runtime.manager(TENANT).count() == before
    status, body = request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": "nope", "name": "missing"})
    assert status == 404 and runtime.manager(TENANT).count() == before


def test_fork_of_ten_thousand_messages_is_a_few_statements(runtime: Runtime) -> None:
    last = grow(runtime, FORK_LIMIT)
    # The first session created reads the database's id secret, once per process: not part of a fork's cost
    assert request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": "m1", "name": "warm-up"})[0] == 201
    statements = Statements(runtime.store)
    with statements.counting():
        status, _ = request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": "m2", "name": "short"})
    assert status == 201
    short_count = statements.count
    with statements.counting():
        status, long = request("POST", f"/sessions/{SESSION}/fork", {"atMessageId": last, "name": "long"})
    assert status == 201
    # The same statements whatever the length: the rows never pass through the client.
    assert statements.count == short_count
    copied = history(long["id"])
    original = history(SESSION)
    assert len(copied) == len(original) == FORK_LIMIT
    assert [message["parts"] for message in copied] == [message["parts"] for message in original]
    status, leaf = request("GET", f"/sessions/{long['id']}/leaf")
    assert leaf["message"] == copied[-1]


class Statements:
    """Counts the SQL statements the store sends: SQLite's trace callback, PostgreSQL's one sending function."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.count = 0
        self._last = ""

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.count = 0
        if isinstance(self.store, SqliteStore):
            self.store.database.connection.set_trace_callback(self._seen)
            try:
                yield
            finally:
                self.store.database.connection.set_trace_callback(None)
            return
        from threadloom.storage.postgres import database

        send = database.run_pipelined

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._seen("")
            return send(*args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(database, "run_pipelined", counted)
            yield

    def _seen(self, sql: str) -> None:
        # SQLite traces what FTS5 runs on its own tables as "-- ...", and traces a statement again each
        # time it starts a trigger program for a row (the jump triggers of migration 0005): count neither.
        if not sql.startswith("--") and sql != self._last:
            self.count += 1
        self._last = sql
