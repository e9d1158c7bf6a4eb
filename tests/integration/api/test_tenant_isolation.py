"""Tenant isolation: tenant B (and odd claims) try every operation and every model tool on tenant A's data.

On SQLite and on PostgreSQL. Every operation of ``openapi.json`` is attempted with A's
session, message, block and compaction ids; the only acceptable answers are 401 and 404
(or B's own, A-free data for the operations that are not about one session), never a
5xx, and A's sessions, blocks, skills, knowledge and usage are byte-for-byte unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import ROOT, call, seeded_runtime, text

A = "user-123"  # the seeded tenant
A_SESSION = "s-demo"
SECRET = "zanzibar"
DOCUMENT = json.loads((ROOT / "openapi.json").read_text(encoding="utf-8"))
BODIES: dict[str, Any] = {
    "createSession": {"name": "mine", "parentSessionId": A_SESSION},
    "renameSession": {"name": "hijacked"},
    "compactSession": {},
    "writeContextBlock": {"content": "overwritten"},
    "revertContextBlock": {"version": 1},
    "forkSession": {"atMessageId": "m2", "name": "stolen"},
    "appendMessages": {"message": text("intruder", "user", "hi"), "parentId": "m2"},
    "updateMessage": {"message": text("m2", "user", "rewritten")},
    "splitSession": {"summary": "stolen"},
    "callTool": {"input": {"label": "memory", "content": "overwritten"}},
    "addUsage": {"inputTokens": 5, "outputTokens": 5, "cost": 1.0},
    "importSessionsFromS3": {"key": f"exports/{A}/{A_SESSION}.jsonl"},
    "openSession": {"key": "a-key"},
    "eraseSubjectNamedInBody": {"subjectId": A},
}
QUERIES: dict[str, dict[str, str]] = {
    "searchAll": {"q": SECRET},
    "searchSession": {"q": SECRET},
    "getHistory": {"leafId": "m4"},
    "getKnowledgeEntry": {"key": "a-knowledge"},
    "deleteKnowledgeEntry": {"key": "a-knowledge"},
}
TENANT_WIDE = {
    "health",
    "searchAll",
    "listSessions",
    "createSession",
    "importSessions",
    "importSessionsFromS3",
    "eraseSubject",
    "eraseSubjectNamedInBody",
    "openSession",
    "listKnowledgeEntries",
}
"""Operations not addressed to one session: they answer, but with nothing of A's."""
ODD_CLAIMS = [
    "../",
    "../../skills",
    "user-123/..",
    "\uff55\uff53\uff45\uff52-123",  # full-width look-alike of user-123
    "us\u0435r-123",  # Cyrillic "e"
    "user-123 ",
    " user-123",
    "USER-123",
    "user-123#POST /sessions",
    "user-123:x",
    "user-123\t",
    "ténant-ä-🙂",
    "x" * 256,
]
REFUSED_CLAIMS = ["", " ", "\t", "x" * 257, "user\x00-123", "user-\ud800"]


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    """Tenant A with a session, a secret in its history, memory, skills, knowledge, a compaction and usage."""
    store = None
    if request.param == "postgres":
        factory: Callable[[], Any] = request.getfixturevalue("postgres_store_factory")
        store = factory()
    runtime = seeded_runtime(tmp_path, store=store)[0]
    assert call("POST", f"/sessions/{A_SESSION}/messages", {"message": text("m5", "user", f"the {SECRET} code")})[0]
    assert call("PUT", f"/sessions/{A_SESSION}/context/memory", {"content": f"A remembers {SECRET}"})[0] == 200
    for label in ("skills", "knowledge"):
        entry = {"label": label, "content": f"A's {SECRET} {label}", "metadata": {"title": f"a-{label}"}}
        assert call("POST", f"/sessions/{A_SESSION}/tools/set_context", {"input": entry})[1]["isError"] is False
    assert call("POST", f"/sessions/{A_SESSION}/usage", {"inputTokens": 7, "outputTokens": 3, "cost": 0.5})[0] == 200
    runtime.manager(A).add_compaction(A_SESSION, f"A summary {SECRET}", "m1", "m2")
    assert call("POST", "/sessions/open", {"key": "a-key", "name": f"A {SECRET}"})[0] == 201
    return runtime


