"""Export/import: lossless round trips on each backend and across them, idempotence, atomic refusals."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.errors import ConflictError
from threadloom.lifecycle import (
    ExportFormatError,
    UnsupportedVersionError,
    export_sessions,
    import_sessions,
    write_export,
)
from threadloom.limits import DEFAULT_LIMITS

from tests.support.lifecycle import build_rich_session, manager_for, observable, text

NS = "tenant-a"


def export_bytes(store: Any, session_ids: list[str], namespace: str = NS) -> bytes:
    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), namespace, session_ids, buffer)
    return buffer.getvalue()


def build_pair(store: Any, tmp_path: Path) -> tuple[Any, list[str]]:
    """A rich session and a fork of it (so the export holds a parent link between sessions)."""
    manager = manager_for(store, NS, tmp_path / "skills")
    sid = build_rich_session(manager, "Garden", subject="alice")
    fork = manager.fork(sid, f"{sid}-a1", "Garden fork")
    manager.append(fork.id, text("fork-q", "user", "And lemons?"))
    return manager, [sid, fork.id]


def row_counts(store: Any) -> dict[str, int]:
    tables = ("sessions", "session_heads", "messages", "compactions", "context_blocks", "loaded_skills")
    with store.database.read() as tx:
        return {table: int(tx.query(f"SELECT COUNT(*) FROM threadloom_{table}")[0][0]) for table in tables}


def test_round_trip_on_one_backend_restores_everything(store: Any, tmp_path: Path) -> None:
    # Given a session with branches, an overlay, blocks, a loaded skill, a frozen prompt, usage, and a fork of it
    manager, ids = build_pair(store, tmp_path)
    before = {sid: observable(manager, sid) for sid in ids}
    data = export_bytes(store, ids)
    # When both are deleted and the export imported back
    for sid in ids:
        assert manager.delete(sid)
    report = import_sessions(store.lifecycle(), NS, io.BytesIO(data))
    # Then the same ids come back with identical histories (every leaf), branches, overlays, blocks and usage
    assert report.imported == ids and report.unchanged == []
    fresh = manager_for(store, NS, tmp_path / "skills")
    assert {sid: observable(fresh, sid) for sid in ids} == before
    # And appending afterwards continues the tree where it was
    fresh.append(ids[0], text("after", "user", "More trees?"))
    assert fresh.get_history(ids[0])[-2]["id"] == f"{ids[0]}-a2b"


@pytest.mark.postgres
def test_sqlite_to_postgres_to_sqlite_is_identical(postgres_store_factory: Any, tmp_path: Path) -> None:
    # Given sessions built on the SQLite default
    laptop = SqliteStore(str(tmp_path / "laptop.db"))
    manager, ids = build_pair(laptop, tmp_path)
    expected = {sid: observable(manager, sid) for sid in ids}
    # When an operator moves them to PostgreSQL and back to another SQLite file, keeping the ids
    cloud = postgres_store_factory()
    import_sessions(cloud.lifecycle(), NS, io.BytesIO(export_bytes(laptop, ids)), keep_ids=True)
    on_cloud = {sid: observable(manager_for(cloud, NS, tmp_path / "skills"), sid) for sid in ids}
    back = SqliteStore(str(tmp_path / "back.db"))
    import_sessions(back.lifecycle(), NS, io.BytesIO(export_bytes(cloud, ids)), keep_ids=True)
    on_back = {sid: observable(manager_for(back, NS, tmp_path / "skills"), sid) for sid in ids}
    # Then every backend shows the same sessions
    assert on_cloud == expected
    assert on_back == expected
    # And the file written by PostgreSQL equals the one written by SQLite, record for record
    assert _records(export_bytes(cloud, ids)) == _records(export_bytes(laptop, ids))
    laptop.close()
    back.close()


def _records(data: bytes) -> list[dict[str, Any]]:
    """The records without the header's timestamp and the footer's checksum (which covers that timestamp)."""
    lines = [json.loads(line) for line in data.splitlines()]
    return lines[1:-1]


def test_importing_twice_changes_nothing(store: Any, tmp_path: Path) -> None:
    _, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids)
    counts = row_counts(store)
    # When the export is imported into the database it came from
    report = import_sessions(store.lifecycle(), NS, io.BytesIO(data))
    # Then every session is reported unchanged and no row was added
    assert report.imported == [] and report.unchanged == ids
    assert row_counts(store) == counts


def test_a_session_present_with_other_content_is_a_conflict(store: Any, tmp_path: Path) -> None:
    manager, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids)
    manager.delete(ids[1])
    manager.append(ids[0], text("later", "user", "Changed since the export"))
    counts = row_counts(store)
    with pytest.raises(ConflictError, match="different content"):
        import_sessions(store.lifecycle(), NS, io.BytesIO(data))
    assert row_counts(store) == counts  # the fork was not imported either


def test_sessions_of_another_namespace_are_imported_under_new_ids(store: Any, tmp_path: Path) -> None:
    # Given tenant-a's session and its fork, exported
    manager, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids)
    # When tenant-b imports the file
    report = import_sessions(store.lifecycle(), "tenant-b", io.BytesIO(data))
    # Then both get ids minted for tenant-b, the same on a second import (which changes nothing)
    assert list(report.renamed) == ids and report.imported == [report.renamed[sid] for sid in ids]
    again = import_sessions(store.lifecycle(), "tenant-b", io.BytesIO(data))
    assert again.imported == [] and again.unchanged == report.imported and again.renamed == report.renamed
    theirs = manager_for(store, "tenant-b", tmp_path / "skills")
    # and the fork's parent follows its parent, blocks and prompt follow their session
    original, fork = (report.renamed[sid] for sid in ids)
    fork_info = theirs.get(fork)
    assert fork_info is not None and fork_info.parent_session_id == original
    renamed = {sid: observable(theirs, report.renamed[sid]) for sid in ids}
    assert {key: value for key, value in renamed[ids[0]].items() if key != "info"} == {
        key: value for key, value in observable(manager, ids[0]).items() if key != "info"
    }
    # And tenant-a's sessions are untouched
    assert manager.get(ids[0]) is not None and manager.get(ids[1]) is not None


def test_an_operator_keeping_ids_is_told_an_id_is_held_elsewhere(store: Any, tmp_path: Path) -> None:
    _, ids = build_pair(store, tmp_path)
    with pytest.raises(ConflictError, match="held by namespace 'tenant-a'"):
        import_sessions(store.lifecycle(), "tenant-b", io.BytesIO(export_bytes(store, ids)), keep_ids=True)


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_a_truncated_file_imports_nothing(store: Any, tmp_path: Path, cut: float) -> None:
    manager, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids)
    for sid in ids:
        manager.delete(sid)
    counts = row_counts(store)
    with pytest.raises(ExportFormatError, match=r"truncated|cut short"):
        import_sessions(store.lifecycle(), NS, io.BytesIO(data[: int(len(data) * cut)]))
    assert row_counts(store) == counts


def test_a_tampered_file_imports_nothing(store: Any, tmp_path: Path) -> None:
    manager, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids).replace(b"Twelve of them.", b"Eleven of them.")
    for sid in ids:
        manager.delete(sid)
    counts = row_counts(store)
    with pytest.raises(ExportFormatError, match="checksum mismatch"):
        import_sessions(store.lifecycle(), NS, io.BytesIO(data))
    assert row_counts(store) == counts


def test_a_dropped_line_is_detected(store: Any, tmp_path: Path) -> None:
    _, ids = build_pair(store, tmp_path)
    lines = export_bytes(store, ids).splitlines(keepends=True)
    del lines[3]
    with pytest.raises(ExportFormatError):
        import_sessions(store.lifecycle(), "tenant-z", io.BytesIO(b"".join(lines)))


def test_a_newer_format_version_is_refused_with_a_clear_error(store: Any) -> None:
    header = {"type": "header", "format": "threadloom-export", "version": 2, "exported_at": "2030-01-01T00:00:00.000Z"}
    with pytest.raises(UnsupportedVersionError, match="format version 2, newer than this Threadloom reads"):
        import_sessions(store.lifecycle(), NS, io.BytesIO((json.dumps(header) + "\n").encode()))


def _resealed(store: Any, ids: list[str], change: Any) -> bytes:
    """An export whose snapshot was changed before writing, so the checksum is valid and only limits can refuse it."""
    snapshots = [change(store.lifecycle().read_session(NS, sid)) for sid in ids]
    buffer = io.BytesIO()
    write_export(snapshots, buffer, namespace=NS)
    return buffer.getvalue()


def test_a_message_over_the_api_limit_is_refused(store: Any, tmp_path: Path) -> None:
    manager, ids = build_pair(store, tmp_path)
    data = export_bytes(store, ids[:1])
    manager.delete(ids[0])
    manager.delete(ids[1])
    with pytest.raises(ExportFormatError, match="the limit is 60 bytes"):
        import_sessions(
            store.lifecycle(), NS, io.BytesIO(data), limits=DEFAULT_LIMITS.with_overrides({"max_message_bytes": 60})
        )
    assert manager.count() == 0


def test_text_rules_and_tree_rules_are_enforced(store: Any, tmp_path: Path) -> None:
    _, ids = build_pair(store, tmp_path)

    def with_nul(snapshot: Any) -> Any:
        first = snapshot.messages[0]
        broken = dataclasses.replace(first, message={**first.message, "parts": [{"type": "text", "text": "a\x00b"}]})
        return dataclasses.replace(snapshot, messages=[broken, *snapshot.messages[1:]])

    def orphan(snapshot: Any) -> Any:
        last = snapshot.messages[-1]
        return dataclasses.replace(
            snapshot, messages=[*snapshot.messages[:-1], dataclasses.replace(last, parent_id="nope")]
        )

    def huge_usage(snapshot: Any) -> Any:
        return dataclasses.replace(snapshot, input_tokens=10**16)

    for change, expected in (
        (with_nul, "NUL"),
        (orphan, "is not before it"),
        (huge_usage, "inputTokens must be an integer from 0 to"),
    ):
        with pytest.raises(ExportFormatError, match=expected):
            import_sessions(store.lifecycle(), "tenant-new", io.BytesIO(_resealed(store, ids, change)))
