"""The commands. Each one parses its options, calls the library (``threadloom.lifecycle``, the stores), and reports.

Global options pick the database (``--database``), the namespace (tenant) and ``--json``; see docs/cli.md.

Over 400 lines because every operator command is here, each a short parse-call-report over the library.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from threadloom.cli.output import ExitCode, Output, plural
from threadloom.cli.stores import DEFAULT_DATABASE, open_store, with_tls_hint
from threadloom.errors import NotFoundError, StorageUnavailableError, ValidationError

app = typer.Typer(
    name="threadloom",
    help="Operate Threadloom data: list, inspect, export, import, expire and erase sessions; migrate the schema.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
sessions_app = typer.Typer(help="List, inspect and hold sessions.", no_args_is_help=True)
retention_app = typer.Typer(help="Remove sessions inactive for longer than the retention period.", no_args_is_help=True)
knowledge_app = typer.Typer(
    help="List and remove the namespace's searchable knowledge (what the model stored under a search block).",
    no_args_is_help=True,
)
app.add_typer(sessions_app, name="sessions")
app.add_typer(knowledge_app, name="knowledge")
app.add_typer(retention_app, name="retention")


@dataclasses.dataclass
class State:
    database: str
    database_given: bool
    namespace: str
    out: Output
    create: bool = False

    @contextmanager
    def store(self) -> Any:
        try:
            store = open_store(self.database, create=self.create)
        except StorageUnavailableError as error:
            raise with_tls_hint(error) from error
        try:
            yield store
        except StorageUnavailableError as error:
            raise with_tls_hint(error) from error
        finally:
            store.close()


def _state(ctx: typer.Context) -> State:
    state = ctx.find_object(State)
    assert state is not None  # set by the root callback for every command
    return state


def _print_version(value: bool) -> None:
    if value:
        from threadloom.cli import version

        typer.echo(f"threadloom {version()}")
        raise typer.Exit


@app.callback()
def root(
    ctx: typer.Context,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            "-d",
            envvar="THREADLOOM_DATABASE_URL",
            help=f"A SQLite file (path or sqlite:///path) or postgresql://user@host/db [default: {DEFAULT_DATABASE}]",
        ),
    ] = None,
    namespace: Annotated[
        str,
        typer.Option("--namespace", "-n", envvar="THREADLOOM_NAMESPACE", help="The tenant whose sessions to work on"),
    ] = "local",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document, for scripts")] = False,
    show_version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit")
    ] = False,
    create: Annotated[
        bool, typer.Option("--create", help="Create the SQLite file when it does not exist (migrate always may)")
    ] = False,
) -> None:
    database_url = database or DEFAULT_DATABASE
    ctx.obj = State(database_url, database is not None, namespace, Output.create(as_json=as_json), create)


# ------------------------------------------------------------------ sessions


@sessions_app.command("list")
def sessions_list(
    ctx: typer.Context,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many, most recent activity first")] = None,
) -> None:
    """List the namespace's sessions, most recent activity first."""
    state = _state(ctx)
    with state.store() as store:
        registry = store.registry(state.namespace)
        infos = registry.list_page(limit=limit)[0] if limit else registry.list()
    table = Table("id", "name", "subject", "hold", "last activity")
    table.columns[0].no_wrap = table.columns[4].no_wrap = True  # ids and times are copied whole
    for info in infos:
        table.add_row(info.id, info.name, info.subject_id or "", "held" if info.legal_hold else "", info.updated_at)
    state.out.result(
        [dataclasses.asdict(info) for info in infos],
        table=table if infos else None,
        text=None if infos else f"No sessions in namespace {state.namespace!r}.",
    )


@sessions_app.command("show")
def sessions_show(ctx: typer.Context, session_id: Annotated[str, typer.Argument(help="The session id")]) -> None:
    """Show a session: its tree, overlays, blocks, loaded skills and usage."""
    from threadloom.cli.summary import session_summary, summary_tables

    state = _state(ctx)
    with state.store() as store:
        snapshot = store.lifecycle().read_session(state.namespace, session_id)
    if snapshot is None:
        raise NotFoundError(f"Session {session_id!r} not found in namespace {state.namespace!r}")
    summary = session_summary(snapshot)
    if state.out.as_json:
        state.out.result(summary)
        return
    for table in summary_tables(summary):
        state.out.stdout.print(table)


