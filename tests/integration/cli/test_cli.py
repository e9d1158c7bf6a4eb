"""The ``threadloom`` command through its installed entry point, in a subprocess, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore

from tests.support.lifecycle import build_rich_session, manager_for
from tests.support.postgres import url_for, worker_database

NS = "tenant-a"
EXECUTABLE = Path(sys.executable).with_name("threadloom")


def run(
    *args: str, database: str | None = None, check_code: int | None = 0, namespace: str = NS
) -> subprocess.CompletedProcess[str]:
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "threadloom.cli"]
    options = ["--database", database] if database else []
    done = subprocess.run(
        [*command, *options, "--namespace", namespace, *args], capture_output=True, text=True, timeout=60, check=False
    )
    if check_code is not None:
        assert done.returncode == check_code, (done.returncode, done.stdout, done.stderr)
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[str, list[str]]:
    """A SQLite file with two rich sessions of alice and one of bob in tenant-a."""
    path = tmp_path / "ops.db"
    store = SqliteStore(str(path))
    manager = manager_for(store, NS, tmp_path / "skills")
    ids = [
        build_rich_session(manager, "Alice garden", subject="alice"),
        build_rich_session(manager, "Alice kitchen", subject="alice", word="lemon"),
        build_rich_session(manager, "Bob", subject="bob", word="papaya"),
    ]
    store.close()
    return f"sqlite:///{path}", ids


def test_sessions_list_show_and_hold(seeded: tuple[str, list[str]]) -> None:
    database, ids = seeded
    listed = as_json(run("--json", "sessions", "list", database=database))
    assert sorted(item["id"] for item in listed) == sorted(ids)
    assert {item["subject_id"] for item in listed} == {"alice", "bob"}
    shown = as_json(run("--json", "sessions", "show", ids[0], database=database))
    assert shown["tree"] == {
        "messages": 6,
        "roots": 1,
        "leaves": 2,
        "branch_points": 1,
        "latest_leaf": f"{ids[0]}-a2b",
        "latest_path_length": 4,
    }
    assert len(shown["overlays"]) == 1 and shown["loaded_skills"] == ["skills:pirate"]
    assert shown["usage"] == {"input_tokens": 120, "output_tokens": 80, "estimated_cost": 0.25}
    assert shown["frozen_prompt_chars"] > 0 and [block["key"] for block in shown["blocks"]] == [f"memory_{ids[0]}"]
    human = run("sessions", "show", ids[0], database=database).stdout
    assert "Compaction overlays" in human and "skills:pirate" in human
    assert as_json(run("--json", "sessions", "hold", ids[2], database=database))["legal_hold"] is True
    missing = run("sessions", "show", "nope", database=database, check_code=3)
    assert "Session 'nope' not found" in missing.stderr and "Traceback" not in missing.stderr


def test_export_then_import_into_another_database_twice(seeded: tuple[str, list[str]], tmp_path: Path) -> None:
    database, ids = seeded
    export_file = tmp_path / "all.jsonl"
    report = as_json(run("--json", "export", "-o", str(export_file), database=database))
    assert report["sessions"] == 3 and report["messages"] == 18 and export_file.stat().st_size == report["bytes"]
    target = f"sqlite:///{tmp_path / 'target.db'}"
    # Another database has its own secret: the ids were not minted for it, so each gets one that was
    first = as_json(run("--create", "--json", "import", str(export_file), database=target))
    assert sorted(first["renamed"]) == sorted(ids) and first["messages"] == 18
    assert sorted(first["imported"]) == sorted(first["renamed"].values()) and not set(first["imported"]) & set(ids)
    again = as_json(run("--json", "import", str(export_file), database=target))
    assert again["imported"] == [] and sorted(again["unchanged"]) == sorted(first["imported"])
    assert again["renamed"] == first["renamed"]
    text = run("import", str(export_file), database=target).stdout
    assert "Imported 0 sessions (0 messages); 3 already present and unchanged." in text
    assert "Renamed 3 sessions (ids not minted for this namespace):" in text
    assert f"{ids[0]} -> {first['renamed'][ids[0]]}" in text
    # An operator copying a database keeps the ids with --keep-ids
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    kept = as_json(run("--create", "--json", "import", "--keep-ids", str(export_file), database=copy))
    assert sorted(kept["imported"]) == sorted(ids) and kept["renamed"] == {}


def test_bad_files_exit_with_invalid_input_and_import_nothing(seeded: tuple[str, list[str]], tmp_path: Path) -> None:
    database, ids = seeded
    export_file = tmp_path / "one.jsonl"
    run("export", ids[0], "-o", str(export_file), database=database)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_bytes(export_file.read_bytes()[:-40])
    target = f"sqlite:///{tmp_path / 'target.db'}"
    refused = run("--create", "import", str(truncated), database=target, check_code=5)
    assert "truncated" in refused.stderr
    assert as_json(run("--json", "sessions", "list", database=target)) == []
    assert run("import", str(tmp_path / "absent.jsonl"), database=target, check_code=5).stderr
    # A session changed since the export is a conflict (exit 4)
    run("delete", ids[1], database=database)
    conflict = run("import", str(export_file), database=f"{database}", check_code=0)
    assert "already present and unchanged" in conflict.stdout
    unknown = run("export", "nope", "-o", str(tmp_path / "x.jsonl"), database=database, check_code=3)
    assert "not found" in unknown.stderr and not (tmp_path / "x.jsonl").exists()


def test_delete_and_erase_subject_report_what_went(seeded: tuple[str, list[str]]) -> None:
    database, ids = seeded
    deleted = as_json(run("--json", "delete", ids[2], database=database))
    assert deleted["counts"]["sessions"] == 1 and deleted["counts"]["messages"] == 6
    run("delete", ids[2], database=database, check_code=3)
    receipt = as_json(run("--json", "erase-subject", "alice", database=database))
    assert receipt["counts"]["sessions"] == 2 and receipt["counts"]["messages"] == 12
    assert receipt["counts"]["prompts"] == 2 and receipt["digest"].startswith("sha256:")
    again = as_json(run("--json", "erase-subject", "alice", database=database))
    assert not any(again["counts"].values())
    assert as_json(run("--json", "sessions", "list", database=database)) == []


def test_retention_sweep_dry_run_then_for_real(seeded: tuple[str, list[str]], tmp_path: Path) -> None:
    database, ids = seeded
    store = SqliteStore(database.removeprefix("sqlite:///"))
    old = (datetime.now(UTC) - timedelta(days=45)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    with store.database.write() as tx:
        tx.execute(
            "UPDATE threadloom_sessions SET updated_at = :old WHERE id IN (:a, :b)",
            {"old": old, "a": ids[0], "b": ids[1]},
        )
    store.registry(NS).set_legal_hold(ids[1], True)
    store.close()
    refused = run("retention", "sweep", database=database, check_code=2)
    assert "no retention period" in refused.stderr
    dry = as_json(run("--json", "retention", "sweep", "--dry-run", "--inactive-days", "30", database=database))
    assert [item["id"] for item in dry["sessions"]] == [ids[0]] and dry["dry_run"] is True
    profile = tmp_path / "profile.yaml"
    profile.write_text("retention:\n  inactive_days: 30\n", encoding="utf-8")
    swept = as_json(run("--json", "retention", "sweep", "--profile", str(profile), database=database))
    assert [item["id"] for item in swept["sessions"]] == [ids[0]] and swept["counts"]["messages"] == 6
    left = as_json(run("--json", "sessions", "list", database=database))
    assert sorted(item["id"] for item in left) == sorted(ids[1:])


def test_usage_errors_exit_2_and_help_lists_every_command() -> None:
    help_text = run("--help").stdout
    commands = ("sessions", "knowledge", "export", "import", "delete", "erase-subject", "retention", "migrate", "serve")
    for command in commands:
        assert command in help_text
    assert run("sessions", "frobnicate", check_code=2).returncode == 2
    assert "--database must be" in run("--database", "mysql://x", "sessions", "list", check_code=5).stderr


def test_migrate_a_sqlite_file(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'new.db'}"
    first = run("migrate", database=database).stdout
    assert "applied 0001_initial.sql" in first and "0003_lifecycle.sql" in first
    assert "nothing to do" in run("migrate", database=database).stdout


@pytest.mark.postgres
def test_move_a_laptop_database_to_postgresql(
    seeded: tuple[str, list[str]], tmp_path: Path, postgres_store_factory: Any, request: pytest.FixtureRequest
) -> None:
    database, ids = seeded
    postgres_store_factory()  # an emptied, migrated per-worker database
    cloud = url_for(worker_database(request))
    export_file = tmp_path / "laptop.jsonl"
    run("export", "-o", str(export_file), database=database)
    moved = as_json(run("--json", "import", "--keep-ids", str(export_file), database=cloud))
    assert sorted(moved["imported"]) == sorted(ids)
    shown = as_json(run("--json", "sessions", "show", ids[0], database=cloud))
    assert shown["tree"]["messages"] == 6 and shown["loaded_skills"] == ["skills:pirate"]
    receipt = as_json(run("--json", "erase-subject", "bob", database=cloud))
    assert receipt["counts"]["sessions"] == 1


SHARED_PROFILE = """
blocks:
  - {label: memory, kind: writable, scope: subject}
  - {label: house, kind: writable, scope: tenant}
