"""``threadloom --version``, and a missing extra answered with one line that names the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from threadloom import cli, local_server
from threadloom.extras import EXTRA_PACKAGES, MissingExtraError, missing_extra_message, require_extra

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` look uninstalled to the extras check, as in an install without the extra."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name in modules else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_version_is_the_one_in_pyproject(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"threadloom {PYPROJECT['project']['version']}\n"
    # Also after other options, through Typer, and listed in the help
    assert cli.main(["--namespace", "n", "--version"]) == 0
    assert capsys.readouterr().out == f"threadloom {PYPROJECT['project']['version']}\n"
    assert cli.main(["--help"]) == 0
    assert "--version" in capsys.readouterr().out


def test_the_installed_command_prints_its_version() -> None:
    executable = Path(sys.executable).with_name("threadloom")
    done = subprocess.run([str(executable), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"threadloom {PYPROJECT['project']['version']}\n", "")


def test_the_version_needs_no_optional_package(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    without(monkeypatch, "typer")
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("threadloom ")


def test_the_command_line_without_typer_names_the_local_extra(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    without(monkeypatch, "typer")
    assert cli.main(["sessions", "list"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "threadloom: the threadloom command needs typer: pip install 'threadloom[local]'\n"


def test_the_local_server_without_its_packages_names_the_local_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, tmp_path: Path
) -> None:
    without(monkeypatch, "aiohttp", "aws_lambda_powertools")
    with pytest.raises(SystemExit) as stopped:
        local_server.main(["--port", "0", "--data-dir", str(tmp_path / "data")])
    assert stopped.value.code == 1
    assert capsys.readouterr().err == (
        "threadloom: the local server needs aiohttp, aws-lambda-powertools: pip install 'threadloom[local]'\n"
    )
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_library_feature_raises_an_import_error_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_extra_message("the client", "client") is None  # the dev environment has them all
    without(monkeypatch, "httpx")
    with pytest.raises(MissingExtraError) as raised:
        require_extra("the client", "client")
    assert str(raised.value) == "threadloom: the client needs httpx: pip install 'threadloom[client]'"
    assert issubclass(MissingExtraError, ImportError)  # `except ImportError` still catches it


def test_every_package_the_checks_name_is_declared_by_its_extra() -> None:
    """The messages cannot drift from pyproject: each named package is in the extra they tell you to install."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    for extra, packages in EXTRA_PACKAGES.items():
        declared = {re.split(r"[\[<>=~!; ]", requirement, maxsplit=1)[0] for requirement in extras[extra]}
        assert {package for _, package in packages} <= declared, extra


@pytest.mark.parametrize(
    ("module", "framework", "line"),
    [
        (
            "threadloom.integrations.openai_agents",
            "agents",
            "threadloom: the OpenAI Agents SDK session needs openai-agents: pip install 'threadloom[openai-agents]'",
        ),
        (
            "threadloom.integrations.strands",
            "strands",
            "threadloom: the Strands session repository needs strands-agents: pip install 'threadloom[strands]'",
        ),
        (
            "threadloom.integrations.langchain",
            "langchain_core",
            "threadloom: the LangChain chat history needs langchain-core: pip install 'threadloom[langchain]'",
        ),
        ("threadloom.client", "httpx", "threadloom: threadloom.client needs httpx: pip install 'threadloom[client]'"),
    ],
)
def test_importing_an_integration_without_its_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, line: str
) -> None:
    for loaded in [name for name in sys.modules if name == module or name.startswith(f"{module}.")]:
        monkeypatch.delitem(sys.modules, loaded)  # imported afresh here, put back afterwards
    without(monkeypatch, framework)
    with pytest.raises(MissingExtraError) as raised:
        importlib.import_module(module)
    assert str(raised.value) == line
