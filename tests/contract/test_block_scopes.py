"""Block scopes on every backend: a ``subject`` block is shared by one end user's sessions, a ``tenant``
block by the tenant's, a ``session`` block (the default) by no one; and the frozen prompt stays frozen.

Every row is owned: a subject's block never reaches another subject or another tenant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.core.manager import SessionManager
from threadloom.errors import ReadOnlyBlockError, StaleVersionError, ValidationError
from threadloom.records import BlockChange

if TYPE_CHECKING:
    from collections.abc import Callable


def _manager(store: Any, namespace: str) -> SessionManager:
    return (
        SessionManager(store, namespace=namespace)
        .with_context("memory", description="Facts about the user", max_tokens=200, scope="subject")
        .with_context("house", description="Team notes", scope="tenant")
        .with_context("scratch")
        .with_cached_prompt()
    )


def _text(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def test_a_subject_block_is_shared_by_that_subjects_sessions_only(make_store: Callable[[], Any]) -> None:
    tenant_a = _manager(make_store(), "tenant-a")
    alice_1 = tenant_a.create_session("one", subject_id="alice")
    alice_2 = tenant_a.create_session("two", subject_id="alice")
    bob = tenant_a.create_session("bob's", subject_id="bob")
    tenant_a.get_session(alice_1.id).append_context_block("memory", "Name: Alice")
    tenant_a.get_session(alice_1.id).append_context_block("scratch", "only in one")
    # Another process (a second Lambda) sees Alice's memory in her other session, not in Bob's
    other_process = _manager(make_store(), "tenant-a")
    memory = other_process.get_session(alice_2.id).get_context_block("memory")
    assert memory is not None and (memory.content, memory.scope, memory.version) == ("Name: Alice", "subject", 1)
    assert other_process.get_session(bob.id).get_context_block("memory").content == ""  # type: ignore[union-attr]
    assert other_process.get_session(alice_2.id).get_context_block("scratch").content == ""  # type: ignore[union-attr]
    # and the same subject id in another tenant is another user
    tenant_b = _manager(make_store(), "tenant-b")
    alice_b = tenant_b.create_session("b", subject_id="alice")
    assert tenant_b.get_session(alice_b.id).get_context_block("memory").content == ""  # type: ignore[union-attr]


def test_a_tenant_block_is_shared_by_the_tenants_sessions_only(make_store: Callable[[], Any]) -> None:
    tenant_a = _manager(make_store(), "tenant-a")
    first = tenant_a.create_session("one", subject_id="alice")
    second = tenant_a.create_session("two")
    tenant_a.get_session(first.id).replace_context_block("house", "Ship on Fridays")
    assert _manager(make_store(), "tenant-a").get_session(second.id).get_context_block("house").content == (  # type: ignore[union-attr]
        "Ship on Fridays"
    )
    tenant_b = _manager(make_store(), "tenant-b")
    other = tenant_b.create_session("b")
    assert tenant_b.get_session(other.id).get_context_block("house").content == ""  # type: ignore[union-attr]


def test_a_subject_block_of_a_session_without_subject_is_read_only(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store(), "tenant-a")
    anonymous = manager.get_session(manager.create_session("anon").id)
    block = anonymous.get_context_block("memory")
    assert block is not None and not block.writable and block.content == ""
    with pytest.raises(ReadOnlyBlockError, match='Block "memory" is readonly'):
        anonymous.replace_context_block("memory", "who?")
    result = anonymous.tools()["set_context"].execute({"label": "house", "content": "fine"})
    assert result.startswith("Written to house")


def test_an_unknown_scope_is_refused(make_store: Callable[[], Any]) -> None:
    with pytest.raises(ValidationError, match="scope must be one of session, subject, tenant"):
        SessionManager(make_store(), namespace="t").get_session("s").with_context("x", scope="user")  # type: ignore[arg-type]


def test_a_stale_replacement_is_refused_and_the_model_is_told_to_reread(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store(), "tenant-a")
    one = manager.create_session("one", subject_id="alice")
    two = manager.create_session("two", subject_id="alice")
    first = manager.get_session(one.id)
    second = _manager(make_store(), "tenant-a").get_session(two.id)
    first.freeze_system_prompt()
    second.freeze_system_prompt()  # both models were shown version 0 (empty)
    assert first.tools()["set_context"].execute({"label": "memory", "content": "Name: Alice"}).startswith("Written")
    refused = second.tools()["set_context"].execute({"label": "memory", "content": "Likes tea"})
    assert refused.startswith('Error: block "memory" was changed by another conversation')
    assert "now at version 1" in refused and refused.endswith("--- current content of memory ---\nName: Alice")
    # the refusal wrote nothing; having re-read, the model's next replacement lands on version 1
    assert second.get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    merged = second.tools()["set_context"].execute({"label": "memory", "content": "Name: Alice\nLikes tea"})
    assert merged.startswith("Written to memory")
    assert first.read_context_block("memory").version == 2  # type: ignore[union-attr]
    # an explicit base version (the HTTP API's) is checked the same way
    with pytest.raises(StaleVersionError) as stale:
        first.replace_context_block("memory", "x", based_on_version=1, change=BlockChange(source="http"))
    assert (stale.value.current_version, stale.value.current_content) == (2, "Name: Alice\nLikes tea")


def test_appends_are_merged_with_what_is_stored_and_max_tokens_still_holds(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store(), "tenant-a")
    one = manager.get_session(manager.create_session("one", subject_id="alice").id)
    two = _manager(make_store(), "tenant-a").get_session(manager.create_session("two", subject_id="alice").id)
    one.get_context_blocks()
    two.get_context_blocks()  # both hold the empty block
    one.tools()["set_context"].execute({"label": "memory", "content": "Name: Alice", "action": "append"})
    two.tools()["set_context"].execute({"label": "memory", "content": "Likes tea", "action": "append"})
    assert one.read_context_block("memory").content == "Name: Alice\nLikes tea"  # type: ignore[union-attr]
    too_long = two.tools()["set_context"].execute({"label": "memory", "content": "word " * 400, "action": "append"})
    assert too_long.startswith('Error: Block "memory" exceeds maxTokens')
    assert one.read_context_block("memory").version == 2  # type: ignore[union-attr]


def test_a_shared_change_makes_other_frozen_prompts_stale_until_refreshed(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store(), "tenant-a")
    one = manager.get_session(manager.create_session("one", subject_id="alice").id)
    two = _manager(make_store(), "tenant-a").get_session(manager.create_session("two", subject_id="alice").id)
    one.append_message(_text("m1", "hi"))
    frozen_two = two.freeze_system_prompt()
    one.freeze_system_prompt()
    assert two.stale_prompt_blocks() == []
    one.append_context_block("memory", "Name: Alice")
    one.replace_context_block("scratch", "a session block never makes another prompt stale")
    # Two's prompt stays frozen (byte for byte) but says which shared block changed under it
    assert two.freeze_system_prompt() == frozen_two
    assert two.stale_prompt_blocks() == ["memory"]
    refreshed = two.refresh_system_prompt()
    assert "Name: Alice" in refreshed and two.stale_prompt_blocks() == []
    assert two.freeze_system_prompt() == refreshed


def test_opening_a_session_with_subject_blocks_costs_one_more_read(make_store: Callable[[], Any]) -> None:
    store = make_store()
    manager = _manager(store, "tenant-a")
    info = manager.create_session("one", subject_id="alice")
    plain = SessionManager(store, namespace="tenant-a").with_context("scratch").with_cached_prompt()
    counted = _count_round_trips(store)
    plain.get(info.id)
    plain.get_session(info.id).freeze_system_prompt()
    without_shared = counted()
    manager.get(info.id)
    manager.get_session(info.id).freeze_system_prompt()
    with_shared = counted() - without_shared
    assert with_shared - without_shared <= 1, (without_shared, with_shared)


def _count_round_trips(store: Any) -> Callable[[], int]:
    """Count the database calls a store makes (each is one round trip on PostgreSQL)."""
    database = store.database
    calls = [0]
    for name in ("query_once", "read_together", "read_when_missing", "execute_once", "write", "read"):
        original = getattr(database, name)

        def counting(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            calls[0] += 1
            return _original(*args, **kwargs)

        setattr(database, name, counting)
    return lambda: calls[0]


class _Recorder:
    """A live publisher that keeps what it was given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def publish(self, namespace: str, session_id: str, event: Any) -> None:
        self.events.append((namespace, session_id, event))


