"""The MCP function as Lambda runs it: its own package (the pinned SDK), the two layers in /opt, boto3 from the runtime.

``functions/mcp/Makefile`` (what ``sam build`` runs) builds the function here for this machine instead of arm64:
the same pinned requirements, binary wheels only. The Threadloom layer is built from the wheel by its own Makefile,
and the Powertools layer is stood in for by its pinned release with an older Pydantic than mcp accepts, merged into
one ``opt/python`` as Lambda extracts layers. A fresh interpreter without site-packages gets Lambda's search path
(the function, then /opt/python, then the runtime's packages) and answers API Gateway v2 ``/mcp`` events.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.package.test_layer import default_powertools_version
from tests.support.api import gateway_event

pytestmark = [pytest.mark.package, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = ROOT / "functions" / "mcp"
HOST_FLAGS = "--only-binary=:all:"  # this machine's platform, binary wheels only, as the arm64 build
OLDER_LAYER_PYDANTIC = "pydantic==2.11.7"  # below mcp's floor (2.12): the function's copy must be the one imported
PIP_SECONDS = 600
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def pins() -> dict[str, str]:
    lines = (FUNCTION / "requirements.txt").read_text(encoding="utf-8").splitlines()
    found = [re.fullmatch(r"([a-z0-9-]+)==(\S+)", line) for line in lines if line and not line.startswith("#")]
    assert all(found), "requirements.txt: one exact name==version a line"
    return {match.group(1): match.group(2) for match in found if match}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def make(target: str, folder: Path, artifacts: Path, *options: str) -> None:
    artifacts.mkdir(parents=True)
    command = ["make", target, f"ARTIFACTS_DIR={artifacts}", f"PYTHON={sys.executable}", "STRIP=", *options]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False, timeout=PIP_SECONDS)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def pip_target(target: Path, *requirements: str) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", HOST_FLAGS]
    command += ["--target", str(target), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=PIP_SECONDS)
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.fixture(scope="module")
def lambda_folders(tmp_path_factory: Any) -> dict[str, Path]:
    """/var/task, /opt/python and the runtime's site-packages, built as sam build and Lambda arrange them."""
    from tests.package.wheel import build_once, shared_build_folder

    base = tmp_path_factory.mktemp("mcp-function")
    scratch, task = base / "scratch", base / "task"
    shutil.copytree(FUNCTION, scratch)
    report = base / "function-report.json"
    make("build-McpFunction", scratch, task, f"PIP_TARGET_FLAGS={HOST_FLAGS}", f"PIP_OPTIONS=--report {report}")
    wheel = build_once(shared_build_folder(tmp_path_factory)).wheel
    layer_scratch, layer = base / "layer-scratch", base / "threadloom-layer"
    shutil.copytree(ROOT / "layers" / "threadloom", layer_scratch, ignore=shutil.ignore_patterns("dist"))
    make("build-ThreadloomLayer", layer_scratch, layer, f"WHEEL={wheel}", f"PIP_TARGET_FLAGS={HOST_FLAGS}")
    opt = base / "opt" / "python"
    # The Powertools layer first, then Threadloom's, into one folder, as Lambda extracts the template's Layers
    pip_target(opt, f"aws-lambda-powertools[tracer]=={default_powertools_version()}", OLDER_LAYER_PYDANTIC)
    shutil.copytree(layer / "python", opt, dirs_exist_ok=True)
    runtime = base / "runtime"
    pip_target(runtime, f"boto3=={version('boto3')}")
    return {"task": task, "opt": opt, "runtime": runtime, "report": report, "base": base}


