"""Export/import of knowledge entries (the tenant's ``search`` blocks), on both backends.

Opt-in per export, like shared blocks: the entries belong to the tenant, not to a session. An
import writes them into the importing namespace only, with their search terms and their times,
refuses labels that are not the profile's search blocks, keeps the tenant's quota, and is
idempotent (same content: unchanged; other content: a conflict, nothing written).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from threadloom.errors import ConflictError, QuotaExceededError, ValidationError
from threadloom.lifecycle import ExportFormatError, export_sessions, import_sessions, transfer
from threadloom.lifecycle.export_format import MAX_KNOWLEDGE_BYTES, MAX_KNOWLEDGE_ENTRIES, ExportReader
from threadloom.limits import DEFAULT_LIMITS

from tests.security.test_import_attacks import sealed
from tests.support.lifecycle import build_rich_session, manager_for

SOURCE = "tenant-a"
TARGET = "tenant-b"
LABELS = ["knowledge"]


def entries_of(store: Any, namespace: str, label: str = "knowledge") -> Any:
    provider = store.search_provider(scope=namespace)
    provider.init(label)
    return provider


def stored(store: Any, namespace: str, label: str = "knowledge") -> dict[str, str]:
    return {entry.key: entry.content for entry in entries_of(store, namespace, label).entries(limit=1000)}


def setup_source(store: Any, tmp_path: Path) -> str:
    """A session of the source tenant; two entries in its knowledge block, one in a second search block."""
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    sid = build_rich_session(manager, "Garden")
    knowledge = entries_of(store, SOURCE)
    knowledge.set("citrus-watering", "Citrus likes a dry spell between waterings.")
    knowledge.set("harbour-fees", "Harbour fees are paid at the marina office.")
    entries_of(store, SOURCE, "recipes").set("lemon-curd", "Lemon curd wants gentle heat.")
    return sid


def export(store: Any, sid: str, *, include: bool = True, key: bytes | None = None) -> bytes:
    buffer = io.BytesIO()
    report = export_sessions(store.lifecycle(), SOURCE, [sid], buffer, include_knowledge=include, signing_key=key)
    assert report.knowledge_entries == (3 if include else 0)
    return buffer.getvalue()


def lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def test_the_export_carries_the_tenants_entries_only_when_asked(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    entries_of(store, "tenant-c").set("secret", "Another tenant's fact")
    assert not [record for record in lines(export(store, sid, include=False)) if record["type"] == "knowledge_entry"]
    records = lines(export(store, sid))
    entries = [(r["label"], r["key"], r["content"]) for r in records if r["type"] == "knowledge_entry"]
    assert entries == [  # (label, key) order; never another tenant's
        ("knowledge", "citrus-watering", "Citrus likes a dry spell between waterings."),
        ("knowledge", "harbour-fees", "Harbour fees are paid at the marina office."),
        ("recipes", "lemon-curd", "Lemon curd wants gentle heat."),
    ]
    kinds = [record["type"] for record in records]
    assert kinds.index("knowledge_entry") > max(i for i, kind in enumerate(kinds) if kind in ("session", "message"))
    assert kinds[-1] == "footer" and records[-1]["records"] == len(records)


def test_an_export_pages_through_more_entries_than_one_read(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    sid = manager.create("Many").id
    knowledge = entries_of(store, SOURCE)
    keys = [f"fact-{number:04d}" for number in range(1203)]  # more than two pages of KNOWLEDGE_PAGE (500)
    for key in keys:
        knowledge.set(key, f"Fact number {key}")
    buffer = io.BytesIO()
    report = export_sessions(store.lifecycle(), SOURCE, [sid], buffer, include_knowledge=True)
    assert report.knowledge_entries == len(keys)
    exported = [r["key"] for r in lines(buffer.getvalue()) if r["type"] == "knowledge_entry"]
    assert exported == keys


def test_import_writes_into_the_importing_namespace_searchable_with_the_files_times(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    source_times = {e.key: (e.created_at, e.updated_at) for e in entries_of(store, SOURCE).entries(limit=10)}
    report = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), knowledge_labels=["knowledge", "recipes"])
    assert (report.knowledge_entries_imported, report.knowledge_entries_unchanged) == (3, 0)
    assert stored(store, TARGET) == stored(store, SOURCE)
    assert stored(store, TARGET, "recipes") == {"lemon-curd": "Lemon curd wants gentle heat."}
    target = entries_of(store, TARGET)
    assert {e.key: (e.created_at, e.updated_at) for e in target.entries(limit=10)} == source_times
    # Indexed as set_context indexes an entry: found by search, counted for the prompt
    assert target.search("marina") == "[harbour-fees]\nHarbour fees are paid at the marina office."
    assert target.get() == "2 entries indexed."
    # Only the importing tenant got them; a third tenant finds nothing
    assert entries_of(store, "tenant-c").search("marina") is None
    assert stored(store, "tenant-c") == {}
    # Later writes and removals work on imported entries as on any other
    target.set("harbour-fees", "Harbour fees are paid online now.")
    assert target.search("online") is not None and target.search("marina") is None
    assert target.delete("citrus-watering") and target.get() == "1 entries indexed."


def test_import_is_idempotent_and_a_changed_entry_is_a_conflict_that_writes_nothing(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    again = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    assert (again.knowledge_entries_imported, again.knowledge_entries_unchanged) == (0, 3)
    assert entries_of(store, TARGET).get() == "2 entries indexed."
    entries_of(store, TARGET).set("harbour-fees", "Harbour fees are paid online now.")
    with pytest.raises(ConflictError, match=r"'harbour-fees' of block 'knowledge' already exists with different"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    assert stored(store, TARGET)["harbour-fees"] == "Harbour fees are paid online now."
    # In a namespace holding one conflicting entry, nothing at all is written, sessions included
    entries_of(store, "tenant-c").set("citrus-watering", "Water citrus daily.")
    with pytest.raises(ConflictError):
        import_sessions(store.lifecycle(), "tenant-c", io.BytesIO(data))
    assert stored(store, "tenant-c") == {"citrus-watering": "Water citrus daily."}
    assert stored(store, "tenant-c", "recipes") == {}
    assert store.registry("tenant-c").list() == []


def test_labels_that_are_not_the_profiles_search_blocks_are_refused(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    with pytest.raises(ValidationError, match=r"'lemon-curd' is under 'recipes', which is not a search block"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), knowledge_labels=LABELS)
    assert stored(store, TARGET) == {}
    assert store.registry(TARGET).list() == []
    # Control: a profile with both search blocks imports the file
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), knowledge_labels=["knowledge", "recipes"])
    assert len(stored(store, TARGET)) == 2


def test_an_import_that_would_pass_the_quota_is_refused_whole(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    limits = DEFAULT_LIMITS.with_overrides({"max_entries_per_tenant": 2})
    entries_of(store, TARGET).set("tides", "Tides turn twice a day.")
    with pytest.raises(QuotaExceededError, match=r"2 new entries into block 'knowledge', which holds 1"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), limits=limits)
    assert stored(store, TARGET) == {"tides": "Tides turn twice a day."}
    assert store.registry(TARGET).list() == []
    # An entry already present does not count again: with room for the two, the file imports
    entries_of(store, TARGET).delete("tides")
    report = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), limits=limits)
    assert report.knowledge_entries_imported == 3


def test_a_signed_export_covers_the_knowledge_lines(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    key = b"a deployment secret"
    data = export(store, sid, key=key)
    tampered = data.replace(b"marina office", b"harbour pub")
    with pytest.raises(ExportFormatError, match="checksum mismatch"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(tampered), signing_key=key)
    assert stored(store, TARGET) == {}
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), signing_key=key)
    assert "marina" in stored(store, TARGET)["harbour-fees"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(label=""), "block label and key are not empty"),
        (lambda r: r.update(label=None), "block label"),
        (lambda r: r.update(key=""), "block label and key are not empty"),
        (lambda r: r.update(key="k" * 257), "longer than 256"),
        (lambda r: r.update(content=7), "content of entry"),
        (lambda r: r.update(content="x" * (DEFAULT_LIMITS.max_entry_bytes + 1)), "content of entry"),
        (lambda r: r.update(created_at="9999-01-01T00:00:00.000Z"), "created_at"),
        (lambda r: r.update(updated_at="yesterday"), "updated_at"),
    ],
)
def test_knowledge_records_are_validated(store: Any, tmp_path: Path, change: Any, message: str) -> None:
    sid = setup_source(store, tmp_path)
    records = lines(export(store, sid))[:-1]
    change(next(r for r in records if r["type"] == "knowledge_entry"))
    with pytest.raises(ExportFormatError, match=message):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))
    assert stored(store, TARGET) == {} and store.registry(TARGET).list() == []


def test_the_files_order_and_duplicates_are_checked(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    records = lines(export(store, sid))[:-1]
    entry = next(r for r in records if r["type"] == "knowledge_entry")
    with pytest.raises(ExportFormatError, match="'citrus-watering' of block 'knowledge' appears twice"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([*records, entry])))
    session = next(r for r in records if r["type"] == "session")
    with pytest.raises(ExportFormatError, match="sessions must come before"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([records[0], entry, *records[1:]])))
    assert session["id"] == sid
    assert stored(store, TARGET) == {}


def test_a_file_may_not_carry_more_entries_than_the_cap(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    sid = manager.create("Many").id
    records = lines(export_sessions_text(store, sid))[:-1]
    stamp = "2026-01-01T00:00:00.000Z"
    extra = [
        {"type": "knowledge_entry", "label": "knowledge", "key": f"k{n}", "content": "x", "created_at": stamp,
         "updated_at": stamp}
        for n in range(MAX_KNOWLEDGE_ENTRIES + 1)
    ]  # fmt: skip
    with pytest.raises(ExportFormatError, match=f"more than {MAX_KNOWLEDGE_ENTRIES} knowledge entries"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([*records, *extra])))
    assert stored(store, TARGET) == {}


def export_sessions_text(store: Any, sid: str) -> bytes:
    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), SOURCE, [sid], buffer)
    return buffer.getvalue()


def test_entries_move_between_backends(store: Any, tmp_path: Path, sqlite_store: Any) -> None:
    """A laptop-to-PostgreSQL move (and back) keeps the knowledge base."""
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    report = import_sessions(sqlite_store.lifecycle(), SOURCE, io.BytesIO(data))
    assert report.knowledge_entries_imported == 3
    assert stored(sqlite_store, SOURCE) == stored(store, SOURCE)
    assert entries_of(sqlite_store, SOURCE).search("citrus") is not None


def test_a_file_may_not_carry_more_knowledge_bytes_than_the_cap(store: Any, tmp_path: Path) -> None:
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    sid = manager.create("Large").id
    records = lines(export_sessions_text(store, sid))[:-1]
    stamp = "2026-01-01T00:00:00.000Z"
    content = "x" * DEFAULT_LIMITS.max_entry_bytes
    count = MAX_KNOWLEDGE_BYTES // len(content) + 1
    extra = [
        {"type": "knowledge_entry", "label": "knowledge", "key": f"k{n}", "content": content, "created_at": stamp,
         "updated_at": stamp}
        for n in range(count)
    ]  # fmt: skip
    with pytest.raises(ExportFormatError, match="more than 64 MiB of knowledge entries in one file"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([*records, *extra])))
    assert stored(store, TARGET) == {}


@pytest.mark.parametrize(("cap", "value"), [("MAX_KNOWLEDGE_ENTRIES", 2), ("MAX_KNOWLEDGE_BYTES", 60)])
def test_an_export_refuses_more_knowledge_than_an_import_takes(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: str, value: int
) -> None:
    """A file no import would take is never written: the export says why (the caps, lowered here)."""
    sid = setup_source(store, tmp_path)  # three entries, 115 bytes of content
    monkeypatch.setattr(transfer, cap, value)
    with pytest.raises(ValidationError, match="more knowledge than one export file can carry"):
        export_sessions(store.lifecycle(), SOURCE, [sid], io.BytesIO(), include_knowledge=True)
    monkeypatch.undo()
    assert export(store, sid)  # control: under the real caps the same namespace exports


def test_a_sessions_only_pass_skips_the_entries_but_still_checks_the_file(store: Any, tmp_path: Path) -> None:
    """An import's second pass (``knowledge=False``) yields the same sessions and still verifies the footer."""
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    full, sessions_only = ExportReader(io.BytesIO(data)), ExportReader(io.BytesIO(data), knowledge=False)
    assert [s.id for s in full.sessions()] == [s.id for s in sessions_only.sessions()] == [sid]
    assert len(full.knowledge_entries) == 3 and sessions_only.knowledge_entries == []
    with pytest.raises(ExportFormatError, match="checksum mismatch"):
        list(ExportReader(io.BytesIO(data.replace(b"marina office", b"harbour pub")), knowledge=False).sessions())


