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


RICH_MARKDOWN = """## Route to Lisbon

1. Leave **Porto** at dawn
2. Keep the coast *to port*

| Leg | Knots |
|---|---|
| Porto → Nazaré | 12 |

```python
print("ahoy")
```

> Fair winds. See [the chart](https://example.org/chart) and `tide.csv`.
"""

# Each payload would set window.__pwned, open an alert, load a remote resource or leave markup behind
HOSTILE_MARKDOWN = [
    "<script>window.__pwned = 'script'</script>Script tag",
    "[javascript link](javascript:window.__pwned='js-link')",
    "[JaVaScRiPt link](  JAVASCRIPT:alert(1) )",
    "<img src=x onerror=\"window.__pwned='img'\"> image with onerror",
    "![remote image](https://tracker.example.com/pixel.png)",
    "[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="data:text/html,<script>alert(1)</script>">raw data link</a>',
    '<iframe src="javascript:alert(1)"></iframe>frame',
    '<svg onload="window.__pwned=\'svg\'"><circle r="5"/></svg>svg',
    '<p style="background:url(https://tracker.example.com/x)" onclick="window.__pwned=1">styled</p>',
    '<form action="https://evil.example.com"><input name="q"><button>Send</button></form>form',
    "<details open ontoggle=\"window.__pwned='details'\">toggle</details>",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.__pwned='mxss'\">",
    '<a href="https://example.org" onmouseover="window.__pwned=1">hover me</a>',
    '<object data="javascript:alert(1)"></object><embed src="javascript:alert(1)">embedded',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">meta',
    '<base href="https://evil.example.com/">base',
    '[a safe link](https://example.org "quote \\" onmouseover=\\"window.__pwned=1") breaking out of its title',
    '[x](vbscript:msgbox(1)) <noscript><p title="</noscript><img src=x onerror=window.__pwned=2>">',
]


def test_markdown_in_messages_and_summaries_is_rendered(page: Page, server: Server) -> None:
    sid = server.create_session("Markdown")
    chain = [text("m1", "user", "Where to?"), text("m2", "assistant", RICH_MARKDOWN)]
    chain += [text(f"m{i}", "user" if i % 2 else "assistant", f"Turn {i}") for i in range(3, 7)]
    server.manager.append_all(sid, chain)
    server.manager.add_compaction(sid, "## Topic\n- first point\n- second point", "m3", "m4")
    page.open(f"/sessions/{sid}")
    body = page.css('article[data-message-id="m2"] .part-text')
    # "##" is an h4: a message's headings sit below the page's h1 and the conversation's h2
    assert body.find_element("css selector", "h4").text == "Route to Lisbon"
    assert [li.text for li in body.find_elements("css selector", "ol li")] == [
        "Leave Porto at dawn",
        "Keep the coast to port",
    ]
    assert body.find_element("css selector", "strong").text == "Porto"
    assert [td.text for td in body.find_elements("css selector", "table td")] == ["Porto → Nazaré", "12"]
    assert body.find_element("css selector", "pre code").text == 'print("ahoy")'
    link = body.find_element("css selector", "blockquote a")
    assert link.get_attribute("href") == "https://example.org/chart"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow" and link.get_attribute("target") == "_blank"
    summary = page.css("article.overlay .part-text")
    assert summary.find_element("css selector", "h4").text == "Topic"
    assert len(summary.find_elements("css selector", "ul li")) == 2
    # The stored text is still there, as it is, under Raw JSON
    raw = page.css('article[data-message-id="m2"] details.raw')
    raw.find_element("css selector", "summary").click()
    assert "| Leg | Knots |" in raw.find_element("css selector", "pre").text
    page.screenshot("markdown")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_hostile_markdown_never_executes(page: Page, server: Server, size: tuple[int, int]) -> None:
    sid = server.create_session(f"Hostile {size[0]}")
    messages = [text(f"h{i}", ("user", "assistant")[i % 2], payload) for i, payload in enumerate(HOSTILE_MARKDOWN)]
    server.manager.append_all(sid, messages)
    server.manager.add_compaction(sid, HOSTILE_MARKDOWN[0] + "\n\n" + HOSTILE_MARKDOWN[3], "h2", "h3")
    page.driver.set_window_size(*size)
    page.open(f"/sessions/{sid}")
    last = f"h{len(HOSTILE_MARKDOWN) - 1}"
    page.css(f'article[data-message-id="{last}"]')
    page.css("article.overlay")
    for article in page.all("article.msg"):  # hover and click everything a reader might touch
        for element in article.find_elements("css selector", ".part-text *"):
            if element.is_displayed():
                page.js("arguments[0].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))", element)
    time.sleep(0.5)
    assert page.js("return window.__pwned === undefined")
    rendered = page.css(".history")
    # None of the dangerous markup reached the page, and no URL but http(s)/mailto is a link
    for selector in (
        "script",
        "img",
        "iframe",
        "svg",
        "math",
        "form",
        "input",
        "object",
        "embed",
        "meta",
        "base",
        "style",
    ):
        assert rendered.find_elements("css selector", f".part-text {selector}") == [], selector
    handlers = page.js(
        "return [...document.querySelectorAll('.part-text *')].flatMap(el => [...el.attributes])"
        ".map(a => a.name).filter(n => n.startsWith('on') || n === 'style')"
    )
    assert handlers == []
    hrefs = page.js("return [...document.querySelectorAll('.part-text a[href]')].map(a => a.getAttribute('href'))")
    assert hrefs == ["https://example.org"], hrefs
    # The words are still shown, as text (raw HTML as the characters it was written with)
    assert "<script>window.__pwned = 'script'</script>Script tag" in page.css('article[data-message-id="h0"]').text
    assert "javascript link" in page.css('article[data-message-id="h1"]').text
    assert "[image: remote image]" in page.css('article[data-message-id="h4"]').text
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    page.screenshot(f"hostile-markdown-{size[0]}")