def test_live_viewers_of_the_other_sessions_hear_their_prompt_is_stale(make_store: Callable[[], Any]) -> None:
    from threadloom.live.publisher import attach_publisher

    recorder = _Recorder()
    manager = attach_publisher(_manager(make_store(), "tenant-a"), recorder)
    one = manager.create_session("one", subject_id="alice")
    two = manager.create_session("two", subject_id="alice")
    bob = manager.create_session("bob", subject_id="bob")
    for session_id in (two.id, bob.id):
        manager.get_session(session_id).freeze_system_prompt()
    manager.get_session(one.id).tools()["set_context"].execute({"label": "memory", "content": "Name: Alice"})
    stale = [(sid, event) for _, sid, event in recorder.events if event.get("staleBlocks")]
    assert [(sid, event["type"], event["staleBlocks"]) for sid, event in stale] == [
        (two.id, "session_status", ["memory"])
    ]
    # a tenant block concerns every session of the tenant that froze a prompt, Bob's too
    recorder.events.clear()
    manager.get_session(one.id).replace_context_block("house", "Ship on Fridays")
    told = {sid: event["staleBlocks"] for _, sid, event in recorder.events if event.get("staleBlocks")}
    assert told == {two.id: ["memory", "house"], bob.id: ["house"]}  # two's prompt also still misses the memory
    # a session-scoped block concerns no one else
    recorder.events.clear()
    manager.get_session(one.id).replace_context_block("scratch", "mine")
    assert not [event for _, _, event in recorder.events if event.get("staleBlocks")]