def run_in_lambda(folders: dict[str, Path], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Import the handler as Lambda would and answer ``events``; what it answered and where modules came from."""
    (folders["base"] / "events.json").write_text(json.dumps(events), encoding="utf-8")
    probe = f"""
import json, sys
sys.path[:0] = [{str(folders["task"])!r}, {str(folders["opt"])!r}, {str(folders["runtime"])!r}]
import threadloom_mcp, pydantic, mcp, threadloom, aws_lambda_powertools, aws_xray_sdk, boto3
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import APIGatewayProxyEventV2Model

class Context:
    function_name = "threadloom-mcp"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-mcp"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    def get_remaining_time_in_millis(self):
        return 10_000

events = json.load(open({str(folders["base"] / "events.json")!r}))
parsed = parse(event=events[0], model=APIGatewayProxyEventV2Model)  # Powertools' Pydantic models, on ours
answers = [threadloom_mcp.lambda_handler(event, Context()) for event in events]
print(json.dumps({{
    "answers": answers,
    "parsed_path": parsed.rawPath,
    "pydantic": [pydantic.VERSION, pydantic.__file__],
    "files": {{m.__name__: m.__file__ for m in (mcp, threadloom, aws_lambda_powertools, aws_xray_sdk, boto3)}},
}}))
"""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "LAMBDA_TASK_ROOT": str(folders["task"]),  # Powertools' Tracer is on, as in Lambda
        "AWS_LAMBDA_FUNCTION_NAME": "",  # SQLite below is refused on a real Lambda
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "POWERTOOLS_SERVICE_NAME": "threadloom-mcp",
        "POWERTOOLS_METRICS_NAMESPACE": "ThreadloomTests",
        "THREADLOOM_BACKEND": "sqlite",
        "THREADLOOM_SQLITE_PATH": str(folders["base"] / "threadloom.db"),
    }
    command = [sys.executable, "-I", "-S", "-c", probe]
    result = subprocess.run(command, env=environment, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr[-6000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def rpc(method: str, number: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params or {}}
    return gateway_event("POST", "/mcp", raw_body=json.dumps(message).encode(), headers=MCP_HEADERS)


def test_the_built_function_answers_initialize_and_tools_list_with_the_layers_as_lambda_arranges_them(
    lambda_folders: dict[str, Path],
) -> None:
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}
    found = run_in_lambda(lambda_folders, [rpc("initialize", 1, initialize), rpc("tools/list", 2)])
    first, second = found["answers"]
    assert first["statusCode"] == 200, first
    assert json.loads(first["body"])["result"]["serverInfo"]["name"] == "threadloom"
    assert second["statusCode"] == 200, second
    names = [tool["name"] for tool in json.loads(second["body"])["result"]["tools"]]
    assert names[:7] == [
        "list_sessions",
        "create_session",
        "append_message",
        "read_history",
        "search",
        "list_knowledge",
        "forget_knowledge",
    ]
    assert {"set_context", "search_context", "session_search"} <= set(names)
    files = {name: Path(path) for name, path in found["files"].items()}
    task, opt, runtime = lambda_folders["task"], lambda_folders["opt"], lambda_folders["runtime"]
    assert files["mcp"].is_relative_to(task)  # the SDK ships with the function
    assert files["threadloom"].is_relative_to(opt) and files["aws_lambda_powertools"].is_relative_to(opt)
    assert files["aws_xray_sdk"].is_relative_to(opt) and files["boto3"].is_relative_to(runtime)


def test_the_functions_pydantic_shadows_the_layers_and_powertools_works_with_it(
    lambda_folders: dict[str, Path],
) -> None:
    found = run_in_lambda(lambda_folders, [rpc("ping", 1)])
    pydantic_version, pydantic_file = found["pydantic"]
    assert pydantic_version == pins()["pydantic"]
    assert Path(pydantic_file).is_relative_to(lambda_folders["task"])
    assert (lambda_folders["opt"] / "pydantic").is_dir()  # the layer's older copy is there, and not imported
    assert found["parsed_path"] == "/mcp"  # Powertools' parser validated the event with the function's Pydantic
    assert found["answers"][0]["statusCode"] == 200


def test_the_requirements_are_a_closed_set_at_the_versions_the_tests_run(lambda_folders: dict[str, Path]) -> None:
    report = json.loads(lambda_folders["report"].read_text(encoding="utf-8"))
    installed = {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}
    assert installed == pins(), "requirements.txt must list every package pip installs, each pinned"
    assert all(not item["download_info"]["url"].endswith(".tar.gz") for item in report["install"])  # wheels only
    drift = {name: (pinned, version(name)) for name, pinned in pins().items() if version(name) != pinned}
    assert drift == {}, "pin the dev environment's versions (pip freeze) in functions/mcp/requirements.txt"


def test_the_function_ships_every_module_compiled_and_no_build_files(lambda_folders: dict[str, Path]) -> None:
    from tests.unit.deploy.test_lambda_packaging import assert_every_module_ships_a_valid_pyc

    task = lambda_folders["task"]
    assert (task / "threadloom_mcp.py").is_file()
    assert not (task / "Makefile").exists() and not (task / "requirements.txt").exists()
    assert not (task / "bin").exists()  # uvicorn's and others' console scripts are no use on Lambda
    assert not (task / "threadloom").exists()  # Threadloom comes from the layer, one release for every function
    assert assert_every_module_ships_a_valid_pyc(task) > 500
