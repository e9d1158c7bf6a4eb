"""``--database``: only ``migrate`` or ``--create`` make a new database, and global options work after the command.

Issue 30: a wrong or relative path silently created an empty database and answered "No sessions"
(exit 0), and ``threadloom import demo.jsonl --database ...`` failed with "No such option".
Through the installed entry point, in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from threadloom.cli import global_options_first

from tests.support.lifecycle import build_rich_session, manager_for

EXECUTABLE = Path(sys.executable).with_name("threadloom")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(EXECUTABLE)] if EXECUTABLE.exists() else [sys.executable, "-m", "threadloom.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd)


def test_a_missing_database_is_refused_and_not_created(tmp_path: Path) -> None:
    for path in ("missing.db", str(tmp_path / "missing.db"), f"sqlite:///{tmp_path}/typo/threadloom.db"):
        done = run("--database", path, "sessions", "list", cwd=tmp_path)
        assert done.returncode == 3, (done.stdout, done.stderr)
        assert "No database at" in done.stderr and "migrate" in done.stderr and "--create" in done.stderr
        assert str(tmp_path) in done.stderr  # a relative path is shown resolved
    assert sorted(item.name for item in tmp_path.iterdir()) == []
    # The default (make serve's file) is no exception.
    done = run("sessions", "list", cwd=tmp_path)
    assert done.returncode == 3 and "No database at .threadloom/threadloom.db" in done.stderr
    assert not (tmp_path / ".threadloom").exists()


def test_migrate_and_create_make_a_database(tmp_path: Path) -> None:
    done = run("--database", "made.db", "migrate", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "made.db").is_file()
    done = run("--database", "other.db", "--create", "--json", "sessions", "list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [] and (tmp_path / "other.db").is_file()
    done = run("--database", "made.db", "--json", "sessions", "list", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout) == []


def test_global_options_are_accepted_after_the_command(tmp_path: Path) -> None:
    from threadloom import SqliteStore

    store = SqliteStore(str(tmp_path / "source.db"))
    session_id = build_rich_session(manager_for(store, "local", tmp_path / "skills"), "Garden")
    store.close()
    done = run("export", "-o", "backup.jsonl", "--database", "source.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run("import", "backup.jsonl", "--database", "copy.db", "--create", "--json", "--keep-ids", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == [session_id]
    done = run("sessions", "list", "--json", "-d", "copy.db", "-n", "local", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [item["id"] for item in json.loads(done.stdout)] == [session_id]
    done = run("sessions", "list", "--database=copy.db", "--namespace=other", "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout) == []


def test_global_options_first_moves_only_global_options_before_a_double_dash() -> None:
    assert global_options_first(["import", "f.jsonl", "--database", "x.db", "--json"]) == [
        "--database",
        "x.db",
        "--json",
        "import",
        "f.jsonl",
    ]
    assert global_options_first(["-n", "a", "sessions", "show", "s1", "-d", "x.db"]) == [
        "-n",
        "a",
        "-d",
        "x.db",
        "sessions",
        "show",
        "s1",
    ]
    assert global_options_first(["migrate", "--database-url", "postgresql://h/db"]) == [
        "migrate",
        "--database-url",
        "postgresql://h/db",
    ]
    assert global_options_first(["delete", "--", "--json"]) == ["delete", "--", "--json"]
