"""The inspector holds up under awkward input: odd characters in addresses, long words, live appends, headings.

Each test here failed before the fix it guards: a search typed with ``+``, ``&``, ``?`` or ``%``
ran for something else; a malformed address left the page blank; a long name made the page scroll
sideways; a live append dropped the note about a branch point inside a compaction summary; a
Markdown heading in a message broke the page's heading outline; Escape left the rename form open.
"""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import Page, Server
from tests.browser.test_block_history import read
from tests.browser.test_inspector import seed_voyage, text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = (1280, 800)
PHONE = (390, 844)


def sideways(page: Page) -> int:
    """How far the page scrolls sideways (0 or less: it does not)."""
    return int(page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth"))


# --- addresses ---------------------------------------------------------------------------------

TYPED = ["C++", "R&D", "what?", "%41BC", "a+b=c & d", "50% off", "#hash/tag"]


@pytest.mark.parametrize("typed", TYPED)
def test_a_search_runs_for_exactly_what_was_typed(page: Page, server: Server, typed: str) -> None:
    page.open("/")
    field = page.css("#global-search-input")
    field.send_keys(typed + "\n")
    page.wait(lambda _: page.css("#search-title").text == f"Search: {typed}", message=f"a search for {typed!r}")
    page.wait(lambda _: "Searching" not in page.css(".page .muted[aria-live]").text, message="the search finished")
    # Reloading the address gives the same search, and the box shows it as typed
    page.driver.refresh()
    page.wait(lambda _: page.css("#search-title").text == f"Search: {typed}", message="the same search after a reload")
    assert page.css("#global-search-input").get_attribute("value") == typed


@pytest.mark.parametrize("typed", ["R&D", "C++", "%41BC"])
def test_the_session_filter_reloads_as_typed(page: Page, server: Server, typed: str) -> None:
    sid = server.create_session(f"Lab {typed}")
    page.open("/")
    page.css("#session-filter").send_keys(typed)
    page.wait(lambda _: len(page.all("table.sessions tbody tr[data-session-id]")) >= 1)
    page.driver.refresh()
    page.wait(lambda _: page.css("#session-filter").get_attribute("value") == typed, message="the filter as typed")
    page.css(f'tr[data-session-id="{sid}"]')
    names = [row.find_element("css selector", "td.name a").text for row in page.all("tbody tr[data-session-id]")]
    assert names and all(typed.lower() in name.lower() for name in names)


@pytest.mark.parametrize(
    "fragment", ["/search?q=%E0%A4%A", "/sessions/%E0%A4%A", "/?filter=%ZZ", "/sessions/abc/messages/%"]
)
def test_a_malformed_address_is_explained_not_blank(page: Page, server: Server, fragment: str) -> None:
    page.open(fragment)
    alert = page.css("main [role=alert]")
    assert "could not be read" in alert.text
    assert page.css("main a[href='#/']").is_displayed()
    # A good address works again afterwards
    page.js("location.hash = '#/'")
    page.css("#sessions-title")


# --- long words ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_long_session_name_never_makes_the_page_scroll_sideways(
    page: Page, server: Server, size: tuple[int, int]
) -> None:
    name = "N" * 1000
    sid = server.create_session(name)
    server.manager.append_all(sid, [text("u1", "user", "W" * 400), text("a1", "assistant", "Fine.")])
    page.driver.set_window_size(*size)
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="a1"]')
    page.wait(lambda _: page.css("#token-meter").get_attribute("data-tokens") is not None)
    assert page.css("#session-title").text.replace("\n", "") == name
    assert sideways(page) <= 0, f"the session page scrolls sideways by {sideways(page)}px"
    head = page.css(".session-head")
    assert page.js("return arguments[0].scrollWidth - arguments[0].clientWidth", head) <= 0
    page.screenshot(f"long-name-session-{size[0]}")
    # The search page, with a long query, and the sessions list hold too
    page.open(f"/search?q={'Q' * 600}")
    page.css("#search-title")
    assert sideways(page) <= 0, f"the search page scrolls sideways by {sideways(page)}px"
    page.open("/")
    page.css(f'tr[data-session-id="{sid}"]')
    assert sideways(page) <= 0, f"the sessions list scrolls sideways by {sideways(page)}px"


def remember(server: Server, sid: str, title: str, content: str) -> str:
    entry = {"input": {"label": "knowledge", "content": content, "metadata": {"title": title}}}
    status, body = server.call("POST", f"/sessions/{sid}/tools/set_context", entry)
    assert (status, body["isError"]) == (200, False), body
    return title.lower()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_long_knowledge_key_wraps_inside_its_list(page: Page, server: Server, size: tuple[int, int]) -> None:
    sid = server.create_session(f"Long key {size[0]}")
    key = remember(server, sid, "K" * 60, "L" * 300)  # the longest key a title gives
    try:
        page.driver.set_window_size(*size)
        page.open(f"/sessions/{sid}")
        toggle = 'section.block[data-label="knowledge"] button.show-entries'
        read(page, lambda: page.css(toggle).click())
        item = f'.block-entries li[data-key="{key}"]'
        page.css(item)
        pane = "document.querySelector('.side-pane')"
        assert read(page, lambda: page.js(f"return {pane}.scrollWidth - {pane}.clientWidth")) <= 0
        overflow: Any = read(
            page,
            lambda: page.js(
                "const list = document.querySelector('.block-entries ul.entries').getBoundingClientRect();"
                "return [...document.querySelectorAll(arguments[0] + ' *')]"
                ".map(el => el.getBoundingClientRect().right - list.right).filter(d => d > 0.5).length",
                item,
            ),
        )
        assert overflow == 0, "something in the entry reaches past its list"
        assert sideways(page) <= 0
        read(page, lambda: page.js("arguments[0].scrollIntoView()", page.css(item)))
        page.screenshot(f"long-knowledge-key-{size[0]}")
    finally:
        server.call("DELETE", f"/knowledge/knowledge/entry?key={key}")


