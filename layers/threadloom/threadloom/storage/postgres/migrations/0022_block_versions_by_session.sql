-- Threadloom schema v22 (postgres): find the versions a session made, wherever the block lives.
-- A shared block's versions name the session (and message) that changed it. When that session is
-- removed (deleted, swept by retention, erased with its subject), the versions it made of blocks
-- that outlive it keep their content but lose the link to it: this index finds them by session.
CREATE INDEX threadloom_block_versions_by_session ON threadloom_block_versions (namespace, session_id);
