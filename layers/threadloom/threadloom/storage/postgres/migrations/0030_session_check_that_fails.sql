-- Threadloom schema v30 (PostgreSQL): a tenant's check that fails, for the reads that go with it.
-- A read of a session's data (GET .../context, .../search, .../branch-points) sends the registry check
-- (is the session this namespace's?) in the same pipeline as the read itself, one round trip
-- (storage/checked_reads.py). A check that only returned no row left the read to run anyway, its rows
-- dropped by the client: a refused request then took as long as the other tenant's read, and its timing
-- told whether a guessed id was a session of another tenant, and how large. This check raises instead
-- when the namespace does not hold the session; one Sync ends the pipeline, so the server skips every
-- statement after the error and a refused request runs nothing but this lookup by key, whoever owns
-- the id.
CREATE FUNCTION threadloom_require_session(p_namespace TEXT, p_id TEXT) RETURNS INTEGER
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM 1 FROM threadloom_sessions WHERE namespace = p_namespace AND id = p_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'TL410', MESSAGE = 'threadloom: the namespace holds no such session';
    END IF;
    RETURN 1;
END
$$;
