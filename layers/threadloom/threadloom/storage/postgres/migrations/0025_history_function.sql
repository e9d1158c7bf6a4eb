-- Threadloom schema v25 (PostgreSQL): the whole history is read by a function, so its plan is kept per connection.
-- get_history's statement (a recursive walk up from the leaf, then the session's overlays) was parsed and
-- planned on every call: about 150 µs of server time, more than running it on a short session (about 90 µs).
-- PL/pgSQL keeps the plans of the statements it runs, so in a function the walk is planned once per
-- connection: a 10-message read took 462 µs instead of 867.
-- This is safe only because each step of the walk is a LATERAL subquery with LIMIT 1 (storage/postgres/sql.py):
-- as a plain join, a plan kept from when the table was small, or generic, hashed the whole session at every
-- step, and a 1,500-message read stayed at 350 ms after ANALYZE where the statement recovered to 6 ms; with
-- the LATERAL step both take the same time at every size (measured up to 1,800 messages while the table grew).
-- Same rows as the statement: (depth, message) for the path from the leaf (p_leaf_id, or the session's
-- latest when NULL or empty) to the root, unsorted, and one (-1, overlays as a JSON array) row when the
-- session has overlays. Provisioning grants EXECUTE on every threadloom_ function.
CREATE FUNCTION threadloom_history(p_session_id TEXT, p_leaf_id TEXT)
RETURNS TABLE (out_depth BIGINT, out_content TEXT)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE path(id, parent_id, content, depth) AS (
        SELECT id, parent_id, content, depth FROM threadloom_messages WHERE session_id = p_session_id AND id = COALESCE(NULLIF(p_leaf_id, ''), (SELECT h.leaf_id FROM threadloom_session_heads h WHERE h.session_id = p_session_id))
        UNION ALL
        SELECT m.id, m.parent_id, m.content, m.depth FROM path p CROSS JOIN LATERAL (SELECT id, parent_id, content, depth FROM threadloom_messages WHERE session_id = p_session_id AND id = p.parent_id LIMIT 1) AS m)
    SELECT depth, content FROM path
    UNION ALL
    SELECT -1, CAST(json_agg(json_build_array(c.id, c.summary, c.from_message_id, c.to_message_id, to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY c.seq) AS text)
        FROM threadloom_compactions c WHERE c.session_id = p_session_id AND EXISTS (SELECT 1 FROM path)
        HAVING COUNT(*) > 0;
END
$$;
