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


__all__ = ["main", "version"]
