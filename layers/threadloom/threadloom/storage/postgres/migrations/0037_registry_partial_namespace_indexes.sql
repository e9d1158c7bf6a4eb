-- Threadloom schema v37 (PostgreSQL): the namespace's first session is read from the session list's index.
-- The activity stamp of every append through the HTTP API (0033), and every rename, usage record and end,
-- reads the namespace's first session (ORDER BY activity_seq DESC, id DESC LIMIT 1), and a new session
-- takes the namespace's MAX(activity_seq) + 1. threadloom_sessions_by_activity answers both with one index
-- entry. But the namespace column keeps no statistics (0035), so in a registry of a few hundred sessions the
-- planner estimates any namespace at one row and preferred the narrowest index that starts with it,
-- (namespace, parent_session_id): it then read every session of the tenant and sorted them, on every append
-- (10 to 27 µs of the registered append's 610 to 670 in a registry of 200 sessions on the build VM, growing
-- with the tenant until the table is large enough for the planner to prefer the list's index anyway).
-- The two indexes that lead with the namespace only to serve a second column, forks by their parent and
-- sessions by their subject (erasure, 0003), become partial: they hold only the sessions that have that
-- column, which every query reading them names with an equality. A query on the namespace alone can no
-- longer take them, and a session created without a parent or a subject writes no entry in them.
DROP INDEX threadloom_sessions_by_parent;
CREATE INDEX threadloom_sessions_by_parent ON threadloom_sessions (namespace, parent_session_id)
    WHERE parent_session_id IS NOT NULL;
DROP INDEX threadloom_sessions_by_subject;
CREATE INDEX threadloom_sessions_by_subject ON threadloom_sessions (namespace, subject_id)
    WHERE subject_id IS NOT NULL;