def test_viewers_are_told_what_is_stale_with_their_sessions_subject_not_one_cached_before(
    make_store: Callable[[], Any],
) -> None:
    """A warm process that still held a keyed session wired for Bob, created again elsewhere for Alice, must
    work out that session's stale blocks against Alice's memory when Alice's memory changes, not Bob's."""
    from threadloom.live.publisher import attach_publisher

    recorder = _Recorder()
    warm = attach_publisher(_manager(make_store(), "tenant-a"), recorder)
    elsewhere = _manager(make_store(), "tenant-a")
    alice = warm.create_session("alice's", subject_id="alice")
    warm.get_session(alice.id).replace_context_block("memory", "Name: Alice")
    keyed = warm.open_session("user-5", subject_id="bob").id
    with warm.checked_session(keyed) as session:  # this process wires the keyed session for Bob
        session.replace_context_block("memory", "Name: Bob")
    elsewhere.delete(keyed)
    assert elsewhere.open_session("user-5", subject_id="alice").id == keyed
    assert "Name: Alice" in elsewhere.get_session(keyed).freeze_system_prompt()
    warm.get_session(alice.id).replace_context_block("memory", "Name: Alice, likes tea")
    told = [(sid, event["staleBlocks"]) for _, sid, event in recorder.events if event.get("staleBlocks")]
    assert told == [(keyed, ["memory"])]
    recorder.events.clear()
    # Back to what the keyed session froze: nothing is stale (against Bob's memory it would look stale)
    warm.get_session(alice.id).replace_context_block("memory", "Name: Alice")
    assert [sid for _, sid, event in recorder.events if event.get("staleBlocks")] == []
    assert warm.get_session(keyed).subject_id == "alice"


