"""Security suite: shared (subject and tenant) blocks and their history across users and tenants (issue 26).

On SQLite and PostgreSQL, through the real API handler. Classes covered: naming another user's
subject to read their memory; the same subject id in another tenant; reading or reverting a
version of another owner's block. Each refusal has a control: the same act by someone allowed
to do it succeeds, so the refusal is the check and not an accident of the setup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.runtime import Runtime

from tests.support.api import call, profile_runtime

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PROFILE = {
    "blocks": [
        {"label": "memory", "kind": "writable", "scope": "subject"},
        {"label": "house", "kind": "writable", "scope": "tenant"},
    ],
    "compaction": {"enabled": False},
}
ACT = ["threadloom/act-for-users"]
SECRET = "victim-secret-7731"


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def _create(tenant: str, subject: str | None = None, scopes: list[str] | None = None) -> tuple[int, Any]:
    body = {"name": "s", **({"subjectId": subject} if subject else {})}
    return call("POST", "/sessions", body, tenant=tenant, scopes=scopes)


def _victim_session(tenant: str = "acme") -> str:
    status, created = _create(tenant, "victim", ACT)
    assert status == 201
    session_id = str(created["id"])
    assert call("PUT", f"/sessions/{session_id}/context/memory", {"content": SECRET}, tenant=tenant)[0] == 200
    return session_id


def test_a_token_without_the_scope_cannot_open_another_users_memory(runtime: Runtime) -> None:
    _victim_session()
    # Attack: an end user's token of the same tenant names the victim's subject
    status, body = _create("acme", "victim")
    assert status == 403 and body["error"]["code"] == "forbidden"
    assert SECRET not in str(call("GET", "/sessions", tenant="acme")[1])
    # Control: a service token allowed to act for users gets the victim's memory (so the scope is the check)
    status, created = _create("acme", "victim", ACT)
    assert status == 201
    assert call("GET", f"/sessions/{created['id']}/context/memory", tenant="acme")[1]["content"] == SECRET


def test_the_same_subject_id_in_another_tenant_is_another_user(runtime: Runtime) -> None:
    _victim_session("acme")
    status, created = _create("globex", "victim", ACT)
    assert status == 201
    other = call("GET", f"/sessions/{created['id']}/context/memory", tenant="globex")[1]
    assert other["content"] == "" and other["version"] == 0
    assert call("GET", f"/sessions/{created['id']}/context/memory/history", tenant="globex")[1]["versions"] == []
    assert call("GET", f"/sessions/{created['id']}/context/memory/history/1", tenant="globex")[0] == 404
    reverted = call("POST", f"/sessions/{created['id']}/context/memory/revert", {"version": 1}, tenant="globex")
    assert reverted[0] == 404 and SECRET not in str(reverted[1])
    assert SECRET not in str(call("GET", f"/sessions/{created['id']}/context/house", tenant="globex")[1])
    # Control: in the victim's tenant, a session of that subject reads version 1
    status, same = _create("acme", "victim", ACT)
    assert status == 201
    assert call("GET", f"/sessions/{same['id']}/context/memory/history/1", tenant="acme")[1]["content"] == SECRET


def test_another_subjects_versions_are_not_reachable_by_number(runtime: Runtime) -> None:
    _victim_session("acme")
    status, created = _create("acme", "intruder", ACT)
    assert status == 201
    intruder = str(created["id"])
    # The intruder's own memory has no version 1: the victim's version 1 is not theirs to read or revert to
    assert call("GET", f"/sessions/{intruder}/context/memory/history/1", tenant="acme")[0] == 404
    assert call("POST", f"/sessions/{intruder}/context/memory/revert", {"version": 1}, tenant="acme")[0] == 404
    # Control: once the intruder writes their own, version 1 is theirs, and it is not the victim's
    call("PUT", f"/sessions/{intruder}/context/memory", {"content": "mine"}, tenant="acme")
    assert call("GET", f"/sessions/{intruder}/context/memory/history/1", tenant="acme")[1]["content"] == "mine"