"""


@pytest.mark.parametrize("target_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_import_counts_the_shared_blocks_and_versions_it_wrote(
    seeded: tuple[str, list[str]], tmp_path: Path, target_backend: str, request: pytest.FixtureRequest
) -> None:
    database, ids = seeded
    store = SqliteStore(database.removeprefix("sqlite:///"))
    from threadloom.records import BlockChange

    for scope, subject, key, contents in (
        ("subject", "alice", "memory", ["Name: Alice", "Name: Alice\nLikes: lemons"]),
        ("tenant", "", "house", ["Answer in English"]),
    ):
        block = store.shared_block(key, scope=scope, namespace=NS, subject_id=subject)
        for content in contents:
            block.write(content, based_on_version=None, change=BlockChange(source="http"))
    store.close()
    profile = tmp_path / "shared.yaml"
    profile.write_text(SHARED_PROFILE, encoding="utf-8")
    export_file = tmp_path / "with-blocks.jsonl"
    exported = as_json(
        run("--json", "export", "--include-shared-blocks", "-o", str(export_file), ids[0], database=database)
    )
    assert exported["shared_blocks"] == 2
    if target_backend == "postgres":
        request.getfixturevalue("postgres_store_factory")()  # an emptied, migrated per-worker database
        target = url_for(worker_database(request))
    else:
        target = f"sqlite:///{tmp_path / 'target.db'}"
    # The file's three versions and one per block recording the import
    first = as_json(run("--create", "--json", "import", "--profile", str(profile), str(export_file), database=target))
    assert sorted(first["shared_blocks_imported"]) == ["subject/alice/memory", "tenant/house"]
    assert first["shared_block_versions"] == 3 + 2 and first["shared_blocks_unchanged"] == []
    text = run("import", "--profile", str(profile), str(export_file), database=target).stdout
    assert "Shared blocks: 0 subject and 0 tenant imported (0 versions), 2 unchanged." in text


KNOWLEDGE_PROFILE = """
blocks:
  - {label: facts, kind: search, description: What the agent looked up}
