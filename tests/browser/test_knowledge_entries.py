"""A knowledge block's entries in the inspector: what the model stored, listed, and removed after a confirmation.

The entries belong to the tenant, so the Context panel of any session shows them; a removal leaves
search (the API's ``search_context`` no longer finds the entry) and the block's count drops.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import Page, Server
from tests.browser.test_block_history import read

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

ENTRIES = 'section.block[data-label="knowledge"] .block-entries'


def remember(server: Server, sid: str, title: str, content: str) -> None:
    entry = {"input": {"label": "knowledge", "content": content, "metadata": {"title": title}}}
    status, body = server.call("POST", f"/sessions/{sid}/tools/set_context", entry)
    assert (status, body["isError"]) == (200, False), body


def test_entries_are_listed_and_one_is_removed_after_a_confirmation(page: Page, server: Server) -> None:
    # Given two entries the model stored, one holding text that looks like markup
    sid = server.create_session("Knowledge")
    remember(server, sid, "Harbour fees", "Paid at the <b>marina</b> office")
    remember(server, sid, "Tides", "High water at six")
    # When the knowledge block's entries open in the Context panel
    page.open(f"/sessions/{sid}")
    toggle = 'section.block[data-label="knowledge"] button.show-entries'
    assert page.css(toggle).get_attribute("aria-expanded") == "false"
    read(page, lambda: page.css(toggle).click())
    page.wait(lambda _: page.css(toggle).get_attribute("aria-expanded") == "true")
    page.text_appears(f"{ENTRIES} [role=status]", "2 entries shown, in key order.")
    # Then both show in key order, their text as text
    keys = read(page, lambda: [item.get_attribute("data-key") for item in page.all(f"{ENTRIES} li")])
    assert keys == ["harbour-fees", "tides"]
    shown = read(page, lambda: page.css(f'{ENTRIES} li[data-key="harbour-fees"] pre').text)
    assert shown == "Paid at the <b>marina</b> office"
    assert page.all(f"{ENTRIES} b") == []
    read(page, lambda: page.js("arguments[0].scrollIntoView()", page.css(f"{ENTRIES} h4")))
    page.screenshot("knowledge-entries")

    # When one is removed, the question answered with Cancel first and then with Remove
    remove = f'{ENTRIES} li[data-key="harbour-fees"] button.remove-entry'
    read(page, lambda: page.css(remove).click())
    page.css("#confirm-dialog button[value=cancel]").click()
    status, _ = server.call("GET", "/knowledge/knowledge/entry?key=harbour-fees")
    assert status == 200  # cancelled: still there
    read(page, lambda: page.css(remove).click())
    page.css("#confirm-dialog button[value=confirm]").click()
    # Then the list (still open after the panel reloads) holds the other one only, and search no longer finds it
    page.text_appears(f"{ENTRIES} [role=status]", "1 entry shown, in key order.")
    assert read(page, lambda: [item.get_attribute("data-key") for item in page.all(f"{ENTRIES} li")]) == ["tides"]
    page.text_appears('section.block[data-label="knowledge"] pre.block-content', "1 entries indexed.")
    assert server.call("GET", "/knowledge/knowledge/entry?key=harbour-fees")[0] == 404
    status, found = server.call(
        "POST", f"/sessions/{sid}/tools/search_context", {"input": {"label": "knowledge", "query": "marina"}}
    )
    assert (status, found["output"]) == (200, "No results found.")
