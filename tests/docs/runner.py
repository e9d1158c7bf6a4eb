"""Run the code blocks of a Markdown document as a reader would, and compare what they print.

The rules (also in tests/docs/README.md):

* ```console blocks run: each ``$ `` line is a command for one bash shell per document (so a
  variable set in one block is there in the next), a trailing backslash continues it, and the
  lines up to the next ``$ `` are what it prints (stdout and stderr together).
* ``make serve`` (with optional ``VAR=value`` words before or after) starts the document's own
  local server in the background on a free port and a fresh data folder, restarting it on the
  same data when it is run again; its shown lines must appear in what the server prints.
* ```python blocks run with the project's virtual environment in a fresh folder; a ```output
  block right after one is what it must print.
* A ```console wheel block runs in tests/package/, in a fresh virtual environment outside the
  repository with the built wheel, not here.
* A block whose info string says ``illustrative`` is not run (a cloud deploy, say); a ```bash or
  ```sh block that is neither run nor marked so is an error, so nothing escapes by accident.
* Before running: ``localhost:3000`` / ``127.0.0.1:3000`` point at the document's server,
  ``.threadloom`` at its data folder and ``/tmp/`` at the document's own temporary folder.
  Before comparing, both sides are normalised: UUIDs, ISO timestamps, durations, ports and those
  folders; a shown line ``...`` stands for any number of lines.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.support.local_server import free_port

REPOSITORY = Path(__file__).resolve().parents[2]
DOC_PORT = 3000
COMMAND_TIMEOUT_SECONDS = 120.0
SERVER_START_SECONDS = 90.0
SHELL_LANGUAGES = {"bash", "sh", "shell", "zsh"}
SERVE_COMMAND = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S+\s+)*)make serve((?:\s+[A-Z_][A-Z0-9_]*=\S+)*)\s*$")
ASSIGNMENT = re.compile(r"([A-Z_][A-Z0-9_]*)=(\S+)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
PORT = re.compile(r"\b(localhost|127\.0\.0\.1):\d+")
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|µs|seconds)\b")
DEFAULT_DATA_DIR = re.compile(r"(?<![\w/.-])\.threadloom(?=[/\s]|$)")
ANY_LINES = "..."


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    flags: frozenset[str]
    text: str

    @property
    def where(self) -> str:
        return f"{shown_path(self.path)}:{self.line}"


@dataclass
class Command:
    line: int
    text: str
    shown: list[str] = field(default_factory=list)


def shown_path(path: Path) -> str:
    return str(path.relative_to(REPOSITORY)) if path.is_relative_to(REPOSITORY) else str(path)


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)(`{3,})(.*)$", lines[index])
        if not opening:
            index += 1
            continue
        fence, words = opening.group(2), opening.group(3).split()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index])
            index += 1
        index += 1
        language = words[0].lower() if words else ""
        blocks.append(Block(path, start + 1, language, frozenset(w.lower() for w in words[1:]), "\n".join(body)))
    return blocks


def commands_of(block: Block) -> list[Command]:
    commands: list[Command] = []
    continuing = False
    for offset, line in enumerate(block.text.splitlines(), start=1):
        if continuing:
            commands[-1].text += "\n" + line
            continuing = line.endswith("\\")
        elif line.startswith("$ "):
            commands.append(Command(block.line + offset, line[2:]))
            continuing = line.endswith("\\")
        elif commands:
            commands[-1].shown.append(line)
        elif line.strip():
            raise AssertionError(f"{block.where}: a console block starts with '$ command', not {line!r}")
    return commands


class Normaliser:
    """Maps what legitimately differs between runs onto placeholders."""

    def __init__(self, replacements: dict[str, str]) -> None:
        self.replacements = replacements

    def __call__(self, text: str) -> list[str]:
        for actual, shown in self.replacements.items():
            text = text.replace(actual, shown)
        text = UUID.sub("<uuid>", text)
        text = TIMESTAMP.sub("<time>", text)
        text = PORT.sub(r"\1:<port>", text)
        text = DURATION.sub("<duration>", text)
        return [line.rstrip() for line in text.rstrip("\n").splitlines()] if text.strip() else []


def matches(shown: list[str], actual: list[str]) -> bool:
    """Line-by-line equality where a shown ``...`` line stands for any number of lines."""
    if not shown:
        return not actual
    if shown[0] == ANY_LINES:
        return any(matches(shown[1:], actual[skip:]) for skip in range(len(actual) + 1))
    return bool(actual) and shown[0] == actual[0] and matches(shown[1:], actual[1:])


class Shell:
    """One bash process per document, so state carries from block to block as in a terminal."""

    def __init__(self, environment: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=REPOSITORY,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def run(self, command: str) -> tuple[int, str]:
        assert self.process.stdin and self.process.stdout
        marker = f"__threadloom_docs_{uuid.uuid4().hex}__"
        self.process.stdin.write(f"{command}\nprintf '\\n{marker} %s\\n' \"$?\"\n")
        self.process.stdin.flush()
        output: list[str] = []
        deadline = time.monotonic() + COMMAND_TIMEOUT_SECONDS
        for line in _lines_until(self.process.stdout, deadline):
            if line.startswith(marker):
                text = "".join(output)
                return int(line.split()[1]), text[:-1] if text.endswith("\n") else text
            output.append(line)
        self.close()
        raise AssertionError(f"command did not finish within {COMMAND_TIMEOUT_SECONDS:.0f} s: {command}")

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _lines_until(stream: IO[str], deadline: float) -> list[str]:
    """Lines of a stream, read on a thread so a hung command ends at the deadline."""
    lines: list[str] = []
    done = threading.Event()

    def reader() -> None:
        for line in stream:
            lines.append(line)
            if line.startswith("__threadloom_docs_"):
                break
        done.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    done.wait(max(0.0, deadline - time.monotonic()))
    return list(lines)


class Server:
    """The document's local server, started the way the document says (``make serve``)."""

    def __init__(self, port: int, data_dir: Path, log: Path) -> None:
        self.port, self.data_dir, self.log = port, data_dir, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, assignments: dict[str, str], environment: dict[str, str]) -> list[str]:
        self.stop()
        ensure_environment(environment)
        variables = {**assignments, "PORT": str(self.port), "DATA_DIR": str(self.data_dir)}
        make_words = [f"{name}={value}" for name, value in variables.items() if name in MAKE_VARIABLES]
        env = {**environment, **{k: v for k, v in assignments.items() if k not in MAKE_VARIABLES}}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["make", "--no-print-directory", "serve", *make_words],
                cwd=REPOSITORY,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"make serve exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    time.sleep(0.2)  # let the banner flush
                    return self.log.read_text(encoding="utf-8").splitlines()
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"make serve did not listen on port {self.port} within {SERVER_START_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None
        self.log.write_text("")


