"""A read of a session's data is refused outside its tenant's namespace, on every backend, the check sent with the read.

The HTTP API's reads (``GET …/context``, ``…/context/{label}`` and its history, ``…/branch-points``,
``…/messages/{id}/branches``, ``…/search``, ``…/compactions``, ``…/status``, ``…/context-window``,
``…/proposals``) and the manager's own reads go through ``SessionManager.checked_session``: on PostgreSQL
the registry's check waits for the first read and goes in its round trip (``storage/checked_reads.py``;
``tests/integration/postgres/test_checked_reads.py`` counts them). Here: each is answered for the tenant
as before, and for another tenant's session, or one that does not exist, it is a 404 that reads
nothing out, caches nothing, and wins over any other error the request would have had.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from threadloom.api.runtime import Runtime, Settings
from threadloom.api.use_cases import block_history, compaction, context, history, messages, reflection
from threadloom.errors import NotFoundError, SessionNotFoundError, ValidationError
from threadloom.live.status import status_report

from tests.support.messages import text_message


@pytest.fixture
def runtime(make_store: Callable[[], Any], tmp_path: Path) -> Runtime:
    return Runtime(Settings(skills_dir=str(tmp_path), compaction_mode="inline"), store=make_store())


def _session(runtime: Runtime) -> str:
    """m1 - m2 - m3, a branch b1 under m2, a memory block written twice, an overlay over m1..m2."""
    manager = runtime.manager("owner")
    session_id = manager.create("read").id
    for index in (1, 2, 3):
        manager.append_message(session_id, text_message(f"m{index}", f"lighthouse line {index}"))
    manager.append_message(session_id, text_message("b1", "a branch"), "m2")
    session = manager.get_session(session_id)
    session.replace_context_block("memory", "first fact")
    session.replace_context_block("memory", "second fact")
    manager.add_compaction(session_id, "m1 and m2, summarised", "m1", "m2")
    return session_id


def _reads(runtime: Runtime, session_id: str) -> dict[str, Callable[[Any], Any]]:
    """Each read, given a fresh manager (a new request)."""
    limits = runtime.limits
    return {
        "context blocks": lambda manager: context.context_blocks(manager, session_id),
        "context block": lambda manager: context.context_block(manager, session_id, "memory"),
        "context window": lambda manager: context.context_window(manager, session_id, None),
        "block history": lambda manager: block_history.block_history(
            manager, session_id, "memory", limits, limit=None, cursor=None
        ),
        "block version": lambda manager: block_history.block_version(manager, session_id, "memory", 1),
        "branch points": lambda manager: history.branch_points(manager, session_id),
        "search": lambda manager: history.search_session(manager, session_id, "lighthouse", None, limits),
        "branches": lambda manager: messages.branches(manager, session_id, "m2", limits, limit=None, cursor=None),
        "compactions": lambda manager: compaction.compactions(manager, session_id, limits, limit=None, cursor=None),
        "originals": lambda manager: compaction.compaction_originals(
            manager, session_id, manager.get_compactions(session_id)[0].id, limits, limit=None, cursor=None
        ),
        "status": lambda manager: status_report(manager, session_id),
        "proposals": lambda manager: reflection.proposals(
            manager, session_id, limits, status=None, limit=None, cursor=None
        ),
        "manager history": lambda manager: manager.get_history(session_id),
        "manager branches": lambda manager: manager.get_branches(session_id, "m2"),
        "manager count": lambda manager: manager.get_message_count(session_id),
        "manager compactions": lambda manager: manager.get_compactions(session_id),
        "tool specs": lambda manager: context.tool_specs(manager, session_id, "openai"),
        "search tool": lambda manager: context.call_tool(
            manager, session_id, "search_context", {"label": "knowledge", "query": "lighthouse"}
        ),
        "session search tool": lambda manager: context.call_tool(
            manager, session_id, "session_search", {"query": "lighthouse"}
        ),
    }


def test_each_read_answers_its_tenant(runtime: Runtime) -> None:
    session_id = _session(runtime)
    answers = {name: read(runtime.manager("owner")) for name, read in _reads(runtime, session_id).items()}
    assert [block.content for block in answers["context blocks"].blocks if block.label == "memory"] == ["second fact"]
    assert answers["context block"].content == "second fact" and answers["context block"].version == 2
    assert answers["context window"].history_messages == 3
    assert [version.content for version in answers["block history"].versions] == ["second fact", "first fact"]
    assert answers["block version"].content == "first fact"
    [point] = answers["branch points"].branch_points
    assert point.parent_id == "m2" and [child.id for child in point.children] == ["m3", "b1"]
    assert {hit.id for hit in answers["search"].results} == {"m1", "m2", "m3"}
    assert [message["id"] for message in answers["branches"].messages] == ["m3", "b1"]
    assert [item.summary for item in answers["compactions"].compactions] == ["m1 and m2, summarised"]
    assert [message["id"] for message in answers["originals"].messages] == ["m1", "m2"]
    status, _ = answers["status"]
    assert status.phase == "idle" and status.token_estimate > 0
    assert answers["proposals"].proposals == []
    assert [message["id"] for message in answers["manager history"]][-1] == "b1"
    assert [message["id"] for message in answers["manager branches"]] == ["m3", "b1"]
    assert answers["manager count"] == 3
    assert len(answers["manager compactions"]) == 1
    assert "set_context" in {spec["function"]["name"] for spec in answers["tool specs"].tools}
    assert not answers["search tool"].is_error
    assert "lighthouse" in answers["session search tool"].output


@pytest.mark.parametrize("whose", ["another tenant's", "nobody's"])
def test_each_read_of_a_session_not_the_tenants_is_not_found_and_caches_nothing(runtime: Runtime, whose: str) -> None:
    session_id = _session(runtime)
    asked = session_id if whose == "another tenant's" else "no-such-session"
    for name, read in _reads(runtime, asked).items():
        if name == "originals":
            continue  # it names an overlay read from the session first; the manager's compactions cover it
        manager = runtime.manager("intruder")
        with pytest.raises(SessionNotFoundError):
            read(manager)
        assert asked not in manager._sessions, name
    # The owner's data is untouched by the attempts
    assert runtime.manager("owner").get_session(session_id).read_context_block("memory").content == "second fact"


def test_the_refusal_wins_over_every_other_error_of_the_request(runtime: Runtime) -> None:
    """A bad cursor or an unknown label or message says nothing about another tenant's session: it is a 404."""
    session_id = _session(runtime)
    limits = runtime.limits
    refused: list[Callable[[Any], Any]] = [
        lambda manager: messages.branches(manager, session_id, "m2", limits, limit=None, cursor="not-a-cursor"),
        lambda manager: messages.branches(manager, session_id, "nope", limits, limit=None, cursor=None),
        lambda manager: context.context_block(manager, session_id, "no-such-block"),
        lambda manager: block_history.block_history(
            manager, session_id, "memory", limits, limit=None, cursor="not-a-cursor"
        ),
        lambda manager: reflection.proposals(manager, session_id, limits, status=None, limit=None, cursor="bad"),
        lambda manager: compaction.compaction_originals(
            manager, session_id, "no-such-overlay", limits, limit=None, cursor=None
        ),
    ]
    for read in refused:
        with pytest.raises(SessionNotFoundError):
            read(runtime.manager("intruder"))
    # The owner gets the request's own error
    owner_errors = [
        (ValidationError, refused[0]),
        (NotFoundError, refused[1]),
        (NotFoundError, refused[2]),
        (ValidationError, refused[3]),
        (ValidationError, refused[4]),
        (NotFoundError, refused[5]),
    ]
    for error, read in owner_errors:
        with pytest.raises(error) as raised:
            read(runtime.manager("owner"))
        assert not isinstance(raised.value, SessionNotFoundError)


