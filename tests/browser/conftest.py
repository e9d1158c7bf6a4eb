"""A real headless Chromium (Debian's package, driven by Selenium) against the local server.

Nothing is downloaded: Selenium is pointed at /usr/bin/chromium and /usr/bin/chromedriver.
Without them the tests fail with the command that installs them (``make test`` installs them
itself when it runs as root), so a passing run never hides untested inspector code; only the
explicit opt-out ``THREADLOOM_SKIP_BROWSER=1`` skips them, with the variable in every skip reason
and the run's summary. Screenshots of every main view go
to ``tests/browser/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_server import local_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("THREADLOOM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("THREADLOOM_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
)
# Compaction after 3,000 tokens with a short protected tail, so flows can watch the meter fill.
# The skills block has no description, as in docs/examples/quick-compaction.yaml. Reflection waits for
# approval and runs only on demand (not after each compaction), for the Memory proposals panel.
PROFILE = """
blocks:
  - {label: soul, kind: static, description: Who you are, content: You are a ship's navigator.}
  - {label: memory, kind: writable, description: Facts learned about the user, max_tokens: 200}
  - {label: skills, kind: skills}
  - {label: knowledge, kind: search, description: Facts worth finding}
compaction: {threshold: 3000, protect_head: 1, tail_token_budget: 40, min_tail_messages: 2}
searchable_history: history
reflection: {enabled: true, block: memory, approval: required, extractor: {kind: offline}, after_compaction: false}
"""
TENANT = "local"


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[dev])"
    return None


SKIP_VARIABLE = "THREADLOOM_SKIP_BROWSER"


def _require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"Browser tests skipped because {SKIP_VARIABLE}=1: {reason}")
    pytest.fail(f"Browser tests need a browser but {reason}; or skip them on purpose with {SKIP_VARIABLE}=1")


@dataclass
class Server:
    """The local server in a subprocess, plus a library handle on its SQLite file for fast seeding."""

    url: str
    data_dir: Path
    _manager: Any = field(default=None, repr=False)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def create_session(self, name: str) -> str:
        status, body = self.call("POST", "/sessions", {"name": name})
        assert status == 201, body
        return str(body["id"])

    @property
    def manager(self) -> Any:
        """A SessionManager on the server's database, as tenant ``local`` (seeding without HTTP)."""
        if self._manager is None:
            from threadloom import SessionManager, SqliteStore

            self._manager = SessionManager.create(SqliteStore(str(self.data_dir / "threadloom.db")), namespace=TENANT)
        return self._manager


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say in the run's summary that the inspector went untested, when it was skipped on purpose."""
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if SKIP_VARIABLE in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{SKIP_VARIABLE}=1: {len(skipped)} inspector browser tests were skipped, so the inspector is untested"
        )


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    _require_browser()
    data = Path(tempfile.mkdtemp(prefix="threadloom-browser-"))
    try:
        with local_server(data / "d", profile=PROFILE) as running:
            yield Server(url=running.url, data_dir=data / "d")
    finally:
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def driver(server: Server) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile_dir = tempfile.mkdtemp(prefix="threadloom-chromium-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    browser.set_page_load_timeout(30)
    browser.set_script_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)


class Page:
    """The driver plus the checks every flow needs: console errors, screenshots, waiting."""

    def __init__(self, driver: Any, server: Server) -> None:
        self.driver = driver
        self.server = server
        self.allowed_errors: list[str] = []

    def open(self, fragment: str = "/") -> None:
        self.driver.get(f"{self.server.url}/#{fragment}")
        # A hash-only change does not reload the page: force it so every flow starts fresh.
        self.driver.refresh()

    def wait(self, condition: Any, timeout: float = 20, message: str = "") -> Any:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        # The page re-renders a section when fresh data arrives: an element found a moment ago may be
        # replaced before it is read, so such a miss is "not yet", and the condition is asked again.
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored).until(
            condition, message
        )

    def css(self, selector: str, timeout: float = 20) -> Any:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        return self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, selector)), timeout, selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def text_appears(self, selector: str, text: str, timeout: float = 20) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        self.wait(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text), timeout, f"{text!r} in {selector}"
        )

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def console_errors(self) -> list[str]:
        entries = self.driver.get_log("browser")
        return [
            entry["message"]
            for entry in entries
            if entry["level"] == "SEVERE" and not any(allowed in entry["message"] for allowed in self.allowed_errors)
        ]


@contextmanager
def checked_page(driver: Any, server: Server, name: str) -> Iterator[Page]:
    """A page on ``server`` at 1280x800 that fails the test on any console error it logged."""
    driver.set_window_size(1280, 800)
    driver.get_log("browser")  # drop what earlier tests left
    wrapper = Page(driver, server)
    yield wrapper
    time.sleep(0.2)  # let late requests report
    errors = wrapper.console_errors()
    if errors:
        wrapper.screenshot(f"failed-{name}")
    assert errors == [], f"browser console errors: {errors}"


@pytest.fixture
def page(driver: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Page]:
    with checked_page(driver, server, request.node.name) as wrapper:
        yield wrapper
