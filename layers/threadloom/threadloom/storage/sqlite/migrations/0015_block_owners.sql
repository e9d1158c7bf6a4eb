-- Threadloom schema v15 (SQLite): every context block and frozen prompt row belongs to one owner.
-- Rows were keyed by `key` alone, so a block key chosen in one namespace (an import) could name
-- another namespace's row. A row is now owned by (namespace, session_id) and its key is unique
-- only within that owner; every read, write and delete names the owner. session_id '' is a block
-- of no session (a library provider without a session); a later owner kind (a subject or the
-- whole tenant) fits the same way. Existing rows keep their content: the namespace comes from
-- the session that owned them ('' when none is registered).
CREATE TABLE threadloom_context_blocks_by_owner (
    namespace  TEXT NOT NULL,
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    content    TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (namespace, session_id, key)
);
INSERT INTO threadloom_context_blocks_by_owner (namespace, session_id, key, content, updated_at)
    SELECT COALESCE(s.namespace, ''), COALESCE(b.session_id, ''), b.key, b.content, b.updated_at
    FROM threadloom_context_blocks b LEFT JOIN threadloom_sessions s ON s.id = b.session_id;
DROP TABLE threadloom_context_blocks;
ALTER TABLE threadloom_context_blocks_by_owner RENAME TO threadloom_context_blocks;
