"""Security suite: session ids bound to their namespace, and no answer that reveals another tenant's ids (issue 23).

Session ids are unique across the database. Classes covered: ids another tenant could compute or
take first; an import whose answer depends on whether another tenant holds an id (the old 409
"its id is taken"); renamed imports that leave a block key, prompt or fork parent naming the old
id; keyed sessions opened under earlier derivations; every session route, a create's parent, a
keyed open and an idempotency key answering differently for another tenant's id than for an id no
one holds. Each runs through the real handler on SQLite and PostgreSQL, and each has a control
that proves it can fail (an unsafe variant, or the same comparison telling apart answers that differ).
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.core.keys import (
    imported_session_id,
    is_minted_for,
    keyed_session_id,
    legacy_keyed_session_id,
    new_session_id,
    previous_keyed_session_id,
)
from threadloom.lifecycle import export_sessions, import_sessions
from threadloom.storage.snapshot import SessionSnapshot

from tests.support.api import SESSION, TENANT, backend_store, call, seeded_runtime, text
from tests.support.crafted_exports import AT, crafted_export, imported_id
from tests.support.lifecycle import NO_SHARED_BLOCKS_OR_KNOWLEDGE

A = TENANT
B = "tenant-b"
NDJSON = {"content-type": "application/x-ndjson"}
NOBODY = "s-none"
"""An id no tenant holds, as long as A's ``s-demo``, so answers can be compared byte for byte."""


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    """Tenant A (``user-123``) holds ``s-demo`` (4 messages, m1..m4) and ``s-other``; tenant B has nothing."""
    return seeded_runtime(tmp_path, store=backend_store(request))[0]


def secret(runtime: Runtime) -> str:
    return runtime.store.lifecycle().session_id_secret()


def import_as(tenant: str, data: bytes) -> tuple[int, Any]:
    return call("POST", "/sessions/import", raw_body=data, tenant=tenant, headers=NDJSON)


def shape(answer: tuple[int, Any], *ids: str) -> str:
    """The answer with the given ids (and the ids they were renamed to) blanked out."""
    body = json.dumps(answer[1], sort_keys=True)
    renamed = answer[1].get("renamed", {}) if isinstance(answer[1], dict) else {}
    for old in ids:
        body = body.replace(renamed.get(old, "\0"), "<new>").replace(old, "<id>")
    return f"{answer[0]} {body}"


def session_file(*snapshots: SessionSnapshot) -> bytes:
    from threadloom.lifecycle.export_format import write_export

    stream = io.BytesIO()
    write_export(snapshots, stream)
    return stream.getvalue()


def empty_session(session_id: str, *, parent: str | None = None, blocks: dict[str, str] | None = None) -> Any:
    from threadloom.storage.snapshot import BlockRow

    return SessionSnapshot(
        id=session_id,
        name=f"file {session_id}",
        parent_session_id=parent,
        model=None,
        source=None,
        subject_id=None,
        legal_hold=False,
        input_tokens=0,
        output_tokens=0,
        estimated_cost=0.0,
        end_reason=None,
        created_at=AT,
        updated_at=AT,
        leaf_id=None,
        next_seq=1,
        blocks=[BlockRow(key, content, AT) for key, content in (blocks or {}).items()],
    )


# ------------------------------------------------------------------ minted ids