@sessions_app.command("hold")
def sessions_hold(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="The session id")],
    release: Annotated[bool, typer.Option("--release", help="Lift the hold instead")] = False,
) -> None:
    """Put a session on legal hold (retention never removes it), or lift the hold."""
    state = _state(ctx)
    with state.store() as store:
        if not store.registry(state.namespace).set_legal_hold(session_id, not release):
            raise NotFoundError(f"Session {session_id!r} not found in namespace {state.namespace!r}")
    verb = "released from" if release else "placed on"
    state.out.result({"id": session_id, "legal_hold": not release}, text=f"Session {session_id} {verb} legal hold.")


# ----------------------------------------------------------------- knowledge

_PROFILE_OPTION = typer.Option(
    envvar="THREADLOOM_PROFILE", help="Deployment profile naming the search blocks (default: the bundled one)"
)
#: Entries read per query while listing a whole block.
_KNOWLEDGE_BATCH = 200


def _knowledge(store: Any, namespace: str, label: str, profile: Path | None) -> Any:
    """The block's entry store, from the profile as the HTTP API wires it (an unknown label is not found)."""
    from threadloom.api.runtime import Runtime, Settings

    runtime = Runtime(Settings(profile_path=os.fspath(profile) if profile else None), store=store)
    return runtime.knowledge(runtime.limits.check_tenant(namespace), label)


@knowledge_app.command("list")
def knowledge_list(
    ctx: typer.Context,
    label: Annotated[str, typer.Argument(help="The search block's label (the bundled profile's is knowledge)")],
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many, in key order")] = None,
    profile: Annotated[Path | None, _PROFILE_OPTION] = None,
) -> None:
    """List a searchable block's entries in key order."""
    state = _state(ctx)
    found: list[Any] = []
    with state.store() as store:
        entries = _knowledge(store, state.namespace, label, profile)
        after = ""
        while limit is None or len(found) < limit:
            wanted = _KNOWLEDGE_BATCH if limit is None else min(_KNOWLEDGE_BATCH, limit - len(found))
            batch = entries.entries(after=after, limit=wanted)
            found.extend(batch)
            if len(batch) < wanted:
                break
            after = batch[-1].key
    table = Table("key", "updated", "content")
    table.columns[0].no_wrap = table.columns[1].no_wrap = True
    for entry in found:
        table.add_row(entry.key, entry.updated_at, entry.content)
    state.out.result(
        [dataclasses.asdict(entry) for entry in found],
        table=table if found else None,
        text=None if found else f"No entries in block {label!r} of namespace {state.namespace!r}.",
    )


@knowledge_app.command("forget")
def knowledge_forget(
    ctx: typer.Context,
    label: Annotated[str, typer.Argument(help="The search block's label")],
    key: Annotated[str, typer.Argument(help="The entry's key, as `knowledge list` shows it")],
    profile: Annotated[Path | None, _PROFILE_OPTION] = None,
) -> None:
    """Remove one entry and its search terms.

    Prompts already frozen keep their "<n> entries indexed." line until they are refreshed.
    """
    from threadloom.limits import shown

    state = _state(ctx)
    with state.store() as store:
        if not _knowledge(store, state.namespace, label, profile).delete(key):
            raise NotFoundError(f"No entry {shown(key)} in block {shown(label)} of namespace {state.namespace!r}")
    state.out.result(
        {"namespace": state.namespace, "label": label, "key": key, "deleted": True},
        text=f"Removed {key!r} from {label} in namespace {state.namespace!r}.",
    )


# ------------------------------------------------------------ export, import


