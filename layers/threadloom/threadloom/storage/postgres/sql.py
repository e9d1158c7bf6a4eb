"""Every SQL statement the PostgreSQL backend runs, in one place.

Mirrors :mod:`threadloom.storage.sqlite.sql`. Differences: the head row is locked with
``FOR UPDATE`` (SQLite's write lock is database-wide), the search index is a tsvector
column of the row itself (so ``unindex_*`` are empty: deleting or rewriting the row
updates the index), and a few single-statement reads and the append function cut network
round trips (see :mod:`threadloom.storage.postgres.tree`).

Over 400 lines because every statement of the backend is here: SQL stays in one place per backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

from threadloom.search import parse_query, to_tsquery_literal, to_tsvector_literal
from threadloom.storage.dialect import JUMP_SPAN, SqlDialect

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from threadloom.storage.database import Database, Params

# The recursive step of every walk up the tree: the parent of each row, by the primary key. As a
# LATERAL subquery with LIMIT 1 the planner has one way to run it, a probe per step. As a plain join it
# could hash the walked row against every row of the session: the session filter alone has no
# statistics (migration 0006), so in a table of some thousand rows it guesses 15 rows a session, and a
# 2,000-message session of a young deployment then took 0.66 s to read instead of 9 ms (O(n^2)).
_STEP_UP = (
    " FROM {walk} p CROSS JOIN LATERAL (SELECT {columns} FROM threadloom_messages"
    " WHERE session_id = :sid AND id = p.parent_id LIMIT 1) AS m"
)


def _children_of(parent: str, *, rows: str = "", session: str = "CAST(:sid AS text)") -> str:
    """The condition "a child of ``parent`` in ``session``" that the children index (migration 0024) answers.

    The index keys each row on a 64-bit hash of (session, parent); the plain predicates beside it make
    a collision cost a row read, never a wrong row.
    """
    key = f"hashtextextended({rows}session_id || '/' || {rows}parent_id, 0)"
    return (
        f"{key} = hashtextextended({session} || '/' || {parent}, 0) "
        f"AND {rows}session_id = {session} AND {rows}parent_id = {parent}"
    )


def _minute_of(parameter: str) -> str:
    """The ``updated_minute`` (migration 0033) of a timestamp parameter: a bound its index can use."""
    return f"date_trunc('minute', CAST({parameter} AS timestamptz) AT TIME ZONE 'UTC')"


_NEXT_ACTIVITY = "(SELECT COALESCE(MAX(activity_seq), 0) + 1 FROM threadloom_sessions WHERE namespace = :namespace)"
# An update's activity (0033, as the registered appends): kept when the session is already listed first,
# so the update changes no indexed value and stays HOT; else the first one's + 1, the namespace's next.
_MOVED_ACTIVITY = (
    "COALESCE((SELECT f.activity_seq + 1 FROM (SELECT a.activity_seq, a.id FROM threadloom_sessions a "
    "WHERE a.namespace = :namespace ORDER BY a.activity_seq DESC, a.id DESC LIMIT 1) f "
    "WHERE f.id <> threadloom_sessions.id), activity_seq)"
)
_FORK_PATH = (
    "WITH RECURSIVE path(id, parent_id, depth) AS ("
    " SELECT id, parent_id, depth FROM threadloom_messages WHERE session_id = :sid AND id = :leaf"
    " UNION ALL"
    " SELECT m.id, m.parent_id, m.depth" + _STEP_UP.format(walk="path", columns="id, parent_id, depth") + ")"
)
# A fork's copy plan: each message on the path root→:leaf, where it lands in the new session (its
# depth shifted by the segment's offset, overlaid ranges being left out) and the tokens of the overlay
# summaries before it. New ids are :prefix plus the position in 8 hex digits (a UUID's shape).
_FORK_PLAN = (
    f"{_FORK_PATH}, plan(old_id, pos, tokens_before) AS ("
    " SELECT p.id, p.depth + s.o, s.t FROM path p"
    " JOIN json_to_recordset(CAST(:segments AS json)) AS s(a bigint, b bigint, o bigint, t bigint)"
    " ON p.depth BETWEEN s.a AND s.b)"
)
_FORK_PREFIX = "CAST(:prefix AS text)"
_FORK_ID = f"{_FORK_PREFIX} || lpad(to_hex(q.pos), 8, '0')"
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
_MATCH = "CAST(:match AS tsquery)"
# The leaf a read starts from: the given id, or the session's latest leaf when none is given.
_LEAF = (
    "COALESCE(NULLIF(CAST(:leaf AS text), ''), "
    "(SELECT h.leaf_id FROM threadloom_session_heads h WHERE h.session_id = :sid))"
)
# A TIMESTAMPTZ as threadloom.storage.database.utc_now() writes it, whatever the session's TimeZone.
_ISO_TIME = "to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

#: Key of the transaction-level advisory lock that serializes concurrent migrate() calls
#: (the bytes of "threadlo"); released at COMMIT, so it never pins an RDS Proxy session.
MIGRATION_LOCK_KEY: Final = int.from_bytes(b"threadlo", "big")


def _block_write_once(
    table: str, owner_columns: str, owner_values: str, conflict: str, owner_match: str
) -> dict[str, str]:
    """A versioned block write as one statement: the row's compare-and-set, its version row and the pruning.

    Data-modifying CTEs of one statement, which commits on its own (one round trip): ``written`` is the
    row's write (``any``: insert or move to the next version; ``new``: only from version 0; ``if``: only
    from ``:based_on``), returning the new version or no row (the write was stale); ``logged`` adds the
    version row; ``pruned`` drops the versions the history policy no longer keeps, never the new one
    (it cannot see it: every part of a statement reads the same snapshot).
    """
    insert = (
        f"INSERT INTO {table} AS b ({owner_columns}, key, content, version, updated_at) "
        f"VALUES ({owner_values}, :key, :content, 1, CAST(:now AS timestamptz)) "
        f"ON CONFLICT ({conflict}, key) DO UPDATE SET content = EXCLUDED.content, version = b.version + 1, "
        "updated_at = EXCLUDED.updated_at"
    )
    rest = (
        "), logged AS (INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, "
        "size_bytes, source, session_id, message_ids, request_id, note, created_at) "
        "SELECT :namespace, :scope, :owner, :key, w.version, :content, :size_bytes, :source, :session_id, "
        ":message_ids, :request_id, :note, CAST(:now AS timestamptz) FROM written w RETURNING version"
        "), pruned AS (DELETE FROM threadloom_block_versions v USING written w WHERE v.namespace = :namespace "
        "AND v.scope = :scope AND v.owner_id = :owner AND v.key = :key AND (v.version < w.version - :keep_versions + 1 "
        "OR (v.created_at < CAST(:cutoff AS timestamptz) AND v.version < w.version))"
        ") SELECT version FROM logged"
    )
    return {
        "any": f"WITH written AS ({insert} RETURNING b.version{rest}",
        "new": f"WITH written AS ({insert} WHERE b.version = 0 RETURNING b.version{rest}",
        "if": (
            f"WITH written AS (UPDATE {table} SET content = :content, version = version + 1, "
            f"updated_at = CAST(:now AS timestamptz) WHERE {owner_match} AND key = :key AND version = :based_on "
            f"RETURNING version{rest}"
        ),
    }


class PostgresSql(SqlDialect):
    name = "postgresql"

    create_migrations_table = (
        "CREATE TABLE IF NOT EXISTS threadloom_schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )

    ensure_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:sid, NULL, 1) "
        "ON CONFLICT (session_id) DO NOTHING"
    )
    # The row lock serializes every writer of one session and no one else.
    lock_head = "SELECT leaf_id, next_seq FROM threadloom_session_heads WHERE session_id = :sid FOR UPDATE"
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
        f"SELECT 1 FROM threadloom_messages c WHERE {_children_of('m.id', rows='c.', session='m.session_id')}) "
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
    get_children = f"SELECT content FROM threadloom_messages WHERE {_children_of('CAST(:id AS text)')} ORDER BY seq"
    # One keyset page of children; contents only while their running size stays within :budget (the first
    # always), so a page of large messages never reads more than one response can carry.
    get_children_page = (
        "SELECT seq, CASE WHEN ROW_NUMBER() OVER (ORDER BY seq) = 1 OR SUM(size + 1) OVER (ORDER BY seq) <= :budget "
        "THEN content END FROM (SELECT seq, octet_length(content) AS size, content FROM threadloom_messages "
        f"WHERE {_children_of('CAST(:id AS text)')} AND seq > :after_seq ORDER BY seq LIMIT :limit) AS children "
        "ORDER BY seq"
    )
    # Fork, copied in the database (SqlSessionProvider.copy_history): the overlay ends on the path, then
    # the path's rows with new ids, running estimates and their search vectors, in one statement. The
    # top-level "id" of the stored JSON is rewritten in place, every other byte kept (json, not jsonb).
    path_overlay_ends = (
        f"{_FORK_PATH} SELECT p.id, p.depth FROM path p WHERE p.id IN ("
        "SELECT from_message_id FROM threadloom_compactions WHERE session_id = :sid UNION "
        "SELECT to_message_id FROM threadloom_compactions WHERE session_id = :sid)"
    )
    copy_path = (
        f"{_FORK_PLAN} INSERT INTO threadloom_messages "
        "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, search_vector, jump) "
        f"SELECT :target, {_FORK_ID}, q.pos + 1, "
        f"CASE WHEN q.pos = 0 THEN NULL ELSE {_FORK_PREFIX} || lpad(to_hex(q.pos - 1), 8, '0') END, m.role, "
        # The usual shape (the id first) is a string splice; any other is rebuilt key by key.
        """CASE WHEN starts_with(m.content, '{"id":' || to_json(m.id)::text || ',') """
        f"""THEN '{{"id":' || to_json({_FORK_ID})::text """
        """|| substr(m.content, length('{"id":' || to_json(m.id)::text) + 1) ELSE """
        "(SELECT '{' || string_agg(to_json(e.key)::text || ':' || CASE WHEN e.key = 'id' "
        f"THEN to_json({_FORK_ID})::text ELSE e.value::text END, ',' ORDER BY e.n) || '}}' "
        "FROM json_each(CAST(m.content AS json)) WITH ORDINALITY AS e(key, value, n)) END, "
        "q.pos, m.tokens, q.tokens_before + SUM(m.tokens) OVER (ORDER BY q.pos ROWS UNBOUNDED PRECEDING), "
        f"CAST(:created_at AS timestamptz), m.search_vector, {_FORK_JUMP} "
        "FROM plan q JOIN threadloom_messages m ON m.session_id = :sid AND m.id = q.old_id"
    )
    index_copied_path = ()  # the search vector is a column of the copied row
    set_copied_head = (
        "INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (:target, :leaf, :next_seq) "
        "ON CONFLICT (session_id) DO UPDATE SET leaf_id = excluded.leaf_id, next_seq = excluded.next_seq"
    )
    get_child_ids = f"SELECT id FROM threadloom_messages WHERE {_children_of('CAST(:id AS text)')} ORDER BY seq"
    tree_skeleton = "SELECT id, parent_id FROM threadloom_messages WHERE session_id = :sid ORDER BY seq"
    reparent_message = "UPDATE threadloom_messages SET parent_id = :parent_id WHERE session_id = :sid AND id = :id"
    set_estimate = (
        "UPDATE threadloom_messages SET depth = :depth, path_tokens = :path_tokens WHERE session_id = :sid AND id = :id"
    )
    path_rows = (
        "WITH RECURSIVE path(id, parent_id, content, depth) AS ("
        " SELECT id, parent_id, content, depth FROM threadloom_messages WHERE session_id = :sid AND id = :leaf"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.content, m.depth"
        + _STEP_UP.format(walk="path", columns="id, parent_id, content, depth")
        + ") SELECT id, content FROM path ORDER BY depth"
    )
    path_ids_up = (
        "WITH RECURSIVE path(id, parent_id, steps) AS ("
        " SELECT id, parent_id, 0 FROM threadloom_messages WHERE session_id = :sid AND id = :start"
        " UNION ALL"
        " SELECT m.id, m.parent_id, p.steps + 1"
        + _STEP_UP.format(walk="path", columns="id, parent_id")
        + " WHERE p.steps < :max_steps"
        ") SELECT id FROM path ORDER BY steps"
    )
    set_path_tokens = (
        "UPDATE threadloom_messages m SET path_tokens = CAST(r.value ->> 1 AS bigint) "
        "FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r(value) "
        "WHERE m.session_id = :sid AND m.id = r.value ->> 0"
    )
    subtree = (
        "WITH RECURSIVE sub(id, parent_id, tokens, depth, level) AS ("
        " SELECT id, parent_id, tokens, depth, 0 FROM threadloom_messages WHERE session_id = :sid AND id = :root"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.tokens, m.depth, s.level + 1 FROM sub s CROSS JOIN LATERAL ("
        # OFFSET 0 keeps the subquery apart, so each step probes the children index; pulled up into a
        # join it was planned as a hash of the whole session at every step (the walk up's problem).
        f"SELECT id, parent_id, tokens, depth FROM threadloom_messages WHERE {_children_of('s.id')} OFFSET 0) AS m"
        ") SELECT id, parent_id, tokens, depth FROM sub ORDER BY level"
    )
    # Migrations 0007 and 0008: the statement of SQLite's history_page_rows with a plan kept per
    # connection, the session's overlays in the same round trip (the page needs them), the tenant
    # check with :namespace and, with :together, the page's rows as one JSON row.
    history_page_rows = (
        "SELECT out_depth, out_id, out_size, out_content, FALSE FROM threadloom_history_page_in("
        "CAST(:namespace AS text), CAST(:sid AS text), CAST(:leaf AS text), CAST(:first AS bigint), "
        "CAST(:last AS bigint), CAST(:budget AS bigint), CAST(:anchor_seq AS bigint), CAST(:anchor_id AS text), "
        "CAST(:hint AS bigint), CAST(:overlays AS boolean), CAST(:together AS boolean))"
    )
    # Migration 0009: the first page from the session's head (the leaf's row says which), same rows.
    history_page_rows_at_head = (
        "SELECT out_depth, out_id, out_size, out_content, FALSE FROM threadloom_history_page_at_head("
        "CAST(:namespace AS text), CAST(:sid AS text), CAST(:first AS bigint), CAST(:last AS bigint), "
        "CAST(:budget AS bigint), CAST(:hint AS bigint), CAST(:overlays AS boolean), CAST(:together AS boolean))"
    )
    history_page_contents = (
        "WITH RECURSIVE page(id, parent_id, depth, content) AS ("
        " SELECT id, parent_id, depth, content FROM threadloom_messages WHERE session_id = :sid AND id = :start"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.depth, m.content"
        + _STEP_UP.format(walk="page", columns="id, parent_id, depth, content")
        + " WHERE p.depth > :first"
        ") SELECT depth, id, content FROM page"
    )
    clear_messages = "DELETE FROM threadloom_messages WHERE session_id = :sid"
    clear_head = "UPDATE threadloom_session_heads SET leaf_id = NULL WHERE session_id = :sid"

    # The vector lives in the message row: rewriting or deleting the row is the unindexing.
    index_message = (
        "UPDATE threadloom_messages SET search_vector = CAST(:vector AS tsvector) WHERE session_id = :sid AND id = :id"
    )
    unindex_message = ""
    unindex_session = ""
    # Results carry the stored message; the provider turns it into the searched text.
    search_session = (
        "SELECT m.id, m.role, m.content, m.created_at, m.session_id FROM threadloom_messages m "
        f"WHERE m.session_id = :sid AND m.search_vector @@ {_MATCH} "
        f"ORDER BY ts_rank(m.search_vector, {_MATCH}) DESC, m.seq LIMIT :limit"
    )
    # One index probe per session of the namespace (LATERAL), so other tenants' rows are never read.
    search_namespace = (
        "SELECT hit.id, hit.role, hit.content, hit.created_at, hit.session_id FROM threadloom_sessions s "
        "CROSS JOIN LATERAL (SELECT m.id, m.role, m.content, m.created_at, m.session_id, m.seq, "
        f"ts_rank(m.search_vector, {_MATCH}) AS rank FROM threadloom_messages m "
        f"WHERE m.session_id = s.id AND m.search_vector @@ {_MATCH}) hit "
        "WHERE s.namespace = :namespace ORDER BY hit.rank DESC, s.created_at, hit.session_id, hit.seq LIMIT :limit"
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
        "UPDATE threadloom_context_blocks SET content = :content, version = version + 1, updated_at = CAST(:now AS "
        "timestamptz) "
        "WHERE namespace = :namespace AND session_id = :sid AND key = :key AND version = :based_on RETURNING version"
    )
    session_block_update = (
        "UPDATE threadloom_context_blocks SET content = :content, version = version + 1, updated_at = CAST(:now AS "
        "timestamptz) "
        "WHERE namespace = :namespace AND session_id = :sid AND key = :key RETURNING version"
    )
    session_block_insert = (
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, version, updated_at) "
        "VALUES (:namespace, :sid, :key, :content, 1, CAST(:now AS timestamptz)) "
        "ON CONFLICT (namespace, session_id, key) DO NOTHING RETURNING version"
    )
    shared_block_read = (
        "SELECT content, version FROM threadloom_shared_blocks WHERE namespace = :namespace AND scope = :scope AND "
        "subject_id = :subject AND key = :key"
    )
    shared_block_update_if = (
        "UPDATE threadloom_shared_blocks SET content = :content, version = version + 1, updated_at = CAST(:now AS "
        "timestamptz) "
        "WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject AND key = :key AND version = "
        ":based_on RETURNING version"
    )
    shared_block_update = (
        "UPDATE threadloom_shared_blocks SET content = :content, version = version + 1, updated_at = CAST(:now AS "
        "timestamptz) "
        "WHERE namespace = :namespace AND scope = :scope AND subject_id = :subject AND key = :key RETURNING version"
    )
    shared_block_insert = (
        "INSERT INTO threadloom_shared_blocks (namespace, scope, subject_id, key, content, version, updated_at) "
        "VALUES (:namespace, :scope, :subject, :key, :content, 1, CAST(:now AS timestamptz)) "
        "ON CONFLICT (namespace, scope, subject_id, key) DO NOTHING RETURNING version"
    )
    # A block's whole write in one statement, by the table of its scope and the write's kind (block_versions.py).
    block_write_once: ClassVar[dict[str, dict[str, str]]] = {
        "session": _block_write_once(
            "threadloom_context_blocks",
            "namespace, session_id",
            ":namespace, :sid",
            "namespace, session_id",
            "namespace = :namespace AND session_id = :sid",
        ),
        "shared": _block_write_once(
            "threadloom_shared_blocks",
            "namespace, scope, subject_id",
            ":namespace, :scope, :subject",
            "namespace, scope, subject_id",
            "namespace = :namespace AND scope = :scope AND subject_id = :subject",
        ),
    }
    insert_block_version = (
        "INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, size_bytes, "
        "source, session_id, message_ids, request_id, note, created_at) "
        "VALUES (:namespace, :scope, :owner, :key, :version, :content, :size_bytes, :source, :session_id, "
        ":message_ids, :request_id, :note, CAST(:now AS timestamptz))"
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
        "AND (version < :oldest_kept OR (created_at < CAST(:cutoff AS timestamptz) AND version < :version))"
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
        "VALUES (:namespace, :scope, :subject, :key, :content, :version, CAST(:now AS timestamptz)) "
        "ON CONFLICT (namespace, scope, subject_id, key) DO NOTHING RETURNING version"
    )
    import_block_version = (
        "INSERT INTO threadloom_block_versions (namespace, scope, owner_id, key, version, content, size_bytes, "
        "source, session_id, message_ids, request_id, note, created_at) "
        "VALUES (:namespace, :scope, :owner, :key, :version, :content, :size_bytes, :source, :session_id, "
        ":message_ids, :request_id, :note, CAST(:now AS timestamptz)) ON CONFLICT DO NOTHING"
    )

    # The block's count as its triggers keep it (migration 0036): one row, not a scan of the block's entries.
    count_entries = (
        "SELECT COALESCE((SELECT entries FROM threadloom_entry_counts WHERE scope = :scope AND label = :label), 0)"
    )
    # The count inside a write transaction, its row locked until the commit so that no other writer adds
    # entries to the label meanwhile (its trigger moves the row only as it commits): a quota checked against
    # it holds under concurrent writers. DO UPDATE waits for a writer holding the row, then reads its count.
    lock_entry_count = (
        "INSERT INTO threadloom_entry_counts AS c (scope, label, entries) VALUES (:scope, :label, 0) "
        "ON CONFLICT (scope, label) DO UPDATE SET entries = c.entries RETURNING entries"
    )
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
    # One probe of the primary key per key (the LATERAL step with OFFSET 0 is not pulled up into a join,
    # which the planner hashed over the label's every entry, contents included).
    entry_contents = (
        "SELECT e.key, e.content FROM jsonb_array_elements_text(CAST(:keys AS jsonb)) AS k(key) "
        "CROSS JOIN LATERAL (SELECT key, content FROM threadloom_search_entries "
        "WHERE scope = :scope AND label = :label AND key = k.key OFFSET 0) AS e"
    )
    # The search vector goes in with the row (``vector``: :meth:`index_params`), as an append's does.
    import_entries = (
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at, search_vector) "
        "SELECT :scope, e->>'label', e->>'key', e->>'content', CAST(e->>'created_at' AS timestamptz), "
        "CAST(e->>'updated_at' AS timestamptz), CAST(e->>'vector' AS tsvector) "
        "FROM jsonb_array_elements(CAST(:entries AS jsonb)) AS e "
        "ON CONFLICT (scope, label, key) DO NOTHING RETURNING label, key"
    )
    import_entries_indexes = True
    delete_entry = (
        "DELETE FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key RETURNING key"
    )
    entry_exists = "SELECT 1 FROM threadloom_search_entries WHERE scope = :scope AND label = :label AND key = :key"
    upsert_entry = (
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
        "VALUES (:scope, :label, :key, :content, :now, :now) "
        "ON CONFLICT (scope, label, key) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
    )
    unindex_entry = ""
    index_entry = (
        "UPDATE threadloom_search_entries SET search_vector = CAST(:vector AS tsvector) "
        "WHERE scope = :scope AND label = :label AND key = :key"
    )
    search_entries = (
        "SELECT e.key, e.content FROM threadloom_search_entries e "
        f"WHERE e.scope = :scope AND e.label = :label AND e.search_vector @@ {_MATCH} "
        f"ORDER BY ts_rank(e.search_vector, {_MATCH}) DESC, e.key LIMIT :limit"
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
    session_required = "SELECT threadloom_require_session(:namespace, :id, :check_subject, :subject)"
    # The namespace's count as its triggers keep it (migration 0034): one row, not a scan of the namespace.
    count_sessions = (
        "SELECT COALESCE((SELECT sessions FROM threadloom_namespace_sessions WHERE namespace = :namespace), 0)"
    )
    get_setting = "SELECT value FROM threadloom_settings WHERE name = :name"
    list_sessions = (
        f"SELECT {_SESSION_COLUMNS} FROM threadloom_sessions WHERE namespace = :namespace "
        "ORDER BY activity_seq DESC, id DESC LIMIT :limit"
    )
    # The latest leaf's depth and the start of its first non-empty text part, for the given ids (a JSON
    # array) of the namespace: one indexed row per session, whatever the length of its history.
    session_overviews = (
        "SELECT s.id, m.depth + 1, m.role, ("
        "SELECT left(p.value ->> 'text', CAST(:chars AS integer)) FROM jsonb_array_elements("
        "CASE WHEN jsonb_typeof(CAST(m.content AS jsonb) -> 'parts') = 'array' "
        "THEN CAST(m.content AS jsonb) -> 'parts' ELSE '[]'::jsonb END) AS p "
        "WHERE p.value ->> 'type' = 'text' AND p.value ->> 'text' <> '' LIMIT 1) "
        "FROM threadloom_sessions AS s "
        "JOIN threadloom_session_heads AS h ON h.session_id = s.id "
        "JOIN threadloom_messages AS m ON m.session_id = h.session_id AND m.id = h.leaf_id "
        "WHERE s.namespace = :namespace AND s.id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)))"
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
        f"activity_seq = {_MOVED_ACTIVITY} WHERE namespace = :namespace AND id = :id RETURNING {_SESSION_COLUMNS}"
    )
    touch_session = (
        f"UPDATE threadloom_sessions SET updated_at = :now, activity_seq = {_MOVED_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id RETURNING subject_id"
    )
    # The new totals are bounded in the statement itself, so no sum can overflow or reach infinity.
    add_usage = (
        "UPDATE threadloom_sessions SET input_tokens = input_tokens + :input_tokens, "
        "output_tokens = output_tokens + :output_tokens, estimated_cost = estimated_cost + :cost, updated_at = :now, "
        f"activity_seq = {_MOVED_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id AND input_tokens + :input_tokens <= :max_tokens "
        "AND output_tokens + :output_tokens <= :max_tokens AND estimated_cost + :cost <= :max_cost "
        f"RETURNING {_SESSION_COLUMNS}"
    )
    end_session = (
        "UPDATE threadloom_sessions SET end_reason = :reason, updated_at = :now, "
        f"activity_seq = {_MOVED_ACTIVITY} "
        "WHERE namespace = :namespace AND id = :id RETURNING id"
    )
    delete_session = "DELETE FROM threadloom_sessions WHERE namespace = :namespace AND id = :id"
    set_legal_hold = "UPDATE threadloom_sessions SET legal_hold = :hold WHERE namespace = :namespace AND id = :id"
    delete_head = "DELETE FROM threadloom_session_heads WHERE session_id = :sid"

    # Data lifecycle: whole-session export/import, retention and subject erasure (threadloom.lifecycle).
    # An imported row with its search vector: one round trip per message instead of two.
    insert_message_indexed = (
        "INSERT INTO threadloom_messages "
        "(session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens, created_at, search_vector) "
        "VALUES (:sid, :id, :seq, :parent_id, :role, :content, :depth, :tokens, :path_tokens, :created_at, "
        "CAST(:vector AS tsvector))"
    )
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
    # The index is on updated_minute, the minute of updated_at (0033: the append's stamp then stays HOT):
    # the minute bounds are implied by the exact ones, and ordering by the minute first is the same order.
    expired_sessions = (
        "SELECT namespace, id, updated_at FROM threadloom_sessions "
        "WHERE NOT legal_hold AND updated_at < CAST(:cutoff AS timestamptz) "
        f"AND updated_minute <= {_minute_of(':cutoff')} AND updated_minute >= {_minute_of(':after_time')} "
        "AND (CAST(:namespace AS text) = '' OR namespace = :namespace) "
        "AND (updated_at > CAST(:after_time AS timestamptz) "
        "OR (updated_at = CAST(:after_time AS timestamptz) AND id > :after_id)) "
        "ORDER BY updated_minute, updated_at, id LIMIT :limit"
    )
    # Re-checked inside the deleting transaction (row locked): a session touched or held meanwhile is kept.
    lock_expired_session = (
        "SELECT 1 FROM threadloom_sessions WHERE namespace = :namespace AND id = :id AND NOT legal_hold "
        "AND updated_at < CAST(:cutoff AS timestamptz) FOR UPDATE"
    )
    lock_session = "SELECT 1 FROM threadloom_sessions WHERE namespace = :namespace AND id = :id FOR UPDATE"
    # The tsvector lives in the deleted row itself; autovacuum reclaims dead tuples (docs/lifecycle.md).
    erase_setup = ""
    purge_statements = ()

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
        "WHERE namespace = :namespace AND session_id = :sid AND (CAST(:status AS text) IS NULL OR status = :status) "
        "AND seq > :after_seq ORDER BY seq LIMIT :limit"
    )
    run_reflection_proposals = (
        f"SELECT {_PROPOSAL_COLUMNS} FROM threadloom_reflection_proposals "
        "WHERE namespace = :namespace AND request_key = :request_key "
        "AND (CAST(:status AS text) IS NULL OR status = :status) ORDER BY seq"
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
        "WHERE s.updated_at < CAST(:idle_before AS timestamptz) AND s.updated_at >= CAST(:active_after AS timestamptz) "
        f"AND s.updated_minute <= {_minute_of(':idle_before')} AND s.updated_minute >= {_minute_of(':active_after')} "
        "AND (m.updated_at IS NULL OR m.updated_at < s.updated_at) "
        "ORDER BY s.updated_minute, s.updated_at, s.namespace, s.id LIMIT :limit"
    )
    delete_session_reflections = (
        "DELETE FROM threadloom_reflection_proposals WHERE namespace = :namespace AND session_id = :sid",
        "DELETE FROM threadloom_reflection_runs WHERE namespace = :namespace AND session_id = :sid",
        "DELETE FROM threadloom_reflection_marks WHERE namespace = :namespace AND session_id = :sid",
    )

    # ------------------------------------------------ PostgreSQL-only statements

    # A chain of messages in one call, which sets its own lock timeout (:lock_timeout,
    # in ms, NULL: the server's), so no timeouts statement goes ahead of it; see migrations/0012.
    append = (
        "SELECT out_id, out_parent_id, out_inserted, out_path_tokens FROM threadloom_append_within("
        "CAST(:sid AS text), CAST(:ids AS text[]), CAST(:roles AS text[]), CAST(:contents AS text[]), "
        "CAST(:tokens AS bigint[]), CAST(:vectors AS text[]), CAST(:parent_omitted AS boolean), "
        "CAST(:parent_id AS text), CAST(:expected_leaf_id AS text), CAST(:created_at AS timestamptz), "
        "CAST(:lock_timeout AS text))"
    )
    # The same chain, only while the namespace's registry holds the session, whose activity it stamps (0026),
    # with the same check of the subject (0031).
    append_registered = (
        "SELECT out_id, out_parent_id, out_inserted, out_path_tokens FROM threadloom_append_registered_within("
        "CAST(:namespace AS text), "
        "CAST(:sid AS text), CAST(:ids AS text[]), CAST(:roles AS text[]), CAST(:contents AS text[]), "
        "CAST(:tokens AS bigint[]), CAST(:vectors AS text[]), CAST(:parent_omitted AS boolean), "
        "CAST(:parent_id AS text), CAST(:expected_leaf_id AS text), CAST(:created_at AS timestamptz), "
        "CAST(:lock_timeout AS text), CAST(:check_subject AS boolean), CAST(:subject AS text))"
    )
    # The history and its overlays in one round trip (one snapshot), two narrow columns: path rows are
    # (depth, message); when overlays exist one extra row (-1, JSON array of [id, summary, from, to,
    # created_at] in seq order) carries them. Left unsorted on purpose: sorting wide rows server-side can
    # spill to disk. A function (migration 0025), so the walk's plan is kept per connection instead of
    # planned on every read; its steps are LATERAL probes (_STEP_UP), which is what makes a kept plan safe.
    history = "SELECT out_depth, out_content FROM threadloom_history(CAST(:sid AS text), CAST(:leaf AS text))"
    # One message (nearly every append): a plain call with scalar arguments, which the server parses,
    # plans and runs in about 70 µs less than the set-returning ``append`` (migration 0013). The
    # answer is one text: 't' if inserted else 'f', the path tokens, then ':' and the parent id if any.
    append_one = (
        "SELECT threadloom_append_message("
        "CAST(:sid AS text), CAST(:id AS text), CAST(:role AS text), CAST(:content AS text), "
        "CAST(:tokens AS bigint), CAST(:vector AS text), CAST(:parent_omitted AS boolean), "
        "CAST(:parent_id AS text), CAST(:expected_leaf_id AS text), CAST(:created_at AS timestamptz), "
        "CAST(:lock_timeout AS text))"
    )
    # The same append, only while the namespace's registry holds the session, whose activity it stamps (0026),
    # and with :check_subject only while the session's subject is :subject (0031; else TL412).
    append_one_registered = (
        "SELECT threadloom_append_registered_message(CAST(:namespace AS text), "
        "CAST(:sid AS text), CAST(:id AS text), CAST(:role AS text), CAST(:content AS text), "
        "CAST(:tokens AS bigint), CAST(:vector AS text), CAST(:parent_omitted AS boolean), "
        "CAST(:parent_id AS text), CAST(:expected_leaf_id AS text), CAST(:created_at AS timestamptz), "
        "CAST(:lock_timeout AS text), CAST(:check_subject AS boolean), CAST(:subject AS text))"
    )
    # An edit in one call (0027, 0029, 0031): with :namespace the session is checked first (with :check_subject
    # its subject too: 'subject' when it is not :subject); the answer is 'updated',
    # 'session' or 'message' (not found), or 'overlay' or 'large' (more than :max_below messages below it):
    # nothing written, take the shared path.
    update_one = (
        "SELECT threadloom_update_message(CAST(:namespace AS text), CAST(:sid AS text), CAST(:id AS text), "
        "CAST(:role AS text), CAST(:content AS text), CAST(:tokens AS bigint), CAST(:vector AS text), "
        "CAST(:max_below AS bigint), CAST(:check_subject AS boolean), CAST(:subject AS text))"
    )
    # A deletion of one message in one call (0028, 0031; :check_subject as for an edit): with :namespace the
    # session is checked first and stamped
    # after; the answer is 'deleted', 'session', 'message' (not found), or 'overlay' or 'large' (more than
    # :max_below messages below it): nothing written, take the shared path.
    delete_one = (
        "SELECT threadloom_delete_message(CAST(:namespace AS text), CAST(:sid AS text), CAST(:id AS text), "
        "CAST(:now AS timestamptz), CAST(:max_below AS bigint), CAST(:check_subject AS boolean), "
        "CAST(:subject AS text))"
    )
    raw_path = (
        "WITH RECURSIVE path(id, parent_id, content, depth) AS ("
        f" SELECT id, parent_id, content, depth FROM threadloom_messages WHERE session_id = :sid AND id = {_LEAF}"
        " UNION ALL"
        " SELECT m.id, m.parent_id, m.content, m.depth"
        + _STEP_UP.format(walk="path", columns="id, parent_id, content, depth")
        + ") SELECT depth, content FROM path"
    )
    latest_leaf_content = (
        "SELECT m.content FROM threadloom_session_heads h JOIN threadloom_messages m "
        "ON m.session_id = h.session_id AND m.id = h.leaf_id WHERE h.session_id = :sid"
    )
    leaf_depth = f"SELECT depth FROM threadloom_messages WHERE session_id = :sid AND id = {_LEAF}"
    message_estimate = "SELECT path_tokens FROM threadloom_messages WHERE session_id = :sid AND id = :id"

    migration_lock = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
    migrations_table_exists = "SELECT to_regclass('threadloom_schema_migrations') IS NOT NULL"
    applied_versions = "SELECT version FROM threadloom_schema_migrations"
    record_migration = (
        "INSERT INTO threadloom_schema_migrations (version, name, applied_at) "
        "VALUES (:version, :name, CAST(:applied_at AS timestamptz))"
    )

    @classmethod
    def index_params(cls, text: str) -> dict[str, Any]:
        return {"vector": to_tsvector_literal(text)}

    @classmethod
    def match_param(cls, query: str) -> str | None:
        return to_tsquery_literal(parse_query(query))

    @classmethod
    def prepare_message_search(cls, database: Database) -> None:
        """Nothing to do: a message's search vector is written with its row."""

    # A stored prompt, or when there is none the block reads (:kinds with their arguments), in one call
    # whose plans the connection keeps (migrations 0014 and 0015: every block read names its owner).
    # One row per value (unnest): pg8000 parses a text[] answer character by character, about 0.5 ms
    # for a prompt. The arrays are sent as literals (:func:`text_array`), for the same reason.
    read_when_missing_call = (
        "SELECT unnest(threadloom_read_when_missing(CAST(:namespace AS text), CAST(:sid AS text), "
        "CAST(:key AS text), CAST(:kinds AS text[]), CAST(:first AS text[]), CAST(:second AS text[])))"
    )

    @classmethod
    def read_when_missing(
        cls, first: tuple[str, Mapping[str, Any]], statements: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> tuple[str, Params, list[str]] | None:
        """The ``threadloom_read_when_missing`` call answering ``first`` and, if it finds nothing, ``statements``.

        ``first`` must read a block (the stored prompt) and each statement be one the function knows:
        a block's content (of the prompt's owner: the function reads no other owner's rows), the
        count of a knowledge label's entries, the count of a namespace's sessions. Returns the SQL,
        its parameters and each statement's kind; None otherwise.
        """
        if first[0] != cls.get_block:
            return None
        owner = (first[1]["namespace"], first[1]["sid"])
        arguments = {cls.get_block: ("block", "key", None), cls.count_entries: ("entries", "scope", "label")}
        arguments[cls.count_sessions] = ("sessions", "namespace", None)
        kinds: list[str] = []
        firsts: list[Any] = []
        seconds: list[Any] = []
        for sql, values in statements:
            known = arguments.get(sql)
            if known is None:
                return None
            kind, first_name, second_name = known
            if kind == "block" and (values["namespace"], values["sid"]) != owner:
                return None
            kinds.append(kind)
            firsts.append(values[first_name])
            seconds.append(values[second_name] if second_name is not None else None)
        params: Params = {
            "namespace": owner[0],
            "sid": owner[1],
            "key": first[1]["key"],
            "kinds": text_array(kinds),
            "first": text_array(firsts),
            "second": text_array(seconds),
        }
        return cls.read_when_missing_call, params, kinds


def text_array(values: Sequence[str | None]) -> str:
    """A ``text[]`` literal of ``values`` (None is NULL), quoted so that any text reads back as itself."""
    return "{" + ",".join("NULL" if value is None else _quoted_element(value) for value in values) + "}"


def _quoted_element(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
