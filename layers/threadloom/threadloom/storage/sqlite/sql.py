"""Every SQL statement the SQLite backend runs, in one place.

Over 400 lines because every statement of the backend is here: SQL stays in one place per backend.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from threadloom.search import parse_query, to_fts5_match
from threadloom.storage.dialect import JUMP_SPAN, SqlDialect

MESSAGE_INDEX: Final = "<message index>"
"""Stands for the table name of one namespace's message index in a statement (see :func:`aimed_at`)."""
ENTRY_INDEX: Final = "<entry index>"
"""Stands for the table name of one scope's entry index."""
ANY_INDEX: Final = "<index>"
"""Stands for any registered index (purge)."""
CREATE_INDEX: Final = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {ANY_INDEX} USING fts5 (content, tokenize = 'porter unicode61')"
)


def message_index_name(namespace: str | None) -> str:
    """The table of ``namespace``'s message index: a hash, so no tenant text ever reaches SQL.

    ``None`` for sessions no namespace registers (the library's bare ``Session``): they share one
    index of their own, and a session registered later moves to its namespace's (migration 0024).
    """
    if namespace is None:
        return "threadloom_message_fts_unregistered"
    return "threadloom_message_fts_" + _digest(namespace)


def entry_index_name(scope: str) -> str:
    """The table of ``scope``'s search-entry index (the scope is the tenant)."""
    return "threadloom_entry_fts_" + _digest(scope)


def aimed_at(statement: str, placeholder: str, table: str) -> str:
    """``statement`` with ``placeholder`` replaced by ``table``, a name of the two functions above."""
    assert table.replace("_", "").isalnum() and table.isascii(), table
    return statement.replace(placeholder, table)


def _digest(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]


_NEXT_ACTIVITY = "(SELECT COALESCE(MAX(activity_seq), 0) + 1 FROM threadloom_sessions WHERE namespace = :namespace)"
_FORK_PATH = (
    "WITH RECURSIVE path(id, parent_id, depth) AS ("
    " SELECT id, parent_id, depth FROM threadloom_messages WHERE session_id = :sid AND id = :leaf"
    " UNION ALL"
    " SELECT m.id, m.parent_id, m.depth FROM threadloom_messages m JOIN path p"
    " ON m.session_id = :sid AND m.id = p.parent_id)"
)
# A fork's copy plan: each message on the path root→:leaf, where it lands in the new session (its
# depth shifted by the segment's offset, overlaid ranges being left out) and the tokens of the overlay
# summaries before it. New ids are :prefix plus the position in 8 hex digits (a UUID's shape).
_FORK_PLAN = (
    f"{_FORK_PATH}, plan(old_id, pos, tokens_before) AS ("
    " SELECT p.id, p.depth + s.o, s.t FROM path p CROSS JOIN (SELECT json_extract(value, '$.a') AS a,"
    " json_extract(value, '$.b') AS b, json_extract(value, '$.o') AS o, json_extract(value, '$.t') AS t"
    " FROM json_each(:segments)) s ON p.depth BETWEEN s.a AND s.b)"
)
_FORK_ID = "printf('%s%08x', :prefix, q.pos)"
# The new seq is the position + 1, so the jump (migration 0005) is the seq of position ((pos - 1) // span) * span.
_FORK_JUMP = f"CASE WHEN q.pos = 0 THEN NULL ELSE ((q.pos - 1) / {JUMP_SPAN}) * {JUMP_SPAN} + 1 END"
_PROPOSAL_COLUMNS = (
    "id, session_id, request_key, seq, label, operation, content, source_message_ids, based_on_version, status, "
    "error, applied_version, created_at, decided_at"
)
_REQUEST_COLUMNS = (
    "id, session_id, leaf_id, state, from_message_id, to_message_id, error, requested_at, started_at, finished_at"
)
_SESSION_COLUMNS = (
    "id, name, parent_session_id, model, source, input_tokens, output_tokens, estimated_cost, end_reason, "
    "created_at, updated_at, activity_seq, subject_id, legal_hold"
)


