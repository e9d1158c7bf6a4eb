"""Every command and snippet in README.md and docs/*.md gives the output the document shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docs.runner import REPOSITORY, Block, Normaliser, commands_of, matches, read_blocks, run_document

if TYPE_CHECKING:
    from pathlib import Path

DOCUMENTS = sorted([REPOSITORY / "README.md", *(REPOSITORY / "docs").glob("*.md")])


@pytest.mark.e2e
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPOSITORY)))
def test_document_runs_as_shown(document: Path, tmp_path: Path) -> None:
    problems = run_document(document, tmp_path)
    assert not problems, "\n\n".join(problems)


def test_every_document_is_covered() -> None:
    """A new document under docs/ is picked up without registering it anywhere."""
    names = {path.name for path in DOCUMENTS}
    assert {"README.md", "http-api.md", "postgres.md"} <= names


def test_console_blocks_split_into_commands_and_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ echo a \\\n  b\na b\n$ true\n```\n```bash illustrative\nsam deploy\n```\n")
    console, illustrative = read_blocks(page)
    commands = commands_of(console)
    assert [(c.text, c.shown) for c in commands] == [("echo a \\\n  b", ["a b"]), ("true", [])]
    assert illustrative.language == "bash" and "illustrative" in illustrative.flags


def test_normalising_and_ellipsis() -> None:
    normalise = Normaliser({"/x/tmp": "/tmp"})
    actual = normalise(
        '{"id":"55aa8fcf-944d-40bc-8643-c2a05cbb1229","at":"2026-12-02T21:16:30.594Z"} http://localhost:41234 /x/tmp/a'
    )
    assert actual == ['{"id":"<uuid>","at":"<time>"} http://localhost:<port> /tmp/a']
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["a"], ["a", "extra"])


def test_a_wrong_output_and_an_unmarked_shell_block_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ echo hello\ngoodbye\n```\n")
    problems = run_document_at(page, tmp_path)
    assert len(problems) == 1 and "hello" in problems[0] and "goodbye" in problems[0]
    page.write_text("```bash\nrm -rf /\n```\n")
    problems = run_document_at(page, tmp_path / "second")
    assert problems == [
        f"{Block(page, 1, 'bash', frozenset(), '').where}: a ```bash block must be ```console (run) or illustrative"
    ]


def test_state_carries_between_blocks_and_python_output_is_checked(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ GREETING=hi\n```\ntext\n```console\n$ echo $GREETING > /tmp/g; cat /tmp/g\nhi\n```\n"
        "```python\nprint(2 + 2)\n```\n```output\n4\n```\n"
    )
    assert run_document_at(page, tmp_path) == []
    page.write_text("```python\nprint(5)\n```\n```output\n4\n```\n")
    (tmp_path / "second").mkdir()
    assert "printed" in run_document_at(page, tmp_path / "second")[0]


def run_document_at(page: Path, workspace: Path) -> list[str]:
    workspace.mkdir(exist_ok=True)
    return run_document(page, workspace / "run")