# --- live append ---------------------------------------------------------------------------------


def test_the_note_on_a_branch_point_inside_a_summary_stays_after_a_live_append(page: Page, server: Server) -> None:
    sid = server.create_session("Hidden branch, then more")
    server.manager.append_all(sid, [text(f"c{i}", ("user", "assistant")[i % 2], f"Step {i}") for i in range(1, 5)])
    server.manager.append(sid, text("c4b", "assistant", "Step 4, told another way"), "c3")
    server.manager.append(sid, text("c5", "user", "Step 5"), "c4")
    server.manager.append_all(sid, [text(f"c{i}", ("user", "assistant")[i % 2], f"Step {i}") for i in range(6, 9)])
    server.manager.add_compaction(sid, "Steps two to five, summarized.", "c2", "c5")
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="c8"]')
    note = "a branch point (c3) inside a compaction summary, so no switcher here"
    page.text_appears(".conv-info", note)
    page.text_appears("#live-channel", "Live over WebSocket")  # subscribed: the append is reported
    history_calls = "return performance.getEntriesByType('resource').filter(e => e.name.includes('/history')).length"
    loads_before = page.js(history_calls)
    status, body = server.call("POST", f"/sessions/{sid}/messages", {"message": text("c9", "user", "Step 9")})
    assert status == 201, body
    page.css('article[data-message-id="c9"]')
    page.text_appears(".conv-info", "6 messages from the root to the latest leaf")
    assert page.js(history_calls) == loads_before  # appended live (appendTail), not reloaded
    assert note in page.css(".conv-info").text


# --- headings and the rename form ------------------------------------------------------------------

HEADINGS = "# Big title\n\nText.\n\n## Middle\n\n### Small\n\n###### Tiny"


def test_markdown_headings_sit_below_the_page_headings(page: Page, server: Server) -> None:
    sid = server.create_session("Headings")
    server.manager.append_all(sid, [text("h1", "user", "Outline?"), text("h2", "assistant", HEADINGS)])
    server.manager.append_all(sid, [text(f"h{i}", ("user", "assistant")[i % 2], f"Turn {i}") for i in range(3, 7)])
    server.manager.add_compaction(sid, "# Summary\n\n## Points", "h3", "h4")
    page.open(f"/sessions/{sid}")
    body = page.css('article[data-message-id="h2"] .part-text')
    levels = [
        (el.tag_name, el.text) for el in body.find_elements("css selector", "h1, h2, h3, h4, h5, h6, [role=heading]")
    ]
    assert levels == [("h3", "Big title"), ("h4", "Middle"), ("h5", "Small"), ("h6", "Tiny")]
    page.css("article.overlay .part-text h3")
    # One h1 on the page (the session's name); the conversation's own h2 is not outranked
    assert [el.text for el in page.all("h1")] == ["Headings"]
    assert page.all(".history h1, .history h2") == []
    # Still sized as headings of their level in the text
    sizes = page.js(
        "return [...arguments[0].querySelectorAll('h3, h4, h5, h6')]"
        ".map(el => parseFloat(getComputedStyle(el).fontSize))",
        body,
    )
    assert sizes[0] > sizes[1] > sizes[2]


def test_escape_closes_the_rename_form_on_the_session_page(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Escape hatch")
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="a1b"]')
    rename = next(b for b in page.all(".session-head .row button") if b.text == "Rename")
    rename.click()
    field = page.css(".session-head form input")
    field.send_keys(Keys.END, " typed but dropped")
    field.send_keys(Keys.ESCAPE)
    page.wait(lambda _: not page.all(".session-head form"), message="Escape closes the form")
    assert page.css("#session-title").text == "Escape hatch"
    assert page.driver.switch_to.active_element.text == "Rename"  # focus goes back to the button
    assert server.call("GET", f"/sessions/{sid}")[1]["name"] == "Escape hatch"
    # Cancel closes it the same way
    page.driver.switch_to.active_element.click()
    page.css(".session-head form input")
    next(b for b in page.all(".session-head form button") if b.text == "Cancel").click()
    page.wait(lambda _: not page.all(".session-head form"), message="Cancel closes the form")
    assert page.css("#session-title").text == "Escape hatch"
    # The form still opens again and saves, and the breadcrumb follows
    page.driver.switch_to.active_element.click()
    field = page.css(".session-head form input")
    field.send_keys(Keys.END, " again\n")
    page.text_appears("#session-title", "Escape hatch again")
    page.text_appears(".crumbs", "Escape hatch again")
