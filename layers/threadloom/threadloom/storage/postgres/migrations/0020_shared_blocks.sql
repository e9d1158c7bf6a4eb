-- Threadloom schema v20 (postgres): writable blocks shared beyond one session (issue 26, block scopes).
-- A block of scope 'subject' belongs to (namespace, subject_id): every session of one end user in a
-- tenant reads and writes the same row. A block of scope 'tenant' belongs to (namespace) alone
-- (subject_id ''). Session-scoped blocks stay in threadloom_context_blocks, owned by (namespace,
-- session_id) as migration 0015 made them, so sessions without shared blocks read what they read before.
-- version counts the changes (1 for the first write); a replacement names the version it was based on.
CREATE TABLE threadloom_shared_blocks (
    namespace  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    content    TEXT NOT NULL,
    version    INTEGER NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, scope, subject_id, key),
    CHECK ((scope = 'subject' AND subject_id <> '') OR (scope = 'tenant' AND subject_id = ''))
);
