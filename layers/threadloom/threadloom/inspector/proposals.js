// Memory proposals: the edits reflection proposed to memory blocks, each with the messages it came
// from and where it stands; Approve and Reject for pending ones, and "Reflect now", which queues a
// reflection and watches the list until its proposals arrive. Proposed content is model- or
// user-derived, so it is only ever text (textContent), never markup.

import { api } from "./api.js";
import { diffView } from "./diff-view.js";
import { clear, fmtNumber, h, timeEl } from "./dom.js";
import { messageLink } from "./history.js";
import { busy, errorBox, notify, showError } from "./ui.js";

const PAGE_SIZE = 20; // proposals per "Load more"
const MAX_PAGE = 200; // the API's largest page
const MAX_MESSAGE_LINKS = 3;
const WATCH_EVERY_MS = 1000; // after "Reflect now": how often the list is read for the run's proposals
const WATCH_FOR_MS = 30000; // ... and for how long before saying none came

const STATUS_WORDS = {
  pending: "waiting for approval",
  applying: "being applied",
  applied: "applied",
  rejected: "rejected",
  failed: "failed",
};

const FILTERS = [
  ["", "Every status"],
  ["pending", "Waiting for approval"],
  ["applied", "Applied"],
  ["rejected", "Rejected"],
  ["failed", "Failed"],
  ["applying", "Being applied"],
];

const SCOPE_WORDS = {
  session: "this session only",
  subject: "every session of this user",
  tenant: "every session of the tenant",
};

/** What a reflection that ran at once (no queue) did, in words. */
const OUTCOME_WORDS = {
  proposed: "The reflection proposed edits: they are listed below.",
  nothing_found: "The reflection read the new messages and found nothing the user said about themselves.",
  nothing_new: "Nothing to reflect: no new messages since the last reflection.",
  duplicate: "This reflection had already run; nothing new was proposed.",
  skipped_stale: "Another reflection read these messages first; nothing new was proposed.",
};

