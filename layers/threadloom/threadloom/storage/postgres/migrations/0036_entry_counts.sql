-- Threadloom schema v36 (PostgreSQL): how many entries a searchable block holds, kept as they are written and removed;
-- and every count (these, and 0034's sessions) moved once per transaction, not once per row.
-- A search block renders "<n> entries indexed." into a session's first prompt, and a new key is checked against
-- max_entries_per_tenant (up to 1,000,000). Both counted the block's rows, so a tenant with many entries paid
-- for all of them on every new session's open and every new key. As 0034 does for sessions, one row per
-- (scope, label) now holds the count. An entry never moves to another scope or label (its upsert changes the
-- content only); a statement that tried is refused rather than leave the counts wrong. TRUNCATE empties the
-- counts too. threadloom_read_when_missing reads the row, with the same answer.
-- 0034 moved its count row once per row created, at the commit. A transaction that creates many (an import of
-- a large file) then wrote one version of the same row per session, and each found the row again through an
-- index holding every earlier version: the commit grew with the square of the rows (1,000 sessions 11 ms,
-- 4,000 94 ms, 16,000 1.3 s). Now a row trigger adds each change to a total kept in a transaction-local setting
-- (threadloom.pending_counts, a JSON object, gone with the transaction and undone with a rolled-back
-- savepoint), and the trigger deferred to the commit applies a total once and clears it: one write of the
-- count row per transaction, still taking its lock only as the transaction commits.
CREATE TABLE threadloom_entry_counts (
    scope   TEXT NOT NULL,
    label   TEXT NOT NULL,
    entries BIGINT NOT NULL,
    PRIMARY KEY (scope, label)
) WITH (fillfactor = 80);

INSERT INTO threadloom_entry_counts (scope, label, entries)
    SELECT scope, label, count(*) FROM threadloom_search_entries GROUP BY scope, label;

CREATE FUNCTION threadloom_note_count(p_key TEXT, p_change BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_pending JSONB := COALESCE(NULLIF(current_setting('threadloom.pending_counts', true), ''), '{}')::jsonb;
BEGIN
    v_pending := jsonb_set(v_pending, ARRAY[p_key], to_jsonb(COALESCE((v_pending ->> p_key)::bigint, 0) + p_change));
    PERFORM set_config('threadloom.pending_counts', v_pending::text, true);
END
$$;

-- The total noted under p_key, then 0: the first deferred trigger of a transaction for a count takes it all and
-- the others find 0. NULL when nothing was noted: a row whose transaction began before this migration, which
-- the caller counts by itself as 0034 did.
CREATE FUNCTION threadloom_take_count(p_key TEXT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    v_pending JSONB := COALESCE(NULLIF(current_setting('threadloom.pending_counts', true), ''), '{}')::jsonb;
    v_change  BIGINT := (v_pending ->> p_key)::bigint;
BEGIN
    IF v_change <> 0 THEN
        v_pending := jsonb_set(v_pending, ARRAY[p_key], '0');
        PERFORM set_config('threadloom.pending_counts', v_pending::text, true);
    END IF;
    RETURN v_change;
END
$$;

CREATE FUNCTION threadloom_note_session() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM threadloom_note_count('s:' || NEW.namespace, 1);
    ELSE
        PERFORM threadloom_note_count('s:' || OLD.namespace, -1);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION threadloom_count_session() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_namespace TEXT := CASE WHEN TG_OP = 'INSERT' THEN NEW.namespace ELSE OLD.namespace END;
    v_change    BIGINT := COALESCE(threadloom_take_count('s:' || v_namespace),
                                   CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END);
BEGIN
    IF v_change <> 0 THEN
        INSERT INTO threadloom_namespace_sessions AS n (namespace, sessions) VALUES (v_namespace, v_change)
            ON CONFLICT (namespace) DO UPDATE SET sessions = n.sessions + v_change;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER threadloom_sessions_noted AFTER INSERT OR DELETE ON threadloom_sessions
    FOR EACH ROW EXECUTE FUNCTION threadloom_note_session();

-- An entry's key in the pending totals: its scope's length first, so no two (scope, label) pairs share one.
CREATE FUNCTION threadloom_note_entry() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM threadloom_note_count('e:' || length(NEW.scope) || ':' || NEW.scope || NEW.label, 1);
    ELSE
        PERFORM threadloom_note_count('e:' || length(OLD.scope) || ':' || OLD.scope || OLD.label, -1);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION threadloom_count_entry() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_scope  TEXT := CASE WHEN TG_OP = 'INSERT' THEN NEW.scope ELSE OLD.scope END;
    v_label  TEXT := CASE WHEN TG_OP = 'INSERT' THEN NEW.label ELSE OLD.label END;
    v_change BIGINT := COALESCE(threadloom_take_count('e:' || length(v_scope) || ':' || v_scope || v_label),
                                CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END);
BEGIN
    IF v_change <> 0 THEN
        INSERT INTO threadloom_entry_counts AS c (scope, label, entries) VALUES (v_scope, v_label, v_change)
            ON CONFLICT (scope, label) DO UPDATE SET entries = c.entries + v_change;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION threadloom_entry_keeps_its_block() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = 'threadloom: an entry cannot move to another scope or label';
END
$$;

CREATE FUNCTION threadloom_forget_entry_counts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM threadloom_entry_counts;
    RETURN NULL;
END
$$;

CREATE TRIGGER threadloom_search_entries_noted AFTER INSERT OR DELETE ON threadloom_search_entries
    FOR EACH ROW EXECUTE FUNCTION threadloom_note_entry();
CREATE CONSTRAINT TRIGGER threadloom_search_entries_counted AFTER INSERT OR DELETE ON threadloom_search_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION threadloom_count_entry();
CREATE TRIGGER threadloom_search_entries_stay_in_their_block BEFORE UPDATE OF scope, label ON threadloom_search_entries
    FOR EACH ROW WHEN (NEW.scope IS DISTINCT FROM OLD.scope OR NEW.label IS DISTINCT FROM OLD.label)
    EXECUTE FUNCTION threadloom_entry_keeps_its_block();
CREATE TRIGGER threadloom_search_entries_counts_truncated AFTER TRUNCATE ON threadloom_search_entries
    FOR EACH STATEMENT EXECUTE FUNCTION threadloom_forget_entry_counts();

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
            v_value := CAST(COALESCE((SELECT c.entries FROM threadloom_entry_counts c
                                      WHERE c.scope = p_first[i] AND c.label = p_second[i]), 0) AS TEXT);
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
