-- Compaction requests, tracked from queued to done or failed so a client can follow them
-- (GET /sessions/{id}/status). request_key is the key the worker stores with the overlay,
-- so re-sending one request finds its record; id is what the client is given.
CREATE TABLE threadloom_compaction_requests (
    namespace       TEXT NOT NULL,
    id              TEXT NOT NULL,
    request_key     TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    leaf_id         TEXT,
    state           TEXT NOT NULL,
    from_message_id TEXT,
    to_message_id   TEXT,
    error           TEXT,
    requested_at    TIMESTAMPTZ NOT NULL,
    started_at      TIMESTAMPTZ,
    finished_at     TIMESTAMPTZ,
    PRIMARY KEY (namespace, id)
);
CREATE UNIQUE INDEX threadloom_compaction_requests_by_key ON threadloom_compaction_requests (namespace, request_key);
-- The latest request of a session is one index probe.
CREATE INDEX threadloom_compaction_requests_by_session ON threadloom_compaction_requests (namespace, session_id, seq);