"""


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_knowledge_list_and_forget_in_one_namespace(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # Given a profile's search block holding three entries of tenant-a and one of tenant-b under the same key
    from threadloom.api.profile import load_profile
    from threadloom.api.runtime import Runtime, Settings

    store, database = _knowledge_store(tmp_path, backend, request)
    profile = tmp_path / "knowledge.yaml"
    profile.write_text(KNOWLEDGE_PROFILE, encoding="utf-8")
    runtime = Runtime(Settings(), profile=load_profile(profile), store=store)
    for namespace, titles in ((NS, ("Harbour fees", "Departures", "Weather")), ("tenant-b", ("Harbour fees",))):
        manager = runtime.manager(namespace)
        set_context = manager.get_session(manager.create("notes").id).tools()["set_context"]
        for title in titles:
            said = set_context.execute(
                {"label": "facts", "content": f"{namespace}: {title}", "metadata": {"title": title}}
            )
            assert said.startswith("Indexed"), said
    store.close()
    # When tenant-a lists them, then forgets one
    options = ("--profile", str(profile))
    listed = as_json(run("--json", "knowledge", "list", "facts", *options, database=database))
    assert [(entry["key"], entry["content"]) for entry in listed] == [
        ("departures", "tenant-a: Departures"),
        ("harbour-fees", "tenant-a: Harbour fees"),
        ("weather", "tenant-a: Weather"),
    ]
    first = as_json(run("--json", "knowledge", "list", "facts", "--limit", "2", *options, database=database))
    assert [entry["key"] for entry in first] == ["departures", "harbour-fees"]
    table = run("knowledge", "list", "facts", *options, database=database).stdout
    assert "harbour-fees" in table and "tenant-a: Weather" in table
    gone = run("knowledge", "forget", "facts", "harbour-fees", *options, database=database)
    assert gone.stdout.strip() == "Removed 'harbour-fees' from facts in namespace 'tenant-a'."
    # Then it is gone from tenant-a only, and what cannot be done says why with its exit code
    after = as_json(run("--json", "knowledge", "list", "facts", *options, database=database))
    assert [entry["key"] for entry in after] == ["departures", "weather"]
    again = run("knowledge", "forget", "facts", "harbour-fees", *options, database=database, check_code=3)
    assert "No entry 'harbour-fees' in block 'facts' of namespace 'tenant-a'" in again.stderr
    unknown = run("knowledge", "list", "knowledge", *options, database=database, check_code=3)
    assert "No searchable block 'knowledge' in this namespace" in unknown.stderr
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "threadloom.cli"]
    other = subprocess.run(
        [*command, "--database", database, "--namespace", "tenant-b", "--json", "knowledge", "list", "facts", *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert [(entry["key"], entry["content"]) for entry in json.loads(other.stdout)] == [
        ("harbour-fees", "tenant-b: Harbour fees")
    ]


FACTS_PROFILE = """
blocks:
  - {label: facts, kind: search, description: What the agent looked up}