class SqliteSql(SqlDialect):
    name = "sqlite"

    create_migrations_table = (
        "CREATE TABLE IF NOT EXISTS threadloom_schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )

    ensure_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:sid, NULL, 1) "
        "ON CONFLICT (session_id) DO NOTHING"
    )
    # BEGIN IMMEDIATE already holds the database write lock, so no row lock is needed.
    lock_head = "SELECT leaf_id, next_seq FROM threadloom_session_heads WHERE session_id = :sid"
    # The append (SqliteSessionProvider.append_message) binds by position, ?1 the session id, ?2 the
    # message id: no dict to build and no parameter names to look up on the hottest path.
    # Everything an append needs to know, in one read: the head, a duplicate, the parent, an overlay end;
    # ?3 the parent asked for, ?4 whether one was (else the leaf is).
    append_context = (
        "SELECT h.leaf_id, COALESCE(h.next_seq, 1), e.id IS NOT NULL, e.parent_id, "
        "p.id IS NOT NULL, p.depth, p.path_tokens, EXISTS (SELECT 1 FROM threadloom_compactions c "
        "WHERE c.session_id = ?1 AND c.to_message_id = ?2), "
        f"CASE WHEN p.depth % {JUMP_SPAN} = 0 THEN p.seq ELSE p.jump END "
        "FROM (SELECT 1) AS one "
        "LEFT JOIN threadloom_session_heads h ON h.session_id = ?1 "
        "LEFT JOIN threadloom_messages e ON e.session_id = ?1 AND e.id = ?2 "
        "LEFT JOIN threadloom_messages p ON p.session_id = ?1 "
        "AND p.id = CASE WHEN ?4 THEN ?3 ELSE h.leaf_id END"
    )
    append_insert = (
        "INSERT INTO threadloom_messages "
        "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, jump) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    )
    # ?2 the new leaf (the message appended), ?3 the next seq.
    append_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (session_id) DO UPDATE SET leaf_id = excluded.leaf_id, next_seq = excluded.next_seq"
    )
    upsert_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:sid, :leaf, :next_seq) "
        "ON CONFLICT (session_id) DO UPDATE SET leaf_id = excluded.leaf_id, next_seq = excluded.next_seq"
    )
    set_head = "UPDATE threadloom_session_heads SET leaf_id = :leaf, next_seq = :next_seq WHERE session_id = :sid"
    set_head_seq_only = "UPDATE threadloom_session_heads SET next_seq = :next_seq WHERE session_id = :sid"
    set_head_leaf_only = "UPDATE threadloom_session_heads SET leaf_id = :leaf WHERE session_id = :sid"
    get_head_leaf = "SELECT leaf_id FROM threadloom_session_heads WHERE session_id = :sid"
    get_leaf_estimate = (
        "SELECT m.path_tokens FROM threadloom_session_heads h JOIN threadloom_messages m "
        "ON m.session_id = h.session_id AND m.id = h.leaf_id WHERE h.session_id = :sid"
    )
    find_latest_leaf = (
        "SELECT m.id FROM threadloom_messages m WHERE m.session_id = :sid AND NOT EXISTS ("
        "SELECT 1 FROM threadloom_messages c WHERE c.session_id = m.session_id AND c.parent_id = m.id) "
        "ORDER BY m.seq DESC LIMIT 1"
    )

    get_message = "SELECT content FROM threadloom_messages WHERE session_id = :sid AND id = :id"
    # A read with the tenant's check in one statement: no row when :namespace does not hold the session.
    get_message_in_namespace = (
        "SELECT m.content FROM threadloom_sessions s LEFT JOIN threadloom_messages m "
        "ON m.session_id = s.id AND m.id = :id WHERE s.namespace = :namespace AND s.id = :sid"
    )
    # The frozen prompt of a session the namespace holds: no row, not this namespace's session; a NULL, not frozen.
    get_prompt_in_namespace = (
        "SELECT b.content FROM threadloom_sessions s LEFT JOIN threadloom_context_blocks b "
        "ON b.namespace = s.namespace AND b.session_id = s.id AND b.key = :key WHERE s.namespace = :namespace "
        "AND s.id = :sid"
    )
    get_latest_leaf_in_namespace = (
        "SELECT m.content FROM threadloom_sessions s "
        "LEFT JOIN threadloom_session_heads h ON h.session_id = s.id "
        "LEFT JOIN threadloom_messages m ON m.session_id = h.session_id AND m.id = h.leaf_id "
        "WHERE s.namespace = :namespace AND s.id = :sid"
    )
    get_message_meta = (
        "SELECT parent_id, depth, tokens, path_tokens, jump, seq FROM threadloom_messages "
        "WHERE session_id = :sid AND id = :id"
    )
    insert_message = (
        "INSERT INTO threadloom_messages "
        "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, jump) "
        "VALUES (:sid, :id, :seq, :parent_id, :role, :content, :depth, :tokens, :path_tokens, :created_at, :jump)"
    )
    update_message = (
        "UPDATE threadloom_messages SET role = :role, content = :content, tokens = :tokens "
        "WHERE session_id = :sid AND id = :id"
    )
    delete_message = "DELETE FROM threadloom_messages WHERE session_id = :sid AND id = :id"
    get_children = "SELECT content FROM threadloom_messages WHERE session_id = :sid AND parent_id = :id ORDER BY seq"
    # One keyset page of children; contents only while their running size stays within :budget (the first
    # always), so a page of large messages never reads more than one response can carry.
    get_children_page = (
        "SELECT seq, CASE WHEN ROW_NUMBER() OVER (ORDER BY seq) = 1 OR SUM(size + 1) OVER (ORDER BY seq) <= :budget "
        "THEN content END FROM (SELECT seq, length(CAST(content AS BLOB)) AS size, content FROM threadloom_messages "
        "WHERE session_id = :sid AND parent_id = :id AND seq > :after_seq ORDER BY seq LIMIT :limit) AS children "
        "ORDER BY seq"
    )
    # Fork, copied in the database (SqlSessionProvider.copy_history): the overlay ends on the path, then
    # the path's rows with new ids and running estimates, then their full-text rows.
    path_overlay_ends = (
        f"{_FORK_PATH} SELECT p.id, p.depth FROM path p WHERE p.id IN ("
        "SELECT from_message_id FROM threadloom_compactions WHERE session_id = :sid UNION "
        "SELECT to_message_id FROM threadloom_compactions WHERE session_id = :sid)"
    )
    copy_path = (
        f"{_FORK_PLAN} INSERT INTO threadloom_messages "
        "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, jump) "
        f"SELECT :target, {_FORK_ID}, q.pos + 1, "
        "CASE WHEN q.pos = 0 THEN NULL ELSE printf('%s%08x', :prefix, q.pos - 1) END, "
        f"m.role, json_set(m.content, '$.id', {_FORK_ID}), q.pos, m.tokens, "
        "q.tokens_before + SUM(m.tokens) OVER (ORDER BY q.pos ROWS UNBOUNDED PRECEDING), :created_at, "
        f"{_FORK_JUMP} "
        "FROM plan q CROSS JOIN threadloom_messages m ON m.session_id = :sid AND m.id = q.old_id"
    )
    # Every copy waits to be indexed (migration 0011), in the index of its session's namespace
    # (migration 0024): a batch reads its text like an append's. CROSS JOIN fixes the join order
    # (SQLite's rule): the path first, one key lookup per copy.
    index_copied_path = (
        f"{_FORK_PLAN} INSERT OR IGNORE INTO threadloom_message_fts_pending (message_rowid) "
        "SELECT n.rowid FROM plan q "
        f"CROSS JOIN threadloom_messages n ON n.session_id = :target AND n.id = {_FORK_ID}",
    )
    set_copied_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:target, :leaf, :next_seq) "
        "ON CONFLICT (session_id) DO UPDATE SET leaf_id = excluded.leaf_id, next_seq = excluded.next_seq"
    )
    get_child_ids = "SELECT id FROM threadloom_messages WHERE session_id = :sid AND parent_id = :id ORDER BY seq"
    tree_skeleton = "SELECT id, parent_id FROM threadloom_messages WHERE session_id = :sid ORDER BY seq"
    reparent_message = "UPDATE threadloom_messages SET parent_id = :parent_id WHERE session_id = :sid AND id = :id"
    set_estimate = (
        "UPDATE threadloom_messages SET depth = :depth, path_tokens = :path_tokens WHERE session_id = :sid AND id = :id"
    )
    path_rows = (
        "WITH RECURSIVE path(id, parent_id, content, depth) AS ("
        " SELECT id, parent_id, content, depth FROM threadloom_messages WHERE session_id = :sid AND id = :leaf"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.content, m.depth FROM threadloom_messages m JOIN path p"
        " ON m.session_id = :sid AND m.id = p.parent_id"
        ") SELECT id, content FROM path ORDER BY depth"
    )
    path_ids_up = (
        "WITH RECURSIVE path(id, parent_id, steps) AS ("
        " SELECT id, parent_id, 0 FROM threadloom_messages WHERE session_id = :sid AND id = :start"
        " UNION ALL"
        " SELECT m.id, m.parent_id, p.steps + 1 FROM threadloom_messages m JOIN path p"
        " ON m.session_id = :sid AND m.id = p.parent_id WHERE p.steps < :max_steps"
        ") SELECT id FROM path ORDER BY steps"
    )
    # Row by row instead (set_estimate): a statement costs no round trip here, and SQLite joined an
    # UPDATE ... FROM json_each(:rows) by scanning the JSON for every row (an edit at 10,000 messages: 33 s).
    set_path_tokens = ""
    subtree = (
        "WITH RECURSIVE sub(id, parent_id, tokens, depth, level) AS ("
        " SELECT id, parent_id, tokens, depth, 0 FROM threadloom_messages WHERE session_id = :sid AND id = :root"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.tokens, m.depth, s.level + 1 FROM threadloom_messages m JOIN sub s"
        " ON m.session_id = :sid AND m.parent_id = s.id"
        ") SELECT id, parent_id, tokens, depth FROM sub ORDER BY level"
    )
    history_page_rows = (
        "WITH RECURSIVE down(id, seq, jump, depth) AS ("
        " SELECT id, seq, jump, depth FROM threadloom_messages WHERE session_id = :sid AND id = COALESCE("
        "(SELECT a.id FROM threadloom_messages a WHERE a.session_id = :sid AND a.seq = :anchor_seq"
        " AND a.id = :anchor_id AND a.depth >= :last), :leaf)"
        " UNION ALL"
        " SELECT m.id, m.seq, m.jump, m.depth FROM threadloom_messages m JOIN down d"
        " ON m.session_id = :sid AND m.seq = d.jump"
        f" WHERE d.depth > :last AND ((d.depth - 1) / {JUMP_SPAN}) * {JUMP_SPAN} >= :last"
        "), near(id, parent_id, depth) AS ("
        " SELECT m.id, m.parent_id, m.depth FROM threadloom_messages m"
        " WHERE m.session_id = :sid AND m.id = (SELECT id FROM down WHERE depth = (SELECT MIN(depth) FROM down))"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.depth FROM threadloom_messages m JOIN near n"
        " ON m.session_id = :sid AND m.id = n.parent_id WHERE n.depth > :last"
        # The page walks up from its deepest row, so each row learns the bytes below it (no window
        # function sorting the page); a content is read by rowid only while the bytes from :first
        # down to it stay within :budget. LIMIT -1 keeps SQLite from copying the content's subquery
        # into each JSON check (the checks: see SqlDialect.history_page_rows).
        "), page(id, parent_id, depth, r, size, below) AS ("
        " SELECT m.id, m.parent_id, m.depth, m.rowid, length(CAST(m.content AS BLOB)), 0 FROM threadloom_messages m"
        " WHERE m.session_id = :sid AND m.id = (SELECT id FROM near WHERE depth = (SELECT MIN(depth) FROM near))"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.depth, m.rowid, length(CAST(m.content AS BLOB)), p.below + p.size + 1"
        " FROM threadloom_messages m JOIN page p ON m.session_id = :sid AND m.id = p.parent_id WHERE p.depth > :first"
        ") SELECT depth, id, size, content, CASE WHEN json_valid(content) THEN json_type(content, '$.id') = 'text'"
        " AND json_type(content, '$.role') = 'text' AND json_type(content, '$.parts') = 'array' ELSE 0 END FROM ("
        " SELECT depth, id, size, CASE WHEN (SELECT SUM(size + 1) FROM page WHERE depth >= :first AND depth <= :last)"
        " - below <= :budget THEN (SELECT content FROM threadloom_messages WHERE rowid = r) END AS content"
        " FROM page WHERE depth >= :first AND depth <= :last LIMIT -1) AS rows"
        " UNION ALL SELECT -1, id, depth, NULL, 0 FROM threadloom_messages WHERE session_id = :sid AND id = :leaf"
        " UNION ALL SELECT -2, id, seq, NULL, 0 FROM ("
        "SELECT id, seq FROM down WHERE depth >= :hint AND id <> :leaf ORDER BY depth LIMIT 1)"
    )
    history_page_rows_at_head = ""  # the reader's transaction reads the head first (no round trip to save)
    history_page_contents = (
        "WITH RECURSIVE page(id, parent_id, depth, content) AS ("
        " SELECT id, parent_id, depth, content FROM threadloom_messages WHERE session_id = :sid AND id = :start"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.depth, m.content FROM threadloom_messages m JOIN page p"
        " ON m.session_id = :sid AND m.id = p.parent_id WHERE p.depth > :first"
        ") SELECT depth, id, content FROM page"
    )
    clear_messages = "DELETE FROM threadloom_messages WHERE session_id = :sid"
    clear_head = "UPDATE threadloom_session_heads SET leaf_id = NULL WHERE session_id = :sid"

    # A message is not indexed in the transaction that writes it: its rowid waits in
    # threadloom_message_fts_pending (migration 0011) until a batch indexes it, before any search
    # (threadloom.storage.sqlite.search_index). A message without searchable text never waits.
    index_message = (
        "INSERT OR IGNORE INTO threadloom_message_fts_pending (message_rowid) "
        "SELECT rowid FROM threadloom_messages WHERE session_id = :sid AND id = :id AND :text <> ''"
    )
    # The append's (SqliteSessionProvider._insert_row): ?1 the new row's rowid. OR IGNORE: a rowid
    # freed by a deleted message that was still waiting may be waiting already.
    pend_row = "INSERT OR IGNORE INTO threadloom_message_fts_pending (message_rowid) VALUES (?)"
    # A batch (search_index.index_pending), oldest rowid first: ?1 how many. A NULL content is a
    # message deleted while it waited; the namespace names the index the row goes to.
    any_pending = (
        "SELECT EXISTS (SELECT 1 FROM threadloom_message_fts_pending) "
        "OR EXISTS (SELECT 1 FROM threadloom_message_fts_stale)"
    )
    pending_rows = (
        "SELECT p.message_rowid, m.content, s.namespace FROM threadloom_message_fts_pending p "
        "LEFT JOIN threadloom_messages m ON m.rowid = p.message_rowid "
        "LEFT JOIN threadloom_sessions s ON s.id = m.session_id ORDER BY p.message_rowid LIMIT ?"
    )
    # OR REPLACE: whatever the index holds under that rowid gives way to the message's current text.
    index_pending_row = f"INSERT OR REPLACE INTO {MESSAGE_INDEX} (rowid, content) VALUES (?, ?)"
    # ?1 the last rowid of the batch: every waiting rowid up to it was read by the batch.
    drop_pending_rows = "DELETE FROM threadloom_message_fts_pending WHERE message_rowid <= ?"
    # Deleting or rewriting a message names its indexed row for removal from its namespace's index
    # (migration 0024); a batch removes them before it indexes any waiting row (a rowid may be reused).
    unindex_message = (
        "INSERT INTO threadloom_message_fts_stale (message_rowid, namespace) "
        "SELECT m.rowid, s.namespace FROM threadloom_messages m LEFT JOIN threadloom_sessions s ON s.id = m.session_id "
        "WHERE m.session_id = :sid AND m.id = :id"
    )
    unindex_session = (
        "INSERT INTO threadloom_message_fts_stale (message_rowid, namespace) "
        "SELECT m.rowid, s.namespace FROM threadloom_messages m LEFT JOIN threadloom_sessions s ON s.id = m.session_id "
        "WHERE m.session_id = :sid"
    )
    # ?1 how many; a NULL namespace is the index of unregistered sessions.
    stale_rows = "SELECT rowid, message_rowid, namespace FROM threadloom_message_fts_stale ORDER BY rowid LIMIT ?"
    unindex_stale_row = f"DELETE FROM {MESSAGE_INDEX} WHERE rowid = ?"
    # ?1 the last row of the batch.
    drop_stale_rows = "DELETE FROM threadloom_message_fts_stale WHERE rowid <= ?"
    # The full-text indexes, one per namespace (messages) and per scope (entries), created on first
    # use and named by a hash of their owner (:func:`message_index_name`, :func:`entry_index_name`).
    search_index_exists = "SELECT 1 FROM threadloom_search_indexes WHERE name = :name"
    register_search_index = (
        "INSERT OR IGNORE INTO threadloom_search_indexes (name, kind, owner) VALUES (:name, :kind, :owner)"
    )
    search_index_names = "SELECT name FROM threadloom_search_indexes ORDER BY name"
    session_namespace_of = "SELECT namespace FROM threadloom_sessions WHERE id = :sid"
    search_session = (
        f"SELECT m.id, m.role, f.content, m.created_at, m.session_id FROM {MESSAGE_INDEX} f "
        "JOIN threadloom_messages m ON m.rowid = f.rowid "
        f"WHERE {MESSAGE_INDEX} MATCH :match AND m.session_id = :sid ORDER BY f.rank, m.seq LIMIT :limit"
    )
    search_namespace = (
        f"SELECT m.id, m.role, f.content, m.created_at, m.session_id FROM {MESSAGE_INDEX} f "
        "JOIN threadloom_messages m ON m.rowid = f.rowid "
        "JOIN threadloom_sessions s ON s.id = m.session_id "
        f"WHERE {MESSAGE_INDEX} MATCH :match AND s.namespace = :namespace "
        "ORDER BY f.rank, s.created_at, m.session_id, m.seq LIMIT :limit"
    )

    get_compactions = (
        "SELECT id, summary, from_message_id, to_message_id, created_at FROM threadloom_compactions "
        "WHERE session_id = :sid ORDER BY seq"
    )
    get_compaction_targets = "SELECT DISTINCT to_message_id FROM threadloom_compactions WHERE session_id = :sid"
    get_latest_compaction_id = "SELECT id FROM threadloom_compactions WHERE session_id = :sid ORDER BY seq DESC LIMIT 1"
    find_compaction_by_request = (
        "SELECT id, summary, from_message_id, to_message_id, created_at FROM threadloom_compactions "
        "WHERE session_id = :sid AND request_key = :request_key"
    )
    insert_compaction = (
        "INSERT INTO threadloom_compactions "
        "(session_id, id, seq, summary, from_message_id, to_message_id, request_key, created_at) "
        "VALUES (:sid, :id, :seq, :summary, :from_id, :to_id, :request_key, :created_at)"
    )
    compactions_touching = (
        "SELECT id, from_message_id, to_message_id FROM threadloom_compactions "
        "WHERE session_id = :sid AND (from_message_id = :id OR to_message_id = :id)"
    )
    delete_compaction = "DELETE FROM threadloom_compactions WHERE session_id = :sid AND id = :id"
    clear_compactions = "DELETE FROM threadloom_compactions WHERE session_id = :sid"

    get_block = (
        "SELECT content FROM threadloom_context_blocks "
        "WHERE namespace = :namespace AND session_id = :sid AND key = :key"
    )
    upsert_block = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
        "VALUES (:namespace, :sid, :key, :content, :now) ON CONFLICT (namespace, session_id, key) "
        "DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
    )
    insert_prompt_if_absent = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
        "VALUES (:namespace, :sid, :key, :content, :now) "
        "ON CONFLICT (namespace, session_id, key) DO NOTHING RETURNING content"
    )
    delete_block = (
        "DELETE FROM threadloom_context_blocks WHERE namespace = :namespace AND session_id = :sid AND key = :key"
    )
    delete_session_blocks = "DELETE FROM threadloom_context_blocks WHERE namespace = :namespace AND session_id = :sid"

    # Versioned writable blocks (issue 26; migrations 0020-0022). A session-scoped block lives in
    # threadloom_context_blocks (owner: namespace, session id), a subject or tenant block in
    # threadloom_shared_blocks (owner: namespace, scope, subject id; '' for the tenant). A change
    # updates the row only when it still has the version it was based on, and returns the new one.
    session_block_read = (
        "SELECT content, version FROM threadloom_context_blocks WHERE namespace = :namespace AND session_id = :sid "
        "AND key = :key"
    )
    session_block_update_if = (
        "UPDATE threadloom_context_blocks SET content = :content, version = version + 1, updated_at = :now "
        "WHERE namespace = :namespace AND session_id = :sid AND key = :key AND version = :based_on RETURNING version"
    )
    session_block_update = (
        "UPDATE threadloom_context_blocks SET content = :content, version = version + 1, updated_at = :now "
        "WHERE namespace = :namespace AND session_id = :sid AND key = :key RETURNING version"
    )
    session_block_insert = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, version, updated_at) "
        "VALUES (:namespace, :sid, :key, :content, 1, :now) "
        "ON CONFLICT (namespace, session_id, key) DO NOTHING RETURNING version"
    )
    shared_block_read = (
        "SELECT content, version FROM threadloom_shared_blocks WHERE namespace = :namespace AND scope = :scope AND "
        "subject_id = :subject AND key = :key"
    )
    shared_block_update_if = (
        "UPDATE threadloom_shared_blocks SET content = :content, version = version + 1, updated_at = :now "
        "WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject AND key = :key AND version = "
        ":based_on RETURNING version"
    )
    shared_block_update = (
        "UPDATE threadloom_shared_blocks SET content = :content, version = version + 1, updated_at = :now "
        "WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject AND key = :key RETURNING version"
    )
    shared_block_insert = (
        "INSERT INTO threadloom_shared_blocks (namespace, scope, subject_id, key, content, version, updated_at) "
        "VALUES (:namespace, :scope, :subject, :key, :content, 1, :now) "
        "ON CONFLICT (namespace, scope, subject_id, key) DO NOTHING RETURNING version"
    )
    insert_block_version = (
        "INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, size_bytes, "
        "source, session_id, message_ids, request_id, note, created_at) "
        "VALUES (:namespace, :scope, :owner, :key, :version, :content, :size_bytes, :source, :session_id, "
        ":message_ids, :request_id, :note, :now)"
    )
    # Newest first, below :before; the content only while the running size (newest first) stays
    # within :budget bytes (the first row always has it), so a page never reads more than it returns.
    block_versions_page = (
        "SELECT version, size_bytes, source, session_id, message_ids, request_id, note, created_at, "
        "CASE WHEN running <= :budget OR running = size_bytes THEN content END FROM ("
        "SELECT version, size_bytes, source, session_id, message_ids, request_id, note, created_at, content, "
        "SUM(size_bytes) OVER (ORDER BY version DESC) AS running FROM threadloom_block_versions "
        "WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner AND key = :key AND version < :before "
        "ORDER BY version DESC LIMIT :limit) AS page "
        "ORDER BY version DESC"
    )
    get_block_version = (
        "SELECT version, size_bytes, source, session_id, message_ids, request_id, note, created_at, content "
        "FROM threadloom_block_versions WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner AND key "
        "= :key AND version = :version"
    )
    prune_block_versions = (
        "DELETE FROM threadloom_block_versions WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner "
        "AND key = :key "
        "AND (version < :oldest_kept OR (created_at < :cutoff AND version < :version))"
    )
    delete_owner_versions = (
        "DELETE FROM threadloom_block_versions WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner"
    )
    count_owner_versions = (
        "SELECT COUNT(*) FROM threadloom_block_versions "
        "WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner"
    )
    # A removed session's links from the versions it made of blocks that outlive it (0022).
    unlink_session_versions = (
        "UPDATE threadloom_block_versions SET session_id = NULL, message_ids = '[]' "
        "WHERE namespace = :namespace AND session_id = :sid AND NOT (scope = 'session' AND owner_id = :sid)"
    )
    subject_blocks = (
        "SELECT key, content, version, updated_at FROM threadloom_shared_blocks "
        "WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject ORDER BY key"
    )
    delete_subject_blocks = (
        "DELETE FROM threadloom_shared_blocks WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject"
    )
    owner_versions = (
        "SELECT key, version, size_bytes, source, session_id, message_ids, request_id, note, created_at, content "
        "FROM threadloom_block_versions WHERE namespace = :namespace AND scope = :scope AND owner_id = :owner "
        "ORDER BY key, version"
    )
    import_shared_block = (
        "INSERT INTO threadloom_shared_blocks (namespace, scope, subject_id, key, content, version, updated_at) "
        "VALUES (:namespace, :scope, :subject, :key, :content, :version, :now) "
        "ON CONFLICT (namespace, scope, subject_id, key) DO NOTHING RETURNING version"
    )
    import_block_version = (
        "INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, size_bytes, "
        "source, session_id, message_ids, request_id, note, created_at) "
        "VALUES (:namespace, :scope, :owner, :key, :version, :content, :size_bytes, :source, :session_id, "
        ":message_ids, :request_id, :note, :now) ON CONFLICT DO NOTHING"
    )

    # One row kept by triggers (migration 0025): no block is counted row by row.
    count_entries = (
        "SELECT COALESCE((SELECT entries FROM threadloom_entry_counts WHERE scope = :scope AND label = :label), 0)"
    )
    # Inside a write transaction, which BEGIN IMMEDIATE already holds alone: the count cannot move before it ends.
    lock_entry_count = count_entries
    entries_page = (
        "SELECT key, content, created_at, updated_at FROM threadloom_search_entries "
        "WHERE scope = :scope AND label = :label AND key > :after ORDER BY key LIMIT :limit"
    )
    get_entry = (
        "SELECT key, content, created_at, updated_at FROM threadloom_search_entries "
        "WHERE scope = :scope AND label = :label AND key = :key"
    )
    export_entries = (
        "SELECT label, key, content, created_at, updated_at FROM threadloom_search_entries "
        "WHERE scope = :scope AND (label, key) > (:after_label, :after_key) ORDER BY label, key LIMIT :limit"
    )
    entry_contents = (
        "SELECT key, content FROM threadloom_search_entries "
        "WHERE scope = :scope AND label = :label AND key IN (SELECT value FROM json_each(:keys))"
    )
    import_entries = (
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
        "SELECT :scope, json_extract(e.value, '$.label'), json_extract(e.value, '$.key'), "
        "json_extract(e.value, '$.content'), json_extract(e.value, '$.created_at'), "
        "json_extract(e.value, '$.updated_at') FROM json_each(:entries) AS e WHERE true "
        "ON CONFLICT (scope, label, key) DO NOTHING RETURNING label, key"
    )
    delete_entry = (
        "DELETE FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key RETURNING key"
    )
    entry_exists = "SELECT 1 FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key"
    upsert_entry = (
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
        "VALUES (:scope, :label, :key, :content, :now, :now) "
        "ON CONFLICT (scope, label, key) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
    )
    unindex_entry = (
        f"DELETE FROM {ENTRY_INDEX} WHERE rowid = (SELECT rowid FROM threadloom_search_entries "
        "WHERE scope = :scope AND label = :label AND key = :key)"
    )
    index_entry = (
        f"INSERT INTO {ENTRY_INDEX} (rowid, content) SELECT rowid, :text "
        "FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key"
    )
    # A scope's index made on first use holds its entries as ``index_entry`` would have (the text
    # indexed is the entry's content): what migration 0024 took from the shared table comes back.
    fill_entry_index = (
        f"INSERT INTO {ENTRY_INDEX} (rowid, content) SELECT rowid, content FROM threadloom_search_entries "
        "WHERE scope = :scope"
    )
    scope_has_entries = "SELECT 1 FROM threadloom_search_entries WHERE scope = :scope LIMIT 1"
    search_entries = (
        f"SELECT e.key, e.content FROM {ENTRY_INDEX} f "
        "JOIN threadloom_search_entries e ON e.rowid = f.rowid "
        f"WHERE {ENTRY_INDEX} MATCH :match AND e.scope = :scope AND e.label = :label "
        "ORDER BY f.rank, e.key LIMIT :limit"
    )

    get_loaded_skills = "SELECT skill_id FROM threadloom_loaded_skills WHERE session_id = :sid ORDER BY skill_id"
    clear_loaded_skills = "DELETE FROM threadloom_loaded_skills WHERE session_id = :sid"
    add_loaded_skill = (
        "INSERT INTO threadloom_loaded_skills (session_id, skill_id) VALUES (:sid, :skill_id) "
        "ON CONFLICT (session_id, skill_id) DO NOTHING"
    )

    insert_session = (
        "INSERT INTO threadloom_sessions (id, namespace, name, parent_session_id, model, source, subject_id, "
        "created_at, updated_at, activity_seq) VALUES (:id, :namespace, :name, :parent_session_id, :model, :source, "
        f":subject_id, :now, :now, {_NEXT_ACTIVITY}) RETURNING {_SESSION_COLUMNS}"
    )
    get_session = f"SELECT {_SESSION_COLUMNS} FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    session_subject = "SELECT subject_id FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    session_required = None  # the check runs in process, before the block: nothing to skip
    count_sessions = "SELECT COUNT(*) FROM threadloom_sessions WHERE namespace = :namespace"
    get_setting = "SELECT value FROM threadloom_settings WHERE name = :name"
    list_sessions = (
        f"SELECT {_SESSION_COLUMNS} FROM threadloom_sessions WHERE namespace = :namespace "
        "ORDER BY activity_seq DESC, id DESC LIMIT :limit"
    )
    # The latest leaf's depth and the start of its first non-empty text part, for the given ids (a JSON
    # array) of the namespace: one indexed row per session, whatever the length of its history.
    session_overviews = (
        "SELECT s.id, m.depth + 1, m.role, ("
        "SELECT substr(json_extract(p.value, '$.text'), 1, :chars) FROM json_each(m.content, '$.parts') AS p "
        "WHERE json_extract(p.value, '$.type') = 'text' AND json_extract(p.value, '$.text') <> '' LIMIT 1) "
        "FROM threadloom_sessions AS s "
        "JOIN threadloom_session_heads AS h ON h.session_id = s.id "
        "JOIN threadloom_messages AS m ON m.session_id = h.session_id AND m.id = h.leaf_id "
        "WHERE s.namespace = :namespace AND s.id IN (SELECT value FROM json_each(:ids))"
    )
    list_sessions_after = (
        f"SELECT {_SESSION_COLUMNS} FROM threadloom_sessions WHERE namespace = :namespace "
        # A row comparison is an index range on (namespace, activity_seq DESC, id DESC): O(page) at any
        # depth, where the equivalent OR was a filter over every row before the cursor on PostgreSQL.
        "AND (activity_seq, id) < (:after_seq, :after_id) "
        "ORDER BY activity_seq DESC, id DESC LIMIT :limit"
    )
    rename_session = (
        "UPDATE threadloom_sessions SET name = :name, updated_at = :now, "
        f"activity_seq = {_NEXT_ACTIVITY} WHERE namespace = :namespace AND id = :id RETURNING {_SESSION_COLUMNS}"
    )
    touch_session = (
        f"UPDATE threadloom_sessions SET updated_at = :now, activity_seq = {_NEXT_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id RETURNING subject_id"
    )
    # The new totals are bounded in the statement itself, so no sum can overflow or reach infinity.
    add_usage = (
        "UPDATE threadloom_sessions SET input_tokens = input_tokens + :input_tokens, "
        "output_tokens = output_tokens + :output_tokens, estimated_cost = estimated_cost + :cost, updated_at = :now, "
        f"activity_seq = {_NEXT_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id AND input_tokens + :input_tokens <= :max_tokens "
        "AND output_tokens + :output_tokens <= :max_tokens AND estimated_cost + :cost <= :max_cost "
        f"RETURNING {_SESSION_COLUMNS}"
    )
    end_session = (
        "UPDATE threadloom_sessions SET end_reason = :reason, updated_at = :now, "
        f"activity_seq = {_NEXT_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id RETURNING id"
    )
    delete_session = "DELETE FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    set_legal_hold = "UPDATE threadloom_sessions SET legal_hold = :hold WHERE namespace = :namespace AND id = :id"
    delete_head = "DELETE FROM threadloom_session_heads WHERE session_id = :sid"

    # Data lifecycle: whole-session export/import, retention and subject erasure (threadloom.lifecycle).
    insert_message_indexed = ""  # the FTS5 row is a second statement (cheap in-process)
    export_head = "SELECT leaf_id, next_seq FROM threadloom_session_heads WHERE session_id = :sid"
    export_messages = (
        "SELECT id, parent_id, seq, content, created_at FROM threadloom_messages WHERE session_id = :sid ORDER BY seq"
    )
    export_compactions = (
        "SELECT id, seq, summary, from_message_id, to_message_id, request_key, created_at "
        "FROM threadloom_compactions WHERE session_id = :sid ORDER BY seq"
    )
    export_blocks = (
        "SELECT key, content, updated_at FROM threadloom_context_blocks "
        "WHERE namespace = :namespace AND session_id = :sid ORDER BY key"
    )
    session_namespace = "SELECT namespace FROM threadloom_sessions WHERE id = :id"
    import_session = (
        "INSERT INTO threadloom_sessions (id, namespace, name, parent_session_id, model, source, input_tokens, "
        "output_tokens, estimated_cost, end_reason, subject_id, legal_hold, created_at, updated_at, activity_seq) "
        "VALUES (:id, :namespace, :name, :parent_session_id, :model, :source, :input_tokens, :output_tokens, "
        f":estimated_cost, :end_reason, :subject_id, :legal_hold, :created_at, :updated_at, {_NEXT_ACTIVITY})"
    )
    import_head = "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:sid, :leaf, :next_seq)"
    import_block = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) "
        "VALUES (:namespace, :sid, :key, :content, :updated_at)"
    )
    subject_sessions = (
        "SELECT id FROM threadloom_sessions WHERE namespace = :namespace AND subject_id = :subject ORDER BY id"
    )
    child_sessions = (
        "SELECT id FROM threadloom_sessions WHERE namespace = :namespace AND parent_session_id = :parent ORDER BY id"
    )
    message_ids = "SELECT id FROM threadloom_messages WHERE session_id = :sid"
    compaction_ids = "SELECT id FROM threadloom_compactions WHERE session_id = :sid"
    block_keys = "SELECT key FROM threadloom_context_blocks WHERE namespace = :namespace AND session_id = :sid"
    # Oldest inactive, unheld sessions first; keyset on (updated_at, id); '' namespace means every namespace.
    expired_sessions = (
        "SELECT namespace, id, updated_at FROM threadloom_sessions "
        "WHERE legal_hold = 0 AND updated_at < :cutoff AND (:namespace = '' OR namespace = :namespace) "
        "AND (updated_at > :after_time OR (updated_at = :after_time AND id > :after_id)) "
        "ORDER BY updated_at, id LIMIT :limit"
    )
    # Re-checked inside the deleting transaction: a session touched or held meanwhile is kept.
    lock_expired_session = (
        "SELECT 1 FROM threadloom_sessions "
        "WHERE namespace = :namespace AND id = :id AND legal_hold = 0 AND updated_at < :cutoff"
    )
    lock_session = "SELECT 1 FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    # Erasure must not leave text behind: freed pages are zeroed, and merging the FTS5 segments drops
    # the deleted rows' terms, which FTS5 otherwise keeps in older segments until a later merge.
    erase_setup = "PRAGMA secure_delete = ON"
    # Per index (SqliteDialect.purge_statements_now lists them), once deleted rows have left it.
    purge_statements = ()
    optimize_index = f"INSERT INTO {ANY_INDEX} ({ANY_INDEX}) VALUES ('optimize')"

    # Compaction requests (tracked for GET /sessions/{id}/status).
    upsert_compaction_request = (
        "INSERT INTO threadloom_compaction_requests "
        "(namespace, id, request_key, session_id, seq, leaf_id, state, requested_at) "
        "VALUES (:namespace, :id, :request_key, :sid, (SELECT COALESCE(MAX(seq), 0) + 1 "
        "FROM threadloom_compaction_requests WHERE namespace = :namespace AND session_id = :sid), "
        ":leaf_id, 'queued', :now) "
        "ON CONFLICT (namespace, request_key) DO UPDATE SET state = 'queued', seq = excluded.seq, "
        "requested_at = excluded.requested_at, started_at = NULL, finished_at = NULL, error = NULL "
        "WHERE threadloom_compaction_requests.state = 'failed'"
    )
    start_compaction_request = (
        "UPDATE threadloom_compaction_requests SET state = 'running', started_at = :now, finished_at = NULL, "
        "error = NULL WHERE namespace = :namespace AND request_key = :request_key"
    )
    finish_compaction_request = (
        "UPDATE threadloom_compaction_requests SET state = :state, from_message_id = :from_id, "
        "to_message_id = :to_id, error = :error, finished_at = :now "
        "WHERE namespace = :namespace AND request_key = :request_key"
    )
    get_compaction_request = (
        f"SELECT {_REQUEST_COLUMNS} FROM threadloom_compaction_requests WHERE namespace = :namespace AND id = :id"
    )
    get_compaction_request_by_key = (
        f"SELECT {_REQUEST_COLUMNS} FROM threadloom_compaction_requests "
        "WHERE namespace = :namespace AND request_key = :request_key"
    )
    latest_compaction_request = (
        f"SELECT {_REQUEST_COLUMNS} FROM threadloom_compaction_requests "
        "WHERE namespace = :namespace AND session_id = :sid ORDER BY seq DESC, requested_at DESC LIMIT 1"
    )
    delete_session_compaction_requests = (
        "DELETE FROM threadloom_compaction_requests WHERE namespace = :namespace AND session_id = :sid"
    )

    # Reflection (storage/reflections.py): a run row per request key and the watermark move in one transaction.
    get_reflection_mark = (
        "SELECT message_id, request_key, updated_at FROM threadloom_reflection_marks "
        "WHERE namespace = :namespace AND session_id = :sid"
    )
    insert_reflection_run = (
        "INSERT INTO threadloom_reflection_runs "
        "(namespace, request_key, session_id, after_message_id, to_message_id, messages_read, proposals, created_at) "
        "VALUES (:namespace, :request_key, :sid, :after_id, :to_id, :messages_read, :proposals, :now) "
        "ON CONFLICT (namespace, request_key) DO NOTHING RETURNING request_key"
    )
    insert_reflection_mark = (
        "INSERT INTO threadloom_reflection_marks (namespace, session_id, message_id, request_key, updated_at) "
        "VALUES (:namespace, :sid, :to_id, :request_key, :now) "
        "ON CONFLICT (namespace, session_id) DO NOTHING RETURNING session_id"
    )
    advance_reflection_mark = (
        "UPDATE threadloom_reflection_marks SET message_id = :to_id, request_key = :request_key, updated_at = :now "
        "WHERE namespace = :namespace AND session_id = :sid AND message_id = :after_id RETURNING session_id"
    )
    insert_reflection_proposal = (
        "INSERT INTO threadloom_reflection_proposals (namespace, id, session_id, request_key, seq, label, operation, "
        "content, source_message_ids, based_on_version, status, created_at) "
        "VALUES (:namespace, :id, :sid, :request_key, (SELECT COALESCE(MAX(seq), 0) + 1 "
        "FROM threadloom_reflection_proposals WHERE namespace = :namespace AND session_id = :sid), "
        ":label, :operation, :content, :sources, :based_on, :status, :now)"
    )
    get_reflection_proposal = (
        f"SELECT {_PROPOSAL_COLUMNS} FROM threadloom_reflection_proposals "
        "WHERE namespace = :namespace AND session_id = :sid AND id = :id"
    )
    list_reflection_proposals = (
        f"SELECT {_PROPOSAL_COLUMNS} FROM threadloom_reflection_proposals "
        "WHERE namespace = :namespace AND session_id = :sid AND (:status IS NULL OR status = :status) "
        "AND seq > :after_seq ORDER BY seq LIMIT :limit"
    )
    run_reflection_proposals = (
        f"SELECT {_PROPOSAL_COLUMNS} FROM threadloom_reflection_proposals "
        "WHERE namespace = :namespace AND request_key = :request_key "
        "AND (:status IS NULL OR status = :status) ORDER BY seq"
    )
    move_reflection_proposal = (
        "UPDATE threadloom_reflection_proposals SET status = :to_status, error = :error, "
        "applied_version = :applied_version, decided_at = :now "
        "WHERE namespace = :namespace AND session_id = :sid AND id = :id AND status = :from_status RETURNING id"
    )
    # Every tenant's sessions last active in [:active_after, :idle_before) with activity after their last
    # reflection: what the idle sweep queues (an operator read across namespaces, as retention's).
    idle_unreflected_sessions = (
        "SELECT s.namespace, s.id FROM threadloom_sessions s LEFT JOIN threadloom_reflection_marks m "
        "ON m.namespace = s.namespace AND m.session_id = s.id "
        "WHERE s.updated_at < :idle_before AND s.updated_at >= :active_after "
        "AND (m.updated_at IS NULL OR m.updated_at < s.updated_at) "
        "ORDER BY s.updated_at, s.namespace, s.id LIMIT :limit"
    )
    delete_session_reflections = (
        "DELETE FROM threadloom_reflection_proposals WHERE namespace = :namespace AND session_id = :sid",
        "DELETE FROM threadloom_reflection_runs WHERE namespace = :namespace AND session_id = :sid",
        "DELETE FROM threadloom_reflection_marks WHERE namespace = :namespace AND session_id = :sid",
    )

    @classmethod
    def index_params(cls, text: str) -> dict[str, Any]:
        return {"text": text}

    @classmethod
    def match_param(cls, query: str) -> str | None:
        return to_fts5_match(parse_query(query))
