-- A searchable block's entry count is one row, kept by triggers (PostgreSQL's migration 0036).
-- Every new session's first prompt renders "<n> entries indexed." for each searchable block, and every new
-- key is checked against max_entries_per_tenant (up to 1,000,000). Both counted the block's rows: 12 ms per
-- open beside 100,000 entries on the build VM, growing with the block. The count now lives in
-- threadloom_entry_counts, moved by the insert and delete of an entry in the same transaction. An upsert
-- that updates an existing key fires no insert trigger, and an entry never moves to another scope or label.
-- (A semicolon inside a trigger is never the last of its line: see storage.migrations.split_statements.)
CREATE TABLE threadloom_entry_counts (
    scope   TEXT NOT NULL,
    label   TEXT NOT NULL,
    entries INTEGER NOT NULL,
    PRIMARY KEY (scope, label)
) WITHOUT ROWID;
INSERT INTO threadloom_entry_counts (scope, label, entries)
    SELECT scope, label, count(*) FROM threadloom_search_entries GROUP BY scope, label;
CREATE TRIGGER threadloom_search_entries_counted_in AFTER INSERT ON threadloom_search_entries BEGIN
    INSERT INTO threadloom_entry_counts (scope, label, entries) VALUES (NEW.scope, NEW.label, 1)
        ON CONFLICT (scope, label) DO UPDATE SET entries = entries + 1; END;
CREATE TRIGGER threadloom_search_entries_counted_out AFTER DELETE ON threadloom_search_entries BEGIN
    UPDATE threadloom_entry_counts SET entries = entries - 1 WHERE scope = OLD.scope AND label = OLD.label; END;
CREATE TRIGGER threadloom_search_entries_stay_in_their_block BEFORE UPDATE OF scope, label
    ON threadloom_search_entries WHEN NEW.scope IS NOT OLD.scope OR NEW.label IS NOT OLD.label BEGIN
    SELECT RAISE(ABORT, 'threadloom: a search entry stays in its block'); END;
