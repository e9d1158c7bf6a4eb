-- Threadloom schema v6 (PostgreSQL): plans that do not depend on when ANALYZE last ran.
-- Every query filters on a partition key first (a session, a namespace, a scope) and then on a
-- unique key inside it. ANALYZE records the keys it saw as "most common values"; while a table
-- holds fewer than ~100 sessions they cover every row, so the planner estimates any session
-- created since the last ANALYZE at one row. Every index starting with session_id then looks as
-- good as the primary key, and it could pick (session_id, parent_id, seq) for a lookup by id,
-- reading the whole session to find one row: a 10,000-message walk up the tree (compaction's
-- ancestor check) took 41 s instead of 25 ms. Autovacuum only re-analyzes after 10% of the table
-- changed, so a young deployment keeps such plans for a long time.
-- Without statistics on these columns the planner assumes an equality matches a fixed small
-- share of the table, and the unique keys win every time. The same-type ALTER COLUMN rewrites
-- nothing (no index is rebuilt); it only drops the statistics already gathered.
ALTER TABLE threadloom_messages ALTER COLUMN session_id SET STATISTICS 0;
ALTER TABLE threadloom_messages ALTER COLUMN session_id TYPE TEXT;
ALTER TABLE threadloom_compactions ALTER COLUMN session_id SET STATISTICS 0;
ALTER TABLE threadloom_compactions ALTER COLUMN session_id TYPE TEXT;
ALTER TABLE threadloom_compaction_requests ALTER COLUMN namespace SET STATISTICS 0;
ALTER TABLE threadloom_compaction_requests ALTER COLUMN namespace TYPE TEXT;
ALTER TABLE threadloom_search_entries ALTER COLUMN scope SET STATISTICS 0;
ALTER TABLE threadloom_search_entries ALTER COLUMN scope TYPE TEXT;
