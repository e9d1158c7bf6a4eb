"""An invalid deployment profile fails at start, once, in words (issue 26 item 7).

It used to let ``threadloom serve`` start and then answer every request with 500 ``internal_error``, and a Lambda
did the same on every invocation. Now the local server exits with one line naming the file, the key and the
problem, and the API Lambda logs it once at init and answers ``invalid_profile``. Both run as real processes:
the server through ``python -m threadloom.local_server`` and ``threadloom serve``, the Lambda entry point
imported fresh in a subprocess with the profile in its environment, as Lambda's init does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_server import ROOT, free_port

pytestmark = pytest.mark.e2e

BAD_KEY = "name: typo\ncompaction:\n  treshold: 100\n"
BAD_VALUE = "name: small\nlimits:\n  max_page_size: -1\n"


def start_server(tmp_path: Path, profile: str, *command: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "profile.yaml"
    path.write_text(profile, encoding="utf-8")
    environment = {**os.environ, "THREADLOOM_PROFILE": str(path)}
    arguments = [*command, "--port", str(free_port()), "--data-dir", str(tmp_path / "data")]
    return run(arguments, environment)


def run(arguments: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a fresh Python process from the repository root; its output is read, its exit code asserted."""
    return subprocess.run(arguments, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60, check=False)


def test_the_local_server_exits_with_one_line_naming_file_key_and_problem(tmp_path: Path) -> None:
    finished = start_server(tmp_path, BAD_KEY, sys.executable, "-m", "threadloom.local_server")
    assert finished.returncode == 1
    assert finished.stdout == ""  # no banner: it never listened
    assert finished.stderr.splitlines() == [
        f"threadloom: Invalid deployment profile {tmp_path / 'profile.yaml'}: compaction.treshold: unknown key"
    ]


def test_a_bad_value_names_its_key_and_what_is_wrong(tmp_path: Path) -> None:
    finished = start_server(tmp_path, BAD_VALUE, sys.executable, "-m", "threadloom.local_server")
    assert finished.returncode == 1
    assert finished.stderr.splitlines() == [
        f"threadloom: Invalid deployment profile {tmp_path / 'profile.yaml'}: "
        "limits.max_page_size: Input should be greater than 0"
    ]


def test_threadloom_serve_exits_the_same_way(tmp_path: Path) -> None:
    command = str(Path(sys.executable).parent / "threadloom")
    finished = start_server(tmp_path, BAD_KEY, command, "serve")
    assert finished.returncode == 1
    assert finished.stderr.strip().splitlines()[-1] == (
        f"threadloom: Invalid deployment profile {tmp_path / 'profile.yaml'}: compaction.treshold: unknown key"
    )