def test_every_id_the_deployment_mints_is_bound_to_its_namespace(runtime: Runtime) -> None:
    # Check: create, fork, split and keyed open all give ids minted for the caller's namespace only
    created = call("POST", "/sessions", {"name": "new"})[1]["id"]
    call("POST", f"/sessions/{created}/messages", {"message": text("x1", "user", "hello")})
    forked = call("POST", f"/sessions/{created}/fork", {"atMessageId": "x1", "name": "fork"})[1]["id"]
    split = call("POST", f"/sessions/{forked}/split", {"summary": "so far"})[1]["id"]
    opened = call("POST", "/sessions/open", {"key": "user-42"})[1]["id"]
    theirs = call("POST", "/sessions/open", {"key": "user-42"}, tenant=B)[1]["id"]
    key = secret(runtime)
    for session_id in (created, forked, split, opened):
        assert is_minted_for(key, A, session_id) and not is_minted_for(key, B, session_id), session_id
        assert uuid.UUID(session_id).version == 8
    assert is_minted_for(key, B, theirs) and theirs != opened
    # Control: ids the check must refuse are refused: a random UUID, A's id with one tag digit
    # changed, its upper-case spelling, a minted id under another secret, the seeded hand-written id
    flipped = opened[:-1] + ("0" if opened[-1] != "0" else "1")
    for other in (str(uuid.uuid4()), flipped, opened.upper(), new_session_id("0" * 64, A), SESSION):
        assert not is_minted_for(key, A, other), other


def test_keyed_open_finds_sessions_of_earlier_derivations_in_its_own_namespace_only(runtime: Runtime) -> None:
    key = secret(runtime)
    registry = runtime.store.registry(A)
    # Check: sessions opened before minting (the 0016 HMAC id, the public UUIDv5) are found by their key
    previous = registry.create("old-hmac", session_id=previous_keyed_session_id(key, A, "k-previous"))
    legacy = registry.create("old-uuid5", session_id=legacy_keyed_session_id(A, "k-legacy"))
    assert call("POST", "/sessions/open", {"key": "k-previous"}) == (200, call("GET", f"/sessions/{previous.id}")[1])
    assert call("POST", "/sessions/open", {"key": "k-legacy"})[1]["id"] == legacy.id
    # and a new key gets a minted id
    assert call("POST", "/sessions/open", {"key": "k-new"})[1]["id"] == keyed_session_id(key, A, "k-new")
    # But the same earlier ids held in another namespace are never A's: A's open creates its own
    runtime.store.registry(B).create("B's", session_id=previous_keyed_session_id(key, A, "k-b"))
    runtime.store.registry(B).create("B's", session_id=legacy_keyed_session_id(A, "k-b2"))
    for name in ("k-b", "k-b2"):
        status, opened = call("POST", "/sessions/open", {"key": name})
        assert status == 201 and opened["id"] == keyed_session_id(key, A, name) and opened["name"] == name
    # Control: those B sessions do exist under the ids A's keys used to have
    assert runtime.store.lifecycle().session_namespace(legacy_keyed_session_id(A, "k-b2")) == B


# ------------------------------------------------------------------ import answers reveal nothing


def test_importing_ids_held_by_another_tenant_or_by_nobody_gives_answers_of_one_shape(runtime: Runtime) -> None:
    # Check: for A's hand-written id, A's minted id and an id nobody holds, B's imports answer alike
    a_minted = call("POST", "/sessions", {"name": "A's minted"})[1]["id"]
    free_minted = new_session_id(secret(runtime), A)  # minted for A but never used
    answers = {
        SESSION: import_as(B, crafted_export(SESSION)),
        NOBODY: import_as(B, crafted_export(NOBODY)),
        a_minted: import_as(B, crafted_export(a_minted)),
        free_minted: import_as(B, crafted_export(free_minted)),
    }
    shapes = {shape(answer, old) for old, answer in answers.items()}
    assert shapes == {
        '200 {"imported": ["<new>"], "knowledgeEntriesImported": 0, "knowledgeEntriesUnchanged": 0, "messages": 0, '
        '"renamed": {"<id>": "<new>"}, "sharedBlockVersions": 0, "sharedBlocksImported": [], '
        '"sharedBlocksUnchanged": [], "unchanged": []}'
    }
    for old, answer in answers.items():
        assert answer[1]["renamed"] == {old: imported_id(runtime.store, B, old)}
    # and A's sessions are A's, untouched
    assert call("GET", f"/sessions/{SESSION}")[1]["name"] == "Pirate taxes"
    assert call("GET", f"/sessions/{a_minted}")[1]["name"] == "A's minted"
    # Control: under the rule import had before (ids kept, an id held elsewhere a 409) the same
    # comparison tells A's id from a free one
    before = import_sessions
    kept = before(runtime.store.lifecycle(), B, io.BytesIO(crafted_export("s-free")), keep_ids=True)
    assert kept.imported == ["s-free"]
    with pytest.raises(Exception, match="held by namespace") as refused:
        before(runtime.store.lifecycle(), B, io.BytesIO(crafted_export("s-other")), keep_ids=True)
    assert f"200 {kept.imported}" != f"409 {refused.value}"


