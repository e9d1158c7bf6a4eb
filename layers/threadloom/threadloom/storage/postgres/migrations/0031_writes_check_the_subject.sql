-- Threadloom schema v31 (PostgreSQL): a manager's write also checks the subject its process knew.
-- A keyed session keeps its id when it is deleted and opened again, maybe for another subject, in another
-- process. A warm process that still held the session wired for the first subject's blocks then wrote to the
-- new session with the old blocks in hand: the token estimate an append answers with (and the status event
-- after an edit or a deletion, and the compaction check) counted the first subject's memory. These versions
-- of the registered appends (0026), of the edit (0029) and of the deletion (0028) take p_check_subject and
-- p_subject, as threadloom_require_session (0030) does:
-- - an append's stamp returns the registry row's subject, and when it is not p_subject the function raises
--   TL412, which rolls the stamp back with everything else: nothing is written and the caller reads the
--   session afresh. It costs nothing the stamp did not already do (it reads the row it updates);
-- - an edit or a deletion answers 'subject' before anything else, and writes nothing.
-- The earlier signatures stay for code deployed before this one.
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
        activity_seq = (SELECT COALESCE(MAX(a.activity_seq), 0) + 1 FROM threadloom_sessions a
                        WHERE a.namespace = p_namespace)
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
        activity_seq = (SELECT COALESCE(MAX(a.activity_seq), 0) + 1 FROM threadloom_sessions a
                        WHERE a.namespace = p_namespace)
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

CREATE FUNCTION threadloom_update_message(
    p_namespace     TEXT,
    p_session_id    TEXT,
    p_id            TEXT,
    p_role          TEXT,
    p_content       TEXT,
    p_tokens        BIGINT,
    p_vector        TEXT,
    p_max_below     BIGINT,
    p_check_subject BOOLEAN,
    p_subject       TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_check_subject AND p_namespace IS NOT NULL AND EXISTS (
        SELECT 1 FROM threadloom_sessions
            WHERE namespace = p_namespace AND id = p_session_id AND subject_id IS DISTINCT FROM p_subject
    ) THEN
        RETURN 'subject';
    END IF;
    RETURN threadloom_update_message(p_namespace, p_session_id, p_id, p_role, p_content, p_tokens, p_vector,
                                     p_max_below);
END
$$;

CREATE FUNCTION threadloom_delete_message(
    p_namespace     TEXT,
    p_session_id    TEXT,
    p_id            TEXT,
    p_now           TIMESTAMPTZ,
    p_max_below     BIGINT,
    p_check_subject BOOLEAN,
    p_subject       TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_check_subject AND p_namespace IS NOT NULL AND EXISTS (
        SELECT 1 FROM threadloom_sessions
            WHERE namespace = p_namespace AND id = p_session_id AND subject_id IS DISTINCT FROM p_subject
    ) THEN
        RETURN 'subject';
    END IF;
    RETURN threadloom_delete_message(p_namespace, p_session_id, p_id, p_now, p_max_below);
END
$$;
