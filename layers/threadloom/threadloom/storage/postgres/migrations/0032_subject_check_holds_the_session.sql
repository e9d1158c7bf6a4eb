-- Threadloom schema v32 (PostgreSQL): an edit's or a deletion's check of the subject holds the session row.
-- 0031's wrappers read the subject with an unlocked EXISTS, one statement before the inner function. Under
-- READ COMMITTED each statement takes a fresh snapshot, so a deletion of the session and its creation again
-- for another subject (a keyed session keeps its id) could commit between the check and the write. The
-- subject is now read FOR KEY SHARE: the row cannot be deleted until this transaction ends, so the session
-- checked is the session written. KEY SHARE conflicts only with a deletion or a key change, not with the
-- activity stamp (FOR NO KEY UPDATE) that the deletion's inner function and concurrent appends take.
CREATE OR REPLACE FUNCTION threadloom_update_message(
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
DECLARE
    v_subject TEXT;
BEGIN
    IF p_check_subject AND p_namespace IS NOT NULL THEN
        SELECT subject_id INTO v_subject FROM threadloom_sessions
            WHERE namespace = p_namespace AND id = p_session_id FOR KEY SHARE;
        IF FOUND AND v_subject IS DISTINCT FROM p_subject THEN
            RETURN 'subject';
        END IF;
    END IF;
    RETURN threadloom_update_message(p_namespace, p_session_id, p_id, p_role, p_content, p_tokens, p_vector,
                                     p_max_below);
END
$$;

CREATE OR REPLACE FUNCTION threadloom_delete_message(
    p_namespace     TEXT,
    p_session_id    TEXT,
    p_id            TEXT,
    p_now           TIMESTAMPTZ,
    p_max_below     BIGINT,
    p_check_subject BOOLEAN,
    p_subject       TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_subject TEXT;
BEGIN
    IF p_check_subject AND p_namespace IS NOT NULL THEN
        SELECT subject_id INTO v_subject FROM threadloom_sessions
            WHERE namespace = p_namespace AND id = p_session_id FOR KEY SHARE;
        IF FOUND AND v_subject IS DISTINCT FROM p_subject THEN
            RETURN 'subject';
        END IF;
    END IF;
    RETURN threadloom_delete_message(p_namespace, p_session_id, p_id, p_now, p_max_below);
END
$$;
