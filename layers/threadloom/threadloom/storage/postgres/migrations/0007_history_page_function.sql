-- Threadloom schema v7 (PostgreSQL): one page of GET /history in one call with a cached plan.
-- threadloom_history_page returns what threadloom.storage.history_pages reads for a page, in one
-- round trip: the rows at depths p_first..p_last of p_leaf_id's path as (depth, id, bytes, content),
-- the content only while the running bytes stay within p_budget; (-1, leaf id, leaf depth, NULL)
-- when the leaf exists; (-2, id, seq, NULL) of the shallowest ancestor the walk passed at depth
-- p_hint or deeper (the next page starts its walk there); and with p_overlays (-3, NULL, NULL, the
-- session's overlays as a JSON array) when it has any.
-- As a plain statement the walk was planned again on every page (0.4 ms of its 2 ms); PL/pgSQL
-- keeps the plan for the connection's life. The walk starts at the ancestor (p_anchor_seq,
-- p_anchor_id) when that row still exists at depth p_last or deeper: writers never detach a message
-- from its ancestors (a delete moves the children to the nearest survivor) and never reuse a seq,
-- so it is still on the leaf's path; otherwise at the leaf, as before.
-- Needs EXECUTE for the application role (docs/postgres.md); PUBLIC has it unless revoked.
CREATE FUNCTION threadloom_history_page(
    p_session_id TEXT,
    p_leaf_id    TEXT,
    p_first      BIGINT,
    p_last       BIGINT,
    p_budget     BIGINT,
    p_anchor_seq BIGINT,
    p_anchor_id  TEXT,
    p_hint       BIGINT,
    p_overlays   BOOLEAN
) RETURNS TABLE (out_depth BIGINT, out_id TEXT, out_size BIGINT, out_content TEXT)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE down(id, seq, jump, depth) AS (
        SELECT m.id, m.seq, m.jump, m.depth FROM threadloom_messages m
        WHERE m.session_id = p_session_id AND m.id = COALESCE(
            (SELECT a.id FROM threadloom_messages a WHERE a.session_id = p_session_id AND a.seq = p_anchor_seq
             AND a.id = p_anchor_id AND a.depth >= p_last),
            p_leaf_id)
        UNION ALL
        SELECT m.id, m.seq, m.jump, m.depth FROM threadloom_messages m JOIN down d
        ON m.session_id = p_session_id AND m.seq = d.jump
        WHERE d.depth > p_last AND ((d.depth - 1) / 64) * 64 >= p_last
    ), near(id, parent_id, depth) AS (
        SELECT m.id, m.parent_id, m.depth FROM threadloom_messages m
        WHERE m.session_id = p_session_id AND m.id = (SELECT id FROM down WHERE depth = (SELECT MIN(depth) FROM down))
        UNION ALL
        SELECT m.id, m.parent_id, m.depth FROM threadloom_messages m JOIN near n
        ON m.session_id = p_session_id AND m.id = n.parent_id WHERE n.depth > p_last
    ), page(id, parent_id, depth, content) AS (
        SELECT m.id, m.parent_id, m.depth, m.content FROM threadloom_messages m
        WHERE m.session_id = p_session_id AND m.id = (SELECT id FROM near WHERE depth = (SELECT MIN(depth) FROM near))
        UNION ALL
        SELECT m.id, m.parent_id, m.depth, m.content FROM threadloom_messages m JOIN page p
        ON m.session_id = p_session_id AND m.id = p.parent_id WHERE p.depth > p_first
    )
    SELECT depth, id, size, CASE WHEN SUM(size + 1) OVER (ORDER BY depth) <= p_budget THEN content END
    FROM (SELECT depth, id, CAST(octet_length(content) AS BIGINT) AS size, content FROM page
          WHERE depth >= p_first AND depth <= p_last) AS found
    UNION ALL
    SELECT -1, m.id, m.depth, NULL FROM threadloom_messages m WHERE m.session_id = p_session_id AND m.id = p_leaf_id
    UNION ALL
    (SELECT -2, id, seq, NULL FROM down WHERE depth >= p_hint AND id <> p_leaf_id ORDER BY depth LIMIT 1)
    UNION ALL
    SELECT -3, NULL, NULL, CAST(json_agg(json_build_array(c.id, c.summary, c.from_message_id, c.to_message_id,
        to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY c.seq) AS TEXT)
    FROM threadloom_compactions c WHERE p_overlays AND c.session_id = p_session_id HAVING COUNT(*) > 0;
END;
$$;
