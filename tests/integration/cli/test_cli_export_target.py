"""``threadloom export``: a path it cannot write is a one-line error (exit 5); an id named twice is written once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore

from tests.support.lifecycle import build_rich_session, manager_for
from tests.support.postgres import url_for, worker_database

NS = "tenant-a"
EXECUTABLE = Path(sys.executable).with_name("threadloom")


def run(*args: str, database: str, check_code: int = 0) -> subprocess.CompletedProcess[str]:
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "threadloom.cli"]
    done = subprocess.run(
        [*command, "--database", database, "--namespace", NS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == check_code, (done.returncode, done.stdout, done.stderr)
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[str]]:
    """A database of ``request.param`` holding two sessions of tenant-a; its URL and the ids."""
    store: Any
    if request.param == "postgres":
        store = request.getfixturevalue("postgres_store_factory")()  # an emptied, migrated per-worker database
        url = url_for(worker_database(request))
    else:
        store = SqliteStore(str(tmp_path / "ops.db"))
        url = f"sqlite:///{tmp_path / 'ops.db'}"
    manager = manager_for(store, NS, tmp_path / "skills")
    ids = [build_rich_session(manager, "Garden", subject="alice"), build_rich_session(manager, "Bob", subject="bob")]
    store.close()
    return url, ids


def test_an_output_path_it_cannot_write_is_one_line_and_exit_5(database: tuple[str, list[str]], tmp_path: Path) -> None:
    url, _ = database
    # A folder that does not exist
    missing = tmp_path / "no-such-folder" / "backup.jsonl"
    refused = run("export", "-o", str(missing), database=url, check_code=5)
    assert refused.stderr == f"threadloom: Cannot write {missing}: No such file or directory\n"
    assert refused.stdout == "" and not missing.parent.exists()
    # An existing folder, given with or without a trailing slash: refused, left as it was
    folder = tmp_path / "exports"
    folder.mkdir()
    for given in (str(folder), f"{folder}/"):
        refused = run("--json", "export", "-o", given, database=url, check_code=5)
        assert refused.stderr == f"threadloom: Cannot write {folder}: Is a directory\n"
        assert refused.stdout == "" and list(folder.iterdir()) == []
    assert list(tmp_path.rglob("*.partial")) == []


def test_a_session_named_twice_is_exported_once_and_imports(database: tuple[str, list[str]], tmp_path: Path) -> None:
    url, ids = database
    export_file = tmp_path / "twice.jsonl"
    report = as_json(run("--json", "export", ids[1], ids[0], ids[1], "-o", str(export_file), database=url))
    assert report["sessions"] == 2 and report["messages"] == 12
    target = f"sqlite:///{tmp_path / 'target.db'}"
    imported = as_json(run("--create", "--json", "import", "--keep-ids", str(export_file), database=target))
    assert imported["imported"] == [ids[1], ids[0]] and imported["messages"] == 12