def snapshot() -> list[Any]:
    """Everything of A's that another tenant must not be able to change."""
    outputs = []
    for path in (
        f"/sessions/{A_SESSION}",
        f"/sessions/{A_SESSION}/history",
        f"/sessions/{A_SESSION}/context",
        f"/sessions/{A_SESSION}/context/memory/history",
        f"/sessions/{A_SESSION}/compactions",
        f"/sessions/{A_SESSION}/messages/m2",
        "/sessions",
        "/knowledge/knowledge",
    ):
        status, body = call("GET", path, tenant=A)
        assert status == 200, (path, body)
        for message in body.get("messages", []) if isinstance(body, dict) else []:
            if message["id"].startswith("compaction_"):
                message.pop("createdAt")  # an overlay's synthetic message is dated when read
        outputs.append(body)
    for label, key in (("skills", "a-skills"), ("skills", "pirate")):
        load = {"input": {"label": label, "key": key}}
        outputs.append(call("POST", f"/sessions/{A_SESSION}/tools/load_context", load, tenant=A)[1])
    search = {"input": {"label": "knowledge", "query": SECRET}}
    outputs.append(call("POST", f"/sessions/{A_SESSION}/tools/search_context", search, tenant=A)[1])
    return outputs


def operations() -> list[tuple[str, str, str]]:
    return [
        (method.upper(), path, operation["operationId"])
        for path, methods in DOCUMENT["paths"].items()
        for method, operation in methods.items()
    ]


def aimed_at_a(path: str, compaction_id: str) -> str:
    return (
        path.replace("/knowledge/{label}", "/knowledge/knowledge")
        .replace("{sessionId}", A_SESSION)
        .replace("{messageId}", "m2")
        .replace("{label}", "memory")
        .replace("{toolName}", "set_context")
        .replace("{compactionId}", compaction_id)
        .replace("{version}", "1")
    )


def assert_nothing_of_a(body: Any) -> None:
    dumped = json.dumps(body, ensure_ascii=False)
    assert SECRET not in dumped and A_SESSION not in dumped, dumped


@pytest.mark.parametrize("tenant", ["tenant-b", *ODD_CLAIMS])
def test_every_operation_of_another_tenant_is_404_and_changes_nothing(runtime: Runtime, tenant: str) -> None:
    compaction_id = runtime.manager(A).get_compactions(A_SESSION)[0].id
    before = snapshot()
    for method, template, operation_id in operations():
        path = aimed_at_a(template, compaction_id)
        status, body = call(method, path, BODIES.get(operation_id), query=QUERIES.get(operation_id), tenant=tenant)
        assert status < 500, (operation_id, status, body)
        if operation_id in TENANT_WIDE:
            # Imports and erasure act on the caller's own tenant: refused (no file, no bucket, no admin scope)
            # or done there; the snapshot below proves A is untouched either way.
            assert status in (200, 201, 400, 403, 404, 409, 415), (operation_id, status, body)
            if status < 300:  # a 404 only echoes the id the caller sent
                assert_nothing_of_a(body)
        else:
            assert status == 404, (operation_id, status, body)
            assert body["error"]["code"] == "not_found"
    assert snapshot() == before


@pytest.mark.parametrize("tenant", REFUSED_CLAIMS)
def test_unusable_claims_are_401_on_every_operation(runtime: Runtime, tenant: str) -> None:
    before = snapshot()
    for method, template, operation_id in operations():
        if operation_id == "health":
            continue  # no tenant needed
        path = aimed_at_a(template, "c")
        status, body = call(method, path, BODIES.get(operation_id), query=QUERIES.get(operation_id), tenant=tenant)
        expected = {(401, "unauthorized")}
        if operation_id in ("eraseSubject", "eraseSubjectNamedInBody"):
            expected.add((403, "forbidden"))  # the admin scope is checked first: still nothing done
        assert (status, body["error"]["code"]) in expected, (operation_id, status, body)
    missing = call("GET", "/sessions", tenant=None)
    assert missing[0] == 401
    assert snapshot() == before


