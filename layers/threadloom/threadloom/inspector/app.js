// Entry point: hash routes, the bearer-token prompt and the global search box.
//
// Routes: #/ (sessions), #/search?q=… (every session), #/sessions/<id> and
// #/sessions/<id>/messages/<messageId> (a session, scrolled to one message).

import { auth } from "./api.js";
import { clear, h } from "./dom.js";
import { renderSearch, renderSessions } from "./sessions.js";
import { renderSession } from "./session.js";

const main = document.getElementById("main");
let teardown = null;

/**
 * The route in the address. The path is split from the query first: each path segment is decoded
 * once, and the query is left to URLSearchParams alone (the only decoding it gets), so a search or
 * filter reads back exactly as typed (`C++`, `R&D`, `what?`, `%41BC`). Throws a URIError for a
 * malformed percent-encoding.
 */
function parseRoute() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const at = hash.indexOf("?");
  const path = at < 0 ? hash : hash.slice(0, at);
  const query = at < 0 ? "" : hash.slice(at + 1);
  const parts = path.split("/").filter(Boolean).map((part) => decodeURIComponent(part));
  // URLSearchParams never throws: it turns a broken escape into U+FFFD. Check it ourselves, so a
  // mangled link is reported rather than silently searched for.
  for (const pair of query.split("&")) decodeURIComponent(pair.replace(/\+/g, " "));
  const params = new URLSearchParams(query);
  if (parts[0] === "sessions" && parts[1]) {
    return { view: "session", id: parts[1], messageId: parts[2] === "messages" ? parts[3] || null : null };
  }
  if (parts[0] === "search") return { view: "search", q: params.get("q") || "" };
  return { view: "sessions", filter: params.get("filter") || "" };
}

/** A readable page for an address that cannot be decoded (a truncated or hand-edited link). */
function renderBadAddress(root, error) {
  root.append(
    h(
      "section",
      { class: "page", "aria-labelledby": "bad-address-title" },
      h("h1", { id: "bad-address-title" }, "This address could not be read"),
      h(
        "div",
        { class: "error", role: "alert" },
        "The part after # in this address could not be read: ",
        h("code", { class: "bad-address" }, location.hash),
        ` is not valid percent-encoding (${error.message}). The link may have been cut short or edited by hand.`,
      ),
      h("p", {}, h("a", { href: "#/" }, "Back to the sessions")),
    ),
  );
}

async function route() {
  if (teardown) {
    try {
      teardown();
    } catch (error) {
      console.warn("teardown failed", error);
    }
    teardown = null;
  }
  clear(main);
  let current;
  try {
    current = parseRoute();
  } catch (error) {
    if (!(error instanceof URIError)) throw error;
    renderBadAddress(main, error);
    return;
  }
  const search = document.getElementById("global-search-input");
  if (current.view === "search") search.value = current.q;
  if (current.view === "session") teardown = await renderSession(main, current.id, current.messageId);
  else if (current.view === "search") teardown = await renderSearch(main, current.q);
  else teardown = await renderSessions(main, current.filter);
}

function showAuthState() {
  const box = clear(document.getElementById("auth-state"));
  if (!auth.token) return;
  box.append(
    h("span", {}, "Signed in with a token"),
    h("button", { type: "button", class: "link", onClick: () => { auth.token = ""; showAuthState(); route(); } }, "Forget token"),
  );
}

function askForToken() {
  const dialog = document.getElementById("token-dialog");
  if (dialog.open) return;
  const error = document.getElementById("token-error");
  error.hidden = !auth.token;
  error.textContent = auth.token ? "The API refused the saved token (HTTP 401): it may have expired." : "";
  document.getElementById("token-input").value = "";
  dialog.returnValue = "";
  dialog.showModal();
}

function setUp() {
  auth.onUnauthorized(() => askForToken());
  const dialog = document.getElementById("token-dialog");
  dialog.addEventListener("close", () => {
    if (dialog.returnValue !== "save") return;
    const value = document.getElementById("token-input").value.trim().replace(/^Bearer\s+/i, "");
    if (!value) return;
    auth.token = value;
    showAuthState();
    route();
  });
  document.getElementById("global-search").addEventListener("submit", (event) => {
    event.preventDefault();
    const q = document.getElementById("global-search-input").value.trim();
    if (q) location.hash = `#/search?q=${encodeURIComponent(q)}`;
  });
  window.addEventListener("hashchange", () => {
    route().then(() => main.focus({ preventScroll: true }));
  });
  showAuthState();
  route();
}

setUp();