def test_a_keyed_session_opened_again_for_another_subject_has_that_subjects_blocks(
    make_store: Callable[[], Any],
) -> None:
    """A keyed session's id stays the same when it is deleted and opened again: a warm manager must not
    keep the subject it knew, or Bob's conversation reads (and writes) Alice's memory."""
    warm = _manager(make_store(), "tenant-a")
    alice_elsewhere = warm.create_session("alice's other", subject_id="alice")
    alice = warm.open_session("user-42", subject_id="alice")
    warm.get_session(alice.id).append_context_block("memory", "Name: Alice")
    with warm.checked_session(alice.id) as session:  # the API's read: the session and its subject are cached
        assert session.get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    # Deleted and opened again for Bob in this process
    warm.delete(alice.id)
    bob = warm.open_session("user-42", subject_id="bob")
    assert bob.id == alice.id and bob.subject_id == "bob"
    with warm.checked_session(bob.id) as session:
        assert session.get_context_block("memory").content == ""  # type: ignore[union-attr]
        session.append_context_block("memory", "Name: Bob")
    # ... and in another process, while this one still knows Bob: opening the key reads the subject again
    other_process = _manager(make_store(), "tenant-a")
    other_process.delete(bob.id)
    carol = other_process.open_session("user-42", subject_id="carol")
    assert warm.open_session("user-42").subject_id == "carol"
    assert warm.get_session(carol.id).get_context_block("memory").content == ""  # type: ignore[union-attr]
    # Each subject's memory stayed its own
    alice_memory = warm.get_session(alice_elsewhere.id).get_context_block("memory")
    assert alice_memory.content == "Name: Alice"  # type: ignore[union-attr]
    bob_later = other_process.create_session("bob's later", subject_id="bob")
    assert other_process.get_session(bob_later.id).get_context_block("memory").content == "Name: Bob"  # type: ignore[union-attr]


def test_a_warm_process_asked_by_id_for_a_session_created_again_elsewhere_reads_nothing_stale(
    make_store: Callable[[], Any],
) -> None:
    """Requests after the first name the session by id: the check that goes with the read also checks that
    the session still has the subject this process wired its blocks for (``SessionChangedError``, 409)."""
    from threadloom.api.use_cases import context
    from threadloom.errors import SessionChangedError

    warm = _manager(make_store(), "tenant-a")
    alice = warm.open_session("user-7", subject_id="alice")
    with warm.checked_session(alice.id) as session:
        session.append_context_block("memory", "Name: Alice")
    elsewhere = _manager(make_store(), "tenant-a")
    elsewhere.delete(alice.id)
    assert elsewhere.open_session("user-7", subject_id="dave").id == alice.id
    # A read through the API's use case: a 409, and nothing of Alice's in it
    with pytest.raises(SessionChangedError):
        context.context_block(warm, alice.id, "memory")
    elsewhere.delete(alice.id)
    elsewhere.open_session("user-7", subject_id="alice")
    with warm.checked_session(alice.id) as session:  # this process knows Alice's session again...
        assert session.get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    elsewhere.delete(alice.id)
    elsewhere.open_session("user-7", subject_id="dave")  # ...created once more elsewhere, for Dave
    written: list[str] = []
    with pytest.raises(SessionChangedError), warm.checked_session(alice.id) as session:
        session.append_context_block("memory", "Name: Dave")  # would have gone to Alice's memory
        written.append("written")
    assert written == []
    # Retried, the request reads the session afresh: Dave's memory, empty, and Alice's kept hers
    with warm.checked_session(alice.id) as session:
        assert session.subject_id == "dave"
        assert session.get_context_block("memory").content == ""  # type: ignore[union-attr]
        session.append_context_block("memory", "Name: Dave")
    alice_again = elsewhere.create_session("alice's next", subject_id="alice")
    assert elsewhere.get_session(alice_again.id).get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    # A session without subject blocks wired is not checked for its subject
    plain = SessionManager(make_store(), namespace="tenant-a").with_context("scratch")
    with plain.checked_session(alice.id):
        pass
    elsewhere.delete(alice.id)
    elsewhere.open_session("user-7", subject_id="erin")
    with plain.checked_session(alice.id) as session:
        assert session.get_context_block("scratch").content == ""  # type: ignore[union-attr]


