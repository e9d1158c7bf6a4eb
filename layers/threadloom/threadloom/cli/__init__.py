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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from threadloom.cli.app import app
    from threadloom.cli.output import ExitCode, exit_code_for
    from threadloom.errors import ThreadloomError

    try:
        app(args=list(argv) if argv is not None else None, prog_name="threadloom")
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


__all__ = ["main"]
