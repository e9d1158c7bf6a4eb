"""A keyed session deleted and opened again for another subject while its summary is computed gets nothing of the first.

The worker looks the session up, reads its history and calls the summarizer, which may take seconds. A
keyed session (``open_session(key)``) can meanwhile be deleted and opened again, under the same id, for
another subject. The commit's transaction now checks, as a manager's edits do, that the namespace still
holds the session for the subject the worker's blocks are wired for: otherwise the outcome is
``SESSION_GONE`` and nothing is written, neither the first subject's summary into the second's history
nor, through the prompt refreshed after a compaction, the first subject's memory into the second's prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.compaction import create_compact_function
from threadloom.compaction.queue import CompactionRequest
from threadloom.core.compaction_worker import CompactionOutcome, CompactionWorker
from threadloom.core.manager import SessionManager

from tests.support.messages import text_message

TENANT = "tenant-a"
WORDS = "word " * 30


def subject_manager(store: Any, summarize: Callable[[str], str] | None = None) -> SessionManager:
    manager = (
        SessionManager.create(store, namespace=TENANT)
        .with_context("memory", max_tokens=500, scope="subject")
        .with_cached_prompt()
    )
    if summarize is not None:
        function = create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1)
        manager = manager.on_compaction(function)
    return manager


def alices_session(make_store: Callable[[], Any], prefix: str) -> str:
    manager = subject_manager(make_store())
    session_id = manager.open_session("user-1", subject_id="alice").id
    manager.get_session(session_id).replace_context_block("memory", "Alice lives at 1 Secret Road")
    manager.append_all(session_id, [text_message(f"{prefix}{n}", f"ALICE-SECRET {n} {WORDS}") for n in range(8)])
    return session_id


def reopened_for_bob(make_store: Callable[[], Any], session_id: str, prefix: str) -> None:
    elsewhere = subject_manager(make_store())
    elsewhere.delete(session_id)
    assert elsewhere.open_session("user-1", subject_id="bob").id == session_id  # the same keyed id
    elsewhere.append_all(session_id, [text_message(f"{prefix}{n}", f"bob says {n} {WORDS}") for n in range(8)])


def what_bob_has(make_store: Callable[[], Any], session_id: str) -> tuple[list[str], str]:
    bob = subject_manager(make_store()).get_session(session_id)
    texts = [message["parts"][0].get("text", "") for message in bob.get_history()]
    prompt = bob.blocks.prompt_store.get() if bob.blocks.prompt_store is not None else None
    return texts, prompt or ""


def test_a_summary_of_alice_never_lands_in_bobs_session(make_store: Callable[[], Any]) -> None:
    # Given Alice's keyed session, deleted and opened again for Bob with the same message ids while summarizing
    session_id = alices_session(make_store, "m")
    reopened: list[bool] = []

    def summarize(prompt: str) -> str:
        if not reopened:
            reopened.append(True)
            reopened_for_bob(make_store, session_id, "m")
        return "SUMMARY: " + ("alice-secret" if "ALICE-SECRET" in prompt else "bob")

    worker = CompactionWorker(lambda namespace: subject_manager(make_store(), summarize))
    # When the worker handles the request Alice's append queued
    outcome = worker.handle(CompactionRequest.create(TENANT, session_id, "m7"))
    # Then nothing was written to Bob's session: no overlay, and none of Alice's memory in his prompt
    assert outcome is CompactionOutcome.SESSION_GONE
    texts, prompt = what_bob_has(make_store, session_id)
    assert not any("alice" in text.lower() for text in texts)
    assert "Secret Road" not in prompt


def test_bobs_prompt_is_not_refreshed_from_alices_memory(make_store: Callable[[], Any]) -> None:
    # Given the session deleted and opened again for Bob right after the worker looked it up (new message ids)
    session_id = alices_session(make_store, "a")
    manager = subject_manager(make_store(), lambda prompt: "a summary of what was read")
    looked_up = manager.get_session

    def get_session(wanted: str) -> Any:
        session = looked_up(wanted)
        reopened_for_bob(make_store, wanted, "b")
        return session

    manager.get_session = get_session  # type: ignore[method-assign]
    outcome = CompactionWorker(lambda namespace: manager).handle(CompactionRequest.create(TENANT, session_id, "a7"))
    assert outcome is CompactionOutcome.SESSION_GONE
    texts, prompt = what_bob_has(make_store, session_id)
    assert "Secret Road" not in prompt and not any(text.startswith("SUMMARY") for text in texts)


def test_control_a_session_that_kept_its_subject_is_compacted(make_store: Callable[[], Any]) -> None:
    session_id = alices_session(make_store, "m")
    worker = CompactionWorker(lambda namespace: subject_manager(make_store(), lambda prompt: "SUMMARY of Alice"))
    assert worker.handle(CompactionRequest.create(TENANT, session_id, "m7")) is CompactionOutcome.COMPACTED
    alice = subject_manager(make_store()).get_session(session_id)
    assert any(message["parts"][0].get("text", "").startswith("SUMMARY") for message in alice.get_history())