def test_a_warm_process_does_not_freeze_the_first_subjects_memory_into_a_session_created_again(
    make_store: Callable[[], Any],
) -> None:
    """``GET …/system-prompt`` freezes a session's first prompt and stores it for every later turn."""
    from threadloom.api.use_cases.context import system_prompt
    from threadloom.errors import SessionChangedError

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-8", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice")
    assert "Name: Alice" in system_prompt(warm, session_id).system_prompt
    elsewhere.delete(session_id)
    elsewhere.open_session("user-8", subject_id="dave")
    with pytest.raises(SessionChangedError):
        system_prompt(warm, session_id)
    assert elsewhere.get_frozen_system_prompt(session_id) is None  # nothing frozen for Dave
    prompt = system_prompt(warm, session_id).system_prompt  # the retry
    assert "Name: Alice" not in prompt and prompt == elsewhere.get_frozen_system_prompt(session_id)


def test_a_warm_process_appends_nothing_to_a_session_created_again_for_another_subject(
    make_store: Callable[[], Any],
) -> None:
    """An append's answer carries the token estimate of the session's prompt: in a warm process that still
    held the session wired for Alice, it counted Alice's memory for Bob's new session. The append's own
    stamp now checks the subject (``SessionChangedError``, 409): nothing written; the retry is Bob's. So do
    the manager's other writes (an edit, deletions, a clear), whose status events carry the estimate too."""
    from threadloom.errors import SessionChangedError

    statuses: list[dict[str, Any]] = []  # a listener: the append then answers with its estimate, as the API's
    warm = _manager(make_store(), "tenant-a").on_event(statuses.append)
    elsewhere = _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-9", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice. " * 40)
    with_memory = warm.append_message(session_id, _text("a1", "hello")).token_estimate

    def created_again_for_bob_while_this_process_knows_alice() -> None:
        elsewhere.delete(session_id)
        elsewhere.open_session("user-9", subject_id="alice")
        warm.forget_session(session_id)
        assert warm.get_session(session_id).subject_id == "alice"
        warm.get_session(session_id).get_history()  # the session wired, Alice's memory in hand
        elsewhere.delete(session_id)
        elsewhere.open_session("user-9", subject_id="bob")

    for append in (
        lambda: warm.append_message(session_id, _text("b1", "hi, I am Bob")),
        lambda: warm.append_chain(session_id, [_text("b1", "hi, I am Bob"), _text("b2", "again")]),
        lambda: warm.append_all(session_id, [_text("b1", "hi, I am Bob")]),
        lambda: warm.upsert(session_id, _text("b1", "hi, I am Bob")),
        # and the other writes, whose status events carry the estimate too
        lambda: warm.update_message(session_id, _text("b0", "edited")),
        lambda: warm.delete_message(session_id, "b0"),
        lambda: warm.delete_messages(session_id, ["b0"]),
        lambda: warm.clear_messages(session_id),
    ):
        created_again_for_bob_while_this_process_knows_alice()
        elsewhere.append_message(session_id, _text("b0", "Bob's first"))
        with pytest.raises(SessionChangedError):
            append()
        stored = elsewhere.get_session(session_id).get_history()
        assert [(message["id"], message["parts"]) for message in stored] == [
            ("b0", _text("b0", "Bob's first")["parts"])
        ]
    # The retry reads the session afresh: Bob's empty memory in the estimate, and the message stored
    retried = warm.append_message(session_id, _text("b1", "hi, I am Bob"))
    assert retried.inserted and retried.token_estimate is not None and with_memory is not None
    assert retried.token_estimate < with_memory
    assert warm.get_session(session_id).subject_id == "bob"
    assert [message["id"] for message in elsewhere.get_session(session_id).get_history()] == ["b0", "b1"]
    alice = elsewhere.create_session("alice's next", subject_id="alice")
    assert elsewhere.get_session(alice.id).get_context_block("memory").content.startswith("Name: Alice.")  # type: ignore[union-attr]
    # A manager that wires no subject block does not check the subject
    plain = SessionManager(make_store(), namespace="tenant-a").with_context("scratch")
    plain.get_session(session_id).get_history()
    elsewhere.delete(session_id)
    elsewhere.open_session("user-9", subject_id="carol")
    assert plain.append_message(session_id, _text("c1", "hi, I am Carol")).inserted


