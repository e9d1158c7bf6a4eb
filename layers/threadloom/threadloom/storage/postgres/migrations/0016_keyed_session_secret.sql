-- Threadloom schema v16 (PostgreSQL): the deployment secret keyed session ids are derived with.
-- A keyed session's id (POST /sessions/open {"key": ...}) was a UUIDv5 of a public constant, the
-- namespace and the key: another tenant could compute it and import a session under it first.
-- Ids are now an HMAC-SHA256 of the namespace and key under this secret, made here from two
-- gen_random_uuid() (the server's strong random source, 244 random bits); it never leaves the
-- database. Sessions opened before keep their ids (SessionManager still finds a key's old id, in
-- its own namespace only). The application role only reads this table (docs/postgres.md).
CREATE TABLE threadloom_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO threadloom_settings (name, value)
    VALUES ('keyed_session_secret', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
