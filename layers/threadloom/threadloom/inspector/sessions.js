// The sessions list (newest activity first, paged, filtered by name) and cross-session search.

import { api, describe } from "./api.js";
import { clear, costOrUnknown, fmtNumber, h, timeEl, tokensOrUnknown } from "./dom.js";
import { busy, confirmAction, errorBox, notify, showError } from "./ui.js";

const PAGE = 50;
export const sessionLink = (id, text) => h("a", { href: `#/sessions/${encodeURIComponent(id)}` }, text || id);

/** Renders the list view into `root`; returns its teardown. */
export async function renderSessions(root, initialFilter = "") {
  const error = errorBox();
  const filter = h("input", {
    id: "session-filter",
    type: "search",
    placeholder: "Filter by name",
    value: initialFilter,
    autocomplete: "off",
  });
  const nameInput = h("input", { id: "new-session-name", name: "name", placeholder: "Name of the new session", maxlength: 1024 });
  const createButton = h("button", { type: "submit", class: "primary" }, "Create session");
  const createForm = h(
    "form",
    { class: "row", "aria-label": "Create a session" },
    h("label", { class: "visually-hidden", for: "new-session-name" }, "New session name"),
    nameInput,
    createButton,
  );
  const body = h("tbody");
  const more = h("button", { type: "button", id: "load-more", hidden: true }, "Load more sessions");
  const count = h("p", { class: "muted", "aria-live": "polite" });
  const table = h(
    "table",
    { class: "sessions" },
    h("caption", { class: "visually-hidden" }, "Sessions, most recent activity first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Name"),
        h("th", { scope: "col", class: "num" }, "Messages"),
        h("th", { scope: "col" }, "Last activity"),
        h("th", { scope: "col", class: "num" }, "Input tokens"),
        h("th", { scope: "col", class: "num" }, "Output tokens"),
        h("th", { scope: "col", class: "num" }, "Cost"),
        h("th", { scope: "col" }, "Forked from"),
        h("th", { scope: "col" }, h("span", { class: "visually-hidden" }, "Actions")),
      ),
    ),
    body,
  );
  root.append(
    h(
      "section",
      { class: "page sessions-page", "aria-labelledby": "sessions-title" },
      h("div", { class: "page-head" }, h("h1", { id: "sessions-title" }, "Sessions"), createForm),
      error,
      h(
        "div",
        { class: "row" },
        h("label", { for: "session-filter" }, "Filter"),
        filter,
      ),
      h("div", { class: "table-wrap" }, table),
      count,
      more,
    ),
  );

  const loaded = [];
  const names = new Map();
  let cursor = null;

  function visible() {
    const needle = filter.value.trim().toLowerCase();
    return needle ? loaded.filter((s) => (s.name || "").toLowerCase().includes(needle)) : loaded;
  }

  function row(session) {
    const nameCell = h("td", { class: "name" }, sessionLink(session.id, session.name || "(unnamed)"), preview(session));
    const renameButton = h("button", { type: "button", class: "link", "aria-label": `Rename ${session.name || session.id}` }, "Rename");
    const deleteButton = h("button", { type: "button", class: "link danger", "aria-label": `Delete ${session.name || session.id}` }, "Delete");
    renameButton.addEventListener("click", () => startRename(session, nameCell));
    deleteButton.addEventListener("click", async () => {
      const ok = await confirmAction(`Delete “${session.name || session.id}” and everything stored for it? This cannot be undone.`);
      if (!ok) return;
      await busy(deleteButton, async () => {
        await api.deleteSession(session.id);
        loaded.splice(loaded.indexOf(session), 1);
        draw();
        notify(`Deleted “${session.name || session.id}”.`);
      }, error);
    });
    const parent = session.parentSessionId;
    return h(
      "tr",
      { dataset: { sessionId: session.id } },
      nameCell,
      h("td", { class: "num message-count" }, typeof session.messageCount === "number" ? fmtNumber(session.messageCount) : h("span", { class: "muted", title: "This server does not say" }, "—")),
      h("td", {}, timeEl(session.updatedAt)),
      h("td", { class: "num" }, tokensOrUnknown(session, session.inputTokens)),
      h("td", { class: "num" }, tokensOrUnknown(session, session.outputTokens)),
      h("td", { class: "num" }, costOrUnknown(session)),
      h("td", {}, parent ? sessionLink(parent, names.get(parent) || parent.slice(0, 8)) : h("span", { class: "muted" }, "—")),
      h("td", { class: "actions" }, renameButton, deleteButton),
    );
  }

  /** The latest leaf's words under the name (text only: the list never renders a message's markup). */
  function preview(session) {
    if (session.messageCount === 0) return h("div", { class: "preview muted small" }, "No messages yet");
    if (!session.preview) return null;
    return h("div", { class: "preview muted small", title: session.preview }, h("span", { class: "preview-role" }, `${session.previewRole}: `), session.preview);
  }

  function startRename(session, cell) {
    const input = h("input", { value: session.name, "aria-label": "New name", maxlength: 1024 });
    const save = h("button", { type: "submit", class: "primary" }, "Save");
    const cancel = h("button", { type: "button", onClick: () => draw() }, "Cancel");
    const form = h("form", { class: "row inline" }, input, save, cancel);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      await busy(save, async () => {
        const updated = await api.renameSession(session.id, input.value);
        Object.assign(session, updated);
        names.set(session.id, updated.name);
        draw();
        notify(`Renamed to “${updated.name}”.`);
      }, error);
    });
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") draw();
    });
    clear(cell).append(form);
    input.focus();
    input.select();
  }

  function draw() {
    clear(body);
    const rows = visible();
    for (const session of rows) body.append(row(session));
    if (!rows.length) {
      body.append(h("tr", {}, h("td", { colspan: 8, class: "empty" }, loaded.length ? "No session matches the filter." : "No sessions yet: create one above.")));
    }
    count.textContent = `${rows.length} of ${loaded.length} loaded session${loaded.length === 1 ? "" : "s"}${cursor ? " (more available)" : ""}.`;
    more.hidden = !cursor;
  }

  async function loadPage() {
    await busy(more, async () => {
      const page = await api.listSessions(cursor, PAGE);
      for (const session of page.sessions) {
        loaded.push(session);
        names.set(session.id, session.name);
      }
      cursor = page.nextCursor || null;
      showError(error, null);
      draw();
    }, error);
  }

  filter.addEventListener("input", () => {
    history.replaceState(null, "", filter.value ? `#/?filter=${encodeURIComponent(filter.value)}` : "#/");
    draw();
  });
  more.addEventListener("click", loadPage);
  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(createButton, async () => {
      const created = await api.createSession(nameInput.value.trim());
      notify(`Created “${created.name || created.id}”.`);
      location.hash = `#/sessions/${encodeURIComponent(created.id)}`;
    }, error);
  });
  await loadPage();
  return () => {};
}

