-- Threadloom schema v30 (PostgreSQL): a tenant's check that fails, for the reads that go with it.
-- A read of a session's data (GET .../context, .../search, .../branch-points) sends the registry check
-- (is the session this namespace's?) in the same pipeline as the read itself, one round trip
-- (storage/checked_reads.py). A check that only returned no row left the read to run anyway, its rows
-- dropped by the client: a refused request then took as long as the other tenant's read, and its timing
-- told whether a guessed id was a session of another tenant, and how large. This check raises instead
-- when the namespace does not hold the session; one Sync ends the pipeline, so the server skips every
-- statement after the error and a refused request runs nothing but this lookup by key, whoever owns
-- the id.
-- With p_check_subject it also raises (TL412) when the session's subject is not p_subject: a process
-- that knew the session before it was deleted and created again under the same id (a keyed session,
-- opened again for another subject) would otherwise read that subject's blocks for the new one.
CREATE FUNCTION threadloom_require_session(
    p_namespace     TEXT,
    p_id            TEXT,
    p_check_subject BOOLEAN,
    p_subject       TEXT
) RETURNS INTEGER
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_subject TEXT;
BEGIN
    SELECT subject_id INTO v_subject FROM threadloom_sessions WHERE namespace = p_namespace AND id = p_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'TL410', MESSAGE = 'threadloom: the namespace holds no such session';
    END IF;
    IF p_check_subject AND v_subject IS DISTINCT FROM p_subject THEN
        RAISE EXCEPTION USING ERRCODE = 'TL412', MESSAGE = 'threadloom: the session now belongs to another subject';
    END IF;
    RETURN 1;
END
$$;
