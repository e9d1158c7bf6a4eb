-- Threadloom schema v26 (PostgreSQL): an append through a SessionManager checks and stamps the session's
-- registry row in its own statement.
-- A manager's append (so every append through the HTTP API) read the session's row to check that it is the
-- caller tenant's, appended, then stamped the row's activity: three round trips, and a session deleted
-- between the check and the append could still get a message. This function stamps the row first
-- (updated_at and the namespace's next activity_seq, as touch_session does), and only when the namespace
-- holds the session does it call threadloom_append_message (0017); otherwise it answers NULL and writes
-- nothing. The row lock it takes comes before the head row's, the order in which deleting a session (the
-- registry's delete and the lifecycle's erase) takes them. An error inside the append (TL001, TL404,
-- TL409, 55P03) rolls the stamp back with it; a retry of a stored id stamps the row like a new message.
-- The lock timeout is set before the first lock, for this transaction only. Provisioning grants EXECUTE
-- on every threadloom_ function.
CREATE FUNCTION threadloom_append_registered_message(
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
    p_lock_timeout     TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_lock_timeout IS NOT NULL THEN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    UPDATE threadloom_sessions s SET updated_at = p_created_at,
        activity_seq = (SELECT COALESCE(MAX(a.activity_seq), 0) + 1 FROM threadloom_sessions a
                        WHERE a.namespace = p_namespace)
        WHERE s.namespace = p_namespace AND s.id = p_session_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN threadloom_append_message(p_session_id, p_id, p_role, p_content, p_tokens, p_vector, p_parent_omitted,
                                     p_parent_id, p_expected_leaf_id, p_created_at, NULL);
END
$$;

-- The same for a chain: threadloom_append_within (0012) after the stamp, or no row at all when the namespace
-- does not hold the session (a chain sent here always has a message, so no row means "not found").
CREATE FUNCTION threadloom_append_registered_within(
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
    p_lock_timeout     TEXT
) RETURNS TABLE (out_id TEXT, out_parent_id TEXT, out_inserted BOOLEAN, out_path_tokens BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_lock_timeout IS NOT NULL THEN
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    UPDATE threadloom_sessions s SET updated_at = p_created_at,
        activity_seq = (SELECT COALESCE(MAX(a.activity_seq), 0) + 1 FROM threadloom_sessions a
                        WHERE a.namespace = p_namespace)
        WHERE s.namespace = p_namespace AND s.id = p_session_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT w.out_id, w.out_parent_id, w.out_inserted, w.out_path_tokens
        FROM threadloom_append_within(p_session_id, p_ids, p_roles, p_contents, p_tokens, p_vectors,
                                      p_parent_omitted, p_parent_id, p_expected_leaf_id, p_created_at, NULL) w;
END
$$;