def test_an_unreadable_profile_is_one_line_too(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    environment = {**os.environ, "THREADLOOM_PROFILE": str(missing)}
    arguments = [sys.executable, "-m", "threadloom.local_server", "--port", str(free_port())]
    finished = run([*arguments, "--data-dir", str(tmp_path / "data")], environment)
    assert finished.returncode == 1
    assert finished.stderr.splitlines() == [
        f"threadloom: Cannot read deployment profile {missing}: [Errno 2] No such file or directory: '{missing}'"
    ]


LAMBDA_SCRIPT = """
import json, sys
sys.path[:0] = ["functions/api", "."]
from tests.support.api import FakeLambdaContext, gateway_event
import threadloom_api
for path in ("/sessions", "/health"):
    response = threadloom_api.lambda_handler(gateway_event("GET", path), FakeLambdaContext())
    print("RESPONSE " + json.dumps({"status": response["statusCode"], "body": json.loads(response["body"])}))
"""


def run_lambda(tmp_path: Path, profile: str | None) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Import the API function as Lambda's init does and call it twice: (its JSON log lines, its two answers)."""
    environment = {
        **os.environ,
        "THREADLOOM_SQLITE_PATH": str(tmp_path / "lambda.db"),
        "POWERTOOLS_SERVICE_NAME": "threadloom-api",
        "POWERTOOLS_METRICS_DISABLED": "1",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    environment.pop("THREADLOOM_PROFILE", None)
    if profile is not None:
        path = tmp_path / "profile.yaml"
        path.write_text(profile, encoding="utf-8")
        environment["THREADLOOM_PROFILE"] = str(path)
    finished = run([sys.executable, "-c", LAMBDA_SCRIPT], environment)
    assert finished.returncode == 0, finished.stderr
    logs, answers = [], []
    for line in finished.stdout.splitlines():
        if line.startswith("RESPONSE "):
            answers.append(json.loads(line.removeprefix("RESPONSE ")))
        elif line.startswith("{"):
            logs.append(json.loads(line))
    return logs, answers


def test_the_lambda_logs_the_problem_once_at_init_and_refuses_every_request(tmp_path: Path) -> None:
    logs, answers = run_lambda(tmp_path, BAD_KEY)
    problems = [line for line in logs if "problem" in line]
    assert len(problems) == 1  # at init, not once per invocation
    assert problems[0]["level"] == "ERROR"
    assert problems[0]["service"] == "threadloom-api"
    assert problems[0]["problem"] == (
        f"Invalid deployment profile {tmp_path / 'profile.yaml'}: compaction.treshold: unknown key"
    )
    assert [answer["status"] for answer in answers] == [500, 500]
    for answer in answers:
        assert answer["body"] == {
            "error": {
                "code": "invalid_profile",
                "message": "The service cannot answer: its deployment profile is invalid. "
                "The operator finds the file, the key and the problem in the function's log.",
            }
        }


def test_the_same_lambda_with_a_sound_profile_answers(tmp_path: Path) -> None:
    logs, answers = run_lambda(tmp_path, "name: fine\n")
    assert not [line for line in logs if "problem" in line]
    assert [answer["status"] for answer in answers] == [200, 200]


# The functions that answer no request: each fails its init after one log line, so nothing is consumed or swept.
WORKERS = {
    "threadloom-compaction": ("functions/compaction", "threadloom_compaction"),
    "threadloom-retention": ("functions/retention", "threadloom_retention"),
    "threadloom-idle-reflection": ("functions/idle_reflection", "threadloom_idle_reflection"),
    "threadloom-websocket": ("functions/websocket", "threadloom_websocket"),
}


def init_function(tmp_path: Path, service: str, profile: str) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    """Import one function's module in a fresh process, as Lambda's init does; (the process, its JSON log lines)."""
    folder, module = WORKERS[service]
    path = tmp_path / "profile.yaml"
    path.write_text(profile, encoding="utf-8")
    environment = {
        **os.environ,
        "THREADLOOM_PROFILE": str(path),
        "THREADLOOM_SQLITE_PATH": str(tmp_path / "lambda.db"),
        "POWERTOOLS_SERVICE_NAME": service,
        "POWERTOOLS_METRICS_DISABLED": "1",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    script = f"import sys; sys.path[:0] = [{folder!r}, '.']; import {module}"
    finished = run([sys.executable, "-c", script], environment)
    logs = [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]
    return finished, logs


@pytest.mark.parametrize("service", list(WORKERS))
def test_a_worker_function_logs_the_problem_once_and_fails_its_init(tmp_path: Path, service: str) -> None:
    finished, logs = init_function(tmp_path, service, BAD_KEY)
    assert finished.returncode != 0  # Lambda reports an init error and runs no invocation
    (problem,) = [line for line in logs if "problem" in line]
    assert problem["level"] == "ERROR" and problem["service"] == service
    assert problem["message"] == "Invalid deployment profile; the function fails its init until it is fixed"
    assert problem["problem"] == (
        f"Invalid deployment profile {tmp_path / 'profile.yaml'}: compaction.treshold: unknown key"
    )
    assert "compaction.treshold: unknown key" in finished.stderr.splitlines()[-1]  # the init error Lambda records


@pytest.mark.parametrize("service", list(WORKERS))
def test_the_same_worker_with_a_sound_profile_starts(tmp_path: Path, service: str) -> None:
    finished, logs = init_function(tmp_path, service, "name: fine\n")
    assert finished.returncode == 0, finished.stderr
    assert not [line for line in logs if "problem" in line]
