-- Threadloom schema v27 (PostgreSQL): an edit of a message in one statement.
-- An edit (PUT /sessions/{id}/messages/{messageId}, Session.update_message) read the session's registry row,
-- read the message, then ran a transaction of a statement a round trip (lock the head, read the message,
-- rewrite it, write its search vector, find the overlay ends, walk the subtree, rewrite the running
-- estimates below it): eleven round trips through the HTTP API. This function does the same in one call.
-- With p_namespace it first checks that the namespace holds the session (no stamp: an edit never moved a
-- session in its listing); then it locks the head row, as every writer of a session does, and rewrites
-- the message with its search vector. When the message's token estimate changes, every message below it
-- moves by the same amount, in one UPDATE over the subtree, unless a compaction overlay ends at the message
-- or below it: such an end's estimate is measured from its compacted history, in Python. Then the function
-- writes nothing and answers 'overlay', and the client edits the message through the shared code path.
-- Answers: 'updated:' and the latest leaf's running estimate (empty if the session has none), which the
-- status event after an edit reports without another round trip; 'session' (the namespace does not hold
-- the session), 'message' (no such message) or 'overlay'.
-- It is sent after the timeouts statement, which sets the lock and statement timeouts for its transaction.
CREATE FUNCTION threadloom_update_message(
    p_namespace    TEXT,
    p_session_id   TEXT,
    p_id           TEXT,
    p_role         TEXT,
    p_content      TEXT,
    p_tokens       BIGINT,
    p_vector       TEXT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_stored_tokens BIGINT;
    v_delta         BIGINT;
    v_leaf_tokens   BIGINT;
    v_below         TEXT[];
BEGIN
    IF p_namespace IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM threadloom_sessions WHERE namespace = p_namespace AND id = p_session_id
    ) THEN
        RETURN 'session';
    END IF;
    PERFORM 1 FROM threadloom_session_heads WHERE session_id = p_session_id FOR UPDATE;
    SELECT tokens INTO v_stored_tokens FROM threadloom_messages WHERE session_id = p_session_id AND id = p_id;
    IF NOT FOUND THEN
        RETURN 'message';
    END IF;
    v_delta := p_tokens - v_stored_tokens;
    IF v_delta <> 0 THEN
        -- Every message below, walked once: OFFSET 0 keeps each step a probe of the children index (0024).
        WITH RECURSIVE below(id) AS (
            SELECT p_id
            UNION ALL
            SELECT c.id FROM below b CROSS JOIN LATERAL (
                SELECT m.id FROM threadloom_messages m
                WHERE hashtextextended(m.session_id || '/' || m.parent_id, 0)
                      = hashtextextended(p_session_id || '/' || b.id, 0)
                  AND m.session_id = p_session_id AND m.parent_id = b.id OFFSET 0
            ) c
        )
        SELECT array_agg(id) INTO v_below FROM below;
        IF EXISTS (SELECT 1 FROM threadloom_compactions
                   WHERE session_id = p_session_id AND to_message_id = ANY (v_below)) THEN
            RETURN 'overlay';
        END IF;
        UPDATE threadloom_messages SET path_tokens = path_tokens + v_delta
        WHERE session_id = p_session_id AND id = ANY (v_below) AND id <> p_id;
    END IF;
    UPDATE threadloom_messages SET role = p_role, content = p_content, tokens = p_tokens,
        path_tokens = path_tokens + v_delta, search_vector = CAST(p_vector AS tsvector)
        WHERE session_id = p_session_id AND id = p_id;
    SELECT m.path_tokens INTO v_leaf_tokens FROM threadloom_session_heads h
        JOIN threadloom_messages m ON m.session_id = h.session_id AND m.id = h.leaf_id
        WHERE h.session_id = p_session_id;
    RETURN 'updated:' || COALESCE(CAST(v_leaf_tokens AS TEXT), '');
END
$$;
