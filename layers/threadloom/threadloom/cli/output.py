"""How the command reports: exit codes, Rich tables for people, ``--json`` for scripts, progress on stderr."""

from __future__ import annotations

import enum
import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from threadloom.errors import ConflictError, NotFoundError, QuotaExceededError, StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.table import Table


PIPE_WIDTH = 120


class ExitCode(enum.IntEnum):
    """What a non-zero exit means; scripts can branch on it."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    INVALID_INPUT = 5
    UNAVAILABLE = 6
    INTERRUPTED = 130


def plural(count: int, noun: str, many: str | None = None) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {many or noun + 's'}"


def exit_code_for(error: Exception) -> ExitCode:
    if isinstance(error, NotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(error, (ConflictError, QuotaExceededError)):  # a quota is a conflict with what is stored (HTTP 409)
        return ExitCode.CONFLICT
    if isinstance(error, ValidationError):
        return ExitCode.INVALID_INPUT
    if isinstance(error, StorageUnavailableError):
        return ExitCode.UNAVAILABLE
    return ExitCode.ERROR


@dataclass
class Output:
    """Where results go: a table or text for people, one JSON document with ``--json``."""

    as_json: bool
    stdout: Console
    stderr: Console

    @classmethod
    def create(cls, *, as_json: bool) -> Output:
        stdout = Console(soft_wrap=True)
        if not stdout.is_terminal:  # a pipe or a file: no window to fit, so keep ids and times on one line
            stdout = Console(soft_wrap=True, width=PIPE_WIDTH)
        return cls(as_json=as_json, stdout=stdout, stderr=Console(stderr=True))

    def result(self, data: Any, *, table: Table | None = None, text: str | None = None) -> None:
        if self.as_json:
            self.stdout.out(json.dumps(data, ensure_ascii=False, indent=2), highlight=False)
            return
        if table is not None:
            self.stdout.print(table)
        if text is not None:
            self.stdout.print(text, highlight=False)

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Callable[[], None]]:
        """A progress bar on stderr (hidden when stderr is not a terminal); yields "one more done"."""
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.stderr, transient=True, disable=not self.stderr.is_terminal) as bar:
            task = bar.add_task(description, total=total)
            yield lambda: bar.advance(task)


__all__ = ["ExitCode", "Output", "exit_code_for", "plural"]
