"""Block scopes, versions and history through the API Lambda handler, on SQLite and PostgreSQL (issue 26).

A profile whose ``memory`` is a subject block: two sessions of one user share it, another user's
and another tenant's sessions do not; a stale replacement is 409 with the current version; a
stale tool call is a 200 tool result with ``isError``; the history shows who changed what and a
revert is a new version; the status says when the frozen prompt is stale.
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
        {"label": "soul", "kind": "static", "content": "You are kind."},
        {"label": "memory", "kind": "writable", "description": "Facts about the user", "scope": "subject"},
        {"label": "house", "kind": "writable", "scope": "tenant"},
        {"label": "scratch", "kind": "writable", "max_tokens": 50},
    ],
    "compaction": {"enabled": False},
    "block_history": {"keep_versions": 5},
}


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def _session(tenant: str, name: str, **body: Any) -> str:
    scopes = ["threadloom/act-for-users"] if body.get("subjectId") not in (None, tenant) else None
    status, created = call("POST", "/sessions", {"name": name, **body}, tenant=tenant, scopes=scopes)
    assert status == 201, created
    return str(created["id"])


def _append(tenant: str, session_id: str, message_id: str, text: str) -> None:
    message = {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}
    assert call("POST", f"/sessions/{session_id}/messages", {"message": message}, tenant=tenant)[0] == 201


def test_two_conversations_of_one_user_share_a_subject_block(runtime: Runtime) -> None:
    one = _session("alice", "one")
    two = _session("alice", "two")
    _append("alice", one, "m1", "My name is Alice")
    status, result = call(
        "POST",
        f"/sessions/{one}/tools/set_context",
        {"input": {"label": "memory", "content": "Name: Alice"}},
        tenant="alice",
    )
    assert status == 200 and result == {"output": "Written to memory. Usage: 3 tokens", "isError": False}
    status, block = call("GET", f"/sessions/{two}/context/memory", tenant="alice")
    assert status == 200
    assert (block["content"], block["scope"], block["version"], block["writable"]) == (
        "Name: Alice",
        "subject",
        1,
        True,
    )
    assert "Name: Alice" in call("GET", f"/sessions/{two}/system-prompt", tenant="alice")[1]["systemPrompt"]
    # another tenant's user, and another tenant, see their own (empty) memory
    bob = _session("bob", "bob's")
    assert call("GET", f"/sessions/{bob}/context/memory", tenant="bob")[1]["content"] == ""
    # and another tenant cannot reach Alice's session, its block or its history at all
    for path in (f"/sessions/{one}/context/memory", f"/sessions/{one}/context/memory/history"):
        assert call("GET", path, tenant="bob")[0] == 404
    assert call("GET", f"/sessions/{one}/context/memory/history/1", tenant="bob")[0] == 404
    assert call("POST", f"/sessions/{one}/context/memory/revert", {"version": 1}, tenant="bob")[0] == 404


def test_a_service_token_keeps_its_users_memories_apart(runtime: Runtime) -> None:
    # One tenant (the service), two end users named by subjectId: each user's sessions share only their own memory
    act = ["threadloom/act-for-users"]
    alice = [_session("service", f"alice {n}", subjectId="alice") for n in (1, 2)]
    bob = _session("service", "bob", subjectId="bob")
    call("PUT", f"/sessions/{alice[0]}/context/memory", {"content": "Name: Alice"}, tenant="service", scopes=act)
    assert call("GET", f"/sessions/{alice[1]}/context/memory", tenant="service")[1]["content"] == "Name: Alice"
    assert call("GET", f"/sessions/{bob}/context/memory", tenant="service")[1]["content"] == ""
    call("PUT", f"/sessions/{bob}/context/house", {"content": "tenant-wide"}, tenant="service")
    assert call("GET", f"/sessions/{alice[0]}/context/house", tenant="service")[1]["content"] == "tenant-wide"


def test_a_stale_replacement_is_409_with_the_current_version(runtime: Runtime) -> None:
    one = _session("alice", "one")
    two = _session("alice", "two")
    put = call(
        "PUT", f"/sessions/{one}/context/memory", {"content": "Name: Alice", "basedOnVersion": 0}, tenant="alice"
    )
    assert put[0] == 200 and put[1]["version"] == 1
    status, error = call(
        "PUT", f"/sessions/{two}/context/memory", {"content": "Name: Bob?", "basedOnVersion": 0}, tenant="alice"
    )
    assert status == 409
    assert error["error"]["code"] == "stale_version" and error["error"]["currentVersion"] == 1
    assert "changed since version 0" in error["error"]["message"]
    assert call("GET", f"/sessions/{one}/context/memory", tenant="alice")[1]["content"] == "Name: Alice"
    appended = call(
        "PUT", f"/sessions/{two}/context/memory", {"content": "Likes tea", "mode": "append"}, tenant="alice"
    )
    assert appended[1]["content"] == "Name: Alice\nLikes tea" and appended[1]["version"] == 2
    refused = call(
        "PUT",
        f"/sessions/{two}/context/memory",
        {"content": "x", "mode": "append", "basedOnVersion": 2},
        tenant="alice",
    )
    assert refused[0] == 400 and "basedOnVersion is for replacements" in refused[1]["error"]["message"]
    over = call("PUT", f"/sessions/{two}/context/scratch", {"content": "word " * 100}, tenant="alice")
    assert over[0] == 409 and over[1]["error"]["code"] == "block_limit_exceeded"


def test_a_stale_tool_call_is_an_error_result_that_says_to_reread(runtime: Runtime) -> None:
    one = _session("alice", "one")
    two = _session("alice", "two")
    call("GET", f"/sessions/{two}/system-prompt", tenant="alice")  # two's model was shown the empty memory
    call("PUT", f"/sessions/{one}/context/memory", {"content": "Name: Alice"}, tenant="alice")
    status, result = call(
        "POST",
        f"/sessions/{two}/tools/set_context",
        {"input": {"label": "memory", "content": "Name: A."}},
        tenant="alice",
    )
    assert status == 200 and result["isError"] is True
    assert "was changed by another conversation" in result["output"] and result["output"].endswith("Name: Alice")


def test_history_pages_reads_and_reverts(runtime: Runtime) -> None:
    one = _session("alice", "one")
    _append("alice", one, "m1", "I'm Alice and I like tea")
    call(
        "POST",
        f"/sessions/{one}/tools/set_context",
        {"input": {"label": "memory", "content": "Name: Alice"}},
        tenant="alice",
    )
    for index in range(2, 8):
        call("PUT", f"/sessions/{one}/context/memory", {"content": f"Name: Alice\nfact {index}"}, tenant="alice")
    status, page = call("GET", f"/sessions/{one}/context/memory/history", query={"limit": "2"}, tenant="alice")
    assert status == 200 and [v["version"] for v in page["versions"]] == [7, 6] and page["nextCursor"]
    assert page["versions"][0]["change"]["source"] == "http" and page["versions"][0]["sizeBytes"] == 18
    rest = call("GET", f"/sessions/{one}/context/memory/history", query={"cursor": page["nextCursor"]}, tenant="alice")[
        1
    ]
    # keep_versions 5 in the profile: versions 1 and 2 are gone, the history is bounded
    assert [v["version"] for v in rest["versions"]] == [5, 4, 3] and rest["nextCursor"] is None
    assert call("GET", f"/sessions/{one}/context/memory/history/1", tenant="alice")[0] == 404
    old = call("GET", f"/sessions/{one}/context/memory/history/3", tenant="alice")[1]
    assert old["content"] == "Name: Alice\nfact 3" and old["label"] == "memory"
    status, reverted = call("POST", f"/sessions/{one}/context/memory/revert", {"version": 3}, tenant="alice")
    assert status == 200 and (reverted["content"], reverted["version"]) == ("Name: Alice\nfact 3", 8)
    stale = call("POST", f"/sessions/{one}/context/memory/revert", {"version": 4, "basedOnVersion": 7}, tenant="alice")
    assert stale[0] == 409 and stale[1]["error"]["currentVersion"] == 8
    # version 3 itself was pruned by the revert's new version (keep 5: versions 4 to 8)
    assert call("GET", f"/sessions/{one}/context/memory/history/3", tenant="alice")[0] == 404
    other_list = call(
        "GET", f"/sessions/{one}/context/house/history", query={"cursor": page["nextCursor"]}, tenant="alice"
    )
    assert other_list[0] == 400 and "another list" in other_list[1]["error"]["message"]
    assert call("GET", f"/sessions/{one}/context/soul/history", tenant="alice")[0] == 400


def test_a_tool_change_says_which_session_and_message_it_came_from(runtime: Runtime) -> None:
    one = _session("alice", "one")
    _append("alice", one, "m1", "Call me Al")
    call(
        "POST",
        f"/sessions/{one}/tools/set_context",
        {"input": {"label": "memory", "content": "Name: Al"}},
        tenant="alice",
    )
    [version] = call("GET", f"/sessions/{one}/context/memory/history", tenant="alice")[1]["versions"]
    assert version["change"] == {
        "source": "tool",
        "sessionId": one,
        "messageIds": ["m1"],
        "requestId": None,
        "note": None,
    }


def test_the_status_says_the_frozen_prompt_is_stale_until_refreshed(runtime: Runtime) -> None:
    one = _session("alice", "one")
    two = _session("alice", "two")
    frozen = call("GET", f"/sessions/{two}/system-prompt", tenant="alice")[1]["systemPrompt"]
    assert call("GET", f"/sessions/{two}/status", tenant="alice")[1]["staleBlocks"] == []
    call("PUT", f"/sessions/{one}/context/house", {"content": "Ship on Fridays"}, tenant="alice")
    assert call("GET", f"/sessions/{two}/status", tenant="alice")[1]["staleBlocks"] == ["house"]
    assert call("GET", f"/sessions/{two}/system-prompt", tenant="alice")[1]["systemPrompt"] == frozen
    refreshed = call("POST", f"/sessions/{two}/system-prompt/refresh", tenant="alice")[1]["systemPrompt"]
    assert "Ship on Fridays" in refreshed
    assert call("GET", f"/sessions/{two}/status", tenant="alice")[1]["staleBlocks"] == []


def test_naming_another_users_subject_needs_the_act_for_users_scope(runtime: Runtime) -> None:
    status, error = call("POST", "/sessions", {"name": "x", "subjectId": "victim"}, tenant="attacker")
    assert status == 403 and "threadloom/act-for-users" in error["error"]["message"]
    assert _session("attacker", "mine", subjectId="attacker")  # one's own subject needs nothing
    status, created = call(
        "POST",
        "/sessions",
        {"name": "for a user", "subjectId": "customer-42"},
        tenant="service",
        scopes=["threadloom/act-for-users"],
    )
    assert status == 201 and created["subjectId"] == "customer-42"


def test_a_warm_sessions_context_window_shows_a_shared_change_made_through_another(runtime: Runtime) -> None:
    # One warm process serves both sessions: the first has its blocks loaded (and its prompt frozen) already
    here, elsewhere = _session("alice", "here"), _session("alice", "elsewhere")
    frozen = call("GET", f"/sessions/{here}/system-prompt", tenant="alice")[1]["systemPrompt"]
    before = call("GET", f"/sessions/{here}/context-window", tenant="alice")[1]
    assert "Name: Alice" not in before["freshPrompt"] and before["frozenPrompt"] == frozen
    status, _ = call(
        "PUT", f"/sessions/{elsewhere}/context/memory", {"content": "Name: Alice", "mode": "replace"}, tenant="alice"
    )
    assert status == 200
    # The fresh render reads the block as stored now; the frozen prompt stays as it was until refreshed
    status, window = call("GET", f"/sessions/{here}/context-window", tenant="alice")
    assert status == 200
    assert "Name: Alice" in window["freshPrompt"] and window["frozenPrompt"] == frozen
    assert {block["label"]: block["tokens"] for block in window["blocks"]}["memory"] > 0
    assert call("GET", f"/sessions/{here}/status", tenant="alice")[1]["staleBlocks"] == ["memory"]


def test_a_keyed_session_created_again_elsewhere_for_another_subject_is_a_409_then_read_afresh(
    runtime: Runtime,
) -> None:
    """This process knew the session with its caller's subject; another deleted it and opened the key again
    for another subject: one 409 ``session_changed`` that read nothing, then the new subject's memory."""
    from threadloom.core.manager import SessionManager

    status, created = call("POST", "/sessions/open", {"key": "conversation-1"}, tenant="alice")
    assert status == 201, created
    path = f"/sessions/{created['id']}/context/memory"
    assert call("PUT", path, {"content": "Name: Alice"}, tenant="alice")[0] == 200
    assert call("GET", path, tenant="alice")[1]["content"] == "Name: Alice"
    elsewhere = SessionManager(runtime.store, namespace="alice")  # another process's manager
    elsewhere.delete(created["id"])
    assert elsewhere.open_session("conversation-1", subject_id="someone-else").id == created["id"]
    status, body = call("GET", path, tenant="alice")
    assert status == 409 and body["error"]["code"] == "session_changed", body
    assert "retry the request" in body["error"]["message"]
    status, body = call("GET", path, tenant="alice")
    assert status == 200 and body["content"] == "", body


