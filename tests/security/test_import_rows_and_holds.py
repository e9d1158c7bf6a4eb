"""Security suite: import files whose rows the store would refuse, and files that place legal holds (issue 23 probe).

Found by the independent probe run before the external one, through the real handler on SQLite and
PostgreSQL:

- two compaction records of one session with the same id, or the same ``request_key``, passed the
  reader and reached the store's keys: a 500 ``storage_error`` quoting the database's refusal (the
  class the issue named for block rows: a conflict on import must be a clean 4xx). The reader now
  refuses every row the store keys twice (compaction ids, request keys, loaded skills), by line.
- a file with ``legal_hold: true`` imported by a caller without the admin scope placed a session on
  hold, out of every retention sweep, which ``PATCH /sessions/{id}`` refuses without that scope. An
  import now needs the admin scope to bring in a new session on hold (403, nothing imported).

Each check has its control: the same file without the attack imports, and the admin imports the hold.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.runtime import set_runtime

from tests.security.test_import_attacks import TENANT, changed, get, given_id, imports, records, refused, sealed
from tests.support.api import FakeLambdaContext, load_event, seeded_runtime

ADMIN = "threadloom/admin"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteStore(str(tmp_path / "api.db"))
    return request.getfixturevalue("postgres_store_factory")()


def second_overlay(**fields: Any) -> Callable[[list[dict[str, Any]]], None]:
    """A change adding a second overlay (seq 4) over ``m2``, with ``fields`` on it."""

    def change(body: list[dict[str, Any]]) -> None:
        body[1]["next_seq"] = 5
        extra = {**copy.deepcopy(body[4]), "id": "c2", "seq": 4, "from_message_id": "m2", "to_message_id": "m2"}
        body.append({**extra, **fields})

    return change


def with_request_keys(first: str, second: str) -> Callable[[list[dict[str, Any]]], None]:
    def change(body: list[dict[str, Any]]) -> None:
        second_overlay(request_key=second)(body)
        body[4]["request_key"] = first

    return change


def skills_record(skills: list[str]) -> dict[str, Any]:
    return {"type": "loaded_skills", "session_id": records()[1]["id"], "skills": skills}


def upload(data: bytes, *, scopes: list[str] | None = None) -> tuple[int, Any]:
    """``POST /sessions/import`` as the importer, with the token's ``scopes``."""
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/sessions/import"
    event["requestContext"]["http"]["method"] = "POST"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    event["requestContext"]["authorizer"]["jwt"]["scopes"] = scopes
    event["headers"]["content-type"] = "application/x-ndjson"
    event["body"] = data.decode("utf-8")
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), json.loads(response["body"])


def session(session_id: str) -> dict[str, Any]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/sessions/{session_id}"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    assert response["statusCode"] == 200, response
    return json.loads(response["body"])  # type: ignore[no-any-return]


# ------------------------------------------------------------------ rows the store keys twice


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (second_overlay(id="c1"), "compaction 'c1' appears twice"),
        (with_request_keys("req-1", "req-1"), "request_key 'req-1' appears on two compactions"),
        (lambda body: body.append(skills_record(["a", "a"])), "distinct"),
    ],
    ids=["compaction-id", "request-key", "loaded-skill"],
)
def test_rows_the_store_keys_twice_are_a_clean_400_not_a_storage_error(
    tmp_path: Path, store: Any, change: Callable[[list[dict[str, Any]]], None], message: str
) -> None:
    seeded_runtime(tmp_path, store=store)
    refused(sealed(changed(change)), message)
    # Control: the same rows with distinct ids and keys import (two overlays, two request keys, two skills)
    imports(sealed(changed(with_request_keys("req-1", "req-2"))))


def test_control_distinct_loaded_skills_import(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)
    imports(sealed(changed(lambda body: body.append(skills_record(["a", "b"])))))


# ------------------------------------------------------------------ legal holds need the admin scope


def test_an_import_without_the_admin_scope_cannot_place_a_session_on_legal_hold(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)
    held = sealed(changed(lambda body: body[1].update(legal_hold=True)))
    # Check: no scope, or another scope: 403 in words, nothing imported
    for scopes in (None, ["threadloom/read"]):
        status, body = upload(held, scopes=scopes)
        assert status == 403 and body["error"]["code"] == "forbidden", body
        assert "legal hold" in body["error"]["message"] and "admin scope" in body["error"]["message"], body
        assert get(f"/sessions/{given_id()}") == 404
    # Control: the same file without the hold imports for the same caller ...
    status, body = upload(sealed(records()))
    assert status == 200 and body["imported"] == [given_id()], body
    assert session(given_id())["legalHold"] is False


def test_control_the_admin_imports_a_session_on_legal_hold(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)
    held = sealed(changed(lambda body: body[1].update(legal_hold=True)))
    status, body = upload(held, scopes=[ADMIN])
    assert status == 200 and body["imported"] == [given_id()], body
    assert session(given_id())["legalHold"] is True
    # Importing the same file again writes nothing, so it needs no scope (it is unchanged)
    status, body = upload(held)
    assert status == 200 and body["unchanged"] == [given_id()], body
