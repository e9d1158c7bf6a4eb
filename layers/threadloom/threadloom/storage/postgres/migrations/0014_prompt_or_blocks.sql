-- Threadloom schema v14 (PostgreSQL): a session's stored prompt, or the blocks to render it from, in one call.
-- The first time a process opens a session it reads the stored prompt and, when there is none (a new
-- session), the memory, knowledge and session-history blocks to render it from. Sent as one statement
-- of scalar subqueries, the server planned all four on every call (about 90 µs) even though it ran
-- only the first when a prompt was stored. In PL/pgSQL each read's plan is kept by the connection,
-- so a stored prompt costs one lookup and a new session's blocks one round trip with it.
-- threadloom_read_when_missing(prompt key, kinds, first arguments, second arguments) answers
-- {prompt} when a prompt is stored, else {NULL, value of each read in order}. A read is
-- 'block' (first: its key; the content, NULL when missing), 'entries' (first: scope, second:
-- label; the count of search entries) or 'sessions' (first: namespace; the count of sessions).
-- Grant EXECUTE on threadloom_read_when_missing (docs/postgres.md).
CREATE FUNCTION threadloom_read_when_missing(
    p_key    TEXT,
    p_kinds  TEXT[],
    p_first  TEXT[],
    p_second TEXT[]
) RETURNS TEXT[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_prompt TEXT;
    v_value  TEXT;
    v_values TEXT[] := ARRAY[NULL::TEXT];
BEGIN
    SELECT b.content INTO v_prompt FROM threadloom_context_blocks b WHERE b.key = p_key;
    IF v_prompt IS NOT NULL THEN
        RETURN ARRAY[v_prompt];
    END IF;
    FOR i IN 1 .. COALESCE(array_length(p_kinds, 1), 0) LOOP
        IF p_kinds[i] = 'block' THEN
            SELECT b.content INTO v_value FROM threadloom_context_blocks b WHERE b.key = p_first[i];
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
