"""Knowledge entries through the HTTP lifecycle, through the real handler on SQLite and PostgreSQL.

What the model stored with ``set_context`` under a ``search`` block belongs to the tenant, so an export
carries it only when asked (``includeKnowledge``). Importing the file as another tenant writes the entries
into that tenant only, searchable at once, and says how many (``knowledgeEntriesImported``); the same file
again changes nothing (``knowledgeEntriesUnchanged``). A label the profile does not declare as a search
block is a 400, an entry the importer holds with other content a 409, a label past the tenant's quota a
409 ``quota_exceeded``: each before anything, session or entry, is written.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.runtime import Runtime

from tests.security.test_import_attacks import sealed
from tests.support.api import call, profile_runtime

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

QUOTA = 3
PROFILE = {
    "blocks": [{"label": "knowledge", "kind": "search", "description": "Facts worth finding"}],
    "compaction": {"enabled": False},
    "limits": {"max_entries_per_tenant": QUOTA},
}
SOURCE, TARGET = "source-tenant", "target-tenant"
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(params=["sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    yield from profile_runtime(request, tmp_path, PROFILE)


def new_session(tenant: str) -> str:
    status, created = call("POST", "/sessions", {"name": "notes"}, tenant=tenant)
    assert status == 201, created
    return str(created["id"])


def remember(tenant: str, session: str, title: str, content: str) -> None:
    entry = {"input": {"label": "knowledge", "content": content, "metadata": {"title": title}}}
    status, body = call("POST", f"/sessions/{session}/tools/set_context", entry, tenant=tenant)
    assert (status, body["isError"]) == (200, False), body


def entries(tenant: str) -> dict[str, str]:
    status, page = call("GET", "/knowledge/knowledge", tenant=tenant)
    assert status == 200, page
    return {entry["key"]: entry["content"] for entry in page["entries"]}


def search(tenant: str, session: str, query: str) -> str:
    body = {"input": {"label": "knowledge", "query": query}}
    status, found = call("POST", f"/sessions/{session}/tools/search_context", body, tenant=tenant)
    assert status == 200, found
    return str(found["output"])


def sessions(tenant: str) -> list[str]:
    status, page = call("GET", "/sessions", tenant=tenant)
    assert status == 200, page
    return [session["id"] for session in page["sessions"]]


def export(tenant: str, session: str, **query: str) -> str:
    status, text = call("GET", f"/sessions/{session}/export", tenant=tenant, query=query or None)
    assert status == 200, text
    return str(text)


def knowledge_records(text: str) -> list[dict[str, Any]]:
    return [record for line in text.splitlines() if (record := json.loads(line))["type"] == "knowledge_entry"]


def reimport(text: str, tenant: str = TARGET) -> tuple[int, Any]:
    return call("POST", "/sessions/import", raw_body=text.encode(), tenant=tenant, headers=NDJSON)


def resealed(text: str, change: Any) -> str:
    """The file's records with ``change`` applied to each knowledge entry, sealed again (a correct footer)."""
    body = [json.loads(line) for line in text.splitlines()][:-1]
    for record in body:
        if record["type"] == "knowledge_entry":
            change(record)
    return sealed(body).decode()


def source_file() -> tuple[str, str]:
    """A session of the source tenant, its tenant's two entries, and the export with them."""
    session = new_session(SOURCE)
    remember(SOURCE, session, "Harbour fees", "Harbour fees are paid at the marina office.")
    remember(SOURCE, session, "Tides", "High tide is at noon on Sundays.")
    return session, export(SOURCE, session, includeKnowledge="true")


def test_an_export_carries_the_tenants_knowledge_only_when_asked(runtime: Runtime) -> None:
    # Given two entries of the source tenant and one of another tenant
    session, text = source_file()
    remember(TARGET, new_session(TARGET), "Gulls", "Gulls follow the ferry.")
    # When the session is exported without, then with includeKnowledge
    plain = export(SOURCE, session)
    with_shared_blocks = export(SOURCE, session, includeSharedBlocks="true")
    # Then only the file asked for carries the entries, the source tenant's own, with their times
    assert knowledge_records(plain) == [] and knowledge_records(with_shared_blocks) == []
    carried = knowledge_records(text)
    assert [(r["label"], r["key"], r["content"]) for r in carried] == [
        ("knowledge", "harbour-fees", "Harbour fees are paid at the marina office."),
        ("knowledge", "tides", "High tide is at noon on Sundays."),
    ]
    assert all(r["created_at"].endswith("Z") and r["updated_at"] >= r["created_at"] for r in carried)
    assert "Gulls" not in text
    # The footer counts the entries' lines like every other
    footer = json.loads(text.splitlines()[-1])
    assert footer["type"] == "footer" and footer["records"] == len(text.splitlines())


