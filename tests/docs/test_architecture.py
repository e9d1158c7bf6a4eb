"""docs/architecture.md lists the same layers, in the same order, as the contract `lint-imports` enforces."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contract_layers(config_text: str) -> list[list[str]]:
    """The layers contract of an import-linter config: one list of sibling modules per layer, top first."""
    config = configparser.ConfigParser()
    config.read_string(config_text)
    lines = config["importlinter:contract:layers"]["layers"].strip().splitlines()
    return [sorted(name.strip() for name in line.split("|")) for line in lines if line.strip()]


def documented_layers(page: str) -> list[list[str]]:
    """The numbered list between the page's layer markers: the modules in backticks of each item's first line."""
    section = page.split("<!-- layers: top to bottom -->", 1)[1].split("<!-- end of layers -->", 1)[0]
    items = re.findall(r"^\d+\. (.*)$", section, flags=re.MULTILINE)
    return [sorted(re.findall(r"`(threadloom[\w.]*)`", item.split(":", 1)[0])) for item in items]


def test_the_architecture_page_lists_the_enforced_layers_in_order() -> None:
    enforced = contract_layers((REPOSITORY / ".importlinter").read_text())
    documented = documented_layers((REPOSITORY / "docs" / "architecture.md").read_text())
    assert len(enforced) >= 10
    assert documented == enforced


def test_a_page_out_of_step_with_the_contract_is_caught() -> None:
    # Control: swap two layers of the page and the comparison above must fail.
    page = (REPOSITORY / "docs" / "architecture.md").read_text()
    swapped = page.replace("1. `threadloom.cli`", "1. `threadloom.PLACEHOLDER`").replace(
        "2. `threadloom.local_server`", "2. `threadloom.cli`"
    )
    swapped = swapped.replace("1. `threadloom.PLACEHOLDER`", "1. `threadloom.local_server`")
    enforced = contract_layers((REPOSITORY / ".importlinter").read_text())
    assert documented_layers(swapped) != enforced


def test_every_module_of_the_library_is_in_a_layer() -> None:
    package = REPOSITORY / "layers" / "threadloom" / "threadloom"
    top_level = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    top_level |= {path.name for path in package.iterdir() if (path / "__init__.py").exists()}
    layered = {
        name.removeprefix("threadloom.")
        for layer in contract_layers((REPOSITORY / ".importlinter").read_text())
        for name in layer
    }
    assert top_level - layered == set(), "add these modules to a layer in .importlinter and docs/architecture.md"


def test_the_linter_refuses_an_import_from_a_lower_layer_to_a_higher_one(tmp_path: Path) -> None:
    # Control for the contract itself: a copy of the package where core imports the API must break it.
    import shutil

    copy = tmp_path / "threadloom"
    shutil.copytree(REPOSITORY / "layers" / "threadloom" / "threadloom", copy)
    (copy / "core" / "reaching_up.py").write_text("from threadloom.api import paging  # noqa: F401\n")
    shutil.copy(REPOSITORY / ".importlinter", tmp_path / ".importlinter")
    broken = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tmp_path / ".importlinter")],
        check=False,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert broken.returncode != 0
    assert "threadloom.core.reaching_up -> threadloom.api" in broken.stdout
    kept = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(REPOSITORY / ".importlinter")],
        check=False,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert kept.returncode == 0, kept.stdout


def long_modules_without_a_reason(root: Path, limit: int = 400) -> list[str]:
    """Library and handler modules over ``limit`` lines whose docstring does not say why they are that long."""
    import ast

    found = []
    for path in sorted([*root.joinpath("layers").rglob("*.py"), *root.joinpath("functions").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= limit:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if f"Over {limit} lines because" not in docstring:
            found.append(str(path.relative_to(root)))
    return found


def test_a_module_over_400_lines_says_why_in_its_docstring() -> None:
    assert long_modules_without_a_reason(REPOSITORY) == []


def test_a_long_module_without_a_reason_is_caught(tmp_path: Path) -> None:
    # Control: a long module with a plain docstring is reported, the same module with a reason is not.
    module = tmp_path / "layers" / "long.py"
    module.parent.mkdir(parents=True)
    (tmp_path / "functions").mkdir()
    body = "\n".join(f"value_{index} = {index}" for index in range(450))
    module.write_text(f'"""A long module."""\n{body}\n')
    assert long_modules_without_a_reason(tmp_path) == ["layers/long.py"]
    module.write_text(f'"""A long module.\n\nOver 400 lines because it is a test.\n"""\n{body}\n')
    assert long_modules_without_a_reason(tmp_path) == []