@app.command("export")
def export(
    ctx: typer.Context,
    session_ids: Annotated[list[str] | None, typer.Argument(help="Sessions to export (default: all)")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The file to write ('-' for stdout)")] = Path("-"),
    include_shared_blocks: Annotated[
        bool,
        typer.Option(
            "--include-shared-blocks",
            help="Also export the sessions' subject blocks and the tenant blocks, with their history",
        ),
    ] = False,
    include_knowledge: Annotated[
        bool,
        typer.Option("--include-knowledge", help="Also export the namespace's knowledge entries (its search blocks')"),
    ] = False,
) -> None:
    """Export sessions, whole and with their ids, to a JSONL file (docs/export-format.md)."""
    from threadloom.lifecycle import export_sessions
    from threadloom.lifecycle.export_format import signing_key_from_environment

    state = _state(ctx)
    key = signing_key_from_environment()
    with state.store() as store:
        ids = list(dict.fromkeys(session_ids or [info.id for info in store.registry(state.namespace).list()]))
        if str(output) == "-":
            report = export_sessions(
                store.lifecycle(),
                state.namespace,
                ids,
                sys.stdout.buffer,
                signing_key=key,
                include_shared_blocks=include_shared_blocks,
                include_knowledge=include_knowledge,
            )
            sys.stdout.flush()
            return
        if output.is_dir():  # refused before exporting anything (a folder has no name to put ".partial" on)
            raise _unwritable(output, os.strerror(errno.EISDIR))
        partial = output.with_name(output.name + ".partial")
        try:
            stream = partial.open("wb")
        except OSError as error:  # no such folder, no permission: a one-line error, never a traceback
            raise _unwritable(output, error.strerror or str(error)) from error
        try:
            with stream, state.out.progress("Exporting", len(ids)) as advance:
                report = export_sessions(
                    store.lifecycle(),
                    state.namespace,
                    ids,
                    stream,
                    on_session=lambda _: advance(),
                    signing_key=key,
                    include_shared_blocks=include_shared_blocks,
                    include_knowledge=include_knowledge,
                )
            try:
                partial.replace(output)  # a failed export never leaves a file that looks complete
            except OSError as error:  # the path became a folder meanwhile, or cannot be replaced
                raise _unwritable(output, error.strerror or str(error)) from error
        finally:
            partial.unlink(missing_ok=True)
    exported: dict[str, object] = {
        "file": str(output),
        "sessions": report.sessions,
        "messages": report.messages,
        "bytes": output.stat().st_size,
    }
    extras: list[str] = []
    if include_shared_blocks:
        exported["shared_blocks"] = report.shared_blocks
        extras.append(plural(report.shared_blocks, "shared block"))
    if include_knowledge:
        exported["knowledge_entries"] = report.knowledge_entries
        extras.append(plural(report.knowledge_entries, "knowledge entry", "knowledge entries"))
    also = "".join(f", {extra}" for extra in extras[:-1]) + (f" and {extras[-1]}" if extras else "")
    state.out.result(
        exported,
        text=f"Exported {plural(report.sessions, 'session')} ({plural(report.messages, 'message')}){also} to {output}.",
    )


def _unwritable(output: Path, reason: str) -> ValidationError:
    """The error ``export`` reports when it cannot write ``output`` (exit 5, as for an unreadable import file)."""
    return ValidationError(f"Cannot write {output}: {reason}")


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="An export file ('-' for stdin)", allow_dash=True)],
    profile: Annotated[
        Path | None, typer.Option(envvar="THREADLOOM_PROFILE", help="Deployment profile whose limits apply")
    ] = None,
    keep_ids: Annotated[
        bool,
        typer.Option(
            "--keep-ids",
            help="Keep every session id (an operator moving a deployment); an id held in another namespace is refused",
        ),
    ] = False,
) -> None:
    """Import an export: all or nothing, idempotent; ids not minted for the namespace are renamed (listed)."""
    from threadloom.lifecycle import import_sessions
    from threadloom.lifecycle.export_format import signing_key_from_environment

    state = _state(ctx)
    loaded = _profile(profile) if profile else None
    limits = loaded.limits.to_limits() if loaded is not None else None
    # With a profile, a block must be one it writes for its own session, as the HTTP import requires
    labels = [block.label for block in loaded.blocks if block.kind == "writable"] if loaded is not None else None
    shared = (
        {block.label: block.scope for block in loaded.blocks if block.kind == "writable" and block.scope != "session"}
        if loaded is not None
        else None
    )
    # and a knowledge entry must be under one of its search blocks; without a profile (an operator) any label goes
    searchable = [block.label for block in loaded.blocks if block.kind == "search"] if loaded is not None else None
    key = signing_key_from_environment()
    with state.store() as store:
        if str(file) == "-":
            report = import_sessions(
                store.lifecycle(),
                state.namespace,
                sys.stdin.buffer,
                limits=limits,
                block_labels=labels,
                signing_key=key,
                keep_ids=keep_ids,
                shared_block_scopes=shared,
                knowledge_labels=searchable,
            )
        else:
            try:
                stream = file.open("rb")
            except OSError as error:
                raise ValidationError(f"Cannot read {file}: {error.strerror}") from error
            with stream, state.out.progress("Validating and importing", None):
                report = import_sessions(
                    store.lifecycle(),
                    state.namespace,
                    stream,
                    limits=limits,
                    block_labels=labels,
                    signing_key=key,
                    keep_ids=keep_ids,
                    shared_block_scopes=shared,
                    knowledge_labels=searchable,
                )
    renames = "".join(f"\n  {old} -> {new}" for old, new in report.renamed.items())
    imported: dict[str, object] = {
        "imported": report.imported,
        "unchanged": report.unchanged,
        "messages": report.messages,
        "renamed": report.renamed,
    }
    blocks = ""
    if report.shared_blocks_imported or report.shared_blocks_unchanged:
        imported["shared_blocks_imported"] = report.shared_blocks_imported
        imported["shared_blocks_unchanged"] = report.shared_blocks_unchanged
        imported["shared_block_versions"] = report.shared_block_versions
        subject = sum(name.startswith("subject/") for name in report.shared_blocks_imported)
        tenant = len(report.shared_blocks_imported) - subject
        blocks = (
            f" Shared blocks: {subject} subject and {tenant} tenant imported "
            f"({plural(report.shared_block_versions, 'version')}), {len(report.shared_blocks_unchanged)} unchanged."
        )
    if report.knowledge_entries_imported or report.knowledge_entries_unchanged:
        imported["knowledge_entries_imported"] = report.knowledge_entries_imported
        imported["knowledge_entries_unchanged"] = report.knowledge_entries_unchanged
        blocks += (
            f" Knowledge entries: {report.knowledge_entries_imported} imported, "
            f"{report.knowledge_entries_unchanged} unchanged."
        )
    state.out.result(
        imported,
        text=f"Imported {plural(len(report.imported), 'session')} ({plural(report.messages, 'message')}); "
        f"{len(report.unchanged)} already present and unchanged.{blocks}",
    )
    if renames and not state.out.as_json:
        state.out.stdout.print(
            f"Renamed {plural(len(report.renamed), 'session')} (ids not minted for this namespace):{renames}",
            highlight=False,
            soft_wrap=True,  # an id is never cut across lines
        )
    if report.source_namespace is not None and report.source_namespace != state.namespace:
        state.out.stderr.print(
            f"Note: {file} was exported from namespace {report.source_namespace!r}; its sessions were imported "
            f"into namespace {state.namespace!r} (--namespace).",
            highlight=False,
            soft_wrap=True,
        )