def test_an_import_writes_the_entries_into_the_importing_tenant_only(runtime: Runtime) -> None:
    # Given the source tenant's export with its two entries, and the target tenant's own entry
    _, text = source_file()
    remember(TARGET, new_session(TARGET), "Gulls", "Gulls follow the ferry.")
    # When the target tenant imports it
    status, answer = reimport(text)
    # Then the answer counts the entries, and the target tenant lists them next to its own
    assert status == 200, answer
    assert len(answer["imported"]) == 1
    assert (answer["knowledgeEntriesImported"], answer["knowledgeEntriesUnchanged"]) == (2, 0)
    assert entries(TARGET) == {
        "gulls": "Gulls follow the ferry.",
        "harbour-fees": "Harbour fees are paid at the marina office.",
        "tides": "High tide is at noon on Sundays.",
    }
    # And its sessions find them at once, the imported one as any other
    imported = answer["imported"][0]
    assert "[harbour-fees]" in search(TARGET, imported, "marina")
    assert "[tides]" in search(TARGET, new_session(TARGET), "noon")
    # The source tenant's entries are untouched, and it never sees the target's
    assert entries(SOURCE) == {
        "harbour-fees": "Harbour fees are paid at the marina office.",
        "tides": "High tide is at noon on Sundays.",
    }
    # The same file again writes nothing, and says the entries were already there
    status, again = reimport(text)
    assert status == 200, again
    assert again["imported"] == [] and len(again["unchanged"]) == 1
    assert (again["knowledgeEntriesImported"], again["knowledgeEntriesUnchanged"]) == (0, 2)
    assert len(entries(TARGET)) == 3 and len(sessions(TARGET)) == 3


def test_an_import_without_entries_reports_none(runtime: Runtime) -> None:
    session = new_session(SOURCE)
    remember(SOURCE, session, "Tides", "High tide is at noon on Sundays.")
    status, answer = reimport(export(SOURCE, session))
    assert status == 200, answer
    assert (answer["knowledgeEntriesImported"], answer["knowledgeEntriesUnchanged"]) == (0, 0)
    assert entries(TARGET) == {}


def test_a_label_that_is_not_a_search_block_of_the_profile_is_refused(runtime: Runtime) -> None:
    # Given an export whose entries name a block the profile does not declare as searchable
    _, text = source_file()
    planted = resealed(text, lambda record: record.update(label="secrets"))
    # When another tenant imports it
    status, answer = reimport(planted)
    # Then it is a 400 with the error envelope, naming the label, and nothing was imported
    assert status == 400, answer
    assert answer["error"]["code"] == "bad_request"
    message = answer["error"]["message"]
    assert "'secrets'" in message and "not a search block of this deployment's profile" in message
    assert "(search blocks: knowledge)" in message and "nothing was imported" in message
    assert sessions(TARGET) == [] and entries(TARGET) == {}


def test_an_export_carries_only_the_profiles_search_blocks_so_its_import_takes_it(runtime: Runtime) -> None:
    # Given an entry under a label the profile no longer declares (the API neither lists nor takes it)
    retired = runtime.store.search_provider(scope=SOURCE)
    retired.init("retired")
    retired.set("old-fact", "A fact from a block the profile dropped.")
    assert call("GET", "/knowledge/retired", tenant=SOURCE)[0] == 404
    # When the tenant exports a session with its knowledge
    _, text = source_file()
    # Then the file carries the profile's search blocks only
    assert [record["label"] for record in knowledge_records(text)] == ["knowledge", "knowledge"]
    assert "old-fact" not in text
    # And the HTTP import takes the file the HTTP export made
    status, answer = reimport(text)
    assert status == 200, answer
    assert answer["knowledgeEntriesImported"] == 2


def test_an_entry_held_with_other_content_is_a_conflict_and_nothing_is_imported(runtime: Runtime) -> None:
    # Given the target tenant's own entry under a key the file also carries, with other content
    _, text = source_file()
    own = new_session(TARGET)
    remember(TARGET, own, "Tides", "Low tide is at noon on Sundays.")
    # When it imports the file
    status, answer = reimport(text)
    # Then it is a 409 naming the entry, and neither the session nor the other entry was written
    assert status == 409, answer
    assert answer["error"]["code"] == "conflict"
    assert "'tides'" in answer["error"]["message"] and "nothing was imported" in answer["error"]["message"]
    assert sessions(TARGET) == [own]
    assert entries(TARGET) == {"tides": "Low tide is at noon on Sundays."}


def test_an_import_past_the_tenants_quota_is_refused(runtime: Runtime) -> None:
    # Given the target tenant holding two entries of its quota of three, and a file with two more
    _, text = source_file()
    own = new_session(TARGET)
    remember(TARGET, own, "Gulls", "Gulls follow the ferry.")
    remember(TARGET, own, "Buoys", "Buoys mark the channel.")
    # When it imports the file
    status, answer = reimport(text)
    # Then it is a 409 quota_exceeded, and nothing was written
    assert status == 409, answer
    assert answer["error"]["code"] == "quota_exceeded"
    assert f"({QUOTA})" in answer["error"]["message"]
    assert sessions(TARGET) == [own] and sorted(entries(TARGET)) == ["buoys", "gulls"]