def test_an_append_to_a_keyed_session_created_again_for_another_subject_is_a_409_that_wrote_nothing(
    runtime: Runtime,
) -> None:
    """The append's answer carries the prompt's token estimate: made with the first subject's memory in hand,
    it would count that memory for the new subject. One 409 ``session_changed``, nothing stored; the retry
    appends, with the new subject's (empty) memory in the estimate."""
    from threadloom.core.manager import SessionManager

    status, created = call("POST", "/sessions/open", {"key": "conversation-2"}, tenant="alice")
    assert status == 201, created
    session_id = created["id"]
    memory = f"/sessions/{session_id}/context/memory"
    assert call("PUT", memory, {"content": "Name: Alice. " * 60}, tenant="alice")[0] == 200
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    status, first = call("POST", f"/sessions/{session_id}/messages", {"message": message}, tenant="alice")
    assert status == 201, first
    elsewhere = SessionManager(runtime.store, namespace="alice")  # another process's manager
    elsewhere.delete(session_id)
    assert elsewhere.open_session("conversation-2", subject_id="someone-else").id == session_id
    message = {"id": "m2", "role": "user", "parts": [{"type": "text", "text": "hi, someone else here"}]}
    status, body = call("POST", f"/sessions/{session_id}/messages", {"message": message}, tenant="alice")
    assert status == 409 and body["error"]["code"] == "session_changed", body
    assert elsewhere.get_session(session_id).get_history() == []
    status, retried = call("POST", f"/sessions/{session_id}/messages", {"message": message}, tenant="alice")
    assert status == 201, retried
    assert [stored["id"] for stored in elsewhere.get_session(session_id).get_history()] == ["m2"]
    assert retried["tokenEstimate"] < first["tokenEstimate"], (first, retried)