"""
ONE_ENTRY_PROFILE = """
blocks:
  - {label: knowledge, kind: search, description: Searchable knowledge base}
limits: {max_entries_per_tenant: 1}
"""


def _knowledge_store(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> tuple[Any, str]:
    """An empty store of ``backend`` and the URL the CLI opens it by."""
    if backend == "postgres":
        store = request.getfixturevalue("postgres_store_factory")()  # an emptied, migrated per-worker database
        return store, url_for(worker_database(request))
    return SqliteStore(str(tmp_path / "knowledge.db")), f"sqlite:///{tmp_path / 'knowledge.db'}"


def _tenant_a_with_knowledge(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> str:
    """A database whose tenant-a has one session and two entries under ``knowledge``; its URL."""
    store, database = _knowledge_store(tmp_path, backend, request)
    store.registry(NS).create("notes")
    entries = store.search_provider(scope=NS)  # the tenant's entries, as the bundled profile's search block stores them
    entries.init("knowledge")
    entries.set("harbour-fees", "Harbour fees are paid at the office.")
    entries.set("departures", "The ferry leaves at nine.")
    store.close()
    return database


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_export_and_import_the_knowledge_into_another_namespace(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # Given tenant-a with one session and two entries in the bundled profile's search block
    database = _tenant_a_with_knowledge(tmp_path, backend, request)
    held = [("departures", "The ferry leaves at nine."), ("harbour-fees", "Harbour fees are paid at the office.")]

    def knowledge_of(namespace: str) -> list[tuple[str, str]]:
        listed = as_json(run("--json", "knowledge", "list", "knowledge", database=database, namespace=namespace))
        return [(entry["key"], entry["content"]) for entry in listed]

    # When it exports them with its sessions, then tenant-b imports the file twice
    export_file = tmp_path / "with-knowledge.jsonl"
    text = run("export", "--include-knowledge", "-o", str(export_file), database=database).stdout
    assert text.strip() == f"Exported 1 session (0 messages) and 2 knowledge entries to {export_file}."
    exported = as_json(run("--json", "export", "--include-knowledge", "-o", str(export_file), database=database))
    assert exported["knowledge_entries"] == 2 and "shared_blocks" not in exported
    both = run("export", "--include-shared-blocks", "--include-knowledge", "-o", str(export_file), database=database)
    assert f"(0 messages), 0 shared blocks and 2 knowledge entries to {export_file}." in both.stdout
    plain = as_json(run("--json", "export", "-o", str(tmp_path / "plain.jsonl"), database=database))
    assert "knowledge_entries" not in plain
    first = run("import", str(export_file), database=database, namespace="tenant-b").stdout
    assert "Knowledge entries: 2 imported, 0 unchanged." in first
    again = as_json(run("--json", "import", str(export_file), database=database, namespace="tenant-b"))
    assert again["knowledge_entries_imported"] == 0 and again["knowledge_entries_unchanged"] == 2
    text = run("import", str(export_file), database=database, namespace="tenant-b").stdout
    assert text.splitlines()[0].endswith("unchanged. Knowledge entries: 0 imported, 2 unchanged.")
    # Then tenant-b lists them, tenant-a still holds its own, and a file without entries says nothing of them
    assert knowledge_of("tenant-b") == held
    assert knowledge_of(NS) == held
    without = as_json(run("--json", "import", str(tmp_path / "plain.jsonl"), database=database, namespace="tenant-b"))
    assert "knowledge_entries_imported" not in without and "knowledge_entries_unchanged" not in without


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_import_refuses_knowledge_outside_the_profile_or_its_quota(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    # Given an export of tenant-a's two entries under the bundled profile's knowledge block
    database = _tenant_a_with_knowledge(tmp_path, backend, request)
    export_file = tmp_path / "with-knowledge.jsonl"
    run("export", "--include-knowledge", "-o", str(export_file), database=database)
    facts, one_entry = tmp_path / "facts.yaml", tmp_path / "one-entry.yaml"
    facts.write_text(FACTS_PROFILE, encoding="utf-8")
    one_entry.write_text(ONE_ENTRY_PROFILE, encoding="utf-8")
    # When tenant-b imports it under a profile whose search block is another label, or allows one entry
    other_label = run(
        "import", "--profile", str(facts), str(export_file), database=database, namespace="tenant-b", check_code=5
    )
    over_quota = run(
        "import", "--profile", str(one_entry), str(export_file), database=database, namespace="tenant-b", check_code=4
    )
    # Then each says why, and nothing of the file was imported
    assert other_label.stdout == ""
    assert (
        "under 'knowledge', which is not a search block of this deployment's profile (search blocks: facts); "
        "nothing was imported" in other_label.stderr
    )
    assert "would pass the most allowed (1); nothing was imported" in over_quota.stderr
    assert over_quota.stderr.startswith("threadloom: ")
    assert as_json(run("--json", "sessions", "list", database=database, namespace="tenant-b")) == []
    listed = run("--json", "knowledge", "list", "knowledge", database=database, namespace="tenant-b")
    assert as_json(listed) == []
