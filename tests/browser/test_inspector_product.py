"""The inspector reads like a product (issue 30): closed editors stay closed, no stray "null", and more."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.browser.conftest import Page, Server
from tests.browser.test_inspector import seed_voyage, text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = (1280, 800)
PHONE = (390, 844)


def visible_words(page: Page) -> list[str]:
    """Every word the reader sees on the page (innerText leaves out what is hidden)."""
    return re.findall(r"[\w$]+", str(page.js("return document.body.innerText")))


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_writable_block_editor_opens_only_on_edit(page: Page, server: Server, size: tuple[int, int]) -> None:
    sid = seed_voyage(server, "Closed editors")
    page.driver.set_window_size(*size)
    page.open(f"/sessions/{sid}")
    block = page.css('section.block[data-label="memory"]')
    form = block.find_element("css selector", "form.block-edit")
    # Closed: the Edit button only, no textarea, no Save or Cancel
    page.wait(lambda _: not form.is_displayed(), message="the editor starts closed")
    assert page.js("return getComputedStyle(arguments[0]).display", form) == "none"
    edit = page.css("button.edit-block")
    edit.click()
    page.wait(lambda _: form.is_displayed(), message="Edit opens the editor")
    assert not edit.is_displayed()
    assert page.js("return getComputedStyle(arguments[0]).display", form) == "grid"
    buttons = [button.text for button in form.find_elements("css selector", "button")]
    assert buttons == ["Save", "Cancel"]
    page.screenshot(f"block-editor-open-{size[0]}")
    form.find_element("css selector", "button[type=button]").click()
    page.wait(lambda _: not form.is_displayed(), message="Cancel closes the editor")
    assert page.css("button.edit-block").is_displayed()


def test_every_hidden_element_is_hidden_whatever_its_display(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Hidden stays hidden")
    page.open(f"/sessions/{sid}")
    page.css('section.block[data-label="memory"]')
    shown: Any = page.js(
        "return [...document.querySelectorAll('[hidden]')]"
        ".filter(el => getComputedStyle(el).display !== 'none').map(el => el.outerHTML.slice(0, 80))"
    )
    assert shown == []


def test_no_literal_null_under_blocks_without_a_description(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Descriptions")
    status, _ = server.call("GET", f"/sessions/{sid}/system-prompt")  # frozen: the Prompt panel shows its diff
    assert status == 200
    page.open(f"/sessions/{sid}")
    skills = page.css('section.block[data-label="skills"]')
    assert skills.find_elements("css selector", ".block-description") == []
    assert "null" not in re.findall(r"\w+", skills.text)
    assert "Facts learned about the user" in page.css('section.block[data-label="memory"]').text
    page.css("#tab-prompt").click()
    page.text_appears("#prompt-state", "matches a fresh render")
    for tab in ("context", "prompt", "actions"):
        page.css(f"#tab-{tab}").click()
        page.css(f"#panel-{tab} h2")
        assert "null" not in visible_words(page), f"a literal null on the {tab} panel"
        assert "undefined" not in visible_words(page), f"a literal undefined on the {tab} panel"


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_session_idle_over_its_threshold_says_why(page: Page, server: Server, size: tuple[int, int]) -> None:
    sid = server.create_session(f"Idle over the threshold {size[0]}")
    # Three long messages: over 3,000 tokens, yet all of them are the protected head (1) and tail (2)
    words = "the crew hauls the sails while the gulls circle the mast " * 70
    chain = [text(f"t{i}", ("user", "assistant")[i % 2], f"Turn {i}: {words}") for i in range(3)]
    status, appended = server.call("POST", f"/sessions/{sid}/messages", {"messages": chain})
    assert status == 201 and appended["tokenEstimate"] > appended["tokenThreshold"]
    deadline = time.monotonic() + 20
    while server.call("GET", f"/sessions/{sid}/status")[1]["compaction"]["state"] != "nothing_to_summarize":
        assert time.monotonic() < deadline, "the in-process worker did not finish"
        time.sleep(0.1)
    page.driver.set_window_size(*size)
    page.open(f"/sessions/{sid}")
    note = page.css("#idle-reason")
    page.text_appears("#idle-reason", "found nothing to summarize")
    assert note.get_attribute("data-code") == "nothing_to_summarize"
    assert "Not compacting:" in note.text and "over the compaction threshold (3,000)" in note.text
    assert page.css("#compaction-phase").text == "idle"
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    page.screenshot(f"idle-reason-{size[0]}")


def test_no_idle_reason_under_the_threshold(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Under the threshold")
    page.open(f"/sessions/{sid}")
    page.wait(lambda _: page.css("#token-meter").get_attribute("data-tokens") is not None)
    time.sleep(0.5)
    assert not page.all("#idle-reason:not([hidden])")


def test_an_overlay_shows_when_it_was_stored_not_when_it_was_read(page: Page, server: Server) -> None:
    sid = server.create_session("Overlay time")
    messages = [text(f"o{i}", "user" if i % 2 else "assistant", f"Original message number {i}") for i in range(1, 7)]
    server.manager.append_all(sid, messages)
    server.manager.add_compaction(sid, "Summary of two to four.", "o2", "o4")
    stored = server.call("GET", f"/sessions/{sid}/compactions")[1]["compactions"][0]["createdAt"]
    time.sleep(1.1)  # a read now is stamped at least a second later than the overlay was stored
    read_time = server.call("GET", f"/sessions/{sid}/history")[1]["messages"][1]["createdAt"]
    assert read_time != stored
    shown = []
    for _ in range(2):
        page.open(f"/sessions/{sid}")
        shown.append(page.css("article.overlay .msg-head time").get_attribute("datetime"))
        time.sleep(1.1)
    assert shown == [stored, stored]


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_sessions_list_shows_count_preview_and_what_usage_is_known(
    page: Page, server: Server, size: tuple[int, int]
) -> None:
    quiet = server.create_session(f"Quiet {size[0]}")
    voyage = seed_voyage(server, f"Voyage {size[0]}")
    priced = server.create_session(f"Priced {size[0]}")
    server.manager.append(priced, text("p1", "user", "What does the pilot cost?"))
    status, _ = server.call(
        "POST", f"/sessions/{priced}/usage", {"inputTokens": 1200, "outputTokens": 345, "cost": 0.0123}
    )
    assert status == 200, _
    page.driver.set_window_size(*size)
    page.open("/")
    row = page.css(f'tr[data-session-id="{voyage}"]')
    assert row.find_element("css selector", "td.message-count").text == "2"
    assert "assistant: Head for Porto instead" in row.find_element("css selector", ".preview").text
    empty = page.css(f'tr[data-session-id="{quiet}"]')
    assert empty.find_element("css selector", "td.message-count").text == "0"
    assert "No messages yet" in empty.text
    # Usage nobody posted is unknown, not zero; posted usage shows as figures
    assert "unknown" in empty.text and "$0.0000" not in empty.text
    paid = page.css(f'tr[data-session-id="{priced}"]')
    assert "$0.0123" in paid.text and "unknown" not in paid.text
    if size == DESKTOP:
        assert "1,200" in paid.text and "345" in paid.text
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px"
    page.screenshot(f"sessions-overview-{size[0]}")
    # The session's own page says the same
    page.open(f"/sessions/{quiet}")
    page.text_appears(".facts", "unknown")
    assert "$0.0000" not in page.css(".facts").text
