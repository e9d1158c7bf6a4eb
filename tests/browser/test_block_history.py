"""The block timeline (issue 26): every version of a writable block, who made it, what changed, and a revert.

Live events may redraw the Context panel (and so the history) at any moment, so every read and click
finds its element afresh through ``page.wait``, which asks again when an element was replaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.conftest import Page, Server
from tests.browser.test_inspector import text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

FIRST = "Name: Ada\n<b>Likes boats</b>"
SECOND = "Name: Ada\nPrefers short answers"


def write_twice(server: Server) -> str:
    """A session whose memory block was written by a model tool call after message a1, then by a PUT."""
    sid = server.create_session("Block timeline")
    for message in (text("u1", "user", "Remember my name is Ada"), text("a1", "assistant", "Noted, Ada.")):
        status, body = server.call("POST", f"/sessions/{sid}/messages", {"message": message})
        assert status == 201, body
    status, body = server.call(
        "POST", f"/sessions/{sid}/tools/set_context", {"input": {"label": "memory", "content": FIRST}}
    )
    assert status == 200, body
    status, body = server.call("PUT", f"/sessions/{sid}/context/memory", {"content": SECOND, "mode": "replace"})
    assert status == 200, body
    assert body["version"] == 2
    return sid


def read(page: Page, question: Callable[[], Any]) -> Any:
    """The answer of ``question`` about the page, asked again while the element it reads is being redrawn."""
    return page.wait(lambda _: (question(),))[0]


def version(number: int) -> str:
    return f'.block-history article.version[data-version="{number}"]'


def lines(page: Page, number: int, tag: str) -> list[str]:
    """The diff lines of one version, read from a drawn history (a redraw empties it while it loads)."""

    def question() -> list[str]:
        article = page.driver.find_element("css selector", version(number))
        return [line.text for line in article.find_elements("css selector", f"pre.diff {tag}")]

    return read(page, question)


def open_history(page: Page, sid: str) -> None:
    page.open(f"/sessions/{sid}")
    button = 'section.block[data-label="memory"] button.show-history'
    assert page.css(button).get_attribute("aria-expanded") == "false"
    read(page, lambda: page.css(button).click())
    page.wait(lambda _: page.css(button).get_attribute("aria-expanded") == "true")
    page.css(".block-history ol.timeline li")


def test_the_history_shows_each_version_its_diff_and_its_cause_and_reverts(page: Page, server: Server) -> None:
    # Given a block written twice through the API: a tool call after message a1, then an HTTP PUT
    sid = write_twice(server)
    # When its history opens
    open_history(page, sid)
    page.css(version(1))
    # Then version 2 says it came over HTTP and shows the line it replaced, as text, and the line it added
    newest = read(page, lambda: page.css(version(2)).text)
    assert "HTTP request" in newest
    assert "current" in newest
    assert "bytes" in read(page, lambda: page.css(f"{version(2)} .version-size").text)
    assert lines(page, 2, "del") == ["- <b>Likes boats</b>"]
    assert lines(page, 2, "ins") == ["+ Prefers short answers"]
    assert page.all(".block-history b") == []  # stored text is never markup
    assert page.all(f"{version(2)} button.revert") == []  # the current version has nothing to revert to
    # And version 1 names the tool call in this session after message a1, with a link to it, and can be restored
    assert "Tool call in this session after message a1" in read(page, lambda: page.css(version(1)).text)
    assert lines(page, 1, "ins") == ["+ Name: Ada", "+ <b>Likes boats</b>"]
    assert lines(page, 1, "del") == []
    page.css(f"{version(1)} button.revert")
    page.js("arguments[0].scrollIntoView()", page.css(".block-history h4"))
    page.screenshot("block-history")
    # And the message link opens that message in the conversation view
    read(page, lambda: page.css(f"{version(1)} a.message-link").click())
    assert "Noted, Ada." in page.css('article[data-message-id="a1"].highlight').text
    assert page.driver.current_url.endswith(f"#/sessions/{sid}/messages/a1")

    # When the history opens again and version 1 is reverted to, from the keyboard
    open_history(page, sid)

    def press_revert() -> None:
        button = page.css(f"{version(1)} button.revert")
        page.js("arguments[0].focus()", button)
        assert page.driver.switch_to.active_element == button
        button.send_keys("\n")

    read(page, press_revert)
    # Then the timeline shows version 3, current, made over HTTP, putting the first content back
    third = read(page, lambda: page.css(version(3)).text)
    assert "current" in third
    assert "HTTP request" in third
    assert lines(page, 3, "ins") == ["+ <b>Likes boats</b>"]
    assert lines(page, 3, "del") == ["- Prefers short answers"]
    page.text_appears('section.block[data-label="memory"] pre.block-content', "<b>Likes boats</b>")
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert status == 200
    assert (block["content"], block["version"]) == (FIRST, 3)


def test_a_revert_on_a_block_that_changed_meanwhile_is_refused_in_words(page: Page, server: Server) -> None:
    # Given the history open on version 2, the page quiet (no live redraw pending) ...
    sid = write_twice(server)
    open_history(page, sid)
    page.text_appears("#live-channel", "Live over WebSocket")
    page.js("document.querySelector('.block-history').dataset.drawn = 'before'")
    time.sleep(1.5)
    assert page.js("return document.querySelector('.block-history').dataset.drawn") == "before"
    # ... and then a program outside the server (so no live event redraws the page) makes version 3
    from threadloom import SessionManager, SqliteStore

    elsewhere = SessionManager.create(SqliteStore(str(server.data_dir / "threadloom.db")), namespace="local")
    elsewhere.with_context("memory", max_tokens=200)
    assert elsewhere.get_session(sid).replace_context_block("memory", "Written elsewhere").version == 3
    page.allowed_errors.append("/context/memory/revert")  # the browser logs the 409 it was asked to show
    # When the page reverts to version 1
    page.css(f"{version(1)} button.revert").click()
    # Then it says why it was refused, and the other writer's content stays current
    page.text_appears(".block-history .error", "HTTP 409, stale_version")
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert (status, block["content"], block["version"]) == (200, "Written elsewhere", 3)


def test_older_versions_load_a_page_at_a_time(page: Page, server: Server) -> None:
    # Given a block with 23 versions (the page asks for 20 at a time)
    sid = write_twice(server)
    for number in range(3, 24):
        status, body = server.call(
            "PUT", f"/sessions/{sid}/context/memory", {"content": f"Note {number}", "mode": "replace"}
        )
        assert (status, body["version"]) == (200, number)
    # When the history opens
    open_history(page, sid)
    page.css(version(23))
    # Then it shows the newest 20, the oldest of them waiting for its predecessor to show its change
    assert len(page.all(".block-history article.version")) == 20
    assert "Load older versions to see what this one changed." in read(page, lambda: page.css(version(4)).text)
    # And "Load older versions" brings the rest, with the diff of version 4 against version 3
    read(page, lambda: page.css(".block-history button.load-older").click())
    page.css(version(1))
    assert len(page.all(".block-history article.version")) == 23
    assert lines(page, 4, "ins") == ["+ Note 4"]
    more = ".block-history button.load-older"
    assert read(page, lambda: [button.is_displayed() for button in page.all(more)]) == [False]
