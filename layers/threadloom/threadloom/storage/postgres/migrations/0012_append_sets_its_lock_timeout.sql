-- Threadloom schema v12 (PostgreSQL): an append sets its own lock timeout, in its one statement.
-- The library sent a statement setting the lock and statement timeouts (transaction-locally) ahead of
-- every other one; parsing, planning and running it cost an append about 60 µs of the 750 it took on the
-- server. threadloom_append_within is threadloom_append (0005) with the lock timeout as a parameter,
-- set transaction-locally before the session's head row is locked, so a held session still answers
-- within it (SQLSTATE 55P03) and nothing outlives the transaction. The statement timeout cannot be set
-- from inside the statement it should bound (PostgreSQL arms it as the statement starts), so an append
-- runs without it: its own work is bounded by the message limits, and the client's socket timeout
-- still ends a wait for the server. NULL leaves the server's lock timeout as it is.
-- threadloom_append keeps its signature (and grant) for clients of earlier versions, and calls it.
-- Grant EXECUTE on threadloom_append_within (docs/postgres.md).
CREATE FUNCTION threadloom_append_within(
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
#variable_conflict use_column
DECLARE
    v_leaf     TEXT;
    v_seq      BIGINT;
    v_parent   TEXT;
    v_existing TEXT;
    v_existing_path BIGINT;
    v_depth    BIGINT;
    v_path     BIGINT;
    v_jump     BIGINT;
    v_changed  BOOLEAN := FALSE;
BEGIN
    IF p_lock_timeout IS NOT NULL THEN  -- before the head row's lock, for this transaction only
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    SELECT h.leaf_id, h.next_seq INTO v_leaf, v_seq
        FROM threadloom_session_heads h WHERE h.session_id = p_session_id FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (p_session_id, NULL, 1)
            ON CONFLICT (session_id) DO NOTHING;
        SELECT h.leaf_id, h.next_seq INTO v_leaf, v_seq
            FROM threadloom_session_heads h WHERE h.session_id = p_session_id FOR UPDATE;
    END IF;
    IF EXISTS (SELECT 1 FROM threadloom_compactions c
               WHERE c.session_id = p_session_id AND c.to_message_id = ANY (p_ids)) THEN
        RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = 'threadloom: appended id ends a compaction overlay';
    END IF;
    v_parent := CASE WHEN p_parent_omitted THEN v_leaf ELSE NULLIF(p_parent_id, '') END;
    FOR i IN 1 .. COALESCE(array_length(p_ids, 1), 0) LOOP
        SELECT m.parent_id, m.path_tokens INTO v_existing, v_existing_path
            FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = p_ids[i];
        IF FOUND THEN
            out_id := p_ids[i];
            out_parent_id := v_existing;
            out_inserted := FALSE;
            out_path_tokens := v_existing_path;
            RETURN NEXT;
            v_parent := p_ids[i];
            CONTINUE;
        END IF;
        IF p_expected_leaf_id IS NOT NULL AND p_expected_leaf_id IS DISTINCT FROM v_leaf THEN
            RAISE EXCEPTION USING ERRCODE = 'TL409', MESSAGE = 'threadloom: the latest leaf moved',
                DETAIL = json_build_object('leaf', v_leaf)::text;
        END IF;
        IF v_parent IS NULL THEN
            v_depth := 0;
            v_path := p_tokens[i];
            v_jump := NULL;
        ELSE
            SELECT m.depth + 1, m.path_tokens + p_tokens[i], CASE WHEN m.depth % 64 = 0 THEN m.seq ELSE m.jump END
                INTO v_depth, v_path, v_jump
                FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = v_parent;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'TL404', MESSAGE = 'threadloom: parent message not found',
                    DETAIL = v_parent;
            END IF;
        END IF;
        INSERT INTO threadloom_messages (session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens,
                                         created_at, search_vector, jump)
            VALUES (p_session_id, p_ids[i], v_seq, v_parent, p_roles[i], p_contents[i], v_depth, p_tokens[i], v_path,
                    p_created_at, CAST(p_vectors[i] AS tsvector), v_jump);
        out_id := p_ids[i];
        out_parent_id := v_parent;
        out_inserted := TRUE;
        out_path_tokens := v_path;
        RETURN NEXT;
        v_leaf := p_ids[i];
        v_seq := v_seq + 1;
        v_parent := p_ids[i];
        v_changed := TRUE;
    END LOOP;
    IF v_changed THEN
        UPDATE threadloom_session_heads SET leaf_id = v_leaf, next_seq = v_seq WHERE session_id = p_session_id;
    END IF;
END
$$;


CREATE OR REPLACE FUNCTION threadloom_append(
    p_session_id       TEXT,
    p_ids              TEXT[],
    p_roles            TEXT[],
    p_contents         TEXT[],
    p_tokens           BIGINT[],
    p_vectors          TEXT[],
    p_parent_omitted   BOOLEAN,
    p_parent_id        TEXT,
    p_expected_leaf_id TEXT,
    p_created_at       TIMESTAMPTZ
) RETURNS TABLE (out_id TEXT, out_parent_id TEXT, out_inserted BOOLEAN, out_path_tokens BIGINT)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM threadloom_append_within(
        p_session_id, p_ids, p_roles, p_contents, p_tokens, p_vectors, p_parent_omitted, p_parent_id,
        p_expected_leaf_id, p_created_at, NULL
    )
$$;
