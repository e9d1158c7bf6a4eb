"""The SAM template, the app's routes and the exported OpenAPI document must agree (and cfn-lint must pass)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short tags (``!Ref``, ``!Sub``...) as ``{"Fn::X": value}`` instead of failing."""


def _construct(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


CfnLoader.add_multi_constructor("!", _construct)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def test_cfn_lint_with_serverless_rules_passes() -> None:
    cfn_lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent)) or shutil.which("cfn-lint")
    assert cfn_lint, "cfn-lint is not installed"
    result = subprocess.run([cfn_lint, "template.yaml"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_ignored_rule_has_a_reason() -> None:
    lines = (ROOT / ".cfnlintrc").read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^\s*-\s*[EWI]S?\d{4}", line):
            assert index > 0 and lines[index - 1].strip().startswith("#"), line


def test_every_handler_file_exists(template: dict[str, Any]) -> None:
    for name, function in _functions(template).items():
        module = function["Properties"]["Handler"].rsplit(".", 1)[0]
        code = ROOT / function["Properties"]["CodeUri"]
        assert (code / f"{module}.py").is_file(), f"{name}: {code}/{module}.py"
        assert (code / "requirements.txt").is_file(), name


def test_template_routes_match_the_app(template: dict[str, Any]) -> None:
    from threadloom_api import app

    paths = template["Resources"]["HttpApi"]["Properties"]["DefinitionBody"]["paths"]
    in_template = {(method.upper(), path) for path, methods in paths.items() for method in methods}
    in_app = {
        (route.method, re.sub(r"<(\w+)>", r"{\1}", route.path)) for route in app._static_routes + app._dynamic_routes
    }
    # /mcp is served by the MCP server (threadloom.mcp.http), not by a route of the Powertools app
    mcp_routes = {(method, path) for method, path in in_template if path == "/mcp"}
    assert mcp_routes, "the template serves no /mcp route"
    assert in_template - mcp_routes == in_app
    assert all("proxy+" not in path for _, path in in_template)


def test_compaction_queue_settings(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    function = resources["CompactionFunction"]["Properties"]
    (event,) = function["Events"].values()
    assert event["Type"] == "SQS"
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert event["Properties"]["ScalingConfig"]["MaximumConcurrency"] >= 2
    assert event["Properties"]["BatchSize"] <= 10
    queue = resources[event["Properties"]["Queue"]["Fn::GetAtt"][0]]["Properties"]
    assert queue["FifoQueue"] is True
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]
    dlq = resources[queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]]["Properties"]
    assert dlq["FifoQueue"] is True


def test_layer_is_built_by_sam_with_only_its_own_dependencies(template: dict[str, Any]) -> None:
    layer = template["Resources"]["ThreadloomLayer"]
    assert layer["Properties"]["ContentUri"] == "layers/threadloom/"
    assert layer["Metadata"]["BuildMethod"] == "makefile"  # pip installs the wheel, no extra, then compiles (.pyc)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {re.split(r"[<>=\[ ]", line)[0].lower() for line in pyproject["project"]["dependencies"]}
    assert packages == {"pg8000", "pyyaml"}


def test_the_powertools_layer_is_the_release_the_tests_run(template: dict[str, Any]) -> None:
    from importlib.metadata import version

    condition, local_layer, deployed_layer = template["Globals"]["Function"]["Layers"][0]["Fn::If"]
    assert (condition, local_layer) == ("LocalPowertoolsLayer", {"Ref": "PowertoolsLayerArn"})  # sam local only
    pinned = version("aws-lambda-powertools")
    assert deployed_layer == f"{{{{resolve:ssm:/aws/service/powertools/python/arm64/python3.13/{pinned}}}}}"
    assert template["Globals"]["Function"]["Runtime"] == "python3.13"


def test_tables_and_bucket_are_locked_down(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    for name in ("PromptCacheTable", "IdempotencyTable"):
        table = resources[name]["Properties"]
        assert table["BillingMode"] == "PAY_PER_REQUEST" and table["TimeToLiveSpecification"]["Enabled"] is True
    bucket = resources["SkillsBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["BucketEncryption"]


def test_exported_openapi_is_up_to_date() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import export_openapi
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    committed = (ROOT / "openapi.json").read_text(encoding="utf-8")
    assert committed == export_openapi.render(), "run: .venv/bin/python scripts/export_openapi.py"
