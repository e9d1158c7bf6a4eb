"""The queries use the indexes that keep one session's cost independent of every other session.

Tables in a test are tiny, so the planner would happily scan them; sequential scans are
disabled for the EXPLAIN to show which index each query is able to use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from threadloom import Session, SessionManager
from threadloom.storage.postgres.sql import PostgresSql

from tests.support.messages import text_message
from tests.support.postgres import plan

pytestmark = pytest.mark.postgres


@pytest.fixture
def populated(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = SessionManager.create(store, namespace="tenant")
    for index in range(3):
        info = manager.create(f"chat {index}")
        manager.append_all(info.id, [text_message(f"{info.id}-{i}", f"budget line {i}") for i in range(20)])
    Session.create(store).for_session("s").append_messages([text_message(f"m{i}") for i in range(20)])


def test_session_search_reads_only_that_session(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.search_session, sid="s", match="'budget'", limit=20)
    assert "Seq Scan" not in text
    assert "session_id = 's'" in text


def test_a_rare_term_in_a_big_session_is_found_through_the_composite_gin_index(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a big session where one message in thousands holds the term, in a table of many sessions
    # (the planner keeps no statistics per session, migration 0006: it assumes a session holds a fixed
    # share of the table, so only in a table of some size is the index worth more than the session's rows)
    messages = [text_message(f"m{i}", f"ordinary chatter {i}") for i in range(3_000)]
    messages[1_234] = text_message("m1234", "the needle")
    Session.create(make_store()).for_session("big").append_messages(messages)
    admin.run(
        "INSERT INTO threadloom_messages (session_id, id, seq, role, content, depth, tokens, path_tokens, "
        "created_at, search_vector) SELECT 'other-' || (g / 500), 'c' || g, g, 'user', '{}', 0, 1, 1, now(), "
        "to_tsvector('simple', 'other chatter ' || g) FROM generate_series(1, 200000) AS g"
    )
    admin.run("ANALYZE threadloom_messages")
    # Then the planner intersects the session's and the term's posting lists in one GIN index
    text = plan(admin, PostgresSql.search_session, sid="big", match="'needl'", limit=20)
    assert "threadloom_messages_search" in text
    assert "session_id = 'big'" in text and "search_vector @@" in text


def test_namespace_search_probes_one_session_at_a_time(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.search_namespace, namespace="tenant", match="'budget'", limit=20)
    assert "Nested Loop" in text
    # Any index that leads with the namespace (or the primary key) keeps other tenants' rows unread.
    namespace_indexes = ("by_activity", "by_subject", "by_parent", "pkey")
    assert any(f"threadloom_sessions_{name}" in text for name in namespace_indexes), text
    # and each session's messages through an index keyed by that session (which one depends on sizes)
    assert "session_id = s.id" in text and "Seq Scan on threadloom_messages" not in text, text


def test_history_walks_the_primary_key(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.raw_path, sid="s", leaf=None)  # the history function's walk, as a statement
    assert "threadloom_messages_pkey" in text
    assert "Seq Scan on threadloom_messages" not in text


def test_the_latest_leaf_rescan_uses_the_per_session_indexes(admin: Any, populated: None) -> None:
    text = plan(admin, PostgresSql.find_latest_leaf, sid="s")
    assert "threadloom_messages_by_seq" in text  # newest first; its children probe: the young-table test below


def _natural_plan(admin: Any, sql: str, **params: Any) -> str:
    """The plan the server really picks (no planner setting changed)."""
    return "\n".join(row[0] for row in admin.run("EXPLAIN " + sql, **params))


def test_a_session_newer_than_the_last_analyze_is_still_read_by_its_unique_keys(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given statistics gathered while the table held one other session (as autovacuum leaves a young
    # deployment), then a new session that grew to thousands of messages
    store = make_store()
    Session.create(store).for_session("old").append_messages([text_message(f"o{i}") for i in range(300)])
    admin.run("ANALYZE")
    Session.create(store).for_session("new").append_messages([text_message(f"m{i}") for i in range(3_000)])
    # Then no statistics mislead the planner about the partition keys
    statistics = "SELECT COUNT(*) FROM pg_stats WHERE tablename = 'threadloom_messages' AND attname = 'session_id'"
    assert admin.run(statistics)[0][0] == 0
    # And a lookup by id, and every step of a walk up the tree, probe the primary key on both columns
    # (before migration 0006 both scanned the session through another index and filtered on id: O(n)
    # per row, O(n^2) per walk)
    by_id = "Index Cond: ((session_id = 'new'::text) AND (id = "
    assert by_id in _natural_plan(admin, PostgresSql.get_message, sid="new", id="m1500")
    walk = _natural_plan(admin, PostgresSql.path_ids_up, sid="new", start="m2999", max_steps=2_999)
    assert walk.count(by_id) == 2, walk
    assert "Filter: (id =" not in walk and "Join Filter" not in walk, walk
    # And the ancestor check compaction runs before committing an overlay still answers
    assert len(admin.run(PostgresSql.path_ids_up, sid="new", start="m2999", max_steps=2_999)) == 3_000


def function_plans(admin: Any, sql: str) -> str:
    """The plans of the statements a function runs (auto_explain, this test connection only), as text."""
    for setting in (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_analyze = on",
        "SET client_min_messages = log",
    ):
        admin.run(setting)
    admin.notices.clear()
    try:
        admin.run(sql)
    finally:
        admin.run("RESET client_min_messages")
        admin.run("RESET auto_explain.log_min_duration")
    messages = (notice.get(b"M", b"") for notice in admin.notices)
    return "\n".join(message.decode() if isinstance(message, bytes) else str(message) for message in messages)


def stamp_plan(admin: Any, manager: SessionManager, session_id: str) -> str:
    """The plan PL/pgSQL keeps for the activity stamp of an append through ``manager`` (its generic one)."""
    for index in range(7):  # past PL/pgSQL's five custom plans, to the generic one it then keeps
        manager.append(session_id, text_message(f"warm{index}"))
    plans = function_plans(
        admin,
        f"SELECT threadloom_append_registered_message('{manager.namespace}', '{session_id}', 'x1', 'user', "
        '\'{"id":"x1","role":"user","parts":[]}\', 1, \'\', true, NULL, NULL, now(), NULL, false, NULL)',
    )
    return plans.split("Update on threadloom_sessions", 1)[1].split("Query Text", 1)[0]


def walked(plans: str) -> bool:
    """Whether the page's parent-by-parent walk ran (its recursive union executed)."""
    after = plans.split("CTE page", 1)[1]
    return "Recursive Union" in after and "never executed" not in after.split("\n", 2)[1]