def test_a_fork_parent_outside_the_file_is_kept_only_when_it_is_the_importers_own(runtime: Runtime) -> None:
    own = call("POST", "/sessions", {"name": "B's parent"}, tenant=B)[1]["id"]
    parents = {"own": own, "held by A": SESSION, "held by nobody": NOBODY}
    answers = {}
    for label, parent in parents.items():
        answer = import_as(B, session_file(empty_session(f"child-{len(label)}", parent=parent)))
        assert answer[0] == 200, answer
        answers[label] = answer
        child = answer[1]["imported"][0]
        shown = call("GET", f"/sessions/{child}", tenant=B)[1]["parentSessionId"]
        # Check: B's own parent is kept; A's and nobody's are dropped alike
        assert shown == (own if label == "own" else None), (label, shown)
    assert shape(answers["held by A"], "child-9") == shape(answers["held by nobody"], "child-14")
    # Control: had the import kept a parent id it cannot vouch for (the trusted path keeps it as
    # written), A's session would show up as B's session's parent
    report = import_sessions(
        runtime.store.lifecycle(), B, io.BytesIO(session_file(empty_session("kept", parent=SESSION))), keep_ids=True
    )
    assert report.imported == ["kept"]
    assert call("GET", "/sessions/kept", tenant=B)[1]["parentSessionId"] == SESSION


def test_a_renamed_session_brings_its_blocks_prompt_and_fork_along(runtime: Runtime) -> None:
    # Check: in a file from elsewhere, a parent and its fork are renamed together; blocks and prompt follow
    parent = empty_session("chat:1@x.y~z", blocks={"memory_chat:1@x.y~z": "parent memory"})
    fork = empty_session("chat:1@x.y~z-fork", parent="chat:1@x.y~z", blocks={"_system_prompt_chat:1@x.y~z-fork": "p"})
    data = session_file(parent, fork)
    status, answer = import_as(B, data)
    new_parent, new_fork = (imported_id(runtime.store, B, old) for old in (parent.id, fork.id))
    assert status == 200 and answer["renamed"] == {parent.id: new_parent, fork.id: new_fork}
    assert call("GET", f"/sessions/{new_fork}", tenant=B)[1]["parentSessionId"] == new_parent
    assert call("GET", f"/sessions/{new_parent}/context/memory", tenant=B)[1]["content"] == "parent memory"
    assert call("GET", f"/sessions/{new_fork}/system-prompt", tenant=B)[1]["systemPrompt"] == "p"
    keys = {
        row[0]
        for row in runtime.store.database.query_once(
            "SELECT key FROM threadloom_context_blocks WHERE namespace = :namespace", {"namespace": B}
        )
    }
    assert keys == {f"memory_{new_parent}", f"_system_prompt_{new_fork}"}
    # and a second import is idempotent, a third under another tenant is that tenant's own copy
    again = import_as(B, data)
    assert again == (
        200,
        {
            "imported": [],
            "unchanged": [new_parent, new_fork],
            "messages": 0,
            "renamed": answer["renamed"],
            **NO_SHARED_BLOCKS_OR_KNOWLEDGE,
        },
    )
    assert import_as("tenant-c", data)[1]["renamed"][parent.id] == imported_id(runtime.store, "tenant-c", parent.id)
    # Control: the file's own keys name the old ids, so the check above is not passing on unchanged keys
    assert b"memory_chat:1@x.y~z" in data and b"memory_" + new_parent.encode() not in data


