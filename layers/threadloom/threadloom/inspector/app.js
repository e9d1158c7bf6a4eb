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

function parseRoute() {
  const hash = decodeURIComponent(location.hash.replace(/^#/, "")) || "/";
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").filter(Boolean);
  const params = new URLSearchParams(query);
  if (parts[0] === "sessions" && parts[1]) {
    return { view: "session", id: parts[1], messageId: parts[2] === "messages" ? parts[3] || null : null };
  }
  if (parts[0] === "search") return { view: "search", q: params.get("q") || "" };
  return { view: "sessions", filter: params.get("filter") || "" };
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
  const current = parseRoute();
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
