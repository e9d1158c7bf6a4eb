"""What a backend's SQL module provides: every statement the shared storage logic runs.

Each backend subclasses :class:`SqlDialect` in its own ``sql.py`` and fills in the
statements (named ``:param`` placeholders, never string formatting of values) plus a few
hooks for the only real difference: how text is indexed, what a message search must do
first (SQLite indexes messages in batches), which index a search reads (SQLite keeps one
per namespace, see :meth:`message_search_statement`) and how a search query is bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.storage.database import Database, Executor

JUMP_SPAN: Final = 64
"""A message's ``jump`` is the seq of its ancestor at depth ``((depth - 1) // JUMP_SPAN) * JUMP_SPAN`` (0005)."""


class SqlDialect:
    """Statement catalogue; class attributes so a backend's SQL reads as one flat module."""

    name: ClassVar[str]

    create_migrations_table: ClassVar[str]

    # Session head: the per-session lock row, latest leaf and insertion counter.
    ensure_head: ClassVar[str]
    lock_head: ClassVar[str]
    set_head: ClassVar[str]
    set_head_seq_only: ClassVar[str]
    set_head_leaf_only: ClassVar[str]
    get_head_leaf: ClassVar[str]
    get_leaf_estimate: ClassVar[str]
    find_latest_leaf: ClassVar[str]

    # Messages.
    get_message: ClassVar[str]
    # The same reads with the tenant's check (:namespace): no row if the namespace does not hold the
    # session, else one row whose content is NULL when there is no such message (or no leaf).
    get_message_in_namespace: ClassVar[str]
    get_prompt_in_namespace: ClassVar[str]
    get_latest_leaf_in_namespace: ClassVar[str]
    get_message_meta: ClassVar[str]
    insert_message: ClassVar[str]
    update_message: ClassVar[str]
    delete_message: ClassVar[str]
    get_children: ClassVar[str]
    get_children_page: ClassVar[str]
    path_overlay_ends: ClassVar[str]
    copy_path: ClassVar[str]
    # Run after ``copy_path`` with its parameters: the copies' index rows (none where the index is in the row).
    index_copied_path: ClassVar[tuple[str, ...]]
    set_copied_head: ClassVar[str]
    get_child_ids: ClassVar[str]
    tree_skeleton: ClassVar[str]
    reparent_message: ClassVar[str]
    set_estimate: ClassVar[str]
    # Many rows' running estimates at once, from :rows, a JSON array of [id, path_tokens]: for a change
    # that moves no row's depth (the jump-pointer trigger fires only when depth or parent changes).
    # Empty: the backend writes them row by row (set_estimate).
    set_path_tokens: ClassVar[str]
    path_rows: ClassVar[str]
    path_ids_up: ClassVar[str]
    subtree: ClassVar[str]
    # One history page (threadloom.storage.history_pages): the rows at depths :first..:last of
    # :leaf's path as (depth, id, bytes, content, checked), reached through the jump pointers, in any order,
    # with the content only while the running bytes stay within :budget; a row (-1, leaf id, leaf
    # depth, NULL) when the leaf exists; a row (-2, id, seq, NULL) for the shallowest ancestor the
    # walk passed at depth :hint or deeper (not the leaf), from where the next page can start; the
    # walk itself starts at (:anchor_seq, :anchor_id) when that row exists at depth :last or deeper.
    # With :overlays, PostgreSQL adds (-3, NULL, NULL, the overlays as a JSON array) when there are
    # any (SQLite's reader reads them in the same transaction). PostgreSQL also honours :namespace
    # (not NULL: a session outside it gives the single row (-4, NULL, NULL, NULL)) and :together
    # (the depth rows as one row (-5, NULL, count, JSON array of [depth, id, bytes, message]));
    # SQLite's reader checks the namespace in its transaction. ``checked`` is true where the statement
    # made sure the content is a well-formed message's JSON (valid, message-shaped: SQLite's
    # JSON functions; always false on PostgreSQL, whose page comes parsed): the reader then hands the
    # text on unparsed (HistoryEntry.text). Every other row has it false. Then (depth, id, content)
    # of the rows from :start up to depth :first (contents the budget left out but a page needs).
    history_page_rows: ClassVar[str]
    # The same rows for the session's latest leaf, found by the statement (its -1 row names it), with
    # the namespace check first; no row when the session has no messages. Empty where a round trip is
    # cheap (SQLite reads the head in the page's own transaction).
    history_page_rows_at_head: ClassVar[str]
    history_page_contents: ClassVar[str]
    clear_messages: ClassVar[str]
    clear_head: ClassVar[str]

    # Full-text index of messages (``unindex_*`` may be empty when the index lives in the row).
    # ``index_message`` may only mark the row for a later batch: see :meth:`prepare_message_search`.
    index_message: ClassVar[str]
    unindex_message: ClassVar[str]
    unindex_session: ClassVar[str]
    search_session: ClassVar[str]
    search_namespace: ClassVar[str]

    # Compaction overlays.
    get_compactions: ClassVar[str]
    get_compaction_targets: ClassVar[str]
    get_latest_compaction_id: ClassVar[str]
    find_compaction_by_request: ClassVar[str]
    insert_compaction: ClassVar[str]
    compactions_touching: ClassVar[str]
    delete_compaction: ClassVar[str]
    clear_compactions: ClassVar[str]

    # Context blocks and prompt store.
    get_block: ClassVar[str]
    upsert_block: ClassVar[str]
    insert_prompt_if_absent: ClassVar[str]
    delete_block: ClassVar[str]
    delete_session_blocks: ClassVar[str]
    # Versioned writable blocks and their history (storage/blocks.py, storage/block_history.py).
    session_block_read: ClassVar[str]
    session_block_update_if: ClassVar[str]
    session_block_update: ClassVar[str]
    session_block_insert: ClassVar[str]
    shared_block_read: ClassVar[str]
    shared_block_update_if: ClassVar[str]
    shared_block_update: ClassVar[str]
    shared_block_insert: ClassVar[str]
    insert_block_version: ClassVar[str]
    block_write_once: ClassVar[dict[str, dict[str, str]]] = {}
    """PostgreSQL: a block's whole write as one statement, by scope table (``session``, ``shared``) and kind
    (``any``, ``new``, ``if``); empty (SQLite): the write is a transaction of statements."""
    block_versions_page: ClassVar[str]
    get_block_version: ClassVar[str]
    prune_block_versions: ClassVar[str]
    delete_owner_versions: ClassVar[str]
    count_owner_versions: ClassVar[str]
    unlink_session_versions: ClassVar[str]
    subject_blocks: ClassVar[str]
    delete_subject_blocks: ClassVar[str]
    owner_versions: ClassVar[str]
    import_shared_block: ClassVar[str]
    import_block_version: ClassVar[str]

    # Searchable context entries.
    count_entries: ClassVar[str]
    #: ``count_entries`` inside a write transaction, held so that no other writer adds to the label until it ends.
    lock_entry_count: ClassVar[str]
    entry_exists: ClassVar[str]
    upsert_entry: ClassVar[str]
    unindex_entry: ClassVar[str]
    index_entry: ClassVar[str]
    search_entries: ClassVar[str]
    #: A label's entries in key order after ``:after``, at most ``:limit``: key, content, created, updated.
    entries_page: ClassVar[str]
    get_entry: ClassVar[str]
    delete_entry: ClassVar[str]
    #: A namespace's entries of every label in (label, key) order after ``(:after_label, :after_key)``, for export.
    export_entries: ClassVar[str]
    #: The contents of a label's entries whose keys are in ``:keys`` (a JSON array), for an import's plan.
    entry_contents: ClassVar[str]
    #: Imported entries (``:entries``, a JSON array of objects with their own times and
    #: :meth:`index_params`); answers the (label, key) of each one written, none for a key taken meanwhile.
    import_entries: ClassVar[str]
    #: Whether :attr:`import_entries` also indexes the entries (else :attr:`index_entry` runs for each).
    import_entries_indexes: ClassVar[bool] = False

    # Loaded skills (contract D7).
    get_loaded_skills: ClassVar[str]
    clear_loaded_skills: ClassVar[str]
    add_loaded_skill: ClassVar[str]

    # Session registry (SessionManager).
    insert_session: ClassVar[str]
    get_session: ClassVar[str]
    #: The session's subject when the namespace holds it (else no row): the check a read of its data
    #: carries (``checked_reads``).
    session_subject: ClassVar[str]
    #: The same check raising ``TL410`` when it finds nothing (``TL412`` when ``:check_subject`` and the
    #: subject is not ``:subject``), to go ahead of reads in one pipeline: the server then skips them, so
    #: a refused read never runs (None where the check cannot be pipelined).
    session_required: ClassVar[str | None]
    count_sessions: ClassVar[str]
    get_setting: ClassVar[str]
    list_sessions: ClassVar[str]
    list_sessions_after: ClassVar[str]
    session_overviews: ClassVar[str]
    rename_session: ClassVar[str]
    touch_session: ClassVar[str]
    add_usage: ClassVar[str]
    end_session: ClassVar[str]
    delete_session: ClassVar[str]
    set_legal_hold: ClassVar[str]
    delete_head: ClassVar[str]

    # Data lifecycle (whole-session export/import, retention sweeps, subject erasure).
    insert_message_indexed: ClassVar[str]
    export_head: ClassVar[str]
    export_messages: ClassVar[str]
    export_compactions: ClassVar[str]
    export_blocks: ClassVar[str]
    session_namespace: ClassVar[str]
    import_session: ClassVar[str]
    import_head: ClassVar[str]
    import_block: ClassVar[str]
    subject_sessions: ClassVar[str]
    child_sessions: ClassVar[str]
    message_ids: ClassVar[str]
    compaction_ids: ClassVar[str]
    block_keys: ClassVar[str]
    expired_sessions: ClassVar[str]
    lock_expired_session: ClassVar[str]
    lock_session: ClassVar[str]
    erase_setup: ClassVar[str]
    purge_statements: ClassVar[tuple[str, ...]]

    # Compaction requests, tracked from queued to done or failed.
    upsert_compaction_request: ClassVar[str]
    start_compaction_request: ClassVar[str]
    finish_compaction_request: ClassVar[str]
    get_compaction_request: ClassVar[str]
    get_compaction_request_by_key: ClassVar[str]
    latest_compaction_request: ClassVar[str]
    delete_session_compaction_requests: ClassVar[str]

    # Reflection: per-session watermark, handled runs and proposed block edits (storage/reflections.py).
    get_reflection_mark: ClassVar[str]
    insert_reflection_run: ClassVar[str]
    insert_reflection_mark: ClassVar[str]
    advance_reflection_mark: ClassVar[str]
    insert_reflection_proposal: ClassVar[str]
    get_reflection_proposal: ClassVar[str]
    list_reflection_proposals: ClassVar[str]
    run_reflection_proposals: ClassVar[str]
    move_reflection_proposal: ClassVar[str]
    delete_session_reflections: ClassVar[tuple[str, ...]]
    idle_unreflected_sessions: ClassVar[str]

    @classmethod
    def index_params(cls, text: str) -> dict[str, Any]:
        """Parameters that :attr:`index_message` / :attr:`index_entry` need besides ids."""
        raise NotImplementedError

    @classmethod
    def match_param(cls, query: str) -> str | None:
        """The bound search expression for a D5 query, or None when it has no searchable words."""
        raise NotImplementedError

    @classmethod
    def prepare_message_search(cls, database: Database) -> None:
        """Bring the message index up to date before a message search reads it.

        Called outside any transaction before every search of messages, so a search finds every
        message committed before it even where :attr:`index_message` defers the indexing.
        """
        raise NotImplementedError

    @classmethod
    def message_search_statement(
        cls, database: Database, statement: str, *, namespace: str | None = None, session_id: str | None = None
    ) -> str | None:
        """``statement`` (``search_session`` or ``search_namespace``) aimed at the index of ``namespace``.

        With ``session_id`` instead, the index of the namespace holding that session. None when
        that index holds nothing yet (the search finds nothing). As it is where one index serves
        every namespace because a hit's score reads only the hit (PostgreSQL's ``ts_rank``).
        """
        return statement

    @classmethod
    def entry_search_statement(cls, database: Database, scope: str) -> str | None:
        """``search_entries`` aimed at ``scope``'s entry index, or None when that index holds nothing."""
        return cls.search_entries

    @classmethod
    def entry_statement(cls, tx: Executor, statement: str, scope: str) -> str:
        """An entry statement aimed at ``scope``'s entry index, made first (``tx`` writes) if it is missing."""
        return statement

    @classmethod
    def purge_statements_now(cls, database: Database) -> Sequence[str]:
        """The statements that drop what deleted rows left in index structures (default: ``purge_statements``)."""
        return cls.purge_statements