/** Cross-session search: each hit links to its message in its session. */
export async function renderSearch(root, q) {
  const error = errorBox();
  const list = h("ol", { class: "hits" });
  const summary = h("p", { class: "muted", "aria-live": "polite" }, "Searching…");
  root.append(
    h(
      "section",
      { class: "page", "aria-labelledby": "search-title" },
      h("h1", { id: "search-title" }, `Search: ${q}`),
      h("p", { class: "muted" }, "Every word must match; put a phrase in double quotes."),
      error,
      summary,
      list,
    ),
  );
  if (!q) {
    summary.textContent = "Type words in the search box above.";
    return () => {};
  }
  try {
    const [{ results, truncated }, names] = await Promise.all([api.searchAll(q), sessionNames()]);
    summary.textContent =
      `${results.length} hit${results.length === 1 ? "" : "s"}.` +
      (truncated ? " More matched than fit in one response: narrow the search to see them." : "");
    for (const hit of results) {
      const href = `#/sessions/${encodeURIComponent(hit.sessionId)}/messages/${encodeURIComponent(hit.id)}`;
      list.append(
        h(
          "li",
          { class: "hit" },
          h("a", { href }, h("span", { class: `role role-${hit.role}` }, hit.role), " ", hit.content.slice(0, 300)),
          h("div", { class: "muted small" }, "in ", h("strong", {}, names.get(hit.sessionId) || hit.sessionId), " · ", timeEl(hit.createdAt)),
        ),
      );
    }
  } catch (caught) {
    summary.textContent = "";
    showError(error, caught, "Search failed");
  }
  return () => {};
}

async function sessionNames() {
  const names = new Map();
  try {
    let cursor = null;
    for (let i = 0; i < 5; i++) {
      const page = await api.listSessions(cursor, 200);
      for (const s of page.sessions) names.set(s.id, s.name || "(unnamed)");
      cursor = page.nextCursor;
      if (!cursor) break;
    }
  } catch (error) {
    notify(`Session names unavailable: ${describe(error)}`, { kind: "error" });
  }
  return names;
}
