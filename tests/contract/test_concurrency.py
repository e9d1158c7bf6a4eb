"""Guarantees across processes (contract §4): serialized appends, one chain, nothing lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from threadloom import Session

from tests.support.messages import text_message

THREADS = 4
APPENDS_PER_THREAD = 50


def test_concurrent_appends_without_parent_form_one_chain(make_store: Callable[[], Any]) -> None:
    # Given several writers, each with its own connection to the same session
    stores = [make_store() for _ in range(THREADS)]
    Session.create(stores[0]).for_session("shared").append_message(text_message("root"))
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        session = Session.create(stores[index]).for_session("shared")
        barrier.wait()
        try:
            for step in range(APPENDS_PER_THREAD):
                session.append_message(text_message(f"t{index}-{step}"))
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then there is exactly one chain holding every message: no sibling was created
    assert errors == []
    session = Session.create(make_store()).for_session("shared")
    history = session.get_history()
    assert len(history) == 1 + THREADS * APPENDS_PER_THREAD
    assert {m["id"] for m in history} == {"root"} | {
        f"t{i}-{s}" for i in range(THREADS) for s in range(APPENDS_PER_THREAD)
    }
    for message in history[1:]:
        assert len(session.get_branches(message["id"])) <= 1
    # every writer's own messages stay in its order
    for index in range(THREADS):
        own = [m["id"] for m in history if m["id"].startswith(f"t{index}-")]
        assert own == [f"t{index}-{step}" for step in range(APPENDS_PER_THREAD)]
