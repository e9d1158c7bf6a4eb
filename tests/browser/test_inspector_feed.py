"""The conversation follows the WAI-ARIA feed pattern, and its keys do what the page's hint says.

Each test here failed before the fix it guards: the feed's children were ``div.chunk`` wrappers
(assistive technology expects the feed's articles as its direct children), and ``End`` only
scrolled when a message had focus (it moved focus to the last message only from the list itself).
"""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import Page, Server
from tests.browser.test_inspector import text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

FEED_CHILDREN = """
const feed = document.querySelector('[role=feed]');
return [...feed.children].map(el => ({
  tag: el.tagName.toLowerCase(),
  id: el.dataset.messageId || null,
  posinset: Number(el.getAttribute('aria-posinset')),
  setsize: Number(el.getAttribute('aria-setsize')),
}));
"""


def seed_long(server: Server, name: str, count: int) -> str:
    sid = server.create_session(name)
    messages = [
        text(f"m{i}", ("user", "assistant")[i % 2], f"Log entry {i}: " + "steady " * (i % 5 + 2)) for i in range(count)
    ]
    server.manager.append_all(sid, messages)
    return sid


def feed_children(page: Page) -> list[dict[str, Any]]:
    return list(page.js(FEED_CHILDREN))


def assert_articles_only(page: Page, total: int) -> list[dict[str, Any]]:
    """The feed's direct children are message articles, consecutive, each with its place in the feed."""
    children = feed_children(page)
    assert children, "the feed is empty"
    assert [child["tag"] for child in children] == ["article"] * len(children), children[:3]
    positions = [child["posinset"] for child in children]
    assert positions == list(range(positions[0], positions[0] + len(positions))), positions
    assert {child["setsize"] for child in children} == {total}
    assert all(child["id"] == f"m{child['posinset'] - 1}" for child in children)
    return children


def active(page: Page) -> str | None:
    return page.driver.switch_to.active_element.get_attribute("data-message-id")


def test_the_feed_has_the_message_articles_as_its_children(page: Page, server: Server) -> None:
    total = 450  # three pages of history, twelve chunks
    sid = seed_long(server, "Feed pattern", total)
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="m0"]')
    page.wait(lambda _: page.css("[role=feed]").get_attribute("aria-busy") == "false", message="the first page loaded")
    first = assert_articles_only(page, total)
    assert first[0]["posinset"] == 1
    # Loading more pages marks the feed busy, then not
    page.js(
        "window.__busy = [];"
        "new MutationObserver(() => window.__busy.push(arguments[0].getAttribute('aria-busy')))"
        ".observe(arguments[0], {attributes: true, attributeFilter: ['aria-busy']});",
        page.css("[role=feed]"),
    )
    page.css(".conv-head button:nth-child(2)").click()  # Jump to the end
    page.wait(lambda _: active(page) == f"m{total - 1}", message="the last message has focus")
    page.wait(lambda _: page.css("[role=feed]").get_attribute("aria-busy") == "false")
    assert "true" in page.js("return window.__busy"), "the feed was never busy while pages loaded"
    last = assert_articles_only(page, total)
    assert last[-1]["id"] == f"m{total - 1}"
    # Scrolling back through the middle keeps articles only (chunks far away are released)
    scroller = page.css("[role=feed]")
    for fraction in (0.5, 0.2, 0.0):
        page.js("arguments[0].scrollTop = arguments[0].scrollHeight * arguments[1]", scroller, fraction)
        page.wait(
            lambda _, near=int(total * fraction): any(abs(c["posinset"] - 1 - near) < 60 for c in feed_children(page)),
            message=f"messages near {fraction:.0%} rendered",
        )
        assert_articles_only(page, total)
    assert len(page.all("[role=feed] > article")) < total, "rendering is not virtualized"


def test_live_appends_keep_articles_as_the_feed_children(page: Page, server: Server) -> None:
    total = 79  # two chunks, the second one short of full; few tokens, so nothing is compacted
    sid = seed_long(server, "Feed appends", total)
    page.open(f"/sessions/{sid}")
    page.text_appears("#live-channel", "Live over WebSocket")  # subscribed: appends are reported
    page.css('article[data-message-id="m0"]')
    page.css(".conv-head button:nth-child(2)").click()  # Jump to the end
    page.wait(lambda _: active(page) == f"m{total - 1}")
    assert_articles_only(page, total)
    # The focused message (m78) keeps the focus when its chunk is rendered again for an append
    for added in (total, total + 1):  # the first fills the second chunk, the next starts a third
        body = {"message": text(f"m{added}", "user", f"Land ho {added}")}
        status, answer = server.call("POST", f"/sessions/{sid}/messages", body)
        assert status == 201, answer
        page.css(f'article[data-message-id="m{added}"]', timeout=30)
        page.wait(lambda _, size=added + 1: {child["setsize"] for child in feed_children(page)} == {size})
        assert_articles_only(page, added + 1)
    assert active(page) == "m78"


def test_home_and_end_move_focus_from_a_message(page: Page, server: Server) -> None:
    total = 130
    sid = seed_long(server, "Home and End", total)
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="m0"]')
    page.js("document.querySelector('[role=feed]').focus()")
    page.driver.switch_to.active_element.send_keys("j")
    page.wait(lambda _: active(page) == "m0")
    page.driver.switch_to.active_element.send_keys("j")
    page.wait(lambda _: active(page) == "m1")
    # End from a focused message: focus moves to the last message, which is in view
    page.driver.switch_to.active_element.send_keys(Keys.END)
    page.wait(lambda _: active(page) == f"m{total - 1}", message="End moved focus to the last message")
    in_view = (
        "const el = document.activeElement, feed = document.querySelector('[role=feed]');"
        "const a = el.getBoundingClientRect(), b = feed.getBoundingClientRect();"
        "return a.top >= b.top - 1 && a.top < b.bottom;"
    )
    assert page.js(in_view)
    # K moves back across a chunk boundary (40 messages per chunk)
    page.driver.switch_to.active_element.send_keys("k")
    page.wait(lambda _: active(page) == f"m{total - 2}")
    # Home from a focused message: focus moves to the first message
    page.driver.switch_to.active_element.send_keys(Keys.HOME)
    page.wait(lambda _: active(page) == "m0", message="Home moved focus to the first message")
    assert page.js(in_view)
    # From a button inside a message too
    page.css('article[data-message-id="m0"] button.link').send_keys(Keys.END)
    page.wait(lambda _: active(page) == f"m{total - 1}", message="End from a button in a message")
    # And from the list itself, as before
    page.js("document.querySelector('[role=feed]').focus()")
    page.driver.switch_to.active_element.send_keys(Keys.HOME)
    page.wait(lambda _: active(page) == "m0", message="Home from the list")
    for _ in range(40):
        page.driver.switch_to.active_element.send_keys("j")
    page.wait(lambda _: active(page) == "m40", message="J crosses into the second chunk")
