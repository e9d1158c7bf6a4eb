-- Threadloom schema v34 (PostgreSQL): how many sessions a namespace holds, kept as they are created and deleted.
-- The searchable-history block says "<n> sessions available for search." (the spec's exact n), and a session's
-- first prompt is rendered from it. COUNT(*) over the namespace's rows made opening a new session O(sessions
-- the tenant holds): measured, 0.74 ms to open a session in a namespace of 76 sessions, 2.0 ms at 10,000 and
-- 6.4 ms at 50,000 (bench/session_count_at_scale.py). Now one row per namespace holds the count, moved by
-- triggers as sessions are created and deleted. They are constraint triggers deferred to the commit: a
-- transaction that creates a session and then works on for a while (an import restoring thousands of messages)
-- takes the count row's lock only as it commits, so other creations in the namespace never queue behind its
-- work. INSERT ... ON CONFLICT DO UPDATE adds atomically under concurrency. A session never changes namespace;
-- a statement that tried is refused rather than leave the counts wrong. TRUNCATE empties the counts too.
-- threadloom_read_when_missing (0014, 0015) reads the row instead of counting, with the same answer.
CREATE TABLE threadloom_namespace_sessions (
    namespace TEXT PRIMARY KEY,
    sessions  BIGINT NOT NULL
) WITH (fillfactor = 80);

INSERT INTO threadloom_namespace_sessions (namespace, sessions)
    SELECT namespace, count(*) FROM threadloom_sessions GROUP BY namespace;

CREATE FUNCTION threadloom_count_session() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO threadloom_namespace_sessions AS n (namespace, sessions) VALUES (NEW.namespace, 1)
            ON CONFLICT (namespace) DO UPDATE SET sessions = n.sessions + 1;
    ELSE
        UPDATE threadloom_namespace_sessions n SET sessions = n.sessions - 1 WHERE n.namespace = OLD.namespace;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION threadloom_session_keeps_its_namespace() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = 'threadloom: a session cannot move to another namespace';
END
$$;

CREATE FUNCTION threadloom_forget_session_counts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM threadloom_namespace_sessions;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER threadloom_sessions_counted AFTER INSERT OR DELETE ON threadloom_sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION threadloom_count_session();
CREATE TRIGGER threadloom_sessions_stay_in_their_namespace BEFORE UPDATE OF namespace ON threadloom_sessions
    FOR EACH ROW WHEN (NEW.namespace IS DISTINCT FROM OLD.namespace)
    EXECUTE FUNCTION threadloom_session_keeps_its_namespace();
CREATE TRIGGER threadloom_sessions_counts_truncated AFTER TRUNCATE ON threadloom_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION threadloom_forget_session_counts();

CREATE OR REPLACE FUNCTION threadloom_read_when_missing(
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
            v_value := CAST(COALESCE((SELECT c.sessions FROM threadloom_namespace_sessions c
                                      WHERE c.namespace = p_first[i]), 0) AS TEXT);
        ELSE
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('threadloom: unknown read kind %L', p_kinds[i]);
        END IF;
        v_values := v_values || v_value;
    END LOOP;
    RETURN v_values;
END
$$;
