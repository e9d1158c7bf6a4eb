"""The built wheel is the whole product: installed in a fresh virtual environment outside the repository, the
README's install commands, ``threadloom serve`` (health, a session, the inspector, ``/ws``), export and import,
the client and the library example all work, and the wheel carries every data file of the package.

Nothing here sees the checkout: the commands run in a temporary folder with ``PYTHONPATH`` and the dev
environment off ``PATH``, and the installed ``threadloom`` must come from the new environment's site-packages.
pip installs the dependencies from the registry (or its cache), as a user's would: about a minute a run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.package.wheel import (
    DIST_PLACEHOLDER,
    REPOSITORY,
    Built,
    Shell,
    build_once,
    clean_environment,
    commands_in,
    install_blocks,
    normalised,
    shared_build_folder,
    snippet_with_output,
)
from tests.support.local_server import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [pytest.mark.package, pytest.mark.timeout(900)]
PACKAGE = REPOSITORY / "layers" / "threadloom" / "threadloom"
PYPROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
SERVER_START_SECONDS = 60.0


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_once(shared_build_folder(tmp_path_factory))


def tracked_package_files() -> set[str]:
    """The package's files as git tracks them (what a clean checkout, and so CI, builds from)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", str(PACKAGE)], cwd=REPOSITORY, capture_output=True, check=True
    ).stdout.decode()
    return {str(Path(name).relative_to("layers/threadloom")) for name in listed.split("\0") if name}


def test_the_wheel_carries_every_module_and_data_file_of_the_package(built: Built) -> None:
    names = set(zipfile.ZipFile(built.wheel).namelist())
    tracked = tracked_package_files()
    assert {"threadloom/py.typed", "threadloom/inspector/index.html", "threadloom/api/profiles/default.yaml"} <= tracked
    assert any(name.startswith("threadloom/storage/sqlite/migrations/") for name in tracked)
    assert any(name.startswith("threadloom/storage/postgres/migrations/") for name in tracked)
    assert tracked - names == set(), "in the package but not in the wheel (pyproject's package-data)"
    assert all(name.startswith(("threadloom/", "threadloom-")) for name in names)  # nothing else ships
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert "threadloom/api/routes/app.py" in names  # the HTTP app ships, not only the library


def test_the_wheel_metadata_says_license_extras_and_entry_point(built: Built) -> None:
    wheel = zipfile.ZipFile(built.wheel)
    version = PYPROJECT["project"]["version"]
    metadata = wheel.read(f"threadloom-{version}.dist-info/METADATA").decode()
    fields = [line.split(": ", 1) for line in metadata.split("\n\n", 1)[0].splitlines() if ": " in line]
    assert ["License-Expression", "Apache-2.0"] in fields
    assert not any(key == "License" or value.startswith("License ::") for key, value in fields)
    base = sorted(value for key, value in fields if key == "Requires-Dist" and "extra ==" not in value)
    assert base == ["pg8000==1.31.6", "pyyaml>=6"]  # the library: no CLI, server or AWS packages
    extras = {value for key, value in fields if key == "Provides-Extra"}
    assert {"local", "aws", "client", "openai-agents", "strands", "langchain"} <= extras
    assert any(key == "Classifier" and value == "Typing :: Typed" for key, value in fields)
    assert "threadloom = threadloom.cli:main" in wheel.read(f"threadloom-{version}.dist-info/entry_points.txt").decode()
    assert "SetuptoolsDeprecationWarning" not in built.log and "License classifiers are deprecated" not in built.log


def test_the_sdist_carries_the_package_data_too(built: Built) -> None:
    import tarfile

    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {f"layers/threadloom/{name}" for name in tracked_package_files()} - names == set()


# ------------------------------------------------------------------ outside the repository