def test_a_refusal_caught_inside_the_block_is_raised_when_it_ends(runtime: Runtime, backend: str) -> None:
    session_id = _session(runtime)
    manager = runtime.manager("intruder")
    seen: list[object] = []
    with pytest.raises(SessionNotFoundError), manager.checked_session(session_id) as session:
        try:
            seen.append(session.get_history())
        except SessionNotFoundError:
            seen.append("refused")
        seen.append("went on")
    # SQLite checks where the block starts (so nothing inside runs); PostgreSQL refuses the first read
    assert seen == ([] if backend == "sqlite" else ["refused", "went on"])


def test_a_write_inside_the_block_is_refused_before_it_is_sent(runtime: Runtime) -> None:
    session_id = _session(runtime)
    with pytest.raises(SessionNotFoundError), runtime.manager("intruder").checked_session(session_id) as session:
        session.storage.append_message(text_message("x1", "written by another tenant"))
    assert runtime.manager("owner").get_session(session_id).get_message("x1") is None


def test_a_block_that_reads_nothing_still_checks(runtime: Runtime) -> None:
    session_id = _session(runtime)
    ran: list[str] = []
    with pytest.raises(SessionNotFoundError), runtime.manager("intruder").checked_session(session_id):
        ran.append("body")
    with runtime.manager("owner").checked_session(session_id) as session:
        assert session.session_id == session_id


