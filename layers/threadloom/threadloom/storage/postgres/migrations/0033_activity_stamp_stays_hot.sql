-- Threadloom schema v33 (PostgreSQL): the activity stamp of an append is a HOT update when it can be.
-- A SessionManager's append (so every append through the HTTP API) stamps the session's registry row with
-- updated_at and the namespace's next activity_seq (0026, 0031). Both columns were indexed
-- (threadloom_sessions_by_update for retention and the idle sweep, threadloom_sessions_by_activity for the
-- session list), so every stamp wrote a new row version and an entry in each of the table's five b-trees:
-- the largest single piece of an append's server work (docs/postgres.md). Two changes let the stamp touch
-- no index in the common case, without changing what any read answers:
-- - retention and the idle sweep now read updated_minute, a stored column generated from updated_at (the
--   minute it falls in, UTC), and filter on updated_at itself. The minute changes once a minute at most, so
--   a stamp inside the same minute leaves every indexed value as it was; the sweeps' order is the same,
--   since the minute only grows with updated_at. updated_at keeps its meaning: the exact latest activity.
--   Adding a stored column rewrites the registry table once (one row per session, under its lock);
-- - activity_seq moves only when another session of the namespace is listed before this one: one probe of
--   threadloom_sessions_by_activity reads the list's first session. The session already first keeps its
--   place (and its value); any other takes the first one's value + 1, the namespace's next value as before,
--   so the list's order is the same as before in every case.
-- Same signatures, answers and grants as 0031 (CREATE OR REPLACE keeps the EXECUTE grant).
ALTER TABLE threadloom_sessions ADD COLUMN updated_minute TIMESTAMP
    GENERATED ALWAYS AS (date_trunc('minute', updated_at AT TIME ZONE 'UTC')) STORED;
CREATE INDEX threadloom_sessions_by_update_minute ON threadloom_sessions (updated_minute);
DROP INDEX threadloom_sessions_by_update;
-- A HOT update needs room on the row's own page; new pages keep a fifth of it free.
ALTER TABLE threadloom_sessions SET (fillfactor = 80);

CREATE OR REPLACE FUNCTION threadloom_append_registered_message(
    p_namespace        TEXT,
    p_session_id       TEXT,
    p_id               TEXT,
    p_role             TEXT,
    p_content          TEXT,
    p_tokens           BIGINT,
    p_vector           TEXT,
    p_parent_omitted   BOOLEAN,
    p_parent_id        TEXT,
    p_expected_leaf_id TEXT,
    p_created_at       TIMESTAMPTZ,
    p_lock_timeout     TEXT,
    p_check_subject    BOOLEAN,
    p_subject          TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_subject TEXT;
BEGIN
    IF p_lock_timeout IS NOT NULL THEN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    UPDATE threadloom_sessions s SET updated_at = p_created_at,
        activity_seq = COALESCE((SELECT f.activity_seq + 1
                                 FROM (SELECT a.activity_seq, a.id FROM threadloom_sessions a
                                       WHERE a.namespace = p_namespace
                                       ORDER BY a.activity_seq DESC, a.id DESC LIMIT 1) f
                                 WHERE f.id <> s.id), s.activity_seq)
        WHERE s.namespace = p_namespace AND s.id = p_session_id
        RETURNING s.subject_id INTO v_subject;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_check_subject AND v_subject IS DISTINCT FROM p_subject THEN
        RAISE EXCEPTION USING ERRCODE = 'TL412', MESSAGE = 'threadloom: the session now belongs to another subject';
    END IF;
    RETURN threadloom_append_message(p_session_id, p_id, p_role, p_content, p_tokens, p_vector, p_parent_omitted,
                                     p_parent_id, p_expected_leaf_id, p_created_at, NULL);
END
$$;

CREATE OR REPLACE FUNCTION threadloom_append_registered_within(
    p_namespace        TEXT,
    p_session_id       TEXT,
    p_ids              TEXT[],
    p_roles            TEXT[],
    p_contents         TEXT[],
    p_tokens           BIGINT[],
    p_vectors          TEXT[],
    p_parent_omitted   BOOLEAN,
    p_parent_id        TEXT,
    p_expected_leaf_id TEXT,
    p_created_at       TIMESTAMPTZ,
    p_lock_timeout     TEXT,
    p_check_subject    BOOLEAN,
    p_subject          TEXT
) RETURNS TABLE (out_id TEXT, out_parent_id TEXT, out_inserted BOOLEAN, out_path_tokens BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_subject TEXT;
BEGIN
    IF p_lock_timeout IS NOT NULL THEN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    UPDATE threadloom_sessions s SET updated_at = p_created_at,
        activity_seq = COALESCE((SELECT f.activity_seq + 1
                                 FROM (SELECT a.activity_seq, a.id FROM threadloom_sessions a
                                       WHERE a.namespace = p_namespace
                                       ORDER BY a.activity_seq DESC, a.id DESC LIMIT 1) f
                                 WHERE f.id <> s.id), s.activity_seq)
        WHERE s.namespace = p_namespace AND s.id = p_session_id
        RETURNING s.subject_id INTO v_subject;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_check_subject AND v_subject IS DISTINCT FROM p_subject THEN
        RAISE EXCEPTION USING ERRCODE = 'TL412', MESSAGE = 'threadloom: the session now belongs to another subject';
    END IF;
    RETURN QUERY SELECT w.out_id, w.out_parent_id, w.out_inserted, w.out_path_tokens
        FROM threadloom_append_within(p_session_id, p_ids, p_roles, p_contents, p_tokens, p_vectors,
                                      p_parent_omitted, p_parent_id, p_expected_leaf_id, p_created_at, NULL) w;
END
$$;
