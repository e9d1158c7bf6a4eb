-- Threadloom schema v1 (PostgreSQL). Applied by PostgresStore.migrate() and `threadloom migrate`;
-- never edit a released migration, add a new numbered file instead.
-- Timestamps are TIMESTAMPTZ written from the client's UTC clock; tsvector columns are filled
-- from threadloom.search.to_tsvector_literal() so PostgreSQL and SQLite index the same terms.

-- btree_gin lets one GIN index hold a scalar key (the session) next to the tsvector, so a
-- search inside one session intersects that session's posting list with the terms' lists.
-- It is a trusted extension: a role with CREATE on the database may install it.
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Session registry used by SessionManager (one row per named session, scoped by namespace).
CREATE TABLE threadloom_sessions (
    id                TEXT PRIMARY KEY,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    parent_session_id TEXT,
    model             TEXT,
    source            TEXT,
    input_tokens      BIGINT NOT NULL DEFAULT 0,
    output_tokens     BIGINT NOT NULL DEFAULT 0,
    estimated_cost    DOUBLE PRECISION NOT NULL DEFAULT 0,
    end_reason        TEXT,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    activity_seq      BIGINT NOT NULL DEFAULT 0
);
-- activity_seq orders sessions by latest activity even when timestamps tie.
CREATE INDEX threadloom_sessions_by_activity ON threadloom_sessions (namespace, activity_seq DESC, id DESC);

-- One row per session that has messages: the append lock (row lock), the latest leaf and the
-- insertion counter. Updated on every append, so leave room for HOT updates.
CREATE TABLE threadloom_session_heads (
    session_id TEXT PRIMARY KEY,
    leaf_id    TEXT,
    next_seq   BIGINT NOT NULL DEFAULT 1
) WITH (fillfactor = 70);

-- The message tree, keyed by (session, id) (contract D1); seq is the per-session insertion
-- order (D2). depth and path_tokens make path length and the token estimate O(1).
CREATE TABLE threadloom_messages (
    session_id    TEXT NOT NULL,
    id            TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    parent_id     TEXT,
    role          TEXT NOT NULL,
    content       TEXT NOT NULL,
    depth         BIGINT NOT NULL,
    tokens        BIGINT NOT NULL,
    path_tokens   BIGINT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    search_vector TSVECTOR,
    PRIMARY KEY (session_id, id)
);
CREATE UNIQUE INDEX threadloom_messages_by_seq ON threadloom_messages (session_id, seq);
CREATE INDEX threadloom_messages_by_parent ON threadloom_messages (session_id, parent_id, seq);
CREATE INDEX threadloom_messages_search ON threadloom_messages USING gin (session_id, search_vector);

-- Compaction overlays, applied at read time; request_key makes a redelivered request a no-op.
CREATE TABLE threadloom_compactions (
    session_id      TEXT NOT NULL,
    id              TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    summary         TEXT NOT NULL,
    from_message_id TEXT NOT NULL,
    to_message_id   TEXT NOT NULL,
    request_key     TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX threadloom_compactions_by_seq ON threadloom_compactions (session_id, seq);
CREATE UNIQUE INDEX threadloom_compactions_by_request ON threadloom_compactions (session_id, request_key)
    WHERE request_key IS NOT NULL;

-- Context block contents and frozen prompts; session_id lets a session delete erase its own rows.
CREATE TABLE threadloom_context_blocks (
    key        TEXT PRIMARY KEY,
    session_id TEXT,
    content    TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX threadloom_context_blocks_by_session ON threadloom_context_blocks (session_id);

-- Searchable context entries (search_context), searched within one (scope, label).
CREATE TABLE threadloom_search_entries (
    scope         TEXT NOT NULL,
    label         TEXT NOT NULL,
    key           TEXT NOT NULL,
    content       TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    search_vector TSVECTOR,
    PRIMARY KEY (scope, label, key)
);
CREATE INDEX threadloom_search_entries_search ON threadloom_search_entries USING gin (scope, label, search_vector);

-- Skills the model has loaded (contract D7: stored, not rebuilt by scanning history).
CREATE TABLE threadloom_loaded_skills (
    session_id TEXT NOT NULL,
    skill_id   TEXT NOT NULL,
    PRIMARY KEY (session_id, skill_id)
);

-- Appends one message, or a chain, in a single statement: one network round trip instead of
-- eight, and no client-side transaction. Same steps and order as SqlSessionProvider._insert:
-- lock the head row (appends to one session serialize, other sessions never wait), skip ids
-- already stored (first write wins), check the expected leaf, resolve the parent, insert with
-- depth, running token estimate and search vector, then move the head. Failures raise
-- SQLSTATE TL001 (an id ends a compaction overlay: the caller takes the general path),
-- TL404 (parent missing, DETAIL = parent id) or TL409 (leaf moved, DETAIL = {"leaf": ...}),
-- and everything the call did is rolled back.
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
) RETURNS TABLE (out_id TEXT, out_parent_id TEXT, out_inserted BOOLEAN)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_leaf     TEXT;
    v_seq      BIGINT;
    v_parent   TEXT;
    v_existing TEXT;
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
        SELECT m.parent_id INTO v_existing
            FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = p_ids[i];
        IF FOUND THEN
            out_id := p_ids[i];
            out_parent_id := v_existing;
            out_inserted := FALSE;
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