def test_a_file_naming_one_session_twice_after_renaming_is_refused(runtime: Runtime) -> None:
    # Check: a foreign id and the id it would be renamed to, in one file: a 400, nothing imported
    renamed = imported_id(runtime.store, B, "twice")
    answer = import_as(B, session_file(empty_session("twice"), empty_session(renamed)))
    assert answer[0] == 400 and "would both be imported as" in answer[1]["error"]["message"], answer
    assert call("GET", f"/sessions/{renamed}", tenant=B)[0] == 404
    # Control: each of the two alone imports
    assert import_as(B, session_file(empty_session(renamed)))[1]["imported"] == [renamed]


def test_an_export_re_imported_by_its_own_tenant_is_unchanged_and_keeps_its_ids(runtime: Runtime) -> None:
    # Check: A's own sessions (hand-written or minted ids) come back as unchanged, never duplicated
    minted = call("POST", "/sessions", {"name": "minted"})[1]["id"]
    stream = io.BytesIO()
    export_sessions(runtime.store.lifecycle(), A, [SESSION, minted], stream)
    answer = import_as(A, stream.getvalue())
    assert answer == (
        200,
        {"imported": [], "unchanged": [SESSION, minted], "messages": 0, "renamed": {}, **NO_SHARED_BLOCKS_OR_KNOWLEDGE},
    )
    # Control: the same file into B is B's copy under B's ids
    theirs = import_as(B, stream.getvalue())[1]
    assert theirs["renamed"] == {old: imported_session_id(secret(runtime), B, old) for old in (SESSION, minted)}


# ------------------------------------------------------------------ other surfaces: no oracle


SESSION_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "", None),
    ("PATCH", "", {"name": "x"}),
    ("DELETE", "", None),
    ("GET", "/branch-points", None),
    ("POST", "/clear", None),
    ("POST", "/compact", {}),
    ("GET", "/compactions", None),
    ("POST", "/compactions", {"summary": "s", "fromMessageId": "m1", "toMessageId": "m2"}),
    ("GET", "/compactions/c1/originals", None),
    ("GET", "/context", None),
    ("GET", "/context-window", None),
    ("GET", "/context/memory", None),
    ("PUT", "/context/memory", {"content": "x"}),
    ("GET", "/export", None),
    ("POST", "/fork", {"atMessageId": "m1", "name": "f"}),
    ("GET", "/history", None),
    ("GET", "/leaf", None),
    ("PUT", "/leaf", {"leafId": "m1"}),
    ("POST", "/messages", {"message": text("q", "user", "hi")}),
    ("GET", "/messages/m1", None),
    ("GET", "/messages/m1/branches", None),
    ("GET", "/search", None),
    ("POST", "/split", {"summary": "s"}),
    ("GET", "/status", None),
    ("GET", "/system-prompt", None),
    ("POST", "/system-prompt/refresh", None),
    ("GET", "/tools", None),
    ("POST", "/tools/set_context", {"input": {"label": "memory", "content": "x"}}),
    ("POST", "/usage", {"inputTokens": 1, "outputTokens": 1, "cost": 0.1}),
]


