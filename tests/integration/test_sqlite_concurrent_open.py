"""Processes that open a new SQLite file at the same moment all get a working store.

Each opening switches the file to WAL, which needs the file to itself; SQLite answers "database is
locked" at once instead of waiting, so before the retry about one store in three failed to open
when two threads raced on a new file (seen in CI as a contract test's thread dying).
"""

from __future__ import annotations

import threading
from pathlib import Path

from threadloom import Session, SqliteStore

from tests.support.messages import text_message

RACES = 40


def test_stores_opened_at_once_on_a_new_file_all_work(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    for race in range(RACES):
        path = str(tmp_path / f"race-{race}.db")
        barrier = threading.Barrier(3, timeout=30)
        stores: list[SqliteStore] = []

        def open_and_append(
            name: str, path: str = path, barrier: threading.Barrier = barrier, stores: list[SqliteStore] = stores
        ) -> None:
            try:
                barrier.wait()
                store = SqliteStore(path)
                stores.append(store)
                Session.create(store).for_session("race").append_message(text_message(name))
            except BaseException as error:  # collected: a dying thread must fail the test, not hide
                failures.append(error)

        threads = [threading.Thread(target=open_and_append, args=(f"m{index}",)) for index in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, (race, failures)
        assert len(Session.create(stores[0]).for_session("race").get_history()) == 3
        for store in stores:
            store.close()
