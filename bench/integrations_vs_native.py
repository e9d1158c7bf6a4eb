"""Each framework adapter against that framework's own persistent session store, printed as ratios (one run).

For every framework: APPEND = one turn's records written (median of TURNS turns, into a growing
conversation); READ = the whole conversation read back as the framework reads it at the start of
a turn (median of READS reads, after TURNS turns). Threadloom runs on the embedded default
(SQLiteStore file, a SessionManager with no blocks), in process, twice: with its default
``synchronous="normal"`` (WAL, no disk sync per commit) and with ``synchronous="full"``, like the
native stores, which sync every commit. Against:

- OpenAI Agents SDK: ``SQLiteSession`` (a file), 3 items per turn (user, function call, output);
- Strands: ``FileSessionManager``'s repository (Strands has no SQLite store; files are its default);
- LangChain: ``SQLChatMessageHistory`` (langchain-community, SQLite file) when installed.

Run: .venv/bin/python bench/integrations_vs_native.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom import SessionManager, SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable

TURNS = 200
READS = 30
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


SYNCHRONOUS = "normal"


def manager(folder: Path) -> SessionManager:
    store = SqliteStore(str(folder / f"threadloom-{SYNCHRONOUS}.db"), synchronous=SYNCHRONOUS)
    return SessionManager.create(store, namespace="bench")


def openai_agents(folder: Path) -> tuple[list[float], list[float], list[float], list[float]]:
    from agents.memory import SQLiteSession
    from threadloom.integrations.openai_agents import ThreadloomSession

    def turn(i: int) -> list[Any]:
        return [
            {"role": "user", "content": f"{TEXT} ({i})"},
            {"type": "function_call", "call_id": f"c{i}", "name": "note", "arguments": '{"text": "x"}', "id": f"f{i}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": TEXT},
        ]

    def measure(session: Any) -> tuple[list[float], list[float]]:
        appends = [timed(lambda i=i: asyncio.run(session.add_items(turn(i)))) for i in range(TURNS)]
        reads = [timed(lambda: asyncio.run(session.get_items())) for _ in range(READS)]
        return appends, reads

    native = measure(SQLiteSession("bench", str(folder / "agents.db")))
    ours = measure(ThreadloomSession("bench", manager(folder)))
    return native[0], native[1], ours[0], ours[1]


def strands(folder: Path) -> tuple[list[float], list[float], list[float], list[float]]:
    from strands.session.file_session_manager import FileSessionManager
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
    from threadloom.integrations.strands import ThreadloomSessionRepository

    def measure(repository: Any) -> tuple[list[float], list[float]]:
        repository.create_session(Session(session_id="bench", session_type=SessionType.AGENT))
        repository.create_agent("bench", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
        appends = []
        for i in range(TURNS):
            message = SessionMessage.from_message({"role": "user", "content": [{"text": f"{TEXT} ({i})"}]}, i)
            appends.append(timed(lambda m=message: repository.create_message("bench", "a", m)))
        reads = [timed(lambda: repository.list_messages("bench", "a")) for _ in range(READS)]
        return appends, reads

    native = measure(FileSessionManager(session_id="bench-setup", storage_dir=str(folder / "strands")))
    ours = measure(ThreadloomSessionRepository(manager(folder)))
    return native[0], native[1], ours[0], ours[1]


def langchain(folder: Path) -> tuple[list[float], list[float], list[float], list[float]] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_community.chat_message_histories import SQLChatMessageHistory
    except ImportError:
        return None
    from langchain_core.messages import AIMessage, HumanMessage
    from threadloom.integrations.langchain import ThreadloomChatMessageHistory

    def measure(history: Any) -> tuple[list[float], list[float]]:
        appends = [
            timed(lambda i=i: history.add_messages([HumanMessage(content=f"{TEXT} ({i})"), AIMessage(content=TEXT)]))
            for i in range(TURNS)
        ]
        reads = [timed(lambda: history.messages) for _ in range(READS)]
        return appends, reads

    native = measure(SQLChatMessageHistory("bench", connection=f"sqlite:///{folder / 'langchain.db'}"))
    ours = measure(ThreadloomChatMessageHistory("bench", manager(folder)))
    return native[0], native[1], ours[0], ours[1]


def main() -> None:
    global SYNCHRONOUS
    print(f"{TURNS} turns appended, then the conversation read {READS} times; medians, Threadloom / native")
    print(
        f"{'framework':<16}{'synchronous':<13}{'native append':>15}{'ours append':>13}{'ratio':>8}"
        f"{'native read':>13}{'ours read':>11}{'ratio':>8}"
    )
    for name, run in (("openai-agents", openai_agents), ("strands", strands), ("langchain", langchain)):
        for SYNCHRONOUS in ("normal", "full"):
            with tempfile.TemporaryDirectory() as tmp:
                figures = run(Path(tmp))
            if figures is None:
                print(f"{name:<16}skipped: pip install 'threadloom[bench]' for its SQLChatMessageHistory")
                break
            na, nr, oa, orr = (median_ms(samples) for samples in figures)
            print(
                f"{name:<16}{SYNCHRONOUS:<13}{na:>12.3f} ms{oa:>10.3f} ms{oa / na:>7.2f}x"
                f"{nr:>10.3f} ms{orr:>8.3f} ms{orr / nr:>7.2f}x"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
