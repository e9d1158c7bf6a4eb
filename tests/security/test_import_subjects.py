"""An import names no data subject the caller may not act for, as ``POST /sessions`` names none.

Where the profile has subject blocks, a session of a subject reads and writes that user's shared
memory. ``POST /sessions`` refuses ``subjectId`` of another user unless the token has the act-for-users
scope; an import file's ``subject_id`` and its subject blocks are held to the same rule (a 403, nothing
written). Without it, a plain token imported a session of the victim's subject, read the victim's
memory through it and wrote over it; and a subject block in the file told, by "unchanged" against a
409, whether a guess of the victim's memory was right. Through the real handler on both backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.runtime import Runtime

from tests.security.test_import_attacks import records, sealed
from tests.support.api import call, profile_runtime

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PROFILE = {"blocks": [{"label": "memory", "kind": "writable", "scope": "subject"}], "compaction": {"enabled": False}}
TENANT = "acme"  # the test tokens' subject is the tenant's name
ACT_FOR_USERS = ["threadloom/act-for-users"]
SECRET = "victim-secret-7731"
AT = "2026-01-01T11:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def upload(body: list[dict[str, Any]], scopes: list[str] | None = None) -> tuple[int, Any]:
    headers = {"content-type": "application/x-ndjson"}
    return call("POST", "/sessions/import", raw_body=sealed(body), tenant=TENANT, headers=headers, scopes=scopes)


def victims_memory() -> str:
    """The victim's memory, written through a session of theirs that is then deleted (the memory outlives it)."""
    victims = {"name": "v", "subjectId": "victim"}
    status, created = call("POST", "/sessions", victims, tenant=TENANT, scopes=ACT_FOR_USERS)
    assert status == 201, created
    assert call("PUT", f"/sessions/{created['id']}/context/memory", {"content": SECRET}, tenant=TENANT)[0] == 200
    assert call("DELETE", f"/sessions/{created['id']}", tenant=TENANT)[0] == 200
    return str(created["id"])


def session_file(subject: str | None) -> list[dict[str, Any]]:
    body = records()
    body[0]["namespace"] = TENANT
    body[1]["subject_id"] = subject
    return body


def memory_block(subject: str, content: str) -> list[dict[str, Any]]:
    owner = {"scope": "subject", "subject_id": subject, "key": "memory"}
    change = {"source": "tool", "session_id": None, "message_ids": [], "request_id": None, "note": None}
    return [
        {"type": "shared_block", **owner, "content": content, "version": 1, "updated_at": AT},
        {"type": "block_version", **owner, "version": 1, "created_at": AT, "content": content, "change": change},
    ]


def sessions() -> list[str]:
    return [session["id"] for session in call("GET", "/sessions", tenant=TENANT)[1]["sessions"]]


def test_a_session_of_another_subject_is_refused_without_the_scope(runtime: Runtime) -> None:
    victims_memory()
    # The same rule as creating one: POST /sessions with the victim's subject is a 403 for this token
    assert call("POST", "/sessions", {"name": "x", "subjectId": "victim"}, tenant=TENANT)[0] == 403
    status, answer = upload(session_file("victim"))
    assert status == 403, answer
    assert answer["error"]["code"] == "forbidden" and "act-for-users" in answer["error"]["message"]
    assert sessions() == []
    # Control: a token acting for users imports it, and the session reads the victim's memory as theirs
    status, answer = upload(session_file("victim"), scopes=ACT_FOR_USERS)
    assert status == 200, answer
    status, memory = call("GET", f"/sessions/{answer['imported'][0]}/context/memory", tenant=TENANT)
    assert status == 200 and memory["content"] == SECRET


@pytest.mark.parametrize("subject", [TENANT, None])
def test_control_the_callers_own_subject_or_none_imports(runtime: Runtime, subject: str | None) -> None:
    status, answer = upload(session_file(subject))
    assert status == 200, answer
    assert len(answer["imported"]) == 1


def test_a_subject_block_of_another_user_is_refused_and_tells_nothing(runtime: Runtime) -> None:
    victims_memory()
    right, wrong = memory_block("victim", SECRET), memory_block("victim", "a wrong guess")
    for guess in (right, wrong):  # the same answer whether the guess is right or not
        status, answer = upload([session_file(None)[0], *guess])
        assert status == 403, answer
        assert "block 'memory' of another data subject" in answer["error"]["message"]
    # Control: the caller's own memory block imports
    status, answer = upload([session_file(None)[0], *memory_block(TENANT, "my own notes")])
    assert status == 200 and answer["sharedBlocksImported"] == [f"subject/{TENANT}/memory"], answer
