-- Reflection (issue 26): memory extracted off the request path. marks holds, per session, the last message a
-- reflection has read (the watermark); runs holds one row per handled request key, so a redelivered request is
-- found and never applied twice; proposals holds the block edits a run proposed, with the ids of the messages
-- they come from, until applied, rejected or failed. Every row carries its owner (namespace, session_id) and
-- deleting the session deletes its rows.
CREATE TABLE threadloom_reflection_marks (
    namespace   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    request_key TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (namespace, session_id)
);
CREATE TABLE threadloom_reflection_runs (
    namespace        TEXT NOT NULL,
    request_key      TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    after_message_id TEXT,
    to_message_id    TEXT NOT NULL,
    messages_read    INTEGER NOT NULL,
    proposals        INTEGER NOT NULL,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (namespace, request_key)
);
CREATE INDEX threadloom_reflection_runs_by_session ON threadloom_reflection_runs (namespace, session_id);
CREATE TABLE threadloom_reflection_proposals (
    namespace          TEXT NOT NULL,
    id                 TEXT NOT NULL,
    session_id         TEXT NOT NULL,
    request_key        TEXT NOT NULL,
    seq                INTEGER NOT NULL,
    label              TEXT NOT NULL,
    operation          TEXT NOT NULL,
    content            TEXT NOT NULL,
    source_message_ids TEXT NOT NULL,
    based_on_version   TEXT,
    status             TEXT NOT NULL,
    error              TEXT,
    applied_version    TEXT,
    created_at         TEXT NOT NULL,
    decided_at         TEXT,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX threadloom_reflection_proposals_by_session ON threadloom_reflection_proposals (namespace, session_id, seq);
CREATE INDEX threadloom_reflection_proposals_by_run ON threadloom_reflection_proposals (namespace, request_key);
