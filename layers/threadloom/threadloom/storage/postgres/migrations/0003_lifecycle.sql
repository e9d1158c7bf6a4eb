-- Threadloom schema v3 (PostgreSQL): data lifecycle (export/import, retention, subject erasure).

-- subject_id: whose personal data the session holds (the JWT `sub` by default), for erasure.
-- legal_hold: true keeps the session out of retention sweeps whatever its age.
-- updated_at already records the last activity, so retention needs no new timestamp.
ALTER TABLE threadloom_sessions ADD COLUMN subject_id TEXT;
ALTER TABLE threadloom_sessions ADD COLUMN legal_hold BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX threadloom_sessions_by_subject ON threadloom_sessions (namespace, subject_id);
-- Erasure follows forks and split continuations down from a subject's sessions.
CREATE INDEX threadloom_sessions_by_parent ON threadloom_sessions (namespace, parent_session_id);
-- The retention sweep reads the oldest inactive sessions first, in bounded batches.
CREATE INDEX threadloom_sessions_by_update ON threadloom_sessions (updated_at);
