"""What ``[aws]`` means on Lambda: the Threadloom layer installs the wheel without it, and each package it adds comes
from somewhere else there (layers/threadloom/Makefile says why); these checks keep that mapping true."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
TEMPLATE = (ROOT / "template.yaml").read_text(encoding="utf-8")


def name_of(requirement: str) -> str:
    return re.split(r"[\[<>=~!; ]", requirement, maxsplit=1)[0].lower()


def test_every_package_aws_adds_is_provided_on_lambda_by_the_runtime_a_layer_or_a_function() -> None:
    aws = {name_of(requirement): requirement for requirement in PYPROJECT["project"]["optional-dependencies"]["aws"]}
    assert set(aws) == {"boto3", "aws-lambda-powertools", "pydantic", "pyjwt"}, "a new [aws] package: say where from"
    # boto3: in Lambda's python3.13 runtime
    assert "Runtime: python3.13" in TEMPLATE
    # Powertools (with the X-Ray SDK) and Pydantic: the public Powertools layer, at the release the tests run
    release = default_powertools_version()
    assert f"{{{{resolve:ssm:/aws/service/powertools/python/arm64/python3.13/{release}}}}}" in TEMPLATE
    pinned = [item for item in PYPROJECT["project"]["optional-dependencies"]["dev"] if item.startswith("aws-lambda")]
    assert pinned == [f"aws-lambda-powertools[tracer]=={default_powertools_version()}"]
    # PyJWT: only the functions that check tokens ship it, at the [aws] extra's range
    shipping = [
        path.parent.name
        for path in sorted((ROOT / "functions").glob("*/requirements.txt"))
        if aws["pyjwt"] in path.read_text(encoding="utf-8").splitlines()
    ]
    assert "websocket_authorizer" in shipping


def test_the_layer_installs_the_wheel_with_no_extra() -> None:
    makefile = (ROOT / "layers" / "threadloom" / "Makefile").read_text(encoding="utf-8")
    assert '--target "$(ARTIFACTS_DIR)/python" "$(WHEEL)"\n' in makefile  # the wheel alone, no [extra]
    assert not (ROOT / "layers" / "threadloom" / "requirements.txt").exists()  # one list: pyproject's dependencies


def default_powertools_version() -> str:
    """The Powertools release the template's Globals name in the public layer's SSM parameter."""
    found = re.search(r"resolve:ssm:/aws/service/powertools/python/arm64/python3\.13/(\d+\.\d+\.\d+)\}\}", TEMPLATE)
    assert found is not None, "template.yaml: the Powertools layer names its release"
    return found.group(1)
