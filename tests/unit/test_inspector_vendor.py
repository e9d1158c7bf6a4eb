"""The inspector's vendored Markdown renderer and sanitizer: packaged, versioned, licensed, served as files."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

from threadloom.inspector import read_asset

ROOT = Path(__file__).resolve().parents[2]
VENDORED = {"vendor-marked.js": ("marked", "18.3.0"), "vendor-purify.js": ("DOMPurify", "3.5.0")}


def test_each_vendored_file_keeps_its_licence_header_and_is_listed_with_its_version() -> None:
    folder = resources.files("threadloom.inspector")
    notes = folder.joinpath("VENDOR.md").read_text(encoding="utf-8")
    for name, (package, version) in VENDORED.items():
        asset = read_asset(name)
        assert asset is not None and asset.content_type.startswith("text/javascript")
        header = asset.body[:400]
        assert package in header and version in header and "license" in header.lower()
        assert "sourceMappingURL" not in asset.body  # no request for a map the package does not ship
        row = next(line for line in notes.splitlines() if f"`{name}`" in line)
        assert version in row and re.search(r"sha256 `[0-9a-f]{64}`", row)
    for licence in ("LICENSE-marked.txt", "LICENSE-dompurify.txt"):
        assert folder.joinpath(licence).is_file()


def test_the_package_data_ships_the_notes_and_licences() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["threadloom"]
    assert {"inspector/**/*.js", "inspector/**/*.md", "inspector/**/*.txt"} <= set(patterns)
