-- Threadloom schema v5 (PostgreSQL): a jump pointer per message, so one page of a long history is O(page).
-- jump = the seq of the message's ancestor at depth ((depth - 1) / 64) * 64 (NULL for a root).
-- Following jumps from a leaf reaches the ancestor at any depth d in about (leaf depth - d) / 64 + 64
-- hops instead of (leaf depth - d) (threadloom.storage.history_pages).
-- (A number rather than the id: an integer column leaves the planner's choice of the primary key
-- for the append's id lookups on a fresh table as it was; a text column tipped it to a scan.)
-- The span 64 is JUMP_SPAN in storage/dialect.py.
-- threadloom_append sets it from the parent row it already reads; triggers fill it for every other
-- writer (import, the depth recomputation after deletes and overlays, any future copy): a row's jump
-- only needs its parent's depth and jump, and parents are written or recomputed before their
-- children. A NULL jump is always safe: reads then step by parent_id. The trigger function needs no
-- grant (triggers run it for the writing role); threadloom_append keeps its signature, so the
-- EXECUTE grant of docs/postgres.md stays valid.
ALTER TABLE threadloom_messages ADD COLUMN jump BIGINT;

-- Backfill, parents before children.
WITH RECURSIVE chain(session_id, id, seq, depth, jump) AS (
    SELECT session_id, id, seq, depth, CAST(NULL AS BIGINT) FROM threadloom_messages WHERE parent_id IS NULL
    UNION ALL
    SELECT m.session_id, m.id, m.seq, m.depth, CASE WHEN c.depth % 64 = 0 THEN c.seq ELSE c.jump END
    FROM threadloom_messages m JOIN chain c ON m.session_id = c.session_id AND m.parent_id = c.id
)
UPDATE threadloom_messages m SET jump = chain.jump FROM chain
WHERE m.session_id = chain.session_id AND m.id = chain.id;

CREATE FUNCTION threadloom_message_jump() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NEW.parent_id IS NULL THEN
        NEW.jump := NULL;
    ELSE
        SELECT CASE WHEN p.depth % 64 = 0 THEN p.seq ELSE p.jump END INTO NEW.jump
            FROM threadloom_messages p WHERE p.session_id = NEW.session_id AND p.id = NEW.parent_id;
    END IF;
    RETURN NEW;
END;
$$;

-- Only when the writer did not set it (an append computes it), or the row moved.
CREATE TRIGGER threadloom_messages_jump_on_insert BEFORE INSERT ON threadloom_messages
    FOR EACH ROW WHEN (NEW.jump IS NULL AND NEW.parent_id IS NOT NULL) EXECUTE FUNCTION threadloom_message_jump();
CREATE TRIGGER threadloom_messages_jump_on_move BEFORE UPDATE OF parent_id, depth ON threadloom_messages
    FOR EACH ROW WHEN (NEW.parent_id IS DISTINCT FROM OLD.parent_id OR NEW.depth IS DISTINCT FROM OLD.depth)
    EXECUTE FUNCTION threadloom_message_jump();

-- The append of 0002, now also writing jump.
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