def test_another_tenants_memory_tool_call_writes_nothing_though_the_tool_catches_every_error(runtime: Runtime) -> None:
    """The model's tools turn errors into text for the model; the refusal still ends the request, unwritten."""
    session_id = _session(runtime)
    for content, action in (("planted fact", "replace"), ("appended fact", "append")):
        with pytest.raises(SessionNotFoundError):
            context.call_tool(
                runtime.manager("intruder"),
                session_id,
                "set_context",
                {"label": "memory", "content": content, "action": action},
            )
    owner = runtime.manager("owner")
    block = owner.get_session(session_id).read_context_block("memory")
    assert block is not None and block.content == "second fact" and block.version == 2
    # And the owner's own call writes
    written = context.call_tool(owner, session_id, "set_context", {"label": "memory", "content": "third fact"})
    assert not written.is_error
    assert runtime.manager("owner").get_session(session_id).read_context_block("memory").content == "third fact"


def test_another_tenants_skill_write_leaves_no_file_and_the_owners_does(runtime: Runtime, tmp_path: Path) -> None:
    """A skill document goes to the skill store (a folder here, S3 deployed), which no statement gates."""
    session_id = _session(runtime)

    def files() -> set[Path]:
        return {path for path in tmp_path.rglob("*") if path.is_file()}

    before = files()
    arguments = {"label": "skills", "content": "# Deploying\nRun the two commands.", "metadata": {"title": "deploy"}}
    with pytest.raises(SessionNotFoundError):
        context.call_tool(runtime.manager("intruder"), session_id, "set_context", dict(arguments))
    assert files() == before
    written = context.call_tool(runtime.manager("owner"), session_id, "set_context", dict(arguments))
    assert not written.is_error, written.output
    assert len(files() - before) >= 1


def test_a_skill_write_to_a_session_deleted_meanwhile_leaves_no_file(runtime: Runtime, tmp_path: Path) -> None:
    """A warm manager keeps the session, its blocks loaded: no read goes ahead of the write, so the check runs alone."""
    session_id = _session(runtime)
    warm = runtime.manager("owner")
    context.tool_specs(warm, session_id, "openai")  # the session kept, its blocks loaded
    warm.get_session(session_id).get_context_blocks()
    runtime.manager("owner").delete(session_id)  # another process deletes it

    def files() -> set[Path]:
        return {path for path in tmp_path.rglob("*") if path.is_file()}

    before = files()
    arguments = {"label": "skills", "content": "# Deploying\nRun the two commands.", "metadata": {"title": "deploy"}}
    with pytest.raises(SessionNotFoundError):
        context.call_tool(warm, session_id, "set_context", arguments)
    assert files() == before


def test_another_tenants_block_writes_are_refused_and_write_nothing(runtime: Runtime) -> None:
    """``PUT …/context/{label}`` (append, replace) and a revert check the session with their first statement."""
    session_id = _session(runtime)
    limits = runtime.limits
    writes: list[Callable[[Any], Any]] = [
        lambda manager: context.write_context_block(
            manager, session_id, "memory", content="planted", mode="replace", limits=limits
        ),
        lambda manager: context.write_context_block(
            manager, session_id, "memory", content="planted", mode="append", limits=limits
        ),
        lambda manager: block_history.revert_block(manager, session_id, "memory", version=1, based_on_version=None),
    ]
    for write in writes:
        with pytest.raises(SessionNotFoundError):
            write(runtime.manager("intruder"))
    block = runtime.manager("owner").get_session(session_id).read_context_block("memory")
    assert block is not None and (block.content, block.version) == ("second fact", 2)
    # The owner's go through: append, then a revert to version 1 (a new version 4)
    appended = writes[1](runtime.manager("owner"))
    assert appended.version == 3 and "planted" in appended.content
    reverted = writes[2](runtime.manager("owner"))
    assert (reverted.content, reverted.version) == ("first fact", 4)
