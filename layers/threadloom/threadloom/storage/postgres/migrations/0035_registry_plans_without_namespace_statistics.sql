-- Threadloom schema v35 (PostgreSQL): a session's registry row is read by its primary key, whatever ANALYZE last saw.
-- Every registry read and write names the namespace and the id: the tenant check of every API request, the
-- activity stamp of every append through the HTTP API (0026, 0031, 0033), renames, usage, deletes. The primary
-- key is on id alone; three other indexes start with the namespace. ANALYZE records the namespaces it saw as
-- most common values, so a tenant created since (or one too small to be among them) is estimated at one row,
-- and the planner then preferred the narrowest namespace index, (namespace, parent_session_id), and read every
-- session of the tenant to find one, on every request, until autovacuum analyzed the table again (after 10% of
-- it changed). Migration 0006 removed the same trap from the message table the same way: without statistics on
-- the column, the planner assumes an equality on it matches a fixed share of the table, and the unique key
-- wins. The same-type ALTER COLUMN rewrites nothing; it drops the statistics already gathered (the trigger that
-- names the column, 0034's, goes for the change and comes back as it was). Reads of a whole namespace (the
-- session list, children, a subject's sessions) have their own indexes and no choice to make.
ALTER TABLE threadloom_sessions ALTER COLUMN namespace SET STATISTICS 0;
DROP TRIGGER threadloom_sessions_stay_in_their_namespace ON threadloom_sessions;
ALTER TABLE threadloom_sessions ALTER COLUMN namespace TYPE TEXT;
CREATE TRIGGER threadloom_sessions_stay_in_their_namespace BEFORE UPDATE OF namespace ON threadloom_sessions
    FOR EACH ROW WHEN (NEW.namespace IS DISTINCT FROM OLD.namespace)
    EXECUTE FUNCTION threadloom_session_keeps_its_namespace();
