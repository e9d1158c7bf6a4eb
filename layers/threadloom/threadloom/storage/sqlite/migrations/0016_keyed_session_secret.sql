-- Threadloom schema v16 (SQLite): the deployment secret keyed session ids are derived with.
-- A keyed session's id (POST /sessions/open {"key": ...}) was a UUIDv5 of a public constant, the
-- namespace and the key: another tenant could compute it and import a session under it first.
-- Ids are now an HMAC-SHA256 of the namespace and key under this secret, made here from 32 random
-- bytes of the database's own generator; it never leaves the database. Sessions opened before keep
-- their ids (SessionManager still finds a key's old id, in its own namespace only).
CREATE TABLE threadloom_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO threadloom_settings (name, value) VALUES ('keyed_session_secret', lower(hex(randomblob(32))));
