"""The block timeline (issue 26): every version of a writable block, who made it, what changed, and a revert."""

from __future__ import annotations

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


def open_history(page: Page, sid: str) -> None:
    page.open(f"/sessions/{sid}")
    button = page.css('section.block[data-label="memory"] button.show-history')
    assert button.get_attribute("aria-expanded") == "false"
    button.click()
    assert button.get_attribute("aria-expanded") == "true"


def test_the_history_shows_each_version_its_diff_and_its_cause_and_reverts(page: Page, server: Server) -> None:
    # Given a block written twice through the API: a tool call after message a1, then an HTTP PUT
    sid = write_twice(server)
    # When its history opens
    open_history(page, sid)
    newest = page.css('.block-history article.version[data-version="2"]')
    oldest = page.css('.block-history article.version[data-version="1"]')
    # Then version 2 says it came over HTTP and shows the line it replaced, as text, and the line it added
    assert "HTTP request" in newest.text
    assert "current" in newest.text
    assert [line.text for line in newest.find_elements("css selector", "pre.diff del")] == ["- <b>Likes boats</b>"]
    assert [line.text for line in newest.find_elements("css selector", "pre.diff ins")] == ["+ Prefers short answers"]
    assert page.all(".block-history b") == []  # stored text is never markup
    assert "bytes" in newest.find_element("css selector", ".version-size").text
    # And version 1 names the tool call in this session after message a1, with a link to it, and can be restored
    assert "Tool call in this session after message a1" in oldest.text
    assert [line.text for line in oldest.find_elements("css selector", "pre.diff ins")] == [
        "+ Name: Ada",
        "+ <b>Likes boats</b>",
    ]
    assert oldest.find_elements("css selector", "pre.diff del") == []
    revert = oldest.find_element("css selector", "button.revert")
    assert newest.find_elements("css selector", "button.revert") == []
    page.js("arguments[0].scrollIntoView()", page.css(".block-history h4"))
    page.screenshot("block-history")
    # And the message link opens that message in the conversation view
    oldest.find_element("css selector", "a.message-link").click()
    assert page.css('article[data-message-id="a1"].highlight').text.count("Noted, Ada.") == 1
    assert page.driver.current_url.endswith(f"#/sessions/{sid}/messages/a1")

    # When the history opens again and version 1 is reverted to, from the keyboard
    open_history(page, sid)
    revert = page.css('.block-history article.version[data-version="1"] button.revert')
    page.js("arguments[0].focus()", revert)
    assert page.driver.switch_to.active_element == revert
    revert.send_keys("\n")
    # Then the timeline shows version 3, current, made over HTTP, putting the first content back
    third = page.css('.block-history article.version[data-version="3"]')
    assert "current" in third.text
    assert "HTTP request" in third.text
    assert [line.text for line in third.find_elements("css selector", "pre.diff ins")] == ["+ <b>Likes boats</b>"]
    assert [line.text for line in third.find_elements("css selector", "pre.diff del")] == ["- Prefers short answers"]
    assert page.css('section.block[data-label="memory"] pre.block-content').text == FIRST
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert status == 200
    assert (block["content"], block["version"]) == (FIRST, 3)


def test_a_revert_on_a_block_that_changed_meanwhile_is_refused_in_words(page: Page, server: Server) -> None:
    # Given the history open on version 2, and then another writer makes version 3 behind the page's back
    sid = write_twice(server)
    open_history(page, sid)
    revert = page.css('.block-history article.version[data-version="1"] button.revert')
    status, body = server.call(
        "PUT", f"/sessions/{sid}/context/memory", {"content": "Written elsewhere", "mode": "replace"}
    )
    assert (status, body["version"]) == (200, 3)
    page.allowed_errors.append("/context/memory/revert")  # the browser logs the 409 it was asked to show
    # When the page reverts to version 1
    revert.click()
    # Then it says why it was refused, and the other writer's content stays current
    page.text_appears(".block-history .error", "HTTP 409, stale_version")
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert (block["content"], block["version"]) == ("Written elsewhere", 3)
