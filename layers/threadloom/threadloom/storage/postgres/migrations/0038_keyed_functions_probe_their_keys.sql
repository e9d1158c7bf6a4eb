-- Threadloom schema v38 (PostgreSQL): the functions that read and write one session's rows never scan a table.
-- Every statement in these functions names a session (and a message, a block or a namespace) by a key an index
-- leads with. PL/pgSQL keeps each statement's plan for the connection's life, planned against the table's size
-- and statistics of that moment, and the planner prefers reading a table of a few pages whole to probing its
-- key: a young registry (under about 250 sessions across all tenants, so every new deployment's) had the
-- activity stamp of every append through the HTTP API read every session twice (the row, then the namespace's
-- first session, sorted), 70 to 110 µs of a 400 µs append, where its key's index answers in a few µs
-- (bench/postgres_append_floor.py; docs/postgres.md). A plan kept while a table was small also stayed a scan
-- after the table grew, until the next ANALYZE. With enable_seqscan off for the call (PostgreSQL sets it on
-- entry and puts it back on exit, for nested statements too, and a statement no index serves may still scan),
-- every plan probes the key whatever the table's size. Answers, signatures and grants are unchanged.
ALTER FUNCTION threadloom_append(TEXT, TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BOOLEAN, TEXT, TEXT, TIMESTAMPTZ) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_message(TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BOOLEAN, TEXT, TEXT, TIMESTAMPTZ, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_within(TEXT, TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BOOLEAN, TEXT, TEXT,
                                        TIMESTAMPTZ, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_registered_message(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BOOLEAN, TEXT, TEXT,
                                                    TIMESTAMPTZ, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_registered_message(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BOOLEAN, TEXT, TEXT,
                                                    TIMESTAMPTZ, TEXT, BOOLEAN, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_registered_within(TEXT, TEXT, TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BOOLEAN, TEXT,
                                                   TEXT, TIMESTAMPTZ, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_append_registered_within(TEXT, TEXT, TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BOOLEAN, TEXT,
                                                   TEXT, TIMESTAMPTZ, TEXT, BOOLEAN, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_update_message(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_update_message(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_update_message(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT, BOOLEAN, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_delete_message(TEXT, TEXT, TEXT, TIMESTAMPTZ, BIGINT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_delete_message(TEXT, TEXT, TEXT, TIMESTAMPTZ, BIGINT, BOOLEAN, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_require_session(TEXT, TEXT, BOOLEAN, TEXT) SET enable_seqscan = off;
ALTER FUNCTION threadloom_read_when_missing(TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[]) SET enable_seqscan = off;
