-- Threadloom schema v5 (SQLite): a jump pointer per message, so one page of a long history is O(page).
-- jump = the seq of the message's ancestor at depth ((depth - 1) / 64) * 64 (NULL for a root).
-- Following jumps from a leaf reaches the ancestor at any depth d in about (leaf depth - d) / 64 + 64
-- hops instead of (leaf depth - d) (threadloom.storage.history_pages).
-- The span 64 is JUMP_SPAN in storage/dialect.py.
-- An append sets it from the parent row it already reads; triggers fill it for every other writer
-- (import, the depth recomputation after deletes and overlays, any future copy): a row's jump only
-- needs its parent's depth and jump, and parents are written or recomputed before their children.
-- A NULL jump is always safe: reads then step by parent_id.
ALTER TABLE threadloom_messages ADD COLUMN jump BIGINT;

-- Backfill, parents before children.
WITH RECURSIVE chain(session_id, id, seq, depth, jump) AS (
    SELECT session_id, id, seq, depth, NULL FROM threadloom_messages WHERE parent_id IS NULL
    UNION ALL
    SELECT m.session_id, m.id, m.seq, m.depth, CASE WHEN c.depth % 64 = 0 THEN c.seq ELSE c.jump END
    FROM threadloom_messages m JOIN chain c ON m.session_id = c.session_id AND m.parent_id = c.id
)
UPDATE threadloom_messages SET jump = chain.jump FROM chain
WHERE threadloom_messages.session_id = chain.session_id AND threadloom_messages.id = chain.id;

-- Only when the writer did not set it, or the row moved.
CREATE TRIGGER threadloom_messages_jump_on_insert AFTER INSERT ON threadloom_messages
WHEN NEW.jump IS NULL AND NEW.parent_id IS NOT NULL
BEGIN UPDATE threadloom_messages SET jump = (SELECT CASE WHEN p.depth % 64 = 0 THEN p.seq ELSE p.jump END FROM threadloom_messages p WHERE p.session_id = NEW.session_id AND p.id = NEW.parent_id) WHERE rowid = NEW.rowid; END;

CREATE TRIGGER threadloom_messages_jump_on_move AFTER UPDATE OF parent_id, depth ON threadloom_messages
WHEN NEW.parent_id IS NOT OLD.parent_id OR NEW.depth IS NOT OLD.depth
BEGIN UPDATE threadloom_messages SET jump = (SELECT CASE WHEN p.depth % 64 = 0 THEN p.seq ELSE p.jump END FROM threadloom_messages p WHERE p.session_id = NEW.session_id AND p.id = NEW.parent_id) WHERE rowid = NEW.rowid; END;
