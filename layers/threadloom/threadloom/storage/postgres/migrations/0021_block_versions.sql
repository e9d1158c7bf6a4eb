-- Threadloom schema v21 (postgres): every change of a writable block is a stored version with its provenance.
-- A session-scoped block row now counts its changes too (existing rows start at 0: their content
-- predates history, and the first change makes version 1). threadloom_block_versions holds one row
-- per change of any writable block, owned as the block is: (namespace, scope, owner_id) where
-- owner_id is the session id (scope 'session'), the subject id ('subject') or '' ('tenant').
-- source says who changed it: tool (a model tool call in session_id after the message in
-- message_ids), http, import, reflection (message_ids: what it read), operator or library.
-- History is bounded by the profile (keep the last N versions or D days per block).
ALTER TABLE threadloom_context_blocks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
CREATE TABLE threadloom_block_versions (
    namespace   TEXT NOT NULL,
    scope       TEXT NOT NULL,
    owner_id    TEXT NOT NULL,
    key         TEXT NOT NULL,
    version     INTEGER NOT NULL,
    content     TEXT NOT NULL,
    size_bytes  INTEGER NOT NULL,
    source      TEXT NOT NULL,
    session_id  TEXT,
    message_ids TEXT NOT NULL,
    request_id  TEXT,
    note        TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, scope, owner_id, key, version)
);
