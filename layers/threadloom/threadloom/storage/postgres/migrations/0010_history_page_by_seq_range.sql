-- Threadloom schema v10 (PostgreSQL): a page of GET /history read by one index range where the path is a line.
-- threadloom_history_page_in (0008) walked the page's rows parent by parent: one index probe per row,
-- about 3 µs each. A conversation appended in order stores the rows of a straight stretch of its path
-- under consecutive seqs, so the page now first reads the seqs ending at its deepest row with one range
-- of (session_id, seq) and keeps them when they are that path: as many rows as the page spans, depths
-- rising one per seq, each row the child of the one before. The deepest row is on the path and each
-- row's parent is the row before it, so the rows are exactly the path's. Otherwise (a branch or a delete
-- in between) the page walks as before. Same signature, results and grant; only the together form
-- (the page as one JSON value) changes.
CREATE OR REPLACE FUNCTION threadloom_history_page_in(
    p_namespace  TEXT,
    p_session_id TEXT,
    p_leaf_id    TEXT,
    p_first      BIGINT,
    p_last       BIGINT,
    p_budget     BIGINT,
    p_anchor_seq BIGINT,
    p_anchor_id  TEXT,
    p_hint       BIGINT,
    p_overlays   BOOLEAN,
    p_together   BOOLEAN
) RETURNS TABLE (out_depth BIGINT, out_id TEXT, out_size BIGINT, out_content TEXT)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    IF p_namespace IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM threadloom_sessions s WHERE s.id = p_session_id AND s.namespace = p_namespace
    ) THEN
        RETURN QUERY SELECT CAST(-4 AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT), CAST(NULL AS TEXT);
        RETURN;
    END IF;
    IF NOT p_together THEN
        RETURN QUERY SELECT * FROM threadloom_history_page(
            p_session_id, p_leaf_id, p_first, p_last, p_budget, p_anchor_seq, p_anchor_id, p_hint, p_overlays);
        RETURN;
    END IF;
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
    ), top(id, seq, depth) AS (
        SELECT m.id, m.seq, m.depth FROM threadloom_messages m
        WHERE m.session_id = p_session_id AND m.id = (SELECT id FROM near WHERE depth = (SELECT MIN(depth) FROM near))
    ), span(id, parent_id, depth, content, step, prev_id) AS (
        SELECT m.id, m.parent_id, m.depth, m.content, m.seq - (t.seq - (t.depth - p_first)), lag(m.id) OVER (ORDER BY m.seq)
        FROM top t JOIN threadloom_messages m ON m.session_id = p_session_id
            AND m.seq BETWEEN t.seq - (t.depth - p_first) AND t.seq
        WHERE t.depth >= p_first
    ), linear(ok) AS (
        SELECT COALESCE((SELECT COUNT(*) FROM span) = (SELECT depth - p_first + 1 FROM top)
            AND (SELECT bool_and(depth = p_first + step AND (step = 0 OR parent_id = prev_id)) FROM span), FALSE)
    ), on_path(id, depth, content) AS (
        SELECT id, depth, content FROM span WHERE (SELECT ok FROM linear)
        UNION ALL
        SELECT id, depth, content FROM page WHERE NOT (SELECT ok FROM linear)
    ), found(depth, id, size, content) AS (
        SELECT depth, id, size, CASE WHEN SUM(size + 1) OVER (ORDER BY depth) <= p_budget THEN content END
        FROM (SELECT depth, id, CAST(octet_length(content) AS BIGINT) AS size, content FROM on_path
              WHERE depth >= p_first AND depth <= p_last) AS rows
    )
    SELECT CAST(-5 AS BIGINT), CAST(NULL AS TEXT), COUNT(*), '[' || string_agg(
        '[' || depth || ',' || CAST(to_json(id) AS TEXT) || ',' || size || ',' || COALESCE(content, 'null') || ']',
        ',' ORDER BY depth) || ']'
    FROM found HAVING COUNT(*) > 0
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
