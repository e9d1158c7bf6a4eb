-- One full-text index per namespace (messages) and per scope (search entries), instead of one
-- table every tenant shared: FTS5's bm25 counts its statistics (how many rows hold a word, the
-- average length) over the whole table, so the order of one tenant's hits told whether another
-- tenant wrote a word (issue 23). The indexes are made on first use, named by a hash of their
-- owner (threadloom.storage.sqlite.sql.message_index_name), and listed here:
CREATE TABLE threadloom_search_indexes (
    name   TEXT PRIMARY KEY,
    kind   TEXT NOT NULL,
    owner  TEXT NOT NULL
);
-- Rows to remove from a namespace's index (a message deleted or rewritten; a NULL namespace is the
-- index of sessions no namespace registers), removed by the next batch before it indexes any
-- waiting row (threadloom.storage.sqlite.search_index).
CREATE TABLE threadloom_message_fts_stale (
    message_rowid  INTEGER NOT NULL,
    namespace      TEXT
);
-- A session registered after its messages were written (the library's bare Session first): they
-- leave the index of unregistered sessions for the namespace's.
-- (A semicolon inside the trigger is never the last of its line: see storage.migrations.split_statements.)
CREATE TRIGGER threadloom_session_registered AFTER INSERT ON threadloom_sessions BEGIN
    INSERT INTO threadloom_message_fts_stale (message_rowid, namespace)
        SELECT rowid, NULL FROM threadloom_messages WHERE session_id = NEW.id; INSERT OR IGNORE
    INTO threadloom_message_fts_pending (message_rowid)
        SELECT rowid FROM threadloom_messages WHERE session_id = NEW.id; END;
-- Every indexed message waits again and the next batch (before any search) indexes it into its
-- namespace's index: its indexed text is its stored message's searchable text, so nothing is lost.
INSERT OR IGNORE INTO threadloom_message_fts_pending (message_rowid)
    SELECT f.rowid FROM threadloom_message_fts f JOIN threadloom_messages m ON m.rowid = f.rowid;
DROP TABLE threadloom_message_fts;
-- A scope's entry index is filled from its entries when first used (their content is the text indexed).
DROP TABLE threadloom_search_entries_fts;
