"""The ``threadloom`` operator command (Typer + Rich): sessions, export/import, retention, erasure, schema.

``main()`` is the console-script entry point. Typer reports usage errors itself (exit code 2);
library errors become the documented exit codes (``threadloom.cli.output.ExitCode``,
docs/cli.md) with a one-line message, never a traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def version() -> str:
    """The installed distribution's version (one source: pyproject.toml, read from the package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version("threadloom")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    arguments = list(argv) if argv is not None else sys.argv[1:]
    if arguments == ["--version"]:  # answered without the CLI's dependencies, so the base install has it too
        print(f"threadloom {version()}")
        return 0
    from threadloom.extras import missing_extra_message

    missing = missing_extra_message("the threadloom command", "local", "typer")
    if missing is not None:
        print(missing, file=sys.stderr)
        return 1
    from threadloom.cli.app import app
    from threadloom.cli.output import ExitCode, exit_code_for
    from threadloom.errors import ThreadloomError

    arguments = global_options_first(arguments)
    try:
        app(args=arguments, prog_name="threadloom")
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return int(ExitCode.ERROR)
    except ThreadloomError as error:
        print(f"threadloom: {error}", file=sys.stderr)
        return int(exit_code_for(error))
    except KeyboardInterrupt:
        print("threadloom: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    return 0


GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--database", "-d", "--namespace", "-n"})
GLOBAL_FLAGS = frozenset({"--json", "--create"})


def global_options_first(arguments: list[str]) -> list[str]:
    """The arguments with global options written after the command moved before it.

    Click only reads ``--database``, ``--namespace``, ``--json`` and ``--create`` before the command,
    so ``threadloom import demo.jsonl --database x.db`` failed with "No such option"; both places work.
    Nothing after ``--`` moves.
    """
    index = 0
    while index < len(arguments):  # past the options already in front, to the command
        argument = arguments[index]
        if argument in GLOBAL_OPTIONS_WITH_VALUE:
            index += 2
        elif argument in GLOBAL_FLAGS or argument.split("=", 1)[0] in GLOBAL_OPTIONS_WITH_VALUE:
            index += 1
        else:
            break
    front, rest, moved = arguments[:index], [], []
    position = index
    while position < len(arguments):
        argument = arguments[position]
        if argument == "--":
            rest.extend(arguments[position:])
            break
        if argument in GLOBAL_OPTIONS_WITH_VALUE and position + 1 < len(arguments):
            moved.extend(arguments[position : position + 2])
            position += 2
            continue
        if argument in GLOBAL_FLAGS or argument.split("=", 1)[0] in GLOBAL_OPTIONS_WITH_VALUE:
            moved.append(argument)
        else:
            rest.append(argument)
        position += 1
    return [*front, *moved, *rest]


__all__ = ["global_options_first", "main", "version"]