def test_model_tools_in_another_tenants_session_see_nothing_of_a(runtime: Runtime) -> None:
    before = snapshot()
    session = call("POST", "/sessions", {"name": "B"}, tenant="tenant-b")[1]["id"]

    def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        status, body = call("POST", f"/sessions/{session}/tools/{name}", {"input": arguments}, tenant="tenant-b")
        assert status == 200, body
        return body  # type: ignore[no-any-return]

    assert tool("load_context", {"label": "skills", "key": "a-skills"})["output"] == "Not found: a-skills"
    assert tool("search_context", {"label": "knowledge", "query": SECRET})["output"] == "No results found."
    assert SECRET not in tool("session_search", {"query": SECRET})["output"]
    assert tool("load_context", {"label": "skills", "key": "pirate"})["output"] == "Say arr.\n"  # the catalogue
    # B writes the same keys A uses: its own copies, A's stay.
    for label in ("skills", "knowledge"):
        entry = {"label": label, "content": "B's version", "metadata": {"title": f"a-{label}"}}
        assert tool("set_context", entry)["isError"] is False
    assert tool("load_context", {"label": "skills", "key": "a-skills"})["output"] == "B's version"
    prompt = call("POST", f"/sessions/{session}/system-prompt/refresh", tenant="tenant-b")[1]["systemPrompt"]
    assert SECRET not in prompt
    tools = call("GET", f"/sessions/{session}/tools", tenant="tenant-b")[1]
    assert_nothing_of_a(tools)
    assert snapshot() == before


def test_guessed_ids_across_tenants_are_not_found(runtime: Runtime) -> None:
    """B's own session with the same message ids as A's: B reads only its own."""
    session = call("POST", "/sessions", {"name": "B"}, tenant="tenant-b")[1]["id"]
    assert call("GET", f"/sessions/{session}/messages/m2", tenant="tenant-b")[0] == 404
    fork = call("POST", f"/sessions/{session}/fork", {"atMessageId": "m2"}, tenant="tenant-b")
    assert fork[0] == 404
    chain = {"message": text("m9", "user", "x"), "parentId": "m4"}
    assert call("POST", f"/sessions/{session}/messages", chain, tenant="tenant-b")[0] == 404
    created = call("POST", "/sessions", {"name": "child", "parentSessionId": A_SESSION}, tenant="tenant-b")
    assert created[0] == 404


def test_history_pages_of_another_tenant_are_404_with_a_cursor_or_a_leaf_and_read_nothing(runtime: Runtime) -> None:
    """From the second page on, or with ``leafId``, the page read checks the tenant itself (no registry read)."""
    status, first = call("GET", f"/sessions/{A_SESSION}/history", query={"limit": "2"}, tenant=A)
    assert status == 200 and first["nextCursor"]
    queries = [
        {"limit": "2", "cursor": first["nextCursor"]},
        {"leafId": "m5"},
        {"leafId": "m5", "cursor": first["nextCursor"]},
        {"cursor": "not-a-cursor"},  # a bad cursor is still a 404 in a session that is not the caller's
    ]
    for tenant in ("tenant-b", "user-1234"):
        for query in queries:
            status, body = call("GET", f"/sessions/{A_SESSION}/history", query=query, tenant=tenant)
            assert (status, body["error"]["code"]) == (404, "not_found"), (tenant, query, body)
            assert SECRET not in json.dumps(body) and "messages" not in body
            assert body["error"]["message"] == f"Session {A_SESSION!r} not found"
    for query in queries[:3]:  # a session nobody has
        status, body = call("GET", "/sessions/s-nobody/history", query=query, tenant=A)
        assert (status, body["error"]["message"]) == (404, "Session 's-nobody' not found"), body
    assert call("GET", f"/sessions/{A_SESSION}/history", query=queries[0], tenant=A)[0] == 200
