-- Threadloom schema v1 (SQLite). Applied by SqliteStore.migrate(); never edit, add a new file instead.

-- Session registry used by SessionManager (one row per named session, scoped by namespace).
CREATE TABLE threadloom_sessions (
    id                TEXT PRIMARY KEY,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    parent_session_id TEXT,
    model             TEXT,
    source            TEXT,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    estimated_cost    REAL NOT NULL DEFAULT 0,
    end_reason        TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    activity_seq      INTEGER NOT NULL DEFAULT 0
);
-- activity_seq orders sessions by latest activity even when timestamps tie.
CREATE INDEX threadloom_sessions_by_activity ON threadloom_sessions (namespace, activity_seq DESC, id DESC);

-- One row per session that has messages: the append lock, the latest leaf and the insertion counter.
CREATE TABLE threadloom_session_heads (
    session_id TEXT PRIMARY KEY,
    leaf_id    TEXT,
    next_seq   INTEGER NOT NULL DEFAULT 1
);

-- The message tree. depth and path_tokens make path length and the token estimate O(1).
CREATE TABLE threadloom_messages (
    session_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    parent_id   TEXT,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    depth       INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    path_tokens INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE UNIQUE INDEX threadloom_messages_by_seq ON threadloom_messages (session_id, seq);
CREATE INDEX threadloom_messages_by_parent ON threadloom_messages (session_id, parent_id, seq);

-- Full-text index of the messages' text parts; rowid = threadloom_messages.rowid.
CREATE VIRTUAL TABLE threadloom_message_fts USING fts5 (content, tokenize = 'porter unicode61');

-- Compaction overlays, applied at read time; request_key makes a redelivered request a no-op.
CREATE TABLE threadloom_compactions (
    session_id      TEXT NOT NULL,
    id              TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    summary         TEXT NOT NULL,
    from_message_id TEXT NOT NULL,
    to_message_id   TEXT NOT NULL,
    request_key     TEXT,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX threadloom_compactions_by_seq ON threadloom_compactions (session_id, seq);
CREATE UNIQUE INDEX threadloom_compactions_by_request ON threadloom_compactions (session_id, request_key)
    WHERE request_key IS NOT NULL;

-- Context block contents and frozen prompts; session_id lets a session delete erase its own rows.
CREATE TABLE threadloom_context_blocks (
    key        TEXT PRIMARY KEY,
    session_id TEXT,
    content    TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX threadloom_context_blocks_by_session ON threadloom_context_blocks (session_id);

-- Searchable context entries (search_context); rowid of the FTS table = rowid of the entry.
CREATE TABLE threadloom_search_entries (
    scope      TEXT NOT NULL,
    label      TEXT NOT NULL,
    key        TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, label, key)
);
CREATE VIRTUAL TABLE threadloom_search_entries_fts USING fts5 (content, tokenize = 'porter unicode61');

-- Skills the model has loaded (contract D7: stored, not rebuilt by scanning history).
CREATE TABLE threadloom_loaded_skills (
    session_id TEXT NOT NULL,
    skill_id   TEXT NOT NULL,
    PRIMARY KEY (session_id, skill_id)
);
