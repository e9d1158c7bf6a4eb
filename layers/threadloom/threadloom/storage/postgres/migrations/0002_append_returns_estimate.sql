-- Threadloom schema v2 (PostgreSQL): threadloom_append also returns each message's running
-- token estimate (path_tokens, overlays applied), so an append with the auto-compaction check
-- or an event listener on costs one round trip instead of two. The steps are 0001's otherwise.
-- A changed result type needs DROP + CREATE: a role granted EXECUTE needs the grant again
-- afterwards (docs/postgres.md, "Least-privilege roles").
DROP FUNCTION threadloom_append(TEXT, TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BOOLEAN, TEXT, TEXT, TIMESTAMPTZ);

CREATE FUNCTION threadloom_append(
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
    v_changed  BOOLEAN := FALSE;
BEGIN
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
        ELSE
            SELECT m.depth + 1, m.path_tokens + p_tokens[i] INTO v_depth, v_path
                FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = v_parent;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'TL404', MESSAGE = 'threadloom: parent message not found',
                    DETAIL = v_parent;
            END IF;
        END IF;
        INSERT INTO threadloom_messages (session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens,
                                         created_at, search_vector)
            VALUES (p_session_id, p_ids[i], v_seq, v_parent, p_roles[i], p_contents[i], v_depth, p_tokens[i], v_path,
                    p_created_at, CAST(p_vectors[i] AS tsvector));
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
