"""The session inspector in a real headless Chromium: every flow of the issue, no console errors."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from selenium.webdriver.support.select import Select

from tests.browser.conftest import Page, Server

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]


def text(message_id: str, role: str, body: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": body}]}


def seed_voyage(server: Server, name: str) -> str:
    """A short conversation with a tool call, reasoning and a branch at u1 (a1 then a1b, the latest)."""
    sid = server.create_session(name)
    tool_call = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "The user wants a route; check the weather first."},
            {
                "type": "tool-get_weather",
                "toolCallId": "call-1",
                "state": "output-available",
                "input": {"city": "Lisbon"},
                "output": {"forecast": "fair wind", "knots": 12},
            },
            {"type": "text", "text": "Steer west past the lighthouse; a fair wind all the way."},
        ],
    }
    server.manager.append_all(sid, [text("u1", "user", "Plot a course to Lisbon"), tool_call])
    server.manager.append(sid, text("a1b", "assistant", "Head for Porto instead, the harbour is calmer."), "u1")
    return sid


def test_a_session_created_over_the_api_is_listed(page: Page, server: Server) -> None:
    # Given a session created over the HTTP API
    sid = server.create_session("Listed over the API")
    # When the page opens
    page.open("/")
    # Then it is in the list, newest activity first, with its usage columns (unknown until usage is posted)
    row = page.css(f'tr[data-session-id="{sid}"]')
    assert "Listed over the API" in row.text
    assert "unknown" in row.text and "$0.0000" not in row.text
    first = page.all("table.sessions tbody tr")[0]
    assert first.get_attribute("data-session-id") == sid
    page.screenshot("sessions")


def test_create_filter_rename_and_delete_from_the_list(page: Page, server: Server) -> None:
    page.open("/")
    page.css("#new-session-name").send_keys("Made in the browser")
    page.css("form[aria-label='Create a session'] button").click()
    page.text_appears("#session-title", "Made in the browser")
    sid = page.driver.current_url.rsplit("/", 1)[-1]
    page.open("/")
    page.css("#session-filter").send_keys("in the brow")
    page.wait(lambda _: len(page.all("table.sessions tbody tr")) == 1)
    row = page.css(f'tr[data-session-id="{sid}"]')
    row.find_element("css selector", "button[aria-label^='Rename']").click()
    field = page.css(f'tr[data-session-id="{sid}"] input')
    field.clear()
    field.send_keys("Renamed in the browser\n")
    page.text_appears(f'tr[data-session-id="{sid}"]', "Renamed in the browser")
    assert server.call("GET", f"/sessions/{sid}")[1]["name"] == "Renamed in the browser"
    page.css(f'tr[data-session-id="{sid}"] button[aria-label^="Delete"]').click()
    page.css("#confirm-dialog button[value=confirm]").click()
    page.wait(lambda _: not page.all(f'tr[data-session-id="{sid}"]'))
    assert server.call("GET", f"/sessions/{sid}")[0] == 404


def test_open_a_session_and_read_it(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Reading")
    page.open(f"/sessions/{sid}")
    page.text_appears(".history", "Head for Porto instead")
    # The path is root → latest leaf (a1b), which is marked
    leaf = page.css('article[data-message-id="a1b"]')
    assert "latest leaf" in leaf.text
    assert page.all('article[data-message-id="a1"]') == []
    page.text_appears("#session-title", "Reading")
    page.screenshot("conversation")


def test_switch_a_branch(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Branches")
    page.open(f"/sessions/{sid}")
    switch = page.css('article[data-message-id="a1b"] .branch-switch')
    assert "2/2" in switch.text
    switch.find_element("css selector", "button[aria-label='Previous branch']").click()
    message = page.css('article[data-message-id="a1"]')
    assert "1/2" in message.find_element("css selector", ".branch-switch").text
    # The other branch reads well: reasoning and the tool call compactly, with its input and output
    assert "Steer west past the lighthouse" in message.text
    assert "get_weather" in message.text and "Lisbon" in message.text
    assert not page.all('article[data-message-id="a1b"]')
    message.find_element("css selector", ".part-tool summary").click()
    page.text_appears('article[data-message-id="a1"] .part-tool', "knots")
    page.screenshot("branch-switched")
    latest = [b for b in page.all(".conv-head button") if b.text == "Show the latest leaf"]
    assert latest and latest[0].is_displayed()
    latest[0].click()
    page.css('article[data-message-id="a1b"]')


def test_expand_a_compaction_overlay(page: Page, server: Server) -> None:
    sid = server.create_session("Compacted")
    messages = [text(f"m{i}", "user" if i % 2 else "assistant", f"Original message number {i}") for i in range(1, 9)]
    server.manager.append_all(sid, messages)
    server.manager.add_compaction(sid, "Summary: the crew discussed messages two to five.", "m2", "m5")
    page.open(f"/sessions/{sid}")
    card = page.css("article.overlay")
    assert "Summary: the crew discussed" in card.text
    assert "m2" in card.text and "m5" in card.text
    assert not page.all('article[data-message-id="m3"]')
    card.find_element("css selector", "button.expand-originals").click()
    page.text_appears("article.overlay .originals", "Original message number 5")
    originals = [el.get_attribute("data-message-id") for el in page.all("article.overlay .originals article")]
    assert originals == ["m2", "m3", "m4", "m5"]
    page.screenshot("overlay-expanded")


def test_edit_the_memory_block_and_see_the_usage_bar_change(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Memory")
    page.open(f"/sessions/{sid}")
    meter = page.css('section.block[data-label="memory"] meter')
    assert float(meter.get_attribute("value")) == 0
    page.css("button.edit-block").click()
    area = page.css('section.block[data-label="memory"] textarea')
    area.send_keys("The captain prefers calm harbours and sails only with a fair wind from the north.")
    page.css('section.block[data-label="memory"] button[type=submit]').click()
    page.wait(lambda _: float(page.css('section.block[data-label="memory"] meter').get_attribute("value")) > 0)
    usage = page.css('section.block[data-label="memory"] .usage-text').text
    assert "/ 200 tokens" in usage and "(0%)" not in usage
    page.screenshot("context")


def test_refresh_the_prompt_and_see_the_diff(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Prompt")
    assert server.call("GET", f"/sessions/{sid}/system-prompt")[0] == 200  # freeze it
    status, _ = server.call("PUT", f"/sessions/{sid}/context/memory", {"content": "Destination: Lisbon"})
    assert status == 200
    page.open(f"/sessions/{sid}")
    page.css("#tab-prompt").click()
    page.text_appears("#prompt-state", "stale")
    added = [el.text for el in page.all("pre.diff ins")]
    assert any("Destination: Lisbon" in line for line in added), added
    page.screenshot("prompt-diff")
    page.css("#refresh-prompt").click()
    page.text_appears("#prompt-state", "matches a fresh render")
    # The panel may render the frozen prompt again just after its state: wait on it (a held element goes stale)
    page.text_appears("#frozen-prompt", "Destination: Lisbon")


def test_call_set_context_from_the_tool_form(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Tools")
    page.open(f"/sessions/{sid}")
    page.css("#tab-actions").click()
    page.wait(lambda _: page.all("#tool-name option[value=set_context]"), message="the tools are listed")
    Select(page.css("#tool-name")).select_by_value("set_context")
    Select(page.css("#tool-set_context-label")).select_by_value("memory")
    page.css("#tool-set_context-content").send_keys("Prefers window seats")
    page.css("#tool-call").click()
    page.text_appears("#tool-output", "Written to memory")
    block = server.call("GET", f"/sessions/{sid}/context/memory")[1]
    assert block["content"] == "Prefers window seats"
    page.screenshot("tool-form")
    # The tool's refusal (memory holds at most 200 tokens) is its answer, shown as text
    field = page.css("#tool-set_context-content")
    field.clear()
    field.send_keys("word " * 400)
    page.css("#tool-call").click()
    page.wait(lambda _: "Written to memory" not in page.css("#tool-output").text)
    assert "200" in page.css("#tool-output").text
    assert "refused" in page.css("#tool-output").get_attribute("class")
    # A form that misses a required field says which one, before calling the API
    page.css("#tool-set_context-content").clear()
    page.css("#tool-call").click()
    page.text_appears("#tool-error", "“content” is required")


def test_the_token_meter_moves_while_a_script_appends(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Live")
    page.open(f"/sessions/{sid}")
    page.wait(lambda _: page.css("#token-meter").get_attribute("data-tokens") is not None)
    before = int(page.css("#token-meter").get_attribute("data-tokens"))
    history_calls = "return performance.getEntriesByType('resource').filter(e => e.name.includes('/history')).length"
    loads_before = page.js(history_calls)
    stop = threading.Event()

    def writer() -> None:
        for i in range(40):
            if stop.is_set():
                return
            body = {"message": text(f"live-{i}", "user", f"Live note {i}: wind {i} knots from the north-west")}
            server.call("POST", f"/sessions/{sid}/messages", body)
            time.sleep(0.15)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        page.wait(lambda _: int(page.css("#token-meter").get_attribute("data-tokens") or 0) > before, timeout=30)
        page.text_appears(".history", "Live note", timeout=30)
        page.screenshot("live")
        # Appends are followed child by child, without reloading the history from its first page
        assert page.js(history_calls) == loads_before
    finally:
        stop.set()
        thread.join(timeout=20)
    label = page.css("#token-meter-label").text
    assert "of 3,000 tokens before compaction" in label


def test_a_10000_message_session_scrolls_without_freezing(page: Page, server: Server) -> None:
    sid = server.create_session("Ten thousand")
    batch = [
        text(f"b{i}", "user" if i % 2 == 0 else "assistant", f"Message {i}: " + "ahoy " * (i % 7 + 3))
        for i in range(10_000)
    ]
    for start in range(0, 10_000, 2_000):
        server.manager.append_all(sid, batch[start : start + 2_000])
    page.open(f"/sessions/{sid}")
    page.text_appears(".conv-info", "10,000 messages")
    page.css('article[data-message-id="b0"]')
    scroller = page.css(".history")
    worst = 0.0
    for fraction in (0.1, 0.3, 0.5, 0.8, 1.0):
        page.js("arguments[0].scrollTop = arguments[0].scrollHeight * arguments[1]", scroller, fraction)
        started = time.perf_counter()
        page.js("return 1")  # a round trip through the page's main thread
        worst = max(worst, time.perf_counter() - started)
        time.sleep(0.3)
    # Jump to the end: the last message is loaded by pages and rendered
    page.css(".conv-head button:nth-child(2)").click()
    page.css('article[data-message-id="b9999"]', timeout=60)
    rendered = len(page.all("article.msg"))
    assert rendered < 600, f"{rendered} messages in the DOM: rendering is not virtualized"
    assert worst < 2.0, f"the page's main thread was blocked for {worst:.2f} s"
    page.screenshot("ten-thousand")


def test_errors_from_the_api_are_shown_in_words(page: Page, server: Server) -> None:
    page.allowed_errors.append("/sessions/does-not-exist")  # the browser logs the 404 it was asked to show
    page.open("/sessions/does-not-exist")
    page.text_appears("[role=alert]", "Session 'does-not-exist' not found (HTTP 404, not_found)")


def test_readable_at_phone_width(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Phone")
    page.driver.set_window_size(390, 844)
    page.open(f"/sessions/{sid}")
    page.text_appears(".history", "Head for Porto")
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at phone width"
    page.screenshot("phone")


def test_keyboard_navigation(page: Page, server: Server) -> None:
    from selenium.webdriver.common.keys import Keys

    sid = seed_voyage(server, "Keyboard")
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="a1b"]')
    # Tabs move with the arrow keys
    page.css("#tab-context").click()
    page.driver.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    assert page.driver.switch_to.active_element.get_attribute("id") == "tab-proposals"
    assert page.css("#panel-proposals").is_displayed()
    # J moves between messages in the conversation feed
    page.js("document.querySelector('.history').focus()")
    page.driver.switch_to.active_element.send_keys("j")
    page.wait(lambda _: page.driver.switch_to.active_element.get_attribute("data-message-id") == "u1")
    page.driver.switch_to.active_element.send_keys("j")
    page.wait(lambda _: page.driver.switch_to.active_element.get_attribute("data-message-id") == "a1b")


def test_a_search_hit_opens_its_message(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Searchable")
    server.manager.append(sid, text("u9", "user", "Is the albatross a good omen?"))
    page.open("/")
    field = page.css("#global-search-input")
    field.send_keys("albatross\n")
    hit = page.css(f'.hit a[href$="/sessions/{sid}/messages/u9"]')
    assert "albatross" in hit.text
    page.screenshot("search")
    hit.click()
    target = page.css('article[data-message-id="u9"].highlight')
    assert "good omen" in target.text


def test_fork_here_creates_a_linked_session(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Fork source")
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="u1"] button[aria-label^="Fork"]').click()
    assert page.css("#fork-at").get_attribute("value") == "u1"
    page.css("#fork-name").send_keys("Forked in the browser")
    page.css("#fork-at").submit()
    link = page.css("#panel-actions a[href^='#/sessions/']")
    assert link.text == "Forked in the browser"
    link.click()
    page.text_appears("#session-title", "Forked in the browser")
    page.text_appears(".facts", "Forked from")
    page.css(f'.facts a[href="#/sessions/{sid}"]')
    page.text_appears(".history", "Plot a course to Lisbon")  # the path up to u1, under new ids
    assert "Head for Porto" not in page.css(".history").text


def test_compact_now_shows_the_summary_card(page: Page, server: Server) -> None:
    sid = server.create_session("Compact in the browser")
    words = "the tide turns and the crew hauls the sails while gulls circle the mast"
    chain = [text(f"c{i}", ("user", "assistant")[i % 2], f"Turn {i}: {words}") for i in range(12)]
    server.manager.append_all(sid, chain)
    page.open(f"/sessions/{sid}")
    page.css('article[data-message-id="c0"]')
    page.css("#tab-actions").click()
    page.css("#compact-now").click()
    page.text_appears("#compact-result", "queued")
    # The in-process worker commits the overlay; the live refresh shows it without a reload
    card = page.css("article.overlay", timeout=30)
    assert "Compaction summary" in card.text


def test_the_sessions_list_pages(page: Page, server: Server) -> None:
    for i in range(60):
        server.manager.create_session(f"Bulk session {i:02d}")
    page.open("/")
    page.css("table.sessions tbody tr")
    assert len(page.all("table.sessions tbody tr")) == 50
    page.css("#load-more").click()
    page.wait(lambda _: len(page.all("table.sessions tbody tr")) > 50)
    assert "Bulk session 00" in page.css("table.sessions tbody").text
