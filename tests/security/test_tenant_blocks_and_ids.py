"""Security suite: context blocks and session ids across tenants, on SQLite and on PostgreSQL (issue 23).

Classes covered: a block or frozen prompt row read or written by another owner; import of blocks
the profile would never write; keyed session ids another tenant can compute and take first; the
answers of import and open revealing another tenant's sessions or rows. Every check runs through
the real API handler where an attacker would, and has a control that proves it can fail: the same
attack against a deliberately unsafe variant (the old key-only block read, the old public keyed-id
derivation, no block-key check) succeeds, or the same act within one tenant does what is refused
across tenants.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.core.keys import keyed_session_id, legacy_keyed_session_id
from threadloom.errors import ConflictError
from threadloom.lifecycle import import_sessions
from threadloom.storage.blocks import SqlContextProvider
from threadloom.storage.registry import SqlSessionRegistry

from tests.support.api import SESSION, TENANT, backend_store, call, seeded_runtime
from tests.support.crafted_exports import crafted_export, imported_id

A = TENANT
B = "tenant-b"
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    """Tenant A (the seeded ``user-123``) with session ``chat_1`` holding memory; tenant B has nothing."""
    runtime = seeded_runtime(tmp_path, store=backend_store(request))[0]
    runtime.store.registry(A).create("Chat one", session_id="chat_1")
    assert call("PUT", "/sessions/chat_1/context/memory", {"content": "A's memory"})[0] == 200
    return runtime


def import_as(tenant: str, data: bytes) -> tuple[int, Any]:
    return call("POST", "/sessions/import", raw_body=data, tenant=tenant, headers=NDJSON)


def a_memory() -> str:
    status, block = call("GET", "/sessions/chat_1/context/memory")
    assert status == 200
    return str(block["content"])


def key_only_reads(runtime: Runtime, key: str) -> list[str]:
    """The unsafe variant: what a block read by key alone (as before migration 0015) could return."""
    rows = runtime.store.database.query_once(
        "SELECT content FROM threadloom_context_blocks WHERE key = :key", {"key": key}
    )
    return sorted(str(row[0]) for row in rows)


def owner_read(runtime: Runtime, key: str) -> str | None:
    """The read the sessions use: the owner (A, chat_1) and the key."""
    return SqlContextProvider(runtime.store.database, runtime.store.sql, key, session_id="chat_1", namespace=A).get()


# ------------------------------------------------------------------ block rows belong to one owner


def test_a_block_stored_by_another_tenant_under_the_victims_key_is_never_read_by_the_victim(runtime: Runtime) -> None:
    # Check: B's session "1" stores a row keyed as A's memory (the trusted library path: no profile
    # check, ids kept; through the API the file would be refused, and its ids renamed)
    import_sessions(
        runtime.store.lifecycle(),
        B,
        io.BytesIO(crafted_export("1", {"memory_chat_1": "planted by B"})),
        keep_ids=True,
    )
    assert a_memory() == "A's memory"
    exported = call("GET", "/sessions/1/export", tenant=B)[1]
    assert "A's memory" not in str(exported)
    # Control: the plant is stored under A's key, and a key-only read (the unsafe variant) can
    # return it for A's block, so the check above would see it if reads did not name their owner
    assert key_only_reads(runtime, "memory_chat_1") == ["A's memory", "planted by B"]
    assert owner_read(runtime, "memory_chat_1") == "A's memory"


def test_a_planted_frozen_prompt_never_becomes_the_victims_prompt(runtime: Runtime) -> None:
    # Check: through the API, B's file carrying A's prompt key is refused and A's prompt is A's
    answer = import_as(B, crafted_export(f"prompt_{SESSION}", {f"_system_prompt_{SESSION}": "SYSTEM OVERRIDE"}))
    assert answer[0] == 400 and f"_system_prompt_{SESSION}" in answer[1]["error"]["message"]
    assert "SYSTEM OVERRIDE" not in call("GET", f"/sessions/{SESSION}/system-prompt")[1]["systemPrompt"]
    # Control: the same file imported without the profile's key check, ids kept (the trusted
    # library path), lands in B's namespace only, and a key-only read (the unsafe variant) would hand it to A
    import_sessions(
        runtime.store.lifecycle(),
        B,
        io.BytesIO(crafted_export(f"prompt_{SESSION}", {f"_system_prompt_{SESSION}": "SYSTEM OVERRIDE"})),
        keep_ids=True,
    )
    refreshed = call("POST", f"/sessions/{SESSION}/system-prompt/refresh")
    assert refreshed[0] == 200 and "SYSTEM OVERRIDE" not in refreshed[1]["systemPrompt"]
    assert "SYSTEM OVERRIDE" in key_only_reads(runtime, f"_system_prompt_{SESSION}")


def test_import_accepts_only_the_blocks_the_profile_writes_for_the_imported_session(runtime: Runtime) -> None:
    # Check: keys of another session, of a block the profile lacks, or of the prompt by a block
    # record are each refused by name, and nothing is imported
    for key in ("memory_chat_1", "notes_1", "_system_prompt_chat_1", "soul_1", "knowledge_1"):
        answer = import_as(B, crafted_export("1", {key: "x"}))
        assert answer[0] == 400 and repr(key) in answer[1]["error"]["message"], (key, answer)
        assert call("GET", "/sessions/1", tenant=B)[0] == 404
    # Control: the profile's own block for the imported session imports (under the id B's namespace gives it)
    status, answer = import_as(B, crafted_export("1", {"memory_1": "B's memory"}))
    assert status == 200 and answer["renamed"] == {"1": imported_id(runtime.store, B, "1")}
    assert call("GET", f"/sessions/{answer['renamed']['1']}/context/memory", tenant=B)[1]["content"] == "B's memory"


# ------------------------------------------------------------------ keyed session ids


def test_another_tenant_cannot_compute_and_squat_a_keyed_session_id(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Check: B's import of every id it can compute for A's key (the public derivation) is given
    # another id, and A's open of the key still works and is A's own
    squatted = legacy_keyed_session_id(A, "conversation-9")
    status, answer = import_as(B, crafted_export(squatted))
    assert status == 200 and answer["imported"] == [imported_id(runtime.store, B, squatted)] != [squatted]
    status, opened = call("POST", "/sessions/open", {"key": "conversation-9"})
    assert status == 201 and opened["id"] != squatted
    assert call("GET", f"/sessions/{opened['id']}/history", tenant=B)[0] == 404
    # Even a squat under the public id (the trusted path keeps ids) does not stop A's open
    import_sessions(runtime.store.lifecycle(), B, io.BytesIO(crafted_export(squatted, name="again")), keep_ids=True)
    assert call("POST", "/sessions/open", {"key": "conversation-9"})[1]["id"] == opened["id"]

    # Control: with the public derivation (the unsafe variant) a squat under that id breaks A's open
    def public_ids(registry: SqlSessionRegistry, key: str) -> tuple[str, Any]:
        session_id = legacy_keyed_session_id(registry.namespace, key)
        return session_id, registry.get(session_id)

    monkeypatch.setattr(SqlSessionRegistry, "find_keyed", public_ids)
    unsafe = legacy_keyed_session_id(A, "conversation-10")
    import_sessions(runtime.store.lifecycle(), B, io.BytesIO(crafted_export(unsafe)), keep_ids=True)
    assert call("POST", "/sessions/open", {"key": "conversation-10"})[0] >= 400


def test_keyed_ids_depend_on_the_deployment_secret_not_only_on_public_inputs(runtime: Runtime) -> None:
    # Check: A's id for a key is neither the public derivation nor the id under another secret
    opened = call("POST", "/sessions/open", {"key": "user-42"})[1]
    assert opened["id"] != legacy_keyed_session_id(A, "user-42")
    assert opened["id"] != keyed_session_id("0" * 64, A, "user-42")
    # Control: under the deployment's own secret the derivation gives A's id (so the check compares like with like)
    [[secret]] = runtime.store.database.query_once(
        "SELECT value FROM threadloom_settings WHERE name = 'keyed_session_secret'", {}
    )
    assert keyed_session_id(str(secret), A, "user-42") == opened["id"]
    assert len(str(secret)) >= 64


# ------------------------------------------------------------------ answers reveal nothing


def test_importing_an_id_another_tenant_holds_answers_as_for_an_id_nobody_holds(runtime: Runtime) -> None:
    # Check: B imports A's session id, and an id no one holds: both are imported under ids minted
    # for B, and the two answers have the same shape (nothing tells B that A holds the first)
    held = import_as(B, crafted_export(SESSION))
    free = import_as(B, crafted_export("nobody-holds-this"))
    assert held[0] == free[0] == 200
    assert held[1]["renamed"] == {SESSION: imported_id(runtime.store, B, SESSION)}
    assert free[1]["renamed"] == {"nobody-holds-this": imported_id(runtime.store, B, "nobody-holds-this")}

    def shape(answer: tuple[int, Any]) -> str:
        body = json.dumps(answer[1])
        for old, new in answer[1]["renamed"].items():
            body = body.replace(new, "<new>").replace(old, "<old>")
        return f"{answer[0]} {body}"

    assert shape(held) == shape(free)
    # and A's session is A's, untouched
    assert call("GET", f"/sessions/{SESSION}")[1]["name"] == "Pirate taxes"
    # Control: the rule that kept ids (what import did before; the trusted path still does)
    # tells the two apart, so the comparison above would catch an answer that depends on A
    with pytest.raises(ConflictError):
        import_sessions(runtime.store.lifecycle(), B, io.BytesIO(crafted_export(SESSION)), keep_ids=True)
    kept = import_sessions(runtime.store.lifecycle(), B, io.BytesIO(crafted_export("nobody-2")), keep_ids=True)
    assert kept.imported == ["nobody-2"]


def test_planting_answers_do_not_depend_on_whether_the_victims_row_exists(runtime: Runtime) -> None:
    # Check: the answer to a plant over A's existing row equals the answer over a row no one has
    over_a_row = import_as(B, crafted_export("1", {"memory_chat_1": "x"}))
    over_nothing = import_as(B, crafted_export("1", {"memory_nobody_1": "x"}))
    assert over_a_row[0] == over_nothing[0] < 500
    assert json.dumps(over_a_row[1]).replace("chat_1", "?") == json.dumps(over_nothing[1]).replace("nobody_1", "?")
    # Control: the comparison tells apart answers that differ (a block of another label answers otherwise)
    other = import_as(B, crafted_export("1", {"notes_1": "x"}))
    assert other[0] == 400 and json.dumps(other[1]) != json.dumps(over_nothing[1])


def test_leftover_rows_in_the_own_namespace_are_a_clean_conflict_not_a_storage_error(runtime: Runtime) -> None:
    # Check: a prompt frozen for B's session whose row is gone: importing that session (its id was
    # minted for B, so it is kept) is a 409 that imports nothing
    ghost = imported_id(runtime.store, B, "ghost")
    runtime.store.prompt_store(ghost, namespace=B).set_if_absent("left over")
    answer = import_as(B, crafted_export(ghost, {f"_system_prompt_{ghost}": "new"}))
    assert answer[0] == 409 and answer[1]["error"]["code"] == "conflict"
    assert call("GET", f"/sessions/{ghost}", tenant=B)[0] == 404
    # and so is a file naming it by its old id (which B's namespace renames to that same id)
    assert import_as(B, crafted_export("ghost", {"_system_prompt_ghost": "new"}))[0] == 409
    # Control: the storage layer does refuse the row (the check is not passing because nothing collides)
    with pytest.raises(ConflictError, match="rows stored under its id remain"):
        import_sessions(
            runtime.store.lifecycle(), B, io.BytesIO(crafted_export(ghost, {f"_system_prompt_{ghost}": "n"}))
        )
    # and the same leftover in another namespace does not stop B (rows of A's are not B's)
    runtime.store.prompt_store("ghost-2", namespace=A).set_if_absent("A's leftover")
    kept = import_sessions(
        runtime.store.lifecycle(),
        B,
        io.BytesIO(crafted_export("ghost-2", {"_system_prompt_ghost-2": "B's"})),
        keep_ids=True,
    )
    assert kept.imported == ["ghost-2"]


# ------------------------------------------------------------------ the DynamoDB prompt cache


def test_the_dynamodb_prompt_cache_keys_every_prompt_by_namespace_and_session(tmp_path: Path) -> None:
    import boto3
    from moto import mock_aws
    from threadloom.api.profile import parse_profile
    from threadloom.errors import ValidationError
    from threadloom.limits import DEFAULT_LIMITS

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="prompts",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        runtime = seeded_runtime(tmp_path, prompt_table="prompts")[0]
        runtime._profile = parse_profile(
            {"blocks": [{"label": "memory", "kind": "writable"}], "prompt_cache": {"backend": "dynamodb"}}
        )
        runtime._managers.clear()
        # Check: A's and B's prompts are items of their own namespace and session
        status, answer = import_as(B, crafted_export("b-session", {"memory_b-session": "B's memory"}))
        b_session = answer["renamed"]["b-session"]
        assert status == 200
        assert call("GET", f"/sessions/{SESSION}/system-prompt")[0] == 200
        assert call("GET", f"/sessions/{b_session}/system-prompt", tenant=B)[0] == 200
        items = {item["pk"]["S"]: item["prompt"]["S"] for item in dynamodb.scan(TableName="prompts")["Items"]}
        assert set(items) == {f"{A}#{SESSION}", f"{B}#{b_session}"}
        assert "B's memory" in items[f"{B}#{b_session}"] and "B's memory" not in items[f"{A}#{SESSION}"]
    # and the key splits one way only: session ids never hold '#', so no tenant's key is another's
    with pytest.raises(ValidationError):
        DEFAULT_LIMITS.check_id("b#c", "session id")
    # Control: were '#' allowed in ids, tenant "a#b" with session "c" and tenant "a" with session "b#c" would meet
    assert f"{'a#b'}#{'c'}" == f"{'a'}#{'b#c'}"