class Installed:
    """The fresh virtual environment the README's commands made, and the folder they ran in."""

    def __init__(self, folder: Path, shell: Shell, environment: dict[str, str]) -> None:
        self.folder, self.shell, self.environment = folder, shell, environment
        self.python = folder / ".venv" / "bin" / "python"

    def run(self, *command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(command),
            cwd=self.folder,
            env=self.activated(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def activated(self) -> dict[str, str]:
        """What ``. .venv/bin/activate`` sets, for processes started outside the shell."""
        bin_folder = str(self.folder / ".venv" / "bin")
        path = os.pathsep.join([bin_folder, self.environment["PATH"]])
        return {**self.environment, "VIRTUAL_ENV": str(self.folder / ".venv"), "PATH": path}

    def snippet(self, code: str, name: str) -> subprocess.CompletedProcess[str]:
        folder = self.folder / name
        folder.mkdir()
        (folder / "snippet.py").write_text(code, encoding="utf-8")
        return subprocess.run(
            [str(self.python), "snippet.py"],
            cwd=folder,
            env=self.activated(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


class Server:
    def __init__(self, installed: Installed, port: int) -> None:
        self.port = port
        self.log = installed.folder / "serve.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(installed.folder / ".venv" / "bin" / "threadloom"), "serve", "--port", str(port)],
                cwd=installed.folder,
                env=installed.activated(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"threadloom serve exited: {self.log.read_text()}"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    time.sleep(0.2)  # the banner is flushed right after the socket listens
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"threadloom serve did not listen within {SERVER_START_SECONDS:.0f} s")

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if data is not None else {}
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data, headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary folder outside the checkout, with ``python3`` the interpreter running these tests."""
    folder = tmp_path / "project"
    folder.mkdir()
    assert not folder.resolve().is_relative_to(REPOSITORY)
    interpreter = tmp_path / "interpreter"
    interpreter.mkdir()
    (interpreter / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    environment = clean_environment(TMPDIR=str(tmp_path))
    environment["PATH"] = os.pathsep.join([str(interpreter), environment["PATH"]])
    yield folder, environment


def test_the_readme_install_then_everything_documented_works_outside_the_repository(
    built: Built, outside: tuple[Path, dict[str, str]]
) -> None:
    folder, environment = outside
    shell = Shell(folder, environment)
    installed = Installed(folder, shell, environment)
    server: Server | None = None
    version = PYPROJECT["project"]["version"]
    try:
        for block in install_blocks():
            for command, shown in commands_in(block):
                if command == "threadloom serve":
                    server = Server(installed, free_port())
                    printed = normalised(server.log.read_text(encoding="utf-8"), server.port)
                    missing = [line for line in shown if line not in printed]
                    assert not missing, f"{block.where}: `threadloom serve` printed {printed}, not {missing}"
                    continue
                status, output = shell.run(command.replace(DIST_PLACEHOLDER, str(built.wheel.parent)))
                assert status == 0, f"{block.where}: `{command}` exited {status}:\n{output}"
                printed = normalised(output)
                assert [line for line in shown if line not in printed] == [], f"`{command}` printed {printed}"
                if command.endswith("threadloom") and "pip install" in command:
                    check_the_base_install(installed, version)
        assert server is not None, "the README's install block starts no `threadloom serve`"
        session_id = check_the_server(server)
        check_export_and_import(installed, session_id)
        check_the_client(installed, server, built.wheel.parent)
        assert server.stop() == 0, server.log.read_text()
    finally:
        if server is not None:
            server.stop()
        shell.close()


def check_the_base_install(installed: Installed, version: str) -> None:
    """``pip install threadloom`` alone: the library example runs; what needs an extra names it in one line."""
    where = installed.run(str(installed.python), "-c", "import threadloom, sys; print(threadloom.__file__)")
    assert where.stdout.strip().startswith(str(installed.folder / ".venv")), where
    handler = installed.run(str(installed.python), "-c", "import threadloom_api")
    assert "No module named 'threadloom_api'" in handler.stderr  # the checkout's functions/ are out of reach
    code, expected = snippet_with_output('.with_context("soul", provider=Soul())')
    example = installed.snippet(code, "library-example")
    assert example.returncode == 0, example.stderr
    assert example.stdout.strip() == expected.strip()
    assert installed.run("threadloom", "--version").stdout == f"threadloom {version}\n"
    command_line = installed.run("threadloom", "sessions", "list")
    assert (command_line.returncode, command_line.stdout) == (1, "")
    assert command_line.stderr == "threadloom: the threadloom command needs typer: pip install 'threadloom[local]'\n"
    server = installed.run(str(installed.python), "-m", "threadloom.local_server", "--port", "0")
    assert server.returncode == 1
    assert server.stderr == (
        "threadloom: the local server needs aiohttp, aws-lambda-powertools, pydantic: pip install 'threadloom[local]'\n"
    )
    client = installed.run(str(installed.python), "-c", "import threadloom.client")
    assert client.returncode == 1
    last_line = client.stderr.strip().splitlines()[-1]
    assert last_line == "threadloom.extras.MissingExtraError: " + (
        "threadloom: threadloom.client needs httpx: pip install 'threadloom[client]'"
    )


def check_the_server(server: Server) -> str:
    """Health, a new session, the inspector page and one of its files, and a live-status subscription."""
    from websockets.sync.client import connect

    status, _, body = server.request("GET", "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok", "storage": "reachable"})
    status, _, body = server.request("POST", "/sessions", {"name": "From the wheel"})
    session = json.loads(body)
    assert status == 201 and session["name"] == "From the wheel"
    status, headers, page = server.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"<!doctype html>" in page.lower()
    status, headers, script = server.request("GET", "/inspector/app.js")
    assert status == 200 and "javascript" in headers["content-type"] and script
    with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=10) as live:
        live.send(json.dumps({"action": "subscribe", "sessionId": session["id"]}))
        subscribed = json.loads(live.recv(timeout=10))
        assert subscribed["type"] == "subscribed" and subscribed["sessionId"] == session["id"]
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hello from a wheel"}]}
        status, _, _ = server.request("POST", f"/sessions/{session['id']}/messages", {"message": message})
        assert status in (200, 201)
        events = [json.loads(live.recv(timeout=10)) for _ in range(2)]
        assert {event["type"] for event in events} == {"session_status", "session_changed"}
    return str(session["id"])


def check_export_and_import(installed: Installed, session_id: str) -> None:
    """The CLI on SQLite: export the server's data, copy it to another file (``--keep-ids``): the same session."""
    exported = installed.run("threadloom", "export", "-o", "backup.jsonl")
    assert exported.returncode == 0, exported.stderr
    imported = installed.run(
        "threadloom", "--database", "copy.db", "--create", "--json", "import", "--keep-ids", "backup.jsonl"
    )
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == [session_id]
    listed = installed.run("threadloom", "--database", "copy.db", "--json", "sessions", "list")
    assert [session["id"] for session in json.loads(listed.stdout)] == [session_id]


def check_the_client(installed: Installed, server: Server, dist: Path) -> None:
    """``threadloom[client]`` added to the same environment: the README's async client against the server."""
    added = installed.run(
        str(installed.python), "-m", "pip", "install", "--quiet", "--find-links", str(dist),
        "threadloom[client]",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    code, expected = snippet_with_output("AsyncThreadloomClient(")
    answer = installed.snippet(code.replace("127.0.0.1:3000", f"127.0.0.1:{server.port}"), "client-example")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == expected.strip()