def test_no_session_route_answers_another_tenants_id_differently_from_an_unknown_id(runtime: Runtime) -> None:
    # Check: B's requests naming A's session and naming no session answer the same, on every route
    differing = []
    for method, suffix, body in SESSION_ROUTES:
        query = {"q": "taxes"} if suffix == "/search" else None
        held = call(method, f"/sessions/{SESSION}{suffix}", body, tenant=B, query=query)
        free = call(method, f"/sessions/{NOBODY}{suffix}", body, tenant=B, query=query)
        if shape(held, SESSION) != shape(free, NOBODY) or held[0] != 404:
            differing.append((method, suffix, held, free))
    # and a create naming A's session as parent answers as one naming no session
    held = call("POST", "/sessions", {"name": "x", "parentSessionId": SESSION}, tenant=B)
    free = call("POST", "/sessions", {"name": "x", "parentSessionId": NOBODY}, tenant=B)
    assert held[0] == 404 and shape(held, SESSION) == shape(free, NOBODY)
    assert differing == []
    # A's session is untouched by all that
    assert call("GET", f"/sessions/{SESSION}")[1]["name"] == "Pirate taxes"
    assert len(call("GET", f"/sessions/{SESSION}/history")[1]["messages"]) == 4
    # Control: the comparison tells apart A's answer on A's own session from B's
    assert shape(call("GET", f"/sessions/{SESSION}"), SESSION) != shape(
        call("GET", f"/sessions/{SESSION}", tenant=B), SESSION
    )


def test_a_key_equal_to_another_tenants_id_opens_the_callers_own_session(runtime: Runtime) -> None:
    # Check: B's keyed open with A's session id (or odd characters) as the key is B's new session
    for key in (SESSION, f"{A}\n{SESSION}", "../s-demo", "s-demo\u0000"[:-1] + "\u200b"):
        status, opened = call("POST", "/sessions/open", {"key": key}, tenant=B)
        assert status == 201 and opened["id"] != SESSION and opened["name"] == key, (key, opened)
        assert is_minted_for(secret(runtime), B, opened["id"])
    assert call("GET", f"/sessions/{SESSION}")[1]["name"] == "Pirate taxes"
    # Control: A's open of a key does find A's session (the check compares like with like)
    first = call("POST", "/sessions/open", {"key": SESSION})
    assert first[0] == 201 and call("POST", "/sessions/open", {"key": SESSION}) == (200, first[1])


@pytest.mark.parametrize("odd", ["S-DEMO", "s-demo.", "..", "s-d\u0435mo", "s-demo ", "s%2Ddemo"])
def test_ids_that_look_like_another_tenants_id_reach_nothing(runtime: Runtime, odd: str) -> None:
    # Check: near spellings of A's id are unknown ids for B (404 not_found or no route), never A's session
    status, body = call("GET", f"/sessions/{odd}/history", tenant=B)
    assert status in (400, 404) and "Pirate" not in json.dumps(body) and "m1" not in json.dumps(body)
    # Control: A's own spelling reaches A's history
    assert "m1" in json.dumps(call("GET", f"/sessions/{SESSION}/history")[1])


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_idempotency_key_another_tenant_used_replays_nothing_and_tells_nothing(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    import boto3
    from moto import mock_aws

    store = request.getfixturevalue("postgres_store_factory")() if backend == "postgres" else None
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="idem",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        seeded_runtime(tmp_path, store=store, idempotency_table="idem")
        key = {"idempotency-key": "k-shared"}
        message = {"message": text("q1", "user", "A's question")}
        # A uses the key on its session and on a create
        assert call("POST", f"/sessions/{SESSION}/messages", message, headers=key)[0] == 201
        a_created = call("POST", "/sessions", {"name": "A's"}, headers=key)
        # Check: B's same key, same bodies: on A's session the answer equals one on no session; B's create is B's
        held = call("POST", f"/sessions/{SESSION}/messages", message, headers=key, tenant=B)
        free = call("POST", f"/sessions/{NOBODY}/messages", message, headers=key, tenant=B)
        b_created = call("POST", "/sessions", {"name": "A's"}, headers=key, tenant=B)
        # Control: A's own retry with the key replays A's answer (the records are there to be found)
        a_again = call("POST", "/sessions", {"name": "A's"}, headers=key)
    assert held[0] == 404 and shape(held, SESSION) == shape(free, NOBODY)
    assert b_created[0] == 201 and b_created[1]["id"] != a_created[1]["id"] and b_created[1]["subjectId"] == B
    assert a_again == a_created
