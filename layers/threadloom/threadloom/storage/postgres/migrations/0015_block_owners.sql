-- Threadloom schema v15 (PostgreSQL): every context block and frozen prompt row belongs to one owner.
-- Rows were keyed by `key` alone, so a block key chosen in one namespace (an import) could name
-- another namespace's row. A row is now owned by (namespace, session_id) and its key is unique
-- only within that owner; every read, write and delete names the owner. session_id '' is a block
-- of no session (a library provider without a session); a later owner kind (a subject or the
-- whole tenant) fits the same way. Existing rows keep their content: the namespace comes from
-- the session that owned them ('' when none is registered).
ALTER TABLE threadloom_context_blocks ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
UPDATE threadloom_context_blocks b SET namespace = s.namespace FROM threadloom_sessions s WHERE s.id = b.session_id;
UPDATE threadloom_context_blocks SET session_id = '' WHERE session_id IS NULL;
ALTER TABLE threadloom_context_blocks ALTER COLUMN namespace DROP DEFAULT, ALTER COLUMN session_id SET NOT NULL;
ALTER TABLE threadloom_context_blocks DROP CONSTRAINT threadloom_context_blocks_pkey;
ALTER TABLE threadloom_context_blocks ADD CONSTRAINT threadloom_context_blocks_pkey
    PRIMARY KEY (namespace, session_id, key);
-- The primary key now leads with the owner, so deleting a session's rows needs no other index.
DROP INDEX threadloom_context_blocks_by_session;

-- threadloom_read_when_missing (migration 0014) read rows by key alone: it now names the owner.
-- (namespace, session id, prompt key, kinds, first arguments, second arguments) answers {prompt}
-- when the owner's prompt is stored, else {NULL, value of each read in order}. A 'block' read
-- (first: its key) reads a block of the same owner; 'entries' and 'sessions' are unchanged.
-- The signature changes, so the old function is dropped: grant EXECUTE again (docs/postgres.md).
DROP FUNCTION threadloom_read_when_missing(TEXT, TEXT[], TEXT[], TEXT[]);
CREATE FUNCTION threadloom_read_when_missing(
    p_namespace  TEXT,
    p_session_id TEXT,
    p_key        TEXT,
    p_kinds      TEXT[],
    p_first      TEXT[],
    p_second     TEXT[]
) RETURNS TEXT[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prompt TEXT;
    v_value  TEXT;
    v_values TEXT[] := ARRAY[NULL::TEXT];
BEGIN
    SELECT b.content INTO v_prompt FROM threadloom_context_blocks b
        WHERE b.namespace = p_namespace AND b.session_id = p_session_id AND b.key = p_key;
    IF v_prompt IS NOT NULL THEN
        RETURN ARRAY[v_prompt];
    END IF;
    FOR i IN 1 .. COALESCE(array_length(p_kinds, 1), 0) LOOP
        IF p_kinds[i] = 'block' THEN
            SELECT b.content INTO v_value FROM threadloom_context_blocks b
                WHERE b.namespace = p_namespace AND b.session_id = p_session_id AND b.key = p_first[i];
        ELSIF p_kinds[i] = 'entries' THEN
            SELECT CAST(COUNT(*) AS TEXT) INTO v_value FROM threadloom_search_entries e
                WHERE e.scope = p_first[i] AND e.label = p_second[i];
        ELSIF p_kinds[i] = 'sessions' THEN
            SELECT CAST(COUNT(*) AS TEXT) INTO v_value FROM threadloom_sessions s WHERE s.namespace = p_first[i];
        ELSE
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('threadloom: unknown read kind %L', p_kinds[i]);
        END IF;
        v_values := v_values || v_value;
    END LOOP;
    RETURN v_values;
END
$$;
