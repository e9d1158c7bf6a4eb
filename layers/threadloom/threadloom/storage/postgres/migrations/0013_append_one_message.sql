-- Threadloom schema v13 (PostgreSQL): one message, one plain function call.
-- Nearly every append is one message, and it called threadloom_append_within (0012), which takes
-- arrays and returns a set of rows. The server's log and interleaved benchmarks showed what that
-- shape costs for one message: parsing and planning the FROM-clause call of a set-returning
-- function with array constructors, a tuplestore for one row, and the arrays themselves, about
-- 70 µs of an append's 600. threadloom_append_message does the same steps in the same order (lock
-- timeout, head row lock, compaction check, existing id, expected leaf, parent, insert, head
-- update) for one message, with scalar arguments, called as `SELECT threadloom_append_message(...)`.
-- It returns one text: 't' if inserted else 'f', the path tokens, then ':' and the parent id when
-- there is a parent ('t42:m1', 'f7'); for an id already stored (a retry), its stored parent and path
-- tokens, and nothing is written. (A text[] would do, but pg8000 parses arrays character by character.) Errors are 0012's (TL001,
-- TL409, TL404, 55P03). Chains of several messages still call threadloom_append_within.
-- Grant EXECUTE on threadloom_append_message (docs/postgres.md).
CREATE FUNCTION threadloom_append_message(
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
    IF EXISTS (SELECT 1 FROM threadloom_compactions c WHERE c.session_id = p_session_id AND c.to_message_id = p_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = 'threadloom: appended id ends a compaction overlay';
    END IF;
    SELECT m.parent_id, m.path_tokens INTO v_existing, v_existing_path
        FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = p_id;
    IF FOUND THEN
        RETURN 'f' || v_existing_path || COALESCE(':' || v_existing, '');
    END IF;
    IF p_expected_leaf_id IS NOT NULL AND p_expected_leaf_id IS DISTINCT FROM v_leaf THEN
        RAISE EXCEPTION USING ERRCODE = 'TL409', MESSAGE = 'threadloom: the latest leaf moved',
            DETAIL = json_build_object('leaf', v_leaf)::text;
    END IF;
    v_parent := CASE WHEN p_parent_omitted THEN v_leaf ELSE NULLIF(p_parent_id, '') END;
    IF v_parent IS NULL THEN
        v_depth := 0;
        v_path := p_tokens;
        v_jump := NULL;
    ELSE
        SELECT m.depth + 1, m.path_tokens + p_tokens, CASE WHEN m.depth % 64 = 0 THEN m.seq ELSE m.jump END
            INTO v_depth, v_path, v_jump
            FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = v_parent;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TL404', MESSAGE = 'threadloom: parent message not found',
                DETAIL = v_parent;
        END IF;
    END IF;
    INSERT INTO threadloom_messages (session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens,
                                     created_at, search_vector, jump)
        VALUES (p_session_id, p_id, v_seq, v_parent, p_role, p_content, v_depth, p_tokens, v_path,
                p_created_at, CAST(p_vector AS tsvector), v_jump);
    UPDATE threadloom_session_heads SET leaf_id = p_id, next_seq = v_seq + 1 WHERE session_id = p_session_id;
    RETURN 't' || v_path || COALESCE(':' || v_parent, '');
END
$$;
