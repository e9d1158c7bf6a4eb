-- Threadloom schema v8 (PostgreSQL): a page of GET /history that checks the tenant and arrives as one row.
-- threadloom_history_page_in is threadloom_history_page (0007) with two differences, both to cut
-- what every page after the first pays:
-- - With p_namespace, the session must belong to that namespace: otherwise the only row is
--   (-4, NULL, NULL, NULL) and nothing of the session is read. The API's tenant check then rides
--   in the page's round trip instead of taking one of its own.
-- - With p_together, the page's rows come as one row (-5, NULL, row count, JSON text): an array of
--   [depth, id, bytes, message] in depth order, each message the stored JSON spliced in as is (null
--   past p_budget). The client decodes one value instead of 200 rows of four columns and parses the
--   page in one call; the leaf, anchor and overlay rows are as in 0007. Stored contents are JSON the
--   library wrote; if one is not, the client cannot parse the page and reads it again without
--   p_together (0007's rows), where such a row is skipped as everywhere else.
-- Needs EXECUTE for the application role (docs/postgres.md); PUBLIC has it unless revoked.
CREATE FUNCTION threadloom_history_page_in(
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
    ), found(depth, id, size, content) AS (
        SELECT depth, id, size, CASE WHEN SUM(size + 1) OVER (ORDER BY depth) <= p_budget THEN content END
        FROM (SELECT depth, id, CAST(octet_length(content) AS BIGINT) AS size, content FROM page
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
