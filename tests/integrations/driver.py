"""Runs each framework's own agent loop (with the examples' scripted models) over a Threadloom backend.

``python -m tests.integrations.driver <framework> <spec> <key> <prompt>...`` does the same in
another process and prints JSON, which is how the tests show a conversation resuming elsewhere.
A spec is ``sqlite:<path>``, ``postgres:<url>`` or ``http:<base url>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "integrations"


def open_backend(spec: str) -> Any:
    kind, _, where = spec.partition(":")
    if kind == "http":
        from threadloom.client import ThreadloomClient

        return ThreadloomClient(where)
    from threadloom import SessionManager, SqliteStore

    if kind == "sqlite":
        return SessionManager.create(SqliteStore(where), namespace=NAMESPACE)
    from threadloom import PostgresStore

    return SessionManager.create(PostgresStore(where), namespace=NAMESPACE)


def run_openai_agents(backend: Any, key: str, prompts: list[str]) -> dict[str, Any]:
    from agents import set_tracing_disabled
    from threadloom.integrations.openai_agents import ThreadloomSession

    from examples.openai_agents_chat import chat

    set_tracing_disabled(True)
    session = ThreadloomSession(key, backend)
    restored = asyncio.run(session.get_items())
    answers = asyncio.run(chat(session, prompts))
    return {"restored": restored, "answers": answers, "final": asyncio.run(session.get_items())}


def run_strands(backend: Any, key: str, prompts: list[str]) -> dict[str, Any]:
    from threadloom.integrations.strands import ThreadloomSessionRepository

    from examples.strands_chat import build_agent

    agent = build_agent(ThreadloomSessionRepository(backend), key)
    restored = json.loads(json.dumps(agent.messages))
    answers = [str(agent(prompt)).strip() for prompt in prompts]
    return {"restored": restored, "answers": answers, "final": json.loads(json.dumps(agent.messages))}


def run_langchain(backend: Any, key: str, prompts: list[str]) -> dict[str, Any]:
    from langchain_core.messages import message_to_dict
    from threadloom.integrations.langchain import ThreadloomChatMessageHistory

    from examples.langchain_chat import ScriptedChatModel, chat_turn

    history = ThreadloomChatMessageHistory(key, backend)
    model = ScriptedChatModel()
    restored = [message_to_dict(message) for message in history.messages]
    answers = [chat_turn(history, model, prompt) for prompt in prompts]
    return {"restored": restored, "answers": answers, "final": [message_to_dict(m) for m in history.messages]}


RUNNERS = {"openai-agents": run_openai_agents, "strands": run_strands, "langchain": run_langchain}


def run(framework: str, spec: str, key: str, prompts: list[str]) -> dict[str, Any]:
    backend = open_backend(spec)
    try:
        return RUNNERS[framework](backend, key, prompts)
    finally:
        close = getattr(backend, "close", None) or getattr(getattr(backend, "store", None), "close", None)
        if callable(close):
            close()


def in_new_process(framework: str, spec: str, key: str, prompts: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "THREADLOOM_BEDROCK_MODEL_ID"}
    result = subprocess.run(
        [sys.executable, "-m", "tests.integrations.driver", framework, spec, key, *prompts],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])))