def entry_file(prefix: str, count: int, *, stamp: str = "2026-01-01T00:00:00.000Z") -> bytes:
    """A file of ``count`` knowledge entries and no session."""
    header = {"type": "header", "format": "threadloom-export", "version": 1, "exported_at": stamp, "namespace": SOURCE}
    body = [
        {"type": "knowledge_entry", "label": "knowledge", "key": f"{prefix}{n}", "content": f"fact {prefix}{n}",
         "created_at": stamp, "updated_at": stamp}
        for n in range(count)
    ]  # fmt: skip
    return sealed([header, *body])


def test_the_quota_holds_against_an_import_landing_beside_it(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked where the entries are written, under the transaction's hold on the label's count: another
    import landing between this one's plan and its write is counted, and this one is refused whole."""
    limits = DEFAULT_LIMITS.with_overrides({"max_entries_per_tenant": 10})
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    first_records = lines(export_sessions_text(store, manager.create("Beside").id))[:-1]
    first_records += lines(entry_file("a", 8))[1:-1]
    lifecycle = store.lifecycle()
    write = lifecycle.write_sessions

    def beside(*args: Any, **kwargs: Any) -> None:
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(entry_file("b", 8)), limits=limits)
        write(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "write_sessions", beside)
    with pytest.raises(QuotaExceededError, match=r"8 new entries into block 'knowledge', which holds 8"):
        import_sessions(lifecycle, TARGET, io.BytesIO(sealed(first_records)), limits=limits)
    assert sorted(stored(store, TARGET)) == [f"b{n}" for n in range(8)]
    assert store.registry(TARGET).list() == []  # the refused file's session went back with its entries


