-- Threadloom schema v11 (SQLite): messages reach the full-text index in batches, not one per append.
-- An FTS5 insert writes a new index segment when its transaction commits, some 40% of an append's
-- time. An append (and every other writer of messages) now records the new row's rowid here instead,
-- and the rows waiting here are indexed every 64 appends through a store and before any message
-- search (threadloom.storage.sqlite.search_index), so a search still finds every message.
-- Invariant: a message whose searchable text is not empty has its threadloom_message_fts row or its
-- rowid here. A rowid whose message is gone is dropped by the next batch; a rowid reused by a new
-- message is marked again by that message. Messages stored before this version are indexed already.
CREATE TABLE threadloom_message_fts_pending (message_rowid INTEGER PRIMARY KEY);
