"""Memory proposals in the inspector (issue 26 item 5): reflect, see what reflection proposes, approve or reject.

The browser server's profile has reflection on with approval required (tests/browser/conftest.py), so every
proposal waits in ``pending`` until the page (or a request behind its back) decides it. Live events may redraw the
panel at any moment, so reads and clicks find their element afresh through ``page.wait``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import Page, Server, checked_page
from tests.browser.test_block_history import read, version
from tests.browser.test_inspector import text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

# A second server whose memory is shared by the user's sessions and whose reflection applies every edit at once.
AT_ONCE_PROFILE = """
blocks:
  - {label: memory, kind: writable, scope: subject, description: Facts about the user, max_tokens: 200}
reflection: {enabled: true, block: memory, approval: none, extractor: {kind: offline}}
compaction: {enabled: false}
"""


@pytest.fixture(scope="module")
def at_once_server(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from tests.support.local_server import local_server

    data = tmp_path_factory.mktemp("reflect-at-once") / "d"
    with local_server(data, profile=AT_ONCE_PROFILE) as running:
        yield Server(url=running.url, data_dir=data)
        # The session's Chromium keeps its keep-alive connections to this server open, and a graceful stop waits
        # for them (the shared server stops after the browser quits): stop this one outright, it holds nothing.
        running.process.kill()


@pytest.fixture
def at_once_page(driver: Any, at_once_server: Server, request: pytest.FixtureRequest) -> Iterator[Page]:
    with checked_page(driver, at_once_server, request.node.name) as wrapper:
        yield wrapper
    driver.get("about:blank")  # nothing keeps polling this module's server once it stops


def converse(server: Server, name: str, *messages: dict[str, Any]) -> str:
    sid = server.create_session(name)
    status, body = server.call("POST", f"/sessions/{sid}/messages", {"messages": list(messages)})
    assert status == 201, body
    return sid


def reflected(server: Server, sid: str, count: int) -> list[dict[str, Any]]:
    """Reflect over HTTP and wait for ``count`` pending proposals (the local server's worker runs the job)."""
    status, body = server.call("POST", f"/sessions/{sid}/reflect")
    assert (status, body["status"]) == (202, "queued"), body
    deadline = time.monotonic() + 15
    while True:
        status, body = server.call("GET", f"/sessions/{sid}/proposals?status=pending")
        assert status == 200, body
        if len(body["proposals"]) >= count:
            return list(body["proposals"])
        assert time.monotonic() < deadline, f"fewer than {count} proposals: {body}"
        time.sleep(0.1)


def open_proposals(page: Page, sid: str) -> None:
    page.open(f"/sessions/{sid}")
    read(page, lambda: page.css("#tab-proposals").click())
    page.wait(lambda _: page.css("#tab-proposals").get_attribute("aria-selected") == "true")
    page.wait(lambda _: "Loading" not in page.css("#proposals-summary").text)


def card(page: Page, content: str) -> Any:
    """The drawn proposal whose proposed content is ``content`` (not yet drawn: NoSuchElementException)."""
    from selenium.common.exceptions import NoSuchElementException

    found = page.js(
        "return [...document.querySelectorAll('article.proposal')]"
        ".find((a) => a.querySelector('pre.proposal-content').textContent === arguments[0]) || null",
        content,
    )
    if found is None:
        raise NoSuchElementException(f"no proposal of {content!r}")
    return found


def proposal_text(page: Page, content: str) -> str:
    return str(read(page, lambda: card(page, content).text))


def status_of(page: Page, content: str) -> str:
    return str(read(page, lambda: card(page, content).get_attribute("data-status")))


def press(page: Page, content: str, button: str) -> None:
    """Press Approve or Reject of one proposal from the keyboard (focus, then Enter)."""

    from selenium.common.exceptions import ElementNotInteractableException, NoSuchElementException

    def act() -> None:
        element = card(page, content).find_element("css selector", f"button.{button}")
        page.js("arguments[0].focus()", element)
        try:
            if page.driver.switch_to.active_element != element:
                raise NoSuchElementException("focus went elsewhere (the list was redrawn): ask again")
            element.send_keys("\n")
        except ElementNotInteractableException as redrawn:  # a redraw took the button away: nothing was pressed
            raise NoSuchElementException(str(redrawn)) from redrawn

    read(page, act)


def test_reflect_now_lists_proposals_and_approve_and_reject_decide_them(page: Page, server: Server) -> None:
    # Given a conversation in which the user gives their name and a preference (and the assistant its own name)
    sid = converse(
        server,
        "About Ada",
        text("u1", "user", "Hi! My name is Ada."),
        text("a1", "assistant", "Nice to meet you, Ada. My name is Claude."),
        text("u2", "user", "I prefer <b>short</b> answers."),
    )
    # When the Memory proposals tab opens, it says there are none yet
    open_proposals(page, sid)
    page.text_appears("#proposals-summary", "No proposals yet")
    # And Reflect now is pressed
    read(page, lambda: page.css("#reflect-now").click())
    # Then the reflection's two proposals arrive and wait for approval
    page.text_appears("#reflect-state", "proposed 2 edits (2 waiting for approval)", timeout=20)
    page.wait(lambda _: len(page.all('article.proposal[data-status="pending"]')) == 2)
    name = proposal_text(page, "Name: Ada")
    assert "Append a line to memory" in name and "waiting for approval" in name
    assert "scope session: this session only" in name
    assert "From: message u1" in name and "Based on: any version" in name
    preference = proposal_text(page, "Prefers: <b>short</b> answers")  # shown as the characters typed
    assert "From: message u2" in preference
    assert page.all("article.proposal b") == []  # proposed content is text, never markup
    page.text_appears("#tab-proposals .tab-count", "2")
    page.js(
        "document.querySelector('.side-pane').scrollTop = 0;"
        "window.scrollTo(0, document.querySelector('.session-body').offsetTop - 60)"
    )
    page.screenshot("memory-proposals")

    # When the name is approved from the keyboard
    press(page, "Name: Ada", "approve")
    # Then it is applied as version 1 of memory, keeps its place in the list and loses its buttons
    page.wait(lambda _: status_of(page, "Name: Ada") == "applied")
    assert "Made: version 1 of memory" in proposal_text(page, "Name: Ada")
    assert read(page, lambda: card(page, "Name: Ada").find_elements("css selector", "button")) == []
    # And the preference is rejected
    press(page, "Prefers: <b>short</b> answers", "reject")
    page.wait(lambda _: status_of(page, "Prefers: <b>short</b> answers") == "rejected")
    page.wait(lambda _: not any(count.is_displayed() for count in page.all("#tab-proposals .count")))
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert (status, block["content"], block["version"]) == (200, "Name: Ada", 1)

    # And the Context tab shows the new content, whose history names the reflection and the message it read
    read(page, lambda: page.css("#tab-context").click())
    page.text_appears('section.block[data-label="memory"] pre.block-content', "Name: Ada")
    # (from the keyboard: the corner notice of the decision may still cover the button)
    read(page, lambda: page.css('section.block[data-label="memory"] button.show-history').send_keys("\n"))
    first = read(page, lambda: page.css(version(1)).text)
    assert "Reflection in this session, having read message u1" in first

    # And a proposal's source link opens that message, with the proposals still on show
    read(page, lambda: page.css("#tab-proposals").click())
    link = "a.message-link"
    read(page, lambda: card(page, "Prefers: <b>short</b> answers").find_element("css selector", link).send_keys("\n"))
    assert "I prefer <b>short</b> answers." in page.css('article[data-message-id="u2"].highlight').text
    assert page.css("#tab-proposals").get_attribute("aria-selected") == "true"


def test_approving_a_proposal_decided_meanwhile_says_why_and_shows_where_it_stands(page: Page, server: Server) -> None:
    # Given a pending proposal on show, the page quiet ...
    sid = converse(server, "Decided elsewhere", text("u1", "user", "My name is Bo."))
    [proposal] = reflected(server, sid, 1)
    # (the Context panel, shown first, says a proposal waits for the memory block and leads to it)
    page.open(f"/sessions/{sid}")
    note = 'section.block[data-label="memory"] .block-proposals'
    page.text_appears(note, "1 memory edit proposed by reflection waits for approval.")
    page.js("arguments[0].scrollIntoView({block: 'center'})", page.css(note))
    page.screenshot("memory-proposals-context-note")
    read(page, lambda: page.css(f"{note} button.review-proposals").send_keys("\n"))
    page.wait(lambda _: page.driver.switch_to.active_element.get_attribute("id") == "tab-proposals")
    assert status_of(page, "Name: Bo") == "pending"
    page.text_appears("#live-channel", "Live over WebSocket")
    page.js("document.querySelector('article.proposal').dataset.drawn = 'before'")
    # ... when another reviewer rejects it over HTTP behind the page's back
    status, body = server.call("POST", f"/sessions/{sid}/proposals/{proposal['id']}/reject")
    assert (status, body["status"]) == (200, "rejected")
    time.sleep(1)
    assert page.js("return document.querySelector('article.proposal').dataset.drawn") == "before"
    page.allowed_errors.append("/approve")  # the browser logs the 409 the page was asked to show
    # And the page approves it
    press(page, "Name: Bo", "approve")
    # Then it says, in words, that the proposal is no longer pending, and shows it rejected
    page.text_appears("#panel-proposals .error", "is rejected, not pending; nothing was changed (HTTP 409, conflict)")
    page.wait(lambda _: status_of(page, "Name: Bo") == "rejected")
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert (status, block["content"]) == (200, "")
    page.screenshot("memory-proposals-conflict")


def test_a_replacement_of_a_block_that_moved_on_is_refused_and_shown_failed(page: Page, server: Server) -> None:
    # Given memory at version 1 naming the user, who then gives another name: reflection proposes a replacement
    sid = converse(server, "Stale replacement", text("u1", "user", "Hello."))
    status, _ = server.call("PUT", f"/sessions/{sid}/context/memory", {"content": "Name: Ada", "mode": "replace"})
    assert status == 200
    status, _ = server.call("POST", f"/sessions/{sid}/messages", {"message": text("u2", "user", "My name is Bea.")})
    assert status == 201
    [proposal] = reflected(server, sid, 1)
    assert (proposal["operation"], proposal["basedOnVersion"]) == ("replace", "1")
    # And the block is written again (version 2) before anyone approves
    status, _ = server.call("PUT", f"/sessions/{sid}/context/memory", {"content": "Likes: tea", "mode": "append"})
    assert status == 200
    # When the panel opens, it warns that approving will be refused
    open_proposals(page, sid)
    replacement = proposal_text(page, "Name: Bea")
    assert "Replace the content of memory" in replacement and "Based on: version 1" in replacement
    assert "memory changed since this was proposed (now version 2)" in replacement
    # And approving it anyway fails: the proposal is shown failed, with the reason the block gave
    page.allowed_errors.append("/approve")
    press(page, "Name: Bea", "approve")
    page.text_appears("#panel-proposals .error", "Could not approve the proposal")
    page.wait(lambda _: status_of(page, "Name: Bea") == "failed")
    assert "Refused:" in proposal_text(page, "Name: Bea")
    status, block = server.call("GET", f"/sessions/{sid}/context/memory")
    assert (status, block["version"]) == (200, 2)


def test_many_proposals_load_a_page_at_a_time_and_fit_a_phone(page: Page, server: Server) -> None:
    # Given 25 pending proposals (the page shows 20 at a time)
    said = " ".join(f"I prefer tea number {number}." for number in range(1, 26))
    sid = converse(server, "Many preferences", text("u1", "user", said))
    reflected(server, sid, 25)
    # When the panel opens at phone width
    page.driver.set_window_size(390, 844)
    open_proposals(page, sid)
    # Then it shows 20, says more remain, and fits the width
    page.wait(lambda _: len(page.all("article.proposal")) == 20)
    assert "20 proposals shown, oldest first; more remain" in page.css("#proposals-summary").text
    assert page.css("#tab-proposals .count").text == "25"
    overflow = page.js("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at phone width"
    page.js("arguments[0].scrollIntoView({block: 'center'})", page.css("#tab-proposals"))
    page.screenshot("memory-proposals-phone")
    # And "Load more proposals" brings the rest
    read(page, lambda: page.css("button.load-more-proposals").click())
    page.wait(lambda _: len(page.all("article.proposal")) == 25)
    assert proposal_text(page, "Prefers: tea number 25")
    assert read(page, lambda: [b.is_displayed() for b in page.all("button.load-more-proposals")]) == [False]
    # And a redraw caused by a live change keeps the keyboard on the same control of the same proposal
    key = read(page, lambda: card(page, "Prefers: tea number 3").find_element("css selector", "button.reject"))
    key = key.get_attribute("data-focus-key")
    page.js(
        "const b = document.querySelector(`[data-focus-key='${arguments[0]}']`); b.focus(); b.dataset.old = '1'", key
    )
    status, _ = server.call("POST", f"/sessions/{sid}/messages", {"message": text("u2", "user", "Thanks.")})
    assert status == 201
    page.wait(lambda _: page.js("return !document.querySelector('[data-old]')"), message="no redraw after the append")
    assert page.driver.switch_to.active_element.get_attribute("data-focus-key") == key
    # And the filter shows only the decided ones: none yet
    from selenium.webdriver.support.select import Select

    read(page, lambda: Select(page.css("#proposal-filter")).select_by_value("applied"))
    page.text_appears("#proposals-summary", "No proposals applied")
    assert page.all("article.proposal") == []


def test_with_approval_off_reflect_now_applies_at_once_to_a_subject_block(
    at_once_page: Page, at_once_server: Server
) -> None:
    # Given a profile whose memory block is shared by the user's sessions, and reflection without approval
    page, server = at_once_page, at_once_server
    sid = converse(server, "At once", text("u1", "user", "My name is Cy."))
    open_proposals(page, sid)
    # When Reflect now is pressed
    read(page, lambda: page.css("#reflect-now").click())
    # Then the run's one proposal is applied at once, said so, to the subject-scoped block, with nothing to decide
    page.text_appears("#reflect-state", "proposed 1 edit (1 applied)", timeout=20)
    page.wait(lambda _: status_of(page, "Name: Cy") == "applied")
    applied = proposal_text(page, "Name: Cy")
    assert "scope subject: every session of this user" in applied and "Made: version 1 of memory" in applied
    assert read(page, lambda: card(page, "Name: Cy").find_elements("css selector", "button")) == []
    page.wait(lambda _: not any(count.is_displayed() for count in page.all("#tab-proposals .count")))
    # And the Context panel shows the content
    read(page, lambda: page.css("#tab-context").click())
    page.text_appears('section.block[data-label="memory"] pre.block-content', "Name: Cy")


def test_a_shared_block_changed_elsewhere_marks_the_frozen_prompt_stale_until_refreshed(
    at_once_page: Page, at_once_server: Server
) -> None:
    # Two conversations of one user share the subject-scoped memory; this one's prompt is frozen first
    here, elsewhere = at_once_server.create_session("Here"), at_once_server.create_session("Elsewhere")
    status, frozen = at_once_server.call("GET", f"/sessions/{here}/system-prompt")
    assert status == 200 and "Name: Ada" not in frozen["systemPrompt"], frozen
    at_once_page.open(f"/sessions/{here}")
    at_once_page.css("#token-meter")
    assert at_once_page.all("#prompt-stale:not([hidden])") == []  # nothing changed yet
    # The other conversation learns the user's name: this page says its frozen prompt is out of date
    status, body = at_once_server.call(
        "PUT", f"/sessions/{elsewhere}/context/memory", {"content": "Name: Ada", "mode": "replace"}
    )
    assert status == 200, body
    at_once_page.text_appears("#prompt-stale", "“memory” changed in another conversation", timeout=30)
    assert at_once_page.css("#prompt-stale").get_attribute("data-blocks") == "memory"
    # Its button leads to the Prompt panel, which shows the difference; the frozen prompt itself is untouched
    at_once_page.css("#prompt-stale button").click()
    at_once_page.text_appears("#prompt-state", "The frozen prompt is stale")
    assert "Name: Ada" not in at_once_page.css("#frozen-prompt").text
    # Refreshing it sends the new content and clears the note
    at_once_page.css("#refresh-prompt").click()
    at_once_page.text_appears("#frozen-prompt", "Name: Ada")
    at_once_page.wait(lambda _: at_once_page.all("#prompt-stale:not([hidden])") == [], message="the note clears")
    at_once_page.screenshot("shared-block-stale-prompt")
