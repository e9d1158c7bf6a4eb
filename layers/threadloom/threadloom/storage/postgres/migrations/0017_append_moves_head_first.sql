-- Threadloom schema v17 (PostgreSQL): an append moves the session's head in the statement that locks it.
-- threadloom_append_message (0013) locked the head row with SELECT ... FOR UPDATE, read the parent row
-- in a SELECT of its own, inserted, then updated the head: four statements on the common path, and the
-- lock itself wrote a WAL record (Heap/LOCK, about 54 bytes) before the update wrote another. The
-- server's own evidence (auto_explain with nested statements, pg_walinspect between two WAL positions,
-- bench/postgres_append_floor.py) put the lock and the separate parent read at about 25 µs of the
-- function's 150 µs. Now one UPDATE locks the head and moves it (leaf to the new id, next_seq + 1), and
-- returns the leaf it replaced through previous_leaf_id, a column written by that UPDATE only (SET reads
-- the row being updated, so under a concurrent append it is the newest committed leaf, never a stale
-- one); the parent's depth, running estimate and jump are read by the INSERT ... SELECT itself. The
-- rare paths keep their meaning: an error (TL001, TL404, TL409, 55P03) rolls the whole statement back,
-- head included, and an id already stored (a retry) puts the head back as it was before answering,
-- still under the row's lock, so nothing is written for a retry but that restore. Same signature,
-- answer and grant as 0013 (CREATE OR REPLACE keeps the EXECUTE grant).
ALTER TABLE threadloom_session_heads ADD COLUMN previous_leaf_id TEXT;

CREATE OR REPLACE FUNCTION threadloom_append_message(
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
    v_path     BIGINT;
BEGIN
    IF p_lock_timeout IS NOT NULL THEN  -- before the head row's lock, for this transaction only
        PERFORM set_config('lock_timeout', p_lock_timeout, true);
    END IF;
    UPDATE threadloom_session_heads h SET previous_leaf_id = h.leaf_id, leaf_id = p_id, next_seq = h.next_seq + 1
        WHERE h.session_id = p_session_id RETURNING h.previous_leaf_id, h.next_seq - 1 INTO v_leaf, v_seq;
    IF NOT FOUND THEN
        INSERT INTO threadloom_session_heads (session_id, leaf_id, next_seq) VALUES (p_session_id, NULL, 1)
            ON CONFLICT (session_id) DO NOTHING;
        UPDATE threadloom_session_heads h SET previous_leaf_id = h.leaf_id, leaf_id = p_id, next_seq = h.next_seq + 1
            WHERE h.session_id = p_session_id RETURNING h.previous_leaf_id, h.next_seq - 1 INTO v_leaf, v_seq;
    END IF;
    IF EXISTS (SELECT 1 FROM threadloom_compactions c WHERE c.session_id = p_session_id AND c.to_message_id = p_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = 'threadloom: appended id ends a compaction overlay';
    END IF;
    SELECT m.parent_id, m.path_tokens INTO v_existing, v_existing_path
        FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = p_id;
    IF FOUND THEN  -- a retry: the head goes back to where it was, and nothing else is written
        UPDATE threadloom_session_heads h SET leaf_id = v_leaf, next_seq = v_seq, previous_leaf_id = NULL
            WHERE h.session_id = p_session_id;
        RETURN 'f' || v_existing_path || COALESCE(':' || v_existing, '');
    END IF;
    IF p_expected_leaf_id IS NOT NULL AND p_expected_leaf_id IS DISTINCT FROM v_leaf THEN
        RAISE EXCEPTION USING ERRCODE = 'TL409', MESSAGE = 'threadloom: the latest leaf moved',
            DETAIL = json_build_object('leaf', v_leaf)::text;
    END IF;
    v_parent := CASE WHEN p_parent_omitted THEN v_leaf ELSE NULLIF(p_parent_id, '') END;
    IF v_parent IS NULL THEN
        INSERT INTO threadloom_messages (session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens,
                                         created_at, search_vector, jump)
            VALUES (p_session_id, p_id, v_seq, NULL, p_role, p_content, 0, p_tokens, p_tokens,
                    p_created_at, CAST(p_vector AS tsvector), NULL);
        v_path := p_tokens;
    ELSE
        INSERT INTO threadloom_messages (session_id, id, seq, parent_id, role, content, depth, tokens, path_tokens,
                                         created_at, search_vector, jump)
            SELECT p_session_id, p_id, v_seq, v_parent, p_role, p_content, m.depth + 1, p_tokens,
                   m.path_tokens + p_tokens, p_created_at, CAST(p_vector AS tsvector),
                   CASE WHEN m.depth % 64 = 0 THEN m.seq ELSE m.jump END
                FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = v_parent
            RETURNING path_tokens INTO v_path;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TL404', MESSAGE = 'threadloom: parent message not found',
                DETAIL = v_parent;
        END IF;
    END IF;
    RETURN 't' || v_path || COALESCE(':' || v_parent, '');
END
$$;