PAGE_100_TO_199 = (
    "SELECT out_depth, out_id, out_size FROM threadloom_history_page_in("
    "NULL, '{sid}', '{leaf}', 100, 199, 1000000000, NULL, NULL, 399, false, true)"
)


def test_a_page_of_a_straight_stretch_is_one_index_range_and_a_branch_in_it_walks(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a conversation appended in order, and another whose page range holds a side branch's rows
    store = make_store()
    line = Session.create(store).for_session("line")
    line.append_messages([text_message(f"m{i}") for i in range(300)])
    forked = Session.create(store).for_session("forked")
    forked.append_messages([text_message(f"m{i}") for i in range(150)])
    forked.append_messages([text_message("side")], "m120")  # its seq falls inside pages 100-199
    forked.append_messages([text_message(f"m{i}") for i in range(150, 300)], "m149")
    # When page 100-199 of each is read (the page as one JSON value, as the API reads it)
    straight = function_plans(admin, PAGE_100_TO_199.format(sid="line", leaf="m299"))
    branched = function_plans(admin, PAGE_100_TO_199.format(sid="forked", leaf="m299"))
    # Then the straight one is read by one range of seqs and never walks; the other falls back to the walk
    assert "threadloom_messages_by_seq" in straight.split("CTE span", 1)[1]
    assert not walked(straight)
    assert walked(branched)
    # And both pages are the same rows
    rows = [admin.run(PAGE_100_TO_199.format(sid=sid, leaf="m299")) for sid in ("line", "forked")]
    assert rows[0] == rows[1] and rows[0][0][:3] == [-5, None, 100]


def _recursive_step(plan_text: str) -> str:
    """The lines of a plan under its Recursive Union: the walk itself, not what the statement does with it."""
    lines = plan_text.splitlines()
    start = next(index for index, line in enumerate(lines) if "Recursive Union" in line)
    depth = len(lines[start]) - len(lines[start].lstrip())
    inside = [lines[start]]
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        inside.append(line)
    return "\n".join(inside)


def young_deployment(admin: Any, make_store: Callable[[], Any]) -> Any:
    """A store holding a hundred short conversations, analyzed: the statistics a young deployment has."""
    store = make_store()
    for index in range(100):
        Session.create(store).for_session(f"short-{index}").append_messages(
            [text_message(f"s{index}-{i}") for i in range(10)]
        )
    admin.run("ANALYZE")
    return store


WALKS_UP = {
    "raw_path": {"leaf": None},
    "path_rows": {"leaf": "m1999"},
    "path_ids_up": {"start": "m1999", "max_steps": 5_000},
    "history_page_contents": {"start": "m1999", "first": -1},
    "path_overlay_ends": {"leaf": "m1999"},
}


@pytest.mark.parametrize("name", sorted(WALKS_UP))
def test_every_walk_up_a_long_session_of_a_young_table_probes_the_primary_key_per_step(
    admin: Any, make_store: Callable[[], Any], name: str
) -> None:
    # Given a young deployment: a hundred short conversations, analyzed, then one of 2,000 messages
    store = young_deployment(admin, make_store)
    Session.create(store).for_session("long").append_messages([text_message(f"m{i}") for i in range(2_000)])
    admin.run("ANALYZE")
    # When the planner plans the walk up from the long conversation's leaf, as it really would
    walk = _recursive_step(_natural_plan(admin, getattr(PostgresSql, name), sid="long", **WALKS_UP[name]))
    # Then each step is one probe of the primary key, never a hash of the whole session (before the
    # LATERAL step the history read was planned as a hash join that scanned the session's 2,000 rows
    # at each of its 2,000 steps: 0.66 s instead of 9 ms)
    assert "Hash Join" not in walk and "Bitmap Heap Scan" not in walk, walk
    assert "WorkTable Scan" in walk
    assert re.search(r"Index Cond: \(\(session_id = 'long'::text\) AND \(id = p(_\d+)?\.parent_id\)\)", walk), walk
    # And the walk still reads the whole path
    rows = admin.run(getattr(PostgresSql, name), sid="long", **WALKS_UP[name])
    assert len(rows) == (0 if name == "path_overlay_ends" else 2_000)


def test_a_page_that_walks_a_long_session_of_a_young_table_probes_the_primary_key_per_step(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a young deployment (short conversations, analyzed) and a long one with a side branch inside
    # the page's range, so the page falls back to its walk up the tree (migration 0010)
    store = young_deployment(admin, make_store)
    forked = Session.create(store).for_session("forked")
    forked.append_messages([text_message(f"m{i}") for i in range(150)])
    forked.append_messages([text_message("side")], "m120")
    forked.append_messages([text_message(f"m{i}") for i in range(150, 2_000)], "m149")
    admin.run("ANALYZE")
    # When the page of depths 100-199 is read
    plans = function_plans(admin, PAGE_100_TO_199.format(sid="forked", leaf="m1999"))
    # Then it walks, one primary-key probe per step, never hashing the session's rows (the walk's
    # depth bound keeps the planner off the hash join the unbounded history read fell into)
    assert walked(plans)
    walk = plans.split("CTE page", 1)[1].split("CTE top", 1)[0]
    assert "Hash Join" not in walk and "Bitmap Heap Scan" not in walk, walk
    assert "threadloom_messages_pkey" in walk
    rows = admin.run(PAGE_100_TO_199.format(sid="forked", leaf="m1999"))
    assert rows[0][:3] == [-5, None, 100]


CHILDREN = {
    "get_children": {"id": "m1000"},
    "get_child_ids": {"id": "m1000"},
    "get_children_page": {"id": "m1000", "after_seq": -1, "limit": 50, "budget": 1_000_000},
    "subtree": {"root": "m1995"},
    "find_latest_leaf": {},
}


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_children_of_a_message_in_a_long_session_of_a_young_table_come_from_the_children_index(
    admin: Any, make_store: Callable[[], Any], name: str
) -> None:
    # Given a young deployment and one conversation of 2,000 messages with a side branch at m1000
    store = young_deployment(admin, make_store)
    long = Session.create(store).for_session("long")
    long.append_messages([text_message(f"m{i}") for i in range(2_000)])
    long.append_messages([text_message("side")], "m1000")
    admin.run("ANALYZE")
    # When the planner plans a lookup of children, as it really would
    text = _natural_plan(admin, getattr(PostgresSql, name), sid="long", **CHILDREN[name])
    # Then it probes the children index by the hashed (session, parent) key (migration 0024) rather
    # than reading the session's rows
    assert "threadloom_messages_children" in text, text
    assert "Hash Join" not in text and "Materialize" not in text, text
    if name != "find_latest_leaf":  # which walks the session's seqs backwards, probing each row's children
        assert "threadloom_messages_by_seq" not in text, text
    # And the answers are the branch's
    rows = admin.run(getattr(PostgresSql, name), sid="long", **CHILDREN[name])
    expected = {"get_children": 2, "get_child_ids": 2, "get_children_page": 2, "subtree": 5, "find_latest_leaf": 1}
    assert len(rows) == expected[name]


def test_the_history_function_keeps_a_walk_that_probes_the_primary_key_per_step(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a young deployment and a conversation of 2,000 messages
    store = young_deployment(admin, make_store)
    Session.create(store).for_session("long").append_messages([text_message(f"m{i}") for i in range(2_000)])
    # And a connection that read short histories often enough for PostgreSQL to consider a generic plan
    for index in range(8):
        assert len(admin.run("SELECT * FROM threadloom_history(CAST(:sid AS text), NULL)", sid=f"short-{index}")) == 10
    admin.run("ANALYZE")
    # When it reads the long one through the function (migration 0025), whose plan the connection keeps
    plans = function_plans(admin, "SELECT * FROM threadloom_history('long', NULL)")
    # Then each step of the kept walk is one probe of the primary key, never a hash of the session
    walk = _recursive_step(plans.split("RETURN QUERY", 1)[-1] if "RETURN QUERY" in plans else plans)
    assert "Hash Join" not in walk and "Bitmap Heap Scan" not in walk, walk
    assert "threadloom_messages_pkey" in walk, walk
    assert len(admin.run("SELECT * FROM threadloom_history('long', NULL)")) == 2_000


def test_a_registry_row_is_read_by_its_primary_key_in_a_tenant_newer_than_the_last_analyze(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given statistics gathered while the registry held another tenant's sessions only (as autovacuum
    # leaves them until 10% of the table changed), then a new tenant whose sessions are forks, so the
    # index on (namespace, parent) holds them all
    store = make_store()
    old = SessionManager.create(store, namespace="old")
    for index in range(50):
        old.create(f"old {index}")
    admin.run("ANALYZE threadloom_sessions")
    new = SessionManager.create(store, namespace="new")
    root = new.create("root")
    new.append(root.id, text_message("r1"))
    target = [new.fork(root.id, "r1", f"fork {index}").id for index in range(200)][100]
    # Then the tenant check of a request probes the primary key and filters on the namespace (before
    # migration 0035 the planner took the parent index and read all 201 of the tenant's sessions)
    by_key = "Index Scan using threadloom_sessions_pkey"
    for statement in (PostgresSql.get_session, PostgresSql.session_subject):
        text = _natural_plan(admin, statement, namespace="new", id=target)
        assert by_key in text and "Filter: (namespace = 'new'::text)" in text, text
    # And so does the activity stamp of an append through the HTTP API, in the plan PL/pgSQL keeps
    stamp = stamp_plan(admin, new, target)
    assert by_key in stamp and "by_parent" not in stamp, stamp


def test_the_namespace_s_first_session_comes_from_the_session_list_s_index_in_a_small_registry(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a young registry, analyzed, whose tenant's 120 sessions are all forks of one session and all
    # belong to one subject: every index that starts with the namespace holds all of them
    store = make_store()
    tenant = SessionManager.create(store, namespace="small")
    root = tenant.create("root", subject_id="alice")
    tenant.append(root.id, text_message("r1"))
    forks = [tenant.fork(root.id, "r1", f"fork {index}").id for index in range(120)]
    admin.run("ANALYZE threadloom_sessions")
    target = forks[60]
    # Then the stamp of an append reads the namespace's first session as one entry of the session list's
    # index (before migration 0037 the planner took the parent index, read all 121 sessions and sorted them)
    stamp = stamp_plan(admin, tenant, target)
    first = stamp.split("SubPlan", 1)[1]
    assert "threadloom_sessions_by_activity" in first and "Sort" not in first, stamp
    assert "by_parent" not in stamp and "by_subject" not in stamp, stamp
    # And the next activity value a new session takes never comes from them either: it reads the list's index,
    # or, when the registry's pages happen to be one fewer, the table's few pages whole, which the planner
    # costs the same (about 8 either way at this size; a statement from Python, not a function of 0038)
    created = _natural_plan(
        admin,
        PostgresSql.insert_session,
        id="new",
        namespace="small",
        name="new",
        parent_session_id=None,
        model=None,
        source=None,
        subject_id=None,
        now="2026-12-05T00:00:00Z",
    )
    assert "by_parent" not in created and "by_subject" not in created, created
    assert "threadloom_sessions_by_activity" in created or "Seq Scan on threadloom_sessions" in created, created
    # And the two partial indexes can still serve the reads that name their column: forks and a subject's
    # sessions (asked with sequential scans off: here 120 of 121 rows match, so a scan of the table's few
    # pages is as cheap and the planner picks either, depending on the pages the run left)
    children = plan(admin, PostgresSql.child_sessions, namespace="small", parent=root.id)
    assert "threadloom_sessions_by_parent" in children, children
    subjects = plan(admin, PostgresSql.subject_sessions, namespace="small", subject="alice")
    assert "threadloom_sessions_by_subject" in subjects, subjects
    assert [row[0] for row in admin.run(PostgresSql.child_sessions, namespace="small", parent=root.id)] == sorted(forks)


#: The functions that read and write one session's rows by key (migration 0038), by the name a call uses.
KEYED_FUNCTIONS = (
    "threadloom_append",
    "threadloom_append_message",
    "threadloom_append_within",
    "threadloom_append_registered_message",
    "threadloom_append_registered_within",
    "threadloom_update_message",
    "threadloom_delete_message",
    "threadloom_require_session",
    "threadloom_read_when_missing",
)


def test_an_append_through_the_api_probes_keys_in_a_registry_of_a_few_sessions(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a new deployment: a registry of four sessions, analyzed, a table of one page
    store = make_store()
    tenant = SessionManager.create(store, namespace="tiny")
    sessions = [tenant.create(f"chat {index}").id for index in range(4)]
    admin.run("ANALYZE threadloom_sessions")
    admin.run("ANALYZE threadloom_session_heads")
    # Then the stamp finds its row with its id in an index condition and the namespace's first session as
    # one entry of the list's index, in the plan PL/pgSQL keeps (before migration 0038 it read the table
    # whole, twice, and sorted it)
    stamp = stamp_plan(admin, tenant, sessions[2])
    assert "Seq Scan" not in stamp and "Sort" not in stamp, stamp
    row, first = stamp.split("SubPlan", 1)
    assert f"id = '{sessions[2]}'::text)" in row.split("Index Cond:", 1)[1], stamp
    assert "Index Only Scan using threadloom_sessions_by_activity" in first and "Limit" in first, stamp
    # And the message's own statements probe the session's head and the parent by their keys
    plans = function_plans(
        admin,
        f"SELECT threadloom_append_registered_message('tiny', '{sessions[2]}', 'x2', 'user', "
        '\'{"id":"x2","role":"user","parts":[]}\', 1, \'\', true, NULL, NULL, now(), NULL, false, NULL)',
    )
    assert "Seq Scan" not in plans, plans
    assert "Index Scan using threadloom_session_heads_pkey" in plans, plans
    # And the appends landed in order, the setting gone with the call
    assert [message["id"] for message in tenant.get_session(sessions[2]).get_history()][-2:] == ["x1", "x2"]
    assert admin.run("SHOW enable_seqscan") == [["on"]]


def test_every_keyed_function_carries_its_setting(admin: Any, make_store: Callable[[], Any]) -> None:
    # Given the migrated schema
    make_store()
    # Then every overload of every function that works by key plans with sequential scans off, so a later
    # CREATE OR REPLACE that forgot the clause (it replaces the settings too) fails here
    rows = admin.run(
        "SELECT p.proname, p.oid::regprocedure::text, p.proconfig FROM pg_proc p "
        "WHERE p.proname = ANY(CAST(:names AS text[])) AND pg_function_is_visible(p.oid) ORDER BY 2",
        names=list(KEYED_FUNCTIONS),
    )
    assert {row[0] for row in rows} == set(KEYED_FUNCTIONS)
    assert [row[1] for row in rows if row[2] != ["enable_seqscan=off"]] == []


def test_an_imports_read_of_existing_entries_probes_the_primary_key_per_key(
    admin: Any, make_store: Callable[[], Any]
) -> None:
    # Given a label of 2,000 entries in a table never analyzed (a young deployment, autovacuum not yet run)
    make_store()
    admin.run(
        "INSERT INTO threadloom_search_entries (scope, label, key, content, created_at, updated_at) "
        "SELECT 'tenant', 'knowledge', 'fact-' || i, repeat('x', 200), now(), now() FROM generate_series(1, 2000) i"
    )
    # Then the plan of an import reads the file's keys by one probe each, never the label's every entry
    # (the planner hashed all 2,000 rows, contents included, for each batch of keys before the LATERAL step)
    text = _natural_plan(
        admin, PostgresSql.entry_contents, scope="tenant", label="knowledge", keys='["fact-7", "fact-1999"]'
    )
    assert "Nested Loop" in text and "Hash" not in text, text
    assert "Index Cond: ((scope = 'tenant'::text) AND (label = 'knowledge'::text) AND (key = k.key))" in text, text
