"""What ``sam build`` ships: the layer and the API and compaction functions with .pyc compiled for python3.13.

Lambda's code folders are read-only, so a module without a valid .pyc is compiled again on every cold start.
Each build target runs here as ``sam build`` runs it (``make build-<LogicalId>`` in a copy of the folder, with
``ARTIFACTS_DIR``); the layer installs the wheel tests/package builds, without its dependencies (no network in tests).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BUILT = {
    "ThreadloomLayer": "layers/threadloom",
    "ApiFunction": "functions/api",
    "CompactionFunction": "functions/compaction",
}
CHECKED_HASH = 0b11  # PEP 552 flags: hash-based, and checked against the source on import

needs_the_build_tools = pytest.mark.skipif(
    shutil.which("make") is None or sys.version_info[:2] != (3, 13),
    reason="runs the Makefiles as sam build does: needs make and Lambda's python3.13",
)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    from tests.contract.test_app_contract import CfnLoader

    return yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)


def build(logical_id: str, tmp_path: Path, *options: str) -> Path:
    """Run the resource's Makefile target in a copy of its folder, as sam build does; return ARTIFACTS_DIR."""
    scratch, artifacts = tmp_path / "scratch", tmp_path / "artifacts"
    shutil.copytree(ROOT / BUILT[logical_id], scratch, ignore=shutil.ignore_patterns("dist"))
    artifacts.mkdir()
    command = ["make", f"build-{logical_id}", f"ARTIFACTS_DIR={artifacts}", f"PYTHON={sys.executable}", *options]
    result = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return artifacts


def assert_every_module_ships_a_valid_pyc(folder: Path) -> int:
    sources = sorted(folder.rglob("*.py"))
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.name.endswith(".cpython-313.pyc"), cached
        header = cached.read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source
        assert int.from_bytes(header[4:8], "little") == CHECKED_HASH, source  # not the timestamp zip loses
        assert header[8:16] == importlib.util.source_hash(source.read_bytes()), source
    pycs = list(folder.rglob("*.pyc"))
    assert len(pycs) == len(sources)  # no stale cache copied from a working tree
    return len(sources)


def test_the_layer_and_the_cold_start_functions_are_built_by_their_makefiles(template: dict[str, Any]) -> None:
    for logical_id, folder in BUILT.items():
        resource = template["Resources"][logical_id]
        assert resource["Metadata"]["BuildMethod"] == "makefile", logical_id
        makefile = (ROOT / folder / "Makefile").read_text(encoding="utf-8")
        assert f"build-{logical_id}:" in makefile
        assert "--invalidation-mode checked-hash" in makefile
    assert template["Resources"]["ThreadloomLayer"]["Metadata"]["BuildArchitecture"] == "arm64"
    layer = (ROOT / BUILT["ThreadloomLayer"] / "Makefile").read_text(encoding="utf-8")
    assert "WHEEL ?= $(firstword $(wildcard dist/threadloom-*-py3-none-any.whl))" in layer  # make sam-build's
    assert "manylinux2014_aarch64" in layer and "--python-version 3.13" in layer
    assert "--strip-debug" in layer  # binary wheels ship their debug info; Lambda never reads it


@needs_the_build_tools
def test_the_layer_ships_the_wheel_compiled_under_python(tmp_path: Path, tmp_path_factory: Any) -> None:
    from tests.package.wheel import build_once, shared_build_folder

    wheel = build_once(shared_build_folder(tmp_path_factory)).wheel
    # --no-deps: no network in tests (the dependencies' arm64 wheels come from PyPI in a real build)
    artifacts = build("ThreadloomLayer", tmp_path, f"WHEEL={wheel}", "PIP_OPTIONS=--no-deps")
    python = artifacts / "python"
    assert (python / "threadloom/__init__.py").is_file()
    assert (python / "threadloom/api/routes/app.py").is_file()  # the whole package, from the wheel
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.startswith("threadloom/")}
    in_layer = {path.relative_to(python).as_posix() for path in (python / "threadloom").rglob("*") if path.is_file()}
    assert shipped == {name for name in in_layer if not name.endswith(".pyc")}
    assert [path.name for path in python.glob("*.dist-info")] == [wheel.name.split("-py3")[0] + ".dist-info"]
    assert not (python / "bin").exists()  # the console script is no use in a layer
    assert assert_every_module_ships_a_valid_pyc(python) > 100


@needs_the_build_tools
def test_the_layer_build_says_how_to_get_the_wheel(tmp_path: Path) -> None:
    scratch, artifacts = tmp_path / "scratch", tmp_path / "artifacts"
    shutil.copytree(ROOT / BUILT["ThreadloomLayer"], scratch, ignore=shutil.ignore_patterns("dist"))
    command = ["make", "build-ThreadloomLayer", f"ARTIFACTS_DIR={artifacts}", f"PYTHON={sys.executable}"]
    result = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "no threadloom wheel in layers/threadloom/dist: run make sam-build, which builds it first" in result.stdout


@needs_the_build_tools
@pytest.mark.parametrize(
    ("logical_id", "handler"), [("ApiFunction", "threadloom_api"), ("CompactionFunction", "threadloom_compaction")]
)
def test_a_function_ships_its_code_compiled_and_no_makefile(logical_id: str, handler: str, tmp_path: Path) -> None:
    artifacts = build(logical_id, tmp_path)
    assert (artifacts / f"{handler}.py").is_file()
    assert not (artifacts / "Makefile").exists()
    assert_every_module_ships_a_valid_pyc(artifacts)
    # The handler imports from the shipped folder, using the shipped .pyc (nothing new is written)
    before = sorted(artifacts.rglob("*"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(artifacts), str(ROOT / "layers/threadloom")])}
    probe = f"import {handler}, sys; print(sys.modules['{handler}'].__cached__)"
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_file()
    assert sorted(artifacts.rglob("*")) == before