@pytest.mark.parametrize("learned_by", ["open_session", "get"])
def test_a_subject_only_looked_up_here_is_checked_too(make_store: Callable[[], Any], learned_by: str) -> None:
    """A warm process that learned a keyed session's subject from a lookup (``POST /sessions`` with the key,
    ``GET /sessions/{id}``) but never built its Session would build it with that subject: the check goes
    with the first read or write all the same (a 409, then the new subject's memory)."""
    from threadloom.api.use_cases import context
    from threadloom.errors import SessionChangedError

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    alice_other = elsewhere.create_session("alice's other", subject_id="alice")
    elsewhere.get_session(alice_other.id).append_context_block("memory", "Name: Alice")

    def looked_up_here_as_alice_then_created_again_for_dave() -> str:
        if learned_by == "open_session":
            session_id = warm.open_session("user-7", subject_id="alice").id
        else:
            session_id = elsewhere.open_session("user-7", subject_id="alice").id
            assert warm.get(session_id).subject_id == "alice"  # type: ignore[union-attr]
        elsewhere.delete(session_id)
        assert elsewhere.open_session("user-7", subject_id="dave").id == session_id
        return session_id

    session_id = looked_up_here_as_alice_then_created_again_for_dave()
    with pytest.raises(SessionChangedError):
        context.context_block(warm, session_id, "memory")  # a read through the API's use case
    assert context.context_block(warm, session_id, "memory").content == ""  # the retry: Dave's memory
    # A block write after a lookup: the same, and Alice's memory stays hers
    elsewhere.delete(session_id)
    warm.forget_session(session_id)
    session_id = looked_up_here_as_alice_then_created_again_for_dave()
    with pytest.raises(SessionChangedError), warm.checked_session(session_id) as session:
        session.append_context_block("memory", "Name: Dave")
    with warm.checked_session(session_id) as session:
        session.append_context_block("memory", "Name: Dave")
    assert elsewhere.get_session(alice_other.id).get_context_block("memory").content == "Name: Alice"  # type: ignore[union-attr]
    assert warm.get_session(session_id).get_context_block("memory").content == "Name: Dave"  # type: ignore[union-attr]


def test_the_status_read_checks_the_subject_again_for_its_stale_blocks(
    make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GET …/status`` reads the stale blocks after the status itself: a session deleted and opened again
    for another subject in between is a 409, not stale blocks worked out with the first subject's memory."""
    from threadloom.api.use_cases import compaction
    from threadloom.errors import SessionChangedError

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-3", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice")
    warm.get_session(session_id).freeze_system_prompt()
    assert compaction.session_status(warm, session_id).stale_blocks == []
    status_report = compaction.status_report

    def created_again_for_dave_right_after(manager: SessionManager, sid: str) -> Any:
        report = status_report(manager, sid)
        elsewhere.delete(sid)
        elsewhere.open_session("user-3", subject_id="dave")
        return report

    monkeypatch.setattr(compaction, "status_report", created_again_for_dave_right_after)
    with pytest.raises(SessionChangedError):
        compaction.session_status(warm, session_id)
    monkeypatch.setattr(compaction, "status_report", status_report)
    assert compaction.session_status(warm, session_id).stale_blocks == []  # Dave's: nothing frozen yet


