"""Each script in examples/ chats through the local server and resumes in a second run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests.integrations.driver import ROOT

pytestmark = pytest.mark.e2e


def run_example(script: str, url: str, session: str, *prompts: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "THREADLOOM_BEDROCK_MODEL_ID"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--url", url, "--session", session, *prompts],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("script", ["openai_agents_chat.py", "strands_chat.py", "langchain_chat.py"])
def test_example_chats_and_resumes(script: str, integration_server: str) -> None:
    session = f"example-{uuid.uuid4().hex[:8]}"
    first = run_example(script, integration_server, session, "Remember that the launch is on Friday")
    assert first == "you:   Remember that the launch is on Friday\nagent: Noted. I now remember 1 thing(s).\n"
    second = run_example(script, integration_server, session, "What do you remember?")
    assert second == "you:   What do you remember?\nagent: I remember: the launch is on Friday.\n"