# ------------------------------------------------------------ delete, erase


def _counts_table(counts: dict[str, int]) -> Table:
    table = Table("removed", "count")
    for kind, count in counts.items():
        table.add_row(kind, str(count))
    return table


@app.command("delete")
def delete(ctx: typer.Context, session_id: Annotated[str, typer.Argument(help="The session id")]) -> None:
    """Delete one session and everything derived from it."""
    from threadloom.lifecycle import Removal, remove_session

    state = _state(ctx)
    removal = Removal()
    with state.store() as store:
        storage = store.lifecycle()
        if not remove_session(storage, state.namespace, session_id, removal):
            raise NotFoundError(f"Session {session_id!r} not found in namespace {state.namespace!r}")
        storage.purge_deleted()
    counts = removal.ordered_counts()
    state.out.result({"id": session_id, "counts": counts}, table=_counts_table(counts))


@app.command("erase-subject")
def erase_subject(ctx: typer.Context, subject_id: Annotated[str, typer.Argument(help="The data subject's id")]) -> None:
    """Erase every session of a data subject (and forks and continuations made from them); print the receipt."""
    from threadloom.lifecycle import erase_subject as erase
    from threadloom.lifecycle import sessions_of_subject

    state = _state(ctx)
    with state.store() as store:
        storage = store.lifecycle()
        total = len(sessions_of_subject(storage, state.namespace, subject_id))
        with state.out.progress("Erasing", total) as advance:
            receipt = erase(storage, state.namespace, subject_id, on_session=lambda _: advance())
    table = _counts_table(receipt.counts)
    table.caption = f"erased at {receipt.erased_at}\n{receipt.digest}"
    state.out.result(receipt.as_dict(), table=table)


# ------------------------------------------------------------------ retention


def _profile(path: Path | None) -> Any:
    from threadloom.api.profile import load_profile

    return load_profile(path)


