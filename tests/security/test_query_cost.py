"""The work of one search is bounded on both backends (issue 23, "Search cost").

A 5.6 KB quoted phrase of 1,020 tokens took 4.7-12 s on SQLite and blocked every other request
of the local server, and the profile's ``max_query_chars`` was never enforced. Through the real
handler, on SQLite and PostgreSQL: a query over the profile's characters, over the words of one
phrase or over the words of a query is refused with a clean 400 that says what is wrong, quickly;
queries at the bounds still run. The control proves the check can fail: the same costly phrase
goes to the library, which has no 400 to give, and it answers nothing there too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from threadloom import SqliteStore
from threadloom.api.profile import DEFAULT_PROFILE_PATH
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.search import MAX_PHRASE_TOKENS, MAX_QUERY_TOKENS, parse_query

from tests.support.api import SESSION, TENANT, call, seeded_runtime, text

MAX_QUERY_CHARS = 2000
# What the report measured: one phrase of 1,020 tokens, 5.6 KB.
COSTLY_PHRASE = '"' + " ".join(["lighthouse keeper"] * 510) + '"'


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    profile = yaml.safe_load(DEFAULT_PROFILE_PATH.read_text(encoding="utf-8"))
    profile["limits"] = {**(profile.get("limits") or {}), "max_query_chars": MAX_QUERY_CHARS}
    profile_path = tmp_path / "profile.yaml"
    profile_path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime, _ = seeded_runtime(tmp_path, store=store, profile_path=str(profile_path))
    # Documents full of the phrase's words: the worst case for phrase matching.
    documents = [text(f"k{index}", "user", "lighthouse keeper " * 400) for index in range(20)]
    runtime.manager(TENANT).append_all(SESSION, documents)
    yield runtime
    set_runtime(None)


def search(path: str, query: str) -> tuple[int, Any, float]:
    started = time.perf_counter()
    status, body = call("GET", path, query={"q": query})
    return status, body, time.perf_counter() - started


@pytest.mark.parametrize("path", [f"/sessions/{SESSION}/search", "/search"])
@pytest.mark.parametrize(
    ("query", "says"),
    [
        (COSTLY_PHRASE, "characters"),
        ("x" * (MAX_QUERY_CHARS + 1), f"at most {MAX_QUERY_CHARS} are allowed"),
        ('"' + " ".join(f"w{index}" for index in range(MAX_PHRASE_TOKENS + 1)) + '"', "A phrase"),
        (" ".join(f"w{index}" for index in range(MAX_QUERY_TOKENS + 1)), "words"),
        ('"' + "keeper " * (MAX_PHRASE_TOKENS + 1), "A phrase"),  # an unterminated quote runs to the end
    ],
)
def test_costly_queries_are_refused_with_a_clean_400(runtime: Runtime, path: str, query: str, says: str) -> None:
    status, body, seconds = search(path, query)
    assert status == 400, body
    assert body["error"]["code"] == "bad_request"
    assert says in body["error"]["message"]
    assert seconds < 1.0


def test_the_costly_phrase_within_the_characters_is_refused_by_its_words(runtime: Runtime) -> None:
    phrase = '"' + " ".join(["keeper"] * 300) + '"'  # 2,102 characters would pass a larger max_query_chars
    assert len(phrase) > MAX_QUERY_CHARS
    status, body, _ = search("/search", phrase[: MAX_QUERY_CHARS - 1] + '"')
    assert status == 400 and "A phrase of the search query has" in body["error"]["message"], body


@pytest.mark.parametrize("path", [f"/sessions/{SESSION}/search", "/search"])
def test_queries_at_the_bounds_still_run(runtime: Runtime, path: str) -> None:
    phrase = '"' + " ".join(["lighthouse keeper"] * (MAX_PHRASE_TOKENS // 2)) + '"'
    status, body, seconds = search(path, phrase)
    assert status == 200, body
    assert len(body["results"]) == 20
    assert seconds < 2.0
    words = " ".join(f"w{index}" for index in range(MAX_QUERY_TOKENS - 2)) + " lighthouse keeper"
    status, body, _ = search(path, words)
    assert status == 200 and body["results"] == [], body


def test_control_the_library_bounds_the_same_query_without_a_400(runtime: Runtime) -> None:
    """The check can fail: the costly phrase parses to nothing, so the handler's 400 is what explains it."""
    assert parse_query(COSTLY_PHRASE) == []
    at_bound = '"' + " ".join(["lighthouse keeper"] * (MAX_PHRASE_TOKENS // 2)) + '"'
    assert parse_query(at_bound) != []
    session = runtime.manager(TENANT).get_session(SESSION)
    started = time.perf_counter()
    assert session.search(COSTLY_PHRASE) == []
    assert time.perf_counter() - started < 1.0
    assert len(session.search(at_bound)) == 20
