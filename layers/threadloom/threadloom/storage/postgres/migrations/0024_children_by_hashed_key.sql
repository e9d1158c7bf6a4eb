-- Threadloom schema v24 (PostgreSQL): children are found through a 64-bit hash of (session, parent), not the ids.
-- The b-tree (session_id, parent_id, seq) held both 36-character ids in every entry: 158 bytes a message of
-- the 2,094 a message takes (bench/postgres_bytes.py), for lookups of one parent's children (branch
-- listing, subtrees, the leaf rescan) that need only to find a few rows. Its replacement keys each row on
-- hashtextextended(session_id || '/' || parent_id, 0), the stable 64-bit hash PostgreSQL's hash
-- partitioning uses, and seq: about 32 bytes a message, and a parent's children still come out in seq
-- order, so a page of them is one index range. Every query that uses it repeats the plain predicates
-- (session_id = ... AND parent_id = ...) beside the hash, so a collision (or an id holding '/', which
-- identifiers never do) can only cost a row read, never a wrong row. Rows without a parent (roots) have a
-- NULL key, as before. A table that holds rows is analyzed at once, so the planner sees that the key is
-- nearly unique (without statistics it would guess, as for session_id, and might read the session). An
-- empty one is not: analyzed empty, the planner trusts the empty estimate and plans (and PL/pgSQL keeps)
-- sequential scans until autovacuum analyzes it again; measured, a fresh database's append then took
-- 1.2 ms instead of 0.1 ms after a few hundred messages. Autovacuum analyzes it once it has rows.
CREATE INDEX threadloom_messages_children ON threadloom_messages
    (hashtextextended(session_id || '/' || parent_id, 0), seq);
DROP INDEX threadloom_messages_by_parent;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM threadloom_messages) THEN
        ANALYZE threadloom_messages;
    END IF;
END
$$;
