"""Through MCP, a token names another user's subject only with the act-for-users scope, as ``POST /sessions``.

With a ``subject`` block in the profile, a session created for a subject reads and writes that user's
shared memory. The REST route refuses a ``subjectId`` other than the caller's (403) unless the token may
act for users; the MCP ``create_session`` tool took any ``subjectId`` it was given (found by review).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.support.api import profile_runtime
from tests.support.mcp import json_of, lambda_client, text_of

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from threadloom.api.runtime import Runtime

ACT_FOR_USERS = ["threadloom/act-for-users"]
PROFILE = {
    "blocks": [{"label": "memory", "kind": "writable", "description": "Facts about the user", "scope": "subject"}],
    "compaction": {"enabled": False},
}


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def _victims_memory(runtime: Runtime) -> str:
    manager = runtime.manager("shop")
    session_id = manager.create_session("the victim's own", subject_id="victim").id
    manager.get_session(session_id).replace_context_block("memory", "Card ends 4242")
    return session_id


def test_a_token_without_the_scope_cannot_create_a_session_of_another_subject(runtime: Runtime) -> None:
    _victims_memory(runtime)

    async def scenario() -> dict[str, Any]:
        async with lambda_client("shop") as client:  # the token's sub is "shop": the tenant and the caller
            refused = await client.call_tool("create_session", {"name": "x", "subjectId": "victim"})
            assert refused.is_error and "act-for-users" in text_of(refused)
            own = json_of(await client.call_tool("create_session", {"name": "mine", "subjectId": "shop"}))
            assert own["subjectId"] == "shop"
            listed = json_of(await client.call_tool("list_sessions", {}))["sessions"]
            assert sorted(item["subjectId"] for item in listed) == ["shop", "victim"]  # nothing created for the victim
            return own  # type: ignore[no-any-return]

    own = anyio.run(scenario)
    memory = runtime.manager("shop").get_session(own["id"]).get_context_block("memory")
    assert memory is not None and memory.content == ""


def test_a_token_with_the_scope_creates_a_session_for_a_user(runtime: Runtime) -> None:
    _victims_memory(runtime)

    async def scenario() -> str:
        async with lambda_client("shop", scopes=ACT_FOR_USERS) as client:
            created = json_of(await client.call_tool("create_session", {"name": "for", "subjectId": "victim"}))
            assert created["subjectId"] == "victim"
            return str(created["id"])

    session_id = anyio.run(scenario)
    memory = runtime.manager("shop").get_session(session_id).get_context_block("memory")
    assert memory is not None and memory.content == "Card ends 4242"