@pytest.mark.parametrize("shape", ["message", "messages"])
def test_an_append_without_an_answered_estimate_checks_the_subject_again_for_it(
    make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """With nothing listening, an append answers no estimate and the API reads one after it: a session deleted
    and opened again for another subject in between is a 409, not an estimate counting the first one's memory."""
    from threadloom.api.models import AppendIn
    from threadloom.api.use_cases import messages
    from threadloom.errors import SessionChangedError
    from threadloom.limits import DEFAULT_LIMITS

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-4", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice. " * 40)
    body = AppendIn.model_validate({shape: _text("a1", "hello") if shape == "message" else [_text("a1", "hello")]})
    with_memory = messages.append(warm, session_id, body, DEFAULT_LIMITS)[0].token_estimate
    appends = {"message": warm.append_message, "messages": warm.append_chain}

    def created_again_for_dave_right_after(sid: str, *args: Any, **kwargs: Any) -> Any:
        result = appends[shape](sid, *args, **kwargs)
        elsewhere.delete(sid)
        elsewhere.open_session("user-4", subject_id="dave")
        return result

    monkeypatch.setattr(
        warm, "append_message" if shape == "message" else "append_chain", created_again_for_dave_right_after
    )
    body = AppendIn.model_validate({shape: _text("a2", "hi") if shape == "message" else [_text("a2", "hi")]})
    with pytest.raises(SessionChangedError):
        messages.append(warm, session_id, body, DEFAULT_LIMITS)
    monkeypatch.undo()
    retried = messages.append(warm, session_id, body, DEFAULT_LIMITS)[0].token_estimate
    assert retried < with_memory  # Dave's session: no memory of Alice's in the estimate


def test_an_upserts_rewrite_checks_the_subject_again(
    make_store: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert of a stored id appends (a no-op) and then rewrites: the rewrite is a checked write of its own."""
    from threadloom.errors import SessionChangedError

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-6", subject_id="alice").id
    warm.append(session_id, _text("m1", "Alice's"))
    append_message = warm.append_message

    def created_again_for_dave_right_after(sid: str, *args: Any, **kwargs: Any) -> Any:
        result = append_message(sid, *args, **kwargs)
        elsewhere.delete(sid)
        elsewhere.open_session("user-6", subject_id="dave")
        elsewhere.append(sid, _text("m1", "Dave's"))
        return result

    monkeypatch.setattr(warm, "append_message", created_again_for_dave_right_after)
    with pytest.raises(SessionChangedError):
        warm.upsert(session_id, _text("m1", "rewritten"))
    stored = elsewhere.get_session(session_id).get_history()
    assert [message["parts"] for message in stored] == [_text("m1", "Dave's")["parts"]]


def test_a_refresh_checks_the_subject_with_its_read(make_store: Callable[[], Any]) -> None:
    """``GET …/system-prompt?refresh=true`` renders the blocks again and stores the prompt: a warm process that
    knew the session as Alice's must not store Alice's memory as the prompt of the session opened again for Dave."""
    from threadloom.api.use_cases.context import system_prompt
    from threadloom.errors import SessionChangedError, SessionNotFoundError

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-2", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice")
    assert "Name: Alice" in system_prompt(warm, session_id, refresh=True).system_prompt
    elsewhere.delete(session_id)
    elsewhere.open_session("user-2", subject_id="dave")
    with pytest.raises(SessionChangedError):
        system_prompt(warm, session_id, refresh=True)
    assert elsewhere.get_frozen_system_prompt(session_id) is None  # nothing stored for Dave
    assert "Name: Alice" not in system_prompt(warm, session_id, refresh=True).system_prompt  # the retry
    with pytest.raises(SessionNotFoundError):
        system_prompt(_manager(make_store(), "tenant-b"), session_id, refresh=True)


def test_a_live_subscription_to_a_session_opened_again_for_another_subject_gets_the_new_sessions_status(
    make_store: Callable[[], Any],
) -> None:
    """A warm process that knew the session for Alice is told by the check that it changed: the subscription
    reads it once more and answers Dave's status, not an exception that drops the viewer's connection."""
    from threadloom.live import subscribe_reply

    warm, elsewhere = _manager(make_store(), "tenant-a"), _manager(make_store(), "tenant-a")
    session_id = warm.open_session("user-5", subject_id="alice").id
    warm.get_session(session_id).append_context_block("memory", "Name: Alice. " * 40)
    warm.get_session(session_id).freeze_system_prompt()
    elsewhere.delete(session_id)
    assert elsewhere.open_session("user-5", subject_id="dave").id == session_id
    reply = subscribe_reply(warm, session_id)
    assert reply["type"] == "subscribed", reply
    fresh = _manager(make_store(), "tenant-a")
    assert reply == subscribe_reply(fresh, session_id)  # what a process that never knew Alice answers
