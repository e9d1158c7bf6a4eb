-- Threadloom schema v29 (PostgreSQL): an edit in one call hands a very large subtree to the shared code.
-- threadloom_update_message (0027) moves the running estimate of every message below an edited one in one
-- UPDATE. At about 30 µs a row on a small server, an edit near the root of a session of 150,000 messages took
-- 4.4 to 4.9 s and sometimes outlasted the 5 s statement timeout, which a retry never cures. This version
-- takes p_max_below: with more messages than that below the edited one it writes nothing and answers 'large',
-- and the client edits through the shared code path, which writes the estimates in statements of a bounded
-- number of rows, each within the timeout. Everything else is as in 0027. The 0027 signature stays, calling
-- this one with 10,000, so a client from before this migration keeps working while a deployment rolls out
-- (it already takes the shared path for any answer it does not know).
CREATE FUNCTION threadloom_update_message(
    p_namespace    TEXT,
    p_session_id   TEXT,
    p_id           TEXT,
    p_role         TEXT,
    p_content      TEXT,
    p_tokens       BIGINT,
    p_vector       TEXT,
    p_max_below    BIGINT
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
        -- Every message below, walked once: OFFSET 0 keeps each step a probe of the children index (0024);
        -- the walk stops one past the bound (a recursive query under a LIMIT is read lazily).
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
        SELECT array_agg(id) INTO v_below FROM (SELECT id FROM below LIMIT p_max_below + 2) walked;
        IF cardinality(v_below) - 1 > p_max_below THEN
            RETURN 'large';
        END IF;
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

CREATE OR REPLACE FUNCTION threadloom_update_message(
    p_namespace    TEXT,
    p_session_id   TEXT,
    p_id           TEXT,
    p_role         TEXT,
    p_content      TEXT,
    p_tokens       BIGINT,
    p_vector       TEXT
) RETURNS TEXT
LANGUAGE sql VOLATILE AS $$
    SELECT threadloom_update_message(p_namespace, p_session_id, p_id, p_role, p_content, p_tokens, p_vector, 10000)
$$;
