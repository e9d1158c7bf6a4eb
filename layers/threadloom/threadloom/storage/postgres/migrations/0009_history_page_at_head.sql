-- Threadloom schema v9 (PostgreSQL): the first page of GET /history in one call, from the session's head.
-- threadloom_history_page_at_head checks the namespace (otherwise the only row is (-4, NULL, NULL,
-- NULL) and nothing of the session is read), finds the latest leaf in the session's head row and
-- reads the page from it with threadloom_history_page_in (0008): the leaf's own row (-1) tells the
-- client which leaf it read, so the session check, the latest leaf and the page are one round trip
-- instead of three. A session without messages returns no row at all.
-- Needs EXECUTE for the application role (docs/postgres.md); PUBLIC has it unless revoked.
CREATE FUNCTION threadloom_history_page_at_head(
    p_namespace  TEXT,
    p_session_id TEXT,
    p_first      BIGINT,
    p_last       BIGINT,
    p_budget     BIGINT,
    p_hint       BIGINT,
    p_overlays   BOOLEAN,
    p_together   BOOLEAN
) RETURNS TABLE (out_depth BIGINT, out_id TEXT, out_size BIGINT, out_content TEXT)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_leaf TEXT;
BEGIN
    IF p_namespace IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM threadloom_sessions s WHERE s.id = p_session_id AND s.namespace = p_namespace
    ) THEN
        RETURN QUERY SELECT CAST(-4 AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT), CAST(NULL AS TEXT);
        RETURN;
    END IF;
    SELECT h.leaf_id INTO v_leaf FROM threadloom_session_heads h WHERE h.session_id = p_session_id;
    IF v_leaf IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM threadloom_history_page_in(
        NULL, p_session_id, v_leaf, p_first, p_last, p_budget, NULL, NULL, p_hint, p_overlays, p_together);
END;
$$;