def open_tree(page: Page) -> Any:
    # A click that lands before the session page has wired its tabs is lost: click until the tab is
    # selected. The tree is drawn once its three reads answer, which a loaded CI machine makes slow.
    def selected(_: Any) -> bool:
        tab = page.css("#tab-tree")
        if tab.get_attribute("aria-selected") != "true":
            tab.click()
        return tab.get_attribute("aria-selected") == "true"

    page.wait(selected, message="the Tree tab is selected")
    return page.css("#session-tree", timeout=60)


def tree_rows(page: Page, scope: str = "#session-tree > details > ol.tree-path") -> list[str]:
    return [str(row.get_attribute("data-message-id")) for row in page.all(f"{scope} > li.tree-row")]


def test_the_tree_shows_the_latest_path_and_every_other_branch(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Tree")
    page.open(f"/sessions/{sid}")
    open_tree(page)
    page.text_appears("#tree-summary", "2 branches, branching at 1 message; latest leaf a1b")
    page.wait(lambda _: tree_rows(page) == ["u1", "a1b"], message="the path to the latest leaf")
    leaf = page.css('#session-tree li.tree-row[data-message-id="a1b"]')
    assert "latest leaf" in leaf.text and "Head for Porto instead" in leaf.text
    branch = page.css('#session-tree li.tree-row[data-message-id="u1"] .tree-branches > details')
    assert branch.get_attribute("open") is None  # collapsed until asked
    assert "Branch 1/2 at u1: a1" in branch.text
    branch.find_element("css selector", "summary").click()
    page.wait(lambda _: tree_rows(page, '.tree-branches > details[data-leaf-id="a1"] > ol.tree-path') == ["a1"])
    assert "Steer west past the lighthouse" in page.css('.tree-branches li.tree-row[data-message-id="a1"]').text
    # Long lines end in an ellipsis: the panel never scrolls sideways
    assert page.js("const pane = document.querySelector('.side-pane'); return pane.scrollWidth - pane.clientWidth") <= 0
    # A row leads to its message in the conversation
    page.css('.tree-branches li.tree-row[data-message-id="a1"] a.tree-id').click()
    page.css('article[data-message-id="a1"].highlight')
    page.screenshot("tree")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_branch_point_inside_a_compaction_overlay_is_in_the_tree(
    page: Page, server: Server, size: tuple[int, int]
) -> None:
    sid = server.create_session(f"Hidden branch {size[0]}")
    server.manager.append_all(sid, [text(f"c{i}", ("user", "assistant")[i % 2], f"Step {i}") for i in range(1, 5)])
    server.manager.append(sid, text("c4b", "assistant", "Step 4, told another way"), "c3")
    server.manager.append(sid, text("c5", "user", "Step 5"), "c4")
    server.manager.append_all(sid, [text(f"c{i}", ("user", "assistant")[i % 2], f"Step {i}") for i in range(6, 9)])
    server.manager.add_compaction(sid, "Steps two to five, summarized.", "c2", "c5")
    page.driver.set_window_size(*size)
    page.open(f"/sessions/{sid}")
    # The conversation has no switcher to offer (c3 is inside the summary) but points to the tree
    page.css('article[data-message-id="c8"]')
    assert page.all(".branch-switch") == []
    page.text_appears(".conv-info", "the Tree tab shows every branch")
    page.text_appears(".conv-info", "a branch point (c3) inside a compaction summary, so no switcher here")
    open_tree(page)
    page.wait(lambda _: len(tree_rows(page)) == 5, message="c1, the summary, c6, c7, c8")
    rows = tree_rows(page)
    assert rows[0] == "c1" and rows[1].startswith("compaction_") and rows[2:] == ["c6", "c7", "c8"]
    note = page.css("#session-tree .tree-unseen-note")
    page.text_appears("#session-tree .tree-unseen-note", "inside a compaction summary")
    assert "c3" in note.text
    other = page.css('#session-tree .tree-unseen .tree-branches > details[data-leaf-id="c4b"]')
    other.find_element("css selector", "summary").click()
    page.wait(lambda _: tree_rows(page, '.tree-unseen details[data-leaf-id="c4b"] > ol.tree-path') == ["c4b"])
    # The summary opens to its originals, where c3 carries its branches
    overlay = page.css("#session-tree li.tree-overlay > details")
    overlay.find_element("css selector", "summary").click()
    page.wait(lambda _: tree_rows(page, "li.tree-overlay ol.tree-originals") == ["c2", "c3", "c4", "c5"])
    assert "branches: 2" in page.css('li.tree-overlay li.tree-row[data-message-id="c3"]').text
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    page.screenshot(f"tree-overlay-branch-{size[0]}")


def test_the_tree_of_thousands_of_messages_loads_by_pages(page: Page, server: Server) -> None:
    sid = server.create_session("Big tree")
    chain = [text(f"t{i}", ("user", "assistant")[i % 2], f"Message {i}: " + "ahoy " * 5) for i in range(3_000)]
    for start in range(0, 3_000, 1_000):
        server.manager.append_all(sid, chain[start : start + 1_000])
    server.manager.append(sid, text("t11b", "assistant", "An early branch"), "t10")
    server.manager.append(sid, text("t3000", "user", "The last word"), "t2999")  # the latest leaf again
    page.open(f"/sessions/{sid}")
    open_tree(page)
    page.wait(lambda _: len(tree_rows(page)) == 200, timeout=30, message="the first page")
    assert "branches: 2" in page.css('#session-tree li.tree-row[data-message-id="t10"]').text
    started = time.perf_counter()
    page.css("#session-tree > details > .tree-more").click()
    page.wait(lambda _: len(tree_rows(page)) == 400, timeout=30, message="the second page")
    assert time.perf_counter() - started < 10
    assert len(page.all("#session-tree li.tree-row")) == 400  # only what was asked for is in the page
    # The early branch opens by itself: one path, read from its branch point on
    branch = page.css('li.tree-row[data-message-id="t10"] .tree-branches > details[data-leaf-id="t11b"]')
    branch.find_element("css selector", "summary").click()
    page.wait(lambda _: tree_rows(page, 'details[data-leaf-id="t11b"] > ol.tree-path') == ["t11b"])
    assert page.js("const pane = document.querySelector('.side-pane'); return pane.scrollWidth - pane.clientWidth") <= 0
    page.screenshot("tree-thousands")


def test_a_tree_with_several_roots_shows_each_root_as_a_branch(page: Page, server: Server) -> None:
    sid = server.create_session("Two roots")
    server.manager.append_all(sid, [text("r1", "user", "First start"), text("r1a", "assistant", "First answer")])
    server.manager.append_all(
        sid, [text("r2", "user", "Second start"), text("r2a", "assistant", "Second answer")], None
    )
    page.open(f"/sessions/{sid}")
    open_tree(page)
    page.text_appears("#tree-summary", "latest leaf r2a")
    first = page.css('#session-tree > details[data-leaf-id="r1a"]')
    second = page.css('#session-tree > details[data-leaf-id="r2a"]')
    assert "Root 1 of 2: r1" in first.text and "Root 2 of 2: r2" in second.text
    assert first.get_attribute("open") is None and second.get_attribute("open") is not None
    page.wait(lambda _: tree_rows(page, '#session-tree > details[data-leaf-id="r2a"] > ol.tree-path') == ["r2", "r2a"])
    first.find_element("css selector", "summary").click()
    page.wait(lambda _: tree_rows(page, '#session-tree > details[data-leaf-id="r1a"] > ol.tree-path') == ["r1", "r1a"])


def test_the_tree_offers_a_reload_when_the_session_changes(page: Page, server: Server) -> None:
    sid = seed_voyage(server, "Growing tree")
    page.open(f"/sessions/{sid}")
    open_tree(page)
    page.wait(lambda _: tree_rows(page) == ["u1", "a1b"])
    assert page.all("#tree-stale:not([hidden])") == []  # nothing changed yet
    status, _ = server.call("POST", f"/sessions/{sid}/messages", {"message": text("u2", "user", "And then?")})
    assert status == 201
    page.css("#tree-stale").click()
    page.wait(lambda _: tree_rows(page) == ["u1", "a1b", "u2"])
    assert page.all("#tree-stale:not([hidden])") == []


def test_a_branch_whose_summary_swallows_its_branch_point_is_shown_whole(page: Page, server: Server) -> None:
    sid = server.create_session("Summary across a branch point")
    server.manager.append_all(sid, [text(f"c{i}", ("user", "assistant")[i % 2], f"Step {i}") for i in range(1, 4)])
    server.manager.append(sid, text("c4b", "assistant", "Another step 4"), "c3")
    server.manager.append(sid, text("c5b", "user", "Another step 5"))
    server.manager.append(sid, text("c4", "assistant", "Step 4"), "c3")
    server.manager.append_all(sid, [text("c5", "user", "Step 5"), text("c6", "assistant", "Step 6")])
    server.manager.add_compaction(sid, "Steps two to the other four.", "c2", "c4b")  # applies on the c5b path only
    page.open(f"/sessions/{sid}")
    open_tree(page)
    page.wait(lambda _: tree_rows(page) == ["c1", "c2", "c3", "c4", "c5", "c6"])
    branch = page.css('li.tree-row[data-message-id="c3"] .tree-branches > details[data-leaf-id="c5b"]')
    branch.find_element("css selector", "summary").click()
    scope = 'details[data-leaf-id="c5b"] > ol.tree-path'
    page.wait(lambda _: len(tree_rows(page, scope)) == 3)
    rows = tree_rows(page, scope)
    assert rows[0] == "c1" and rows[1].startswith("compaction_") and rows[2] == "c5b"
    assert "c3 is inside a compaction summary on this path" in branch.text