def test_a_line_naming_its_type_twice_is_refused(store: Any) -> None:
    """JSON keeps the last of two keys, and an import's second pass skips a line that starts as a knowledge
    entry without parsing it: a line that is both would be checked as one record and written as another."""
    header = lines(entry_file("a", 1))[0]
    entry = json.dumps({"label": "knowledge", "key": "k", "content": "c", "created_at": header["exported_at"],
                        "updated_at": header["exported_at"], "type": "session"}, separators=(",", ":"))  # fmt: skip
    raw = [(json.dumps(header) + "\n").encode(), ('{"type":"knowledge_entry",' + entry[1:] + "\n").encode()]
    with pytest.raises(ExportFormatError, match="Line 2: the record names its type twice"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([], lines=raw)))
    assert stored(store, TARGET) == {}
    # Control: the same line with one type imports
    raw[1] = ('{"type":"knowledge_entry",' + entry[1:].replace(',"type":"session"', "") + "\n").encode()
    assert import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed([], lines=raw))).knowledge_entries_imported == 1


def test_an_entry_from_the_first_centuries_exports_as_it_was_imported(store: Any, sqlite_store: Any) -> None:
    """Every backend writes a year in four digits, so what one exports the other imports (strftime wrote
    the year 1 as "1" on PostgreSQL's datetimes, which no import takes)."""
    stamp = "0001-01-01T00:00:00.000Z"
    import_sessions(store.lifecycle(), SOURCE, io.BytesIO(entry_file("old", 1, stamp=stamp)))
    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), SOURCE, [], buffer, include_knowledge=True)
    [entry] = [r for r in lines(buffer.getvalue()) if r["type"] == "knowledge_entry"]
    assert (entry["created_at"], entry["updated_at"]) == (stamp, stamp)
    report = import_sessions(sqlite_store.lifecycle(), TARGET, io.BytesIO(buffer.getvalue()))
    assert report.knowledge_entries_imported == 1
