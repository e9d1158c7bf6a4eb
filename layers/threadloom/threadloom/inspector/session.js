// One session: its facts and live meter, the conversation, and a side panel (context, prompt, actions).

import { renderActions } from "./actions.js";
import { api, describe } from "./api.js";
import { renderContext, renderPrompt } from "./context.js";
import { Conversation } from "./conversation.js";
import { clear, costOrUnknown, fmtNumber, h, timeEl, tokensOrUnknown, usageKnown } from "./dom.js";
import { watchSession } from "./live.js";
import { busy, confirmAction, errorBox, notify, showError } from "./ui.js";
import { sessionLink } from "./sessions.js";
import { TreeView } from "./tree.js";
import { drawBlockNotes, pendingProposals, renderProposals } from "./proposals.js";

const TABS = [
  ["context", "Context"],
  ["proposals", "Proposals"], // memory edits reflection proposed (the panel's heading says so)
  ["prompt", "Prompt"],
  ["tree", "Tree"],
  ["actions", "Actions"],
];

/** The panel last shown per session, so following a link to one of its messages keeps it open. */
const lastTab = new Map();

export async function renderSession(root, sessionId, focusMessageId) {
  const error = errorBox();
  root.append(error);
  let session;
  try {
    session = await api.getSession(sessionId);
  } catch (caught) {
    showError(error, caught, "Could not open this session");
    root.append(h("p", {}, h("a", { href: "#/" }, "Back to the sessions")));
    return () => {};
  }
  clear(root);
  document.title = `${session.name || session.id} · Threadloom inspector`;

  const title = h("h1", { id: "session-title" }, session.name || "(unnamed session)");
  const crumbName = h("span", {}, session.name || session.id);
  const facts = h("dl", { class: "facts" });
  const meter = h("div", { class: "live", "aria-live": "polite", "aria-label": "Context size and compaction" });
  const renameButton = h("button", { type: "button" }, "Rename");
  const deleteButton = h("button", { type: "button", class: "danger" }, "Delete");
  const conversationPane = h("section", { class: "conversation-pane", "aria-labelledby": "conversation-title" });
  const side = h("aside", { class: "side-pane", "aria-label": "Context window and actions" });
  const page = h(
    "section",
    { class: "session-page", "aria-labelledby": "session-title" },
    h(
      "header",
      { class: "session-head" },
      h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/" }, "Sessions"), " › ", crumbName),
      h("div", { class: "title-row" }, title, h("div", { class: "row" }, renameButton, deleteButton)),
      facts,
      meter,
    ),
    error,
    h("div", { class: "session-body" }, conversationPane, side),
  );
  root.append(page);

  function drawFacts() {
    clear(facts);
    const fact = (term, value) => (value === null || value === undefined || value === "" ? null : h("div", { class: "fact" }, h("dt", {}, term), h("dd", {}, value)));
    facts.append(
      ...[
        fact("Id", h("code", {}, session.id)),
        fact("Created", timeEl(session.createdAt)),
        fact("Last activity", timeEl(session.updatedAt)),
        fact("Tokens in / out", usageKnown(session) ? h("span", {}, tokensOrUnknown(session, session.inputTokens), " / ", tokensOrUnknown(session, session.outputTokens)) : tokensOrUnknown(session, 0)),
        fact("Cost", costOrUnknown(session)),
        fact("Model", session.model),
        fact("Source", session.source),
        fact("Forked from", session.parentSessionId ? sessionLink(session.parentSessionId) : null),
        fact("Ended", session.endReason),
      ].filter(Boolean),
    );
  }
  drawFacts();

  renameButton.addEventListener("click", () => {
    if (!title.isConnected) return; // the form is already open
    const input = h("input", { value: session.name, "aria-label": "New name", maxlength: 1024 });
    const titleRestore = () => {
      title.textContent = session.name || "(unnamed session)";
      crumbName.textContent = session.name || session.id;
      document.title = `${session.name || session.id} · Threadloom inspector`;
      return title;
    };
    // Cancel and Escape (as in the sessions list) close the form and give the focus back to Rename.
    const close = () => {
      if (!form.isConnected) return;
      form.replaceWith(titleRestore());
      renameButton.focus();
    };
    const form = h("form", { class: "row inline" }, input, h("button", { type: "submit", class: "primary" }, "Save"), h("button", { type: "button", onClick: close }, "Cancel"));
    form.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.preventDefault();
      close();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      await busy(form.querySelector("button[type=submit]"), async () => {
        session = await api.renameSession(session.id, input.value);
        form.replaceWith(titleRestore());
        drawFacts();
        notify(`Renamed to “${session.name}”.`);
      }, error);
    });
    title.replaceWith(form);
    input.focus();
  });
  deleteButton.addEventListener("click", async () => {
    if (!(await confirmAction(`Delete “${session.name || session.id}” and everything stored for it? This cannot be undone.`))) return;
    await busy(deleteButton, async () => {
      await api.deleteSession(session.id);
      notify(`Deleted “${session.name || session.id}”.`);
      location.hash = "#/";
    }, error);
  });

  // --- the conversation ------------------------------------------------------------------------
  const conversation = new Conversation(conversationPane, sessionId, { focusMessageId });

  // --- side panel with tabs (arrow keys move between tabs) -----------------------------------
  const tablist = h("div", { role: "tablist", "aria-label": "Session panels", class: "tabs" });
  const panels = {};
  const tabs = {};
  for (const [key, label] of TABS) {
    tabs[key] = h("button", { role: "tab", type: "button", id: `tab-${key}`, "aria-controls": `panel-${key}`, "aria-selected": "false", tabindex: "-1" }, label);
    panels[key] = h("div", { role: "tabpanel", id: `panel-${key}`, "aria-labelledby": `tab-${key}`, hidden: true, tabindex: "0", class: "panel" });
    tabs[key].addEventListener("click", () => select(key));
    tablist.append(tabs[key]);
  }
  tablist.addEventListener("keydown", (event) => {
    const keys = TABS.map(([key]) => key);
    const index = keys.findIndex((key) => tabs[key] === document.activeElement);
    if (index < 0) return;
    let next = null;
    if (event.key === "ArrowRight") next = keys[(index + 1) % keys.length];
    else if (event.key === "ArrowLeft") next = keys[(index + keys.length - 1) % keys.length];
    else if (event.key === "Home") next = keys[0];
    else if (event.key === "End") next = keys[keys.length - 1];
    if (next) {
      event.preventDefault();
      select(next);
      tabs[next].focus();
    }
  });
  side.append(tablist, ...Object.values(panels));

  const refreshers = {};
  const context = {
    sessionId,
    get session() {
      return session;
    },
    conversation,
    refreshContext: () => refreshers.context && refreshers.context(),
    refreshPrompt: () => refreshers.prompt && refreshers.prompt(),
    proposalsChanged: () => countProposals(),
    /** The Context panel drew its blocks: note on each how many proposals wait for it. */
    drawBlockNotes: (container) => drawBlockNotes(container, pendingByLabel, showProposals),
    refreshSession: async () => {
      try {
        session = await api.getSession(sessionId);
        drawFacts();
      } catch (caught) {
        showError(error, caught, "Could not reload the session");
      }
    },
  };
  conversation.onForkRequest = (messageId) => {
    select("actions");
    panels.actions.dispatchEvent(new CustomEvent("fork-at", { detail: messageId }));
  };

  let current = null;
  let proposalsView = null;
  function select(key) {
    for (const [other] of TABS) {
      tabs[other].setAttribute("aria-selected", String(other === key));
      tabs[other].tabIndex = other === key ? 0 : -1;
      panels[other].hidden = other !== key;
    }
    current = key;
    lastTab.set(sessionId, key);
    if (!panels[key].dataset.ready) {
      panels[key].dataset.ready = "1";
      if (key === "context") refreshers.context = renderContext(panels.context, context);
      if (key === "prompt") refreshers.prompt = renderPrompt(panels.prompt, context);
      if (key === "actions") renderActions(panels.actions, context);
      if (key === "proposals") {
        proposalsView = renderProposals(panels.proposals, context);
        refreshers.proposals = proposalsView.refresh;
      }
      if (key === "tree") {
        const tree = new TreeView(panels.tree, context);
        refreshers.tree = () => tree.markStale();
      }
    }
  }
  // The Proposals tab says how many wait for approval, so they are found without opening it.
  const pendingCount = h("span", { class: "tab-count", hidden: true });
  tabs.proposals.append(pendingCount);
  let countAsked = 0;
  let pendingByLabel = new Map();
  function showProposals() {
    select("proposals");
    tabs.proposals.focus();
  }
  async function countProposals() {
    const asked = ++countAsked;
    try {
      const { count, more, byLabel } = await pendingProposals(sessionId);
      if (asked !== countAsked) return;
      pendingByLabel = byLabel;
      drawBlockNotes(panels.context, byLabel, showProposals);
      pendingCount.hidden = count === 0;
      clear(pendingCount);
      pendingCount.append(" ", h("span", { class: "count" }, more ? `${fmtNumber(count)}+` : fmtNumber(count)), h("span", { class: "visually-hidden" }, " waiting"));
    } catch {
      pendingCount.hidden = true; // the count is a courtesy; the panel itself reports errors
    }
  }
  countProposals();
  select(lastTab.get(sessionId) || "context");

  // --- live meter ----------------------------------------------------------------------------
  const meterBar = h("meter", { min: 0, max: 1, value: 0, id: "token-meter", "aria-labelledby": "token-meter-label" });
  const meterLabel = h("span", { id: "token-meter-label", class: "meter-label" }, "Context size: …");
  const phase = h("span", { class: "phase", id: "compaction-phase" }, "idle");
  const channel = h("span", { class: "channel muted small", id: "live-channel" }, "connecting…");
  const lastCompaction = h("span", { class: "muted small", id: "last-compaction" });
  const idleNote = h("p", { class: "idle-reason notice-inline warn", id: "idle-reason", role: "status", hidden: true });
  const staleText = h("span", {});
  const staleNote = h(
    "p",
    { class: "notice-inline warn row", id: "prompt-stale", role: "status", hidden: true },
    staleText,
    h("button", { type: "button", onClick: () => select("prompt") }, "Review the prompt"),
  );
  meter.append(h("div", { class: "meter-row" }, meterLabel, h("span", { class: "row" }, lastCompaction, channel, phase)), meterBar, idleNote, staleNote);

  // A shared (subject or tenant) block changed in another session since this one's prompt was frozen:
  // the status endpoint and the live `session_status` name those blocks (`staleBlocks`); the frozen
  // prompt itself stays as it is until someone refreshes it.
  function showStaleBlocks(labels) {
    staleNote.hidden = labels.length === 0;
    staleNote.dataset.blocks = labels.join(",");
    const names = labels.map((label) => `“${label}”`).join(", ");
    staleText.textContent = labels.length
      ? `The frozen prompt is out of date: ${names} changed in another conversation since it was frozen. Refresh it to send the model the new content.`
      : "";
  }
  let staleAsked = 0;
  async function askStaleBlocks() {
    const asked = ++staleAsked;
    try {
      const status = await api.status(sessionId);
      if (asked === staleAsked) showStaleBlocks(status.staleBlocks || []);
    } catch {
      // The Prompt panel's own comparison still shows a stale prompt; this note is a courtesy.
    }
  }
  context.promptRefreshed = askStaleBlocks;
  askStaleBlocks();

  // Why a session over its threshold sits idle: the status endpoint says so (`idleReason`); a
  // WebSocket event carries only the figures, so then the endpoint is asked once per such event.
  let idleAsked = 0;
  function showIdleReason(reason) {
    idleNote.hidden = !reason;
    idleNote.textContent = reason ? `Not compacting: ${reason.message}` : "";
    if (reason) idleNote.dataset.code = reason.code;
    else delete idleNote.dataset.code;
  }
  async function askIdleReason() {
    const asked = ++idleAsked;
    try {
      const status = await api.status(sessionId);
      if (asked === idleAsked) showIdleReason(status.idleReason || null);
    } catch {
      // The meter still shows the figures; the reason is a courtesy.
    }
  }

  let refreshTimer = 0;
  const stop = watchSession(sessionId, {
    onStatus(status) {
      if (status.error) {
        channel.textContent = `Live status failed: ${describe(status.error)}`;
        channel.classList.add("error-text");
        return;
      }
      channel.classList.remove("error-text");
      channel.textContent = status.channel === "websocket" ? "Live over WebSocket" : `Polling every ${1.5} s`;
      if (status.notice) notify(status.notice);
      if (typeof status.tokenEstimate === "number") {
        const threshold = status.tokenThreshold;
        meterBar.max = threshold || Math.max(status.tokenEstimate, 1);
        meterBar.value = Math.min(status.tokenEstimate, meterBar.max);
        meterBar.low = Math.round(meterBar.max * 0.6);
        meterBar.high = Math.round(meterBar.max * 0.85);
        meterBar.optimum = 0;
        meterBar.dataset.tokens = String(status.tokenEstimate);
        meterLabel.textContent = threshold
          ? `Context size: ${fmtNumber(status.tokenEstimate)} of ${fmtNumber(threshold)} tokens before compaction (${Math.round((100 * status.tokenEstimate) / threshold)}%)`
          : `Context size: ${fmtNumber(status.tokenEstimate)} tokens (automatic compaction is off)`;
      }
      if (status.phase) {
        phase.textContent = status.phase === "compacting" ? "compacting…" : "idle";
        phase.className = `phase phase-${status.phase}`;
      }
      if (typeof status.tokenEstimate === "number") {
        const over = typeof status.tokenThreshold === "number" && status.tokenEstimate > status.tokenThreshold;
        if ("idleReason" in status) {
          idleAsked++;
          showIdleReason(status.idleReason);
        } else if (over && status.phase !== "compacting") askIdleReason();
        else {
          idleAsked++;
          showIdleReason(null);
        }
      }
      if (status.compacted) lastCompaction.textContent = `Last compaction: ${fmtNumber(status.compacted.tokensBefore || 0)} tokens before`;
      const request = status.latestRequest || status.compaction;
      if (request && request.state) lastCompaction.textContent = `Last compaction request: ${request.state.replaceAll("_", " ")}${request.error ? ` (${request.error})` : ""}`;
      if (status.compactionError) notify(`Compaction failed: ${status.compactionError}`, { kind: "error" });
      if (Array.isArray(status.staleBlocks)) showStaleBlocks(status.staleBlocks);
      // Changes made before the subscription took are not replayed: read where the prompt stands once it has.
      else if (status.subscribed) askStaleBlocks();
    },
    onChanged() {
      // Coalesce bursts of events into one refresh of what is on screen.
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(() => {
        conversation.refresh();
        context.refreshSession();
        if (current === "context") context.refreshContext();
        if (current === "prompt") context.refreshPrompt();
        if (current === "proposals") refreshers.proposals();
        else countProposals();
        if (refreshers.tree) refreshers.tree();
      }, 250);
    },
  });

  return () => {
    stop();
    clearTimeout(refreshTimer);
    if (proposalsView) proposalsView.destroy();
    conversation.destroy();
    document.title = "Threadloom inspector";
  };
}