@retention_app.command("sweep")
def retention_sweep(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing")] = False,
    inactive_days: Annotated[
        int | None, typer.Option(min=1, help="Override the profile's retention.inactive_days")
    ] = None,
    profile: Annotated[
        Path | None, typer.Option(envvar="THREADLOOM_PROFILE", help="Deployment profile (default: the bundled one)")
    ] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", help="Sweep every tenant")] = False,
    batch_size: Annotated[int, typer.Option(min=1, help="Sessions read per batch")] = 100,
    max_sessions: Annotated[int | None, typer.Option(min=1, help="Stop after removing this many")] = None,
) -> None:
    """Remove sessions inactive for longer than the retention period (legal holds are kept)."""
    from threadloom.lifecycle import sweep

    state = _state(ctx)
    days = inactive_days if inactive_days is not None else _profile(profile).retention.inactive_days
    if days is None:
        raise typer.BadParameter(
            "no retention period: set retention.inactive_days in the profile or pass --inactive-days",
            param_hint="--inactive-days",
        )
    with state.store() as store, state.out.progress("Sweeping", None) as advance:
        report = sweep(
            store.lifecycle(),
            inactive_days=days,
            namespace="" if all_namespaces else state.namespace,
            dry_run=dry_run,
            batch_size=batch_size,
            max_sessions=max_sessions,
            on_session=lambda _: advance(),
        )
    listed = [{"namespace": item.namespace, "id": item.id, "updated_at": item.updated_at} for item in report.expired]
    table = Table("namespace", "session", "last activity", title="would be removed" if dry_run else "removed")
    for item in report.expired:
        table.add_row(item.namespace, item.id, item.updated_at)
    verb = "would remove" if dry_run else "removed"
    state.out.result(
        {
            "cutoff": report.cutoff,
            "dry_run": dry_run,
            "sessions": listed,
            "counts": report.counts,
            "complete": report.complete,
        },
        table=table if report.expired else None,
        text=f"Sweep {verb} {plural(len(listed), 'session')} inactive since before {report.cutoff}"
        + ("" if report.complete else " (stopped early; run it again to continue)")
        + ".",
    )


# ----------------------------------------------------------- schema, server


@app.command("migrate")
def migrate(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="postgresql://user:password@host:port/db?sslmode=… (default: --database, else THREADLOOM_DB_*)"
        ),
    ] = None,
    print_sql: Annotated[
        bool, typer.Option("--print-sql", help="Print the PostgreSQL migrations as one SQL script; touch no database")
    ] = False,
    after: Annotated[
        int, typer.Option(metavar="VERSION", help="With --print-sql: only migrations newer than this")
    ] = 0,
) -> None:
    """Create or upgrade the schema (idempotent, safe to run concurrently)."""
    from threadloom.storage.postgres.schema import postgres_migrations, render_plain_sql

    state = _state(ctx)
    if print_sql:
        sys.stdout.write(render_plain_sql(after_version=after))
        return
    if database_url is None and not state.database_given:
        from threadloom.storage.postgres.store import PostgresStore

        store: Any = PostgresStore.from_environment(auto_migrate=False)
    else:
        store = open_store(database_url or state.database, create=True)
    try:
        applied = store.migrate()
    except StorageUnavailableError as error:
        raise with_tls_hint(error) from error
    finally:
        store.close()
    names = {migration.version: migration.name for migration in postgres_migrations()}
    latest = max(names, default=0)
    lines = [f"applied {names.get(version, version)}" for version in applied]
    lines.append(f"schema is at version {latest}" if applied else f"schema already at version {latest}; nothing to do")
    state.out.result({"applied": applied, "version": latest}, text="\n".join(lines))


@app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="PORT", help="Port to listen on")] = 3000,
    data_dir: Annotated[Path, typer.Option(help="Folder holding the SQLite file and local skills")] = Path(
        ".threadloom"
    ),
) -> None:
    """Run the HTTP API locally over SQLite (what `make serve` runs)."""
    from threadloom.local_server import main as serve_main

    serve_main(["--host", host, "--port", str(port), "--data-dir", os.fspath(data_dir)])


@app.command("mcp")
def mcp(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Option(help="Bind the context tools to this session (calls may still name another)")
    ] = None,
) -> None:
    """Serve the namespace's memory to an agent over the Model Context Protocol on stdin/stdout."""
    from threadloom.extras import missing_extra_message

    missing = missing_extra_message("threadloom mcp", "mcp")
    if missing is not None:
        typer.echo(missing, err=True)
        raise typer.Exit(int(ExitCode.ERROR))
    from threadloom.mcp.stdio import run

    state = _state(ctx)
    with state.store() as store:
        run(store, state.namespace, session)


__all__ = ["ExitCode", "app"]
