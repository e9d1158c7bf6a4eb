-- Threadloom schema v28 (PostgreSQL): deleting one message in one statement.
-- A deletion (DELETE /sessions/{id}/messages/{messageId}) read the session's registry row, read the message,
-- read the registry row again, then ran a transaction of a statement a round trip (lock the head, read the
-- message, find its children and re-parent each, find the overlays that touch it, delete it, walk the
-- subtree, rewrite each row below it, find the latest leaf and store it), read the estimate for the status
-- event and stamped the session: about sixteen round trips. This function does the same in one call.
-- With p_namespace it first locks the session's registry row in that namespace (before the head row, the
-- order in which deleting a session takes them) and stamps its activity after the deletion, as the
-- manager's deletion always did; without it, nothing is stamped. Then it locks the head row, walks the
-- subtree once, deletes the message, moves its children to its parent and every row below it up a level
-- with its running estimate less the message's tokens, one row at a time, parents first: the jump-pointer
-- trigger (0005) reads each row's parent. It then stores the latest childless message as the leaf, as the
-- shared code does. When a compaction overlay starts or ends at the message or below it, the function
-- writes nothing and answers 'overlay': the client deletes through the shared code path, which removes the
-- overlays the deletion breaks and measures each remaining end from its compacted history. When more than
-- p_max_below messages are below it, it writes nothing and answers 'large': moving them one by one in this
-- one statement (about 30 µs a row on a small server) could outlast the statement timeout, where the shared
-- code sends them in batches of statements, each bounded by it.
-- Answers: 'deleted:' and the new leaf's running estimate (empty if the session has no message left), which
-- the status event after a deletion reports without another round trip; 'session' (the namespace does not
-- hold the session), 'message' (no such message: nothing written, nothing stamped), 'overlay' or 'large'.
-- It is sent after the timeouts statement, which sets the lock and statement timeouts for its transaction.
CREATE FUNCTION threadloom_delete_message(
    p_namespace  TEXT,
    p_session_id TEXT,
    p_id         TEXT,
    p_now        TIMESTAMPTZ,
    p_max_below  BIGINT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_parent      TEXT;
    v_tokens      BIGINT;
    v_below       TEXT[];
    v_id          TEXT;
    v_leaf        TEXT;
    v_leaf_tokens BIGINT;
BEGIN
    IF p_namespace IS NOT NULL THEN
        PERFORM 1 FROM threadloom_sessions WHERE namespace = p_namespace AND id = p_session_id FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN 'session';
        END IF;
    END IF;
    PERFORM 1 FROM threadloom_session_heads WHERE session_id = p_session_id FOR UPDATE;
    SELECT parent_id, tokens INTO v_parent, v_tokens
        FROM threadloom_messages WHERE session_id = p_session_id AND id = p_id;
    IF NOT FOUND THEN
        RETURN 'message';
    END IF;
    -- The message and every message below it, by level: OFFSET 0 keeps each step a probe of the children
    -- index (0024). The walk stops one past the bound (a recursive query under a LIMIT is read lazily).
    WITH RECURSIVE below(id, level) AS (
        SELECT p_id, 0
        UNION ALL
        SELECT c.id, b.level + 1 FROM below b CROSS JOIN LATERAL (
            SELECT m.id FROM threadloom_messages m
            WHERE hashtextextended(m.session_id || '/' || m.parent_id, 0)
                  = hashtextextended(p_session_id || '/' || b.id, 0)
              AND m.session_id = p_session_id AND m.parent_id = b.id OFFSET 0
        ) c
    )
    SELECT array_agg(id ORDER BY level) INTO v_below FROM (SELECT id, level FROM below LIMIT p_max_below + 2) walked;
    IF cardinality(v_below) - 1 > p_max_below THEN
        RETURN 'large';
    END IF;
    IF EXISTS (SELECT 1 FROM threadloom_compactions
               WHERE session_id = p_session_id
                 AND (from_message_id = ANY (v_below) OR to_message_id = ANY (v_below))) THEN
        RETURN 'overlay';
    END IF;
    DELETE FROM threadloom_messages WHERE session_id = p_session_id AND id = p_id;
    FOREACH v_id IN ARRAY v_below[2:] LOOP
        UPDATE threadloom_messages SET parent_id = CASE WHEN parent_id = p_id THEN v_parent ELSE parent_id END,
            depth = depth - 1, path_tokens = path_tokens - v_tokens
            WHERE session_id = p_session_id AND id = v_id;
    END LOOP;
    SELECT m.id, m.path_tokens INTO v_leaf, v_leaf_tokens FROM threadloom_messages m
        WHERE m.session_id = p_session_id AND NOT EXISTS (
            SELECT 1 FROM threadloom_messages c
            WHERE hashtextextended(c.session_id || '/' || c.parent_id, 0)
                  = hashtextextended(m.session_id || '/' || m.id, 0)
              AND c.session_id = m.session_id AND c.parent_id = m.id)
        ORDER BY m.seq DESC LIMIT 1;
    UPDATE threadloom_session_heads SET leaf_id = v_leaf WHERE session_id = p_session_id;
    IF p_namespace IS NOT NULL THEN
        UPDATE threadloom_sessions s SET updated_at = p_now,
            activity_seq = (SELECT COALESCE(MAX(a.activity_seq), 0) + 1 FROM threadloom_sessions a
                            WHERE a.namespace = p_namespace)
            WHERE s.namespace = p_namespace AND s.id = p_session_id;
    END IF;
    RETURN 'deleted:' || COALESCE(CAST(v_leaf_tokens AS TEXT), '');
END
$$;