MAKE_VARIABLES = {"PORT", "TENANT", "DATA_DIR", "PYTHON"}


def run_document(path: Path, workspace: Path) -> list[str]:
    """Run every block of one document; return the problems found (empty when all is as shown)."""
    blocks = read_blocks(path)
    run = DocumentRun(workspace)
    problems: list[str] = []
    try:
        for position, block in enumerate(blocks):
            following = blocks[position + 1] if position + 1 < len(blocks) else None
            previous = blocks[position - 1] if position else None
            problems.extend(run.block(block, previous, following))
            if problems:
                break  # later blocks build on this one
    finally:
        run.close()
    return problems


def ensure_environment(environment: dict[str, str]) -> None:
    """Bring ``.venv`` up to date once, under a lock, before any document's ``make serve``.

    ``make serve`` re-runs the first-run set-up when ``pyproject.toml`` is newer than the virtual
    environment; two documents starting their servers at once would then install into one
    environment together and break it. When the environment is current this is a no-op.
    """
    with (REPOSITORY / ".venv-docs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(
            ["make", "--no-print-directory", ".venv/.installed"],
            cwd=REPOSITORY,
            env=environment,
            check=True,
            capture_output=True,
            timeout=600,
        )


class DocumentRun:
    """The state one document's blocks share: a shell, a server, a temporary folder."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.temporary = workspace / "tmp"
        self.temporary.mkdir(parents=True)
        self.port = free_port()
        self.data_dir = data_dir = workspace / "data"
        self.environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PYTEST_", "THREADLOOM_", "POWERTOOLS_")) and key != "COV_CORE_SOURCE"
        }
        self.environment.update({"TMPDIR": str(self.temporary), "NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"})
        self.normalise = Normaliser(
            {str(data_dir): ".threadloom", f"{self.temporary}/": "/tmp/", str(self.temporary): "/tmp"}
        )
        self.shell = Shell(self.environment)
        self.server = Server(self.port, data_dir, workspace / "server.log")

    def close(self) -> None:
        self.shell.close()
        self.server.stop()

    def localise(self, text: str) -> str:
        text = re.sub(rf"\b(localhost|127\.0\.0\.1):{DOC_PORT}\b", rf"\1:{self.port}", text)
        text = text.replace("/tmp/", f"{self.temporary}/")
        return DEFAULT_DATA_DIR.sub(lambda _: str(self.data_dir), text)

    def block(self, block: Block, previous: Block | None, following: Block | None) -> list[str]:
        if "illustrative" in block.flags or "wheel" in block.flags:  # "wheel": tests/package runs it
            return []
        if block.language in SHELL_LANGUAGES:
            return [f"{block.where}: a ```{block.language} block must be ```console (run) or illustrative"]
        if block.language == "output" and (previous is None or previous.language != "python"):
            return [f"{block.where}: a ```output block must follow a ```python block"]
        if block.language == "console":
            problems: list[str] = []
            for command in commands_of(block):
                problems.extend(self.command(command, block))
                if problems:
                    break
            return problems
        if block.language == "python":
            shown = following.text if following is not None and following.language == "output" else None
            return self.python(block, shown)
        return []

    def command(self, command: Command, block: Block) -> list[str]:
        where = f"{shown_path(block.path)}:{command.line}"
        serve = SERVE_COMMAND.match(command.text)
        shown = self.normalise("\n".join(command.shown))
        if serve:
            assignments = dict(ASSIGNMENT.findall(serve.group(1) + " " + serve.group(2)))
            printed = self.normalise("\n".join(self.server.start(assignments, self.environment)))
            missing = [line for line in shown if line not in printed]
            return [f"{where}: `{command.text}` did not print {missing}; it printed {printed}"] if missing else []
        status, output = self.shell.run(self.localise(command.text))
        actual = self.normalise(output)
        if matches(shown, actual):
            return []
        return [
            f"{where}: `{command.text}` (exit {status}) printed\n"
            + "\n".join(f"    {line}" for line in actual)
            + "\n  but the document shows\n"
            + "\n".join(f"    {line}" for line in shown)
        ]

    def python(self, block: Block, shown: str | None) -> list[str]:
        folder = self.workspace / f"python-{block.line}"
        folder.mkdir()
        script = folder / "snippet.py"
        script.write_text(self.localise(block.text), encoding="utf-8")
        try:
            result = subprocess.run(
                [str(REPOSITORY / ".venv" / "bin" / "python"), str(script)],
                cwd=folder,
                env=self.environment,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [f"{block.where}: the snippet did not finish within {COMMAND_TIMEOUT_SECONDS:.0f} s"]
        if result.returncode != 0:
            return [f"{block.where}: the snippet failed (exit {result.returncode}):\n{result.stderr}"]
        if shown is None or matches(self.normalise(shown), self.normalise(result.stdout)):
            return []
        return [f"{block.where}: the snippet printed\n{result.stdout}\nbut the document shows\n{shown}"]
