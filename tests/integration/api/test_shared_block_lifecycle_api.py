"""Shared blocks through the HTTP lifecycle (issue 26 item 6), through the real handler on SQLite and PostgreSQL.

An export asked for with ``includeSharedBlocks`` carries each block's history; the import into another tenant
names each block and counts the versions it stored. Erasing a subject removes their blocks and every version, and
the receipt counts them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.runtime import Runtime
from threadloom.records import BlockChange

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
SOURCE, TARGET = "source-tenant", "target-tenant"


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def write(store: Any, key: str, content: str, subject: str = "") -> None:
    scope = "subject" if subject else "tenant"
    block = store.shared_block(key, scope=scope, namespace=SOURCE, subject_id=subject)
    block.write(content, based_on_version=None, change=BlockChange(source="http"))


def test_the_import_answer_names_each_shared_block_and_counts_its_versions(runtime: Runtime) -> None:
    # Given a session of the source tenant's user, their memory in three versions and the house rules in one
    status, created = call("POST", "/sessions", {"name": "mine"}, tenant=SOURCE)
    assert status == 201, created
    for content in ("Name: Ada", "Name: Ada\nLikes: tea", "Name: Ada\nLikes: coffee"):
        write(runtime.store, "memory", content, subject=SOURCE)
    write(runtime.store, "house", "Answer in English")
    # When the session is exported with its shared blocks
    path = f"/sessions/{created['id']}/export"
    status, text = call("GET", path, tenant=SOURCE, query={"includeSharedBlocks": "true"})
    assert status == 200
    records = [json.loads(line) for line in text.splitlines()]
    versions = {
        (record["key"], record["version"]): record["content"] for record in records if record["type"] == "block_version"
    }
    # Then the file carries each block's whole history
    assert versions == {
        ("memory", 1): "Name: Ada",
        ("memory", 2): "Name: Ada\nLikes: tea",
        ("memory", 3): "Name: Ada\nLikes: coffee",
        ("house", 1): "Answer in English",
    }
    # And importing it as another tenant names each block written and counts the versions stored:
    # the file's four and one per block that records the import
    # (a service token acting for users: the file is the source user's, and the target tenant's token is not theirs)
    headers = {"content-type": "application/x-ndjson"}
    service = {"tenant": TARGET, "headers": headers, "scopes": ["threadloom/act-for-users"]}
    status, answer = call("POST", "/sessions/import", raw_body=text.encode(), **service)
    assert status == 200, answer
    assert len(answer["imported"]) == 1
    assert sorted(answer["sharedBlocksImported"]) == [f"subject/{SOURCE}/memory", "tenant/house"]
    assert answer["sharedBlocksUnchanged"] == [] and answer["sharedBlockVersions"] == 4 + 2
    # A second import writes nothing and says which blocks were already there
    status, again = call("POST", "/sessions/import", raw_body=text.encode(), **service)
    assert status == 200, again
    assert again["sharedBlocksImported"] == [] and again["sharedBlockVersions"] == 0
    assert sorted(again["sharedBlocksUnchanged"]) == [f"subject/{SOURCE}/memory", "tenant/house"]


def test_erasing_a_subject_over_http_removes_their_blocks_and_versions_and_counts_them(runtime: Runtime) -> None:
    # Given the user's memory in two versions, another user's memory and the tenant's house rules
    for content in ("Name: Ada", "Name: Ada\nLikes: tea"):
        write(runtime.store, "memory", content, subject="ada")
    write(runtime.store, "memory", "Name: Bo", subject="bo")
    write(runtime.store, "house", "Answer in English")
    # When an admin erases the subject
    status, receipt = call("POST", "/subjects/ada/erase", tenant=SOURCE, scopes=["threadloom/admin"])
    # Then the receipt counts the block and both versions, and only ada's are gone
    assert status == 200, receipt
    assert (receipt["counts"]["subject_blocks"], receipt["counts"]["block_versions"]) == (1, 2)
    store = runtime.store
    assert store.shared_block("memory", scope="subject", namespace=SOURCE, subject_id="ada").current() == (None, 0)
    assert store.shared_block("memory", scope="subject", namespace=SOURCE, subject_id="bo").current() == ("Name: Bo", 1)
    assert store.shared_block("house", scope="tenant", namespace=SOURCE, subject_id="").current()[1] == 1
