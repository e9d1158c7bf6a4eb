// Shared feedback: notices (polite live region), error boxes (alerts, in words) and a confirmation dialog.

import { describe } from "./api.js";
import { clear, h } from "./dom.js";

/** A short notice in the corner; errors stay until dismissed, the rest fade after a few seconds. */
export function notify(text, { kind = "info" } = {}) {
  const region = document.getElementById("notices");
  const close = h("button", { type: "button", class: "link", "aria-label": "Dismiss", onClick: () => item.remove() }, "×");
  const item = h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : null }, h("span", {}, text), close);
  region.append(item);
  if (kind !== "error") setTimeout(() => item.remove(), 4000);
  return item;
}

/** Show an error in words inside `box` (an element with role=alert); `null` clears it. */
export function showError(box, error, prefix = "") {
  clear(box);
  if (!error) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.append(h("strong", {}, prefix ? `${prefix}: ` : "Error: "), describe(error));
}

/** An empty error box to place in a view. */
export const errorBox = () => h("div", { class: "error", role: "alert", hidden: true });

/** Ask before something destructive; resolves true when confirmed. */
export function confirmAction(question, confirmLabel = "Delete") {
  const dialog = document.getElementById("confirm-dialog");
  dialog.querySelector(".confirm-text").textContent = question;
  const ok = dialog.querySelector("button[value=confirm]");
  ok.textContent = confirmLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector("button[value=cancel]").focus();
  });
}

/** Run an async action from a button: disable it meanwhile, report failure in words. */
export async function busy(button, action, errorTarget = null) {
  if (button) button.disabled = true;
  try {
    return await action();
  } catch (error) {
    if (errorTarget) showError(errorTarget, error);
    else notify(describe(error), { kind: "error" });
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

/**
 * A list read a page at a time behind a "load more" button. `fetchPage(cursor)` answers
 * `{ items, nextCursor }`; `render(item, index, items, moreRemain)` makes one list item (it may look
 * at its neighbours); `describe(count, moreRemain)` is the status line; `failure` prefixes a first
 * page that could not be read.
 */
export function pagedList({ list, more, status, error, fetchPage, render, describe, failure }) {
  const items = [];
  let cursor = null;

  function draw() {
    clear(list);
    items.forEach((item, index) => list.append(render(item, index, items, Boolean(cursor))));
    more.hidden = !cursor;
    status.textContent = describe(items.length, Boolean(cursor));
  }

  async function load() {
    const page = await fetchPage(cursor);
    items.push(...page.items);
    cursor = page.nextCursor || null;
    showError(error, null);
    draw();
  }

  more.addEventListener("click", () => busy(more, load, error));
  load().catch((caught) => {
    status.textContent = "";
    showError(error, caught, failure);
  });
}