/** The first line of `text`, cut to `max` characters, for a button's accessible name. */
function gist(text, max = 60) {
  const line = String(text).split("\n", 1)[0];
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const plural = (count, word) => `${fmtNumber(count)} ${word}${count === 1 ? "" : "s"}`;

/**
 * How many proposals wait for approval: `{count, more, byLabel}` (`more`: at least one page beyond `count`;
 * `byLabel`: label → how many of them edit that block).
 */
export async function pendingProposals(sessionId) {
  const page = await api.proposals(sessionId, { status: "pending", limit: MAX_PAGE });
  const byLabel = new Map();
  for (const item of page.proposals) byLabel.set(item.label, (byLabel.get(item.label) || 0) + 1);
  return { count: page.proposals.length, more: Boolean(page.nextCursor), byLabel };
}

/**
 * Fill the Context panel's per-block notes (`.block-proposals[data-label]`) from `byLabel`: a block with
 * proposals waiting says so, with a button that opens the Proposals panel (`open`).
 */
export function drawBlockNotes(container, byLabel, open) {
  for (const note of container.querySelectorAll(".block-proposals")) {
    const waiting = byLabel.get(note.dataset.label) || 0;
    note.hidden = waiting === 0;
    clear(note);
    if (!waiting) continue;
    const review = h("button", { type: "button", class: "link review-proposals" }, waiting === 1 ? "Review it" : "Review them");
    review.addEventListener("click", open);
    note.append(`${plural(waiting, "memory edit")} proposed by reflection ${waiting === 1 ? "waits" : "wait"} for approval. `, review);
  }
}

/** Every proposal of the session as id → status, following the cursor to the end (to see what a run added). */
async function proposalStatuses(sessionId) {
  const statuses = new Map();
  let cursor = null;
  do {
    const page = await api.proposals(sessionId, { cursor, limit: MAX_PAGE });
    for (const item of page.proposals) statuses.set(item.id, item.status);
    cursor = page.nextCursor || null;
  } while (cursor);
  return statuses;
}

/** "2 waiting for approval, 1 applied": how many of `statuses` are in each status. */
function tally(statuses) {
  const counts = new Map();
  for (const status of statuses) counts.set(status, (counts.get(status) || 0) + 1);
  return [...counts].map(([status, count]) => `${fmtNumber(count)} ${STATUS_WORDS[status] || status}`).join(", ");
}

/**
 * Fill the Memory proposals panel. `ctx.refreshContext()` shows an approved edit in the Context panel
 * and `ctx.proposalsChanged()` updates the tab's pending count. Returns `{refresh, destroy}`.
 */
export function renderProposals(panel, ctx) {
  const error = errorBox();
  const reflectButton = h("button", { type: "button", class: "primary", id: "reflect-now" }, "Reflect now");
  const reloadButton = h("button", { type: "button" }, "Reload");
  const filter = h("select", { id: "proposal-filter", name: "status" }, ...FILTERS.map(([value, label]) => h("option", { value }, label)));
  const reflectState = h("p", { class: "muted small", id: "reflect-state", role: "status", hidden: true });
  const summary = h("p", { class: "proposals-summary", id: "proposals-summary", role: "status" }, "Loading the proposals…");
  const list = h("ol", { class: "proposals", "aria-labelledby": "proposals-title" });
  const more = h("button", { type: "button", class: "load-more-proposals", hidden: true }, "Load more proposals");
  panel.append(
    h("div", { class: "panel-head" }, h("h2", { id: "proposals-title", tabindex: "-1" }, "Memory proposals"), h("div", { class: "row" }, reflectButton, reloadButton)),
    h(
      "p",
      { class: "muted small" },
      "Reflection proposes edits to memory from what the user said about themselves. Approving one writes it as a new version of the block; rejecting one leaves the block alone.",
    ),
    h("div", { class: "row" }, h("label", { for: "proposal-filter" }, "Show"), filter),
    reflectState,
    error,
    summary,
    list,
    more,
  );

  let items = [];
  let cursor = null;
  let blocks = new Map(); // label → the block as last read (scope, content, version)
  let generation = 0; // a newer read wins over a slower older one
  let destroyed = false;
  let watchTimer = 0;
  const deciding = new Set(); // proposals whose approve/reject is in flight: their buttons stay disabled on a redraw

  function factRow(term, ...value) {
    return h("div", { class: "proposal-fact" }, h("dt", {}, `${term}: `), h("dd", {}, ...value));
  }

  function sources(item) {
    const ids = item.sourceMessageIds || [];
    if (!ids.length) return ["none named"];
    const parts = [ids.length === 1 ? "message " : "messages "];
    ids.slice(0, MAX_MESSAGE_LINKS).forEach((id, index) => {
      if (index) parts.push(", ");
      const link = messageLink(ctx.sessionId, id);
      link.dataset.focusKey = `${item.id}:message:${id}`;
      parts.push(link);
    });
    if (ids.length > MAX_MESSAGE_LINKS) parts.push(` and ${fmtNumber(ids.length - MAX_MESSAGE_LINKS)} more`);
    return parts;
  }

  function card(item) {
    const block = blocks.get(item.label);
    const titleId = `proposal-${item.id}-title`;
    const verb = item.operation === "replace" ? `Replace the content of ${item.label}` : `Append a line to ${item.label}`;
    const article = h(
      "article",
      { class: `proposal status-${item.status}`, "aria-label": `${verb}: ${gist(item.content)}`, dataset: { proposalId: item.id, status: item.status, operation: item.operation } },
      h(
        "div",
        { class: "proposal-head" },
        h("h3", { id: titleId, tabindex: "-1" }, verb),
        h("span", { class: `tag tag-status tag-${item.status}` }, STATUS_WORDS[item.status] || item.status),
      ),
    );
    const facts = h(
      "dl",
      { class: "proposal-facts small" },
      factRow("Block", h("code", {}, item.label), block ? h("span", { class: "proposal-scope" }, ` (scope ${block.scope}: ${SCOPE_WORDS[block.scope] || block.scope})`) : null),
      factRow("From", ...sources(item)),
      factRow("Based on", item.basedOnVersion ? `version ${item.basedOnVersion}` : "any version (an append)"),
      factRow("Proposed", timeEl(item.createdAt)),
      item.decidedAt ? factRow("Decided", timeEl(item.decidedAt)) : null,
      item.appliedVersion ? factRow("Made", `version ${item.appliedVersion} of ${item.label}`) : null,
    );
    article.append(facts, h("pre", { class: "proposal-content", "aria-label": `Proposed content for ${item.label}` }, item.content));
    if (item.status === "failed") {
      article.append(h("p", { class: "proposal-error error-text" }, h("strong", {}, "Refused: "), item.error || "the block refused the edit (no reason stored)"));
    }
    if (item.status !== "pending") return h("li", {}, article);

    if (item.operation === "replace" && block) {
      const moved = item.basedOnVersion !== null && String(block.version) !== String(item.basedOnVersion);
      if (moved) {
        article.append(h("p", { class: "notice-inline warn small proposal-stale" }, `${item.label} changed since this was proposed (now version ${block.version}): approving it will be refused.`));
      } else {
        const { list: diff, changed } = diffView(block.content, item.content, `Changes this would make to ${item.label}`);
        if (changed) article.append(h("p", { class: "muted small" }, "Against the current content:"), diff);
      }
    }
    const what = `${item.operation} “${gist(item.content)}” ${item.operation === "replace" ? "as" : "to"} ${item.label}`;
    const approve = h("button", { type: "button", class: "primary approve", "aria-label": `Approve: ${what}`, dataset: { focusKey: `${item.id}:approve` } }, "Approve");
    const reject = h("button", { type: "button", class: "reject", "aria-label": `Reject: ${what}`, dataset: { focusKey: `${item.id}:reject` } }, "Reject");
    approve.disabled = reject.disabled = deciding.has(item.id);
    approve.addEventListener("click", () => decide(item, "approve"));
    reject.addEventListener("click", () => decide(item, "reject"));
    article.append(h("div", { class: "row proposal-actions" }, approve, reject));
    return h("li", {}, article);
  }

  /** Redraw the list; the keyboard focus inside it stays on the same control of the same proposal. */
  function draw() {
    const active = document.activeElement;
    const focusKey = active && list.contains(active) ? active.dataset.focusKey || null : null;
    const focusCard = active && list.contains(active) ? active.closest("article.proposal") : null;
    clear(list);
    for (const item of items) list.append(card(item));
    if (focusCard) {
      const again = (focusKey && list.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`)) || document.getElementById(`proposal-${focusCard.dataset.proposalId}-title`);
      if (again) again.focus();
    }
    more.hidden = !cursor;
    const waiting = items.filter((item) => item.status === "pending").length;
    if (!items.length) {
      summary.textContent = filter.value
        ? `No proposals ${STATUS_WORDS[filter.value]}. Choose “Every status” to see the others.`
        : "No proposals yet. Reflect now reads the conversation and proposes what the user said about themselves (names, preferences) for memory.";
      summary.classList.add("empty-state");
      return;
    }
    summary.classList.remove("empty-state");
    const shown = `${plural(items.length, "proposal")} shown, oldest first${cursor ? "; more remain" : ""}`;
    summary.textContent = filter.value ? `${shown}.` : `${shown}: ${fmtNumber(waiting)} waiting for approval.`;
  }

  /** Read the list again from the start, as many as are shown (at least a page). */
  async function reload() {
    const asked = ++generation;
    const limit = Math.min(Math.max(PAGE_SIZE, items.length), MAX_PAGE);
    const [page, answer] = await Promise.all([
      api.proposals(ctx.sessionId, { status: filter.value || null, limit }),
      api.blocks(ctx.sessionId),
    ]);
    if (asked !== generation || destroyed) return;
    blocks = new Map(answer.blocks.map((block) => [block.label, block]));
    items = page.proposals;
    cursor = page.nextCursor || null;
    draw();
  }

  async function refresh() {
    try {
      await reload();
      showError(error, null);
    } catch (caught) {
      showError(error, caught, "Could not load the proposals");
    }
    ctx.proposalsChanged();
  }

  async function loadMore() {
    const asked = generation;
    const page = await api.proposals(ctx.sessionId, { status: filter.value || null, cursor, limit: PAGE_SIZE });
    if (asked !== generation || destroyed) return;
    items = items.concat(page.proposals);
    cursor = page.nextCursor || null;
    draw();
  }

  async function decide(item, action) {
    if (deciding.has(item.id)) return;
    deciding.add(item.id);
    for (const button of list.querySelectorAll(`button[data-focus-key^="${CSS.escape(item.id)}:"]`)) button.disabled = true;
    try {
      const updated = action === "approve" ? await api.approveProposal(ctx.sessionId, item.id) : await api.rejectProposal(ctx.sessionId, item.id);
      showError(error, null);
      items = items.map((other) => (other.id === updated.id ? updated : other));
      if (action === "approve") {
        notify(`Approved: ${updated.label} is now version ${updated.appliedVersion}.`);
        // The block changed: the Context panel and the other proposals' comparisons read it again.
        ctx.refreshContext();
        await reload().catch(() => draw());
      } else {
        notify(`Rejected: ${updated.label} was not changed.`);
        draw();
      }
    } catch (caught) {
      // Decided meanwhile (409), or the block refused the edit (then `failed`): say so, show where it stands now.
      showError(error, caught, `Could not ${action} the proposal`);
      deciding.delete(item.id);
      await reload().catch(() => draw());
    }
    deciding.delete(item.id);
    ctx.proposalsChanged();
    // Keep the keyboard where it was: on this proposal, or on the panel's heading when a filter hid it.
    (document.getElementById(`proposal-${item.id}-title`) || document.getElementById("proposals-title")).focus();
  }

  /** After "Reflect now" queued a run: read the ids until new ones appear, or say that none came. */
  async function watchForProposals(before, leafId) {
    const started = Date.now();
    const tick = async () => {
      watchTimer = 0;
      if (destroyed) return;
      let added = [];
      try {
        const now = await proposalStatuses(ctx.sessionId);
        added = [...now].filter(([id]) => !before.has(id)).map(([, status]) => status);
      } catch (caught) {
        showError(error, caught, "Could not read the proposals");
      }
      if (destroyed) return;
      if (added.length) {
        // With approval off a run's proposals are applied at once: say so rather than "waiting".
        reflectState.textContent = `The reflection up to message ${leafId} proposed ${plural(added.length, "edit")} (${tally(added)}).`;
        reflectButton.disabled = false;
        ctx.refreshContext(); // with approval off they were applied: the Context panel reads the block again
        await refresh();
        return;
      }
      if (Date.now() - started >= WATCH_FOR_MS) {
        reflectState.textContent = `No new proposals after ${WATCH_FOR_MS / 1000} s: the reflection found nothing new the user said about themselves, or the queue has not run it yet. Reload to look again.`;
        reflectButton.disabled = false;
        return;
      }
      watchTimer = setTimeout(tick, WATCH_EVERY_MS);
    };
    watchTimer = setTimeout(tick, WATCH_EVERY_MS / 4);
  }

  reflectButton.addEventListener("click", async () => {
    reflectButton.disabled = true;
    reflectState.hidden = false;
    reflectState.textContent = "Asking for a reflection…";
    try {
      const before = await proposalStatuses(ctx.sessionId);
      const answer = await api.reflect(ctx.sessionId);
      showError(error, null);
      if (answer.status === "queued") {
        reflectState.textContent = `Reflection queued (up to message ${answer.leafId || "none"}); waiting for its proposals…`;
        watchForProposals(before, answer.leafId || "none");
        return;
      }
      reflectState.textContent = OUTCOME_WORDS[answer.status] || `The reflection ended: ${answer.status}.`;
      ctx.refreshContext();
      await refresh();
    } catch (caught) {
      reflectState.hidden = true;
      showError(error, caught, "Could not reflect");
    }
    reflectButton.disabled = false;
  });
  reloadButton.addEventListener("click", () => busy(reloadButton, refresh));
  filter.addEventListener("change", () => {
    items = [];
    refresh();
  });
  more.addEventListener("click", () => busy(more, loadMore, error));
  refresh();

  return {
    refresh,
    destroy() {
      destroyed = true;
      clearTimeout(watchTimer);
    },
  };
}
