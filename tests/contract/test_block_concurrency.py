"""Two processes (two Lambdas) edit one subject block at the same moment: no edit is lost, on every backend.

Each process opens its own store over the same database and appends through the model tool; the
appends are merged in the order they commit, so every line is there once, each process's in order.
Replacements based on the same version cannot both win: exactly one lands, the other is refused.
"""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING, Any

from threadloom import PostgresStore, SqliteStore
from threadloom.core.manager import SessionManager
from threadloom.errors import StaleVersionError
from threadloom.records import BlockChange

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

LINES_PER_PROCESS = 25


def _open(backend: str, where: str) -> Any:
    return SqliteStore(where) if backend == "sqlite" else PostgresStore(where)


def _manager(store: Any) -> SessionManager:
    return SessionManager(store, namespace="tenant-a").with_context("memory", scope="subject")


def _append_lines(backend: str, where: str, session_id: str, tag: str, start: Any) -> list[str]:
    """One process: wait for the other, then append LINES_PER_PROCESS lines through set_context."""
    store = _open(backend, where)
    try:
        tool = _manager(store).get_session(session_id).tools()["set_context"]
        start.wait(timeout=60)
        return [
            tool.execute({"label": "memory", "content": f"{tag}-{index}", "action": "append"})
            for index in range(LINES_PER_PROCESS)
        ]
    finally:
        store.close()


def _replace_once(backend: str, where: str, session_id: str, tag: str, start: Any) -> str:
    store = _open(backend, where)
    try:
        session = _manager(store).get_session(session_id)
        start.wait(timeout=60)
        try:
            session.replace_context_block("memory", tag, based_on_version=1, change=BlockChange(source="http"))
        except StaleVersionError as stale:
            return f"stale at {stale.current_version}"
        return "written"
    finally:
        store.close()


def _where(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / "threadloom.db")
    from tests.support.postgres import url_for, worker_database

    request.getfixturevalue("postgres_store_factory")  # the worker's database, emptied
    return url_for(worker_database(request))


def test_two_processes_appending_to_one_subject_block_lose_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = _where(backend, tmp_path, request)
    store = _open(backend, where)
    manager = _manager(store)
    one = manager.create_session("one", subject_id="alice")
    two = manager.create_session("two", subject_id="alice")
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Barrier(2)
    with context.Pool(2) as pool:
        runs = [
            pool.apply_async(_append_lines, (backend, where, session_id, tag, start))
            for session_id, tag in ((one.id, "one"), (two.id, "two"))
        ]
        results = [run.get(timeout=120) for run in runs]
    assert all(result.startswith("Written to memory") for outcome in results for result in outcome), results
    lines = manager.get_session(one.id).read_context_block("memory").content.split("\n")  # type: ignore[union-attr]
    assert sorted(lines) == sorted(f"{tag}-{index}" for tag in ("one", "two") for index in range(LINES_PER_PROCESS))
    for tag in ("one", "two"):
        assert [line for line in lines if line.startswith(tag)] == [f"{tag}-{i}" for i in range(LINES_PER_PROCESS)]
    # and every append is a version of its own
    history, more = manager.get_session(two.id).context_history("memory", limit=200)
    assert [version.version for version in history] == list(range(2 * LINES_PER_PROCESS, 0, -1)) and not more
    store.close()


def test_two_processes_replacing_from_one_version_cannot_both_win(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = _where(backend, tmp_path, request)
    store = _open(backend, where)
    manager = _manager(store)
    one = manager.create_session("one", subject_id="alice")
    two = manager.create_session("two", subject_id="alice")
    manager.get_session(one.id).replace_context_block("memory", "v1")
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Barrier(2)
    with context.Pool(2) as pool:
        runs = [
            pool.apply_async(_replace_once, (backend, where, session_id, tag, start))
            for session_id, tag in ((one.id, "from one"), (two.id, "from two"))
        ]
        outcomes = sorted(run.get(timeout=120) for run in runs)
    assert outcomes == ["stale at 2", "written"]
    stored = manager.get_session(one.id).read_context_block("memory")
    assert stored is not None and stored.version == 2 and stored.content in ("from one", "from two")
    store.close()
